//! `$group`: the group specification, the accumulators, and the partial state a shard hands to
//! the merge step. A shard folds its documents into a [`GroupState`]; the merge step folds the
//! shards' states together ([`GroupState::merge`]) and only then finishes them into documents,
//! so `$avg` travels as sum and count and `$addToSet` as a set.

use super::expr::{Expr, Num};
use super::AggError;
use crate::documents::keys;
use crate::documents::order;
use bson::{Bson, DateTime, Document};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// A BSON value ordered by MongoDB's comparison order, so group keys `1` and `1.0` are one
/// group and `$addToSet` treats them as one element.
#[derive(Debug, Clone)]
pub struct OrdBson(pub Bson);

impl PartialEq for OrdBson {
    fn eq(&self, other: &Self) -> bool {
        order::compare(&self.0, &other.0) == Ordering::Equal
    }
}
impl Eq for OrdBson {}
impl PartialOrd for OrdBson {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdBson {
    fn cmp(&self, other: &Self) -> Ordering {
        order::compare(&self.0, &other.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccKind {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
}

impl AccKind {
    fn from_name(name: &str) -> Option<AccKind> {
        Some(match name {
            "$sum" => AccKind::Sum,
            "$avg" => AccKind::Avg,
            "$min" => AccKind::Min,
            "$max" => AccKind::Max,
            "$first" => AccKind::First,
            "$last" => AccKind::Last,
            "$push" => AccKind::Push,
            "$addToSet" => AccKind::AddToSet,
            _ => return None,
        })
    }
}

/// A parsed `$group` stage.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub id: Expr,
    pub fields: Vec<(String, AccKind, Expr)>,
}

impl GroupSpec {
    pub fn parse(spec: &Bson) -> Result<GroupSpec, AggError> {
        let Bson::Document(d) = spec else {
            return Err(AggError::new(
                "a group's fields must be specified in an object",
            ));
        };
        let mut id = None;
        let mut fields = Vec::new();
        for (name, v) in d {
            if name == "_id" {
                id = Some(Expr::parse(v)?);
                continue;
            }
            if name.contains('.') {
                return Err(AggError::new(format!(
                    "the group aggregate field name '{name}' cannot be used because $group's field names cannot contain '.'"
                )));
            }
            if name.starts_with('$') {
                return Err(AggError::new(format!(
                    "the group aggregate field name '{name}' cannot be an operator name"
                )));
            }
            let acc = match v {
                Bson::Document(a) if a.len() == 1 => a,
                _ => {
                    return Err(AggError::new(format!(
                        "The field '{name}' must be an accumulator object"
                    )))
                }
            };
            let Some((op, arg)) = acc.iter().next() else {
                return Err(AggError::new(format!(
                    "The field '{name}' must be an accumulator object"
                )));
            };
            let Some(kind) = AccKind::from_name(op) else {
                return Err(AggError::new(format!("unknown group operator '{op}'")));
            };
            if matches!(arg, Bson::Array(_)) {
                // MongoDB: accumulators are unary; an array argument is refused.
                return Err(AggError::new(format!(
                    "The {op} accumulator is a unary operator"
                )));
            }
            fields.push((name.clone(), kind, Expr::parse(arg)?));
        }
        let Some(id) = id else {
            return Err(AggError::new("a group specification must include an _id"));
        };
        Ok(GroupSpec { id, fields })
    }
}

/// One accumulator's running state.
#[derive(Debug, Clone)]
pub enum Acc {
    Sum(Num),
    Avg(Num, u64),
    Min(Option<Bson>),
    Max(Option<Bson>),
    /// `None` until the first document; then its value (null for missing).
    First(Option<Bson>),
    Last(Option<Bson>),
    Push(Vec<Bson>),
    AddToSet(BTreeSet<OrdBson>),
}

impl Acc {
    fn new(kind: AccKind) -> Acc {
        match kind {
            AccKind::Sum => Acc::Sum(Num::Int(0)),
            AccKind::Avg => Acc::Avg(Num::Int(0), 0),
            AccKind::Min => Acc::Min(None),
            AccKind::Max => Acc::Max(None),
            AccKind::First => Acc::First(None),
            AccKind::Last => Acc::Last(None),
            AccKind::Push => Acc::Push(Vec::new()),
            AccKind::AddToSet => Acc::AddToSet(BTreeSet::new()),
        }
    }

    fn add(&mut self, v: Option<Bson>) {
        let nullish = matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined));
        match self {
            Acc::Sum(total) => {
                if let Some(n) = v.as_ref().and_then(Num::of) {
                    *total = total.plus(n);
                }
            }
            Acc::Avg(total, count) => {
                if let Some(n) = v.as_ref().and_then(Num::of) {
                    *total = total.plus(n);
                    *count += 1;
                }
            }
            Acc::Min(_) | Acc::Max(_) if nullish => {}
            Acc::Min(cur) => {
                if let Some(v) = v {
                    if cur
                        .as_ref()
                        .is_none_or(|c| order::compare(&v, c) == Ordering::Less)
                    {
                        *cur = Some(v);
                    }
                }
            }
            Acc::Max(cur) => {
                if let Some(v) = v {
                    if cur
                        .as_ref()
                        .is_none_or(|c| order::compare(&v, c) == Ordering::Greater)
                    {
                        *cur = Some(v);
                    }
                }
            }
            Acc::First(cur) => {
                if cur.is_none() {
                    *cur = Some(v.unwrap_or(Bson::Null));
                }
            }
            Acc::Last(cur) => *cur = Some(v.unwrap_or(Bson::Null)),
            Acc::Push(items) => {
                if let Some(v) = v {
                    items.push(v);
                }
            }
            Acc::AddToSet(set) => {
                if let Some(v) = v {
                    set.insert(OrdBson(v));
                }
            }
        }
    }

