//! The query planner: picks how one shard finds the documents of a filter.
//!
//! - `_id` equality → IDHACK: one lookup in the `_id` map (and the command reads one shard).
//! - Otherwise the index whose key prefix is covered by the most equality (`$eq`, `$in`)
//!   fields, then one range field, wins (ties: the one that can also provide the requested
//!   sort, then the shorter key, then the older index) → IXSCAN with bounds per field.
//! - Otherwise COLLSCAN.
//!
//! Bounds come from the conjunction at the top of the filter (`$and` flattened); each
//! `$eq/$in/$gt/$gte/$lt/$lte` gives intervals within its type's bracket (`{$gt: 5}` only
//! spans numbers), and bounds on one field are intersected — except on a multikey index,
//! where an array can satisfy two predicates with two different elements, so only the first
//! predicate bounds the field. Anything else leaves the field unbounded. Bounds may be loose
//! but never miss: the matcher runs again on every fetched document.
//!
//! The plan is made per shard, under the shard's lock, from that shard's indexes: every
//! shard holds the same index catalog, so every shard picks the same plan. The commonest
//! filter on a secondary field, `{f: v}` alone and unsorted, is planned once per command
//! instead ([`EqProbe`]): it must visit every shard (documents are placed by `_id`), and
//! each visit then only looks up the index and probes it with the key made once.

use crate::documents::index::{self, IndexSpec, Interval, OrderedIndex};
use crate::documents::keys;
use crate::documents::order;
use crate::documents::query::{CmpOp, Node, Pred};
use bson::Bson;
use std::cell::OnceCell;
use std::sync::Arc;

#[derive(Debug)]
pub enum Plan<'a> {
    IdHack(&'a Bson),
    IxScan {
        /// Position of the index among the candidates given to [`plan`].
        index: usize,
        bounds: Vec<Vec<Interval>>,
    },
    CollScan,
}

impl Plan<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Plan::IdHack(_) => "IDHACK",
            Plan::IxScan { .. } => "IXSCAN",
            Plan::CollScan => "COLLSCAN",
        }
    }
}

/// `{f: v}` alone (`f` not `_id`, `v` not an array), planned once for a command that
/// visits every shard: [`plan`] would choose, in each shard, the first single-field index
/// on `f` with the point bounds of `v`; `CollectionShard::scan_eq` looks up that index and
/// probes it with `key`.
#[derive(Debug)]
pub struct EqProbe<'a> {
    pub filter: &'a Node,
    pub path: &'a [String],
    /// The KeyString of `v` (an ascending field's key).
    pub key: Vec<u8>,
    /// `f` when it is top-level and `v` of a type whose KeyString equality is query
    /// equality (integer, string, ObjectId): an index hit on a stored value of such a type
    /// is then a match without running the matcher.
    pub exact: Option<&'a str>,
    /// The index the first shard answered with. Each shard holds its own part of an index
    /// under the same shared spec, so the next shards find theirs by pointer instead of
    /// comparing paths: those comparisons, two or three per shard, were about 3% of a
    /// `DOC.COUNT` on an index. (Held, not just its address, so a spec dropped meanwhile
    /// cannot be mistaken for another.)
    pub index: OnceCell<Arc<IndexSpec>>,
}

/// The [`EqProbe`] of `filter`, if it is such a filter.
pub fn eq_probe(filter: &Node) -> Option<EqProbe<'_>> {
    let Node::Field {
        path,
        pred: Pred::Eq(v),
    } = filter
    else {
        return None;
    };
    if matches!(v, Bson::Array(_)) || filter.id_equality().is_some() {
        return None;
    }
    let exact = match (path.as_slice(), v) {
        ([f], Bson::Int32(_) | Bson::Int64(_) | Bson::String(_) | Bson::ObjectId(_)) => {
            Some(f.as_str())
        }
        _ => None,
    };
    Some(EqProbe {
        filter,
        path,
        key: keys::encode(v),
        exact,
        index: OnceCell::new(),
    })
}

/// The field predicates of the filter's top-level conjunction.
fn conjuncts<'a>(n: &'a Node, out: &mut Vec<(&'a [String], &'a Pred)>) {
    match n {
        Node::And(ns) => ns.iter().for_each(|n| conjuncts(n, out)),
        Node::Or(ns) if ns.len() == 1 => conjuncts(&ns[0], out),
        Node::Field { path, pred } => match pred {
            Pred::And(ps) => ps.iter().for_each(|p| out.push((path, p))),
            p => out.push((path, p)),
        },
        _ => {}
    }
}

/// The type bracket of a value: every KeyString of its canonical type lies in
/// `[rank + 1, rank + 2)`.
fn bracket(v: &Bson) -> (Vec<u8>, Vec<u8>) {
    let r = order::rank(v);
    (vec![r + 1], vec![r + 2])
}

