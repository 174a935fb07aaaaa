//! Dotted paths through subdocuments and arrays, as MongoDB's query language walks them.
//!
//! `a.b` on `{a: [{b: 1}, {b: 2}]}` reaches both `1` and `2`; a numeric component indexes an
//! array (`a.1`) and also names a field of the array's subdocuments; the value at the end of
//! the path is offered whole and, when it is an array, element by element.

use bson::{Bson, Document};

/// One place a path reached.
#[derive(Clone, Copy, Debug)]
pub enum Leaf<'a> {
    /// The path ends at a missing field (or runs through a scalar).
    Missing,
    /// The value at the end of the path.
    Value(&'a Bson),
    /// An element of the array at the end of the path.
    Element(&'a Bson),
}

impl<'a> Leaf<'a> {
    pub fn value(self) -> Option<&'a Bson> {
        match self {
            Leaf::Missing => None,
            Leaf::Value(v) | Leaf::Element(v) => Some(v),
        }
    }
}

/// Splits a dotted path into its components.
pub fn split(path: &str) -> Vec<String> {
    path.split('.').map(str::to_string).collect()
}

/// Calls `f` on the places `path` reaches in `doc` until it returns true; returns whether
/// it did.
pub fn any_in_doc<'a, P: AsRef<str>>(
    doc: &'a Document,
    path: &[P],
    f: &mut dyn FnMut(Leaf<'a>) -> bool,
) -> bool {
    let Some(first) = path.first() else {
        return false;
    };
    match doc.get(first.as_ref()) {
        None => f(Leaf::Missing),
        Some(v) => any_value(v, &path[1..], f),
    }
}

/// Like [`any_in_doc`] from a value already reached.
pub fn any_value<'a, P: AsRef<str>>(
    v: &'a Bson,
    rest: &[P],
    f: &mut dyn FnMut(Leaf<'a>) -> bool,
) -> bool {
    let Some(first) = rest.first() else {
        if f(Leaf::Value(v)) {
            return true;
        }
        if let Bson::Array(a) = v {
            return a.iter().any(|e| f(Leaf::Element(e)));
        }
        return false;
    };
    match v {
        Bson::Document(d) => any_in_doc(d, rest, f),
        Bson::Array(a) => {
            if let Some(i) = array_index(first.as_ref()) {
                if let Some(e) = a.get(i) {
                    if any_value(e, &rest[1..], f) {
                        return true;
                    }
                }
            }
            for e in a {
                if let Bson::Document(d) = e {
                    if any_in_doc(d, rest, f) {
                        return true;
                    }
                }
            }
            false
        }
        _ => f(Leaf::Missing),
    }
}

/// A path component that is an array index: digits only.
pub fn array_index(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Every value the path reaches, arrays at the end expanded into their elements (sort keys).
pub fn values<'a>(doc: &'a Document, path: &[String]) -> (Vec<&'a Bson>, bool) {
    let mut out = Vec::new();
    let mut missing = false;
    any_in_doc(doc, path, &mut |leaf| {
        match leaf {
            Leaf::Missing => missing = true,
            Leaf::Value(v) => {
                if !matches!(v, Bson::Array(_)) {
                    out.push(v)
                }
            }
            Leaf::Element(e) => out.push(e),
        }
        false
    });
    (out, missing)
}

/// The value at an exact path (no array expansion; numeric components index arrays).
pub fn get<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let mut cur = doc.get(path.first()?)?;
    for p in &path[1..] {
        cur = match cur {
            Bson::Document(d) => d.get(p)?,
            Bson::Array(a) => a.get(array_index(p)?)?,
            _ => return None,
        };
    }
    Some(cur)
}
