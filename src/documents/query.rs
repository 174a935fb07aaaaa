//! The query matcher: a filter is parsed once into a tree of [`Node`]s, then matched against
//! each candidate document.
//!
//! Negations (`$ne`, `$nin`, `$not`, `$exists: false`) are the complement of the positive
//! predicate over the whole path, as in MongoDB, which is what makes `$ne`/`$nin` match
//! missing fields and `{a: {$ne: 1}}` refuse `{a: [1, 2]}`.
//!
//! The matcher works on `bson::Document`s; a scan builds one per candidate from the stored raw
//! BSON holding only what the filter's paths reach (`collection::matches`). The cost per
//! document is measured by `benches/documents.rs`.

use crate::documents::keys;
use crate::documents::order;
use crate::documents::path::{self, Leaf};
use bson::{Bson, Document};
use regex::Regex;
use std::cmp::Ordering;

#[derive(Debug)]
pub enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Nor(Vec<Node>),
    Field { path: Vec<String>, pred: Pred },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Gt,
    Gte,
    Lt,
    Lte,
}

#[derive(Debug)]
pub enum Pred {
    Eq(Bson),
    Cmp(CmpOp, Bson),
    /// `$in` (and implicit equality with a regex): equal to a value, or a string matching a
    /// pattern.
    In(Vec<Bson>, Vec<Regex>),
    Exists,
    Type(Vec<i32>),
    Regex(Regex),
    Size(usize),
    ElemMatchValue(Vec<Pred>),
    ElemMatchDoc(Box<Node>),
    Mod(i64, i64),
    /// True when not every inner predicate holds over the path.
    Not(Vec<Pred>),
    /// Every inner predicate holds over the path, each on its own (`$all`, several operators
    /// on one field).
    And(Vec<Pred>),
}

pub type Result<T> = std::result::Result<T, String>;

/// The filter `{"<field>": v}` read straight from its JSON text, for a top-level field name
/// without escapes, `.` or `$`, and `v` a string without escapes (other than `"$$NOW"`) or an
/// integer: the commonest filters (a session by `_id`, sessions by `userID`), parsed without
/// building a document. `None` for any other text, which the general parser then reads (and
/// refuses, if it must).
pub fn parse_eq_json(text: &[u8]) -> Option<Node> {
    let (name, value) = crate::documents::json::single_scalar_field(text)?;
    if name.is_empty() || name.contains(['.', '$']) {
        return None;
    }
    Some(Node::Field {
        path: vec![name.to_string()],
        pred: Pred::Eq(value),
    })
}

/// The KeyString of `v` for a filter text `{"_id": v}` with `v` a string or an integer (as
/// [`parse_eq_json`] reads them), made without the filter's tree: a find by `_id` looks the
/// document up by it and builds the tree only if the stored `_id` is of another type.
pub fn id_key_json(text: &[u8]) -> Option<keys::ShortKey> {
    use crate::documents::json::{single_scalar_field_ref, Scalar};
    let mut key = keys::ShortKey::new();
    match single_scalar_field_ref(text)? {
        ("_id", Scalar::Str(s)) => keys::encode_str_into(s.as_bytes(), &mut key),
        ("_id", Scalar::Int(v)) => keys::encode_into(&v, &mut key),
        _ => return None,
    }
    Some(key)
}

/// [`parse_eq_json`] of a filter `{"_id": v}` only.
pub fn parse_id_only_json(text: &[u8]) -> Option<Node> {
    parse_eq_json(text).filter(|n| matches!(n, Node::Field { path, .. } if path == &["_id"]))
}

/// Parses a filter document.
pub fn parse(filter: &Document) -> Result<Node> {
    parse_depth(filter, 0)
}

const MAX_QUERY_DEPTH: usize = 100;

