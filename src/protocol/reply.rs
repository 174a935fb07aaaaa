use bytes::{BufMut, Bytes, BytesMut};

/// A reply as the command layer builds it. The same value is written as RESP2 or RESP3;
/// RESP3-only types degrade to their RESP2 equivalents exactly as Redis degrades them
/// (maps to flat arrays, doubles to bulk strings, booleans to integers, ...).
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`
    Simple(&'static str),
    /// `+text` with an owned text (status replies built at run time).
    Status(String),
    /// `-ERR ...`: the text includes the error code prefix (`ERR`, `WRONGTYPE`, ...).
    Error(String),
    Int(i64),
    Bulk(Bytes),
    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    Nil,
    /// The null array (RESP2 `*-1`, RESP3 `_`).
    NilArray,
    Array(Vec<Reply>),
    /// RESP3 map; RESP2 flat array of key, value, key, value.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 set; RESP2 array.
    Set(Vec<Reply>),
    /// RESP3 double; RESP2 bulk string.
    Double(f64),
    /// RESP3 boolean; RESP2 integer 1/0.
    Bool(bool),
    /// RESP3 verbatim string (`=len\r\ntxt:...`); RESP2 bulk string.
    Verbatim(Bytes),
    /// RESP3 push; RESP2 array.
    Push(Vec<Reply>),
    /// Several replies written back to back (used by commands such as SUBSCRIBE that answer
    /// once per argument).
    Multi(Vec<Reply>),
    /// Nothing is written (CLIENT REPLY OFF, QUIT's close, ...).
    NoReply,
    /// A reply already encoded, the same in RESP2 and RESP3 (an array of bulk strings):
    /// built straight from stored bytes, with no allocation per element (LRANGE).
    Encoded(Bytes),
}

pub const OK: Reply = Reply::Simple("OK");

impl Reply {
    pub fn ok() -> Reply {
        OK
    }

    /// An error reply; `text` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn error(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Push frames (and batches of them, as SUBSCRIBE answers) are written even under
    /// `CLIENT REPLY OFF|SKIP`, as Redis does for pub/sub.
    pub fn is_push(&self) -> bool {
        match self {
            Reply::Push(_) => true,
            Reply::Multi(items) => !items.is_empty() && items.iter().all(Reply::is_push),
            _ => false,
        }
    }

    /// Appends the encoding of this reply to `out`.
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', s.as_bytes()),
            Reply::Int(i) => int_line(out, b':', *i),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil => {
                if resp3 {
                    out.put_slice(b"_\r\n")
                } else {
                    out.put_slice(b"$-1\r\n")
                }
            }
            Reply::NilArray => {
                if resp3 {
                    out.put_slice(b"_\r\n")
                } else {
                    out.put_slice(b"*-1\r\n")
                }
            }
            Reply::Array(items) => {
                int_line(out, b'*', items.len() as i64);
                for r in items {
                    r.encode(out, resp3);
                }
            }
            Reply::Set(items) => {
                int_line(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
                for r in items {
                    r.encode(out, resp3);
                }
            }
            Reply::Push(items) => {
                int_line(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
                for r in items {
                    r.encode(out, resp3);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    int_line(out, b'%', pairs.len() as i64);
                } else {
                    int_line(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Reply::Bool(b) => {
                if resp3 {
                    out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.put_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Reply::Verbatim(b) => {
                if resp3 {
                    int_line(out, b'=', b.len() as i64 + 4);
                    out.put_slice(b"txt:");
                    out.put_slice(b);
                    out.put_slice(b"\r\n");
                } else {
                    bulk(out, b);
                }
            }
            Reply::Multi(items) => {
                for r in items {
                    r.encode(out, resp3);
                }
            }
            Reply::NoReply => {}
            Reply::Encoded(b) => out.put_slice(b),
        }
    }
}

impl Reply {
    /// An array of bulk strings, encoded at once (see [`Reply::Encoded`]).
    pub fn bulk_array<T: AsRef<[u8]>>(items: impl IntoIterator<Item = T>) -> Reply {
        let mut body = BytesMut::new();
        let mut n = 0i64;
        for b in items {
            bulk(&mut body, b.as_ref());
            n += 1;
        }
        let mut out = BytesMut::with_capacity(body.len() + 16);
        int_line(&mut out, b'*', n);
        out.put_slice(&body);
        Reply::Encoded(out.freeze())
    }
}

fn line(out: &mut BytesMut, prefix: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(prefix);
    // A status or error line must not contain CR or LF; replace them as Redis does.
    if text.iter().any(|&c| c == b'\r' || c == b'\n') {
        out.extend(
            text.iter()
                .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
        );
    } else {
        out.put_slice(text);
    }
    out.put_slice(b"\r\n");
}

/// "00" to "99".
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// The longest header line: a prefix, a sign, 19 digits and CRLF.
const HEADER_MAX: usize = 24;

/// Formats `<prefix><i>\r\n` at the end of `tmp`; returns where it starts. One copy into the
/// reply buffer then writes the whole line (three `put`s, each with its own capacity check
/// and copy, cost about twice as much per reply at pipeline 16).
#[inline]
fn header(tmp: &mut [u8; HEADER_MAX], prefix: u8, i: i64) -> usize {
    let mut pos = HEADER_MAX - 2;
    tmp[pos] = b'\r';
    tmp[pos + 1] = b'\n';
    // Two digits per division, from a table (as `itoa`).
    let mut v = i.unsigned_abs();
    while v >= 100 {
        let r = (v % 100) as usize * 2;
        v /= 100;
        pos -= 2;
        tmp[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[r..r + 2]);
    }
    if v >= 10 {
        let r = v as usize * 2;
        pos -= 2;
        tmp[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[r..r + 2]);
    } else {
        pos -= 1;
        tmp[pos] = b'0' + v as u8;
    }
    if i < 0 {
        pos -= 1;
        tmp[pos] = b'-';
    }
    pos -= 1;
    tmp[pos] = prefix;
    pos
}

fn int_line(out: &mut BytesMut, prefix: u8, i: i64) {
    let mut tmp = [0u8; HEADER_MAX];
    let start = header(&mut tmp, prefix, i);
    out.extend_from_slice(&tmp[start..]);
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    let mut tmp = [0u8; HEADER_MAX];
    let start = header(&mut tmp, b'$', b.len() as i64);
    // One reservation for the header, the bytes and the CRLF.
    out.reserve(HEADER_MAX - start + b.len() + 2);
    out.put_slice(&tmp[start..]);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// Formats a double as Redis 7.0's `addReplyDouble` does: C's `%.17g` (`inf`, `-inf`, `nan`
/// for the special values).
pub fn format_double(d: f64) -> String {
    crate::util::num::format_g17(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, resp3: bool) -> String {
        let mut b = BytesMut::new();
        r.encode(&mut b, resp3);
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn shapes_degrade_in_resp2() {
        let m = Reply::Map(vec![(Reply::bulk_str("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, false), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, true), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Nil, false), "$-1\r\n");
        assert_eq!(enc(&Reply::Nil, true), "_\r\n");
        assert_eq!(enc(&Reply::Double(1.5), false), "$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), true), ",1.5\r\n");
        assert_eq!(format_double(1.1), "1.1000000000000001");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1e-5), "1.0000000000000001e-05");
        assert_eq!(format_double(0.0001), "0.0001");
        assert_eq!(
            format_double(123456789012345678.0),
            "1.2345678901234568e+17"
        );
        assert_eq!(format_double(-3.0), "-3");
        assert_eq!(format_double(-0.0), "-0");
        assert_eq!(enc(&Reply::Bool(true), false), ":1\r\n");
        assert_eq!(enc(&Reply::Bool(true), true), "#t\r\n");
        assert_eq!(
            enc(&Reply::Verbatim(Bytes::from("hi")), true),
            "=6\r\ntxt:hi\r\n"
        );
        assert_eq!(enc(&Reply::error("ERR a\r\nb"), false), "-ERR a  b\r\n");
    }

    /// The header formatter against the standard library's, at the edges of its buffer.
    #[test]
    fn integer_lines_and_bulk_headers() {
        let edges = [0, 1, -1, 9, 10, -10, 99, 100, 12345, i64::MAX, i64::MIN];
        for i in edges {
            assert_eq!(enc(&Reply::Int(i), false), format!(":{i}\r\n"));
        }
        for len in [0usize, 1, 9, 10, 100, 1000] {
            let b = Bytes::from(vec![b'x'; len]);
            let want = format!("${len}\r\n{}\r\n", "x".repeat(len));
            assert_eq!(enc(&Reply::Bulk(b), true), want);
        }
        let arr = Reply::Array(vec![Reply::Int(-7); 11]);
        assert!(enc(&arr, false).starts_with("*11\r\n:-7\r\n"));
    }
}
