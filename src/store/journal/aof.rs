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
    pub seq: u64,
    /// `b` (base), `h` (history, to be deleted), `i` (incremental).
    pub kind: char,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<FileInfo>,
    pub incr: Vec<FileInfo>,
}

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

    /// Reads a manifest as Redis's `aofLoadManifestFromFile` does: `key value` pairs per
    /// line, `#` comments, one base at most, incremental files in increasing `seq`.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = split_words(line)
                .ok_or_else(|| format!("Invalid AOF manifest file format (line {})", n + 1))?;
            if words.len() % 2 != 0 {
                return Err(format!("Invalid AOF manifest file format (line {})", n + 1));
            }
            let mut name = None;
            let mut seq = None;
            let mut kind = None;
            for kv in words.chunks(2) {
                match kv[0].as_str() {
                    "file" => name = Some(kv[1].clone()),
                    "seq" => seq = kv[1].parse::<u64>().ok(),
                    "type" => kind = kv[1].chars().next(),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err(format!("Invalid AOF manifest file format (line {})", n + 1));
            };
            let info = FileInfo { name, seq, kind };
            match kind {
                'b' => {
                    if m.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    m.base = Some(info);
                }
                'i' => {
                    if m.incr.last().is_some_and(|l| l.seq >= seq) {
                        return Err("Found a non-monotonic sequence number".into());
                    }
                    m.incr.push(info);
                }
                'h' => {}
                _ => return Err(format!("Unknown AOF file type '{kind}'")),
            }
        }
        Ok(m)
    }
}

/// A manifest file name in quotes when it needs them (Redis's `sdscatrepr` for names with
/// spaces); ours never do.
fn quote(name: &str) -> String {
    if name.contains([' ', '"', '\'', '\\']) || name.chars().any(|c| c.is_control()) {
        format!("{name:?}")
    } else {
        name.to_string()
    }
}

/// Splits a manifest line into words, `"…"` quoted words unescaped (`sdssplitargs`).
fn split_words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else {
            return Some(out);
        };
        let mut w = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => w.push(chars.next()?),
                    c => w.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                w.push(c);
                chars.next();
            }
        }
        out.push(w);
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

pub fn base_name(prefix: &str, seq: u64) -> String {
    format!("{prefix}.{seq}.base.aof")
}

pub fn incr_name(prefix: &str, seq: u64) -> String {
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
        assert_eq!(Manifest::parse(&text).unwrap(), m);
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
