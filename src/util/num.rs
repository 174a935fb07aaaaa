//! Number parsing with Redis's rules and error texts.

/// Parses an integer argument as Redis's `string2ll` (strict: no spaces, no `+`, no leading 0).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, d) = if b[0] == b'-' {
        (true, &b[1..])
    } else {
        (false, b)
    };
    if d.is_empty() || d[0] == b'0' {
        return None;
    }
    let mut v: i64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        let digit = (c - b'0') as i64;
        v = if neg {
            v.checked_mul(10)?.checked_sub(digit)?
        } else {
            v.checked_mul(10)?.checked_add(digit)?
        };
    }
    Some(v)
}

/// Parses a memory amount as redis.conf does: `1gb`, `100mb`, `64k`, plain bytes.
pub fn parse_memory(s: &str) -> Option<u64> {
    let l = s.trim().to_ascii_lowercase();
    let units: &[(&str, u64)] = &[
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1_000),
        ("b", 1),
    ];
    for (suffix, mul) in units {
        if let Some(num) = l.strip_suffix(suffix) {
            return num.parse::<u64>().ok()?.checked_mul(*mul);
        }
    }
    l.parse::<u64>().ok()
}

/// Parses a float argument as Redis's `string2ld`/`getLongDoubleFromObject`: no surrounding
/// spaces, no NaN (infinities parse; callers reject them where Redis does).
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.len() > 5000
        || s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace)
    {
        return None;
    }
    let f: f64 = s.parse().ok()?;
    if f.is_nan() {
        return None;
    }
    Some(f)
}

pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

/// A double as C's `%.17g` prints it, which is how Redis 7.0 writes doubles in replies
/// (`addReplyDouble`) and score strings (`inf`, `-inf`, `nan` for the special values).
pub fn format_g17(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // %.17g: the exponent of the %.16e form decides between fixed and scientific notation;
    // trailing zeros (and a trailing point) are dropped either way.
    let sci = format!("{d:.16e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", trim(mant), sign, exp.abs())
    } else {
        let prec = (16 - exp) as usize;
        trim(&format!("{d:.prec$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("16mb"), Some(16 << 20));
        assert_eq!(parse_memory("123"), Some(123));
        assert_eq!(parse_memory("x"), None);
    }
}
