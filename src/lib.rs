//! tidecache: a cache server that speaks the Redis protocol and adds MongoDB-style document
//! collections with TTL indexes. See ARCHITECTURE.md for the map of this crate.

pub mod commands;
pub mod config;
pub mod documents;
pub mod protocol;
pub mod server;
pub mod state;
pub mod store;
pub mod util;
pub mod wheel;