    /// Folds a later partial state (another shard's) into this one.
    fn merge(&mut self, other: Acc) {
        match (self, other) {
            (Acc::Sum(a), Acc::Sum(b)) => *a = a.plus(b),
            (Acc::Avg(a, n), Acc::Avg(b, m)) => {
                *a = a.plus(b);
                *n += m;
            }
            (Acc::Min(a), Acc::Min(Some(b)))
                if a.as_ref()
                    .is_none_or(|x| order::compare(&b, x) == Ordering::Less) =>
            {
                *a = Some(b)
            }
            (Acc::Max(a), Acc::Max(Some(b)))
                if a.as_ref()
                    .is_none_or(|x| order::compare(&b, x) == Ordering::Greater) =>
            {
                *a = Some(b)
            }
            (Acc::First(a @ None), Acc::First(b)) => *a = b,
            (Acc::Last(a), Acc::Last(b @ Some(_))) => *a = b,
            (Acc::Push(a), Acc::Push(b)) => a.extend(b),
            (Acc::AddToSet(a), Acc::AddToSet(b)) => a.extend(b),
            _ => {}
        }
    }

    fn finish(self) -> Bson {
        match self {
            Acc::Sum(n) => n.into_bson(),
            Acc::Avg(_, 0) => Bson::Null,
            Acc::Avg(total, n) => Bson::Double(total.as_f64() / n as f64),
            Acc::Min(v) | Acc::Max(v) => v.unwrap_or(Bson::Null),
            Acc::First(v) | Acc::Last(v) => v.unwrap_or(Bson::Null),
            Acc::Push(items) => Bson::Array(items),
            Acc::AddToSet(set) => Bson::Array(set.into_iter().map(|o| o.0).collect()),
        }
    }
}

/// The groups seen so far, by the KeyString of their key: equal keys (`1`, `1.0`) have
/// equal KeyStrings, and KeyString order is BSON order, so finishing sorts by bytes.
#[derive(Debug, Clone, Default)]
pub struct GroupState {
    groups: hashbrown::HashMap<Vec<u8>, (Bson, Vec<Acc>)>,
}

impl GroupState {
    pub fn new() -> GroupState {
        GroupState::default()
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Folds one document in.
    pub fn add(&mut self, spec: &GroupSpec, doc: &Document, now: DateTime) -> Result<(), AggError> {
        let key = spec.id.eval(doc, now)?.unwrap_or(Bson::Null);
        let (_, accs) = self.groups.entry(keys::encode(&key)).or_insert_with(|| {
            (
                key,
                spec.fields
                    .iter()
                    .map(|(_, kind, _)| Acc::new(*kind))
                    .collect(),
            )
        });
        for (acc, (_, _, expr)) in accs.iter_mut().zip(&spec.fields) {
            acc.add(expr.eval(doc, now)?);
        }
        Ok(())
    }

    /// Folds another shard's partial groups in.
    pub fn merge(&mut self, other: GroupState) {
        for (k, (key, accs)) in other.groups {
            match self.groups.get_mut(&k) {
                Some((_, mine)) => {
                    for (a, b) in mine.iter_mut().zip(accs) {
                        a.merge(b);
                    }
                }
                None => {
                    self.groups.insert(k, (key, accs));
                }
            }
        }
    }

    /// The output documents, in key order: `_id` then the accumulators in the order of the
    /// spec.
    pub fn finish(self, spec: &GroupSpec) -> Vec<Document> {
        let mut all: Vec<_> = self.groups.into_iter().collect();
        all.sort_unstable_by(|a: &(Vec<u8>, _), b| a.0.cmp(&b.0));
        all.into_iter()
            .map(|(_, (key, accs))| {
                let mut d = Document::new();
                d.insert("_id", key);
                for (acc, (name, _, _)) in accs.into_iter().zip(&spec.fields) {
                    d.insert(name.clone(), acc.finish());
                }
                d
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn run(spec: Bson, docs: &[Document]) -> Vec<Document> {
        let g = GroupSpec::parse(&spec).expect("spec");
        let mut st = GroupState::new();
        for d in docs {
            st.add(&g, d, DateTime::from_millis(0)).expect("add");
        }
        st.finish(&g)
    }

    #[test]
    fn accumulators() {
        let docs = vec![
            doc! {"k": "a", "v": 1, "s": "x"},
            doc! {"k": "a", "v": 2.5, "s": "y"},
            doc! {"k": "b", "v": null},
            doc! {"k": "a", "s": "x"},
            doc! {"v": 4},
        ];
        let out = run(
            bson!({"_id": "$k", "n": {"$sum": 1}, "sum": {"$sum": "$v"}, "avg": {"$avg": "$v"},
                   "min": {"$min": "$v"}, "max": {"$max": "$v"}, "first": {"$first": "$v"},
                   "last": {"$last": "$v"}, "push": {"$push": "$s"}, "set": {"$addToSet": "$s"}}),
            &docs,
        );
        assert_eq!(out.len(), 3);
        // Key order: null < strings.
        assert_eq!(
            out[0],
            doc! {"_id": null, "n": 1, "sum": 4, "avg": 4.0, "min": 4, "max": 4,
            "first": 4, "last": 4, "push": [], "set": []}
        );
        assert_eq!(
            out[1],
            doc! {"_id": "a", "n": 3, "sum": 3.5, "avg": 1.75, "min": 1, "max": 2.5,
            "first": 1, "last": null, "push": ["x", "y", "x"], "set": ["x", "y"]}
        );
        assert_eq!(
            out[2],
            doc! {"_id": "b", "n": 1, "sum": 0, "avg": null, "min": null,
            "max": null, "first": null, "last": null, "push": [], "set": []}
        );
    }

    #[test]
    fn numerically_equal_keys_are_one_group() {
        let docs = vec![doc! {"k": 1}, doc! {"k": 1.0}, doc! {"k": 1i64}];
        let out = run(bson!({"_id": "$k", "n": {"$sum": 1}}), &docs);
        assert_eq!(out, vec![doc! {"_id": 1, "n": 3}]);
    }

    #[test]
    fn sums_widen_on_overflow() {
        let docs = vec![doc! {"v": i32::MAX}, doc! {"v": 1}];
        let out = run(bson!({"_id": null, "s": {"$sum": "$v"}}), &docs);
        assert_eq!(out[0].get("s"), Some(&Bson::Int64(i32::MAX as i64 + 1)));
        let docs = vec![doc! {"v": i64::MAX}, doc! {"v": 1i64}];
        let out = run(bson!({"_id": null, "s": {"$sum": "$v"}}), &docs);
        assert!(matches!(out[0].get("s"), Some(Bson::Double(_))));
    }

    #[test]
    fn partial_states_merge_like_one_pass() {
        let spec = GroupSpec::parse(&bson!({"_id": {"$mod": ["$i", 3]}, "avg": {"$avg": "$i"},
            "n": {"$sum": 1}, "min": {"$min": "$i"}, "max": {"$max": "$i"},
            "set": {"$addToSet": {"$mod": ["$i", 2]}}}))
        .expect("spec");
        let now = DateTime::from_millis(0);
        let mut whole = GroupState::new();
        let mut parts = vec![GroupState::new(), GroupState::new(), GroupState::new()];
        for i in 0..100 {
            let d = doc! {"i": i};
            whole.add(&spec, &d, now).expect("add");
            parts[(i * 7 % 3) as usize]
                .add(&spec, &d, now)
                .expect("add");
        }
        let mut merged = GroupState::new();
        for p in parts {
            merged.merge(p);
        }
        assert_eq!(merged.finish(&spec), whole.finish(&spec));
    }

    #[test]
    fn spec_errors() {
        let e = GroupSpec::parse(&bson!({"n": {"$sum": 1}})).unwrap_err();
        assert_eq!(e.0, "a group specification must include an _id");
        let e = GroupSpec::parse(&bson!({"_id": null, "n": {"$median": 1}})).unwrap_err();
        assert_eq!(e.0, "unknown group operator '$median'");
        let e = GroupSpec::parse(&bson!({"_id": null, "n": 1})).unwrap_err();
        assert_eq!(e.0, "The field 'n' must be an accumulator object");
        assert!(GroupSpec::parse(&bson!({"_id": null, "a.b": {"$sum": 1}})).is_err());
    }
}