/// The intervals one predicate allows, or `None` when it cannot bound the field.
pub fn intervals(p: &Pred) -> Option<Vec<Interval>> {
    match p {
        Pred::Eq(v) if !matches!(v, Bson::Array(_)) => Some(vec![Interval::point(v)]),
        Pred::In(vals, res)
            if res.is_empty() && !vals.iter().any(|v| matches!(v, Bson::Array(_))) =>
        {
            Some(index::normalize(vals.iter().map(Interval::point).collect()))
        }
        Pred::Cmp(op, v) if !matches!(v, Bson::Array(_)) => {
            let (lo, hi) = bracket(v);
            let k = keys::encode(v);
            Some(index::normalize(vec![match op {
                CmpOp::Gt => Interval {
                    lo: k,
                    lo_incl: false,
                    hi,
                    hi_incl: false,
                },
                CmpOp::Gte => Interval {
                    lo: k,
                    lo_incl: true,
                    hi,
                    hi_incl: false,
                },
                CmpOp::Lt => Interval {
                    lo,
                    lo_incl: true,
                    hi: k,
                    hi_incl: false,
                },
                CmpOp::Lte => Interval {
                    lo,
                    lo_incl: true,
                    hi: k,
                    hi_incl: true,
                },
            }]))
        }
        _ => None,
    }
}

/// The bounds of each field of `ix` under the filter's conjuncts (`None`: unbounded).
fn field_bounds(ix: &OrderedIndex, preds: &[(&[String], &Pred)]) -> Vec<Option<Vec<Interval>>> {
    ix.spec
        .fields
        .iter()
        .map(|f| {
            let mut acc: Option<Vec<Interval>> = None;
            for (path, p) in preds {
                if *path != f.path.as_slice() {
                    continue;
                }
                let Some(iv) = intervals(p) else { continue };
                acc = Some(match acc {
                    None => iv,
                    Some(prev) if ix.is_multikey() => prev,
                    Some(prev) => index::intersect_lists(&prev, &iv),
                });
            }
            acc
        })
        .collect()
}

/// How well an index serves the filter: (equality fields, has a range field after them,
/// provides the sort, minus the key's length); larger is better.
type Score = (usize, bool, bool, isize);

fn score(
    bounds: &[Option<Vec<Interval>>],
    provides_sort: bool,
    nfields: usize,
) -> Option<(usize, bool, bool, isize)> {
    bounds.first()?.as_ref()?;
    let eq = bounds
        .iter()
        .take_while(|b| {
            b.as_ref()
                .is_some_and(|l| !l.is_empty() && l.iter().all(Interval::is_point))
        })
        .count();
    let range = bounds.get(eq).is_some_and(Option::is_some);
    Some((eq, range, provides_sort, -(nfields as isize)))
}

/// Whether scanning `ix` in order yields documents in `sort` order: the sort fields follow
/// the index's single-valued equality prefix in the same directions (or all reversed: the
/// merge step sorts anyway, so only the forward case is claimed).
fn provides_sort(
    ix: &OrderedIndex,
    bounds: &[Option<Vec<Interval>>],
    sort: &[(Vec<String>, bool)],
) -> bool {
    if sort.is_empty() || ix.is_multikey() {
        return false;
    }
    let eq = bounds
        .iter()
        .take_while(|b| b.as_ref().is_some_and(|l| l.len() == 1 && l[0].is_point()))
        .count();
    let fields = &ix.spec.fields;
    sort.len() <= fields.len().saturating_sub(eq)
        && sort
            .iter()
            .zip(&fields[eq..])
            .all(|((p, asc), f)| *p == f.path && *asc != f.descending)
}

