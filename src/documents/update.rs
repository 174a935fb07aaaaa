//! Update documents: operators (`$set $unset $inc $min $max $mul $rename $currentDate
//! $setOnInsert $push $pull $addToSet`) or a replacement document, applied to a decoded
//! document that is then stored again as raw BSON.

use crate::documents::codec::{Fixed, SetValue};
use crate::documents::{order, path, query};
use bson::{Bson, DateTime, Document, Timestamp};

pub type Result<T> = std::result::Result<T, String>;

/// Beyond this array index a `$set` would have to pad with nulls: refused.
const MAX_PAD_INDEX: usize = 1 << 20;

#[derive(Debug)]
pub enum Update {
    Replace(Document),
    Ops(Vec<Op>),
}

#[derive(Debug)]
pub struct Op {
    pub kind: Kind,
    pub path: Vec<String>,
    pub dotted: String,
    pub arg: Bson,
    /// `$pull`'s condition, parsed once.
    pull: Option<PullCond>,
}

#[derive(Debug)]
enum PullCond {
    Value(query::Pred),
    Doc(query::Node),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Set,
    Unset,
    Inc,
    Mul,
    Min,
    Max,
    Rename,
    CurrentDate,
    SetOnInsert,
    Push,
    AddToSet,
    Pull,
}

/// Parses an update document.
pub fn parse(update: &Document) -> Result<Update> {
    let ops_form = update.keys().next().is_some_and(|k| k.starts_with('$'));
    if !ops_form {
        if let Some(k) = update.keys().find(|k| k.starts_with('$')) {
            return Err(format!("ERR The dollar ($) prefixed field '{k}' in a replacement document is not valid for storage."));
        }
        return Ok(Update::Replace(update.clone()));
    }
    let mut ops = Vec::new();
    for (name, fields) in update {
        let kind = match name.as_str() {
            "$set" => Kind::Set,
            "$unset" => Kind::Unset,
            "$inc" => Kind::Inc,
            "$mul" => Kind::Mul,
            "$min" => Kind::Min,
            "$max" => Kind::Max,
            "$rename" => Kind::Rename,
            "$currentDate" => Kind::CurrentDate,
            "$setOnInsert" => Kind::SetOnInsert,
            "$push" => Kind::Push,
            "$addToSet" => Kind::AddToSet,
            "$pull" => Kind::Pull,
            _ if name.starts_with('$') => {
                return Err(format!("ERR Unknown modifier: {name}. Expected a valid update modifier or pipeline-style update specified as an array"))
            }
            _ => {
                return Err(format!(
                    "ERR Unknown modifier: {name}. An update document mixes operators and fields"
                ))
            }
        };
        let Bson::Document(fields) = fields else {
            return Err(format!(
                "ERR Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{name}: {}}}",
                type_name(fields),
                crate::documents::codec::value_json(fields)
            ));
        };
        for (p, arg) in fields {
            if p.is_empty() || p.split('.').any(str::is_empty) {
                return Err(format!(
                    "ERR The update path '{p}' contains an empty field name, which is not allowed."
                ));
            }
            if p.split('.').any(|c| c.starts_with('$')) {
                return Err(format!("ERR The update path '{p}' contains a '$' field name, which is not supported (no positional operators)."));
            }
            check_arg(kind, p, arg)?;
            let pull = if kind == Kind::Pull {
                Some(match arg {
                    Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                        PullCond::Value(query::parse_field_pred(arg)?)
                    }
                    Bson::Document(d) => PullCond::Doc(query::parse(d)?),
                    _ => PullCond::Value(query::parse_field_pred(arg)?),
                })
            } else {
                None
            };
            ops.push(Op {
                kind,
                path: path::split(p),
                dotted: p.clone(),
                arg: arg.clone(),
                pull,
            });
        }
        if kind == Kind::Rename {
            for (from, to) in fields {
                if let Bson::String(to) = to {
                    ops.push(Op {
                        kind: Kind::Unset,
                        path: Vec::new(),
                        dotted: to.clone(),
                        arg: Bson::Null,
                        pull: None,
                    });
                    // A marker so the conflict check sees the destination; removed below.
                    let _ = from;
                }
            }
        }
    }
    // Conflicts: two operators on the same path or one path inside another.
    let dotted: Vec<&str> = ops.iter().map(|o| o.dotted.as_str()).collect();
    for (i, a) in dotted.iter().enumerate() {
        for b in &dotted[i + 1..] {
            if conflicts(a, b) {
                return Err(format!(
                    "ERR Updating the path '{b}' would create a conflict at '{}'",
                    if a.len() <= b.len() { a } else { b }
                ));
            }
        }
    }
    ops.retain(|o| !o.path.is_empty());
    Ok(Update::Ops(ops))
}

