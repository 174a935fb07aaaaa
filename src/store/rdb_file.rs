//! Loading a whole RDB file written by Redis (`dump.rdb`, RDB version 10 of Redis 7.0 and
//! older), so data moves from Redis to tidecache: the file-level opcodes of Redis's
//! `rdbLoadRioWithLoadingCtx` (rdb.c) around the values that `store::rdb` reads.
//!
//! What is loaded: every key of every database with its value in any encoding Redis 7.0
//! writes or still loads, and its absolute expiry time; keys already expired are counted
//! and dropped, as a Redis master does. What is skipped: AUX fields (the informative ones
//! are reported), RESIZEDB hints, LRU idle times and LFU counters (a loaded key starts with
//! a fresh access clock, as RESTORE's do), FUNCTION2 libraries (reported: there is no
//! function engine). What stops the load: module data, a version above 10, a database
//! number beyond `databases`, a duplicate key, a malformed or truncated file, a checksum
//! that does not match. Nothing read from the file sizes an allocation before the bytes
//! are there (see `store::rdb`).

use crate::store::keyspace::Ttl;
use crate::store::rdb::{self, crc64, Reader};
use crate::store::Store;
use std::path::Path;

/// The newest RDB version this loader reads (Redis 7.0's).
pub const FILE_VERSION_MAX: u32 = 10;

const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_FUNCTION: u8 = 246;
const OPCODE_MODULE_AUX: u8 = 247;
const OPCODE_IDLE: u8 = 248;
const OPCODE_FREQ: u8 = 249;
const OPCODE_AUX: u8 = 250;
const OPCODE_RESIZEDB: u8 = 251;
const OPCODE_EXPIRETIME_MS: u8 = 252;
const OPCODE_EXPIRETIME: u8 = 253;
const OPCODE_SELECTDB: u8 = 254;
const OPCODE_EOF: u8 = 255;

const TYPE_MODULE: u8 = 6;
const TYPE_MODULE_2: u8 = 7;

/// What a load did.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Keys stored.
    pub keys: u64,
    /// Keys whose expiry time had passed, not stored.
    pub expired: u64,
    /// Keys holding an empty aggregate (which old Redis versions could write), skipped as
    /// Redis skips them.
    pub empty_skipped: u64,
}

/// How much a line the loader reports matters (Redis logs them at these levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    Notice,
    Warning,
}

/// Where the loader reports what it meets as it goes (the file's version and age, what it
/// skipped), in Redis's words.
pub type Log<'a> = &'a mut dyn FnMut(Note, &str);

/// Why a file did not load: what, and at which byte offset of the file.
#[derive(Debug)]
pub struct LoadError {
    pub offset: usize,
    pub what: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.what)
    }
}

/// Loads the RDB file at `path` into `store` (which should be empty). `Ok(None)` when there
/// is no such file.
pub fn load_path(store: &Store, path: &Path, log: Log<'_>) -> Result<Option<Loaded>, LoadError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LoadError {
                offset: 0,
                what: format!("cannot read the file: {e}"),
            })
        }
    };
    load_bytes(store, &bytes, log).map(Some)
}

fn err(offset: usize, what: impl Into<String>) -> LoadError {
    LoadError {
        offset,
        what: what.into(),
    }
}

/// Shows a key or field from the file in a message: printable ASCII as it is, other bytes
/// escaped, and at most 64 bytes of it.
fn shown(b: &[u8]) -> String {
    let mut s: String = b[..b.len().min(64)]
        .iter()
        .flat_map(|&c| std::ascii::escape_default(c))
        .map(char::from)
        .collect();
    if b.len() > 64 {
        s.push_str("...");
    }
    s
}

/// The error for a read that failed at `rd`'s position: a truncated file (at its end) or
/// bad bytes.
fn bad(rd: &Reader<'_>, what: &str) -> LoadError {
    if rd.short {
        let end = rd.at + rd.remaining();
        err(end, format!("unexpected end of file while reading {what}"))
    } else {
        err(rd.at, format!("invalid data while reading {what}"))
    }
}

