//! `$project`, `$addFields`/`$set` and `$unset` as one tree of field specs.
//!
//! Inclusion projections copy the included fields in the input document's order and then
//! add computed fields in the spec's order (MongoDB's order); exclusion projections and
//! `$unset` copy the document and remove paths; `$addFields` copies the document and sets
//! fields, merging nested specs into existing subdocuments. Paths go through arrays element by
//! element, as in MongoDB.

use super::expr::{parse_path, Expr};
use super::AggError;
use bson::{Bson, DateTime, Document};

#[derive(Debug, Clone)]
pub enum Node {
    Include,
    Exclude,
    Compute(Expr),
    Nested(Vec<(String, Node)>),
}

impl Node {
    fn has(&self, pred: &dyn Fn(&Node) -> bool) -> bool {
        match self {
            Node::Nested(children) => children.iter().any(|(_, c)| c.has(pred)),
            other => pred(other),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Inclusion,
    Exclusion,
    AddFields,
}

#[derive(Debug, Clone)]
pub struct Projection {
    pub mode: Mode,
    pub fields: Vec<(String, Node)>,
}

/// Inserts `node` at the dotted `path` of the tree.
fn insert_path(
    tree: &mut Vec<(String, Node)>,
    path: &[String],
    node: Node,
) -> Result<(), AggError> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(());
    };
    let pos = tree.iter().position(|(k, _)| k == first);
    if rest.is_empty() {
        if pos.is_some() {
            return Err(AggError::new(format!(
                "Invalid $project :: caused by :: Path collision at {}",
                path.join(".")
            )));
        }
        tree.push((first.clone(), node));
        return Ok(());
    }
    let idx = match pos {
        Some(i) => i,
        None => {
            tree.push((first.clone(), Node::Nested(Vec::new())));
            tree.len() - 1
        }
    };
    match &mut tree[idx].1 {
        Node::Nested(children) => insert_path(children, rest, node),
        _ => Err(AggError::new(format!(
            "Invalid $project :: caused by :: Path collision at {}",
            path.join(".")
        ))),
    }
}

