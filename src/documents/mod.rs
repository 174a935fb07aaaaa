//! Document collections: BSON documents in collections partitioned across the shards by hash
//! of `_id`, MongoDB's query language, updates, projections, sorts, indexes and aggregation.

pub mod order;
pub mod ttl;
