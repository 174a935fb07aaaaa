//! Redis's sds text helpers that more than one layer needs: `sdssplitargs` (an inline
//! request, a config line, a journal manifest line) and `sdscatrepr` (CONFIG REWRITE, a
//! manifest name, MONITOR, the script debugger), each other's inverse.

/// Splits a line into arguments as Redis's `sdssplitargs`: spaces separate, `"..."` with
/// `\n \r \t \b \a \\ \" \xHH` escapes, `'...'` with only `\'`. `None` for unbalanced quotes
/// or a closing quote not followed by a space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // sdssplitargs works on a C string: a NUL ends the line (inside quotes: unbalanced).
    let line = match line.iter().position(|&c| c == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && is_c_space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && is_hex(line[i + 2])
                    && is_hex(line[i + 3])
                {
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    in_dq = false;
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    in_sq = false;
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        let _ = (in_dq, in_sq);
        out.push(cur);
    }
}

/// C's `isspace`.
pub fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// Quotes bytes as Redis's `sdscatrepr`, which [`split_args`] reads back.
pub fn repr(out: &mut String, b: &[u8]) {
    out.push('"');
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_args_like_redis() {
        assert_eq!(
            split_args(br#"a "b\x41\n" 'c\'d'"#).unwrap(),
            vec![b"a".to_vec(), b"bA\n".to_vec(), b"c'd".to_vec()]
        );
        assert!(split_args(br#""a"b"#).is_none());
        assert!(split_args(b"").unwrap().is_empty());
        assert_eq!(split_args(b"a\0b c").unwrap(), vec![b"a".to_vec()]);
        assert!(split_args(b"\"a\0\"").is_none());
        assert_eq!(split_args(b"\x0ba").unwrap(), vec![b"a".to_vec()]);
    }

    #[test]
    fn repr_matches_sdscatrepr() {
        let mut s = String::new();
        repr(&mut s, b"a\"b\\\n\x01 z");
        assert_eq!(s, "\"a\\\"b\\\\\\n\\x01 z\"");
        assert_eq!(
            split_args(s.as_bytes()).unwrap(),
            vec![b"a\"b\\\n\x01 z".to_vec()]
        );
    }
}
