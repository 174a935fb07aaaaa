//! Warming the key space ahead of a pipeline. Before a connection runs the complete
//! requests at the start of its read buffer, the first keys of the next [`WARM_MAX`] of them
//! (as the table places them) are looked up back to back (`Store::warm`), so the cache
//! misses of a pipeline's lookups overlap instead of each command waiting for its own in
//! turn. Only for two keys or more: a lone key's own lookup comes as early as a warm-up's.
//! A connection whose warm-ups keep finding one key (a queue's LPUSHes, a counter's INCRs)
//! stops walking its buffer for a while: the walk is then all cost.

use super::find_command;
use crate::store::WARM_MAX;

/// After a warm-up that found fewer than two keys in a pipeline, the batches skipped before
/// the next walk.
const IDLE_BATCHES: u8 = 8;

/// A connection's warm-up state: 2 bytes in its task.
#[derive(Default)]
pub struct KeyWarmer {
    /// Requests left before the next warm-up (those the last one walked).
    unwarmed: u8,
    /// Warm-ups still to skip.
    idle: u8,
}

impl KeyWarmer {
    /// Called before each request is taken from `buf`: warms the next batch when the last
    /// one has run.
    #[inline]
    pub fn before_request(&mut self, server: &crate::state::Server, db: usize, buf: &[u8]) {
        if self.unwarmed == 0 {
            if self.idle > 0 {
                self.idle -= 1;
                self.unwarmed = WARM_MAX as u8;
            } else {
                let (requests, keys) = warm_keys(server, db, buf);
                self.unwarmed = requests;
                if requests >= 2 && keys < 2 {
                    self.idle = IDLE_BATCHES;
                }
            }
        }
        self.unwarmed = self.unwarmed.saturating_sub(1);
    }
}

/// Warms the first keys of the complete requests at the start of `buf` (at most
/// [`WARM_MAX`]). Returns how many requests it walked and how many distinct consecutive
/// keys it found.
fn warm_keys(server: &crate::state::Server, db: usize, buf: &[u8]) -> (u8, u8) {
    let mut keys: smallvec::SmallVec<[&[u8]; WARM_MAX]> = smallvec::SmallVec::new();
    let mut requests = 0u8;
    crate::protocol::request::peek_requests(buf, WARM_MAX, |argc, lead| {
        requests += 1;
        // A pipeline mostly repeats one command: `find_command`'s memo answers.
        let Some(spec) = lead.first().and_then(|name| find_command(name)) else {
            return;
        };
        // A run of requests on one key needs it looked up once.
        if let Some(key) = spec.first_key_of(argc, lead) {
            if keys.last() != Some(&key) {
                keys.push(key);
            }
        }
    });
    if keys.len() >= 2 {
        server.store.warm(db, &keys);
    }
    (requests, keys.len() as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first key a warm-up reads from a request's leading arguments: the table's first
    /// key position, or the first of EVAL's counted keys when the count names one.
    #[test]
    fn first_key_of_requests() {
        let first = |args: &[&str]| {
            let lead: Vec<&[u8]> = args.iter().take(4).map(|a| a.as_bytes()).collect();
            find_command(lead[0])
                .and_then(|spec| spec.first_key_of(args.len(), &lead))
                .map(|k| String::from_utf8_lossy(k).into_owned())
        };
        assert_eq!(first(&["get", "k"]).as_deref(), Some("k"));
        assert_eq!(first(&["hset", "h", "f", "v"]).as_deref(), Some("h"));
        assert_eq!(
            first(&["evalsha", "x", "1", "k", "a"]).as_deref(),
            Some("k")
        );
        assert_eq!(
            first(&["eval", "x", "2", "k1", "k2"]).as_deref(),
            Some("k1")
        );
        assert_eq!(first(&["fcall", "f", "1", "k"]).as_deref(), Some("k"));
        for no_key in [
            &["evalsha", "x", "0"][..],
            &["evalsha", "x", "1"],
            &["evalsha", "x", "one", "k"],
            &["evalsha", "x", "-1", "k"],
            &["ping"],
            &["info", "keyspace"],
        ] {
            assert_eq!(first(no_key), None, "{no_key:?}");
        }
    }
}
