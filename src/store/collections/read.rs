//! Document reads: find, count, explain, and the per-shard scans aggregation runs on.
//!
//! A read locks one shard at a time (atomic per document, as MongoDB): each shard keeps at
//! most `skip + limit` matches (in sort order when sorted), then the shards' survivors are
//! merged, sorted stably and cut.

use super::Coll;
use crate::documents::collection::CollectionShard;
use crate::documents::index::ScanStats;
use crate::documents::planner::{self, EqProbe};
use crate::documents::query::Node;
use crate::documents::sort::Sort;
use crate::store::ShardData;
use bson::{Bson, Document, RawDocument, RawDocumentBuf};

/// What a find asks for.
pub struct FindQuery {
    pub filter: Node,
    pub sort: Option<Sort>,
    pub skip: usize,
    pub limit: Option<usize>,
    /// `SORT {"$natural": -1}`: newest first.
    pub reverse: bool,
    /// Keep each document's stored bytes (the reply is made of them).
    pub keep_raw: bool,
    /// The caller reads the decoded documents (a projection, a touch).
    pub needs_doc: bool,
}

/// One document a find returned: decoded (empty when only the raw bytes were needed), and
/// its stored bytes when kept.
#[derive(Debug)]
pub struct Found {
    pub doc: Document,
    pub raw: Option<RawDocumentBuf>,
}

/// What `DOC.EXPLAIN` reports.
pub struct Explained {
    pub plan: &'static str,
    pub index: Option<String>,
    pub stats: ScanStats,
    pub returned: usize,
    pub shards: usize,
}

/// Matches of capped collections are merged by insertion sequence (their key), newest
/// first when `reverse`.
fn natural_order(found: &mut [(Vec<Bson>, Found)], reverse: bool) {
    let seq = |k: &[Bson]| match k.first() {
        Some(Bson::Int64(s)) => *s,
        _ => 0,
    };
    if reverse {
        found.sort_by_key(|(k, _)| std::cmp::Reverse(seq(k)));
    } else {
        found.sort_by_key(|(k, _)| seq(k));
    }
}