fn parse_depth(filter: &Document, depth: usize) -> Result<Node> {
    if depth > MAX_QUERY_DEPTH {
        return Err("ERR query is nested too deeply".into());
    }
    let mut nodes = Vec::with_capacity(filter.len());
    for (k, v) in filter {
        if let Some(op) = k.strip_prefix('$') {
            match op {
                "and" | "or" | "nor" => {
                    let Bson::Array(items) = v else {
                        return Err(format!("ERR ${op} must be an array"));
                    };
                    if items.is_empty() {
                        return Err("ERR $and/$or/$nor must be a nonempty array".into());
                    }
                    let mut subs = Vec::with_capacity(items.len());
                    for it in items {
                        let Bson::Document(d) = it else {
                            return Err("ERR $or/$and/$nor entries need to be full objects".into());
                        };
                        subs.push(parse_depth(d, depth + 1)?);
                    }
                    nodes.push(match op {
                        "and" => Node::And(subs),
                        "or" => Node::Or(subs),
                        _ => Node::Nor(subs),
                    });
                }
                "comment" => {}
                "where" | "function" | "accumulator" => return Err(no_code(k)),
                _ => return Err(format!("ERR unknown top level operator: {k}")),
            }
            continue;
        }
        if k.is_empty() {
            return Err("ERR field path cannot be empty".into());
        }
        let pred = parse_field(v, depth)?;
        nodes.push(Node::Field {
            path: path::split(k),
            pred,
        });
    }
    Ok(if nodes.len() == 1 {
        nodes.pop().unwrap_or(Node::And(Vec::new()))
    } else {
        Node::And(nodes)
    })
}

fn no_code(op: &str) -> String {
    format!("ERR {op} is not allowed: no server-side JavaScript runs here")
}

fn is_operator_doc(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

fn parse_field(v: &Bson, depth: usize) -> Result<Pred> {
    match v {
        Bson::Document(d) if is_operator_doc(d) => {
            let mut preds = parse_operators(d, depth)?;
            Ok(if preds.len() == 1 {
                preds.pop().unwrap_or(Pred::And(Vec::new()))
            } else {
                Pred::And(preds)
            })
        }
        Bson::RegularExpression(r) => Ok(Pred::In(
            vec![v.clone()],
            vec![compile(r.pattern.as_str(), r.options.as_str())?],
        )),
        _ => Ok(Pred::Eq(v.clone())),
    }
}

fn parse_operators(d: &Document, depth: usize) -> Result<Vec<Pred>> {
    let mut preds = Vec::with_capacity(d.len());
    let options = d.get("$options");
    if options.is_some() && d.get("$regex").is_none() {
        return Err("ERR $options needs a $regex".into());
    }
    for (op, arg) in d {
        let pred = match op.as_str() {
            "$eq" => Pred::Eq(arg.clone()),
            "$ne" => Pred::Not(vec![Pred::Eq(arg.clone())]),
            "$gt" => Pred::Cmp(CmpOp::Gt, arg.clone()),
            "$gte" => Pred::Cmp(CmpOp::Gte, arg.clone()),
            "$lt" => Pred::Cmp(CmpOp::Lt, arg.clone()),
            "$lte" => Pred::Cmp(CmpOp::Lte, arg.clone()),
            "$in" => parse_in(arg, "$in")?,
            "$nin" => Pred::Not(vec![parse_in(arg, "$nin")?]),
            "$exists" => {
                if truthy(arg) {
                    Pred::Exists
                } else {
                    Pred::Not(vec![Pred::Exists])
                }
            }
            "$type" => Pred::Type(parse_types(arg)?),
            "$regex" => parse_regex(arg, options)?,
            "$options" => continue,
            "$size" => Pred::Size(parse_size(arg)?),
            "$all" => parse_all(arg, depth)?,
            "$elemMatch" => parse_elem_match(arg, depth)?,
            "$mod" => parse_mod(arg)?,
            "$not" => match arg {
                Bson::RegularExpression(r) => Pred::Not(vec![Pred::Regex(compile(
                    r.pattern.as_str(),
                    r.options.as_str(),
                )?)]),
                Bson::Document(inner) => {
                    if inner.is_empty() {
                        return Err("ERR $not cannot be empty".into());
                    }
                    if !is_operator_doc(inner) {
                        return Err("ERR $not needs a regex or a document of operators".into());
                    }
                    Pred::Not(parse_operators(inner, depth + 1)?)
                }
                _ => return Err("ERR $not needs a regex or a document".into()),
            },
            "$where" | "$function" | "$accumulator" => return Err(no_code(op)),
            _ => return Err(format!("ERR unknown operator: {op}")),
        };
        preds.push(pred);
    }
    Ok(preds)
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            order::as_f64(v).is_some_and(|d| d != 0.0)
        }
        _ => true,
    }
}

