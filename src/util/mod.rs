//! Small helpers shared by several layers.

pub mod alloc;
pub mod clock;
pub mod glob;
pub mod inline;
pub mod listpack;
pub mod mem;
pub mod num;
pub mod oom;
pub mod packed;
pub mod proc;
pub mod proctitle;
pub mod rng;
pub mod sds;
pub mod sha256;
