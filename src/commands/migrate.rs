//! MIGRATE: moves (or copies) keys to another Redis-compatible server as Redis 7.0's
//! `migrateCommand` (cluster.c) does: `AUTH`/`SELECT` then one `RESTORE key ttl payload
//! [REPLACE]` per key, pipelined on a connection cached per `host:port` for 10 seconds, the
//! replies read back line by line with the command's timeout, and the source keys deleted
//! once the target acknowledged them (unless COPY).
//!
//! **Nothing waits on the network under a lock or on an I/O thread.** The handler reads the
//! values (the DUMP payloads and deadlines) under their shard locks and hands the transfer to
//! tokio's blocking pool (plain `std::net::TcpStream` with timeouts, as Redis's synchronous
//! connection calls); the connection waits for its reply as a blocked client does (its later
//! requests wait behind it, other clients are served meanwhile). When the target has answered,
//! each acknowledged key is deleted under its lock only if it still holds what was sent (same
//! payload, same deadline). A key another client wrote or deleted during the transfer, which
//! Redis (blocking the whole server meanwhile) could not see, is sent again with REPLACE, its
//! value or its deletion, a few rounds at most ([`resend`]), so the target never keeps a stale
//! copy beside a newer one here (which would stop `redis-cli --cluster reshard` with
//! "Target key exists"); one still changing after them is kept here. Inside
//! MULTI/EXEC or a script the transfer runs in place (Redis blocks there too; the transaction
//! must stay atomic).
//!
//! **Collections move too.** A name in the key list that is a collection of the client's
//! database (in cluster mode, database 0, whose collections `CLUSTER GETKEYSINSLOT` lists
//! with the keys) is read whole under its locks with the keys (`Store::collection_image`)
//! and sent as `DOC.RESTORE name payload [REPLACE]` (`DOC.RESTORE-ASKING` in cluster mode),
//! the payload being the collection's journal records (`commands::documents::transfer`).
//! A name that is both a key and a collection (separate namespaces) moves both. Without
//! REPLACE a collection already on the target is refused with `BUSYKEY Target collection
//! name already exists.` (reported as RESTORE's BUSYKEY is, inside `ERR Target instance
//! replied with error: …`). Once acknowledged, the source's collection is removed (unless
//! COPY) only if it is still the collection that was read, with no write since (expiries
//! aside: see `store::collections::moved`); one written meanwhile is kept, as a key is.
use crate::commands::args::{Args, CommandError, NOT_AN_INTEGER};
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::state::Server;
use crate::store::rdb;
use crate::util::num::parse_i64;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const GENERIC: CommandSpec = family("generic", acl::KEYSPACE);

/// Redis 7.0.15's COMMAND INFO: the key argument, or the keys after the last-but-one `KEYS`
/// (flagged incomplete: the key argument is then the empty string).
const MIGRATE_KEYS: &[KeySpec] = &[
    KeySpec::at(3, &["RW", "access", "delete"]),
    KeySpec {
        flags: &["RW", "access", "delete", "incomplete"],
        begin: Begin::Keyword {
            keyword: "KEYS",
            start_from: -2,
        },
        find: Find::Range {
            last: -1,
            step: 1,
            limit: 0,
        },
    },
];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    GENERIC.cmd("migrate", -6, migrate).flags(WRITE | MOVABLEKEYS | REDACTED).keys(3, 3, 1)
        .key_specs(MIGRATE_KEYS).acl(acl::DANGEROUS)
        .doc("2.6.0", "Atomically transfer a key from a Redis instance to another one.")
        .complexity("This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.")
        .args("host:string port:integer key_or_empty_string:(key:key|empty_string='') destination-db:integer timeout:integer [COPY] [REPLACE] [authentication:(AUTH=password:string|AUTH2=username_password:{username:string password:string})] [KEYS=key:key...]"),
];

/// Redis's `MIGRATE_SOCKET_CACHE_ITEMS` and `MIGRATE_SOCKET_CACHE_TTL`.
const CACHE_ITEMS: usize = 64;
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Redis writes the pipeline in chunks of this size, each with the full timeout.
const WRITE_CHUNK: usize = 64 * 1024;
/// Redis reads each reply line into a buffer of this size.
const LINE_MAX: u64 = 1024;

struct Item {
    key: Bytes,
    what: What,
}

