//! The request decoder (src/protocol/request.rs) on arbitrary bytes.
//!
//! Input: one control byte (limits, piece size), then the bytes a client sends. The bytes are
//! fed once whole and once in pieces, as reads would bring them. Each run must end in
//! frames, "more bytes needed" or a protocol error, never a panic; every frame has at least
//! one argument; and cutting the stream into pieces must not change the frames: the two runs
//! agree up to the first error of either (an error can come earlier in pieces, as in Redis:
//! the inline-length limit applies to what has arrived without a newline), and completely
//! when neither erred.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tidecache::protocol::{next_request, ParseLimits, ParseState};

/// Frames decoded from `pieces`, and whether the stream ended in a protocol error.
fn decode(pieces: &[&[u8]], limits: ParseLimits) -> (Vec<Vec<Bytes>>, bool) {
    let mut buf = BytesMut::new();
    let mut state = ParseState::default();
    let mut frames = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            match next_request(&mut buf, &mut state, limits) {
                Ok(Some(args)) => {
                    assert!(!args.is_empty(), "an empty request was returned");
                    frames.push(args.to_vec());
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(
                        e.0.starts_with("ERR Protocol error: "),
                        "unexpected error text {:?}",
                        e.0
                    );
                    return (frames, true);
                }
            }
        }
    }
    (frames, false)
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    let limits = ParseLimits {
        // Small bulk limits reach the "invalid bulk length" path; the rest use Redis's default.
        max_bulk_len: match ctl & 3 {
            0 => 0,
            1 => 16,
            2 => 1024,
            _ => 512 << 20,
        },
        unauthenticated: ctl & 4 != 0,
    };
    let piece = 1 + (ctl >> 3) as usize;
    let whole = decode(&[bytes], limits);
    let chunks: Vec<&[u8]> = bytes.chunks(piece).collect();
    let split = decode(&chunks, limits);
    let n = whole.0.len().min(split.0.len());
    assert_eq!(
        whole.0[..n],
        split.0[..n],
        "frames differ with pieces of {piece}"
    );
    if !whole.1 && !split.1 {
        assert_eq!(
            whole.0.len(),
            split.0.len(),
            "frame count differs with pieces of {piece}"
        );
    }
});
