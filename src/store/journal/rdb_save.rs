//! Writing a `dump.rdb` in Redis 7.0's format (RDB version 10) from a snapshot's items
//! (SAVE, BGSAVE): the header and auxiliary fields, the function libraries
//! (`RDB_OPCODE_FUNCTION2`), each key with its deadline, the end mark and the CRC64 of
//! everything before it. Values use `store::rdb`'s encodings (the DUMP/RESTORE ones).
//!
//! Not written: documents and collections (RDB has no place for them: they are kept only by
//! the journal; SAVE logs how many collections were left out), LRU/LFU access information.

use super::pacing::SyncingFile;
use super::snapshot::Item;
use crate::store::rdb;
use std::fs::File;
use std::path::{Path, PathBuf};

const OP_FUNCTION2: u8 = 245;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_SELECTDB: u8 = 254;
const OP_AUX: u8 = 250;
const OP_EOF: u8 = 255;

/// Where the bytes go: a temporary file renamed over the target at the end, or a stream
/// (a diskless replication transfer).
enum Out {
    File { file: SyncingFile, tmp: PathBuf },
    Stream(Box<dyn std::io::Write + Send>),
}

impl Out {
    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Out::File { file, .. } => file.write_all(data),
            Out::Stream(w) => w.write_all(data),
        }
    }
}

pub struct RdbWriter {
    out: Out,
    buf: Vec<u8>,
    crc: u64,
    db: usize,
    val: Vec<u8>,
    /// `rdbcompression`: strings over 20 bytes LZF-compressed.
    lzf: bool,
    pub keys: u64,
    pub bytes: u64,
}

impl RdbWriter {
    /// Starts writing into a temporary file in `dir` (renamed over the target by
    /// [`RdbWriter::finish`], so a crash never leaves half a file under its name).
    pub fn create(dir: &Path, version: &str, used_mem: usize) -> std::io::Result<RdbWriter> {
        let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
        let file = SyncingFile::new(File::create(&tmp)?);
        Ok(Self::with(Out::File { file, tmp }, version, used_mem))
    }

    /// Writes into `sink` instead of a file: the bytes of a diskless transfer.
    pub fn streaming(
        sink: Box<dyn std::io::Write + Send>,
        version: &str,
        used_mem: usize,
    ) -> RdbWriter {
        Self::with(Out::Stream(sink), version, used_mem)
    }

    /// `rdbcompression`: whether strings are LZF-compressed (yes unless told).
    pub fn compressed(mut self, lzf: bool) -> RdbWriter {
        self.lzf = lzf;
        self
    }

    fn with(out: Out, version: &str, used_mem: usize) -> RdbWriter {
        let mut w = RdbWriter {
            lzf: true,
            out,
            buf: Vec::with_capacity(1 << 16),
            crc: 0,
            db: usize::MAX,
            val: Vec::new(),
            keys: 0,
            bytes: 0,
        };
        w.buf.extend_from_slice(b"REDIS0010");
        let ctime = (crate::util::clock::now_ms() / 1000).to_string();
        let mem = used_mem.to_string();
        for (k, v) in [
            ("redis-ver", version),
            ("redis-bits", "64"),
            ("ctime", ctime.as_str()),
            ("used-mem", mem.as_str()),
            ("aof-base", "0"),
        ] {
            w.buf.push(OP_AUX);
            rdb::write_string(&mut w.buf, k.as_bytes(), w.lzf);
            rdb::write_string(&mut w.buf, v.as_bytes(), w.lzf);
        }
        w
    }

    /// One auxiliary field (a reader takes them anywhere before the end mark).
    pub fn aux(&mut self, key: &str, value: &str) -> std::io::Result<()> {
        self.buf.push(OP_AUX);
        rdb::write_string(&mut self.buf, key.as_bytes(), self.lzf);
        rdb::write_string(&mut self.buf, value.as_bytes(), self.lzf);
        self.spill(false)
    }

    /// The function libraries' code (Redis writes them before the keys).
    pub fn functions(&mut self, codes: &[bytes::Bytes]) -> std::io::Result<()> {
        for c in codes {
            self.buf.push(OP_FUNCTION2);
            rdb::write_string(&mut self.buf, c, self.lzf);
        }
        self.spill(false)
    }

    /// One key.
    pub fn item(&mut self, it: &Item) -> std::io::Result<()> {
        self.val.clear();
        rdb::write_value(&mut self.val, &it.value, self.lzf);
        if it.db != self.db {
            self.buf.push(OP_SELECTDB);
            rdb::write_len(&mut self.buf, it.db as u64);
            self.db = it.db;
        }
        if let Some(at) = it.deadline {
            self.buf.push(OP_EXPIRETIME_MS);
            self.buf.extend_from_slice(&at.to_le_bytes());
        }
        self.buf.push(self.val[0]);
        rdb::write_string(&mut self.buf, &it.key, self.lzf);
        self.buf.extend_from_slice(&self.val[1..]);
        self.keys += 1;
        self.spill(false)
    }

    fn spill(&mut self, all: bool) -> std::io::Result<()> {
        if all || self.buf.len() >= 1 << 16 {
            self.crc = rdb::crc64(self.crc, &self.buf);
            self.out.write_all(&self.buf)?;
            self.bytes += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }

    /// The end mark and checksum; the file is fsynced and renamed to `target`, and the
    /// directory fsynced.
    pub fn finish(mut self, target: &Path) -> std::io::Result<()> {
        self.buf.push(OP_EOF);
        self.spill(true)?;
        let crc = self.crc.to_le_bytes();
        self.out.write_all(&crc)?;
        self.bytes += 8;
        let Out::File { file, tmp } = self.out else {
            return Err(std::io::Error::other(
                "a streamed RDB has no file to finish",
            ));
        };
        file.file.sync_all()?;
        std::fs::rename(&tmp, target)?;
        if let Some(dir) = target.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// The end mark and checksum of a streamed RDB, flushed.
    pub fn finish_stream(mut self) -> std::io::Result<()> {
        self.buf.push(OP_EOF);
        self.spill(true)?;
        let crc = self.crc.to_le_bytes();
        self.out.write_all(&crc)?;
        self.bytes += 8;
        match &mut self.out {
            Out::Stream(w) => w.flush(),
            Out::File { .. } => Ok(()),
        }
    }

    /// Gives up: the temporary file is removed.
    pub fn abort(self) {
        if let Out::File { tmp, .. } = &self.out {
            let _ = std::fs::remove_file(tmp);
        }
    }
}
