//! The list family. Table rows first, handlers below.
use crate::commands::spec::{acl, family, CommandSpec};

#[allow(dead_code)]
const FAMILY: CommandSpec = family("list", acl::LIST);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[];
