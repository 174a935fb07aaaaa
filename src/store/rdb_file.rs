//! Loading an RDB file written by Redis (`dump.rdb`, RDB version 10 of Redis 7.0 and
//! older), so data moves from Redis to tidecache: the file-level opcodes of Redis's
//! `rdbLoadRioWithLoadingCtx` (rdb.c) around the values that `store::rdb` reads.
//!
//! What is loaded: every key of every database with its value in any encoding Redis 7.0
//! writes or still loads, and its absolute expiry time; keys already expired are counted
//! and dropped, as a Redis master does. What is skipped: AUX fields (the informative ones
//! are reported), RESIZEDB hints, LRU idle times and LFU counters (a loaded key starts with
//! a fresh access clock, as RESTORE's do). FUNCTION2 libraries are handed to the caller
//! (`Loaded::functions`), which loads them into the function engine. What stops the load:
//! module data, a version above 10, a database number beyond `databases`, a duplicate key, a malformed or truncated file, a checksum
//! that does not match, each reported with the file offset where it was found. Empty
//! aggregates (which Redis before 6.2 could write) are skipped and counted, as Redis does.
//!
//! The file is read a chunk (1 MB) at a time, not whole: a record (an opcode and what
//! follows, a key with its value) cut by the end of a chunk fails as a short read, more is
//! read and the record is parsed again. That is safe because a record changes nothing
//! until it has been read whole. Loading 1M small keys takes about what redis-server takes
//! for the same file, and leaves the same RSS as writing them with SET. Nothing read from
//! the file sizes an allocation before the bytes are there (see `store::rdb`); a corrupt
//! length can at most make the loader read the rest of the file before it fails.

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
    /// Those keys, (database, name): a master restarting with its replication history
    /// sends their DELs to its replicas, which still hold them (Redis's
    /// `RDBFLAGS_FEED_REPL`).
    pub expired_keys: Vec<(usize, Vec<u8>)>,
    /// Keys holding an empty aggregate (which old Redis versions could write), skipped as
    /// Redis skips them.
    pub empty_skipped: u64,
    /// The code of each function library (FUNCTION2), for the caller to load.
    pub functions: Vec<Vec<u8>>,
    /// `repl-stream-db`: the database the master's replication stream has selected where
    /// the snapshot was cut (written by a replica serving a replica of its own).
    pub stream_db: Option<usize>,
    /// `repl-id` / `repl-offset`: where the file's data stands in a replication history.
    pub repl_id: Option<String>,
    pub repl_offset: Option<u64>,
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

/// Loads the RDB file at `path` into `store` (which should be empty), reading it in
/// chunks: memory beyond the data is one chunk, or two of the largest key and value.
/// `Ok(None)` when there is no such file.
pub fn load_path(store: &Store, path: &Path, log: Log<'_>) -> Result<Option<Loaded>, LoadError> {
    load_path_with_progress(store, path, log, &mut |_| {})
}

/// [`load_path`], telling `progress` the file offset reached after each record (a key, an
/// opcode): what INFO's `loading_loaded_bytes` shows while the file is loaded at start.
pub fn load_path_with_progress(
    store: &Store,
    path: &Path,
    log: Log<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<Option<Loaded>, LoadError> {
    load_path_as(store, path, log, progress, false)
}

/// [`load_path_with_progress`] for a replica (`replica`: Redis's `!iAmMaster()`), which
/// keeps the keys already expired: they leave when its master's DELs arrive, and a command
/// of the master's stream may still need them.
pub fn load_path_as(
    store: &Store,
    path: &Path,
    log: Log<'_>,
    progress: &mut dyn FnMut(u64),
    replica: bool,
) -> Result<Option<Loaded>, LoadError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(0, format!("cannot open the file: {e}"))),
    };
    load_reader_as(store, file, log, progress, replica).map(Some)
}