/// What one name of the key list sends.
enum What {
    Key {
        payload: Vec<u8>,
        /// Unix ms, as read with the payload.
        deadline: Option<i64>,
    },
    /// The collection of that name, serialized, and what it was when read.
    Collection {
        payload: Vec<u8>,
        stamp: crate::store::collections::Stamp,
    },
    /// A key deleted here while an earlier copy of it was being sent: the target's copy
    /// goes too.
    Gone,
}

struct Job {
    host: Bytes,
    port: Bytes,
    dbid: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// Cluster mode: each key goes as RESTORE-ASKING (each collection as
    /// DOC.RESTORE-ASKING), which the target runs on a slot it is importing (Redis's
    /// migrateCommand).
    asking: bool,
    /// (username, password) of AUTH / AUTH2.
    auth: Option<(Option<Bytes>, Bytes)>,
    items: Vec<Item>,
}

/// What the target acknowledged (indices into `items`) and the reply for the client.
struct Outcome {
    acked: Vec<usize>,
    reply: Reply,
}

fn migrate(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let host = args.next_arg()?.clone();
    let port = args.next_arg()?.clone();
    let key_arg = args.next_arg()?.clone();
    let db_arg = args.next_arg()?;
    let timeout_arg = args.next_arg()?;
    let rest = args.rest();
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<(Option<Bytes>, Bytes)> = None;
    let mut keys: &[Bytes] = std::slice::from_ref(&key_arg);
    let mut j = 0;
    while j < rest.len() {
        let a = &rest[j];
        let more = rest.len() - j - 1;
        if a.eq_ignore_ascii_case(b"copy") {
            copy = true;
        } else if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"auth") {
            if more < 1 {
                return Err(CommandError::syntax());
            }
            auth = Some((None, rest[j + 1].clone()));
            j += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") {
            if more < 2 {
                return Err(CommandError::syntax());
            }
            auth = Some((Some(rest[j + 1].clone()), rest[j + 2].clone()));
            j += 2;
        } else if a.eq_ignore_ascii_case(b"keys") {
            if !key_arg.is_empty() {
                return Err(CommandError::msg(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            // Everything after KEYS is a key.
            keys = &rest[j + 1..];
            break;
        } else {
            return Err(CommandError::syntax());
        }
        j += 1;
    }
    // Redis checks the timeout before the database, both plain longs.
    let timeout = parse_i64(timeout_arg).ok_or(CommandError::msg(NOT_AN_INTEGER))?;
    let dbid = parse_i64(db_arg).ok_or(CommandError::msg(NOT_AN_INTEGER))?;
    let timeout = if timeout <= 0 { 1000 } else { timeout };

    // The values as they are now: each key under its own shard lock, as a read; each
    // collection of that name under the catalog and every shard's lock.
    let db = ctx.client.db;
    let mut items = Vec::new();
    for key in keys {
        let found = ctx.server.store.with_key(db, key, |ks, h| {
            let payload = ks.get(h, key).map(|e| dump_of(&e.value))?;
            Some((payload, ks.deadline(h, key).flatten()))
        });
        match found {
            None => {}
            Some((None, _)) => {
                return Err(CommandError::msg(
                    "ERR DUMP of a stream is not available in this version of tidecache",
                ))
            }
            Some((Some(payload), deadline)) => items.push(Item {
                key: key.clone(),
                what: What::Key { payload, deadline },
            }),
        }
        // A collection is named by text (lossy for other bytes, as every DOC command reads
        // its name); the same name twice in KEYS is sent once.
        let name = String::from_utf8_lossy(key);
        let seen = items
            .iter()
            .any(|i| matches!(i.what, What::Collection { .. }) && i.key == *key);
        if !seen {
            if let Some(image) = ctx.server.store.collection_image(db, &name) {
                items.push(Item {
                    key: key.clone(),
                    what: What::Collection {
                        payload: crate::commands::documents::transfer::payload(&image),
                        stamp: image.stamp,
                    },
                });
            }
        }
    }
    if items.is_empty() {
        return Ok(Reply::Simple("NOKEY"));
    }
    let job = Job {
        host,
        port,
        dbid,
        timeout: Duration::from_millis(timeout as u64),
        copy,
        replace,
        asking: ctx.server.cluster.get().is_some(),
        auth,
        items,
    };

    let runtime = tokio::runtime::Handle::try_current();
    if ctx.client.in_exec || runtime.is_err() {
        let outcome = transfer(&job);
        let Finished { deleted, moved, .. } = finish(ctx.server, db, &job, &outcome);
        // The handler's own arguments must not be journaled: a replay would migrate again.
        // Redis propagates MIGRATE as DEL of the acknowledged keys; a collection that left
        // is journaled as the record that removes it.
        let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
        if !deleted.is_empty() {
            let mut argv = vec![b"DEL".to_vec()];
            argv.extend(deleted.iter().map(|k| k.to_vec()));
            cmds.push(argv);
        }
        for name in &moved {
            cmds.push(vec![b"DOC.JOURNALDROP".to_vec(), name.to_vec()]);
        }
        if !cmds.is_empty() {
            crate::commands::journal::journal_as_many(cmds);
        }
        return Ok(outcome.reply);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = Arc::clone(ctx.server);
    let client_id = ctx.client.id();
    tokio::task::spawn_blocking(move || {
        let mut job = job;
        let mut outcome = transfer(&job);
        let reply = outcome.reply.clone();
        let mut record = 0;
        for round in 0.. {
            let done = {
                // Not in the middle of another client's EXEC or script.
                let _shared = server.exec_gate.shared(client_id);
                finish(&server, db, &job, &outcome)
            };
            record = record.max(done.record);
            if round >= RESENDS || job.copy || matches!(outcome.reply, Reply::Error(_)) {
                break;
            }
            match resend(&server, db, job, &outcome, &done) {
                Some((next, o)) => (job, outcome) = (next, o),
                None => break,
            }
        }
        // The reply waits for the DELs it journaled (and WAITAOF counts them).
        server
            .blocking
            .owe(client_id, crate::store::journal::Ended::at(record));
        let _ = tx.send(reply);
    });
    ctx.client.blocked = Some(crate::state::blocking::Blocked {
        id: client_id,
        reply: rx,
        deadline: None,
    });
    Ok(Reply::NoReply)
}

/// Rounds of [`resend`] after the first transfer.
const RESENDS: usize = 4;

/// Keys another client wrote or deleted while they were sent (acknowledged but kept here by
/// [`finish`]): the target holds a stale copy, which Redis's MIGRATE, blocking every client
/// meanwhile, never leaves. They go again with REPLACE, their value as it is now or their
/// deletion, and the next [`finish`] deletes those still unchanged; a round finds fewer
/// each time. `None` when nothing is left to send (or the round failed).
fn resend(
    server: &Server,
    db: usize,
    job: Job,
    outcome: &Outcome,
    done: &Finished,
) -> Option<(Job, Outcome)> {
    let items: Vec<Item> = outcome
        .acked
        .iter()
        .filter_map(|&i| {
            let it = &job.items[i];
            let What::Key { .. } = it.what else {
                return None;
            };
            if done.deleted.contains(&it.key) {
                return None;
            }
            let key = it.key.clone();
            let now = server.store.with_key(db, &key, |ks, h| {
                let payload = ks.get(h, &key).map(|e| dump_of(&e.value))?;
                Some((payload, ks.deadline(h, &key).flatten()))
            });
            let what = match now {
                Some((Some(payload), deadline)) => What::Key { payload, deadline },
                // A stream now (no payload): left as it is.
                Some((None, _)) => return None,
                None => What::Gone,
            };
            Some(Item { key, what })
        })
        .collect();
    if items.is_empty() {
        return None;
    }
    let job = Job {
        items,
        replace: true,
        ..job
    };
    let outcome = transfer(&job);
    if matches!(outcome.reply, Reply::Error(_)) {
        return None;
    }
    Some((job, outcome))
}

/// A value's DUMP payload; `None` while streams have no serialized form.
#[allow(clippy::useless_conversion)]
fn dump_of(v: &crate::store::Value) -> Option<Vec<u8>> {
    // `From` both ways: the payload, or an optional payload.
    Option::<Vec<u8>>::from(rdb::dump(v))
}

/// Deletes the acknowledged keys (unless COPY) that still hold what was sent, then removes
/// the acknowledged collections that are still what was read; returns the keys deleted and
/// the collections removed.
fn finish(server: &Server, db: usize, job: &Job, outcome: &Outcome) -> Finished {
    let mut done = Finished::default();
    if job.copy || outcome.acked.is_empty() {
        return done;
    }
    let (keys, colls): (Vec<usize>, Vec<usize>) = outcome
        .acked
        .iter()
        .partition(|&&i| matches!(job.items[i].what, What::Key { .. }));
    if !keys.is_empty() {
        let names: Vec<&Bytes> = keys.iter().map(|&i| &job.items[i].key).collect();
        let mut l = server.store.lock_keys(&names);
        for (n, &i) in keys.iter().enumerate() {
            let item = &job.items[i];
            let What::Key { payload, deadline } = &item.what else {
                continue;
            };
            let h = l.hash(n);
            let ks = l.ks(n, db);
            let same = ks
                .peek(h, &item.key)
                .map(|e| dump_of(&e.value).as_deref() == Some(&payload[..]))
                .unwrap_or(false)
                && ks.deadline(h, &item.key).flatten() == *deadline;
            // The same key named twice in KEYS is acknowledged twice.
            if same && ks.remove(h, &item.key).is_some() {
                server.notify(db, class::GENERIC, "del", &item.key);
                done.deleted.push(item.key.clone());
            }
        }
        if !done.deleted.is_empty() && !crate::store::journal::recording() {
            // Off the command's thread there is no record to join: the DEL is one of its
            // own, numbered while the keys are still locked.
            let mut argv: Vec<&[u8]> = vec![b"DEL"];
            argv.extend(done.deleted.iter().map(|k| k.as_ref()));
            done.record = done
                .record
                .max(crate::store::journal::change_record(db, &argv));
        }
        drop(l);
    }
    // Each collection in a critical section of its own (the catalog held exclusively and
    // every shard's lock), after the keys' locks are released.
    for &i in &colls {
        let item = &job.items[i];
        let What::Collection { stamp, .. } = &item.what else {
            continue;
        };
        let name = String::from_utf8_lossy(&item.key);
        let removed = server.store.remove_moved(db, &name, Some(stamp), || {
            if !crate::store::journal::recording() {
                // As the DEL above: a record of its own, numbered under the locks.
                let record = crate::store::journal::change_record(
                    db,
                    &[b"DOC.JOURNALDROP", name.as_bytes()],
                );
                done.record = done.record.max(record);
            }
        });
        if removed {
            done.moved.push(Bytes::copy_from_slice(name.as_bytes()));
        }
    }
    done
}

/// What [`finish`] removed: the keys deleted, the collections that left, and the highest
/// journal record it made of its own (0 when none: inside a command, they join its record).
#[derive(Default)]
struct Finished {
    deleted: Vec<Bytes>,
    moved: Vec<Bytes>,
    record: u64,
}

// ---------------------------------------------------------------------------------------------
// The connection cache.

struct Cached {
    /// `None` while a MIGRATE uses it.
    conn: Option<TcpStream>,
    /// The database last selected on it (-1: unknown, SELECT next time).
    last_dbid: i64,
    last_use: Instant,
}

static CACHE: OnceLock<Mutex<HashMap<Vec<u8>, Cached>>> = OnceLock::new();

fn cache() -> &'static Mutex<HashMap<Vec<u8>, Cached>> {
    CACHE.get_or_init(|| {
        // Redis closes idle cached connections from its cron, once a second.
        let spawned = std::thread::Builder::new()
            .name("migrate-cache".into())
            .spawn(|| loop {
                std::thread::sleep(Duration::from_secs(1));
                cache()
                    .lock()
                    .retain(|_, c| c.conn.is_none() || c.last_use.elapsed() <= CACHE_TTL);
            });
        if let Err(e) = spawned {
            tracing::warn!("MIGRATE: no thread to close idle connections: {e}");
        }
        Mutex::new(HashMap::new())
    })
}

/// INFO's `migrate_cached_sockets`.
pub fn cached_sockets() -> usize {
    CACHE.get().map_or(0, |c| c.lock().len())
}

/// A connection taken for one MIGRATE.
struct Lease {
    name: Vec<u8>,
    conn: TcpStream,
    last_dbid: i64,
    /// False for a second connection opened while the cached one was in use.
    cached: bool,
}

fn take_socket(job: &Job) -> Option<Lease> {
    let mut name = job.host.to_vec();
    name.push(b':');
    name.extend_from_slice(&job.port);
    let mut in_use = false;
    {
        let mut c = cache().lock();
        if let Some(cs) = c.get_mut(&name) {
            cs.last_use = Instant::now();
            match cs.conn.take() {
                Some(conn) => {
                    return Some(Lease {
                        name,
                        conn,
                        last_dbid: cs.last_dbid,
                        cached: true,
                    })
                }
                None => in_use = true,
            }
        } else if c.len() >= CACHE_ITEMS {
            // Too many: drop one (Redis drops one at random).
            if let Some(k) = c.keys().next().cloned() {
                c.remove(&k);
            }
        }
    }
    let conn = connect(job)?;
    let mut cached = false;
    if !in_use {
        let mut c = cache().lock();
        if !c.contains_key(&name) {
            c.insert(
                name.clone(),
                Cached {
                    conn: None,
                    last_dbid: -1,
                    last_use: Instant::now(),
                },
            );
            cached = true;
        }
    }
    Some(Lease {
        name,
        conn,
        last_dbid: -1,
        cached,
    })
}

/// Back into the cache, remembering the selected database.
fn put_back(lease: Lease) {
    if !lease.cached {
        return;
    }
    if let Some(cs) = cache().lock().get_mut(&lease.name) {
        if cs.conn.is_none() {
            cs.conn = Some(lease.conn);
            cs.last_dbid = lease.last_dbid;
        }
    }
}

/// After a socket error: closed, and opened afresh next time.
fn close(lease: Lease) {
    if lease.cached {
        cache().lock().remove(&lease.name);
    }
}

fn connect(job: &Job) -> Option<TcpStream> {
    let host = std::str::from_utf8(&job.host).ok()?;
    // Redis reads the port with atoi.
    let digits = job.port.iter().take_while(|c| c.is_ascii_digit()).count();
    let port: u16 = std::str::from_utf8(&job.port[..digits])
        .ok()?
        .parse()
        .ok()?;
    let deadline = Instant::now() + job.timeout;
    for addr in (host, port).to_socket_addrs().ok()? {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        if let Ok(s) = TcpStream::connect_timeout(&addr, left) {
            let _ = s.set_nodelay(true);
            return Some(s);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The transfer.

fn put_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(b.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

enum IoFail {
    Timeout,
    Other,
}

fn io_fail(e: &std::io::Error) -> IoFail {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => IoFail::Timeout,
        _ => IoFail::Other,
    }
}

/// One reply line without its CRLF (Redis's `connSyncReadLine`).
fn read_line(r: &mut impl BufRead) -> Result<Vec<u8>, IoFail> {
    let mut line = Vec::new();
    match r.by_ref().take(LINE_MAX).read_until(b'\n', &mut line) {
        Ok(0) => Err(IoFail::Other),
        Ok(_) => {
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            Ok(line)
        }
        Err(e) => Err(io_fail(&e)),
    }
}

fn ioerr(writing: bool) -> Reply {
    Reply::Error(format!(
        "IOERR error or timeout {} to target instance",
        if writing { "writing" } else { "reading" }
    ))
}

/// Redis's `migrateCommand` from the connection on: one retry on a fresh connection when the
/// cached one failed before anything was processed (and not by a timeout).
fn transfer(job: &Job) -> Outcome {
    let mut acked = Vec::new();
    let mut may_retry = true;
    loop {
        let Some(mut lease) = take_socket(job) else {
            return Outcome {
                acked,
                reply: Reply::error("IOERR error or timeout connecting to the client"),
            };
        };
        let _ = lease.conn.set_read_timeout(Some(job.timeout));
        let _ = lease.conn.set_write_timeout(Some(job.timeout));

        let mut cmd = Vec::new();
        if let Some((user, pass)) = &job.auth {
            put_count(&mut cmd, if user.is_some() { 3 } else { 2 });
            put_bulk(&mut cmd, b"AUTH");
            if let Some(u) = user {
                put_bulk(&mut cmd, u);
            }
            put_bulk(&mut cmd, pass);
        }
        let select = lease.last_dbid != job.dbid;
        if select {
            put_count(&mut cmd, 2);
            put_bulk(&mut cmd, b"SELECT");
            put_bulk(&mut cmd, job.dbid.to_string().as_bytes());
        }
        // The keys still alive, in order (one may have expired since it was read), and the
        // collections.
        let now = crate::util::clock::now_ms();
        let mut sent = Vec::new();
        for (i, item) in job.items.iter().enumerate() {
            let payload = match &item.what {
                What::Key { payload, deadline } => {
                    let ttl = match *deadline {
                        None => 0,
                        Some(at) if at - now < 0 => continue,
                        Some(at) => (at - now).max(1),
                    };
                    put_count(&mut cmd, if job.replace { 5 } else { 4 });
                    put_bulk(
                        &mut cmd,
                        if job.asking {
                            b"RESTORE-ASKING"
                        } else {
                            b"RESTORE"
                        },
                    );
                    put_bulk(&mut cmd, &item.key);
                    put_bulk(&mut cmd, ttl.to_string().as_bytes());
                    payload
                }
                What::Gone => {
                    // RESTORE of a value already expired, with REPLACE, deletes the key and
                    // creates nothing (Redis's restoreCommand does the same).
                    put_count(&mut cmd, 6);
                    put_bulk(
                        &mut cmd,
                        if job.asking {
                            b"RESTORE-ASKING"
                        } else {
                            b"RESTORE"
                        },
                    );
                    put_bulk(&mut cmd, &item.key);
                    put_bulk(&mut cmd, b"1");
                    put_bulk(&mut cmd, &rdb::dump(&crate::store::Value::string(b"")));
                    put_bulk(&mut cmd, b"REPLACE");
                    put_bulk(&mut cmd, b"ABSTTL");
                    sent.push(i);
                    continue;
                }
                What::Collection { payload, .. } => {
                    put_count(&mut cmd, if job.replace { 4 } else { 3 });
                    put_bulk(
                        &mut cmd,
                        if job.asking {
                            b"DOC.RESTORE-ASKING"
                        } else {
                            b"DOC.RESTORE"
                        },
                    );
                    put_bulk(&mut cmd, &item.key);
                    payload
                }
            };
            sent.push(i);
            put_bulk(&mut cmd, payload);
            if job.replace {
                put_bulk(&mut cmd, b"REPLACE");
            }
        }

        let mut fail: Option<(bool, IoFail)> = None;
        for chunk in cmd.chunks(WRITE_CHUNK) {
            if let Err(e) = lease.conn.write_all(chunk) {
                fail = Some((true, io_fail(&e)));
                break;
            }
        }
        // Reads through a shared reference: the lease's other fields stay usable.
        let mut rd = BufReader::new(&lease.conn);
        let mut auth_reply = Vec::new();
        let mut select_reply = Vec::new();
        if fail.is_none() && job.auth.is_some() {
            match read_line(&mut rd) {
                Ok(l) => auth_reply = l,
                Err(e) => fail = Some((false, e)),
            }
        }
        if fail.is_none() && select {
            match read_line(&mut rd) {
                Ok(l) => select_reply = l,
                Err(e) => fail = Some((false, e)),
            }
        }
        if let Some((writing, why)) = fail {
            close(lease);
            if !matches!(why, IoFail::Timeout) && may_retry {
                may_retry = false;
                continue;
            }
            return Outcome {
                acked,
                reply: ioerr(writing),
            };
        }

        let mut error_from_target: Option<Reply> = None;
        let mut socket_error: Option<IoFail> = None;
        let mut read = 0;
        for &i in &sent {
            let line = match read_line(&mut rd) {
                Ok(l) => l,
                Err(e) => {
                    socket_error = Some(e);
                    break;
                }
            };
            read += 1;
            let auth_err = job.auth.is_some() && auth_reply.first() == Some(&b'-');
            let select_err = select && select_reply.first() == Some(&b'-');
            if auth_err || select_err || line.first() == Some(&b'-') {
                if error_from_target.is_none() {
                    lease.last_dbid = -1;
                    let err = if auth_err {
                        &auth_reply
                    } else if select_err {
                        &select_reply
                    } else {
                        &line
                    };
                    error_from_target = Some(Reply::Error(format!(
                        "ERR Target instance replied with error: {}",
                        String::from_utf8_lossy(&err[1..])
                    )));
                }
            } else {
                acked.push(i);
            }
        }
        if let Some(why) = socket_error {
            close(lease);
            if error_from_target.is_none()
                && read == 0
                && may_retry
                && !matches!(why, IoFail::Timeout)
            {
                may_retry = false;
                continue;
            }
            return Outcome {
                acked,
                reply: error_from_target.unwrap_or_else(|| ioerr(false)),
            };
        }
        let reply = match error_from_target {
            Some(e) => e,
            None => {
                lease.last_dbid = job.dbid;
                Reply::ok()
            }
        };
        put_back(lease);
        return Outcome { acked, reply };
    }
}
