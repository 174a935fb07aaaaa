//! Glob matching exactly as Redis's `stringmatchlen` (used by KEYS, SCAN MATCH, CONFIG GET,
//! PSUBSCRIBE): `*`, `?`, `[abc]`, `[^a-z]`, `\x` escapes, optional case folding.

pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    // Bound the recursion on pathological patterns such as "a*a*a*a*...b" the way Redis 7 does:
    // once a `*` fails to match the rest at every position, no later `*` can succeed either.
    let mut skip_longer = false;
    matchlen(pattern, string, nocase, &mut skip_longer, 0)
}

fn lower(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

fn matchlen(
    mut p: &[u8],
    mut s: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: u32,
) -> bool {
    if nesting > 1000 {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if matchlen(&p[1..], s, nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == s[0] {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let (start, end, c) = (
                            lower(start, nocase),
                            lower(end, nocase),
                            lower(s[0], nocase),
                        );
                        p = &p[2..];
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if lower(p[0], nocase) == lower(s[0], nocase) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                // Redis treats a missing `]` as the end of the pattern.
                if p.is_empty() {
                    p = &p[..0];
                    let m = if not { !matched } else { matched };
                    if !m {
                        return false;
                    }
                    s = &s[1..];
                    break;
                }
                let m = if not { !matched } else { matched };
                if !m {
                    return false;
                }
                s = &s[1..];
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if lower(p[0], nocase) != lower(s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if lower(c, nocase) != lower(s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while !p.is_empty() && p[0] == b'*' {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn redis_cases() {
        assert!(m(b"*", b"anything", false));
        assert!(m(b"h?llo", b"hello", false));
        assert!(m(b"h*llo", b"heeeello", false));
        assert!(m(b"h[ae]llo", b"hallo", false));
        assert!(!m(b"h[^e]llo", b"hello", false));
        assert!(m(b"h[a-b]llo", b"hbllo", false));
        assert!(m(b"h\\*llo", b"h*llo", false));
        assert!(!m(b"h\\*llo", b"hello", false));
        assert!(m(b"MAXMEM*", b"maxmemory", true));
        assert!(!m(b"a*", b"", false));
        // As stringmatchlen: no match on an empty string (KEYS short-circuits a lone "*").
        assert!(!m(b"*", b"", false));
        assert!(!m(
            b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
            &[b'a'; 100],
            false
        ));
    }
}