/// [`load_path_as`] from any reader: a file, or a replica's payload received in memory.
pub fn load_reader_as(
    store: &Store,
    src: impl std::io::Read,
    log: Log<'_>,
    progress: &mut dyn FnMut(u64),
    replica: bool,
) -> Result<Loaded, LoadError> {
    // A replica's load is its master's data: no key it loads is one of its own clients'
    // (which alone it expires itself, `expiry::sweep_replica_own`).
    let was = crate::store::expiry::from_master();
    crate::store::expiry::set_from_master(replica || was);
    let r = load_with(store, src, CHUNK, log, progress, replica);
    crate::store::expiry::set_from_master(was);
    r
}

/// Loads a whole RDB file held in memory into `store`.
pub fn load_bytes(store: &Store, bytes: &[u8], log: Log<'_>) -> Result<Loaded, LoadError> {
    // One read takes it all (a chunk as large as the data, not a megabyte zeroed).
    load_reader(store, bytes, bytes.len().clamp(16, CHUNK), log)
}

/// How much is read at a time.
const CHUNK: usize = 1 << 20;

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

/// The error for a read that failed at `rd`'s position (`origin` is the file offset of
/// `rd`'s first byte): a truncated file (at its end) or bad bytes.
fn bad(rd: &Reader<'_>, origin: usize, what: &str) -> LoadError {
    if rd.short {
        let end = origin + rd.at + rd.remaining();
        err(end, format!("unexpected end of file while reading {what}"))
    } else {
        err(origin + rd.at, format!("invalid data while reading {what}"))
    }
}

/// The part of the file read and not yet parsed, and the checksum of what was parsed.
struct Input<S> {
    src: S,
    buf: Vec<u8>,
    /// Where the unparsed bytes start in `buf`.
    start: usize,
    /// The file offset of `buf[0]`.
    base: usize,
    eof: bool,
    crc: u64,
    chunk: usize,
}

impl<S: std::io::Read> Input<S> {
    fn unparsed(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// The file offset of the first unparsed byte.
    fn offset(&self) -> usize {
        self.base + self.start
    }

    /// Marks `n` more bytes parsed.
    fn consume(&mut self, n: usize) {
        self.crc = crc64(self.crc, &self.buf[self.start..self.start + n]);
        self.start += n;
    }

    /// Reads more: the unparsed bytes are kept and grown to at least twice their length
    /// (and at least a chunk), so a record that did not fit is read again whole, at a cost
    /// proportional to its size however many times it is retried. How much is read
    /// depends only on what is there, never on a length the file claims.
    fn refill(&mut self) -> Result<(), LoadError> {
        self.buf.drain(..self.start);
        self.base += self.start;
        self.start = 0;
        let target = (self.buf.len() * 2).max(self.chunk).max(16);
        while self.buf.len() < target && !self.eof {
            let old = self.buf.len();
            self.buf.resize(target, 0);
            let got = loop {
                match self.src.read(&mut self.buf[old..]) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            };
            match got {
                Ok(n) => {
                    self.buf.truncate(old + n);
                    self.eof = n == 0;
                }
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(err(old + self.base, format!("cannot read the file: {e}")));
                }
            }
        }
        Ok(())
    }

    /// At least `n` unparsed bytes, unless the file ends first.
    fn want(&mut self, n: usize) -> Result<bool, LoadError> {
        while self.buf.len() - self.start < n && !self.eof {
            self.refill()?;
        }
        Ok(self.buf.len() - self.start >= n)
    }
}

/// What the loader keeps between records.
struct State<'l> {
    out: Loaded,
    db: usize,
    /// The expire time read for the next key.
    expire: Option<i64>,
    now: i64,
    /// A replica's load: nothing counts as expired.
    keep_expired: bool,
    log: &'l mut dyn FnMut(Note, &str),
}

/// Loads an RDB file read from `src`, `chunk` bytes at a time, into `store`.
pub fn load_reader(
    store: &Store,
    src: impl std::io::Read,
    chunk: usize,
    log: Log<'_>,
) -> Result<Loaded, LoadError> {
    load_with(store, src, chunk, log, &mut |_| {}, false)
}