/// Chooses the plan for one shard. `indexes` are the shard's ready ordered indexes; `sort`
/// the requested sort (paths and ascending flags), empty for none.
pub fn plan<'a>(
    filter: &'a Node,
    indexes: &[&OrderedIndex],
    sort: &[(Vec<String>, bool)],
) -> (Plan<'a>, bool) {
    if let Some(id) = filter.id_equality() {
        return (Plan::IdHack(id), false);
    }
    // `{field: value}` alone, unsorted: the best-scoring index is the first single-field
    // index on that field (one equality, shortest key), which is what the loop below would
    // pick, without building bounds for every index.
    if let (
        Node::Field {
            path,
            pred: Pred::Eq(v),
        },
        true,
    ) = (filter, sort.is_empty())
    {
        if !matches!(v, Bson::Array(_)) {
            if let Some(index) = indexes
                .iter()
                .position(|ix| ix.spec.fields.len() == 1 && ix.spec.fields[0].path == *path)
            {
                let bounds = vec![vec![Interval::point(v)]];
                return (Plan::IxScan { index, bounds }, false);
            }
        }
    }
    let mut preds = Vec::new();
    conjuncts(filter, &mut preds);
    type Candidate = (Score, usize, Vec<Option<Vec<Interval>>>, bool);
    let mut best: Option<Candidate> = None;
    for (i, ix) in indexes.iter().enumerate() {
        let b = field_bounds(ix, &preds);
        let sorted = provides_sort(ix, &b, sort);
        let Some(s) = score(&b, sorted, ix.spec.fields.len()) else {
            continue;
        };
        if best.as_ref().is_none_or(|(bs, ..)| s > *bs) {
            best = Some((s, i, b, sorted));
        }
    }
    match best {
        Some((_, index, b, sorted)) => (
            Plan::IxScan {
                index,
                bounds: b
                    .into_iter()
                    .map(|o| o.unwrap_or_else(|| vec![Interval::all()]))
                    .collect(),
            },
            sorted,
        ),
        None => (Plan::CollScan, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::index::IndexSpec;
    use crate::documents::query;
    use bson::{doc, DateTime, Document};
    use std::sync::Arc;

    fn ix(keys: Document) -> OrderedIndex {
        let fields = IndexSpec::parse_keys(&keys).expect("keys");
        OrderedIndex::new(Arc::new(IndexSpec {
            name: IndexSpec::default_name(&fields),
            fields,
            unique: false,
            expire_after: None,
        }))
    }

    fn chosen(filter: Document, indexes: &[&OrderedIndex]) -> String {
        let f = query::parse(&filter).expect("filter");
        match plan(&f, indexes, &[]).0 {
            Plan::IxScan { index, .. } => indexes[index].spec.name.clone(),
            p => p.name().to_string(),
        }
    }

    #[test]
    fn picks_the_index_with_most_equalities() {
        let th = ix(doc! {"time": 1, "host": 1});
        let ht = ix(doc! {"host": 1, "time": 1});
        let path = ix(doc! {"path": 1});
        let all = [&th, &ht, &path];
        let day = doc! {"$gte": DateTime::from_millis(0), "$lt": DateTime::from_millis(86_400_000)};
        assert_eq!(
            chosen(doc! {"host": "h", "time": day.clone()}, &all),
            "host_1_time_1"
        );
        assert_eq!(chosen(doc! {"time": day.clone()}, &all), "time_1_host_1");
        assert_eq!(chosen(doc! {"path": "/a"}, &all), "path_1");
        assert_eq!(chosen(doc! {"status": 200}, &all), "COLLSCAN");
        assert_eq!(chosen(doc! {"_id": 5}, &all), "IDHACK");
        assert_eq!(
            chosen(doc! {"$or": [{"path": "/a"}, {"host": "h"}]}, &all),
            "COLLSCAN"
        );
        assert_eq!(chosen(doc! {"path": {"$ne": "/a"}}, &all), "COLLSCAN");
        assert_eq!(
            chosen(doc! {"$and": [{"path": {"$in": ["/a", "/b"]}}]}, &all),
            "path_1"
        );
    }

    #[test]
    fn bounds_follow_type_brackets() {
        let v = ix(doc! {"v": 1});
        let f = query::parse(&doc! {"v": {"$gt": 5, "$lte": 10}}).expect("filter");
        let (Plan::IxScan { bounds, .. }, _) = plan(&f, &[&v], &[]) else {
            panic!("expected an index scan")
        };
        assert_eq!(bounds.len(), 1);
        assert_eq!(
            bounds[0],
            vec![Interval {
                lo: keys::encode(&Bson::Int32(5)),
                lo_incl: false,
                hi: keys::encode(&Bson::Int32(10)),
                hi_incl: true
            }]
        );
        // A string bound stays among strings.
        let iv = intervals(&query::parse_field_pred(&bson::bson!({"$gte": "m"})).expect("pred"))
            .expect("bounded");
        assert!(iv[0].hi < keys::encode(&Bson::Document(doc! {})));
        assert!(iv[0].hi > keys::encode(&Bson::String("zzzz".into())));
        // Contradictory bounds are empty (not a full scan).
        let f = query::parse(&doc! {"v": {"$gt": 10, "$lt": 5}}).expect("filter");
        let (Plan::IxScan { bounds, .. }, _) = plan(&f, &[&v], &[]) else {
            panic!("expected an index scan")
        };
        assert!(bounds[0].is_empty());
    }

    #[test]
    fn sort_provision() {
        let ht = ix(doc! {"host": 1, "time": -1});
        let f = query::parse(&doc! {"host": "h"}).expect("filter");
        let t = vec!["time".to_string()];
        assert!(plan(&f, &[&ht], &[(t.clone(), false)]).1);
        assert!(!plan(&f, &[&ht], &[(t, true)]).1);
    }
}
