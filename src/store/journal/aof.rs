//! Redis 7.0's multi-part AOF on disk: the manifest, the file names, the RESP records and
//! reading them back.
//!
//! A directory (`appenddirname`, inside `dir`) holds `<appendfilename>.manifest`, one line a
//! file — `file appendonly.aof.1.base.aof seq 1 type b`, then the incremental files
//! `… .incr.aof seq N type i` — written to a temporary file and renamed over the old one, as
//! Redis's `writeAofManifestFile`. Every record is a RESP array of bulk strings, exactly what
//! `redis-check-aof` and Redis's own loader read.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Appends one command as a RESP array of bulk strings.
pub fn encode(out: &mut Vec<u8>, argv: &[&[u8]]) {
    encode_args(out, argv)
}

/// [`encode`] for any byte-string arguments (a request's own, without collecting them into
/// slices first). Every journaled write goes through here: the output is reserved once and
/// the lengths are written without allocating (this was four `to_string`s and a few
/// reallocations per `SET`).
pub fn encode_args<A: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[A]) {
    // "*N\r\n", then "$L\r\n" + arg + "\r\n" each: 20 digits at most per number.
    let size = 3
        + digits(argv.len())
        + argv
            .iter()
            .map(|a| {
                let n = a.as_ref().len();
                5 + digits(n) + n
            })
            .sum::<usize>();
    out.reserve(size);
    out.push(b'*');
    push_len(out, argv.len());
    for a in argv {
        let a = a.as_ref();
        out.push(b'$');
        push_len(out, a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Appends `n` in decimal and "\r\n".
fn push_len(out: &mut Vec<u8>, mut n: usize) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
    out.extend_from_slice(b"\r\n");
}

/// One file of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub name: String,
    /// Redis's `long long` read with `atoll`: a manifest may hold any value but 0.
    pub seq: i64,
    /// `b` (base), `h` (history, to be deleted), `i` (incremental).
    pub kind: char,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<FileInfo>,
    pub incr: Vec<FileInfo>,
}

/// Why a manifest was refused, as `aofLoadManifestFromFile` reports it: the reason in
/// Redis's words and, for a line that broke a rule, its number (from 1) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub reason: &'static str,
    pub line: Option<(usize, String)>,
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.line {
            Some((n, _)) => write!(f, "{} (manifest line {n})", self.reason),
            None => f.write_str(self.reason),
        }
    }
}

impl From<ManifestError> for String {
    fn from(e: ManifestError) -> String {
        e.to_string()
    }
}

/// The longest manifest line Redis reads, newline included (`MANIFEST_MAX_LINE`).
const MANIFEST_MAX_LINE: usize = 1024;

impl Manifest {
    pub fn manifest_name(prefix: &str) -> String {
        format!("{prefix}.manifest")
    }