fn parse_in(arg: &Bson, op: &str) -> Result<Pred> {
    let Bson::Array(items) = arg else {
        return Err(format!("ERR {op} needs an array"));
    };
    let mut vals = Vec::with_capacity(items.len());
    let mut res = Vec::new();
    for it in items {
        match it {
            Bson::RegularExpression(r) => {
                res.push(compile(r.pattern.as_str(), r.options.as_str())?);
                vals.push(it.clone());
            }
            Bson::Document(d) if is_operator_doc(d) => {
                return Err("ERR cannot nest $ under $in".into())
            }
            _ => vals.push(it.clone()),
        }
    }
    Ok(Pred::In(vals, res))
}

fn parse_regex(arg: &Bson, options: Option<&Bson>) -> Result<Pred> {
    let opts = match options {
        None => None,
        Some(Bson::String(s)) => Some(s.as_str()),
        Some(_) => return Err("ERR $options has to be a string".into()),
    };
    match arg {
        Bson::String(p) => Ok(Pred::Regex(compile(p, opts.unwrap_or(""))?)),
        Bson::RegularExpression(r) => {
            if opts.is_some() && !r.options.as_str().is_empty() {
                return Err("ERR options set in both $regex and $options".into());
            }
            Ok(Pred::Regex(compile(
                r.pattern.as_str(),
                opts.unwrap_or(r.options.as_str()),
            )?))
        }
        _ => Err("ERR $regex has to be a string".into()),
    }
}

/// Compiles a MongoDB/PCRE pattern for the linear-time `regex` engine, translating the
/// options `i m s x` (`u` is accepted: the engine is Unicode-aware already).
pub fn compile(pattern: &str, options: &str) -> Result<Regex> {
    let mut b = regex::RegexBuilder::new(pattern);
    for c in options.chars() {
        match c {
            'i' => b.case_insensitive(true),
            'm' => b.multi_line(true),
            's' => b.dot_matches_new_line(true),
            'x' => b.ignore_whitespace(true),
            'u' => &mut b,
            _ => return Err(format!("ERR invalid flag in regex options: {c}")),
        };
    }
    // A client's pattern must not grow the compiled program without bound.
    b.size_limit(1 << 20).dfa_size_limit(1 << 20);
    b.build().map_err(|e| {
        let msg = e.to_string().replace('\n', " ");
        format!("ERR invalid regular expression (linear-time engine, no backreferences or lookaround): {msg}")
    })
}

fn parse_size(arg: &Bson) -> Result<usize> {
    let Some(d) = order::as_f64(arg) else {
        return Err("ERR $size needs a number".into());
    };
    if d < 0.0 {
        return Err("ERR $size may not be negative".into());
    }
    if d.fract() != 0.0 || d.is_nan() {
        return Err("ERR $size must be a whole number".into());
    }
    Ok(d.min(usize::MAX as f64) as usize)
}

