//! Aggregation expressions: parsed once per pipeline into an [`Expr`] tree, then evaluated per
//! document. A value is `Option<Bson>`: `None` is a *missing* field, which MongoDB keeps apart
//! from `null` (`$ifNull` replaces both; an object expression drops missing fields; `$push`
//! skips them).

use super::dates;
use super::AggError;
use crate::documents::order;
use bson::{Bson, DateTime, Document};
use std::cmp::Ordering;

/// A parsed expression.
#[derive(Debug, Clone)]
pub enum Expr {
    Literal(Bson),
    /// `"$a.b"`: the path split on dots.
    Field(Vec<String>),
    /// `"$$ROOT"` / `"$$CURRENT"` followed by an optional path.
    Root(Vec<String>),
    /// `"$$NOW"`: the time the pipeline started.
    Now,
    /// `{a: <expr>, b: <expr>}`: a document built field by field.
    Object(Vec<(String, Expr)>),
    Array(Vec<Expr>),
    Op(Op, Vec<Expr>),
    Date {
        part: DatePart,
        date: Box<Expr>,
        tz: Option<Box<Expr>>,
    },
    DateToString {
        format: Option<Box<Expr>>,
        date: Box<Expr>,
        tz: Option<Box<Expr>>,
        on_null: Option<Box<Expr>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatePart {
    Year,
    Month,
    DayOfMonth,
    DayOfWeek,
    DayOfYear,
    Hour,
    Minute,
    Second,
    Millisecond,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Subtract,
    Multiply,
    Divide,
    Mod,
    Concat,
    ToLower,
    ToUpper,
    Substr,
    Cond,
    IfNull,
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Cmp,
    And,
    Or,
    Not,
    In,
    Size,
}

impl Op {
    fn from_name(name: &str) -> Option<Op> {
        Some(match name {
            "$add" => Op::Add,
            "$subtract" => Op::Subtract,
            "$multiply" => Op::Multiply,
            "$divide" => Op::Divide,
            "$mod" => Op::Mod,
            "$concat" => Op::Concat,
            "$toLower" => Op::ToLower,
            "$toUpper" => Op::ToUpper,
            "$substr" | "$substrBytes" => Op::Substr,
            "$cond" => Op::Cond,
            "$ifNull" => Op::IfNull,
            "$eq" => Op::Eq,
            "$ne" => Op::Ne,
            "$gt" => Op::Gt,
            "$gte" => Op::Gte,
            "$lt" => Op::Lt,
            "$lte" => Op::Lte,
            "$cmp" => Op::Cmp,
            "$and" => Op::And,
            "$or" => Op::Or,
            "$not" => Op::Not,
            "$in" => Op::In,
            "$size" => Op::Size,
            _ => return None,
        })
    }

    /// The exact argument count, where the operator has one.
    fn arity(self) -> Option<usize> {
        match self {
            Op::Subtract | Op::Divide | Op::Mod | Op::Eq | Op::Ne | Op::Gt | Op::Gte => Some(2),
            Op::Lt | Op::Lte | Op::Cmp | Op::In => Some(2),
            Op::ToLower | Op::ToUpper | Op::Not | Op::Size => Some(1),
            Op::Substr | Op::Cond => Some(3),
            _ => None,
        }
    }
}

impl DatePart {
    fn from_name(name: &str) -> Option<DatePart> {
        Some(match name {
            "$year" => DatePart::Year,
            "$month" => DatePart::Month,
            "$dayOfMonth" => DatePart::DayOfMonth,
            "$dayOfWeek" => DatePart::DayOfWeek,
            "$dayOfYear" => DatePart::DayOfYear,
            "$hour" => DatePart::Hour,
            "$minute" => DatePart::Minute,
            "$second" => DatePart::Second,
            "$millisecond" => DatePart::Millisecond,
            _ => return None,
        })
    }
}

/// Splits a field path after its `$`, refusing empty components as MongoDB does.
pub fn parse_path(path: &str) -> Result<Vec<String>, AggError> {
    if path.is_empty() {
        return Err(AggError::new(
            "FieldPath cannot be constructed with empty string",
        ));
    }
    let parts: Vec<String> = path.split('.').map(str::to_owned).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(AggError::new(
            "FieldPath field names may not be empty strings.",
        ));
    }
    if parts[0].starts_with('$') {
        return Err(AggError::new(
            "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
        ));
    }
    Ok(parts)
}

impl Expr {
    /// Parses an expression (a field path string, a literal, an operator object, an object
    /// or array of expressions).
    pub fn parse(v: &Bson) -> Result<Expr, AggError> {
        match v {
            Bson::String(s) => {
                if let Some(var) = s.strip_prefix("$$") {
                    let (name, rest) = match var.split_once('.') {
                        Some((n, r)) => (n, Some(r)),
                        None => (var, None),
                    };
                    let path = match rest {
                        Some(r) => parse_path(r)?,
                        None => Vec::new(),
                    };
                    match name {
                        "ROOT" | "CURRENT" => Ok(Expr::Root(path)),
                        "NOW" if path.is_empty() => Ok(Expr::Now),
                        _ => Err(AggError::new(format!("Use of undefined variable: {name}"))),
                    }
                } else if let Some(path) = s.strip_prefix('$') {
                    Ok(Expr::Field(parse_path(path)?))
                } else {
                    Ok(Expr::Literal(v.clone()))
                }
            }
            Bson::Array(items) => Ok(Expr::Array(
                items.iter().map(Expr::parse).collect::<Result<_, _>>()?,
            )),
            Bson::Document(d) => Self::parse_object(d),
            other => Ok(Expr::Literal(other.clone())),
        }
    }

