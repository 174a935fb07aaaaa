//! The wire protocol: parsing requests out of a read buffer and encoding replies.
//!
//! This module knows nothing of commands or data; `Reply` is the protocol-level value a command
//! produces, encoded as RESP2 or RESP3 depending on what the client negotiated with `HELLO`.

pub mod cluster_bus;
mod reply;
pub mod request;

pub use reply::Reply;
pub use request::{next_request, parse_request, ParseError, ParseLimits, ParseState};
