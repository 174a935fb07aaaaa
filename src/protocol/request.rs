//! Request framing.
//!
//! Clients send RESP arrays of bulk strings (even after `HELLO 3`) or, typed into telnet, inline
//! lines. Frames are decoded with `redis-protocol`'s range decoder (SPEC §2: the frames are
//! that crate's), but only once a frame is known to be complete and within limits: a walk
//! over the frame's headers, resumable across reads so that a large frame arriving in pieces
//! is not re-scanned from its start, applies Redis 7's rules (`processMultibulkBuffer`) as
//! each header line arrives. Nothing is allocated from a length the client claims; the bytes
//! are held in the connection's read buffer only. (Slicing the arguments from the walk alone
//! would save about 1,400 instructions per SET — measured with callgrind — at the price of
//! not using the crate; the contract keeps the crate.)

use bytes::{Buf, Bytes, BytesMut};
use redis_protocol::resp2::{decode::decode_range, types::RangeFrame};

/// Longest inline request or header line, as Redis's `PROTO_INLINE_MAX_SIZE`.
const INLINE_MAX: usize = 64 * 1024;

#[derive(Clone, Copy, Debug)]
pub struct ParseLimits {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: u64,
    /// While authentication is pending, Redis caps frames at 10 elements of 16 KiB.
    pub unauthenticated: bool,
}

/// Progress of the header walk over a partial frame, kept by the connection between reads.
#[derive(Default, Debug)]
pub struct ParseState {
    /// Elements announced by the `*N` header, once read.
    count: Option<usize>,
    /// Elements whose bytes are fully in the buffer.
    seen: usize,
    /// Offset just past the last complete element (or the `*N` header).
    pos: usize,
    /// The last request's arguments ([`next_request`] lends them out): one vector per
    /// connection instead of one allocation per request.
    args: Vec<Bytes>,
}

thread_local! {
    /// The elements' ranges of the frame `decode_whole` is decoding: one vector per thread,
    /// reused by every request (in `ParseState`, it would take room in every idle
    /// connection).
    static RANGES: std::cell::RefCell<Vec<(usize, usize)>> = const {
        std::cell::RefCell::new(Vec::new())
    };
}

/// A connection keeps its argument buffer unless one huge request grew it past this.
const KEEP_RANGES: usize = 1024;

impl ParseState {
    fn reset(&mut self) {
        self.count = None;
        self.seen = 0;
        self.pos = 0;
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

/// Takes the next complete request from `buf`. `Ok(None)`: more bytes are needed. An empty
/// argument vector is never returned: empty lines and `*0` frames are skipped.
pub fn parse_request(
    buf: &mut BytesMut,
    state: &mut ParseState,
    limits: ParseLimits,
) -> Result<Option<Vec<Bytes>>, ParseError> {
    Ok(next_request(buf, state, limits)?.map(<[Bytes]>::to_vec))
}

/// [`parse_request`] lending the arguments from `state`. The previous request's arguments
/// are dropped first, so once this returns `Ok(None)` nothing refers to the read buffer's
/// bytes any more and the buffer can be reused in place.
pub fn next_request<'a>(
    buf: &mut BytesMut,
    state: &'a mut ParseState,
    limits: ParseLimits,
) -> Result<Option<&'a [Bytes]>, ParseError> {
    state.args.clear();
    if state.args.capacity() > KEEP_RANGES {
        state.args = Vec::new();
    }
    loop {
        if buf.is_empty() {
            return Ok(None);
        }
        let complete = if buf[0] == b'*' {
            parse_multibulk(buf, state, limits)?
        } else {
            match parse_inline(buf)? {
                Some(args) => {
                    state.args.extend(args);
                    true
                }
                None => false,
            }
        };
        if !complete {
            return Ok(None);
        }
        if !state.args.is_empty() {
            return Ok(Some(&state.args));
        }
    }
}

/// How many leading arguments of each request [`peek_requests`] hands out.
pub const PEEK_LEAD: usize = 4;