    /// The manifest's text, base first, then the incremental files in order.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for f in self.base.iter().chain(&self.incr) {
            s.push_str(&format!(
                "file {} seq {} type {}\n",
                quote(&f.name),
                f.seq,
                f.kind
            ));
        }
        s
    }

    /// Reads a manifest exactly as Redis 7.0's `aofLoadManifestFromFile` does, refusing
    /// what it refuses, because a journal whose manifest is damaged would otherwise load
    /// as a shorter data set than the one written: an empty file; a line longer than 1024
    /// bytes or without its newline; a blank line; fewer than three `key value` pairs or an
    /// odd number of words; a `file`, `seq` (non-zero) or `type` missing; a file name with
    /// a path separator; a second base; incremental `seq`s not strictly increasing; a type
    /// other than `b`, `h`, `i`. Lines starting with `#` are comments; keys are matched
    /// without regard to case and unknown keys are ignored (Redis's forward compatibility);
    /// history (`h`) entries are accepted and left out.
    pub fn parse(text: &[u8]) -> Result<Manifest, ManifestError> {
        let mut m = Manifest::default();
        if text.is_empty() {
            return Err(ManifestError {
                reason: "Found an empty AOF manifest",
                line: None,
            });
        }
        let mut maxseq = 0i64;
        let mut rest = text;
        let mut n = 0;
        while !rest.is_empty() {
            // fgets with a buffer of MANIFEST_MAX_LINE + 1: a line and its newline, or the
            // first 1024 bytes of a longer one.
            let cut = rest
                .iter()
                .take(MANIFEST_MAX_LINE)
                .position(|&c| c == b'\n')
                .map_or(rest.len().min(MANIFEST_MAX_LINE), |p| p + 1);
            let (raw, after) = rest.split_at(cut);
            rest = after;
            n += 1;
            if raw[0] == b'#' {
                continue;
            }
            // The text as C reads it: up to a NUL byte, if any.
            let raw = &raw[..raw.iter().position(|&c| c == 0).unwrap_or(raw.len())];
            let shown = || String::from_utf8_lossy(trim(raw)).into_owned();
            let fail = |reason| ManifestError {
                reason,
                line: Some((n, shown())),
            };
            if !raw.contains(&b'\n') {
                return Err(fail("The AOF manifest file contains too long line"));
            }
            let line = trim(raw);
            if line.is_empty() {
                return Err(fail("Invalid AOF manifest file format"));
            }
            let words = match crate::util::sds::split_args(line) {
                Some(w) if w.len() >= 6 && w.len() % 2 == 0 => w,
                _ => return Err(fail("Invalid AOF manifest file format")),
            };
            let mut name = None;
            let mut seq = 0i64;
            let mut kind = 0u8;
            for kv in words.chunks(2) {
                let key = &kv[0];
                if key.eq_ignore_ascii_case(b"file") {
                    if kv[1].contains(&b'/') || kv[1].contains(&b'\\') {
                        return Err(fail("File can't be a path, just a filename"));
                    }
                    name = Some(String::from_utf8_lossy(&kv[1]).into_owned());
                } else if key.eq_ignore_ascii_case(b"seq") {
                    seq = atoll(&kv[1]);
                } else if key.eq_ignore_ascii_case(b"type") {
                    kind = kv[1].first().copied().unwrap_or(0);
                }
            }
            let name = match name {
                Some(name) if seq != 0 && kind != 0 => name,
                _ => return Err(fail("Invalid AOF manifest file format")),
            };
            let info = FileInfo {
                name,
                seq,
                kind: kind as char,
            };
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err(fail("Found duplicate base file information"));
                    }
                    m.base = Some(info);
                }
                b'h' => {}
                b'i' => {
                    if seq <= maxseq {
                        return Err(fail("Found a non-monotonic sequence number"));
                    }
                    maxseq = seq;
                    m.incr.push(info);
                }
                _ => return Err(fail("Unknown AOF file type")),
            }
        }
        Ok(m)
    }
}

/// `sdstrim(line, " \t\r\n")`.
fn trim(mut s: &[u8]) -> &[u8] {
    let junk = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    while s.first().is_some_and(junk) {
        s = &s[1..];
    }
    while s.last().is_some_and(junk) {
        s = &s[..s.len() - 1];
    }
    s
}

/// C's `atoll`: leading white space, a sign, the digits up to the first other byte; 0 when
/// there are none. Out of range saturates, as glibc's `strtoll` does.
fn atoll(s: &[u8]) -> i64 {
    let mut i = s
        .iter()
        .take_while(|&&c| crate::util::sds::is_c_space(c))
        .count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    for &c in s[i..].iter().take_while(|c| c.is_ascii_digit()) {
        let d = (c - b'0') as i64;
        v = if neg {
            v.saturating_mul(10).saturating_sub(d)
        } else {
            v.saturating_mul(10).saturating_add(d)
        };
    }
    v
}

/// A manifest file name as Redis writes it: as it is, or in quotes with escapes when it
/// holds a space, a quote, a backslash or a byte outside printable ASCII (`sdsneedsrepr`,
/// then `sdscatrepr`), so `sdssplitargs` reads back the same bytes.
fn quote(name: &str) -> String {
    let needs = name
        .bytes()
        .any(|c| c == b' ' || c == b'"' || c == b'\\' || !(0x21..0x7f).contains(&c));
    if !needs {
        return name.to_string();
    }
    let mut out = String::new();
    crate::util::sds::repr(&mut out, name.as_bytes());
    out
}

