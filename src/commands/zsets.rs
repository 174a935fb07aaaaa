//! The sorted set family. Table rows first, handlers below.
use crate::commands::spec::{acl, family, CommandSpec};

#[allow(dead_code)]
const FAMILY: CommandSpec = family("sorted_set", acl::SORTEDSET);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[];
