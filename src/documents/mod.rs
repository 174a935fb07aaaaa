//! Document collections: BSON documents in collections partitioned across the shards by hash
//! of `_id`, MongoDB's query language, updates, projections, sorts, indexes and aggregation.

pub mod aggregate;
pub mod capped;
pub mod changes;
pub mod codec;
pub mod collection;
pub mod hashed;
pub mod index;
pub mod inplace;
pub mod json;
pub mod keyfilter;
pub mod keys;
pub mod memory;
pub mod order;
pub mod path;
pub mod planner;
pub mod projection;
pub mod query;
pub mod rawbson;
pub mod sort;
pub mod stats;
pub mod stored;
pub mod ttl;
pub mod unique;
pub mod update;

#[cfg(test)]
mod corpus;