/// What an I/O error says, as C's `strerror` prints it (Redis's log lines quote it), without
/// the "(os error N)" the standard library appends.
pub fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Writes `text` as the manifest: a temporary file, fsynced, renamed over the old one, and
/// the directory fsynced, so a crash leaves either manifest whole.
pub fn write_manifest(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!("temp-{name}"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

pub fn base_name(prefix: &str, seq: i64) -> String {
    format!("{prefix}.{seq}.base.aof")
}

pub fn incr_name(prefix: &str, seq: i64) -> String {
    format!("{prefix}.{seq}.incr.aof")
}

/// The journal directory of a configuration.
pub fn dir_of(dir: &str, dirname: &str) -> PathBuf {
    Path::new(dir).join(dirname)
}

/// How reading one file ended.
#[derive(Debug)]
pub enum ReadEnd {
    /// Every byte read as whole records.
    Clean,
    /// The file ends inside a record (or inside a MULTI without its EXEC) that starts at
    /// this offset: the torn tail of a write cut short.
    Truncated { valid_up_to: u64 },
    /// A byte that no record may hold, at this offset.
    Corrupt { offset: u64 },
}

/// Reads the commands of one AOF file in order, calling `run` with each and the offset where
/// it ends (for the loading progress).
/// Lines starting with `#` are annotations and are skipped, as Redis does. Stricter than
/// Redis's loader in one way: the CRLF after each bulk string is checked, so a flipped byte
/// there is reported instead of read as data.
pub fn read_file(
    path: &Path,
    mut run: impl FnMut(Vec<Vec<u8>>, u64) -> Result<(), String>,
) -> Result<ReadEnd, String> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .map_err(|e| format!("can't open the append log file {}: {e}", path.display()))?;
    let mut pos = 0usize;
    // Commands of an open MULTI are held back until its EXEC: a file that ends inside a
    // transaction loses the transaction, as in Redis.
    let mut held: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut multi_start = None;
    let mut valid = 0usize;
    while pos < data.len() {
        let start = pos;
        if data[pos] == b'#' {
            match find_crlf(&data, pos) {
                Some(e) => {
                    pos = e + 2;
                    if multi_start.is_none() {
                        valid = pos;
                    }
                    continue;
                }
                None => {
                    return Ok(ReadEnd::Truncated {
                        valid_up_to: multi_start.unwrap_or(valid) as u64,
                    })
                }
            }
        }
        let argv = match parse_record(&data, &mut pos) {
            Ok(a) => a,
            Err(Parse::Short) => {
                return Ok(ReadEnd::Truncated {
                    valid_up_to: multi_start.unwrap_or(valid) as u64,
                })
            }
            Err(Parse::Bad(at)) => return Ok(ReadEnd::Corrupt { offset: at as u64 }),
        };
        let name = argv[0].to_ascii_lowercase();
        if name == b"multi" {
            if multi_start.is_some() {
                return Ok(ReadEnd::Corrupt {
                    offset: start as u64,
                });
            }
            multi_start = Some(start);
            held.push(argv);
        } else if multi_start.is_some() {
            let end = name == b"exec";
            held.push(argv);
            if end {
                for a in held.drain(..) {
                    run(a, pos as u64)?;
                }
                multi_start = None;
                valid = pos;
            }
        } else {
            run(argv, pos as u64)?;
            valid = pos;
        }
    }
    if let Some(s) = multi_start {
        return Ok(ReadEnd::Truncated {
            valid_up_to: s as u64,
        });
    }
    Ok(ReadEnd::Clean)
}

enum Parse {
    /// The data ends inside the record.
    Short,
    /// A byte no record holds, at this offset.
    Bad(usize),
}

fn find_crlf(data: &[u8], from: usize) -> Option<usize> {
    data[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

/// `*<n>` or `$<len>` header line at `pos`; the number and the offset after its CRLF.
fn header(data: &[u8], pos: usize, mark: u8) -> Result<(usize, usize), Parse> {
    if pos >= data.len() {
        return Err(Parse::Short);
    }
    if data[pos] != mark {
        return Err(Parse::Bad(pos));
    }
    let mut i = pos + 1;
    let mut n: usize = 0;
    let mut digits = 0;
    while i < data.len() && data[i].is_ascii_digit() {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add((data[i] - b'0') as usize))
            .ok_or(Parse::Bad(i))?;
        i += 1;
        digits += 1;
    }
    if i >= data.len() {
        return Err(Parse::Short);
    }
    if digits == 0 || data[i] != b'\r' {
        return Err(Parse::Bad(i));
    }
    if i + 1 >= data.len() {
        return Err(Parse::Short);
    }
    if data[i + 1] != b'\n' {
        return Err(Parse::Bad(i + 1));
    }
    Ok((n, i + 2))
}

fn parse_record(data: &[u8], pos: &mut usize) -> Result<Vec<Vec<u8>>, Parse> {
    let (argc, mut p) = header(data, *pos, b'*')?;
    if argc == 0 {
        return Err(Parse::Bad(*pos));
    }
    let mut argv = Vec::new();
    for _ in 0..argc {
        let (len, q) = header(data, p, b'$')?;
        let end = q.checked_add(len).ok_or(Parse::Bad(p))?;
        if end + 2 > data.len() {
            return Err(Parse::Short);
        }
        if &data[end..end + 2] != b"\r\n" {
            return Err(Parse::Bad(end));
        }
        argv.push(data[q..end].to_vec());
        p = end + 2;
    }
    *pos = p;
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_writes_resp_arrays_of_bulk_strings() {
        let mut out = b"x".to_vec();
        let long = vec![b'a'; 1234];
        encode(&mut out, &[b"SET", b"", &long]);
        let mut want = b"x*3\r\n$3\r\nSET\r\n$0\r\n\r\n$1234\r\n".to_vec();
        want.extend_from_slice(&long);
        want.extend_from_slice(b"\r\n");
        assert_eq!(out, want);
        let mut one = Vec::new();
        encode_args(&mut one, &[bytes::Bytes::from_static(b"PING")]);
        assert_eq!(one, b"*1\r\n$4\r\nPING\r\n");
        for n in [0usize, 9, 10, 99, 100, 12345, usize::MAX] {
            assert_eq!(digits(n), n.to_string().len());
        }
    }

    #[test]
    fn manifest_round_trips_in_redis_words() {
        let m = Manifest {
            base: Some(FileInfo {
                name: base_name("appendonly.aof", 1),
                seq: 1,
                kind: 'b',
            }),
            incr: vec![FileInfo {
                name: incr_name("appendonly.aof", 1),
                seq: 1,
                kind: 'i',
            }],
        };
        let text = m.to_text();
        assert_eq!(
            text,
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
        );
        assert_eq!(Manifest::parse(text.as_bytes()).unwrap(), m);
    }

    /// What Redis 7.0's `aofLoadManifestFromFile` refuses is refused, with its reason and
    /// the line it stopped at; what it accepts reads the same.
    #[test]
    fn manifest_refusals_are_redis_s() {
        let refused = |text: &[u8]| Manifest::parse(text).unwrap_err();
        let b = "file a.1.base.aof seq 1 type b\n";
        assert_eq!(refused(b"").reason, "Found an empty AOF manifest");
        let blank = refused(format!("{b}\nfile a.2.incr.aof seq 2 type i\n").as_bytes());
        assert_eq!(blank.reason, "Invalid AOF manifest file format");
        assert_eq!(blank.line, Some((2, String::new())));
        for bad in [
            "filx a.1.base.aof seq 1 type b\n",
            "file a.1.incr.aof type i\n",
            "file a.1.incr.aof seq 1 type i newkey\n",
            "file a.1.incr.aof seq 0 type i\n",
            "file a.1.incr.aof seq x type i\n",
            "file a.1.incr.aof seq 1 type \"\"\n",
            "file \"a.1.incr.aof seq 1 type i\n",
            "file \"a\"b seq 1 type i\n",
            "   \t\n",
            " # an indented comment\n",
        ] {
            let e = refused(format!("{b}{bad}").as_bytes());
            assert_eq!(e.reason, "Invalid AOF manifest file format", "{bad:?}");
            assert_eq!(e.line.map(|l| l.0), Some(2), "{bad:?}");
        }
        assert_eq!(
            refused(b"file a.1.base.aof seq 1 type b").reason,
            "The AOF manifest file contains too long line"
        );
        let long = format!("{}\n", b.trim_end().repeat(40));
        assert_eq!(
            refused(long.as_bytes()).reason,
            "The AOF manifest file contains too long line"
        );
        assert_eq!(
            refused(format!("{b}file a.2.base.aof seq 2 type b\n").as_bytes()).reason,
            "Found duplicate base file information"
        );
        assert_eq!(
            refused(b"file a.2.incr.aof seq 2 type i\nfile a.1.incr.aof seq 1 type i\n").reason,
            "Found a non-monotonic sequence number"
        );
        assert_eq!(
            refused(b"file a.1.incr.aof seq -1 type i\n").reason,
            "Found a non-monotonic sequence number"
        );
        assert_eq!(
            refused(b"file a.1.base.aof seq 1 type x\n").reason,
            "Unknown AOF file type"
        );
        assert_eq!(
            refused(b"file ../a.1.base.aof seq 1 type b\n").reason,
            "File can't be a path, just a filename"
        );

        // Accepted: comments, unknown keys, keys in any case, history entries, a gap in
        // the sequence, a line of exactly 1024 bytes with its newline, quoted names.
        let ok = Manifest::parse(
            b"# written by hand\nFILE a.1.base.aof SEQ 1 TYPE b newkey newvalue\n\
              file a.0.base.aof seq 7 type h\nfile a.1.incr.aof seq 1 type i\n\
              file a.3.incr.aof seq 3 type i\n",
        )
        .unwrap();
        assert_eq!(
            ok.base.as_ref().map(|f| f.name.as_str()),
            Some("a.1.base.aof")
        );
        assert_eq!(ok.incr.iter().map(|f| f.seq).collect::<Vec<_>>(), [1, 3]);
        let pad = 1023 - "file a.1.base.aof seq 1 type b".len();
        let edge = format!("file a.1.base.aof seq 1 type b{}\n", " ".repeat(pad));
        assert_eq!(edge.len(), 1024);
        assert!(Manifest::parse(edge.as_bytes()).is_ok());
        let quoted = Manifest::parse(b"file \" x\\n\\x41\" seq 2 type b\n").unwrap();
        assert_eq!(quoted.base.map(|f| f.name), Some(" x\nA".to_string()));
    }

    /// Names Redis writes in quotes (spaces, escapes, bytes outside printable ASCII) read
    /// back as the same name.
    #[test]
    fn quoted_manifest_names_round_trip() {
        for name in [
            " file seq \n\n.aof .2.base.aof",
            "a\"b.aof",
            "caf\u{e9}\t.aof",
        ] {
            let m = Manifest {
                base: Some(FileInfo {
                    name: name.to_string(),
                    seq: 2,
                    kind: 'b',
                }),
                incr: Vec::new(),
            };
            let text = m.to_text();
            assert!(text.starts_with("file \""), "{text}");
            assert_eq!(Manifest::parse(text.as_bytes()).unwrap(), m, "{text}");
        }
        assert_eq!(atoll(b"  -12x"), -12);
        assert_eq!(atoll(b"99999999999999999999"), i64::MAX);
        assert_eq!(atoll(b"x1"), 0);
    }

    fn read(data: &[u8]) -> (Vec<Vec<Vec<u8>>>, ReadEnd) {
        let dir = std::env::temp_dir().join(format!(
            "tidecache-aof-test-{}-{}",
            std::process::id(),
            crate::util::clock::now_us()
        ));
        std::fs::write(&dir, data).unwrap();
        let mut got = Vec::new();
        let end = read_file(&dir, |a, _| {
            got.push(a);
            Ok(())
        })
        .unwrap();
        let _ = std::fs::remove_file(&dir);
        (got, end)
    }

    #[test]
    fn records_read_back_and_torn_tails_are_found() {
        let mut buf = Vec::new();
        encode(&mut buf, &[b"SET", b"k", b"v\r\n"]);
        let first = buf.len();
        encode(&mut buf, &[b"MULTI"]);
        encode(&mut buf, &[b"DEL", b"k"]);
        encode(&mut buf, &[b"EXEC"]);
        let (got, end) = read(&buf);
        assert!(matches!(end, ReadEnd::Clean));
        assert_eq!(got.len(), 4);
        assert_eq!(got[0][2], b"v\r\n");
        // A torn tail inside the transaction loses the transaction.
        let (got, end) = read(&buf[..buf.len() - 3]);
        assert_eq!(got.len(), 1);
        assert!(matches!(end, ReadEnd::Truncated { valid_up_to } if valid_up_to == first as u64));
        // A flipped byte in the middle is corruption at its offset.
        let mut bad = buf.clone();
        bad[first] = b'+';
        let (_, end) = read(&bad);
        assert!(matches!(end, ReadEnd::Corrupt { offset } if offset == first as u64));
    }
}
