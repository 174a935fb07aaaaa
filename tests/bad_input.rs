//! Bad input for every command the server lists in `COMMAND` (the table itself, so a new
//! command is covered the day it lands): too few arguments and, for a fixed arity, too
//! many (Redis's exact `ERR wrong number of arguments for '<cmd>' command`); then, in each
//! argument position, keys of every type (string, list, hash, set, zset, stream, and a
//! collection for `DOC.*`), numbers at and past the edges (2^63-1, -2^63, 2^64, 1e400,
//! negative, zero, non-numeric, floats, nan/inf), an unknown option, JSON-ish fillers,
//! nesting 100 000 deep (JSON, query operators, Lua), and binary junk (NUL, invalid UTF-8,
//! a 512 KB blob); and after the base call, each option its `COMMAND DOCS` documents
//! (`COUNT`, `LIMIT`, `MAXLEN` ...) with edge values. Every request must get one well-formed
//! RESP reply, the connection must stay usable, the server must never panic (its stderr is
//! read for "panicked"), and afterwards another database's canary key (with a TTL), a
//! canary document in a collection with a TTL index, a client mid-MULTI with queued
//! commands and a SUBSCRIBEd client still receiving must all be intact.
//!
//! Skipped, because they legitimately end or take over the session or the server, or
//! change what the canaries check:
//! - `shutdown`: ends the server; `quit`, `reset`: end/reset the session (the harness
//!   itself sends RESET between commands); `monitor`: turns the connection into a feed;
//! - the SUBSCRIBE family (`subscribe`, `psubscribe`, `ssubscribe`, `unsubscribe`,
//!   `punsubscribe`, `sunsubscribe`): one confirmation per channel, not one reply;
//! - `flushall`, `flushdb`, `swapdb`, `select`, `debug`: wipe, swap or move to the canary's
//!   database, or crash/stall the server on purpose;
//! - `client|kill`, `client|pause`: end or freeze the other sessions under test;
//! - `config|set`, `config|resetstat`: change server-wide settings (limits, persistence) the
//!   rest of the run depends on;
//! - `acl|setuser`, `acl|deluser`, `acl|load`: could disable the default user;
//! - `failover` (not in the table today), `replicaof`, `slaveof`: turn the server into a
//!   replica; `psync`, `sync`: turn the connection into a replica's stream (a snapshot, then
//!   every write);
//! - blocking commands are not skipped, but every number given to them is tiny (0.01):
//!   a timeout of 0 or 1 s would block the run, not test anything.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::resp;

const SKIP: &[&str] = &[
    "shutdown",
    "quit",
    "reset",
    "monitor",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "flushall",
    "flushdb",
    "swapdb",
    "select",
    "debug",
    "client|kill",
    "client|pause",
    "config|set",
    "config|resetstat",
    "acl|setuser",
    "acl|deluser",
    "acl|load",
    "failover",
    "replicaof",
    "slaveof",
    "psync",
    "sync",
];

/// Keys of each type (recreated before each command) and the collection.
const TYPED_KEYS: &[&str] = &[
    "bi:str",
    "bi:list",
    "bi:hash",
    "bi:set",
    "bi:zset",
    "bi:stream",
];
const COLL: &str = "bi:coll";

/// The server, with its stderr kept for the panic check.
struct Server {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Server {
    fn start() -> Server {
        // SAVE / BGSAVE / BGREWRITEAOF run too: their files go to a directory of our own.
        let dir = std::env::temp_dir().join(format!("tidecache-badinput-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
            .args(["--port", "0", "--loglevel", "notice", "--save", "", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let keep = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("started: port ").nth(1) {
                    let port: u16 = rest
                        .split(',')
                        .next()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0);
                    let _ = tx.send(port);
                }
                let mut l = keep.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("server did not start");
        Server {
            child,
            port,
            log,
            _dir: TempDir(dir),
        }
    }

    fn connect(&self) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(15))).ok();
        s.set_nodelay(true).ok();
        Conn {
            w: s.try_clone().expect("clone"),
            r: BufReader::with_capacity(1 << 16, s),
        }
    }