    fn parse_object(d: &Document) -> Result<Expr, AggError> {
        let Some((first, arg)) = d.iter().next() else {
            return Ok(Expr::Object(Vec::new()));
        };
        if !first.starts_with('$') {
            let mut fields = Vec::with_capacity(d.len());
            for (k, v) in d {
                if k.starts_with('$') {
                    return Err(AggError::new(format!(
                        "an expression operator specification must contain exactly one field, found 2 fields in: {}",
                        Bson::Document(d.clone()).into_relaxed_extjson()
                    )));
                }
                if k.contains('.') {
                    return Err(AggError::new(
                        "FieldPath field names may not contain '.'. Consider using $getField or $setField.",
                    ));
                }
                fields.push((k.clone(), Expr::parse(v)?));
            }
            return Ok(Expr::Object(fields));
        }
        if d.len() != 1 {
            return Err(AggError::new(format!(
                "an expression specification must contain exactly one field, the name of the expression. Found {} fields in {}",
                d.len(),
                Bson::Document(d.clone()).into_relaxed_extjson()
            )));
        }
        let name = first.as_str();
        if name == "$literal" {
            return Ok(Expr::Literal(arg.clone()));
        }
        if let Some(part) = DatePart::from_name(name) {
            return Self::parse_date_part(name, part, arg);
        }
        if name == "$dateToString" {
            return Self::parse_date_to_string(arg);
        }
        let Some(op) = Op::from_name(name) else {
            return Err(AggError::new(format!("Unrecognized expression '{name}'")));
        };
        if op == Op::Cond {
            if let Bson::Document(spec) = arg {
                return Self::parse_cond_object(spec);
            }
        }
        let args: Vec<Expr> = match arg {
            Bson::Array(items) => items.iter().map(Expr::parse).collect::<Result<_, _>>()?,
            single => vec![Expr::parse(single)?],
        };
        if let Some(n) = op.arity() {
            if args.len() != n {
                return Err(AggError::new(format!(
                    "Expression {name} takes exactly {n} arguments. {} were passed in.",
                    args.len()
                )));
            }
        }
        if op == Op::IfNull && args.len() < 2 {
            return Err(AggError::new(
                "$ifNull needs at least two arguments, had: ".to_string() + &args.len().to_string(),
            ));
        }
        Ok(Expr::Op(op, args))
    }

    fn parse_cond_object(spec: &Document) -> Result<Expr, AggError> {
        let (mut i, mut t, mut e) = (None, None, None);
        for (k, v) in spec {
            let slot = match k.as_str() {
                "if" => &mut i,
                "then" => &mut t,
                "else" => &mut e,
                other => {
                    return Err(AggError::new(format!(
                        "Unrecognized parameter to $cond: {other}"
                    )))
                }
            };
            *slot = Some(Expr::parse(v)?);
        }
        match (i, t, e) {
            (Some(i), Some(t), Some(e)) => Ok(Expr::Op(Op::Cond, vec![i, t, e])),
            (None, _, _) => Err(AggError::new("Missing 'if' parameter to $cond")),
            (_, None, _) => Err(AggError::new("Missing 'then' parameter to $cond")),
            _ => Err(AggError::new("Missing 'else' parameter to $cond")),
        }
    }

    fn parse_date_part(name: &str, part: DatePart, arg: &Bson) -> Result<Expr, AggError> {
        // `{$year: {date: <expr>, timezone: <expr>}}` is the long form; any other object is an
        // expression producing the date.
        if let Bson::Document(d) = arg {
            if d.keys().next().is_some_and(|k| !k.starts_with('$')) {
                let mut date = None;
                let mut tz = None;
                for (k, v) in d {
                    match k.as_str() {
                        "date" => date = Some(Box::new(Expr::parse(v)?)),
                        "timezone" => tz = Some(Box::new(Expr::parse(v)?)),
                        other => {
                            return Err(AggError::new(format!(
                                "unrecognized option to {name}: \"{other}\". Options must be one of date, timezone."
                            )))
                        }
                    }
                }
                let Some(date) = date else {
                    return Err(AggError::new(format!("missing 'date' argument to {name}")));
                };
                return Ok(Expr::Date { part, date, tz });
            }
        }
        let date = match arg {
            Bson::Array(items) if items.len() == 1 => Expr::parse(&items[0])?,
            Bson::Array(items) => {
                return Err(AggError::new(format!(
                    "Expression {name} takes exactly 1 arguments. {} were passed in.",
                    items.len()
                )))
            }
            other => Expr::parse(other)?,
        };
        Ok(Expr::Date {
            part,
            date: Box::new(date),
            tz: None,
        })
    }