fn parse_all(arg: &Bson, depth: usize) -> Result<Pred> {
    let Bson::Array(items) = arg else {
        return Err("ERR $all needs an array".into());
    };
    if items.is_empty() {
        // MongoDB: `$all: []` matches nothing.
        return Ok(Pred::In(Vec::new(), Vec::new()));
    }
    let mut preds = Vec::with_capacity(items.len());
    for it in items {
        preds.push(match it {
            Bson::Document(d) if d.keys().next().map(String::as_str) == Some("$elemMatch") => {
                let Some(em) = d.get("$elemMatch") else {
                    continue;
                };
                parse_elem_match(em, depth)?
            }
            Bson::Document(d) if is_operator_doc(d) => {
                return Err("ERR no $ expressions in $all".into())
            }
            Bson::RegularExpression(r) => Pred::In(
                vec![it.clone()],
                vec![compile(r.pattern.as_str(), r.options.as_str())?],
            ),
            _ => Pred::Eq(it.clone()),
        });
    }
    Ok(Pred::And(preds))
}

fn parse_elem_match(arg: &Bson, depth: usize) -> Result<Pred> {
    let Bson::Document(d) = arg else {
        return Err("ERR $elemMatch needs an Object".into());
    };
    let value_form = !d.is_empty()
        && d.keys().all(|k| {
            k.starts_with('$') && !matches!(k.as_str(), "$and" | "$or" | "$nor" | "$where")
        });
    if value_form {
        Ok(Pred::ElemMatchValue(parse_operators(d, depth + 1)?))
    } else {
        Ok(Pred::ElemMatchDoc(Box::new(parse_depth(d, depth + 1)?)))
    }
}

fn parse_mod(arg: &Bson) -> Result<Pred> {
    let Bson::Array(items) = arg else {
        return Err("ERR malformed mod, needs to be an array".into());
    };
    if items.len() < 2 {
        return Err("ERR malformed mod, not enough elements".into());
    }
    if items.len() > 2 {
        return Err("ERR malformed mod, too many elements".into());
    }
    let num = |v: &Bson| -> Result<i64> {
        match v {
            Bson::Int32(i) => Ok(*i as i64),
            Bson::Int64(i) => Ok(*i),
            _ => match order::as_f64(v) {
                Some(d) if d.is_finite() => Ok(d.trunc() as i64),
                Some(_) => Err("ERR malformed mod, divisor and remainder must be finite".into()),
                None => Err("ERR malformed mod, divisor and remainder must be numbers".into()),
            },
        }
    };
    let (d, r) = (num(&items[0])?, num(&items[1])?);
    if d == 0 {
        return Err("ERR divisor cannot be 0".into());
    }
    Ok(Pred::Mod(d, r))
}

/// `$type` codes and aliases; `number` stands for the four numeric codes.
fn parse_types(arg: &Bson) -> Result<Vec<i32>> {
    let one = |v: &Bson| -> Result<Vec<i32>> {
        match v {
            Bson::String(s) => Ok(match s.as_str() {
                "double" => vec![1],
                "string" => vec![2],
                "object" => vec![3],
                "array" => vec![4],
                "binData" => vec![5],
                "undefined" => vec![6],
                "objectId" => vec![7],
                "bool" => vec![8],
                "date" => vec![9],
                "null" => vec![10],
                "regex" => vec![11],
                "dbPointer" => vec![12],
                "javascript" => vec![13],
                "symbol" => vec![14],
                "javascriptWithScope" => vec![15],
                "int" => vec![16],
                "timestamp" => vec![17],
                "long" => vec![18],
                "decimal" => vec![19],
                "minKey" => vec![-1],
                "maxKey" => vec![127],
                "number" => vec![1, 16, 18, 19],
                _ => return Err(format!("ERR unknown type name alias: {s}")),
            }),
            _ => match order::as_f64(v) {
                Some(d) if d.fract() == 0.0 => {
                    let c = d as i32;
                    if (1..=19).contains(&c) || c == -1 || c == 127 {
                        Ok(vec![c])
                    } else {
                        Err(format!("ERR Invalid numerical type code: {d}"))
                    }
                }
                _ => Err("ERR type must be represented as a number or a string".into()),
            },
        }
    };
    match arg {
        Bson::Array(items) => {
            let mut all = Vec::new();
            for it in items {
                all.extend(one(it)?);
            }
            Ok(all)
        }
        _ => one(arg),
    }
}

