//! The bitmap family. Table rows first, handlers below.
use crate::commands::spec::{acl, family, CommandSpec};

#[allow(dead_code)]
const FAMILY: CommandSpec = family("bitmap", acl::BITMAP);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[];