/// Loads a whole RDB file held in memory into `store`.
pub fn load_bytes(store: &Store, bytes: &[u8], log: Log<'_>) -> Result<Loaded, LoadError> {
    let mut out = Loaded::default();
    if bytes.len() < 9 || &bytes[..5] != b"REDIS" {
        return Err(err(0, "wrong signature (not an RDB file)"));
    }
    let version = std::str::from_utf8(&bytes[5..9])
        .ok()
        .filter(|v| v.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|v| v.parse::<u32>().ok())
        .ok_or_else(|| err(5, "bad RDB version field"))?;
    if !(1..=FILE_VERSION_MAX).contains(&version) {
        return Err(err(
            5,
            format!("can't handle RDB format version {version} (this server reads 1 to {FILE_VERSION_MAX})"),
        ));
    }
    let mut rd = Reader::new(bytes);
    rd.at = 9;
    let now = crate::util::clock::now_ms();
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    loop {
        let op_at = rd.at;
        let t = rd.byte().map_err(|_| bad(&rd, "an opcode"))?;
        match t {
            OPCODE_EXPIRETIME => {
                let s = rd.take(4).map_err(|_| bad(&rd, "an expire time"))?;
                let secs = i32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                expire = Some(secs as i64 * 1000);
            }
            OPCODE_EXPIRETIME_MS => {
                let ms = rd.u64_le().map_err(|_| bad(&rd, "an expire time"))?;
                expire = Some(ms as i64);
            }
            OPCODE_FREQ => {
                rd.byte().map_err(|_| bad(&rd, "an LFU counter"))?;
            }
            OPCODE_IDLE => {
                rd.len().map_err(|_| bad(&rd, "an LRU idle time"))?;
            }
            OPCODE_EOF => break,
            OPCODE_SELECTDB => {
                let n = rd.len().map_err(|_| bad(&rd, "a database number"))?;
                if n >= store.databases() as u64 {
                    return Err(err(
                        op_at,
                        format!(
                            "the file has keys in database {n}, and this server is configured with {} databases",
                            store.databases()
                        ),
                    ));
                }
                db = n as usize;
            }
            OPCODE_RESIZEDB => {
                rd.len().map_err(|_| bad(&rd, "a RESIZEDB hint"))?;
                rd.len().map_err(|_| bad(&rd, "a RESIZEDB hint"))?;
            }
            OPCODE_AUX => {
                let k = rd.string().map_err(|_| bad(&rd, "an AUX field name"))?;
                let v = rd.string().map_err(|_| bad(&rd, "an AUX field value"))?;
                if k.first() == Some(&b'%') {
                    log(Note::Notice, &format!("RDB '{}': {}", shown(&k), shown(&v)));
                } else if &k[..] == b"redis-ver" {
                    log(
                        Note::Notice,
                        &format!("Loading RDB produced by version {}", shown(&v)),
                    );
                } else if &k[..] == b"ctime" {
                    let ctime = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|c| c.parse::<i64>().ok());
                    if let Some(c) = ctime {
                        let age = (now / 1000 - c).max(0);
                        log(Note::Notice, &format!("RDB age {age} seconds"));
                    }
                } else if &k[..] == b"used-mem" {
                    if let Some(m) = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|c| c.parse::<i64>().ok())
                    {
                        log(
                            Note::Notice,
                            &format!(
                                "RDB memory usage when created {:.2} Mb",
                                m as f64 / (1024.0 * 1024.0)
                            ),
                        );
                    }
                }
            }
            OPCODE_MODULE_AUX => {
                return Err(err(
                    op_at,
                    "the file holds module data (MODULE_AUX), and this server has no modules to load it",
                ));
            }
            OPCODE_FUNCTION2 => {
                // One string: the library's source code, which Redis compiles on load.
                rd.string().map_err(|_| bad(&rd, "a function library"))?;
                log(Note::Warning, &format!(
                    "Skipped a function library (FUNCTION2 at offset {op_at}): this server has no function engine"
                ));
            }
            OPCODE_FUNCTION => {
                return Err(err(
                    op_at,
                    "the file holds a function library in the format of Redis 7.0's release candidates, which this server does not read",
                ));
            }
            TYPE_MODULE | TYPE_MODULE_2 => {
                return Err(err(
                    op_at,
                    "the file holds a key of a module type, and this server has no modules to load it",
                ));
            }
            t => {
                let key = rd.string().map_err(|_| bad(&rd, "a key name"))?;
                rd.empty = false;
                let value = match rdb::read_value(&mut rd, t) {
                    Ok(v) => v,
                    Err(_) if rd.empty => {
                        // Redis's answer to the empty keys older versions could write
                        // (redis#8453): skipped, the first ten named.
                        if out.empty_skipped < 10 {
                            log(
                                Note::Warning,
                                &format!("rdbLoadObject skipping empty key: {}", shown(&key)),
                            );
                        }
                        out.empty_skipped += 1;
                        expire = None;
                        continue;
                    }
                    Err(_) => {
                        let what = format!(
                            "the value (RDB type {t}) of key '{}' in DB {db}, which starts at offset {op_at}",
                            shown(&key)
                        );
                        return Err(bad(&rd, &what));
                    }
                };
                let at = expire.take();
                if at.is_some_and(|at| at < now) {
                    out.expired += 1;
                    continue;
                }
                let ttl = at.map_or(Ttl::Clear, Ttl::At);
                let fresh = store.with_key(db, &key, |ks, h| {
                    if ks.contains(h, &key) {
                        return false;
                    }
                    ks.set(h, &key, value, ttl);
                    true
                });
                if !fresh {
                    return Err(err(
                        op_at,
                        format!("duplicated key '{}' in DB {db}", shown(&key)),
                    ));
                }
                out.keys += 1;
            }
        }
        if !matches!(
            t,
            OPCODE_EXPIRETIME | OPCODE_EXPIRETIME_MS | OPCODE_FREQ | OPCODE_IDLE
        ) && expire.is_some()
        {
            // An expire time belongs to the key right after it (FREQ/IDLE may come between).
            return Err(err(op_at, "an expire time not followed by a key"));
        }
    }
    if version >= 5 {
        let sum_at = rd.at;
        let stored = rd.u64_le().map_err(|_| bad(&rd, "the checksum"))?;
        if stored != 0 {
            let computed = crc64(0, &bytes[..sum_at]);
            if computed != stored {
                return Err(err(
                    sum_at,
                    format!(
                        "wrong RDB checksum (the file says {stored:016x}, its contents give {computed:016x}): the file is corrupt"
                    ),
                ));
            }
        } else {
            log(
                Note::Warning,
                "RDB file was saved with checksum disabled: no check performed.",
            );
        }
    }
    Ok(out)
}