fn conflicts(a: &str, b: &str) -> bool {
    a == b
        || (a.len() < b.len() && b.starts_with(a) && b.as_bytes()[a.len()] == b'.')
        || (b.len() < a.len() && a.starts_with(b) && a.as_bytes()[b.len()] == b'.')
}

fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
        _ => "other",
    }
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

fn check_arg(kind: Kind, p: &str, arg: &Bson) -> Result<()> {
    match kind {
        Kind::Inc | Kind::Mul if !is_number(arg) => Err(format!(
            "ERR Cannot {} with non-numeric argument: {{{p}: {}}}",
            if kind == Kind::Inc { "increment" } else { "multiply" },
            crate::documents::codec::value_json(arg)
        )),
        Kind::Rename => match arg {
            Bson::String(to) if to == p => Err(format!(
                "ERR The source and target field for $rename must differ: {p}"
            )),
            Bson::String(to) if conflicts(p, to) => Err(format!(
                "ERR The source and target field for $rename must not be on the same path: {p}: \"{to}\""
            )),
            Bson::String(to) if to.is_empty() || to.split('.').any(|c| c.is_empty() || c.starts_with('$')) => {
                Err(format!("ERR The 'to' field for $rename must be a valid field name: {to}"))
            }
            Bson::String(_) => Ok(()),
            _ => Err(format!(
                "ERR The 'to' field for $rename must be a string: {p}: {}",
                crate::documents::codec::value_json(arg)
            )),
        },
        Kind::CurrentDate => match arg {
            Bson::Boolean(_) => Ok(()),
            Bson::Document(d) => match d.get("$type") {
                Some(Bson::String(t)) if (t == "date" || t == "timestamp") && d.len() == 1 => {
                    Ok(())
                }
                _ => Err("ERR The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}".into()),
            },
            _ => Err(format!(
                "ERR {} is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({{$type: 'timestamp/date'}}).",
                type_name(arg)
            )),
        },
        Kind::Push | Kind::AddToSet => match arg {
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                for (k, v) in d {
                    match k.as_str() {
                        "$each" if matches!(v, Bson::Array(_)) => {}
                        "$each" => {
                            return Err(format!(
                                "ERR The argument to $each in {} must be an array but it was of type: {}",
                                if kind == Kind::Push { "$push" } else { "$addToSet" },
                                type_name(v)
                            ))
                        }
                        _ => {
                            return Err(format!(
                                "ERR Unsupported modifier {k} in {}: only $each is supported",
                                if kind == Kind::Push { "$push" } else { "$addToSet" }
                            ))
                        }
                    }
                }
                if d.get("$each").is_none() {
                    return Err("ERR $each is required with update modifiers".into());
                }
                Ok(())
            }
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Where a path's last component lives: its parent container.
fn parent<'a>(root: &'a mut Bson, comps: &[String], create: bool) -> Result<Option<&'a mut Bson>> {
    let mut cur = root;
    for (i, c) in comps.iter().enumerate() {
        cur = match cur {
            Bson::Document(d) => {
                if !d.contains_key(c) {
                    if !create {
                        return Ok(None);
                    }
                    d.insert(c.clone(), Document::new());
                }
                match d.get_mut(c) {
                    Some(v) => v,
                    None => return Ok(None),
                }
            }
            Bson::Array(a) => {
                let Some(idx) = path::array_index(c) else {
                    if !create {
                        return Ok(None);
                    }
                    return Err(format!(
                        "ERR Cannot create field '{c}' in element {{{}: [...]}}",
                        if i == 0 { "" } else { comps[i - 1].as_str() }
                    ));
                };
                if idx >= a.len() {
                    if !create {
                        return Ok(None);
                    }
                    if idx > MAX_PAD_INDEX {
                        return Err(format!("ERR array index {idx} is too large to pad"));
                    }
                    a.resize(idx, Bson::Null);
                    a.push(Bson::Document(Document::new()));
                }
                &mut a[idx]
            }
            other => {
                if !create {
                    return Ok(None);
                }
                return Err(format!(
                    "ERR Cannot create field '{c}' in element {{{}: {}}}",
                    if i == 0 { "" } else { comps[i - 1].as_str() },
                    crate::documents::codec::value_json(other)
                ));
            }
        };
    }
    Ok(Some(cur))
}

