//! Sort specifications: several keys, dotted paths, arrays by their smallest element
//! (ascending) or largest (descending), BSON order, missing as null.

use crate::documents::{order, path};
use bson::{Bson, Document};
use std::cmp::Ordering;

#[derive(Debug)]
pub struct Sort {
    keys: Vec<(Vec<String>, bool)>,
}

impl Sort {
    pub fn parse(spec: &Document) -> Result<Sort, String> {
        let mut keys = Vec::with_capacity(spec.len());
        for (k, v) in spec {
            if k.is_empty() || k.starts_with('$') || k.split('.').any(str::is_empty) {
                return Err(format!("ERR invalid sort field: {k}"));
            }
            let asc =
                match order::as_f64(v) {
                    Some(1.0) => true,
                    Some(-1.0) => false,
                    _ => return Err(
                        "ERR $sort key ordering must be 1 (for ascending) or -1 (for descending)"
                            .into(),
                    ),
                };
            keys.push((path::split(k), asc));
        }
        Ok(Sort { keys })
    }

    /// The sort fields and their directions (`true`: ascending), for the planner.
    pub fn keys(&self) -> &[(Vec<String>, bool)] {
        &self.keys
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The sort key of a document: one value per sort field.
    pub fn key(&self, doc: &Document) -> Vec<Bson> {
        self.keys
            .iter()
            .map(|(p, asc)| {
                let (vals, missing) = path::values(doc, p);
                let mut best: Option<&Bson> = None;
                for v in vals {
                    best = match best {
                        None => Some(v),
                        Some(b) => {
                            let o = order::compare(v, b);
                            if (*asc && o == Ordering::Less) || (!*asc && o == Ordering::Greater) {
                                Some(v)
                            } else {
                                Some(b)
                            }
                        }
                    };
                }
                match best {
                    Some(b) => {
                        // A missing field among array elements sorts as null.
                        if missing
                            && ((*asc && order::rank(b) > 5) || (!*asc && order::rank(b) < 5))
                        {
                            Bson::Null
                        } else {
                            b.clone()
                        }
                    }
                    None => {
                        // An empty array sorts before null (MongoDB); a missing field as null.
                        match path::get(doc, p) {
                            Some(Bson::Array(a)) if a.is_empty() => Bson::Undefined,
                            _ => Bson::Null,
                        }
                    }
                }
            })
            .collect()
    }

    pub fn compare(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        // An empty array's key (`Undefined`) sorts after MinKey and before null.
        let band = |v: &Bson| match v {
            Bson::MinKey => 0,
            Bson::Undefined => 1,
            _ => 2,
        };
        for ((x, y), (_, asc)) in a.iter().zip(b).zip(&self.keys) {
            let o = band(x).cmp(&band(y)).then_with(|| order::compare(x, y));
            if o != Ordering::Equal {
                return if *asc { o } else { o.reverse() };
            }
        }
        Ordering::Equal
    }
}
