//! The values an update writes over a field of the stored bytes in place, and the string
//! that stands for the current date: shared by the general path (`codec`, `update`) and the
//! fast JSON readers (`json`), so neither depends on the other for them.

use bson::spec::ElementType;
use bson::Bson;

/// The string that stands for the server's current date.
pub const NOW: &str = "$$NOW";

/// A fixed-width BSON value an update can write over the old value of a field in place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fixed {
    Int32(i32),
    Int64(i64),
    Double(f64),
    Date(i64),
    Bool(bool),
}

impl Fixed {
    /// The value, when it is one of the fixed-width types.
    pub fn of(v: &Bson) -> Option<Fixed> {
        Some(match v {
            Bson::Int32(i) => Fixed::Int32(*i),
            Bson::Int64(i) => Fixed::Int64(*i),
            Bson::Double(d) => Fixed::Double(*d),
            Bson::DateTime(d) => Fixed::Date(d.timestamp_millis()),
            Bson::Boolean(b) => Fixed::Bool(*b),
            _ => return None,
        })
    }

    pub fn element_type(self) -> u8 {
        (match self {
            Fixed::Int32(_) => ElementType::Int32,
            Fixed::Int64(_) => ElementType::Int64,
            Fixed::Double(_) => ElementType::Double,
            Fixed::Date(_) => ElementType::DateTime,
            Fixed::Bool(_) => ElementType::Boolean,
        }) as u8
    }

    pub fn width(self) -> usize {
        match self {
            Fixed::Int32(_) => 4,
            Fixed::Bool(_) => 1,
            _ => 8,
        }
    }

    /// Its BSON bytes, little-endian, in the first `width()` bytes.
    pub fn le_bytes(self) -> [u8; 8] {
        match self {
            Fixed::Int32(i) => (i as i64).to_le_bytes(),
            Fixed::Int64(i) | Fixed::Date(i) => i.to_le_bytes(),
            Fixed::Double(d) => d.to_le_bytes(),
            Fixed::Bool(b) => (b as i64).to_le_bytes(),
        }
    }

    /// A value of the same type read from its BSON bytes.
    pub fn with_bytes(self, b: &[u8; 8]) -> Fixed {
        let wide = i64::from_le_bytes(*b);
        match self {
            Fixed::Int32(_) => Fixed::Int32(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Fixed::Int64(_) => Fixed::Int64(wide),
            Fixed::Date(_) => Fixed::Date(wide),
            Fixed::Double(_) => Fixed::Double(f64::from_le_bytes(*b)),
            Fixed::Bool(_) => Fixed::Bool(b[0] != 0),
        }
    }

    pub fn to_bson(self) -> Bson {
        match self {
            Fixed::Int32(i) => Bson::Int32(i),
            Fixed::Int64(i) => Bson::Int64(i),
            Fixed::Double(d) => Bson::Double(d),
            Fixed::Date(ms) => Bson::DateTime(bson::DateTime::from_millis(ms)),
            Fixed::Bool(b) => Bson::Boolean(b),
        }
    }
}

/// A top-level value an update can write over a field's old value of the same BSON type in
/// the stored bytes: a fixed-width one (written over the old bytes), or a string of any
/// length (the document's bytes are rebuilt around it when the length changes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SetValue<'a> {
    Fixed(Fixed),
    Str(&'a str),
}

impl SetValue<'_> {
    /// The value, when it is fixed-width or a string.
    pub fn of(v: &Bson) -> Option<SetValue<'_>> {
        match v {
            Bson::String(s) => Some(SetValue::Str(s)),
            v => Fixed::of(v).map(SetValue::Fixed),
        }
    }

    /// Appends its index KeyString (as `keys::encode` of the value) to `out`.
    pub fn key_into(self, out: &mut impl crate::documents::keys::KeyOut) {
        match self {
            SetValue::Fixed(f) => crate::documents::keys::encode_into(&f.to_bson(), out),
            SetValue::Str(s) => crate::documents::keys::encode_str_into(s.as_bytes(), out),
        }
    }

    pub fn element_type(self) -> u8 {
        match self {
            SetValue::Fixed(f) => f.element_type(),
            SetValue::Str(_) => ElementType::String as u8,
        }
    }

    /// Bytes of its BSON encoding (a string: length, bytes, NUL).
    pub fn width(self) -> usize {
        match self {
            SetValue::Fixed(f) => f.width(),
            SetValue::Str(s) => 4 + s.len() + 1,
        }
    }

    /// The width of the old value of the same type at `at` in `doc`, when it is well formed
    /// and ends before the document's terminator.
    pub fn old_width(self, doc: &[u8], at: usize) -> Option<usize> {
        let w = match self {
            SetValue::Fixed(f) => f.width(),
            SetValue::Str(_) => {
                let b = doc.get(at..at + 4)?;
                let n = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                4 + usize::try_from(n).ok().filter(|&n| n >= 1)?
            }
        };
        (at + w < doc.len()).then_some(w)
    }

    /// Appends its BSON encoding to `out`.
    pub fn write(self, out: &mut Vec<u8>) {
        match self {
            SetValue::Fixed(f) => out.extend_from_slice(&f.le_bytes()[..f.width()]),
            SetValue::Str(s) => {
                out.extend_from_slice(&((s.len() + 1) as i32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
                out.push(0);
            }
        }
    }

    /// Writes its BSON encoding over `out`, the old value's bytes, of the same width.
    pub fn write_over(self, out: &mut [u8]) {
        match self {
            SetValue::Fixed(f) => out.copy_from_slice(&f.le_bytes()[..f.width()]),
            SetValue::Str(s) => {
                let (len, rest) = out.split_at_mut(4);
                len.copy_from_slice(&((s.len() + 1) as i32).to_le_bytes());
                let (text, nul) = rest.split_at_mut(s.len());
                text.copy_from_slice(s.as_bytes());
                nul.copy_from_slice(&[0]);
            }
        }
    }

    /// Whether `old` (its encoding as stored) is this very value, byte for byte.
    pub fn same_bytes(self, old: &[u8]) -> bool {
        match self {
            SetValue::Fixed(f) => old == &f.le_bytes()[..f.width()],
            SetValue::Str(s) => old.len() == s.len() + 5 && &old[4..4 + s.len()] == s.as_bytes(),
        }
    }

    pub fn to_bson(self) -> Bson {
        match self {
            SetValue::Fixed(f) => f.to_bson(),
            SetValue::Str(s) => Bson::String(s.to_string()),
        }
    }
}