fn get_in<'a>(parent: &'a mut Bson, last: &str) -> Option<&'a mut Bson> {
    match parent {
        Bson::Document(d) => d.get_mut(last),
        Bson::Array(a) => path::array_index(last).and_then(|i| a.get_mut(i)),
        _ => None,
    }
}

fn set_in(parent: &mut Bson, last: &str, v: Bson) -> Result<()> {
    match parent {
        Bson::Document(d) => {
            d.insert(last.to_string(), v);
            Ok(())
        }
        Bson::Array(a) => {
            let Some(idx) = path::array_index(last) else {
                return Err(format!("ERR Cannot create field '{last}' in an array"));
            };
            if idx > MAX_PAD_INDEX {
                return Err(format!("ERR array index {idx} is too large to pad"));
            }
            if idx >= a.len() {
                a.resize(idx + 1, Bson::Null);
            }
            a[idx] = v;
            Ok(())
        }
        other => Err(format!(
            "ERR Cannot create field '{last}' in element {{{}}}",
            crate::documents::codec::value_json(other)
        )),
    }
}

fn set_path(root: &mut Bson, p: &[String], v: Bson) -> Result<()> {
    let Some((last, init)) = p.split_last() else {
        return Ok(());
    };
    match parent(root, init, true)? {
        Some(par) => set_in(par, last, v),
        None => Ok(()),
    }
}

fn remove_path(root: &mut Bson, p: &[String]) -> Option<Bson> {
    let (last, init) = p.split_last()?;
    match parent(root, init, false).ok()?? {
        Bson::Document(d) => d.remove(last),
        // MongoDB's $unset of an array element leaves a null in its place.
        Bson::Array(a) => {
            let i = path::array_index(last)?;
            a.get_mut(i).map(|e| std::mem::replace(e, Bson::Null))
        }
        _ => None,
    }
}

fn get_path<'a>(root: &'a mut Bson, p: &[String]) -> Option<&'a mut Bson> {
    let (last, init) = p.split_last()?;
    let par = parent(root, init, false).ok()??;
    get_in(par, last)
}

fn add(a: &Bson, b: &Bson, mul: bool) -> Result<Bson> {
    Ok(match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => {
            let r = if mul {
                (*x as i64) * (*y as i64)
            } else {
                *x as i64 + *y as i64
            };
            match i32::try_from(r) {
                Ok(r) => Bson::Int32(r),
                Err(_) => Bson::Int64(r),
            }
        }
        (Bson::Int32(_) | Bson::Int64(_), Bson::Int32(_) | Bson::Int64(_)) => {
            let x = as_i64(a);
            let y = as_i64(b);
            let r = if mul {
                x.checked_mul(y)
            } else {
                x.checked_add(y)
            };
            match r {
                Some(r) => Bson::Int64(r),
                None => {
                    return Err(format!(
                        "ERR Failed to apply {}: integer overflow",
                        if mul { "$mul" } else { "$inc" }
                    ))
                }
            }
        }
        (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) => {
            let x = order::as_f64(a).unwrap_or(0.0);
            let y = order::as_f64(b).unwrap_or(0.0);
            let r = if mul { x * y } else { x + y };
            // Decimal arithmetic goes through f64 (known limit); the result stays a decimal.
            match r.to_string().parse() {
                Ok(d) => Bson::Decimal128(d),
                Err(_) => Bson::Double(r),
            }
        }
        _ => {
            let x = order::as_f64(a).unwrap_or(0.0);
            let y = order::as_f64(b).unwrap_or(0.0);
            Bson::Double(if mul { x * y } else { x + y })
        }
    })
}