    fn panics(&self) -> Option<String> {
        let l = self.log.lock().unwrap();
        l.contains("panicked").then(|| l.clone())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One parsed reply (RESP2 and RESP3).
#[derive(Debug, Clone, PartialEq)]
enum Frame {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Frame>>),
    Other(String),
}

impl Frame {
    fn text(&self) -> String {
        match self {
            Frame::Simple(s) | Frame::Error(s) | Frame::Other(s) => s.clone(),
            Frame::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => format!("{other:?}"),
        }
    }
}

struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn line(&mut self) -> Result<String, String> {
        let mut l = Vec::new();
        self.r
            .read_until(b'\n', &mut l)
            .map_err(|e| format!("read: {e}"))?;
        if !l.ends_with(b"\r\n") {
            return Err(format!(
                "connection closed or line not CRLF-terminated: {:?}",
                String::from_utf8_lossy(&l)
            ));
        }
        l.truncate(l.len() - 2);
        Ok(String::from_utf8_lossy(&l).into_owned())
    }

    /// Reads one reply, failing on anything that is not well-formed RESP.
    fn read(&mut self) -> Result<Frame, String> {
        let l = self.line()?;
        let (t, body) = l.split_at(1.min(l.len()));
        let num = |b: &str| b.parse::<i64>().map_err(|_| format!("bad length {l:?}"));
        Ok(match t {
            "+" => Frame::Simple(body.into()),
            "-" => Frame::Error(body.into()),
            ":" => Frame::Int(num(body)?),
            "," | "#" | "(" | "_" => Frame::Other(l.clone()),
            "$" | "=" | "!" => {
                let n = num(body)?;
                if n < 0 {
                    Frame::Bulk(None)
                } else {
                    let mut b = vec![0u8; n as usize + 2];
                    self.r
                        .read_exact(&mut b)
                        .map_err(|e| format!("bulk: {e}"))?;
                    if !b.ends_with(b"\r\n") {
                        return Err("bulk not CRLF-terminated".into());
                    }
                    b.truncate(n as usize);
                    Frame::Bulk(Some(b))
                }
            }
            "*" | "~" | ">" | "%" | "|" => {
                let n = num(body)?;
                if n < 0 {
                    Frame::Array(None)
                } else {
                    let n = if t == "%" || t == "|" { 2 * n } else { n };
                    let mut items = Vec::new();
                    for _ in 0..n {
                        items.push(self.read()?);
                    }
                    if t == "|" {
                        // An attribute precedes the real reply.
                        return self.read();
                    }
                    Frame::Array(Some(items))
                }
            }
            _ => return Err(format!("not a RESP reply: {l:?}")),
        })
    }

    /// Sends every request (from a thread, so a server that answers while we still write
    /// never deadlocks with us) and reads one reply for each.
    fn batch(&mut self, reqs: &[Vec<Vec<u8>>]) -> Vec<Result<Frame, String>> {
        let mut bytes = Vec::new();
        for r in reqs {
            bytes.extend_from_slice(&encode(r));
        }
        let mut w = self.w.try_clone().expect("clone");
        let writer = std::thread::spawn(move || w.write_all(&bytes));
        let mut out = Vec::with_capacity(reqs.len());
        for _ in reqs {
            let f = self.read();
            let failed = f.is_err();
            out.push(f);
            if failed {
                break;
            }
        }
        let _ = writer.join();
        out
    }