    fn parse_date_to_string(arg: &Bson) -> Result<Expr, AggError> {
        let Bson::Document(d) = arg else {
            return Err(AggError::new(
                "$dateToString only supports an object as its argument",
            ));
        };
        let (mut format, mut date, mut tz, mut on_null) = (None, None, None, None);
        for (k, v) in d {
            match k.as_str() {
                "format" => {
                    if let Bson::String(f) = v {
                        dates::validate_format(f).map_err(AggError::new)?;
                    }
                    format = Some(Box::new(Expr::parse(v)?));
                }
                "date" => date = Some(Box::new(Expr::parse(v)?)),
                "timezone" => tz = Some(Box::new(Expr::parse(v)?)),
                "onNull" => on_null = Some(Box::new(Expr::parse(v)?)),
                other => {
                    return Err(AggError::new(format!(
                        "Unrecognized argument to $dateToString: {other}"
                    )))
                }
            }
        }
        let Some(date) = date else {
            return Err(AggError::new("Missing 'date' parameter to $dateToString"));
        };
        Ok(Expr::DateToString {
            format,
            date,
            tz,
            on_null,
        })
    }

    /// Evaluates against `doc` at time `now`.
    pub fn eval(&self, doc: &Document, now: DateTime) -> Result<Option<Bson>, AggError> {
        match self {
            Expr::Literal(v) => Ok(Some(v.clone())),
            Expr::Field(path) => Ok(get_path(doc, path)),
            Expr::Root(path) if path.is_empty() => Ok(Some(Bson::Document(doc.clone()))),
            Expr::Root(path) => Ok(get_path(doc, path)),
            Expr::Now => Ok(Some(Bson::DateTime(now))),
            Expr::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(doc, now)? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(out)))
            }
            Expr::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    out.push(e.eval(doc, now)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Op(op, args) => eval_op(*op, args, doc, now),
            Expr::Date { part, date, tz } => {
                let Some(ms) = date_arg(date.eval(doc, now)?, part.name())? else {
                    return Ok(Some(Bson::Null));
                };
                let Some(offset) = tz_arg(tz, doc, now)? else {
                    return Ok(Some(Bson::Null));
                };
                let p = dates::parts(ms, offset);
                Ok(Some(match part {
                    DatePart::Year => int_value(p.year),
                    DatePart::Month => Bson::Int32(p.month as i32),
                    DatePart::DayOfMonth => Bson::Int32(p.day as i32),
                    DatePart::DayOfWeek => Bson::Int32(p.day_of_week as i32),
                    DatePart::DayOfYear => Bson::Int32(p.day_of_year as i32),
                    DatePart::Hour => Bson::Int32(p.hour as i32),
                    DatePart::Minute => Bson::Int32(p.minute as i32),
                    DatePart::Second => Bson::Int32(p.second as i32),
                    DatePart::Millisecond => Bson::Int32(p.millisecond as i32),
                }))
            }
            Expr::DateToString {
                format,
                date,
                tz,
                on_null,
            } => {
                let d = date.eval(doc, now)?;
                let Some(ms) = date_arg(d, "$dateToString")? else {
                    return match on_null {
                        Some(e) => e.eval(doc, now),
                        None => Ok(Some(Bson::Null)),
                    };
                };
                let Some(offset) = tz_arg(tz, doc, now)? else {
                    return Ok(Some(Bson::Null));
                };
                let fmt = match format {
                    None => "%Y-%m-%dT%H:%M:%S.%LZ".to_string(),
                    Some(f) => match f.eval(doc, now)? {
                        Some(Bson::String(s)) => {
                            dates::validate_format(&s).map_err(AggError::new)?;
                            s
                        }
                        None | Some(Bson::Null) => return Ok(Some(Bson::Null)),
                        Some(other) => {
                            return Err(AggError::new(format!(
                                "$dateToString requires that 'format' be a string, found: {} with value {}",
                                type_name(Some(&other)),
                                other.into_relaxed_extjson()
                            )))
                        }
                    },
                };
                Ok(Some(Bson::String(dates::format(&fmt, ms, offset))))
            }
        }
    }

    /// Adds the top-level fields the expression reads to `out`; false when it reads the
    /// whole document (`$$ROOT`).
    pub fn fields(&self, out: &mut Vec<String>) -> bool {
        match self {
            Expr::Literal(_) | Expr::Now => true,
            Expr::Field(p) => {
                out.push(p[0].clone());
                true
            }
            Expr::Root(_) => false,
            Expr::Object(fs) => fs.iter().all(|(_, e)| e.fields(out)),
            Expr::Array(items) | Expr::Op(_, items) => items.iter().all(|e| e.fields(out)),
            Expr::Date { date, tz, .. } => {
                date.fields(out) && tz.as_ref().is_none_or(|t| t.fields(out))
            }
            Expr::DateToString {
                format,
                date,
                tz,
                on_null,
            } => {
                date.fields(out)
                    && [format, tz, on_null]
                        .into_iter()
                        .all(|e| e.as_ref().is_none_or(|e| e.fields(out)))
            }
        }
    }

    /// Truthiness of the value (`$cond`, `$and`, `$or`, `$not`).
    pub fn eval_bool(&self, doc: &Document, now: DateTime) -> Result<bool, AggError> {
        Ok(truthy(self.eval(doc, now)?.as_ref()))
    }
}

impl DatePart {
    fn name(self) -> &'static str {
        match self {
            DatePart::Year => "$year",
            DatePart::Month => "$month",
            DatePart::DayOfMonth => "$dayOfMonth",
            DatePart::DayOfWeek => "$dayOfWeek",
            DatePart::DayOfYear => "$dayOfYear",
            DatePart::Hour => "$hour",
            DatePart::Minute => "$minute",
            DatePart::Second => "$second",
            DatePart::Millisecond => "$millisecond",
        }
    }
}