fn is_operator_object(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

impl Projection {
    /// `$project`'s spec.
    pub fn parse_project(spec: &Bson) -> Result<Projection, AggError> {
        let Bson::Document(d) = spec else {
            return Err(AggError::new("$project specification must be an object"));
        };
        if d.is_empty() {
            return Err(AggError::new(
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        let mut fields = Vec::new();
        Self::parse_level(d, &mut fields)?;
        let non_id =
            |pred: &dyn Fn(&Node) -> bool| fields.iter().any(|(k, n)| k != "_id" && n.has(pred));
        let includes = non_id(&|n| matches!(n, Node::Include | Node::Compute(_)));
        let excludes = non_id(&|n| matches!(n, Node::Exclude));
        let id_computed = fields
            .iter()
            .any(|(k, n)| k == "_id" && n.has(&|n| matches!(n, Node::Compute(_) | Node::Include)));
        let mode = match (includes, excludes) {
            (true, true) => {
                return Err(AggError::new(
                    "Invalid $project :: caused by :: Cannot do exclusion on field in inclusion projection",
                ))
            }
            (true, false) => Mode::Inclusion,
            (false, true) => Mode::Exclusion,
            // Only `_id` was named: `{_id: 0}` excludes it, `{_id: 1}` keeps only it.
            (false, false) if id_computed => Mode::Inclusion,
            (false, false) => Mode::Exclusion,
        };
        if mode == Mode::Exclusion && non_id(&|n| matches!(n, Node::Compute(_))) {
            return Err(AggError::new(
                "Invalid $project :: caused by :: Cannot use expression other than $meta in exclusion projection",
            ));
        }
        if mode == Mode::Inclusion && !fields.iter().any(|(k, _)| k == "_id") {
            fields.insert(0, ("_id".to_string(), Node::Include));
        }
        Ok(Projection { mode, fields })
    }

    fn parse_level(d: &Document, out: &mut Vec<(String, Node)>) -> Result<(), AggError> {
        for (k, v) in d {
            if k.starts_with('$') {
                return Err(AggError::new(format!(
                    "Invalid $project :: caused by :: FieldPath field names may not start with '$'. Found: {k}"
                )));
            }
            let path = parse_path(k)?;
            let node = match v {
                Bson::Boolean(b) => {
                    if *b {
                        Node::Include
                    } else {
                        Node::Exclude
                    }
                }
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                    if crate::documents::order::as_f64(v).is_some_and(|f| f != 0.0) {
                        Node::Include
                    } else {
                        Node::Exclude
                    }
                }
                Bson::Document(sub) if !is_operator_object(sub) => {
                    if sub.is_empty() {
                        return Err(AggError::new(format!(
                            "Invalid $project :: caused by :: An empty sub-projection is not a valid value. Found empty object at path {k}"
                        )));
                    }
                    let mut children = Vec::new();
                    Self::parse_level(sub, &mut children)?;
                    Node::Nested(children)
                }
                other => Node::Compute(Expr::parse(other)?),
            };
            insert_path(out, &path, node)?;
        }
        Ok(())
    }

    /// `$addFields` / `$set`: every value is an expression; nested objects merge.
    pub fn parse_add_fields(spec: &Bson, stage: &str) -> Result<Projection, AggError> {
        let Bson::Document(d) = spec else {
            return Err(AggError::new(format!(
                "{stage} specification stage must be an object, got {}",
                super::expr::type_name(Some(spec))
            )));
        };
        let mut fields = Vec::new();
        Self::parse_add_level(d, &mut fields)?;
        Ok(Projection {
            mode: Mode::AddFields,
            fields,
        })
    }

    fn parse_add_level(d: &Document, out: &mut Vec<(String, Node)>) -> Result<(), AggError> {
        for (k, v) in d {
            let path = parse_path(k)?;
            let node = match v {
                Bson::Document(sub) if !sub.is_empty() && !is_operator_object(sub) => {
                    let mut children = Vec::new();
                    Self::parse_add_level(sub, &mut children)?;
                    Node::Nested(children)
                }
                other => Node::Compute(Expr::parse(other)?),
            };
            insert_path(out, &path, node)?;
        }
        Ok(())
    }

    /// `$unset`: a field path or an array of them.
    pub fn parse_unset(spec: &Bson) -> Result<Projection, AggError> {
        let names: Vec<&str> = match spec {
            Bson::String(s) => vec![s.as_str()],
            Bson::Array(items) if !items.is_empty() => items
                .iter()
                .map(|i| match i {
                    Bson::String(s) => Ok(s.as_str()),
                    _ => Err(AggError::new(
                        "$unset specification must be a string or an array containing only string values",
                    )),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(AggError::new(
                    "$unset specification must be a string or an array with at least one field",
                ))
            }
        };
        let mut fields = Vec::new();
        for n in names {
            insert_path(&mut fields, &parse_path(n)?, Node::Exclude)?;
        }
        Ok(Projection {
            mode: Mode::Exclusion,
            fields,
        })
    }

    /// Adds the top-level fields the stage reads to `out`; false when it reads the whole
    /// document (`$$ROOT`).
    pub fn fields(&self, out: &mut Vec<String>) -> bool {
        fn walk(tree: &[(String, Node)], top: Option<&str>, out: &mut Vec<String>) -> bool {
            tree.iter().all(|(k, n)| match n {
                Node::Include | Node::Exclude => {
                    out.push(top.unwrap_or(k).to_string());
                    true
                }
                Node::Compute(e) => e.fields(out),
                Node::Nested(children) => {
                    out.push(top.unwrap_or(k).to_string());
                    walk(children, Some(top.unwrap_or(k)), out)
                }
            })
        }
        walk(&self.fields, None, out)
    }

    pub fn apply(&self, doc: Document, now: DateTime) -> Result<Document, AggError> {
        match self.mode {
            Mode::Inclusion => {
                let mut out = include(&self.fields, &doc);
                compute(&self.fields, &mut out, &doc, now)?;
                Ok(out)
            }
            Mode::Exclusion => {
                let mut out = doc;
                exclude(&self.fields, &mut out);
                Ok(out)
            }
            Mode::AddFields => {
                let mut out = doc.clone();
                compute(&self.fields, &mut out, &doc, now)?;
                Ok(out)
            }
        }
    }
}

fn find<'a>(tree: &'a [(String, Node)], k: &str) -> Option<&'a Node> {
    tree.iter().find(|(n, _)| n == k).map(|(_, n)| n)
}

/// Phase one of an inclusion: the included fields, in the input's order.
fn include(tree: &[(String, Node)], src: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in src {
        match find(tree, k) {
            Some(Node::Include) => {
                out.insert(k.clone(), v.clone());
            }
            Some(node @ Node::Nested(children)) if node.has(&|n| matches!(n, Node::Include)) => {
                if let Some(v) = include_value(children, v) {
                    out.insert(k.clone(), v);
                }
            }
            _ => {}
        }
    }
    out
}

fn include_value(children: &[(String, Node)], v: &Bson) -> Option<Bson> {
    match v {
        Bson::Document(d) => Some(Bson::Document(include(children, d))),
        Bson::Array(items) => Some(Bson::Array(
            items
                .iter()
                .filter_map(|i| include_value(children, i))
                .collect(),
        )),
        _ => None,
    }
}

/// Phase two: computed fields, in the spec's order, evaluated against the whole document.
fn compute(
    tree: &[(String, Node)],
    out: &mut Document,
    root: &Document,
    now: DateTime,
) -> Result<(), AggError> {
    for (k, node) in tree {
        match node {
            Node::Compute(e) => match e.eval(root, now)? {
                Some(v) => {
                    out.insert(k.clone(), v);
                }
                None => {
                    out.remove(k);
                }
            },
            Node::Nested(children) if node.has(&|n| matches!(n, Node::Compute(_))) => {
                match out.get_mut(k) {
                    Some(Bson::Document(sub)) => compute(children, sub, root, now)?,
                    Some(Bson::Array(items)) => {
                        for item in items.iter_mut() {
                            if let Bson::Document(sub) = item {
                                compute(children, sub, root, now)?;
                            } else {
                                let mut sub = Document::new();
                                compute(children, &mut sub, root, now)?;
                                *item = Bson::Document(sub);
                            }
                        }
                    }
                    _ => {
                        let mut sub = Document::new();
                        compute(children, &mut sub, root, now)?;
                        out.insert(k.clone(), sub);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn exclude(tree: &[(String, Node)], doc: &mut Document) {
    for (k, node) in tree {
        match node {
            Node::Exclude => {
                doc.remove(k);
            }
            Node::Nested(children) => match doc.get_mut(k) {
                Some(Bson::Document(sub)) => exclude(children, sub),
                Some(Bson::Array(items)) => {
                    for item in items.iter_mut() {
                        if let Bson::Document(sub) = item {
                            exclude(children, sub);
                        }
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn now() -> DateTime {
        DateTime::from_millis(0)
    }

    #[test]
    fn inclusion_with_computed_nested_fields() {
        let p = Projection::parse_project(
            &bson!({"path": 1, "date": {"y": {"$year": "$time"}, "m": {"$month": "$time"}}}),
        )
        .expect("spec");
        let t = DateTime::parse_rfc3339_str("2000-10-10T20:55:36Z").expect("date");
        let d = doc! {"_id": 1, "host": "h", "path": "/a", "time": t};
        assert_eq!(
            p.apply(d, now()).expect("apply"),
            doc! {"_id": 1, "path": "/a", "date": {"y": 2000, "m": 10}}
        );
    }

    #[test]
    fn inclusion_keeps_input_order_and_goes_through_arrays() {
        let p = Projection::parse_project(&bson!({"b": 1, "a.x": 1, "_id": 0})).expect("spec");
        let d = doc! {"_id": 1, "a": [{"x": 1, "y": 2}, 3, {"y": 4}], "b": 2, "c": 3};
        assert_eq!(
            p.apply(d, now()).expect("apply"),
            doc! {"a": [{"x": 1}, {}], "b": 2}
        );
    }

    #[test]
    fn exclusion_and_unset() {
        let p = Projection::parse_project(&bson!({"a.y": 0, "c": 0})).expect("spec");
        let d = doc! {"_id": 1, "a": [{"x": 1, "y": 2}], "b": 2, "c": 3};
        assert_eq!(
            p.apply(d.clone(), now()).expect("apply"),
            doc! {"_id": 1, "a": [{"x": 1}], "b": 2}
        );
        let u = Projection::parse_unset(&bson!(["b", "a.x"])).expect("spec");
        assert_eq!(
            u.apply(d, now()).expect("apply"),
            doc! {"_id": 1, "a": [{"y": 2}], "c": 3}
        );
        let p = Projection::parse_project(&bson!({"_id": 0})).expect("spec");
        assert_eq!(
            p.apply(doc! {"_id": 1, "a": 1}, now()).expect("apply"),
            doc! {"a": 1}
        );
    }

    #[test]
    fn add_fields_merges_nested_specs() {
        let p = Projection::parse_add_fields(
            &bson!({"a.b": {"$add": ["$n", 1]}, "c": {"d": 5}, "n": "$missing"}),
            "$addFields",
        )
        .expect("spec");
        let d = doc! {"_id": 1, "a": {"z": 0}, "n": 1};
        assert_eq!(
            p.apply(d, now()).expect("apply"),
            doc! {"_id": 1, "a": {"z": 0, "b": 2}, "c": {"d": 5}}
        );
    }

    #[test]
    fn project_errors() {
        assert!(Projection::parse_project(&bson!({})).is_err());
        assert!(Projection::parse_project(&bson!({"a": 1, "b": 0})).is_err());
        assert!(Projection::parse_project(&bson!({"a": 0, "b": "$x"})).is_err());
        assert!(Projection::parse_project(&bson!({"a": 1, "a.b": 1})).is_err());
        assert!(Projection::parse_project(&bson!({"a": {}})).is_err());
        assert!(Projection::parse_unset(&bson!([])).is_err());
    }
}
