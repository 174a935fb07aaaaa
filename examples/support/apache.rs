//! Apache combined log format → the "Storing Log Data" document shape.
//!
//! `%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"`, for example
//! `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326
//! "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"` becomes
//! `{host, user, time (a UTC date), path, method, protocol, status, response_size, referer,
//! user_agent}` with `status` and `response_size` as integers (`-` for no body is 0) and `-`
//! fields left out. Shared by `examples/apache_log.rs` and `tests/aggregate.rs`.
#![allow(dead_code)]

use bson::{DateTime, Document};
use tidecache::documents::aggregate::dates::days_from_civil;

/// Why a line was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError(pub &'static str);

struct Cursor<'a> {
    s: &'a str,
}

impl<'a> Cursor<'a> {
    fn skip_spaces(&mut self) {
        self.s = self.s.trim_start_matches(' ');
    }

    /// A space-delimited token.
    fn token(&mut self, what: &'static str) -> Result<&'a str, ParseError> {
        self.skip_spaces();
        let end = self.s.find(' ').unwrap_or(self.s.len());
        if end == 0 {
            return Err(ParseError(what));
        }
        let (t, rest) = self.s.split_at(end);
        self.s = rest;
        Ok(t)
    }

    /// `[...]`
    fn bracketed(&mut self) -> Result<&'a str, ParseError> {
        self.skip_spaces();
        let rest = self.s.strip_prefix('[').ok_or(ParseError("time"))?;
        let end = rest.find(']').ok_or(ParseError("time"))?;
        self.s = &rest[end + 1..];
        Ok(&rest[..end])
    }

    /// `"..."` with `\"` and `\\` escapes (Apache escapes quotes in logged values).
    fn quoted(&mut self, what: &'static str) -> Result<String, ParseError> {
        self.skip_spaces();
        let rest = self.s.strip_prefix('"').ok_or(ParseError(what))?;
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, e)) => out.push(e),
                    None => return Err(ParseError(what)),
                },
                '"' => {
                    self.s = &rest[i + 1..];
                    return Ok(out);
                }
                c => out.push(c),
            }
        }
        Err(ParseError(what))
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `10/Oct/2000:13:55:36 -0700` → the UTC instant.
pub fn parse_time(t: &str) -> Result<DateTime, ParseError> {
    let bad = ParseError("time");
    let (stamp, zone) = t.split_once(' ').ok_or(ParseError("time"))?;
    let mut it = stamp.splitn(4, ['/', ':']);
    let day: u32 = it
        .next()
        .and_then(|d| d.parse().ok())
        .ok_or(ParseError("time"))?;
    let mon = it.next().ok_or(ParseError("time"))?;
    let month = MONTHS
        .iter()
        .position(|m| *m == mon)
        .ok_or(ParseError("time"))? as u32
        + 1;
    let year: i64 = it
        .next()
        .and_then(|y| y.parse().ok())
        .ok_or(ParseError("time"))?;
    let hms: Vec<i64> = it
        .next()
        .ok_or(ParseError("time"))?
        .split(':')
        .map(|p| p.parse().map_err(|_| ParseError("time")))
        .collect::<Result<_, _>>()?;
    if hms.len() != 3 || day == 0 || day > 31 || hms[0] > 23 || hms[1] > 59 || hms[2] > 60 {
        return Err(bad);
    }
    let sign = match zone.as_bytes().first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return Err(bad),
    };
    let z = &zone[1..];
    if z.len() != 4 || !z.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    let offset_min: i64 =
        sign * (z[..2].parse::<i64>().unwrap_or(0) * 60 + z[2..].parse::<i64>().unwrap_or(0));
    let local = days_from_civil(year, month, day) * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2];
    Ok(DateTime::from_millis((local - offset_min * 60) * 1000))
}