    fn cmd(&mut self, args: &[&str]) -> Frame {
        self.w.write_all(&resp(args)).expect("write");
        self.read().expect("reply")
    }
}

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// A command or subcommand as `COMMAND` lists it.
#[derive(Debug)]
struct Cmd {
    name: String,
    arity: i64,
    blocking: bool,
    /// The key of the command's own type (from its ACL categories), so a call gets past
    /// the key lookup to the arguments after it.
    home_key: &'static str,
    first: i64,
    last: i64,
    step: i64,
}

fn table(c: &mut Conn) -> (Vec<Cmd>, Vec<(String, i64)>) {
    let Frame::Array(Some(all)) = c.cmd(&["COMMAND"]) else {
        panic!("COMMAND is not an array")
    };
    let mut cmds = Vec::new();
    let mut containers = Vec::new();
    fn one(f: &Frame, cmds: &mut Vec<Cmd>, containers: &mut Vec<(String, i64)>) {
        let Frame::Array(Some(v)) = f else { return };
        let int = |i: usize| match v.get(i) {
            Some(Frame::Int(n)) => *n,
            _ => 0,
        };
        let flags = match v.get(2) {
            Some(Frame::Array(Some(fl))) => fl.iter().map(|f| f.text()).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let name = v[0].text().to_lowercase();
        if let Some(Frame::Array(Some(subs))) = v.get(9) {
            if !subs.is_empty() {
                containers.push((name.clone(), int(1)));
                for s in subs {
                    one(s, cmds, containers);
                }
                return;
            }
        }
        let cats = match v.get(6) {
            Some(Frame::Array(Some(c))) => c.iter().map(|f| f.text()).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let has = |c: &str| cats.iter().any(|x| x == c);
        let home_key = if has("@document") {
            COLL
        } else if has("@list") {
            "bi:list"
        } else if has("@hash") {
            "bi:hash"
        } else if has("@set") {
            "bi:set"
        } else if has("@sortedset") || has("@geo") {
            "bi:zset"
        } else if has("@stream") {
            "bi:stream"
        } else if has("@string") || has("@bitmap") || has("@hyperloglog") {
            "bi:str"
        } else {
            "bi:nokey"
        };
        // WAIT and WAITAOF wait for their timeout without Redis's `blocking` flag (with no
        // replicas, WAIT 1 <t> waits all of t, as in Redis).
        let blocking = flags.iter().any(|f| f == "blocking") || name == "wait" || name == "waitaof";
        cmds.push(Cmd {
            name,
            arity: int(1),
            blocking,
            home_key,
            first: int(3),
            last: int(4),
            step: int(5),
        });
    }
    for f in &all {
        one(f, &mut cmds, &mut containers);
    }
    (cmds, containers)
}

/// The option words (`token`s) each command's `COMMAND DOCS` names, by full name.
fn tokens(c: &mut Conn) -> std::collections::HashMap<String, Vec<String>> {
    let mut out = std::collections::HashMap::new();
    let Frame::Array(Some(all)) = c.cmd(&["COMMAND", "DOCS"]) else {
        return out;
    };
    fn collect(f: &Frame, acc: &mut Vec<String>) {
        if let Frame::Array(Some(v)) = f {
            let mut i = 0;
            while i + 1 < v.len() {
                if v[i].text() == "token" {
                    acc.push(v[i + 1].text());
                }
                if v[i].text() == "subcommands" {
                    i += 2;
                    continue;
                }
                collect(&v[i + 1], acc);
                i += 1;
            }
        }
    }
    fn walk(name: &str, doc: &Frame, out: &mut std::collections::HashMap<String, Vec<String>>) {
        let mut acc = Vec::new();
        collect(doc, &mut acc);
        acc.sort();
        acc.dedup();
        out.insert(name.to_lowercase(), acc);
        if let Frame::Array(Some(v)) = doc {
            for i in 0..v.len().saturating_sub(1) {
                if v[i].text() == "subcommands" {
                    if let Frame::Array(Some(subs)) = &v[i + 1] {
                        for pair in subs.chunks(2) {
                            if let [n, d] = pair {
                                walk(&n.text(), d, out);
                            }
                        }
                    }
                }
            }
        }
    }
    for pair in all.chunks(2) {
        if let [n, d] = pair {
            walk(&n.text(), d, &mut out);
        }
    }
    out
}

fn junk_values() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551616",
        "-18446744073709551616",
        "1e400",
        "-1e400",
        "-1",
        "0",
        "-0",
        "abc",
        "1.5",
        "-2.5",
        // Tiny positive floats: as a blocking timeout Redis rounds them up to 1 ms; they
        // once became 0 ("for ever") here and stalled the client (regression).
        "1e-320",
        "0.0001",
        "nan",
        "inf",
        "-inf",
        "NOSUCHOPT",
        "{}",
        "[]",
        "{\"a\":",
        "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    v.push(b"\0".to_vec());
    v.push(b"a\0b".to_vec());
    v.push(vec![0xff, 0xfe, 0xc3, 0x28]);
    v
}

/// Values tried after each documented option (`COUNT v`, `LIMIT v`, `MAXLEN v` ...).
const OPTION_VALUES: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "-1",
    "0",
    "1e400",
    "nan",
    "abc",
];

/// The 512 KB blob: every byte value, NULs and invalid UTF-8 included.
fn blob() -> Vec<u8> {
    (0..512 * 1024).map(|i| (i * 7 % 256) as u8).collect()
}

/// Keys of each type and the collection, recreated before each command (a command may
/// have deleted, moved or retyped them).
fn setup_requests() -> Vec<Vec<Vec<u8>>> {
    let r = |a: &[&str]| a.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    vec![
        r(&["RESET"]),
        r(&["FLUSHDB"]),
        r(&["SET", "bi:str", "12"]),
        r(&["RPUSH", "bi:list", "1", "2", "3"]),
        r(&["HSET", "bi:hash", "f", "1", "g", "2"]),
        r(&["SADD", "bi:set", "1", "2", "a"]),
        r(&["ZADD", "bi:zset", "1", "a", "2", "b"]),
        r(&["XADD", "bi:stream", "1-1", "f", "v"]),
        r(&["XGROUP", "CREATE", "bi:stream", "g", "0"]),
        r(&["DOC.CREATE", COLL]),
        r(&["DOC.INSERT", COLL, "{\"_id\":1,\"a\":1}"]),
    ]
}

/// The requests for one command: its base call with fillers, then one junk value (or a
/// typed key) in each position, for the minimal argument count and, when variadic, two
/// more.
fn requests(c: &Cmd, values: &[Vec<u8>], blob: &[u8], tokens: &[String]) -> Vec<Vec<Vec<u8>>> {
    let words: Vec<&str> = c.name.split('|').collect();
    let fixed = words.len();
    let min = c.arity.unsigned_abs() as usize;
    let doc = c.name.starts_with("doc.");
    let filler: &[u8] = if c.blocking { b"0.01" } else { b"1" };
    let mut out = Vec::new();
    let counts: Vec<usize> = if c.arity < 0 {
        vec![min, min + 2]
    } else {
        vec![min]
    };
    for argc in counts {
        let is_key = |i: usize| -> bool {
            if c.first <= 0 {
                return false;
            }
            let last = if c.last < 0 {
                argc as i64 + c.last
            } else {
                c.last
            };
            let i = i as i64;
            i >= c.first && i <= last && (i - c.first) % c.step.max(1) == 0
        };
        let mut base: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        for i in fixed..argc.max(fixed) {
            base.push(if is_key(i) {
                c.home_key.as_bytes().to_vec()
            } else {
                filler.to_vec()
            });
        }
        out.push(base.clone());
        // Each documented option with edge values after the base call. BLOCK is left out:
        // its value is a timeout (XREAD BLOCK 0 would wait for ever).
        if c.arity < 0 && argc == min {
            for t in tokens.iter().filter(|t| !t.eq_ignore_ascii_case("block")) {
                for v in OPTION_VALUES {
                    let mut r = base.clone();
                    r.push(t.as_bytes().to_vec());
                    r.push(v.as_bytes().to_vec());
                    out.push(r);
                }
            }
        }
        // A subcommand's own name is a position too (unknown subcommands).
        for p in 1..base.len() {
            let mut vals: Vec<Vec<u8>> = values.to_vec();
            if is_key(p) || doc {
                vals.extend(TYPED_KEYS.iter().map(|k| k.as_bytes().to_vec()));
                vals.push(COLL.as_bytes().to_vec());
            }
            if argc == min {
                vals.push(blob.to_vec());
                // Nesting far past any parser's recursion limit (JSON filters and
                // documents, Lua, aggregation): must be refused, never overflow the stack.
                vals.push("[".repeat(100_000).into_bytes());
                vals.push("{\"$and\":[".repeat(20_000).into_bytes());
                vals.push(format!("return {}1", "(".repeat(50_000)).into_bytes());
            }
            for v in vals {
                // Blocking commands get only tiny numbers: a real timeout would stall.
                let v = if c.blocking && (v == b"0" || v == b"-0" || v == b"1.5" || v == b"inf") {
                    filler.to_vec()
                } else {
                    v
                };
                let mut r = base.clone();
                r[p] = v;
                out.push(r);
            }
        }
    }
    out
}

fn show(r: &[Vec<u8>]) -> String {
    r.iter()
        .map(|a| {
            if a.len() > 40 {
                format!("<{} bytes>", a.len())
            } else {
                format!("{:?}", String::from_utf8_lossy(a))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_command_survives_bad_input() {
    let started = Instant::now();
    let s = Server::start();

    // The sessions that must survive: canaries in database 9, which no request reaches
    // (SELECT, SWAPDB, MOVE/COPY to another database with these values never happen).
    let mut canary = s.connect();
    assert_eq!(canary.cmd(&["SELECT", "9"]), Frame::Simple("OK".into()));
    canary.cmd(&["SET", "canary:key", "alive", "EX", "3600"]);
    canary.cmd(&["DOC.CREATE", "canary:coll"]);
    canary.cmd(&[
        "DOC.CREATEINDEX",
        "canary:coll",
        "{\"at\":1}",
        "EXPIREAFTER",
        "3600",
    ]);
    let now = chrono_like_now();
    let doc = format!("{{\"_id\":\"c1\",\"at\":{{\"$date\":\"{now}\"}}}}");
    assert_eq!(
        canary.cmd(&["DOC.INSERT", "canary:coll", &doc]),
        Frame::Array(Some(vec![Frame::Bulk(Some(b"\"c1\"".to_vec()))]))
    );
    let mut multi = s.connect();
    multi.cmd(&["SELECT", "9"]);
    assert_eq!(multi.cmd(&["MULTI"]), Frame::Simple("OK".into()));
    assert_eq!(
        multi.cmd(&["SET", "canary:multi", "1"]),
        Frame::Simple("QUEUED".into())
    );
    assert_eq!(
        multi.cmd(&["INCR", "canary:multi"]),
        Frame::Simple("QUEUED".into())
    );
    let mut sub = s.connect();
    let Frame::Array(Some(_)) = sub.cmd(&["SUBSCRIBE", "canary:ch"]) else {
        panic!("SUBSCRIBE")
    };

    let mut c = s.connect();
    let (cmds, containers) = table(&mut c);
    let docs = tokens(&mut c);
    assert!(cmds.len() > 200, "COMMAND lists {} commands", cmds.len());
    let values = junk_values();
    let blob = blob();
    let mut findings = Vec::new();
    let mut total = 0usize;

    // Containers alone: too few arguments.
    for (name, arity) in &containers {
        if *arity >= -1 {
            continue;
        }
        let r = c.cmd(&[name]);
        let want = format!("ERR wrong number of arguments for '{name}' command");
        if r != Frame::Error(want.clone()) {
            findings.push(format!("{name}: arity reply {r:?}, want {want:?}"));
        }
    }

    for cmd in &cmds {
        if SKIP.contains(&cmd.name.as_str()) {
            continue;
        }
        let setup = setup_requests();
        for (r, f) in setup.iter().zip(c.batch(&setup)) {
            if let Err(e) = f {
                panic!("setup {} failed before {}: {e}", show(r), cmd.name);
            }
        }
        // Arity: Redis's exact text, with the full name (`config|get`) for subcommands.
        let words: Vec<Vec<u8>> = cmd.name.split('|').map(|w| w.as_bytes().to_vec()).collect();
        let min = cmd.arity.unsigned_abs() as usize;
        let mut arity_reqs = Vec::new();
        if min > words.len() {
            let mut r = words.clone();
            r.resize(min - 1, b"1".to_vec());
            arity_reqs.push(r);
        }
        if cmd.arity > 0 {
            let mut r = words.clone();
            r.resize(min + 1, b"1".to_vec());
            arity_reqs.push(r);
        }
        let want = Frame::Error(format!(
            "ERR wrong number of arguments for '{}' command",
            cmd.name
        ));
        for (r, f) in arity_reqs.iter().zip(c.batch(&arity_reqs)) {
            total += 1;
            match f {
                Ok(f) if f == want => {}
                other => findings.push(format!("{}: arity reply {other:?}", show(r))),
            }
        }
        let toks = docs.get(&cmd.name).cloned().unwrap_or_default();
        let reqs = requests(cmd, &values, &blob, &toks);
        let replies = c.batch(&reqs);
        total += reqs.len();
        if replies.len() < reqs.len() || replies.iter().any(|r| r.is_err()) {
            let at = replies.len() - 1;
            let e = replies[at].clone().err().unwrap_or_default();
            findings.push(format!("{}: no well-formed reply ({e})", show(&reqs[at])));
            if let Some(p) = s.panics() {
                panic!("server panicked:\n{}\nfindings: {findings:#?}", tail(&p));
            }
            // The connection is gone or out of step: start a new one.
            c = s.connect();
            continue;
        }
        // Still usable, and the other database's canary is untouched.
        let after = c.batch(&[
            vec![b"RESET".to_vec()],
            vec![b"PING".to_vec()],
            vec![b"SELECT".to_vec(), b"9".to_vec()],
            vec![b"GET".to_vec(), b"canary:key".to_vec()],
            vec![b"SELECT".to_vec(), b"0".to_vec()],
        ]);
        let ok = matches!(after.get(1), Some(Ok(Frame::Simple(p))) if p == "PONG")
            && matches!(after.get(3), Some(Ok(Frame::Bulk(Some(v)))) if v == b"alive");
        if !ok {
            findings.push(format!(
                "after {}: connection or canary broken: {after:?}",
                cmd.name
            ));
            c = s.connect();
        }
        if let Some(p) = s.panics() {
            panic!(
                "server panicked during {}:\n{}\nfindings: {findings:#?}",
                cmd.name,
                tail(&p)
            );
        }
    }

    // The sessions and canaries.
    let ttl = canary.cmd(&["TTL", "canary:key"]);
    assert!(
        matches!(ttl, Frame::Int(t) if t > 3000 && t <= 3600),
        "canary TTL {ttl:?}"
    );
    assert_eq!(
        canary.cmd(&["GET", "canary:key"]),
        Frame::Bulk(Some(b"alive".to_vec()))
    );
    let found = canary.cmd(&["DOC.FIND", "canary:coll", "{\"_id\":\"c1\"}"]);
    assert!(
        matches!(&found, Frame::Array(Some(v)) if v.len() == 1),
        "canary document {found:?}"
    );
    let idx = match canary.cmd(&["DOC.INDEXES", "canary:coll"]) {
        Frame::Array(Some(v)) => v.iter().map(Frame::text).collect::<Vec<_>>().join(" "),
        other => format!("{other:?}"),
    };
    assert!(
        idx.contains("\"at_1\"") && idx.contains("\"expireAfterSeconds\":3600"),
        "TTL index {idx}"
    );
    assert_eq!(
        multi.cmd(&["EXEC"]),
        Frame::Array(Some(vec![Frame::Simple("OK".into()), Frame::Int(2)]))
    );
    assert_eq!(
        canary.cmd(&["PUBLISH", "canary:ch", "still"]),
        Frame::Int(1)
    );
    let m = sub.read().expect("message");
    assert_eq!(
        m,
        Frame::Array(Some(vec![
            Frame::Bulk(Some(b"message".to_vec())),
            Frame::Bulk(Some(b"canary:ch".to_vec())),
            Frame::Bulk(Some(b"still".to_vec())),
        ]))
    );
    if let Some(p) = s.panics() {
        panic!("server panicked:\n{}", tail(&p));
    }
    eprintln!(
        "bad input: {} commands, {total} requests, {:.1}s",
        cmds.len(),
        started.elapsed().as_secs_f64()
    );
    let short: Vec<String> = findings
        .iter()
        .map(|f| f.chars().take(400).collect())
        .collect();
    assert!(
        findings.is_empty(),
        "{} findings:\n{}",
        findings.len(),
        short.join("\n")
    );
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Now as an ISO date for the canary document (UTC, to the second).
fn chrono_like_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