fn int_value(i: i64) -> Bson {
    match i32::try_from(i) {
        Ok(v) => Bson::Int32(v),
        Err(_) => Bson::Int64(i),
    }
}

/// Milliseconds since the epoch of a date-like argument, `None` for null or missing.
fn date_arg(v: Option<Bson>, op: &str) -> Result<Option<i64>, AggError> {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::DateTime(d)) => Ok(Some(d.timestamp_millis())),
        Some(Bson::ObjectId(o)) => Ok(Some(o.timestamp().timestamp_millis())),
        Some(Bson::Timestamp(t)) => Ok(Some(t.time as i64 * 1000)),
        Some(other) => Err(AggError::new(format!(
            "{op}: can't convert from BSON type {} to Date",
            type_name(Some(&other))
        ))),
    }
}

fn tz_arg(tz: &Option<Box<Expr>>, doc: &Document, now: DateTime) -> Result<Option<i32>, AggError> {
    let Some(e) = tz else { return Ok(Some(0)) };
    match e.eval(doc, now)? {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(s)) => dates::parse_timezone(&s).map(Some).map_err(AggError::new),
        Some(other) => Err(AggError::new(format!(
            "timezone must evaluate to a string, found {}",
            type_name(Some(&other))
        ))),
    }
}

/// MongoDB's type names (`$type`), with `missing` for an absent value.
pub fn type_name(v: Option<&Bson>) -> &'static str {
    let Some(v) = v else { return "missing" };
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// Aggregation truthiness: false, null, undefined, missing and numeric zero are false.
pub fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) | Some(Bson::Boolean(false)) => false,
        Some(Bson::Int32(0)) | Some(Bson::Int64(0)) => false,
        Some(Bson::Double(d)) => *d != 0.0,
        Some(n @ Bson::Decimal128(_)) => order::as_f64(n).is_some_and(|f| f != 0.0),
        _ => true,
    }
}

/// Reads a dotted path the way aggregation field paths do: through subdocuments, and through
/// arrays element by element (yielding an array of the values found; missing ones dropped).
pub fn get_path(doc: &Document, path: &[String]) -> Option<Bson> {
    let (first, rest) = path.split_first()?;
    let v = doc.get(first)?;
    if rest.is_empty() {
        return Some(v.clone());
    }
    path_in_value(v, rest)
}

fn path_in_value(v: &Bson, path: &[String]) -> Option<Bson> {
    match v {
        Bson::Document(d) => get_path(d, path),
        Bson::Array(items) => Some(Bson::Array(
            items
                .iter()
                .filter_map(|item| match item {
                    Bson::Document(_) | Bson::Array(_) => path_in_value(item, path),
                    _ => None,
                })
                .collect(),
        )),
        _ => None,
    }
}

/// Compares two values the way aggregation does: BSON order, with missing below everything
/// (so `$eq: ["$missing", null]` is false, as in MongoDB).
pub fn compare_values(a: Option<&Bson>, b: Option<&Bson>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => order::compare(x, y),
    }
}

