//! Small helpers shared by several layers.

pub mod glob;
pub mod mem;
pub mod num;