fn as_i64(v: &Bson) -> i64 {
    match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        _ => 0,
    }
}

fn id_text(doc: &Bson) -> String {
    match doc {
        Bson::Document(d) => match d.get("_id") {
            Some(id) => format!("{{_id: {}}}", crate::documents::codec::value_json(id)),
            None => "{}".into(),
        },
        _ => "{}".into(),
    }
}

impl Update {
    /// The values this update writes when it only sets top-level fields (other than `_id`)
    /// to fixed-width values or strings (`$set` of a number, date, boolean or string,
    /// `$currentDate` as a date): what an update in place needs
    /// (`CollectionShard::set_in_place`). `None` for any other update.
    pub fn scalar_sets(&self, now: DateTime) -> Option<Vec<(&str, SetValue<'_>)>> {
        let Update::Ops(ops) = self else {
            return None;
        };
        ops.iter()
            .map(|op| {
                let [field] = op.path.as_slice() else {
                    return None;
                };
                if field == "_id" {
                    return None;
                }
                let v = match op.kind {
                    Kind::Set => SetValue::of(&op.arg)?,
                    Kind::CurrentDate => match &op.arg {
                        Bson::Document(d)
                            if d.get("$type") == Some(&Bson::String("timestamp".into())) =>
                        {
                            return None
                        }
                        _ => SetValue::Fixed(Fixed::Date(now.timestamp_millis())),
                    },
                    _ => return None,
                };
                Some((field.as_str(), v))
            })
            .collect()
    }

    /// Applies the update to `doc` (`inserting` for an upsert's new document: `$setOnInsert`
    /// applies then). Errors leave the caller's stored document untouched (it works on a
    /// copy).
    pub fn apply(&self, doc: &mut Document, now: DateTime, inserting: bool) -> Result<()> {
        let ops = match self {
            Update::Replace(r) => {
                let id = doc.get("_id").cloned();
                if let (Some(old), Some(new)) = (&id, r.get("_id")) {
                    if !order::equal(old, new) {
                        return Err(format!(
                            "ERR After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}",
                            crate::documents::codec::value_json(new)
                        ));
                    }
                }
                let mut out = Document::new();
                if let Some(id) = id {
                    out.insert("_id", id);
                }
                for (k, v) in r {
                    if k != "_id" || !out.contains_key("_id") {
                        out.insert(k.clone(), v.clone());
                    }
                }
                *doc = out;
                return Ok(());
            }
            Update::Ops(ops) => ops,
        };
        let old_id = doc.get("_id").cloned();
        let mut root = Bson::Document(std::mem::take(doc));
        let result = self.apply_ops(ops, &mut root, now, inserting);
        if let Bson::Document(d) = root {
            *doc = d;
        }
        result?;
        if let Some(old) = old_id {
            let same = doc.get("_id").is_some_and(|n| order::equal(&old, n));
            if !same {
                return Err("ERR Performing an update on the path '_id' would modify the immutable field '_id'".into());
            }
        }
        Ok(())
    }