fn eval_op(op: Op, args: &[Expr], doc: &Document, now: DateTime) -> Result<Option<Bson>, AggError> {
    let ev = |i: usize| args[i].eval(doc, now);
    match op {
        Op::Eq | Op::Ne | Op::Gt | Op::Gte | Op::Lt | Op::Lte | Op::Cmp => {
            let (a, b) = (ev(0)?, ev(1)?);
            let o = compare_values(a.as_ref(), b.as_ref());
            Ok(Some(match op {
                Op::Eq => Bson::Boolean(o == Ordering::Equal),
                Op::Ne => Bson::Boolean(o != Ordering::Equal),
                Op::Gt => Bson::Boolean(o == Ordering::Greater),
                Op::Gte => Bson::Boolean(o != Ordering::Less),
                Op::Lt => Bson::Boolean(o == Ordering::Less),
                Op::Lte => Bson::Boolean(o != Ordering::Greater),
                _ => Bson::Int32(o as i32),
            }))
        }
        Op::And => {
            for a in args {
                if !a.eval_bool(doc, now)? {
                    return Ok(Some(Bson::Boolean(false)));
                }
            }
            Ok(Some(Bson::Boolean(true)))
        }
        Op::Or => {
            for a in args {
                if a.eval_bool(doc, now)? {
                    return Ok(Some(Bson::Boolean(true)));
                }
            }
            Ok(Some(Bson::Boolean(false)))
        }
        Op::Not => Ok(Some(Bson::Boolean(!args[0].eval_bool(doc, now)?))),
        Op::Cond => {
            if args[0].eval_bool(doc, now)? {
                ev(1)
            } else {
                ev(2)
            }
        }
        Op::IfNull => {
            let last = args.len() - 1;
            for a in &args[..last] {
                match a.eval(doc, now)? {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => continue,
                    v => return Ok(v),
                }
            }
            args[last].eval(doc, now)
        }
        Op::In => {
            let needle = ev(0)?;
            match ev(1)? {
                Some(Bson::Array(items)) => {
                    Ok(Some(Bson::Boolean(items.iter().any(|x| {
                        compare_values(needle.as_ref(), Some(x)) == Ordering::Equal
                    }))))
                }
                other => Err(AggError::new(format!(
                    "$in requires an array as a second argument, found: {}",
                    type_name(other.as_ref())
                ))),
            }
        }
        Op::Size => match ev(0)? {
            Some(Bson::Array(items)) => Ok(Some(int_value(items.len() as i64))),
            other => Err(AggError::new(format!(
                "The argument to $size must be an array. Type of argument is: {}",
                type_name(other.as_ref())
            ))),
        },
        Op::Concat => {
            let mut out = String::new();
            for a in args {
                match a.eval(doc, now)? {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                    Some(Bson::String(s)) => out.push_str(&s),
                    Some(other) => {
                        return Err(AggError::new(format!(
                            "$concat only supports strings, not {}",
                            type_name(Some(&other))
                        )))
                    }
                }
            }
            Ok(Some(Bson::String(out)))
        }
        Op::ToLower | Op::ToUpper => {
            let s = coerce_to_string(
                ev(0)?,
                if op == Op::ToLower {
                    "$toLower"
                } else {
                    "$toUpper"
                },
            )?;
            Ok(Some(Bson::String(if op == Op::ToLower {
                s.to_ascii_lowercase()
            } else {
                s.to_ascii_uppercase()
            })))
        }
        Op::Substr => {
            let s = coerce_to_string(ev(0)?, "$substrBytes")?;
            let start = ev(1)?;
            let len = ev(2)?;
            let start = match start.as_ref().and_then(order::as_f64) {
                Some(f) if f >= 0.0 => f as usize,
                Some(_) => 0,
                None => {
                    return Err(AggError::new(format!(
                        "$substrBytes: starting index must be a numeric type (is BSON type {})",
                        type_name(start.as_ref())
                    )))
                }
            };
            let len = match len.as_ref().and_then(order::as_f64) {
                Some(f) if f >= 0.0 => f as usize,
                Some(_) => usize::MAX,
                None => {
                    return Err(AggError::new(format!(
                        "$substrBytes: length must be a numeric type (is BSON type {})",
                        type_name(len.as_ref())
                    )))
                }
            };
            let bytes = s.as_bytes();
            if start >= bytes.len() {
                return Ok(Some(Bson::String(String::new())));
            }
            let end = start.saturating_add(len).min(bytes.len());
            if !s.is_char_boundary(start) {
                return Err(AggError::new(
                    "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
                ));
            }
            if !s.is_char_boundary(end) {
                return Err(AggError::new(
                    "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
                ));
            }
            Ok(Some(Bson::String(s[start..end].to_string())))
        }
        Op::Add => {
            let mut acc = Num::Int(0);
            let mut date: Option<i64> = None;
            for a in args {
                match a.eval(doc, now)? {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                    Some(Bson::DateTime(d)) => {
                        if date.is_some() {
                            return Err(AggError::new(
                                "only one date allowed in an $add expression",
                            ));
                        }
                        date = Some(d.timestamp_millis());
                    }
                    Some(v) => match Num::of(&v) {
                        Some(n) => acc = acc.plus(n),
                        None => {
                            return Err(AggError::new(format!(
                                "$add only supports numeric or date types, not {}",
                                type_name(Some(&v))
                            )))
                        }
                    },
                }
            }
            Ok(Some(match date {
                Some(ms) => Bson::DateTime(DateTime::from_millis(
                    ms.saturating_add(acc.round_millis()?),
                )),
                None => acc.into_bson(),
            }))
        }
        Op::Multiply => {
            let mut acc = Num::Int(1);
            for a in args {
                match a.eval(doc, now)? {
                    None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
                    Some(v) => match Num::of(&v) {
                        Some(n) => acc = acc.times(n),
                        None => {
                            return Err(AggError::new(format!(
                                "$multiply only supports numeric types, not {}",
                                type_name(Some(&v))
                            )))
                        }
                    },
                }
            }
            Ok(Some(acc.into_bson()))
        }
        Op::Subtract => {
            let (a, b) = (ev(0)?, ev(1)?);
            let (a, b) = match (a, b) {
                (None | Some(Bson::Null) | Some(Bson::Undefined), _)
                | (_, None | Some(Bson::Null) | Some(Bson::Undefined)) => {
                    return Ok(Some(Bson::Null))
                }
                (Some(a), Some(b)) => (a, b),
            };
            match (&a, &b) {
                (Bson::DateTime(x), Bson::DateTime(y)) => Ok(Some(Bson::Int64(
                    x.timestamp_millis().saturating_sub(y.timestamp_millis()),
                ))),
                (Bson::DateTime(x), n) => match Num::of(n) {
                    Some(n) => Ok(Some(Bson::DateTime(DateTime::from_millis(
                        x.timestamp_millis().saturating_sub(n.round_millis()?),
                    )))),
                    None => Err(subtract_error(&a, &b)),
                },
                (x, y) => match (Num::of(x), Num::of(y)) {
                    (Some(x), Some(y)) => Ok(Some(x.minus(y).into_bson())),
                    _ => Err(subtract_error(&a, &b)),
                },
            }
        }
        Op::Divide | Op::Mod => {
            let name = if op == Op::Divide { "$divide" } else { "$mod" };
            let (a, b) = (ev(0)?, ev(1)?);
            let (a, b) = match (a, b) {
                (None | Some(Bson::Null) | Some(Bson::Undefined), _)
                | (_, None | Some(Bson::Null) | Some(Bson::Undefined)) => {
                    return Ok(Some(Bson::Null))
                }
                (Some(a), Some(b)) => (a, b),
            };
            let (Some(x), Some(y)) = (Num::of(&a), Num::of(&b)) else {
                return Err(AggError::new(format!(
                    "{name} only supports numeric types, not {} and {}",
                    type_name(Some(&a)),
                    type_name(Some(&b))
                )));
            };
            if y.is_zero() {
                return Err(AggError::new(format!("can't {name} by zero")));
            }
            if op == Op::Divide {
                return Ok(Some(Bson::Double(x.as_f64() / y.as_f64())));
            }
            Ok(Some(match (x, y) {
                (Num::Int(i), Num::Int(j)) => {
                    let wide = matches!(a, Bson::Int64(_)) || matches!(b, Bson::Int64(_));
                    let r = i.checked_rem(j).unwrap_or(0);
                    if wide {
                        Bson::Int64(r)
                    } else {
                        int_value(r)
                    }
                }
                (x, y) => Bson::Double(x.as_f64() % y.as_f64()),
            }))
        }
    }
}