fn load_with(
    store: &Store,
    src: impl std::io::Read,
    chunk: usize,
    log: Log<'_>,
    progress: &mut dyn FnMut(u64),
    keep_expired: bool,
) -> Result<Loaded, LoadError> {
    let mut input = Input {
        src,
        buf: Vec::new(),
        start: 0,
        base: 0,
        eof: false,
        crc: 0,
        chunk: chunk.max(1),
    };
    if !input.want(9)? || &input.unparsed()[..5] != b"REDIS" {
        return Err(err(0, "wrong signature (not an RDB file)"));
    }
    let version = std::str::from_utf8(&input.unparsed()[5..9])
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
    input.consume(9);
    let mut st = State {
        out: Loaded::default(),
        db: 0,
        expire: None,
        now: crate::util::clock::now_ms(),
        keep_expired,
        log,
    };
    loop {
        let origin = input.offset();
        let mut rd = Reader::new(input.unparsed());
        match st.record(store, &mut rd, origin) {
            Ok(done) => {
                let n = rd.at;
                input.consume(n);
                if done {
                    break;
                }
                progress(input.offset() as u64);
            }
            // The record goes on past what was read: read more and parse it again (a
            // record changes nothing before it is read whole).
            Err(_) if rd.short && !input.eof => input.refill()?,
            Err(e) => return Err(e),
        }
    }
    if version >= 5 {
        let sum_at = input.offset();
        let computed = input.crc;
        if !input.want(8)? {
            return Err(err(
                input.base + input.buf.len(),
                "unexpected end of file while reading the checksum",
            ));
        }
        let mut a = [0u8; 8];
        a.copy_from_slice(&input.unparsed()[..8]);
        let stored = u64::from_le_bytes(a);
        if stored == 0 {
            (st.log)(
                Note::Warning,
                "RDB file was saved with checksum disabled: no check performed.",
            );
        } else if computed != stored {
            return Err(err(
                sum_at,
                format!(
                    "wrong RDB checksum (the file says {stored:016x}, its contents give {computed:016x}): the file is corrupt"
                ),
            ));
        }
    }
    Ok(st.out)
}