    fn apply_ops(&self, ops: &[Op], root: &mut Bson, now: DateTime, inserting: bool) -> Result<()> {
        for op in ops {
            let p = &op.path;
            match op.kind {
                Kind::Set => set_path(root, p, op.arg.clone())?,
                Kind::SetOnInsert => {
                    if inserting {
                        set_path(root, p, op.arg.clone())?
                    }
                }
                Kind::Unset => {
                    remove_path(root, p);
                }
                Kind::Inc | Kind::Mul => {
                    let mul = op.kind == Kind::Mul;
                    let idtext = id_text(root);
                    match get_path(root, p) {
                        None => {
                            let v = if mul {
                                zero_like(&op.arg)
                            } else {
                                op.arg.clone()
                            };
                            set_path(root, p, v)?
                        }
                        Some(cur) => {
                            if !is_number(cur) {
                                return Err(format!(
                                    "ERR Cannot apply {} to a value of non-numeric type. {idtext} has the field '{}' of non-numeric type {}",
                                    if mul { "$mul" } else { "$inc" },
                                    p.last().map(String::as_str).unwrap_or(""),
                                    type_name(cur)
                                ));
                            }
                            *cur = add(cur, &op.arg, mul)?;
                        }
                    }
                }
                Kind::Min | Kind::Max => match get_path(root, p) {
                    None => set_path(root, p, op.arg.clone())?,
                    Some(cur) => {
                        let o = order::compare(&op.arg, cur);
                        let replace = if op.kind == Kind::Min {
                            o == std::cmp::Ordering::Less
                        } else {
                            o == std::cmp::Ordering::Greater
                        };
                        if replace {
                            *cur = op.arg.clone();
                        }
                    }
                },
                Kind::Rename => {
                    let Bson::String(to) = &op.arg else { continue };
                    if let Some(v) = remove_path(root, p) {
                        set_path(root, &path::split(to), v)?;
                    }
                }
                Kind::CurrentDate => {
                    let v = match &op.arg {
                        Bson::Document(d)
                            if d.get("$type") == Some(&Bson::String("timestamp".into())) =>
                        {
                            Bson::Timestamp(Timestamp {
                                time: (now.timestamp_millis() / 1000).max(0) as u32,
                                increment: 1,
                            })
                        }
                        _ => Bson::DateTime(now),
                    };
                    set_path(root, p, v)?
                }
                Kind::Push | Kind::AddToSet => {
                    let items: Vec<Bson> = match &op.arg {
                        Bson::Document(d)
                            if d.keys().next().is_some_and(|k| k.starts_with('$')) =>
                        {
                            match d.get("$each") {
                                Some(Bson::Array(a)) => a.clone(),
                                _ => Vec::new(),
                            }
                        }
                        v => vec![v.clone()],
                    };
                    let idtext = id_text(root);
                    match get_path(root, p) {
                        None => {
                            let mut arr: Vec<Bson> = Vec::new();
                            for it in items {
                                if op.kind == Kind::Push || !arr.iter().any(|e| order::equal(e, &it)) {
                                    arr.push(it);
                                }
                            }
                            set_path(root, p, Bson::Array(arr))?
                        }
                        Some(Bson::Array(arr)) => {
                            for it in items {
                                if op.kind == Kind::Push || !arr.iter().any(|e| order::equal(e, &it)) {
                                    arr.push(it);
                                }
                            }
                        }
                        Some(other) => {
                            return Err(format!(
                                "ERR The field '{}' must be an array but is of type {} in document {idtext}",
                                op.dotted,
                                type_name(other)
                            ))
                        }
                    }
                }
                Kind::Pull => {
                    let idtext = id_text(root);
                    match get_path(root, p) {
                        None => {}
                        Some(Bson::Array(arr)) => match &op.pull {
                            Some(PullCond::Value(pred)) => {
                                arr.retain(|e| !query::value_matches(pred, e))
                            }
                            Some(PullCond::Doc(node)) => arr.retain(|e| match e {
                                Bson::Document(d) => !node.matches(d),
                                _ => true,
                            }),
                            None => {}
                        },
                        Some(_) => {
                            return Err(format!(
                                "ERR Cannot apply $pull to a non-array value in document {idtext}"
                            ))
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn zero_like(v: &Bson) -> Bson {
    match v {
        Bson::Int32(_) => Bson::Int32(0),
        Bson::Int64(_) => Bson::Int64(0),
        Bson::Decimal128(_) => "0"
            .parse()
            .map(Bson::Decimal128)
            .unwrap_or(Bson::Double(0.0)),
        _ => Bson::Double(0.0),
    }
}

/// The document an upsert starts from: the filter's equality fields (dotted paths create
/// subdocuments).
pub fn upsert_base(filter: &query::Node) -> Result<Document> {
    let mut eqs = Vec::new();
    filter.equalities(&mut eqs);
    let mut root = Bson::Document(Document::new());
    for (p, v) in eqs {
        set_path(&mut root, &p, v)?;
    }
    match root {
        Bson::Document(d) => Ok(d),
        _ => Ok(Document::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::codec::{doc_json, parse_json};

    fn run(doc: &str, update: &str) -> std::result::Result<String, String> {
        let mut d = parse_json(doc.as_bytes()).expect("doc");
        let u = parse(&parse_json(update.as_bytes()).expect("update"))?;
        u.apply(&mut d, DateTime::from_millis(0), false)?;
        Ok(doc_json(&d))
    }

    #[test]
    fn operators() {
        let cases = [
            (
                r#"{"_id":1}"#,
                r#"{"$set":{"a.b.c":1}}"#,
                r#"{"_id":1,"a":{"b":{"c":1}}}"#,
            ),
            (
                r#"{"_id":1,"a":[1]}"#,
                r#"{"$set":{"a.3":9}}"#,
                r#"{"_id":1,"a":[1,null,null,9]}"#,
            ),
            (
                r#"{"_id":1,"a":[{"x":1}]}"#,
                r#"{"$set":{"a.0.y":2}}"#,
                r#"{"_id":1,"a":[{"x":1,"y":2}]}"#,
            ),
            (
                r#"{"_id":1,"a":[1,2]}"#,
                r#"{"$unset":{"a.0":""}}"#,
                r#"{"_id":1,"a":[null,2]}"#,
            ),
            (
                r#"{"_id":1,"a":1,"b":2}"#,
                r#"{"$unset":{"a":1}}"#,
                r#"{"_id":1,"b":2}"#,
            ),
            (
                r#"{"_id":1,"n":2147483647}"#,
                r#"{"$inc":{"n":1}}"#,
                r#"{"_id":1,"n":2147483648}"#,
            ),
            (
                r#"{"_id":1,"n":1}"#,
                r#"{"$inc":{"n":0.5}}"#,
                r#"{"_id":1,"n":1.5}"#,
            ),
            (r#"{"_id":1}"#, r#"{"$mul":{"n":5}}"#, r#"{"_id":1,"n":0}"#),
            (
                r#"{"_id":1,"n":3}"#,
                r#"{"$mul":{"n":2}}"#,
                r#"{"_id":1,"n":6}"#,
            ),
            (
                r#"{"_id":1,"n":3}"#,
                r#"{"$min":{"n":"a"}}"#,
                r#"{"_id":1,"n":3}"#,
            ),
            (
                r#"{"_id":1,"n":3}"#,
                r#"{"$max":{"n":"a"}}"#,
                r#"{"_id":1,"n":"a"}"#,
            ),
            (
                r#"{"_id":1,"n":3}"#,
                r#"{"$min":{"n":null}}"#,
                r#"{"_id":1,"n":null}"#,
            ),
            (
                r#"{"_id":1,"a":1,"z":0}"#,
                r#"{"$rename":{"a":"b.c"}}"#,
                r#"{"_id":1,"z":0,"b":{"c":1}}"#,
            ),
            (r#"{"_id":1}"#, r#"{"$rename":{"a":"b"}}"#, r#"{"_id":1}"#),
            (
                r#"{"_id":1,"s":[1]}"#,
                r#"{"$addToSet":{"s":{"$each":[1.0,2,2]}}}"#,
                r#"{"_id":1,"s":[1,2]}"#,
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$push":{"s":[1]}}"#,
                r#"{"_id":1,"s":[[1]]}"#,
            ),
            (
                r#"{"_id":1,"s":[1,2,3,4]}"#,
                r#"{"$pull":{"s":{"$in":[2,4]}}}"#,
                r#"{"_id":1,"s":[1,3]}"#,
            ),
            (
                r#"{"_id":1,"s":[{"a":1,"b":2},{"a":2}]}"#,
                r#"{"$pull":{"s":{"a":1}}}"#,
                r#"{"_id":1,"s":[{"a":2}]}"#,
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$currentDate":{"t":{"$type":"timestamp"}}}"#,
                r#"{"_id":1,"t":{"$timestamp":{"t":0,"i":1}}}"#,
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$currentDate":{"t":true}}"#,
                r#"{"_id":1,"t":{"$date":"1970-01-01T00:00:00Z"}}"#,
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$setOnInsert":{"t":1}}"#,
                r#"{"_id":1}"#,
            ),
            (r#"{"_id":1,"a":1}"#, r#"{"b":2}"#, r#"{"_id":1,"b":2}"#),
            (
                r#"{"_id":1,"a":1}"#,
                r#"{"_id":1.0,"b":2}"#,
                r#"{"_id":1,"b":2}"#,
            ),
        ];
        for (doc, upd, want) in cases {
            assert_eq!(run(doc, upd).as_deref(), Ok(want), "{upd} on {doc}");
        }
    }

    #[test]
    fn refusals() {
        let cases = [
            (
                r#"{"_id":1,"a":"x"}"#,
                r#"{"$inc":{"a":1}}"#,
                "ERR Cannot apply $inc to a value of non-numeric type",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$inc":{"a":"x"}}"#,
                "ERR Cannot increment with non-numeric argument",
            ),
            (
                r#"{"_id":1,"a":1}"#,
                r#"{"$push":{"a":1}}"#,
                "ERR The field 'a' must be an array",
            ),
            (
                r#"{"_id":1,"a":1}"#,
                r#"{"$set":{"a.b":1}}"#,
                "ERR Cannot create field 'b'",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$set":{"a":1},"$inc":{"a":1}}"#,
                "ERR Updating the path 'a' would create a conflict",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$set":{"_id":2}}"#,
                "ERR Performing an update on the path '_id'",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$unset":{"_id":1}}"#,
                "ERR Performing an update on the path '_id'",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$set":{"a.$":1}}"#,
                "ERR The update path 'a.$'",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$rename":{"a":"a.b"}}"#,
                "ERR The source and target field for $rename must not be on the same path",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$push":{"a":{"$slice":1,"$each":[1]}}}"#,
                "ERR Unsupported modifier $slice",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$set":{"a":1},"b":1}"#,
                "ERR Unknown modifier: b",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"a":1,"$set":{"b":1}}"#,
                "ERR The dollar ($) prefixed field '$set'",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"$set":5}"#,
                "ERR Modifiers operate on fields",
            ),
            (
                r#"{"_id":1}"#,
                r#"{"_id":2}"#,
                "ERR After applying the update, the (immutable) field '_id'",
            ),
            (
                r#"{"_id":1,"a":[1]}"#,
                r#"{"$set":{"a.99999999":1}}"#,
                "ERR array index 99999999 is too large",
            ),
        ];
        for (doc, upd, want) in cases {
            match run(doc, upd) {
                Ok(d) => panic!("{upd} on {doc} gave {d}"),
                Err(e) => assert!(e.starts_with(want), "{upd}: {e}"),
            }
        }
    }

    #[test]
    fn upsert_base_takes_equalities() {
        let f = query::parse(
            &parse_json(br#"{"a":1,"b.c":"x","d":{"$gt":1},"$and":[{"e":2}],"$or":[{"f":3}]}"#)
                .expect("filter"),
        )
        .expect("parses");
        assert_eq!(
            doc_json(&upsert_base(&f).expect("base")),
            r#"{"a":1,"b":{"c":"x"},"e":2,"f":3}"#
        );
    }
}