fn subtract_error(a: &Bson, b: &Bson) -> AggError {
    AggError::new(format!(
        "can't $subtract {} from {}",
        type_name(Some(b)),
        type_name(Some(a))
    ))
}

fn coerce_to_string(v: Option<Bson>, op: &str) -> Result<String, AggError> {
    Ok(match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => String::new(),
        Some(Bson::String(s)) | Some(Bson::Symbol(s)) => s,
        Some(Bson::Int32(i)) => i.to_string(),
        Some(Bson::Int64(i)) => i.to_string(),
        Some(Bson::Double(d)) => d.to_string(),
        Some(Bson::Decimal128(d)) => d.to_string(),
        Some(Bson::DateTime(d)) => dates::format("%Y-%m-%dT%H:%M:%S.%LZ", d.timestamp_millis(), 0),
        Some(other) => {
            return Err(AggError::new(format!(
                "{op}: can't convert from BSON type {} to String",
                type_name(Some(&other))
            )))
        }
    })
}

/// Arithmetic with MongoDB's widening: Int32 op Int32 stays Int32 when it fits, then Int64,
/// then Double on overflow; any Double makes a Double.
#[derive(Debug, Clone, Copy)]
pub enum Num {
    /// An integer; `wide` is tracked by the caller through [`Num::into_bson`]'s size check.
    Int(i64),
    Long(i64),
    Double(f64),
}

