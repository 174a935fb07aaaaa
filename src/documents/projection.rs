//! Projections: inclusion (`{a: 1, "b.c": 1}`) or exclusion (`{a: 0}`), `_id` included unless
//! excluded, dotted paths through subdocuments and arrays of subdocuments.

use bson::{Bson, Document};

#[derive(Debug)]
pub struct Projection {
    include: bool,
    id: bool,
    /// The non-`_id` paths, split.
    paths: Vec<Vec<String>>,
}

fn truthy(v: &Bson) -> Option<bool> {
    match v {
        Bson::Boolean(b) => Some(*b),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            crate::documents::order::as_f64(v).map(|d| d != 0.0)
        }
        _ => None,
    }
}

impl Projection {
    pub fn parse(spec: &Document) -> Result<Projection, String> {
        let mut include: Option<bool> = None;
        let mut id = true;
        let mut paths = Vec::new();
        for (k, v) in spec {
            if k.starts_with('$') || k.split('.').any(|c| c.is_empty() || c.starts_with('$')) {
                return Err(format!("ERR unsupported projection field: {k}"));
            }
            let Some(on) = truthy(v) else {
                return Err(format!(
                    "ERR unsupported projection value for {k}: only 1/0 or true/false (no projection operators or expressions)"
                ));
            };
            if k == "_id" {
                id = on;
                continue;
            }
            match include {
                None => include = Some(on),
                Some(mode) if mode != on => {
                    return Err(if mode {
                        format!("ERR Cannot do exclusion on field {k} in inclusion projection")
                    } else {
                        format!("ERR Cannot do inclusion on field {k} in exclusion projection")
                    })
                }
                _ => {}
            }
            paths.push(crate::documents::path::split(k));
        }
        Ok(Projection {
            // Only `{_id: 0}` (or `{_id: 1}`) is an exclusion (inclusion) of `_id` alone.
            include: include.unwrap_or(id && !spec.is_empty() && paths.is_empty()),
            id,
            paths,
        })
    }

    pub fn apply(&self, doc: &Document) -> Document {
        let mut out = if self.include {
            let mut out = Document::new();
            for (k, v) in doc {
                if k == "_id" {
                    if self.id {
                        out.insert(k.clone(), v.clone());
                    }
                    continue;
                }
                let subs: Vec<&[String]> = self
                    .paths
                    .iter()
                    .filter(|p| p[0] == *k)
                    .map(|p| &p[1..])
                    .collect();
                if subs.is_empty() {
                    continue;
                }
                if subs.iter().any(|s| s.is_empty()) {
                    out.insert(k.clone(), v.clone());
                } else if let Some(v) = include_value(v, &subs) {
                    out.insert(k.clone(), v);
                }
            }
            out
        } else {
            let mut out = doc.clone();
            for p in &self.paths {
                exclude(&mut out, p);
            }
            if !self.id {
                out.remove("_id");
            }
            out
        };
        if self.include && !self.id {
            out.remove("_id");
        }
        out
    }
}

fn include_value(v: &Bson, subs: &[&[String]]) -> Option<Bson> {
    match v {
        Bson::Document(d) => {
            let mut out = Document::new();
            for (k, v) in d {
                let next: Vec<&[String]> = subs
                    .iter()
                    .filter(|p| p[0] == *k)
                    .map(|p| &p[1..])
                    .collect();
                if next.is_empty() {
                    continue;
                }
                if next.iter().any(|s| s.is_empty()) {
                    out.insert(k.clone(), v.clone());
                } else if let Some(v) = include_value(v, &next) {
                    out.insert(k.clone(), v);
                }
            }
            Some(Bson::Document(out))
        }
        // Through arrays: each subdocument element is projected, scalars dropped.
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| include_value(e, subs))
                .collect(),
        )),
        _ => None,
    }
}

fn exclude(doc: &mut Document, p: &[String]) {
    if p.len() == 1 {
        doc.remove(&p[0]);
        return;
    }
    match doc.get_mut(&p[0]) {
        Some(Bson::Document(d)) => exclude(d, &p[1..]),
        Some(Bson::Array(a)) => {
            for e in a.iter_mut() {
                if let Bson::Document(d) = e {
                    exclude(d, &p[1..]);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::codec::{doc_json, parse_json};

    fn run(spec: &str, doc: &str) -> Result<String, String> {
        let p = Projection::parse(&parse_json(spec.as_bytes()).expect("spec"))?;
        Ok(doc_json(
            &p.apply(&parse_json(doc.as_bytes()).expect("doc")),
        ))
    }

    #[test]
    fn inclusion_exclusion_and_id() {
        let d = r#"{"_id":1,"a":1,"b":{"c":2,"d":3},"e":[{"c":4,"d":5},6],"f":7}"#;
        let cases = [
            (r#"{"a":1}"#, r#"{"_id":1,"a":1}"#),
            (r#"{"a":1,"_id":0}"#, r#"{"a":1}"#),
            (r#"{"b.c":1}"#, r#"{"_id":1,"b":{"c":2}}"#),
            (r#"{"e.c":1}"#, r#"{"_id":1,"e":[{"c":4}]}"#),
            (
                r#"{"a":0,"b.d":0}"#,
                r#"{"_id":1,"b":{"c":2},"e":[{"c":4,"d":5},6],"f":7}"#,
            ),
            (
                r#"{"e.d":0,"_id":0,"a":false}"#,
                r#"{"b":{"c":2,"d":3},"e":[{"c":4},6],"f":7}"#,
            ),
            (
                r#"{"_id":0}"#,
                r#"{"a":1,"b":{"c":2,"d":3},"e":[{"c":4,"d":5},6],"f":7}"#,
            ),
            (r#"{"_id":1}"#, r#"{"_id":1}"#),
            (r#"{}"#, d),
            (r#"{"nope":1}"#, r#"{"_id":1}"#),
        ];
        for (spec, want) in cases {
            assert_eq!(run(spec, d).as_deref(), Ok(want), "{spec}");
        }
        assert!(run(r#"{"a":1,"b":0}"#, d).is_err());
        assert!(run(r#"{"a":{"$slice":1}}"#, d).is_err());
    }
}
