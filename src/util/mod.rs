//! Small helpers shared by several layers.

pub mod glob;
pub mod num;
