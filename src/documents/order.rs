//! MongoDB's BSON comparison order: the one ordering used by query comparisons (`$lt`, `$gte`,
//! ...), sort, index keys and `$min`/`$max`, so that an index scan and a collection scan can
//! never disagree about which documents lie in a range.
//!
//! Types compare by their canonical rank first (MinKey < Null < Numbers < String < Object <
//! Array < BinData < ObjectId < Boolean < Date < Timestamp < Regex < MaxKey); numbers compare
//! by value across Int32, Int64, Double and Decimal128.

use bson::Bson;
use std::cmp::Ordering;

/// The rank of strings (for the code that reads a string's bytes without building a
/// `Bson`).
pub const STRING_RANK: u8 = 15;

/// The canonical type rank of a value (MongoDB's `canonicalizeBSONType`). Values of equal rank
/// are comparable; values of different ranks order by rank (type bracketing in queries uses
/// this too: `{$gt: 5}` only matches numbers).
pub fn rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 0,
        Bson::Undefined | Bson::Null => 5,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 10,
        Bson::Symbol(_) | Bson::String(_) => STRING_RANK,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// A number as f64 (Decimal128 through its decimal text), or `None` for non-numbers.
pub fn as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => Some(d.to_string().parse::<f64>().unwrap_or(f64::NAN)),
        _ => None,
    }
}

/// Compares two numbers exactly where both are integers (an i64 does not survive a trip
/// through f64 above 2^53), by value otherwise. NaN sorts below every other number and equals
/// itself, as in MongoDB.
pub fn compare_numbers(a: &Bson, b: &Bson) -> Ordering {
    let int = |v: &Bson| match v {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        _ => None,
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        return x.cmp(&y);
    }
    let x = as_f64(a).unwrap_or(f64::NAN);
    let y = as_f64(b).unwrap_or(f64::NAN);
    match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // An i64 against a double: compare in f64 unless that loses the answer.
        (false, false) => match (int(a), int(b)) {
            (Some(i), None) => cmp_i64_f64(i, y),
            (None, Some(j)) => cmp_i64_f64(j, x).reverse(),
            _ => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        },
    }
}

fn cmp_i64_f64(i: i64, d: f64) -> Ordering {
    // 2^63 and beyond (the literal is exactly 2^63 as a double) is out of i64 range; otherwise compare the integer parts exactly
    // and break ties on the fraction.
    if d >= 9.223_372_036_854_776e18 {
        return Ordering::Less;
    }
    if d < -9.223_372_036_854_776e18 {
        return Ordering::Greater;
    }
    let t = d.trunc();
    match i.cmp(&(t as i64)) {
        Ordering::Equal => 0.0f64.partial_cmp(&(d - t)).unwrap_or(Ordering::Equal),
        o => o,
    }
}

/// MongoDB's total order over BSON values (`BSONElement::woCompare` without field names).
pub fn compare(a: &Bson, b: &Bson) -> Ordering {
    let (ra, rb) = (rank(a), rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        _ if ra == 10 => compare_numbers(a, b),
        (Bson::Null | Bson::Undefined, _) | (Bson::MinKey, _) | (Bson::MaxKey, _) => {
            Ordering::Equal
        }
        _ if ra == 15 => str_of(a).as_bytes().cmp(str_of(b).as_bytes()),
        (Bson::Document(x), Bson::Document(y)) => compare_documents(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let o = compare_elements("", p, "", q);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .as_str()
            .cmp(y.pattern.as_str())
            .then_with(|| x.options.as_str().cmp(y.options.as_str())),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.cmp(y),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x.code.cmp(&y.code),
        (Bson::DbPointer(_), Bson::DbPointer(_)) => Ordering::Equal,
        _ => Ordering::Equal,
    }
}

fn str_of(v: &Bson) -> &str {
    match v {
        Bson::String(s) | Bson::Symbol(s) => s,
        _ => "",
    }
}

/// Element comparison inside objects: type rank, then field name, then value.
fn compare_elements(ka: &str, a: &Bson, kb: &str, b: &Bson) -> Ordering {
    rank(a)
        .cmp(&rank(b))
        .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
        .then_with(|| compare(a, b))
}

/// Object comparison: element by element in stored order, the shorter object first.
pub fn compare_documents(x: &bson::Document, y: &bson::Document) -> Ordering {
    for ((ka, a), (kb, b)) in x.iter().zip(y.iter()) {
        let o = compare_elements(ka, a, kb, b);
        if o != Ordering::Equal {
            return o;
        }
    }
    x.len().cmp(&y.len())
}

/// Equality in MongoDB's sense (`{a: 1}` equals `{a: 1.0}`; field order matters in objects).
pub fn equal(a: &Bson, b: &Bson) -> bool {
    compare(a, b) == Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, DateTime};

    #[test]
    fn type_bracketing_order() {
        let ordered = [
            Bson::MinKey,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-5),
            Bson::Double(1.5),
            Bson::Int64(2),
            Bson::String("a".into()),
            Bson::String("b".into()),
            Bson::Document(doc! {"a": 1}),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(DateTime::from_millis(-1)),
            Bson::DateTime(DateTime::from_millis(0)),
            Bson::MaxKey,
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn numbers_compare_across_types_exactly() {
        assert!(equal(&Bson::Int32(1), &Bson::Double(1.0)));
        assert!(equal(&Bson::Int64(7), &Bson::Int32(7)));
        let big = Bson::Int64(9_007_199_254_740_993); // 2^53 + 1
        assert_eq!(
            compare(&big, &Bson::Double(9_007_199_254_740_992.0)),
            Ordering::Greater
        );
        assert_eq!(compare(&Bson::Int32(2), &Bson::Double(2.5)), Ordering::Less);
        assert_eq!(
            compare(&Bson::Double(-2.5), &Bson::Int32(-2)),
            Ordering::Less
        );
        let dec = Bson::Decimal128("2.50".parse().expect("static decimal"));
        assert!(equal(&dec, &Bson::Double(2.5)));
    }

    #[test]
    fn documents_compare_by_element() {
        let a = Bson::Document(doc! {"a": 1, "b": 2});
        let b = Bson::Document(doc! {"a": 1, "b": 3});
        let c = Bson::Document(doc! {"a": 1});
        assert_eq!(compare(&a, &b), Ordering::Less);
        assert_eq!(compare(&c, &a), Ordering::Less);
        assert!(equal(
            &Bson::Document(doc! {"a": 1}),
            &Bson::Document(doc! {"a": 1.0})
        ));
    }
}