impl State<'_> {
    /// Parses one record (an opcode and what follows it) from `rd`, whose first byte is at
    /// file offset `origin`, and applies it; true at the end-of-file opcode. Nothing is
    /// changed until the record has been read whole, so a record cut by the end of what
    /// was read can be parsed again.
    fn record(
        &mut self,
        store: &Store,
        rd: &mut Reader<'_>,
        origin: usize,
    ) -> Result<bool, LoadError> {
        let op_at = origin + rd.at;
        let t = rd.byte().map_err(|_| bad(rd, origin, "an opcode"))?;
        let log = &mut *self.log;
        match t {
            OPCODE_EXPIRETIME => {
                let s = rd.take(4).map_err(|_| bad(rd, origin, "an expire time"))?;
                let secs = i32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                self.expire = Some(secs as i64 * 1000);
                return Ok(false);
            }
            OPCODE_EXPIRETIME_MS => {
                let ms = rd.u64_le().map_err(|_| bad(rd, origin, "an expire time"))?;
                self.expire = Some(ms as i64);
                return Ok(false);
            }
            OPCODE_FREQ => {
                rd.byte().map_err(|_| bad(rd, origin, "an LFU counter"))?;
                return Ok(false);
            }
            OPCODE_IDLE => {
                rd.len().map_err(|_| bad(rd, origin, "an LRU idle time"))?;
                return Ok(false);
            }
            _ => {}
        }
        if self.expire.is_some()
            && matches!(
                t,
                OPCODE_EOF | OPCODE_SELECTDB | OPCODE_RESIZEDB | OPCODE_AUX | OPCODE_FUNCTION2
            )
        {
            // An expire time belongs to the key right after it (FREQ/IDLE may come between).
            return Err(err(op_at, "an expire time not followed by a key"));
        }
        match t {
            OPCODE_EOF => return Ok(true),
            OPCODE_SELECTDB => {
                let n = rd.len().map_err(|_| bad(rd, origin, "a database number"))?;
                if n >= store.databases() as u64 {
                    return Err(err(
                        op_at,
                        format!(
                            "the file has keys in database {n}, and this server is configured with {} databases",
                            store.databases()
                        ),
                    ));
                }
                self.db = n as usize;
            }
            OPCODE_RESIZEDB => {
                rd.len().map_err(|_| bad(rd, origin, "a RESIZEDB hint"))?;
                rd.len().map_err(|_| bad(rd, origin, "a RESIZEDB hint"))?;
            }
            OPCODE_AUX => {
                let k = rd
                    .string()
                    .map_err(|_| bad(rd, origin, "an AUX field name"))?;
                let v = rd
                    .string()
                    .map_err(|_| bad(rd, origin, "an AUX field value"))?;
                let number = || {
                    std::str::from_utf8(&v)
                        .ok()
                        .and_then(|c| c.parse::<i64>().ok())
                };
                if k.first() == Some(&b'%') {
                    log(Note::Notice, &format!("RDB '{}': {}", shown(&k), shown(&v)));
                } else if &k[..] == b"redis-ver" {
                    log(
                        Note::Notice,
                        &format!("Loading RDB produced by version {}", shown(&v)),
                    );
                } else if &k[..] == b"ctime" {
                    if let Some(c) = number() {
                        let age = (self.now / 1000 - c).max(0);
                        log(Note::Notice, &format!("RDB age {age} seconds"));
                    }
                } else if &k[..] == b"used-mem" {
                    if let Some(m) = number() {
                        log(
                            Note::Notice,
                            &format!(
                                "RDB memory usage when created {:.2} Mb",
                                m as f64 / (1024.0 * 1024.0)
                            ),
                        );
                    }
                } else if &k[..] == b"repl-id" {
                    self.out.repl_id = std::str::from_utf8(&v)
                        .ok()
                        .filter(|id| id.len() == 40)
                        .map(str::to_string);
                } else if &k[..] == b"repl-offset" {
                    self.out.repl_offset = number().and_then(|n| u64::try_from(n).ok());
                } else if &k[..] == b"repl-stream-db" {
                    // -1 (Redis's "none"): the stream names its database itself.
                    self.out.stream_db = number().and_then(|n| usize::try_from(n).ok());
                }
            }
            OPCODE_MODULE_AUX => {
                return Err(err(
                    op_at,
                    "the file holds module data (MODULE_AUX), and this server has no modules to load it",
                ));
            }
            OPCODE_FUNCTION2 => {
                // One string: the library's source code, which the caller compiles (the
                // function engine is above the store).
                let code = rd
                    .string()
                    .map_err(|_| bad(rd, origin, "a function library"))?;
                self.out.functions.push(code.to_vec());
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
            t => self.key(store, rd, origin, op_at, t)?,
        }
        Ok(false)
    }

    /// A key and its value of RDB type `t`, stored unless it has expired or is empty.
    fn key(
        &mut self,
        store: &Store,
        rd: &mut Reader<'_>,
        origin: usize,
        op_at: usize,
        t: u8,
    ) -> Result<(), LoadError> {
        let db = self.db;
        let key = rd.string().map_err(|_| bad(rd, origin, "a key name"))?;
        rd.empty = false;
        let value = match rdb::read_value(rd, t) {
            Ok(v) => v,
            Err(_) if rd.empty => {
                // Redis's answer to the empty keys older versions could write
                // (redis#8453): skipped, the first ten named.
                if self.out.empty_skipped < 10 {
                    (self.log)(
                        Note::Warning,
                        &format!("rdbLoadObject skipping empty key: {}", shown(&key)),
                    );
                }
                self.out.empty_skipped += 1;
                self.expire = None;
                return Ok(());
            }
            Err(_) => {
                let what = format!(
                    "the value (RDB type {t}) of key '{}' in DB {db}, which starts at offset {op_at}",
                    shown(&key)
                );
                return Err(bad(rd, origin, &what));
            }
        };
        let at = self.expire.take();
        if !self.keep_expired && at.is_some_and(|at| at < self.now) {
            self.out.expired += 1;
            self.out.expired_keys.push((db, key.to_vec()));
            return Ok(());
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
        self.out.keys += 1;
        Ok(())
    }
}
