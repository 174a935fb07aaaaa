//! Small helpers shared by several layers.

pub mod glob;
pub mod inline;
pub mod mem;
pub mod num;
pub mod packed;
pub mod rng;

/// Wall-clock milliseconds since the Unix epoch: the one clock behind key deadlines, TTL
/// indexes, `$$NOW` and `TIME`.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
