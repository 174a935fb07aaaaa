//! The hyperloglog family. Table rows first, handlers below.
use crate::commands::spec::{acl, family, CommandSpec};

#[allow(dead_code)]
const FAMILY: CommandSpec = family("hyperloglog", acl::HYPERLOGLOG);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[];