/// The BSON type code of a value.
pub fn type_code(v: &Bson) -> i32 {
    match v {
        Bson::Double(_) => 1,
        Bson::String(_) => 2,
        Bson::Document(_) => 3,
        Bson::Array(_) => 4,
        Bson::Binary(_) => 5,
        Bson::Undefined => 6,
        Bson::ObjectId(_) => 7,
        Bson::Boolean(_) => 8,
        Bson::DateTime(_) => 9,
        Bson::Null => 10,
        Bson::RegularExpression(_) => 11,
        Bson::DbPointer(_) => 12,
        Bson::JavaScriptCode(_) => 13,
        Bson::Symbol(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::Int32(_) => 16,
        Bson::Timestamp(_) => 17,
        Bson::Int64(_) => 18,
        Bson::Decimal128(_) => 19,
        Bson::MinKey => -1,
        Bson::MaxKey => 127,
    }
}

impl Node {
    /// Whether `doc` matches.
    pub fn matches(&self, doc: &Document) -> bool {
        match self {
            Node::And(ns) => ns.iter().all(|n| n.matches(doc)),
            Node::Or(ns) => ns.iter().any(|n| n.matches(doc)),
            Node::Nor(ns) => !ns.iter().any(|n| n.matches(doc)),
            Node::Field { path, pred } => eval_path(doc, path, pred),
        }
    }

    /// The `_id` value of a filter with a top-level `{_id: v}` or `{_id: {$eq: v}}` (not an
    /// array): such a query reads one shard's `_id` map instead of scanning.
    pub fn id_equality(&self) -> Option<&Bson> {
        match self {
            Node::Field {
                path,
                pred: Pred::Eq(v),
            } if path.len() == 1 && path[0] == "_id" && !matches!(v, Bson::Array(_)) => Some(v),
            // `{_id: 1, a: 2}`: the `_id` picks the one candidate, the rest is checked on it.
            Node::And(ns) => ns.iter().find_map(|n| match n {
                Node::Field { .. } => n.id_equality(),
                _ => None,
            }),
            _ => None,
        }
    }

    /// The field paths the filter reads (a scan decodes only what they reach from the stored
    /// raw BSON before matching). Sorted, without duplicates.
    pub fn field_paths(&self) -> Vec<Vec<String>> {
        fn walk(n: &Node, out: &mut Vec<Vec<String>>) {
            match n {
                Node::And(ns) | Node::Or(ns) | Node::Nor(ns) => {
                    ns.iter().for_each(|n| walk(n, out))
                }
                Node::Field { path, .. } => out.push(path.clone()),
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The equality fields of the filter (top level and inside `$and`), which an upsert
    /// copies into the new document.
    pub fn equalities(&self, out: &mut Vec<(Vec<String>, Bson)>) {
        match self {
            Node::And(ns) => ns.iter().for_each(|n| n.equalities(out)),
            Node::Field { path, pred } => match pred {
                Pred::Eq(v) => out.push((path.clone(), v.clone())),
                Pred::And(ps) => {
                    for p in ps {
                        if let Pred::Eq(v) = p {
                            out.push((path.clone(), v.clone()));
                        }
                    }
                }
                _ => {}
            },
            Node::Or(ns) if ns.len() == 1 => ns[0].equalities(out),
            _ => {}
        }
    }
}

fn eval_path(doc: &Document, path: &[String], pred: &Pred) -> bool {
    match pred {
        Pred::Not(ps) => !ps.iter().all(|p| eval_path(doc, path, p)),
        Pred::And(ps) => !ps.is_empty() && ps.iter().all(|p| eval_path(doc, path, p)),
        _ => path::any_in_doc(doc, path, &mut |leaf| leaf_match(pred, leaf)),
    }
}

/// A predicate applied to one value as if it were a field's value (`$elemMatch` elements).
fn eval_value(v: &Bson, pred: &Pred) -> bool {
    match pred {
        Pred::Not(ps) => !ps.iter().all(|p| eval_value(v, p)),
        Pred::And(ps) => !ps.is_empty() && ps.iter().all(|p| eval_value(v, p)),
        _ => path::any_value::<&str>(v, &[], &mut |leaf| leaf_match(pred, leaf)),
    }
}

fn is_nan(v: &Bson) -> bool {
    matches!(v, Bson::Double(_) | Bson::Decimal128(_)) && order::as_f64(v).is_some_and(f64::is_nan)
}

fn is_nullish(v: &Bson) -> bool {
    matches!(v, Bson::Null | Bson::Undefined)
}

fn leaf_match(pred: &Pred, leaf: Leaf<'_>) -> bool {
    match pred {
        Pred::Eq(x) => match leaf.value() {
            None => is_nullish(x),
            Some(v) => order::equal(v, x),
        },
        Pred::Cmp(op, x) => match leaf.value() {
            None => is_nullish(x) && matches!(op, CmpOp::Gte | CmpOp::Lte),
            Some(v) => {
                if order::rank(v) != order::rank(x) {
                    return false;
                }
                // NaN is only ever equal to NaN in a comparison (MongoDB), though it sorts
                // below every number.
                if is_nan(v) || is_nan(x) {
                    return is_nan(v) && is_nan(x) && matches!(op, CmpOp::Gte | CmpOp::Lte);
                }
                let o = order::compare(v, x);
                match op {
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::Gte => o != Ordering::Less,
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::Lte => o != Ordering::Greater,
                }
            }
        },
        Pred::In(vals, res) => match leaf.value() {
            None => vals.iter().any(is_nullish),
            Some(v) => {
                vals.iter().any(|x| order::equal(v, x))
                    || match v {
                        Bson::String(s) | Bson::Symbol(s) => res.iter().any(|r| r.is_match(s)),
                        _ => false,
                    }
            }
        },
        Pred::Exists => leaf.value().is_some(),
        Pred::Type(codes) => match leaf {
            Leaf::Missing => false,
            Leaf::Value(v) => codes.contains(&type_code(v)),
            // Elements count for every type but "array" (an array of arrays is not "array"
            // by its elements).
            Leaf::Element(v) => {
                let c = type_code(v);
                c != 4 && codes.contains(&c)
            }
        },
        Pred::Regex(re) => match leaf.value() {
            Some(Bson::String(s)) | Some(Bson::Symbol(s)) => re.is_match(s),
            Some(Bson::RegularExpression(r)) => r.pattern.as_str() == re.as_str(),
            _ => false,
        },
        Pred::Size(n) => match leaf {
            Leaf::Value(Bson::Array(a)) => a.len() == *n,
            _ => false,
        },
        Pred::ElemMatchValue(ps) => match leaf {
            Leaf::Value(Bson::Array(a)) => a
                .iter()
                .any(|e| !ps.is_empty() && ps.iter().all(|p| eval_value_direct(e, p))),
            _ => false,
        },
        Pred::ElemMatchDoc(node) => match leaf {
            Leaf::Value(Bson::Array(a)) => a.iter().any(|e| match e {
                Bson::Document(d) => node.matches(d),
                _ => false,
            }),
            _ => false,
        },
        Pred::Mod(d, r) => match leaf.value() {
            Some(Bson::Int32(i)) => (*i as i64).wrapping_rem(*d) == *r,
            Some(Bson::Int64(i)) => i.wrapping_rem(*d) == *r,
            Some(v @ (Bson::Double(_) | Bson::Decimal128(_))) => match order::as_f64(v) {
                Some(x) if x.is_finite() => (x.trunc() as i64).wrapping_rem(*d) == *r,
                _ => false,
            },
            _ => false,
        },
        Pred::Not(_) | Pred::And(_) => false,
    }
}

/// `$elemMatch` in value form applies its operators to the element itself; an element that
/// is an array is not expanded again.
fn eval_value_direct(e: &Bson, pred: &Pred) -> bool {
    match pred {
        Pred::Not(ps) => !ps.iter().all(|p| eval_value_direct(e, p)),
        Pred::And(ps) => !ps.is_empty() && ps.iter().all(|p| eval_value_direct(e, p)),
        Pred::ElemMatchValue(_) | Pred::ElemMatchDoc(_) | Pred::Size(_) => eval_value(e, pred),
        _ => leaf_match(pred, Leaf::Value(e)),
    }
}

/// Parses the value of a field in a filter (an operator document, a regex or a value) into
/// one predicate (`$pull`'s condition).
pub fn parse_field_pred(v: &Bson) -> Result<Pred> {
    parse_field(v, 0)
}

/// Whether a single value (an array element) satisfies a predicate, the value taken as is.
pub fn value_matches(pred: &Pred, v: &Bson) -> bool {
    eval_value_direct(v, pred)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::codec;

    /// The `{_id: v}` shortcut reads exactly what the general parser reads, and leaves every
    /// other text to it.
    #[test]
    fn id_only_shortcut_agrees_with_the_general_parser() {
        let taken = [
            r#"{"_id":"abc"}"#,
            r#" { "_id" : "000000000042" } "#,
            r#"{"_id":0}"#,
            r#"{"_id":-7}"#,
            r#"{"_id":2147483648}"#,
            r#"{"_id":-9223372036854775808}"#,
            r#"{"_id":9223372036854775807}"#,
            "{\"_id\":\"caf\u{e9}\"}",
        ];
        for t in taken {
            let fast = parse_id_only_json(t.as_bytes()).expect(t);
            let doc = codec::parse(t.as_bytes(), false).expect(t);
            assert_eq!(
                format!("{fast:?}"),
                format!("{:?}", parse(&doc).expect(t)),
                "{t}"
            );
        }
        let left = [
            r#"{"_id":"$$NOW"}"#,
            r#"{"_id":"a\"b"}"#,
            r#"{"_id":01}"#,
            r#"{"_id":1.5}"#,
            r#"{"_id":1e3}"#,
            r#"{"_id":99999999999999999999}"#,
            r#"{"_id":9223372036854775808}"#,
            // serde_json reads `-0` as the double -0.0: the general parser's.
            r#"{"_id":-0}"#,
            r#"{"_id":{"$gt":1}}"#,
            r#"{"_id":1,"a":2}"#,
            r#"{"_idx":1}"#,
            r#"{"_id":1}x"#,
            r#"{"_id":true}"#,
            "",
        ];
        for t in left {
            assert!(parse_id_only_json(t.as_bytes()).is_none(), "{t}");
        }
    }

    /// `{"<field>": v}`: the same shortcut for any plain top-level field.
    #[test]
    fn field_equality_shortcut_agrees_with_the_general_parser() {
        let taken = [
            r#"{"userID":"000000000042"}"#,
            r#" { "a" : 7 } "#,
            r#"{"_idx":-1}"#,
            "{\"caf\u{e9}\":\"x\"}",
            r#"{"a b":"$x"}"#,
        ];
        for t in taken {
            let fast = parse_eq_json(t.as_bytes()).expect(t);
            let doc = codec::parse(t.as_bytes(), false).expect(t);
            assert_eq!(
                format!("{fast:?}"),
                format!("{:?}", parse(&doc).expect(t)),
                "{t}"
            );
        }
        let left = [
            r#"{"a.b":1}"#,
            r#"{"$where":1}"#,
            r#"{"a$":1}"#,
            r#"{"":1}"#,
            r#"{"a\"b":1}"#,
            r#"{"a":"$$NOW"}"#,
            r#"{"a":{"$gt":1}}"#,
            r#"{"a":1,"b":2}"#,
            r#"{"a":[1]}"#,
            r#"{"a":null}"#,
        ];
        for t in left {
            assert!(parse_eq_json(t.as_bytes()).is_none(), "{t}");
        }
    }
}
