//! Calendar arithmetic for the date expressions (`$year`, `$dateToString`, ...): proleptic
//! Gregorian dates from milliseconds since the epoch, in UTC or at a fixed offset, with no
//! dependency on a time-zone database (MongoDB's UTC default; offsets such as `+02:00` are
//! accepted, Olson names are refused with MongoDB's error).

/// The broken-down parts of one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millisecond: u32,
    /// 1 (Sunday) ..= 7 (Saturday), MongoDB's `$dayOfWeek`.
    pub day_of_week: u32,
    /// 1..=366
    pub day_of_year: u32,
}

const MS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (`civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Breaks `millis` (since the epoch, UTC) shifted by `offset_minutes` into calendar parts.
pub fn parts(millis: i64, offset_minutes: i32) -> Parts {
    let local = millis.saturating_add(offset_minutes as i64 * 60_000);
    let days = local.div_euclid(MS_PER_DAY);
    let ms_of_day = local.rem_euclid(MS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let day_of_year = (days - days_from_civil(year, 1, 1) + 1) as u32;
    // 1970-01-01 was a Thursday: day 0 is weekday 5 in MongoDB's 1 = Sunday numbering.
    let day_of_week = ((days + 4).rem_euclid(7) + 1) as u32;
    Parts {
        year,
        month,
        day,
        hour: (ms_of_day / 3_600_000) as u32,
        minute: (ms_of_day / 60_000 % 60) as u32,
        second: (ms_of_day / 1000 % 60) as u32,
        millisecond: (ms_of_day % 1000) as u32,
        day_of_week,
        day_of_year,
    }
}

/// ISO 8601 weekday: 1 (Monday) ..= 7 (Sunday).
pub fn iso_day_of_week(p: &Parts) -> u32 {
    (p.day_of_week + 5) % 7 + 1
}

/// ISO 8601 week-numbering year and week (1..=53).
pub fn iso_week(p: &Parts) -> (i64, u32) {
    let wd = iso_day_of_week(p) as i64;
    let week = (p.day_of_year as i64 - wd + 10) / 7;
    if week < 1 {
        let prev = p.year - 1;
        let dec31 = parts(days_from_civil(prev, 12, 31) * MS_PER_DAY, 0);
        return iso_week(&dec31);
    }
    let days_in_year = if is_leap(p.year) { 366 } else { 365 };
    // A week 53 only exists when Dec 31 falls on a Thursday (or Friday in a leap year).
    if week == 53 && (p.day_of_year as i64 - wd) > days_in_year - 4 {
        return (p.year + 1, 1);
    }
    (p.year, week as u32)
}

/// Week of the year with weeks starting on Sunday (`%U`, 0..=53).
pub fn week_of_year_sunday(p: &Parts) -> u32 {
    (p.day_of_year + 6 - (p.day_of_week - 1)) / 7
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Parses a `timezone` argument: `UTC`, `GMT`, `Z`, or a fixed offset `±HH`, `±HHMM`,
/// `±HH:MM`. Returns the offset in minutes.
pub fn parse_timezone(tz: &str) -> Result<i32, String> {
    if matches!(tz, "UTC" | "GMT" | "Z" | "Etc/UTC" | "Etc/GMT") {
        return Ok(0);
    }
    let bad = || format!("unrecognized time zone identifier: \"{tz}\"");
    let (sign, rest) = match tz.as_bytes().first() {
        Some(b'+') => (1, &tz[1..]),
        Some(b'-') => (-1, &tz[1..]),
        _ => return Err(bad()),
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m) = match digits.len() {
        2 => (&digits[..2], "0"),
        4 => (&digits[..2], &digits[2..]),
        _ => return Err(bad()),
    };
    let h: i32 = h.parse().map_err(|_| bad())?;
    let m: i32 = m.parse().map_err(|_| bad())?;
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(sign * (h * 60 + m))
}

/// Checks a `$dateToString` format once, when the pipeline is parsed.
pub fn validate_format(fmt: &str) -> Result<(), String> {
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            continue;
        }
        match it.next() {
            Some(
                'd' | 'G' | 'H' | 'j' | 'L' | 'm' | 'M' | 'S' | 'w' | 'u' | 'U' | 'V' | 'Y' | 'z'
                | 'Z' | '%' | 'b' | 'B',
            ) => {}
            Some(other) => {
                return Err(format!(
                    "Invalid format character '%{other}' in format string"
                ))
            }
            None => return Err("Unmatched '%' at end of format string".into()),
        }
    }
    Ok(())
}

/// Formats an instant with MongoDB's `$dateToString` specifiers (the format was validated).
pub fn format(fmt: &str, millis: i64, offset_minutes: i32) -> String {
    let p = parts(millis, offset_minutes);
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = it.next() else { break };
        match spec {
            'd' => out.push_str(&format!("{:02}", p.day)),
            'G' => out.push_str(&format!("{:04}", iso_week(&p).0)),
            'H' => out.push_str(&format!("{:02}", p.hour)),
            'j' => out.push_str(&format!("{:03}", p.day_of_year)),
            'L' => out.push_str(&format!("{:03}", p.millisecond)),
            'm' => out.push_str(&format!("{:02}", p.month)),
            'M' => out.push_str(&format!("{:02}", p.minute)),
            'S' => out.push_str(&format!("{:02}", p.second)),
            'w' => out.push_str(&p.day_of_week.to_string()),
            'u' => out.push_str(&iso_day_of_week(&p).to_string()),
            'U' => out.push_str(&format!("{:02}", week_of_year_sunday(&p))),
            'V' => out.push_str(&format!("{:02}", iso_week(&p).1)),
            'Y' => out.push_str(&format!("{:04}", p.year)),
            'z' => {
                let sign = if offset_minutes < 0 { '-' } else { '+' };
                let m = offset_minutes.unsigned_abs();
                out.push_str(&format!("{sign}{:02}{:02}", m / 60, m % 60));
            }
            'Z' => out.push_str(&offset_minutes.to_string()),
            'b' => out.push_str(&MONTHS[(p.month - 1) as usize][..3]),
            'B' => out.push_str(MONTHS[(p.month - 1) as usize]),
            '%' => out.push('%'),
            other => {
                out.push('%');
                out.push(other);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(y: i64, m: u32, d: u32, h: i64, mi: i64, s: i64, l: i64) -> i64 {
        days_from_civil(y, m, d) * MS_PER_DAY + h * 3_600_000 + mi * 60_000 + s * 1000 + l
    }

    #[test]
    fn civil_round_trip_over_centuries() {
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn parts_of_the_seed_event() {
        // 10/Oct/2000:13:55:36 -0700 is 2000-10-10T20:55:36Z, a Tuesday.
        let p = parts(ms(2000, 10, 10, 20, 55, 36, 123), 0);
        assert_eq!((p.year, p.month, p.day), (2000, 10, 10));
        assert_eq!(
            (p.hour, p.minute, p.second, p.millisecond),
            (20, 55, 36, 123)
        );
        assert_eq!(p.day_of_week, 3);
        assert_eq!(p.day_of_year, 284);
        let before_epoch = parts(-1, 0);
        assert_eq!((before_epoch.year, before_epoch.hour), (1969, 23));
        assert_eq!(before_epoch.millisecond, 999);
        assert_eq!(before_epoch.day_of_week, 4); // Wednesday
    }

    #[test]
    fn formats_like_mongodb() {
        let t = ms(2014, 1, 1, 8, 15, 39, 736);
        assert_eq!(
            format("%Y-%m-%dT%H:%M:%S.%LZ", t, 0),
            "2014-01-01T08:15:39.736Z"
        );
        assert_eq!(format("%j %w %u %U %V %G %%", t, 0), "001 4 3 00 01 2014 %");
        assert_eq!(format("%H:%M %z %Z", t, 90), "09:45 +0130 90");
        assert_eq!(format("%b %B", t, 0), "Jan January");
        // 2021-01-01 is a Friday in ISO week 53 of 2020.
        let t = ms(2021, 1, 1, 0, 0, 0, 0);
        assert_eq!(format("%G-W%V-%u", t, 0), "2020-W53-5");
        // 2019-12-30 is a Monday in ISO week 1 of 2020.
        let t = ms(2019, 12, 30, 0, 0, 0, 0);
        assert_eq!(format("%G-W%V-%u", t, 0), "2020-W01-1");
        assert!(validate_format("%Y %q").is_err());
        assert!(validate_format("100%").is_err());
    }

    #[test]
    fn time_zones() {
        assert_eq!(parse_timezone("UTC"), Ok(0));
        assert_eq!(parse_timezone("+02:00"), Ok(120));
        assert_eq!(parse_timezone("-0530"), Ok(-330));
        assert_eq!(parse_timezone("+03"), Ok(180));
        assert!(parse_timezone("Europe/Paris").is_err());
        assert!(parse_timezone("+25:00").is_err());
    }
}