impl Num {
    pub fn of(v: &Bson) -> Option<Num> {
        match v {
            Bson::Int32(i) => Some(Num::Int(*i as i64)),
            Bson::Int64(i) => Some(Num::Long(*i)),
            Bson::Double(d) => Some(Num::Double(*d)),
            Bson::Decimal128(_) => order::as_f64(v).map(Num::Double),
            _ => None,
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) | Num::Long(i) => i as f64,
            Num::Double(d) => d,
        }
    }

    fn is_zero(self) -> bool {
        self.as_f64() == 0.0
    }

    fn combine(
        self,
        other: Num,
        int_op: fn(i64, i64) -> Option<i64>,
        f: fn(f64, f64) -> f64,
    ) -> Num {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => match int_op(a, b) {
                Some(r) => Num::Int(r),
                None => Num::Double(f(a as f64, b as f64)),
            },
            (Num::Int(a) | Num::Long(a), Num::Int(b) | Num::Long(b)) => match int_op(a, b) {
                Some(r) => Num::Long(r),
                None => Num::Double(f(a as f64, b as f64)),
            },
            (a, b) => Num::Double(f(a.as_f64(), b.as_f64())),
        }
    }

    pub fn plus(self, other: Num) -> Num {
        self.combine(other, i64::checked_add, |a, b| a + b)
    }

    pub fn minus(self, other: Num) -> Num {
        self.combine(other, i64::checked_sub, |a, b| a - b)
    }

    pub fn times(self, other: Num) -> Num {
        self.combine(other, i64::checked_mul, |a, b| a * b)
    }

    /// A number added to a date: milliseconds, rounded half to even as MongoDB does.
    fn round_millis(self) -> Result<i64, AggError> {
        match self {
            Num::Int(i) | Num::Long(i) => Ok(i),
            Num::Double(d) if d.is_finite() && d.abs() < 9.2e18 => Ok(d.round_ties_even() as i64),
            Num::Double(_) => Err(AggError::new("Can't coerce out of range value to long")),
        }
    }

    pub fn into_bson(self) -> Bson {
        match self {
            Num::Int(i) => int_value(i),
            Num::Long(i) => Bson::Int64(i),
            Num::Double(d) => Bson::Double(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn eval(expr: Bson, d: &Document) -> Result<Option<Bson>, AggError> {
        Expr::parse(&expr)?.eval(d, DateTime::from_millis(0))
    }

    fn ok(expr: Bson, d: &Document) -> Bson {
        eval(expr, d)
            .expect("eval")
            .unwrap_or(Bson::String("<missing>".into()))
    }

    fn date(s: &str) -> DateTime {
        DateTime::parse_rfc3339_str(s).expect("date")
    }

    #[test]
    fn field_paths_through_arrays_and_missing() {
        let d = doc! {"a": {"b": 1}, "arr": [{"x": 1}, {"y": 2}, {"x": [3]}, 5]};
        assert_eq!(ok(Bson::String("$a.b".into()), &d), Bson::Int32(1));
        assert_eq!(
            ok(Bson::String("$arr.x".into()), &d),
            Bson::Array(vec![Bson::Int32(1), Bson::Array(vec![Bson::Int32(3)])])
        );
        assert_eq!(eval(Bson::String("$nope".into()), &d).unwrap(), None);
        assert_eq!(
            ok(Bson::String("plain".into()), &d),
            Bson::String("plain".into())
        );
        assert_eq!(
            ok(bson::bson!({"$literal": "$a"}), &d),
            Bson::String("$a".into())
        );
        // Object expressions drop missing fields; arrays turn them into null.
        assert_eq!(
            ok(bson::bson!({"p": "$a.b", "q": "$nope"}), &d),
            Bson::Document(doc! {"p": 1})
        );
        assert_eq!(
            ok(bson::bson!(["$nope"]), &d),
            Bson::Array(vec![Bson::Null])
        );
        assert!(Expr::parse(&Bson::String("$".into())).is_err());
        assert!(Expr::parse(&Bson::String("$a..b".into())).is_err());
    }

    #[test]
    fn date_parts_in_utc() {
        let d = doc! {"t": date("2000-10-10T20:55:36.250Z")};
        assert_eq!(ok(bson::bson!({"$year": "$t"}), &d), Bson::Int32(2000));
        assert_eq!(ok(bson::bson!({"$month": "$t"}), &d), Bson::Int32(10));
        assert_eq!(
            ok(bson::bson!({"$dayOfMonth": ["$t"]}), &d),
            Bson::Int32(10)
        );
        assert_eq!(ok(bson::bson!({"$dayOfWeek": "$t"}), &d), Bson::Int32(3));
        assert_eq!(ok(bson::bson!({"$dayOfYear": "$t"}), &d), Bson::Int32(284));
        assert_eq!(ok(bson::bson!({"$hour": "$t"}), &d), Bson::Int32(20));
        assert_eq!(ok(bson::bson!({"$minute": "$t"}), &d), Bson::Int32(55));
        assert_eq!(ok(bson::bson!({"$second": "$t"}), &d), Bson::Int32(36));
        assert_eq!(
            ok(bson::bson!({"$millisecond": "$t"}), &d),
            Bson::Int32(250)
        );
        assert_eq!(
            ok(
                bson::bson!({"$hour": {"date": "$t", "timezone": "+05:00"}}),
                &d
            ),
            Bson::Int32(1)
        );
        assert_eq!(ok(bson::bson!({"$year": "$missing"}), &d), Bson::Null);
        let e = eval(bson::bson!({"$year": "abc"}), &d).unwrap_err();
        assert_eq!(e.0, "$year: can't convert from BSON type string to Date");
        assert_eq!(
            ok(
                bson::bson!({"$dateToString": {"format": "%Y-%m-%d %H:%M:%S.%L %j %w %u %%", "date": "$t"}}),
                &d
            ),
            Bson::String("2000-10-10 20:55:36.250 284 3 2 %".into())
        );
        assert_eq!(
            ok(bson::bson!({"$dateToString": {"date": "$t"}}), &d),
            Bson::String("2000-10-10T20:55:36.250Z".into())
        );
        assert_eq!(
            ok(
                bson::bson!({"$dateToString": {"date": "$nope", "onNull": "none"}}),
                &d
            ),
            Bson::String("none".into())
        );
        assert!(
            Expr::parse(&bson::bson!({"$dateToString": {"format": "%Q", "date": "$t"}})).is_err()
        );
    }

    #[test]
    fn arithmetic_and_dates() {
        let d = doc! {"t": date("2000-10-10T00:00:00Z"), "u": date("2000-10-11T00:00:00Z"), "i": 7, "big": i32::MAX, "s": "x"};
        assert_eq!(ok(bson::bson!({"$add": ["$i", 1]}), &d), Bson::Int32(8));
        assert_eq!(
            ok(bson::bson!({"$add": ["$big", 1]}), &d),
            Bson::Int64(i32::MAX as i64 + 1)
        );
        assert_eq!(
            ok(bson::bson!({"$add": ["$i", 0.5]}), &d),
            Bson::Double(7.5)
        );
        assert_eq!(
            ok(bson::bson!({"$add": ["$t", 1000]}), &d),
            Bson::DateTime(date("2000-10-10T00:00:01Z"))
        );
        assert_eq!(
            ok(bson::bson!({"$subtract": ["$u", "$t"]}), &d),
            Bson::Int64(86_400_000)
        );
        assert_eq!(
            ok(bson::bson!({"$subtract": ["$u", 86_400_000i64]}), &d),
            Bson::DateTime(date("2000-10-10T00:00:00Z"))
        );
        assert_eq!(
            ok(bson::bson!({"$add": ["$i", "$missing"]}), &d),
            Bson::Null
        );
        assert_eq!(
            eval(bson::bson!({"$add": ["$t", "$u"]}), &d).unwrap_err().0,
            "only one date allowed in an $add expression"
        );
        assert_eq!(
            eval(bson::bson!({"$add": ["$s", 1]}), &d).unwrap_err().0,
            "$add only supports numeric or date types, not string"
        );
        assert_eq!(
            ok(bson::bson!({"$multiply": ["$i", 3]}), &d),
            Bson::Int32(21)
        );
        assert_eq!(
            ok(bson::bson!({"$divide": ["$i", 2]}), &d),
            Bson::Double(3.5)
        );
        assert_eq!(ok(bson::bson!({"$mod": ["$i", 4]}), &d), Bson::Int32(3));
        assert_eq!(ok(bson::bson!({"$mod": [7.5, 2]}), &d), Bson::Double(1.5));
        assert_eq!(
            eval(bson::bson!({"$divide": ["$i", 0]}), &d).unwrap_err().0,
            "can't $divide by zero"
        );
        assert_eq!(
            eval(bson::bson!({"$subtract": ["$s", 1]}), &d)
                .unwrap_err()
                .0,
            "can't $subtract int from string"
        );
    }

    #[test]
    fn strings_logic_and_comparisons() {
        let d = doc! {"s": "Hello", "n": null, "arr": [1, 2, 3], "z": 0};
        assert_eq!(
            ok(bson::bson!({"$concat": ["$s", "-", "x"]}), &d),
            Bson::String("Hello-x".into())
        );
        assert_eq!(ok(bson::bson!({"$concat": ["$s", "$n"]}), &d), Bson::Null);
        assert_eq!(
            eval(bson::bson!({"$concat": ["$s", 1]}), &d).unwrap_err().0,
            "$concat only supports strings, not int"
        );
        assert_eq!(
            ok(bson::bson!({"$toLower": "$s"}), &d),
            Bson::String("hello".into())
        );
        assert_eq!(
            ok(bson::bson!({"$toUpper": "$missing"}), &d),
            Bson::String("".into())
        );
        assert_eq!(
            ok(bson::bson!({"$substr": ["$s", 1, 3]}), &d),
            Bson::String("ell".into())
        );
        assert_eq!(
            ok(bson::bson!({"$substr": ["$s", 2, -1]}), &d),
            Bson::String("llo".into())
        );
        assert!(eval(bson::bson!({"$substr": ["é", 1, 1]}), &d).is_err());
        assert_eq!(
            ok(bson::bson!({"$cond": [{"$gt": ["$z", -1]}, "a", "b"]}), &d),
            Bson::String("a".into())
        );
        assert_eq!(
            ok(
                bson::bson!({"$cond": {"if": "$z", "then": "a", "else": "b"}}),
                &d
            ),
            Bson::String("b".into())
        );
        assert_eq!(
            ok(bson::bson!({"$ifNull": ["$n", "$missing", "d"]}), &d),
            Bson::String("d".into())
        );
        assert_eq!(
            ok(bson::bson!({"$eq": ["$missing", null]}), &d),
            Bson::Boolean(false)
        );
        assert_eq!(
            ok(bson::bson!({"$eq": ["$n", null]}), &d),
            Bson::Boolean(true)
        );
        assert_eq!(ok(bson::bson!({"$eq": [1, 1.0]}), &d), Bson::Boolean(true));
        assert_eq!(
            ok(bson::bson!({"$lt": ["$s", 5]}), &d),
            Bson::Boolean(false)
        );
        assert_eq!(
            ok(bson::bson!({"$and": [1, "$s"]}), &d),
            Bson::Boolean(true)
        );
        assert_eq!(
            ok(bson::bson!({"$or": ["$z", "$n"]}), &d),
            Bson::Boolean(false)
        );
        assert_eq!(ok(bson::bson!({"$not": ["$z"]}), &d), Bson::Boolean(true));
        assert_eq!(
            ok(bson::bson!({"$in": [2, "$arr"]}), &d),
            Bson::Boolean(true)
        );
        assert_eq!(
            eval(bson::bson!({"$in": [2, "$s"]}), &d).unwrap_err().0,
            "$in requires an array as a second argument, found: string"
        );
        assert_eq!(ok(bson::bson!({"$size": "$arr"}), &d), Bson::Int32(3));
        assert_eq!(
            eval(bson::bson!({"$size": "$missing"}), &d).unwrap_err().0,
            "The argument to $size must be an array. Type of argument is: missing"
        );
    }

    #[test]
    fn parse_errors() {
        let e = Expr::parse(&bson::bson!({"$frobnicate": 1})).unwrap_err();
        assert_eq!(e.0, "Unrecognized expression '$frobnicate'");
        let e = Expr::parse(&bson::bson!({"$year": ["$a", "$b"]})).unwrap_err();
        assert_eq!(
            e.0,
            "Expression $year takes exactly 1 arguments. 2 were passed in."
        );
        let e = Expr::parse(&bson::bson!({"$eq": [1]})).unwrap_err();
        assert_eq!(
            e.0,
            "Expression $eq takes exactly 2 arguments. 1 were passed in."
        );
        assert!(Expr::parse(&bson::bson!({"$add": [1], "$x": 2})).is_err());
        assert!(Expr::parse(&bson::bson!({"a": 1, "$x": 2})).is_err());
        assert!(Expr::parse(&Bson::String("$$FOO".into())).is_err());
    }
}