/// Walks the complete requests at the start of `buf` without taking them: for each (at most
/// `max`), `f` gets its argument count and its first arguments (up to [`PEEK_LEAD`]). The
/// walk stops at the first request that is incomplete, inline or malformed. What it finds is
/// a hint for work that can be started ahead (`commands::warm_keys`), never the requests
/// themselves: [`next_request`] decodes those, with every check. Lengths are only compared
/// with what is in `buf`; nothing is allocated.
pub fn peek_requests<'a>(buf: &'a [u8], max: usize, mut f: impl FnMut(usize, &[&'a [u8]])) {
    /// A header's number (digits only: a negative count or length ends the walk), up to
    /// its CRLF, and the bytes after it.
    #[inline(always)]
    fn header(b: &[u8]) -> Option<(usize, &[u8])> {
        // One or two digits, the usual counts and key lengths, without the loop.
        match *b {
            [d @ b'0'..=b'9', b'\r', b'\n', ..] => return Some((usize::from(d - b'0'), &b[3..])),
            [d @ b'1'..=b'9', e @ b'0'..=b'9', b'\r', b'\n', ..] => {
                return Some((usize::from(d - b'0') * 10 + usize::from(e - b'0'), &b[4..]))
            }
            _ => {}
        }
        let mut n = 0usize;
        for (i, &c) in b.iter().enumerate().take(20) {
            match c {
                b'0'..=b'9' => n = n.checked_mul(10)?.checked_add(usize::from(c - b'0'))?,
                b'\r' if i > 0 && b.get(i + 1) == Some(&b'\n') => return Some((n, &b[i + 2..])),
                _ => return None,
            }
        }
        None
    }
    let mut rest = buf;
    for _ in 0..max {
        let Some((count, mut r)) = rest.strip_prefix(b"*").and_then(header) else {
            return;
        };
        let mut lead: [&[u8]; PEEK_LEAD] = [&[]; PEEK_LEAD];
        for i in 0..count {
            let Some((len, after)) = r.strip_prefix(b"$").and_then(header) else {
                return;
            };
            let (Some(arg), Some(b"\r\n")) = (after.get(..len), after.get(len..len + 2)) else {
                return;
            };
            if let Some(slot) = lead.get_mut(i) {
                *slot = arg;
            }
            r = &after[len + 2..];
        }
        f(count, &lead[..count.min(PEEK_LEAD)]);
        rest = r;
    }
}

fn protocol_error(msg: &str) -> ParseError {
    ParseError(format!("ERR Protocol error: {msg}"))
}

/// Parses a decimal integer header the way Redis's `string2ll` does (no spaces, no `+`).
fn parse_header_int(line: &[u8]) -> Option<i64> {
    if line.is_empty() || line.len() > 20 {
        return None;
    }
    let (neg, digits) = match line[0] {
        b'-' => (true, &line[1..]),
        _ => (false, line),
    };
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let rest = buf.get(from..)?;
    memchr(b'\r', rest).map(|i| from + i)
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

/// Walks (the rest of) a multibulk frame; true once it is complete, its arguments in
/// `state.args` (none for `*0`).
fn parse_multibulk(
    buf: &mut BytesMut,
    state: &mut ParseState,
    limits: ParseLimits,
) -> Result<bool, ParseError> {
    if state.count.is_none() && decode_whole(buf, state, limits) {
        return Ok(true);
    }
    if state.count.is_none() {
        let Some((n, header_len)) = multibulk_header(buf, limits)? else {
            return Ok(false);
        };
        if n <= 0 {
            buf.advance(header_len);
            state.reset();
            return Ok(true);
        }
        state.count = Some(n as usize);
        state.seen = 0;
        state.pos = header_len;
    }
    let count = state.count.unwrap_or(0);
    while state.seen < count {
        let pos = state.pos;
        let Some(cr) = find_crlf(buf, pos) else {
            if buf.len() - pos > INLINE_MAX {
                return Err(protocol_error("too big bulk count string"));
            }
            return Ok(false);
        };
        if buf[pos] != b'$' {
            return Err(protocol_error(&format!(
                "expected '$', got '{}'",
                buf[pos] as char
            )));
        }
        let len = match parse_header_int(&buf[pos + 1..cr]) {
            Some(l) if l >= 0 && (l as u64) <= limits.max_bulk_len => l as usize,
            _ => return Err(protocol_error("invalid bulk length")),
        };
        if len > 16384 && limits.unauthenticated {
            return Err(protocol_error("unauthenticated bulk length"));
        }
        // The header is valid; the element is complete once its bytes and CRLF are here.
        let end = cr + 2 + len + 2;
        if buf.len() < end {
            return Ok(false);
        }
        // A header line or a bulk without its CRLF.
        if buf[cr + 1] != b'\n' || &buf[end - 2..end] != b"\r\n" {
            return Err(protocol_error("invalid bulk format"));
        }
        state.seen += 1;
        state.pos = end;
    }
    // The whole frame is here and within limits: `redis-protocol` decodes it (the frame
    // decoder the product is built on), into ranges of the frame, so the arguments are
    // slices of the read buffer without a copy.
    let frame = buf.split_to(state.pos).freeze();
    state.reset();
    match decode_range(&frame) {
        Ok(Some((RangeFrame::Array(items), used))) if used == frame.len() => {
            for item in items {
                match item {
                    RangeFrame::BulkString((start, end)) => {
                        state.args.push(frame.slice(start..end))
                    }
                    _ => return Err(protocol_error("expected bulk string")),
                }
            }
            Ok(true)
        }
        _ => Err(protocol_error("invalid bulk format")),
    }
}

/// The `*<count>` line at the start of `buf` under Redis's rules: the count (`<= 0` for an
/// empty frame) and the line's length with its CRLF; `Ok(None)` until the line is whole.
fn multibulk_header(buf: &[u8], limits: ParseLimits) -> Result<Option<(i64, usize)>, ParseError> {
    let Some(cr) = find_crlf(buf, 0) else {
        if buf.len() > INLINE_MAX {
            return Err(protocol_error("too big mbulk count string"));
        }
        return Ok(None);
    };
    if cr + 1 >= buf.len() {
        return Ok(None);
    }
    let n = match parse_header_int(&buf[1..cr]) {
        Some(n) if n <= i32::MAX as i64 => n,
        _ => return Err(protocol_error("invalid multibulk length")),
    };
    if n > 10 && limits.unauthenticated {
        return Err(protocol_error("unauthenticated multibulk length"));
    }
    if buf[cr + 1] != b'\n' {
        return Err(protocol_error("invalid bulk format"));
    }
    Ok(Some((n, cr + 2)))
}

/// The common case, a whole frame already in the buffer: `redis-protocol` decodes each of its
/// elements, and the frame is accepted when every header is in Redis's canonical form
/// (`*`/`$`, digits without sign or leading zero, CRLF — checked from the ranges: a header
/// line is exactly as long as the canonical decimal of the length the crate read) and within
/// the limits. Anything else — an incomplete frame, a malformed or non-canonical header, a
/// limit crossed — returns false untouched, and the header walk below takes over and gives
/// Redis's exact error. This spares a second pass over every header of every request
/// (measured: the walk was a third of the parsing cost at pipeline 16).
///
/// The `*<count>` line is read here (`multibulk_header`, as the walk reads it) and the crate
/// decodes the elements one by one: decoding the whole array, it built a vector of the
/// elements' frames per request and recursed into each (callgrind, a GET frame: 1,283
/// instructions a frame whole, 919 element by element).
/// The elements' ranges go to a per-thread vector, reused from request to request and grown
/// by elements actually present, never by the count the client claims.
fn decode_whole(buf: &mut BytesMut, state: &mut ParseState, limits: ParseLimits) -> bool {
    RANGES.with_borrow_mut(|ranges| {
        let whole = decode_whole_into(buf, state, limits, ranges);
        if ranges.capacity() > KEEP_RANGES {
            *ranges = Vec::new();
        }
        whole
    })
}

fn decode_whole_into(
    buf: &mut BytesMut,
    state: &mut ParseState,
    limits: ParseLimits,
    ranges: &mut Vec<(usize, usize)>,
) -> bool {
    // Anything but a whole, valid header of a non-empty frame is left to the walk.
    let Ok(Some((n, header_len))) = multibulk_header(buf, limits) else {
        return false;
    };
    if n <= 0 {
        return false;
    }
    let count = n as usize;
    ranges.clear();
    let mut pos = header_len;
    for _ in 0..count {
        let Ok(Some((RangeFrame::BulkString((s, e)), used))) = decode_range(&buf[pos..]) else {
            return false;
        };
        let (start, end, len) = (pos + s, pos + e, e - s);
        if s != 1 + decimal_digits(len) + 2
            || buf[pos] != b'$'
            || buf[start - 2..start] != *b"\r\n"
            || buf.get(end..end + 2) != Some(b"\r\n".as_slice())
            || end + 2 != pos + used
            || len as u64 > limits.max_bulk_len
            || (len > 16384 && limits.unauthenticated)
        {
            return false;
        }
        ranges.push((start, end));
        pos = end + 2;
    }
    let Some((&(last_start, last_end), init)) = ranges.split_last() else {
        return false;
    };
    let mut frame = buf.split_to(pos).freeze();
    // One reservation and a plain push each (an `extend` from an iterator adapter grows and
    // checks the vector per element, which cost 100-150 instructions a request at pipeline
    // 16); `count` is the number of elements decoded by now, not a claim.
    state.args.reserve(count);
    for &(start, end) in init {
        state.args.push(frame.slice(start..end));
    }
    // The last argument is the frame itself, narrowed: a slice would take a reference
    // (an atomic increment) that dropping the frame gives back at once (another).
    frame.truncate(last_end);
    frame.advance(last_start);
    state.args.push(frame);
    true
}

fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

fn parse_inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ParseError> {
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > INLINE_MAX {
            return Err(protocol_error("too big inline request"));
        }
        return Ok(None);
    };
    let line = buf.split_to(nl + 1);
    let mut text = &line[..nl];
    if text.last() == Some(&b'\r') {
        text = &text[..text.len() - 1];
    }
    match crate::util::sds::split_args(text) {
        Some(args) => Ok(Some(args.into_iter().map(Bytes::from).collect())),
        None => Err(protocol_error("unbalanced quotes in request")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: ParseLimits = ParseLimits {
        max_bulk_len: 512 * 1024 * 1024,
        unauthenticated: false,
    };

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ParseError> {
        let mut buf = BytesMut::from(input);
        let mut st = ParseState::default();
        let mut out = vec![];
        while let Some(a) = parse_request(&mut buf, &mut st, LIM)? {
            out.push(a);
        }
        Ok(out)
    }

    fn peeked(buf: &[u8], max: usize) -> Vec<(usize, Vec<Vec<u8>>)> {
        let mut out = Vec::new();
        peek_requests(buf, max, |argc, lead| {
            out.push((argc, lead.iter().map(|a| a.to_vec()).collect()))
        });
        out
    }

    /// The walk hands out each complete request's count and first arguments, stops at
    /// `max`, and stops at anything incomplete, inline or malformed, without allocating
    /// from a claimed length.
    #[test]
    fn peek_walks_complete_requests_only() {
        let two = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*6\r\n$7\r\nEVALSHA\r\n$2\r\nsh\r\n$1\r\n1\r\n$1\r\nk\r\n$0\r\n\r\n$1\r\nz\r\n";
        let all = peeked(two, 8);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], (2, vec![b"GET".to_vec(), b"a".to_vec()]));
        assert_eq!(all[1].0, 6);
        assert_eq!(
            all[1].1,
            vec![
                b"EVALSHA".to_vec(),
                b"sh".to_vec(),
                b"1".to_vec(),
                b"k".to_vec()
            ]
        );
        assert_eq!(peeked(two, 1).len(), 1);
        // Cut anywhere inside the second request: only the first is seen.
        for cut in 20..two.len() {
            assert_eq!(peeked(&two[..cut], 8).len(), 1, "cut at {cut}");
        }
        for bad in [
            &b"PING\r\n*1\r\n$4\r\nPING\r\n"[..],
            b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$9223372036854775807\r\nab\r\n",
            b"*99999999999999999999999\r\n",
            b"*2\r\n:1\r\n",
        ] {
            assert!(
                peeked(bad, 8).is_empty(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            peeked(b"*1\r\n$4\r\nPING\r\n*0\r\n", 8),
            vec![(1, vec![b"PING".to_vec()]), (0, vec![])]
        );
    }

    #[test]
    fn multibulk_and_inline() {
        let r = parse_all(b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n  set a \"b c\"\r\n").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], vec![Bytes::from("ECHO"), Bytes::from("hi")]);
        assert_eq!(r[1], vec![Bytes::from("PING")]);
        assert_eq!(
            r[2],
            vec![Bytes::from("set"), Bytes::from("a"), Bytes::from("b c")]
        );
    }

    /// The last argument of a whole frame is the frame itself narrowed (see `decode_whole`):
    /// it holds exactly its bytes (an empty one too), and once the arguments are dropped the
    /// read buffer is whole again.
    #[test]
    fn last_argument_is_narrowed_and_releases_the_buffer() {
        let mut buf = BytesMut::with_capacity(256);
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        buf.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n");
        let mut st = ParseState::default();
        let mut seen = vec![];
        while let Some(a) = next_request(&mut buf, &mut st, LIM).unwrap() {
            seen.push(a.to_vec());
        }
        assert_eq!(seen[0], vec![Bytes::from("PING")]);
        assert_eq!(
            seen[1],
            vec![Bytes::from("SET"), Bytes::from("k"), Bytes::new()]
        );
        assert_eq!(seen[2], vec![Bytes::from("GET"), Bytes::from("key")]);
        drop(seen);
        assert!(buf.is_empty());
        assert!(buf.try_reclaim(256));
    }

    #[test]
    fn byte_by_byte_is_resumable() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n";
        let mut buf = BytesMut::new();
        let mut st = ParseState::default();
        for (i, &c) in input.iter().enumerate() {
            buf.extend_from_slice(&[c]);
            let r = parse_request(&mut buf, &mut st, LIM).unwrap();
            if i + 1 < input.len() {
                assert!(r.is_none());
            } else {
                assert_eq!(r.unwrap().len(), 3);
            }
        }
    }

    #[test]
    fn limits() {
        assert_eq!(
            parse_all(b"*abc\r\n").unwrap_err().0,
            "ERR Protocol error: invalid multibulk length"
        );
        assert_eq!(
            parse_all(b"*1\r\n$-5\r\n").unwrap_err().0,
            "ERR Protocol error: invalid bulk length"
        );
        assert_eq!(
            parse_all(b"*1\r\n:5\r\n").unwrap_err().0,
            "ERR Protocol error: expected '$', got ':'"
        );
        // A huge claimed length is refused by its header alone, before any bytes arrive.
        let lim = ParseLimits {
            max_bulk_len: 1024,
            unauthenticated: false,
        };
        let mut buf = BytesMut::from(&b"*1\r\n$999999999\r\n"[..]);
        let e = parse_request(&mut buf, &mut ParseState::default(), lim).unwrap_err();
        assert_eq!(e.0, "ERR Protocol error: invalid bulk length");
        assert_eq!(
            parse_all(b"SET \"a\r\n").unwrap_err().0,
            "ERR Protocol error: unbalanced quotes in request"
        );
        let unauth = ParseLimits {
            max_bulk_len: 1024,
            unauthenticated: true,
        };
        let mut buf = BytesMut::from(&b"*11\r\n"[..]);
        let e = parse_request(&mut buf, &mut ParseState::default(), unauth).unwrap_err();
        assert_eq!(e.0, "ERR Protocol error: unauthenticated multibulk length");
    }

    /// Whole frames take the decoder's path; a non-canonical header or a crossed limit in a
    /// whole frame still gets the walk's exact error.
    #[test]
    fn whole_frames_keep_redis_rules() {
        assert_eq!(
            parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n").unwrap(),
            vec![
                vec![Bytes::from_static(b"GET"), Bytes::from_static(b"k")],
                vec![Bytes::from_static(b"PING")]
            ]
        );
        // Non-canonical headers; elements the crate decodes but a request may not hold; a
        // bulk without its CRLF.
        let bad: [(&[u8], &str); 6] = [
            (b"*1\r\n$03\r\nfoo\r\n", "invalid bulk length"),
            (b"*01\r\n$3\r\nfoo\r\n", "invalid multibulk length"),
            (b"*1\r\n$+3\r\nfoo\r\n", "invalid bulk length"),
            (b"*2\r\n$1\r\na\r\n$-1\r\n", "invalid bulk length"),
            (b"*2\r\n$1\r\na\r\n:1\r\n", "expected '$', got ':'"),
            (b"*1\r\n$3\r\nfooXY", "invalid bulk format"),
        ];
        for (frame, error) in bad {
            assert_eq!(
                parse_all(frame).unwrap_err().0,
                format!("ERR Protocol error: {error}")
            );
        }
        // Many elements, empty ones among them, decoded one by one.
        let many: Vec<Vec<u8>> = (0..300).map(|i| "x".repeat(i % 3).into_bytes()).collect();
        let mut frame = format!("*{}\r\n", many.len()).into_bytes();
        for m in &many {
            frame.extend_from_slice(format!("${}\r\n", m.len()).as_bytes());
            frame.extend_from_slice(m);
            frame.extend_from_slice(b"\r\n");
        }
        let got = parse_all(&frame).unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].iter().map(|b| b.to_vec()).eq(many.iter().cloned()));
        let lim = ParseLimits {
            max_bulk_len: 2,
            unauthenticated: false,
        };
        let mut buf = BytesMut::from(&b"*1\r\n$3\r\nfoo\r\n"[..]);
        let e = parse_request(&mut buf, &mut ParseState::default(), lim).unwrap_err();
        assert_eq!(e.0, "ERR Protocol error: invalid bulk length");
        let unauth = ParseLimits {
            max_bulk_len: 1 << 20,
            unauthenticated: true,
        };
        let big = format!("*1\r\n${}\r\n{}\r\n", 16385, "x".repeat(16385));
        let mut buf = BytesMut::from(big.as_bytes());
        let e = parse_request(&mut buf, &mut ParseState::default(), unauth).unwrap_err();
        assert_eq!(e.0, "ERR Protocol error: unauthenticated bulk length");
    }

    /// Random and mutated frames, fed in random pieces: the parser answers or errors, never
    /// panics, and never returns an empty request.
    #[test]
    fn random_input_never_panics() {
        let seeds: [&[u8]; 4] = [
            b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n",
            b"PING \"a\\x41\" 'b'\r\n",
            b"*0\r\n*-1\r\n",
            b"*1\r\n$0\r\n\r\n",
        ];
        let mut rng = crate::util::rng::XorShift::new(0x9e3779b97f4a7c15);
        let mut next = move || rng.next_u64();
        for round in 0..20_000 {
            let mut input: Vec<u8> = seeds[round % seeds.len()].to_vec();
            for _ in 0..(next() % 4) {
                let at = (next() as usize) % (input.len() + 1);
                match next() % 3 {
                    0 => input.insert(at, b"*$\r\n-0123456789\"' x"[(next() % 19) as usize]),
                    1 if at < input.len() => {
                        input.remove(at);
                    }
                    _ => input.insert(at, next() as u8),
                }
            }
            let lim = ParseLimits {
                max_bulk_len: 1 << 20,
                unauthenticated: next() % 2 == 0,
            };
            let mut buf = BytesMut::new();
            let mut st = ParseState::default();
            let mut fed = 0;
            while fed < input.len() {
                let n = 1 + (next() as usize) % (input.len() - fed);
                buf.extend_from_slice(&input[fed..fed + n]);
                fed += n;
                while let Ok(Some(args)) = parse_request(&mut buf, &mut st, lim) {
                    assert!(!args.is_empty());
                }
            }
        }
    }
}