/// One log line → one event document.
pub fn parse_line(line: &str) -> Result<Document, ParseError> {
    let mut c = Cursor {
        s: line.trim_end_matches(['\r', '\n']),
    };
    let host = c.token("host")?;
    let logname = c.token("logname")?;
    let user = c.token("user")?;
    let time = parse_time(c.bracketed()?)?;
    let request = c.quoted("request")?;
    let status: i32 = c
        .token("status")?
        .parse()
        .map_err(|_| ParseError("status"))?;
    let size = c.token("response_size")?;
    let response_size: i64 = if size == "-" {
        0
    } else {
        size.parse().map_err(|_| ParseError("response_size"))?
    };
    // Common log format lines stop here; combined adds the referer and the user agent.
    let referer = c.quoted("referer").ok();
    let user_agent = c.quoted("user_agent").ok();
    let mut parts = request.splitn(3, ' ');
    let (method, path, protocol) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(p), proto) => (Some(m), p.to_string(), proto),
        // A malformed request (a probe, "-"): keep it whole as the path.
        _ => (None, request.clone(), None),
    };
    let mut d = Document::new();
    d.insert("host", host);
    if logname != "-" {
        d.insert("logname", logname);
    }
    if user != "-" {
        d.insert("user", user);
    }
    d.insert("time", time);
    d.insert("path", path);
    if let Some(m) = method {
        d.insert("method", m);
    }
    if let Some(p) = protocol {
        d.insert("protocol", p);
    }
    d.insert("status", status);
    match i32::try_from(response_size) {
        Ok(n) => d.insert("response_size", n),
        Err(_) => d.insert("response_size", response_size),
    };
    if let Some(r) = referer.filter(|r| r != "-") {
        d.insert("referer", r);
    }
    if let Some(u) = user_agent.filter(|u| u != "-") {
        d.insert("user_agent", u);
    }
    Ok(d)
}

/// One request, for writing synthetic logs.
pub struct Event<'a> {
    pub host: &'a str,
    pub millis: i64,
    pub method: &'a str,
    pub path: &'a str,
    pub status: i32,
    pub size: i64,
    pub referer: &'a str,
    pub agent: &'a str,
}

/// Formats an event as a combined log line (UTC).
pub fn format_line(e: &Event<'_>) -> String {
    let Event {
        host,
        millis,
        method,
        path,
        status,
        size,
        referer,
        agent,
    } = *e;
    let p = tidecache::documents::aggregate::dates::parts(millis, 0);
    format!(
        "{host} - - [{:02}/{}/{:04}:{:02}:{:02}:{:02} +0000] \"{method} {path} HTTP/1.1\" {status} {size} \"{referer}\" \"{agent}\"",
        p.day,
        MONTHS[(p.month - 1) as usize],
        p.year,
        p.hour,
        p.minute,
        p.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_line() {
        let d = parse_line(r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#)
            .expect("parse");
        assert_eq!(
            d,
            bson::doc! {
                "host": "127.0.0.1", "user": "frank",
                "time": DateTime::parse_rfc3339_str("2000-10-10T20:55:36Z").expect("date"),
                "path": "/apache_pb.gif", "method": "GET", "protocol": "HTTP/1.0",
                "status": 200, "response_size": 2326,
                "referer": "http://www.example.com/start.html",
                "user_agent": "Mozilla/4.08 [en] (Win98; I ;Nav)",
            }
        );
    }

    #[test]
    fn odd_lines() {
        let d =
            parse_line(r#"::1 - - [01/Jan/2024:00:00:00 +0530] "-" 408 - "-" "-""#).expect("parse");
        assert_eq!(d.get_str("path").expect("path"), "-");
        assert_eq!(d.get_i32("response_size").expect("size"), 0);
        assert_eq!(
            d.get_datetime("time")
                .expect("time")
                .try_to_rfc3339_string()
                .expect("fmt"),
            "2023-12-31T18:30:00Z"
        );
        assert!(!d.contains_key("referer"));
        let d = parse_line(
            r#"h - - [05/Mar/2021:10:00:00 +0000] "GET /q?a=\"b\" HTTP/1.1" 200 5 "-" "x \"y\"""#,
        )
        .expect("parse");
        assert_eq!(d.get_str("path").expect("path"), "/q?a=\"b\"");
        assert_eq!(d.get_str("user_agent").expect("agent"), "x \"y\"");
        // Common log format (no referer / agent).
        assert!(parse_line(r#"h - - [05/Mar/2021:10:00:00 +0000] "GET / HTTP/1.1" 200 5"#).is_ok());
        assert!(parse_line("garbage").is_err());
        assert!(
            parse_line(r#"h - - [05/Foo/2021:10:00:00 +0000] "GET / HTTP/1.1" 200 5"#).is_err()
        );
        assert!(
            parse_line(r#"h - - [05/Mar/2021:10:00:00 +0000] "GET / HTTP/1.1" abc 5"#).is_err()
        );
    }

    #[test]
    fn format_round_trips() {
        let t = DateTime::parse_rfc3339_str("2000-10-31T23:59:59Z")
            .expect("date")
            .timestamp_millis();
        let line = format_line(&Event {
            host: "10.0.0.1",
            millis: t,
            method: "POST",
            path: "/a",
            status: 404,
            size: 12,
            referer: "-",
            agent: "agent",
        });
        let d = parse_line(&line).expect("parse");
        assert_eq!(d.get_datetime("time").expect("time").timestamp_millis(), t);
        assert_eq!(d.get_i32("status").expect("status"), 404);
        assert_eq!(d.get_str("method").expect("method"), "POST");
    }
}