impl Coll<'_> {
    /// This shard's part, with a dormant TTL index's ordered part built if the scan of
    /// `filter` (sorted by `sort`) would use it (`CollectionShard::prepare`).
    fn prepared<'g>(
        &self,
        g: &'g mut ShardData,
        filter: &Node,
        sort: Option<&[(Vec<String>, bool)]>,
    ) -> Option<&'g CollectionShard> {
        let cs = self.part_mut(g)?;
        cs.prepare(filter, sort.unwrap_or(&[]));
        Some(cs)
    }

    /// Runs a find.
    pub fn find(&self, q: &FindQuery) -> Vec<Found> {
        let keep = q.limit.map(|l| l.saturating_add(q.skip));
        let mut natural = false;
        // (sort key, document): sorted stably, the merge is deterministic.
        let mut found: Vec<(Vec<Bson>, Found)> = Vec::new();
        for s in self.shards_for(&q.filter) {
            let mut guard = self.store.lock(s);
            let Some(cs) = self.prepared(&mut guard, &q.filter, q.sort.as_ref().map(|s| s.keys()))
            else {
                continue;
            };
            let mut mine: Vec<(Vec<Bson>, Found)> = Vec::new();
            // An unsorted find of a capped collection returns insertion order: the key is
            // the document's sequence, and every shard's matches are merged by it (so no
            // shard may stop at its first `skip + limit` matches in storage order; nor for
            // `$natural: -1`).
            natural = q.sort.is_none() && cs.is_capped();
            let scan_keep = keep.filter(|_| !natural && !q.reverse);
            // With the sort, an index that provides it lets the shard stop at `skip + limit`.
            let sort_keys = q.sort.as_ref().map(|s| s.keys()).unwrap_or_default();
            let mut stats = ScanStats::default();
            cs.scan_planned(
                &q.filter,
                sort_keys,
                scan_keep,
                &mut stats,
                &mut |slot, raw| {
                    // Replied from the stored bytes as they are: nothing reads the decoded
                    // document (no sort, no capped order, no touch).
                    if q.keep_raw && !q.needs_doc && q.sort.is_none() && !natural && !q.reverse {
                        mine.push((
                            Vec::new(),
                            Found {
                                doc: Document::new(),
                                raw: Some(raw.to_owned()),
                            },
                        ));
                        return scan_keep.is_none_or(|k| mine.len() < k);
                    }
                    let Ok(doc) = Document::try_from(raw) else {
                        return true;
                    };
                    let key = match &q.sort {
                        Some(s) => s.key(&doc),
                        None if natural => vec![Bson::Int64(cs.order.seq_of(slot) as i64)],
                        None => Vec::new(),
                    };
                    // The stored bytes are only copied when they are the reply.
                    let raw = q.keep_raw.then(|| raw.to_owned());
                    mine.push((key, Found { doc, raw }));
                    match (&q.sort, keep) {
                        // Unsorted: the first `skip + limit` matches of the shard are enough.
                        (None, Some(k)) if !natural && !q.reverse => mine.len() < k,
                        (None, Some(k)) if natural && mine.len() >= 2 * k.max(16) => {
                            natural_order(&mut mine, q.reverse);
                            mine.truncate(k);
                            true
                        }
                        (Some(sort), Some(k)) if mine.len() >= 2 * k.max(16) => {
                            mine.sort_by(|a, b| sort.compare(&a.0, &b.0));
                            mine.truncate(k);
                            true
                        }
                        _ => true,
                    }
                },
            );
            drop(guard);
            if let Some(sort) = &q.sort {
                mine.sort_by(|a, b| sort.compare(&a.0, &b.0));
            } else if natural {
                natural_order(&mut mine, q.reverse);
            }
            if let Some(k) = keep.filter(|_| natural || !q.reverse) {
                mine.truncate(k);
            }
            found.extend(mine);
            if q.sort.is_none() && !natural && !q.reverse && keep.is_some_and(|k| found.len() >= k)
            {
                break;
            }
        }
        if let Some(sort) = &q.sort {
            found.sort_by(|a, b| sort.compare(&a.0, &b.0));
        } else if natural {
            natural_order(&mut found, q.reverse);
        } else if q.reverse {
            // Natural order of an uncapped collection is storage order (shard, then slot).
            found.reverse();
        }
        let it = found.into_iter().skip(q.skip).map(|(_, f)| f);
        match q.limit {
            Some(l) => it.take(l).collect(),
            None => it.collect(),
        }
    }

    /// A find by `_id` alone: `render` sees the matching document in place, under its
    /// shard's lock (nothing is copied). `None` when the filter is not `{_id: v}` alone.
    pub fn find_by_id<R>(
        &self,
        filter: &Node,
        render: impl FnOnce(&RawDocument) -> R,
    ) -> Option<Option<R>> {
        let id = filter.id_equality()?;
        // The KeyString is made once: it picks the shard and probes the `_id` map.
        let key = crate::documents::keys::encode(id);
        let guard = self.store.lock(self.store.shard_of(&key));
        let Some(cs) = self.part(&guard) else {
            return Some(None);
        };
        cs.lookup_id_key(filter, &key)
            .ok()
            .map(|doc| doc.map(|(_, raw)| render(raw)))
    }

    /// [`find_by_id`](Self::find_by_id) for `{_id: v}` given as the KeyString of `v`, a
    /// string or an integer (`query::id_key_json`): `filter` makes the filter's tree only if
    /// the stored `_id`'s type asks for the general comparison.
    pub fn find_by_id_key<R>(
        &self,
        key: &[u8],
        filter: impl FnOnce() -> Option<Node>,
        render: impl FnOnce(&RawDocument) -> R,
    ) -> Option<R> {
        let guard = self.store.lock(self.store.shard_of(key));
        let cs = self.part(&guard)?;
        cs.lookup_id_scalar(key, filter).map(|(_, raw)| render(raw))
    }

    /// The shards a filter can match in (as `shards_for`, without a vector).
    fn shard_range(&self, filter: &Node) -> std::ops::Range<usize> {
        match filter.id_equality() {
            Some(id) => {
                let s = self.store.shard_of(&crate::documents::keys::encode(id));
                s..s + 1
            }
            None => 0..self.store.shard_count(),
        }
    }

    /// Scans this collection's part in the locked shard `g`: with `probe` (the filter
    /// planned once for the command) when the part allows it, else prepared and planned
    /// here. `keep` bounds the matches the planned scan looks for. With `uncapped_only`, a
    /// capped collection's part is not scanned and the result is false (the part is looked
    /// up once per shard: finding a name in the shard's map was a tenth of an indexed find).
    #[allow(clippy::too_many_arguments)]
    fn scan_shard(
        &self,
        g: &mut ShardData,
        filter: &Node,
        probe: Option<&EqProbe<'_>>,
        now: &mut Option<i64>,
        keep: Option<usize>,
        uncapped_only: bool,
        visit: &mut dyn FnMut(u32, &RawDocument) -> bool,
    ) -> bool {
        let Some(cs) = self.part(g) else {
            return true;
        };
        if uncapped_only && cs.is_capped() {
            return false;
        }
        if probe.is_some_and(|p| cs.scan_eq(p, now, &mut *visit)) {
            return true;
        }
        if let Some(cs) = self.prepared(g, filter, None) {
            cs.scan_planned(filter, &[], keep, &mut ScanStats::default(), visit);
        }
        true
    }

    /// Counts the visible documents matching `filter`. Nothing is copied: each match is
    /// only counted, under its shard's lock.
    pub fn count(&self, filter: &Node) -> u64 {
        let probe = planner::eq_probe(filter);
        let (mut n, mut now) = (0, None);
        for s in self.shard_range(filter) {
            let mut guard = self.store.lock(s);
            self.scan_shard(
                &mut guard,
                filter,
                probe.as_ref(),
                &mut now,
                None,
                false,
                &mut |_, _| {
                    n += 1;
                    true
                },
            );
        }
        n
    }

    /// An unsorted find without skip, of an uncapped collection: each match is turned by
    /// `render` into its reply in place, under its shard's lock (no copy of the stored
    /// bytes), in storage order (shard, then what the plan visits first), as [`Coll::find`]
    /// would return them. `None`, having rendered nothing, for a capped collection (whose
    /// unsorted order is insertion order): the caller runs `find`.
    pub fn find_rendered<R>(
        &self,
        filter: &Node,
        limit: Option<usize>,
        mut render: impl FnMut(&RawDocument) -> R,
    ) -> Option<Vec<R>> {
        let probe = planner::eq_probe(filter);
        let (mut out, mut now) = (Vec::new(), None);
        for s in self.shard_range(filter) {
            let mut guard = self.store.lock(s);
            let keep = limit.map(|l| l.saturating_sub(out.len()));
            let probe = probe.as_ref();
            let mut visit = |_, raw: &RawDocument| {
                out.push(render(raw));
                limit.is_none_or(|l| out.len() < l)
            };
            // A capped collection (every part alike) is refused before anything is rendered.
            let scanned =
                self.scan_shard(&mut guard, filter, probe, &mut now, keep, true, &mut visit);
            drop(guard);
            if !scanned {
                return None;
            }
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
        }
        Some(out)
    }

    /// Plans and runs a find without replying its documents: which plan each shard chose,
    /// the index, what was examined and what would be returned.
    pub fn explain(
        &self,
        filter: &Node,
        sort: Option<&Sort>,
        skip: usize,
        limit: Option<usize>,
    ) -> Explained {
        let keep = limit.map(|l| l.saturating_add(skip));
        let sort_keys = sort.map(|s| s.keys().to_vec()).unwrap_or_default();
        let mut out = Explained {
            plan: if filter.id_equality().is_some() {
                "IDHACK"
            } else {
                "COLLSCAN"
            },
            index: None,
            stats: ScanStats::default(),
            returned: 0,
            shards: 0,
        };
        let mut found: Vec<Vec<Bson>> = Vec::new();
        for s in self.shards_for(filter) {
            let mut guard = self.store.lock(s);
            let Some(cs) = self.prepared(&mut guard, filter, Some(&sort_keys)) else {
                continue;
            };
            out.shards += 1;
            let mut mine: Vec<Vec<Bson>> = Vec::new();
            let mut st = ScanStats::default();
            // Unsorted (or sorted by the index), a shard needs at most skip + limit matches.
            let (p, ix, _) = cs.scan_planned(filter, &sort_keys, keep, &mut st, &mut |_, raw| {
                let key = match (sort, Document::try_from(raw)) {
                    (Some(s), Ok(doc)) => s.key(&doc),
                    _ => Vec::new(),
                };
                mine.push(key);
                true
            });
            drop(guard);
            out.plan = p;
            out.index = ix.or(out.index.take());
            out.stats.add(&st);
            if let Some(sort) = sort {
                mine.sort_by(|a, b| sort.compare(a, b));
            }
            if let Some(k) = keep {
                mine.truncate(k);
            }
            found.extend(mine);
            if sort.is_none() && keep.is_some_and(|k| found.len() >= k) {
                break;
            }
        }
        out.returned = found
            .len()
            .saturating_sub(skip)
            .min(limit.unwrap_or(usize::MAX));
        out
    }

    /// Each shard's matches of `filter`, turned by `take` into what the caller needs, copied
    /// out under that shard's lock (aggregation runs its pipeline on them without it).
    pub fn per_shard<T>(
        &self,
        filter: &Node,
        mut take: impl FnMut(&RawDocument) -> Option<T>,
    ) -> Vec<Vec<T>> {
        let mut out = Vec::new();
        for s in self.shards_for(filter) {
            let mut docs = Vec::new();
            let mut guard = self.store.lock(s);
            if let Some(cs) = self.prepared(&mut guard, filter, None) {
                cs.scan(filter, &mut |_, raw| {
                    docs.extend(take(raw));
                    true
                });
            }
            drop(guard);
            out.push(docs);
        }
        out
    }
}
