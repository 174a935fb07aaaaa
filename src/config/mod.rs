//! Configuration: one table of settings drives the config file, the command line,
//! `CONFIG GET/SET/REWRITE` and the documentation in `conf/tidecache.conf`.

pub mod tls;

use crate::util::glob::glob_match;
use crate::util::num::parse_memory;
use crate::util::sds::split_args;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Bool,
    /// Inclusive range.
    Int(i64, i64),
    /// A byte amount; accepts units (`64mb`); reported in bytes.
    Memory,
    Enum(&'static [&'static str]),
    Str,
    /// Validated by a setting-specific function.
    Special(fn(&str) -> Result<String, String>),
}

pub struct Setting {
    pub name: &'static str,
    pub default: &'static str,
    /// Can `CONFIG SET` change it while the server runs?
    pub live: bool,
    pub kind: Kind,
    pub doc: &'static str,
}

pub const POLICIES: &[&str] = &[
    "noeviction",
    "allkeys-lru",
    "volatile-lru",
    "allkeys-lfu",
    "volatile-lfu",
    "allkeys-random",
    "volatile-random",
    "volatile-ttl",
];

/// Every setting, in the order `conf/tidecache.conf` documents them.
pub static SETTINGS: &[Setting] = &[
    Setting { name: "bind", default: "* -::*", live: false, kind: Kind::Str,
        doc: "Addresses to listen on, separated by spaces; '*' is every IPv4 address, '::*' every IPv6 address. A leading '-' means: skip the address if it is not available. The default is Redis's: every address, with protected-mode refusing clients that are not on the loopback interface until a password is set." },
    Setting { name: "port", default: "6379", live: true, kind: Kind::Int(0, 65535),
        doc: "TCP port. 0 picks a free port (the chosen one is logged); with tls-port set, 0 means no plain TCP port, as Redis. CONFIG SET binds the new port on the bind addresses, then closes the old listener (connected clients stay); a port that cannot be bound answers an error and nothing changes; 0 at run time closes the plain listener, as Redis." },
    Setting { name: "tls-port", default: "0", live: true, kind: Kind::Int(0, 65535),
        doc: "TLS port, served on the same addresses as port and at the same time. 0: no TLS. CONFIG SET rebinds it as it does port." },
    Setting { name: "unixsocket", default: "", live: false, kind: Kind::Str,
        doc: "Path of a Unix-domain socket clients may connect to, beside the TCP ports (a file left there is replaced, and removed at shutdown). Its clients show as <path>:0 in CLIENT LIST and are local to protected mode. Empty: none." },
    Setting { name: "unixsocketperm", default: "0", live: false, kind: Kind::Special(parse_socket_perm),
        doc: "Permissions of the unixsocket file, in octal (e.g. 700). 0: as the umask leaves them." },
    Setting { name: "admin-port", default: "0", live: false, kind: Kind::Int(0, 65535),
        doc: "HTTP port of the admin server: Prometheus metrics at /metrics, a status page at /, its data at /stats.json. 0: off. No authentication: keep it on a trusted address." },
    Setting { name: "admin-bind", default: "127.0.0.1", live: false, kind: Kind::Str,
        doc: "Addresses the admin port listens on, separated by spaces (loopback only by default). A leading '-' means: skip the address if it is not available." },
    Setting { name: "tls-cert-file", default: "", live: true, kind: Kind::Str,
        doc: "The server's certificate chain (PEM). Setting any tls-* setting with CONFIG SET reloads the files for new connections; a file that does not load answers an error and the old certificates stay." },
    Setting { name: "tls-key-file", default: "", live: true, kind: Kind::Str,
        doc: "The private key of tls-cert-file (PEM: PKCS#8, PKCS#1 or SEC1)." },
    Setting { name: "tls-key-file-pass", default: "", live: true, kind: Kind::Str,
        doc: "Redis's passphrase of an encrypted tls-key-file. Encrypted keys are not supported here: such a key is refused with an error saying so (decrypt it with 'openssl pkey')." },
    Setting { name: "tls-ca-cert-file", default: "", live: true, kind: Kind::Str,
        doc: "CA certificates (PEM bundle) that client certificates are checked against." },
    Setting { name: "tls-ca-cert-dir", default: "", live: true, kind: Kind::Str,
        doc: "A directory of CA certificates (PEM files, hashed names or not) that client certificates are checked against." },
    Setting { name: "tls-auth-clients", default: "yes", live: true, kind: Kind::Enum(&["no", "yes", "optional"]),
        doc: "yes: TLS clients must present a certificate signed by a configured CA; optional: a certificate is checked when given; no: none is asked for." },
    Setting { name: "tls-protocols", default: "", live: true, kind: Kind::Special(tls::parse_protocols),
        doc: "TLS versions allowed, e.g. \"TLSv1.2 TLSv1.3\". Empty: TLSv1.2 and TLSv1.3. TLSv1 and TLSv1.1 are accepted and skipped (not supported)." },
    Setting { name: "tls-ciphers", default: "", live: true, kind: Kind::Str,
        doc: "TLSv1.2 ciphers, as an OpenSSL cipher string (DEFAULT:!MEDIUM, ECDHE+AESGCM, ECDHE-RSA-AES128-GCM-SHA256); applied as far as it names the ECDHE AEAD suites supported. A string selecting none of them is an error. Empty: all of them." },
    Setting { name: "tls-ciphersuites", default: "", live: true, kind: Kind::Str,
        doc: "TLSv1.3 ciphersuites separated by colons (TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256). A list naming none of them is an error. Empty: all three." },
    Setting { name: "tls-prefer-server-ciphers", default: "no", live: true, kind: Kind::Bool,
        doc: "yes: pick the cipher in the server's order (tls-ciphers, tls-ciphersuites) rather than the client's." },
    Setting { name: "tls-session-caching", default: "yes", live: true, kind: Kind::Bool,
        doc: "Keep TLS sessions so clients can resume them (a cheaper reconnection)." },
    Setting { name: "tls-session-cache-size", default: "20480", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Number of TLS sessions kept. 0: no limit (a million)." },
    Setting { name: "tls-replication", default: "no", live: true, kind: Kind::Bool,
        doc: "yes: a replica connects to its master over TLS (REPLICAOF names the master's tls-port). The master's certificate is checked against tls-ca-cert-file / tls-ca-cert-dir (required then), not against the master's name, as Redis checks it; this server presents tls-client-cert-file, else tls-cert-file, when it has one. Read when the link connects." },
    Setting { name: "tls-client-cert-file", default: "", live: true, kind: Kind::Str,
        doc: "The certificate chain (PEM) a replica presents to its master over TLS. Empty: tls-cert-file." },
    Setting { name: "tls-client-key-file", default: "", live: true, kind: Kind::Str,
        doc: "The private key of tls-client-cert-file (PEM). Empty: tls-key-file." },
    Setting { name: "tls-client-key-file-pass", default: "", live: true, kind: Kind::Str,
        doc: "Redis's passphrase of an encrypted tls-client-key-file. Encrypted keys are not supported here, as for tls-key-file-pass." },
    Setting { name: "requirepass", default: "", live: true, kind: Kind::Str,
        doc: "Password clients must give with AUTH (or HELLO ... AUTH) before any other command. Empty: no password." },
    Setting { name: "aclfile", default: "", live: false, kind: Kind::Str,
        doc: "File of ACL users ('user <name> <rules...>' lines, as ACL LIST shows them), relative to dir; loaded at start and by ACL LOAD, written by ACL SAVE. Empty: users come from 'user' lines of this file (both at once is an error)." },
    Setting { name: "acllog-max-len", default: "128", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "Entries kept in ACL LOG (denied commands, keys, channels and failed authentications)." },
    Setting { name: "acl-pubsub-default", default: "resetchannels", live: true, kind: Kind::Enum(&["allchannels", "resetchannels"]),
        doc: "The channels a new ACL user (or one reset) may use: allchannels, or resetchannels (none until granted with &pattern), as Redis 7." },
    Setting { name: "protected-mode", default: "yes", live: true, kind: Kind::Bool,
        doc: "When yes and no password is set, clients from non-loopback addresses are refused." },
    Setting { name: "maxclients", default: "10000", live: true, kind: Kind::Int(1, 1_000_000),
        doc: "Largest number of connected clients; one more is refused with '-ERR max number of clients reached'." },
    Setting { name: "timeout", default: "0", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Close a client idle for this many seconds. 0: never." },
    Setting { name: "tcp-backlog", default: "511", live: false, kind: Kind::Int(0, i32::MAX as i64),
        doc: "The listen() backlog of the listening sockets (the kernel caps it at net.core.somaxconn), as Redis." },
    Setting { name: "tcp-keepalive", default: "300", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Seconds of silence before TCP keepalive probes are sent on a client's socket (SO_KEEPALIVE; probes then every third of it), so dead peers are noticed. 0: off. Applies to connections accepted after a change." },
    Setting { name: "databases", default: "16", live: false, kind: Kind::Int(1, 1_000_000),
        doc: "Number of databases (SELECT 0 .. databases-1). Each holds a key space and document collections." },
    Setting { name: "shards", default: "0", live: false, kind: Kind::Int(0, 1024),
        doc: "Number of in-process shards the data is split over. 0: twice the number of cores." },
    Setting { name: "io-threads", default: "0", live: false, kind: Kind::Int(0, 128),
        doc: "Threads that run connections and commands (Redis's name; here every thread also executes commands, each locking only the shards it touches). 0: half the cores, at least one, leaving the rest to the kernel's network stack and to clients on the same machine." },
    Setting { name: "io-coalesce-us", default: "40", live: true, kind: Kind::Int(0, 1000),
        doc: "Microseconds a busy I/O thread naps on a timer before it waits for input, so that the requests many clients are about to send are read in one wake-up instead of each waking the thread. Taken only while the thread was busy at least half the time and at least 8 connections sent requests within the last 0.1-0.2 s, fewer than half of them having been read in the thread's last busy spell; so a few clients that all wait on the server never wait for a nap. 0: off. With io-threads 1 (more threads never nap)." },
    Setting { name: "hz", default: "10", live: true, kind: Kind::Int(1, 500),
        doc: "How many times a second each shard sweeps expired keys from its timing wheel." },
    Setting { name: "dynamic-hz", default: "yes", live: true, kind: Kind::Bool,
        doc: "Raise the background work's frequency above hz while many clients are connected (doubling it, up to 500, while there are more than 200 clients per tick), as Redis." },
    Setting { name: "ttl-monitor-period", default: "60", live: true, kind: Kind::Int(1, i32::MAX as i64),
        doc: "Seconds between two passes of each shard's TTL monitor over its TTL indexes (MongoDB's ttlMonitorSleepSecs). A change takes effect at once." },
    Setting { name: "ttl-strict-reads", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: a document past its TTL deadline is invisible to reads and writes at once. no: it lingers until the monitor removes it, as in MongoDB." },
    Setting { name: "maxmemory", default: "0", live: true, kind: Kind::Memory,
        doc: "Memory limit for data. 0: no limit. Past it, maxmemory-policy decides." },
    Setting { name: "maxmemory-policy", default: "noeviction", live: true, kind: Kind::Enum(POLICIES),
        doc: "What happens past maxmemory: noeviction (writes fail with -OOM), allkeys-lru, volatile-lru, allkeys-lfu, volatile-lfu, allkeys-random, volatile-random, volatile-ttl." },
    Setting { name: "maxmemory-samples", default: "5", live: true, kind: Kind::Int(1, 64),
        doc: "Keys sampled per eviction; more is more exact and slower." },
    Setting { name: "maxmemory-clients", default: "0", live: true, kind: Kind::Special(parse_maxmemory_clients),
        doc: "Redis 7's limit on the memory all clients' buffers take together (a byte amount, or a percentage of maxmemory), past which the biggest clients are closed. Client eviction is not available here: the value is checked as Redis checks it and only 0 (no limit) is accepted; each client's buffers are still bounded by client-query-buffer-limit and client-output-buffer-limit." },
    Setting { name: "sanitize-dump-payload", default: "no", live: true, kind: Kind::Enum(&["no", "yes", "clients"]),
        doc: "Which RESTORE payloads count as deeply checked in INFO's dump_payload_sanitizations (one per listpack or intset, as Redis counts): no (none), yes (all), clients (all but those from this replica's master and from ACL users with skip-sanitize-payload). Every payload is decoded and checked entry by entry whatever the value; nothing in one is trusted." },
    Setting { name: "proto-max-bulk-len", default: "536870912", live: true, kind: Kind::Special(parse_bulk_len),
        doc: "Largest bulk string a client may send (512mb; between 1mb and 4gb - 1, the longest string a key holds). Longer ones are a protocol error." },
    Setting { name: "client-query-buffer-limit", default: "1073741824", live: true, kind: Kind::Memory,
        doc: "Largest unparsed input kept for one client (1gb); past it the client is closed." },
    Setting { name: "max-document-size", default: "16777216", live: true, kind: Kind::Memory,
        doc: "Largest document, as BSON bytes (16mb, as MongoDB)." },
    Setting { name: "save", default: "3600 1 300 100 60 10000", live: true, kind: Kind::Special(parse_save),
        doc: "Snapshot schedule, as Redis's 'save': pairs of seconds and changes; a BGSAVE of dir/dbfilename starts when that many seconds have passed since the last successful save and at least that many changes were made (a failed one is retried after 5 seconds). The first 'save' line replaces the default (3600 1 300 100 60 10000, Redis's), later ones add to it; \"\" disables." },
    Setting { name: "shutdown-on-sigterm", default: "default", live: true, kind: Kind::Special(parse_shutdown_flags),
        doc: "What SIGTERM does, as SHUTDOWN's flags (Redis's names): default (save when a save schedule is set), save, nosave, now, force, or several of them." },
    Setting { name: "shutdown-on-sigint", default: "default", live: true, kind: Kind::Special(parse_shutdown_flags),
        doc: "What SIGINT (Ctrl-C) does, as shutdown-on-sigterm." },
    Setting { name: "shutdown-timeout", default: "10", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Seconds a shutdown (SHUTDOWN without NOW, SIGTERM, SIGINT) waits, writes paused, for lagging replicas to acknowledge every write before saving and exiting, as Redis's. 0: no wait." },
    Setting { name: "key-load-delay", default: "0", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Microseconds of delay per key (dump.rdb) or command (journal) loaded at start, as Redis's key-load-delay: for tests that watch a load in progress. 0: none." },
    Setting { name: "rdbcompression", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: strings over 20 bytes are LZF-compressed in dump.rdb, a full sync's snapshot and DUMP payloads when that saves 4 bytes, as Redis. no: they are written as they are (less CPU, larger files). Read when a save starts." },
    Setting { name: "rdb-key-save-delay", default: "0", live: true, kind: Kind::Int(i32::MIN as i64, i32::MAX as i64),
        doc: "Microseconds of delay per key a snapshot writes (dump.rdb, the journal's base, a full sync), as Redis's rdb-key-save-delay (negative: 1 us once in that many keys): for tests that watch a save in progress. Read when a save starts. 0: none." },
    Setting { name: "appendonly", default: "no", live: true, kind: Kind::Bool,
        doc: "Keep an append-only journal of every write (Redis 7's multi-part AOF in dir/appenddirname) and replay it at start. Turned on at run time, a base is written from a snapshot of the data so far while new writes go to the journal; turned off, the files are closed." },
    Setting { name: "appendfsync", default: "everysec", live: true, kind: Kind::Enum(&["always", "everysec", "no"]),
        doc: "When the journal is flushed to disk: always (before replying), everysec, or no (left to the OS)." },
    Setting { name: "appendfilename", default: "appendonly.aof", live: false, kind: Kind::Str,
        doc: "Prefix of the journal's file names (appendonly.aof.1.base.aof, appendonly.aof.1.incr.aof, appendonly.aof.manifest)." },
    Setting { name: "appenddirname", default: "appendonlydir", live: false, kind: Kind::Str,
        doc: "Directory of the journal's files, inside dir." },
    Setting { name: "aof-load-truncated", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: a journal whose last record is torn (a crash mid-write) is cut before it and loaded; no: the server refuses to start." },
    Setting { name: "auto-aof-rewrite-percentage", default: "100", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Rewrite the journal (as BGREWRITEAOF) when it has grown by this percentage since the last rewrite (or since start). 0: never automatically." },
    Setting { name: "auto-aof-rewrite-min-size", default: "67108864", live: true, kind: Kind::Memory,
        doc: "Do not rewrite the journal automatically below this size (64mb)." },
    Setting { name: "client-output-buffer-limit", default: "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", live: true, kind: Kind::Special(parse_output_limits),
        doc: "Per client class: <class> <hard limit> <soft limit> <soft seconds>. A normal or pubsub client whose unwritten replies and pushed messages are over the hard limit, or over the soft one for that long, is closed. The replica class is checked and kept but not applied: a replica's stream is read from the one replication backlog, and a replica that falls out of it (repl-backlog-size) is disconnected instead." },
    Setting { name: "dir", default: ".", live: true, kind: Kind::Str,
        doc: "Working directory for the journal and snapshots." },
    Setting { name: "dbfilename", default: "dump.rdb", live: true, kind: Kind::Special(parse_dbfilename),
        doc: "Snapshot file name, inside dir. A file of that name written by Redis (RDB version 10 or older) is loaded at start. CONFIG SET (where enable-protected-configs allows) names the file the next saves write." },
    Setting { name: "loglevel", default: "notice", live: true, kind: Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]),
        doc: "How much is logged: debug, verbose, notice, warning, nothing." },
    Setting { name: "logfile", default: "", live: false, kind: Kind::Str,
        doc: "Log file; a relative path is read from dir, as Redis (which works in dir). Empty: standard error (Redis-format lines on standard output)." },
    Setting { name: "notify-keyspace-events", default: "", live: true, kind: Kind::Special(parse_notify_classes),
        doc: "Keyspace notification classes, as in Redis: K (keyspace) E (keyevent) g $ h x (expired, including doc.expired) e (evicted) n A (alias for g$hxe...). Empty: off." },
    Setting { name: "tracking-table-max-keys", default: "1000000", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "Most keys the client-side caching table remembers (CLIENT TRACKING); past it, keys leave the table and their clients get invalidations as if they changed. 0: no limit." },
    Setting { name: "slowlog-log-slower-than", default: "10000", live: true, kind: Kind::Int(-1, i64::MAX),
        doc: "Log commands slower than this many microseconds in SLOWLOG. -1: off; 0: every command." },
    Setting { name: "slowlog-max-len", default: "128", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "Entries kept in SLOWLOG." },
    Setting { name: "hash-max-listpack-entries", default: "128", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A hash with more fields than this leaves its packed form (listpack) for a hash table, as Redis." },
    Setting { name: "hash-max-listpack-value", default: "64", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A hash with a field or value longer than this many bytes leaves its packed form." },
    Setting { name: "list-max-listpack-size", default: "-2", live: true, kind: Kind::Int(-5, i64::MAX),
        doc: "Size of each packed node of a list: positive, a number of elements; -1 to -5, 4, 8, 16, 32 or 64 KiB per node, as Redis." },
    Setting { name: "list-compress-depth", default: "0", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Nodes of a list kept uncompressed at each end; the nodes between are stored compressed (LZ4), as Redis. 0: no compression." },
    Setting { name: "set-max-intset-entries", default: "512", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A set of integers with more members than this leaves its packed integer form (intset)." },
    Setting { name: "set-max-listpack-entries", default: "128", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A set with more members than this leaves its packed form (listpack) for a hash table, as Redis 7.2." },
    Setting { name: "set-max-listpack-value", default: "64", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A set with a member longer than this many bytes leaves its packed form." },
    Setting { name: "zset-max-listpack-entries", default: "128", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A sorted set with more members than this leaves its packed form (listpack) for a skiplist." },
    Setting { name: "zset-max-listpack-value", default: "64", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A sorted set with a member longer than this many bytes leaves its packed form." },
    Setting { name: "hll-sparse-max-bytes", default: "3000", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "A HyperLogLog in the sparse representation larger than this many bytes is converted to the dense one, as Redis." },
    Setting { name: "stream-node-max-bytes", default: "4096", live: true, kind: Kind::Memory,
        doc: "Largest packed block of a stream in bytes: an entry that would take a block past it starts a new one (0: no limit)." },
    Setting { name: "stream-node-max-entries", default: "100", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "Most entries a packed block of a stream holds, deleted ones included, before a new block starts (0: no limit)." },
    Setting { name: "busy-reply-threshold", default: "5000", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "Milliseconds a Lua script or function runs before other clients' commands are answered -BUSY, as Redis: then only SCRIPT KILL / FUNCTION KILL (which stop a script that has not written), SHUTDOWN NOSAVE and a few connection commands run. 0: never. Alias: lua-time-limit." },
    Setting { name: "min-replicas-to-write", default: "0", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Refuse writes (-NOREPLICAS) unless this many replicas are connected with a lag under min-replicas-max-lag, as Redis. 0: off. Alias: min-slaves-to-write." },
    Setting { name: "min-replicas-max-lag", default: "10", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Seconds of lag under which a replica counts for min-replicas-to-write. 0: the check is off. Alias: min-slaves-max-lag." },
    Setting { name: "replicaof", default: "", live: false, kind: Kind::Special(parse_replicaof),
        doc: "Start as a replica of this master: <host> <port> (REPLICAOF at run time). Empty: a master. Alias: slaveof." },
    Setting { name: "masterauth", default: "", live: true, kind: Kind::Str,
        doc: "Password a replica sends its master (AUTH) before syncing. Empty: none." },
    Setting { name: "masteruser", default: "", live: true, kind: Kind::Str,
        doc: "ACL user a replica authenticates as with masterauth. Empty: the default user." },
    Setting { name: "replica-read-only", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: a replica refuses writes from its clients (-READONLY); only its master's stream writes. Alias: slave-read-only." },
    Setting { name: "replica-serve-stale-data", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: a replica whose link to its master is down (or still syncing) answers with the data it has; no: only commands flagged stale (INFO, CONFIG, REPLICAOF...) run, the others get -MASTERDOWN, as Redis. Alias: slave-serve-stale-data." },
    Setting { name: "repl-diskless-load", default: "disabled", live: true, kind: Kind::Special(parse_diskless_load),
        doc: "How a replica loads its master's snapshot: disabled, Redis's default and the only value here: the snapshot is written to a file in dir, then loaded in place of the data set. on-empty-db and swapdb (loading from the socket as the transfer runs) are not available and are refused." },
    Setting { name: "loading-process-events-interval-bytes", default: "2097152", live: true, kind: Kind::Int(1024, i32::MAX as i64),
        doc: "Redis's bytes loaded between two rounds of serving clients during a load. A load here runs on a thread of its own and clients are served throughout, at any value." },
    Setting { name: "repl-backlog-size", default: "1048576", live: true, kind: Kind::Memory,
        doc: "Bytes of the replication stream kept in memory (created with the first replica), so a replica that reconnects resumes with a partial resync instead of a full one." },
    Setting { name: "propagation-error-behavior", default: "ignore", live: true, kind: Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        doc: "What an error does in a command of the master's stream (on a read-only replica) or of the journal being replayed at start: ignore logs it (the == CRITICAL == line, for the stream) and goes on; panic stops the process (the stream) or the start (the journal); panic-on-replicas stops only for the stream." },
    Setting { name: "repl-diskless-sync", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: a full resynchronisation streams the snapshot to the replica's socket as it is copied (`$EOF:<mark>`), with no file, when the replica says it reads that (REPLCONF capa eof) and the data set holds no collection; otherwise, and with no, it goes through a file in the temp directory." },
    Setting { name: "repl-diskless-sync-delay", default: "0", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Seconds a master waits before a diskless transfer starts. Redis waits (5 s by default) so that replicas arriving meanwhile share one transfer; here each replica's transfer is its own, so the default is not to wait." },
    Setting { name: "repl-diskless-sync-max-replicas", default: "0", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "A diskless transfer's wait (repl-diskless-sync-delay) ends early once this many replicas wait for a full resynchronisation. 0: the whole delay." },
    Setting { name: "repl-backlog-ttl", default: "3600", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Seconds a master without replicas keeps its backlog; then it frees it and starts a new replication history (a replica that comes back resyncs in full). 0: never. A replica keeps its backlog whatever this says." },
    Setting { name: "repl-ping-replica-period", default: "10", live: true, kind: Kind::Int(1, i32::MAX as i64),
        doc: "Seconds between two PINGs a master sends its replicas on the stream. Alias: repl-ping-slave-period." },
    Setting { name: "repl-timeout", default: "60", live: true, kind: Kind::Int(1, i32::MAX as i64),
        doc: "Seconds without data after which a replica drops its link to the master (and reconnects)." },
    Setting { name: "replica-announce-ip", default: "", live: true, kind: Kind::Str,
        doc: "The address a replica tells its master it has (REPLCONF ip-address), which the master lists in INFO replication and Sentinel connects to: for a replica behind NAT or port forwarding. Empty: the address the master sees. Alias: slave-announce-ip." },
    Setting { name: "replica-announce-port", default: "0", live: true, kind: Kind::Int(0, 65535),
        doc: "The port a replica tells its master it listens on (REPLCONF listening-port). 0: the port it listens on. Alias: slave-announce-port." },
    Setting { name: "replica-announced", default: "yes", live: true, kind: Kind::Bool,
        doc: "no: Redis Sentinel leaves this replica out of what it reports (SENTINEL REPLICAS), as it reads replica_announced in INFO replication." },
    Setting { name: "replica-priority", default: "100", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "A replica's priority, shown in INFO replication (slave_priority), where Redis Sentinel reads it: lower is preferred when it promotes one, 0 never (cluster failover ranks replicas by replication offset, as Redis 7.0's). Alias: slave-priority." },
    Setting { name: "cluster-enabled", default: "no", live: false, kind: Kind::Bool,
        doc: "yes: run as a Redis Cluster node (the cluster bus on cluster-port, slots, MOVED/ASK redirections, replicas and failover, only database 0), as Redis 7.0 (docs/cluster.md)." },
    Setting { name: "cluster-config-file", default: "nodes.conf", live: false, kind: Kind::Str,
        doc: "The cluster's own state file (relative to dir): written by the node (temp file, fsync, rename) whenever its view changes, read at start. Not for editing by hand." },
    Setting { name: "cluster-node-timeout", default: "15000", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "Milliseconds a node may stay unreachable before it is flagged as possibly failing (PFAIL); a majority of masters' reports turns that into FAIL." },
    Setting { name: "cluster-port", default: "0", live: false, kind: Kind::Int(0, 65535),
        doc: "The cluster bus's port. 0: the client port + 10000." },
    Setting { name: "cluster-announce-ip", default: "", live: true, kind: Kind::Str,
        doc: "The address other nodes and clients are told this node has (behind NAT). Empty: the one the node learns from its peers." },
    Setting { name: "cluster-announce-port", default: "0", live: true, kind: Kind::Int(0, 65535),
        doc: "The client port announced to the cluster. 0: port." },
    Setting { name: "cluster-announce-tls-port", default: "0", live: true, kind: Kind::Int(0, 65535),
        doc: "The TLS client port announced when tls-cluster is on (it is not available here, so this is kept and announced nowhere). 0: tls-port." },
    Setting { name: "cluster-announce-bus-port", default: "0", live: true, kind: Kind::Int(0, 65535),
        doc: "The bus port announced to the cluster. 0: the bus port in force." },
    Setting { name: "cluster-announce-hostname", default: "", live: true, kind: Kind::Special(parse_hostname),
        doc: "A hostname announced to the cluster (CLUSTER SLOTS/SHARDS, redirections when cluster-preferred-endpoint-type is hostname). Empty: none." },
    Setting { name: "cluster-preferred-endpoint-type", default: "ip", live: true, kind: Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        doc: "What MOVED/ASK and CLUSTER SLOTS name a node by: ip, hostname (its announced hostname, '?' without one) or unknown-endpoint (nothing: the client reuses the address it connected to)." },
    Setting { name: "cluster-require-full-coverage", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: the cluster refuses queries (CLUSTERDOWN) while any slot is unassigned or on a failed node." },
    Setting { name: "cluster-allow-reads-when-down", default: "no", live: true, kind: Kind::Bool,
        doc: "yes: while the cluster is down, reads of slots this node holds are still served." },
    Setting { name: "cluster-allow-pubsubshard-when-down", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: shard channels (SPUBLISH, SSUBSCRIBE) keep working while the cluster is down, for slots this node holds." },
    Setting { name: "cluster-replica-no-failover", default: "no", live: true, kind: Kind::Bool,
        doc: "yes: this replica never starts an election when its master fails (a manual CLUSTER FAILOVER still works). Alias: cluster-slave-no-failover." },
    Setting { name: "cluster-replica-validity-factor", default: "10", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "A replica whose link to its failed master has been down longer than repl-ping-replica-period + cluster-node-timeout × this factor does not try to fail over (its data is too old). 0: always try. Alias: cluster-slave-validity-factor." },
    Setting { name: "cluster-migration-barrier", default: "1", live: true, kind: Kind::Int(0, i32::MAX as i64),
        doc: "Replicas a master keeps before one of them may move to a master left without any (replica migration)." },
    Setting { name: "cluster-allow-replica-migration", default: "yes", live: true, kind: Kind::Bool,
        doc: "yes: replicas move to orphaned masters, and a master that loses its last slot becomes a replica of the node that took it." },
    Setting { name: "cluster-link-sendbuf-limit", default: "0", live: true, kind: Kind::Memory,
        doc: "Bytes a bus link may have waiting to be sent before it is closed (and reconnected). 0: no limit." },
    Setting { name: "cluster-slot-migration-handoff-max-lag-bytes", default: "1048576", live: true, kind: Kind::Memory,
        doc: "An atomic slot migration (CLUSTER MIGRATION) pauses writes to its slots for the flip once the target is this few bytes of the slots' stream behind." },
    Setting { name: "cluster-slot-migration-write-pause-timeout", default: "10000", live: true, kind: Kind::Int(1, i32::MAX as i64),
        doc: "Milliseconds an atomic slot migration's source holds writes to the slots for the flip at most; if the target has not taken them by then, the source keeps them and the task fails." },
    Setting { name: "latency-tracking", default: "yes", live: true, kind: Kind::Bool,
        doc: "Keep a latency histogram per command, shown by INFO latencystats and LATENCY HISTOGRAM, as Redis 7." },
    Setting { name: "latency-tracking-info-percentiles", default: "50 99 99.9", live: true, kind: Kind::Special(parse_percentiles),
        doc: "The percentiles INFO latencystats shows, between 0 and 100, separated by spaces." },
    Setting { name: "latency-monitor-threshold", default: "0", live: true, kind: Kind::Int(0, i64::MAX),
        doc: "Record an event for LATENCY LATEST/HISTORY when a command or an expiry cycle takes at least this many milliseconds. 0: off." },
    Setting { name: "enable-module-command", default: "no", live: false, kind: Kind::Enum(&["no", "yes", "local"]),
        doc: "Who may run MODULE LOAD, LOADEX and UNLOAD: no one (no), everyone (yes), or connections from the loopback (local). No module ever loads here (there is no module API): allowed, LOAD answers Redis's loading error and logs why." },
    Setting { name: "enable-debug-command", default: "no", live: false, kind: Kind::Enum(&["no", "yes", "local"]),
        doc: "Whether DEBUG may run: no, yes, or local (loopback clients only), as Redis. Tests use DEBUG ADVANCE-CLOCK to move wall time forward." },
    Setting { name: "stop-writes-on-bgsave-error", default: "yes", live: true, kind: Kind::Bool,
        doc: "With a save schedule set, refuse writes (and PING) with -MISCONF while the last background save failed, until one succeeds, as Redis." },
    Setting { name: "aof-use-rdb-preamble", default: "no", live: true, kind: Kind::Special(parse_rdb_preamble),
        doc: "The journal's base is written as commands (RESP), which can hold documents; an RDB preamble (Redis's default, yes) is not available, so only no is accepted." },
    Setting { name: "enable-protected-configs", default: "no", live: false, kind: Kind::Enum(&["no", "yes", "local"]),
        doc: "Whether CONFIG SET may change where the server writes its files (dir, dbfilename): no, yes, or local (loopback clients only), as Redis 7." },
    Setting { name: "set-proc-title", default: "yes", live: false, kind: Kind::Bool,
        doc: "yes: the process title (ps, /proc/PID/cmdline) is set from proc-title-template, at start, on a port change and on CONFIG SET of the template, as Redis. no: it is left as the command line." },
    Setting { name: "proc-title-template", default: "{title} {listen-addr} {server-mode}", live: true, kind: Kind::Special(parse_proc_title_template),
        doc: "The process title, as Redis: {title} (the command's name as started), {listen-addr} (first bind address:port), {server-mode} ([cluster] in cluster mode, else empty: no sentinel here), {port}, {tls-port}, {unixsocket} (its path, or empty), {config-file} (its absolute path, or -); {{ is a literal {. Spaces at either end are trimmed; a template that expands to nothing is refused." },
    Setting { name: "oom-score-adj", default: "no", live: true, kind: Kind::Special(parse_oom_score_adj),
        doc: "Whether the server sets its own Linux OOM score (/proc/self/oom_score_adj) from oom-score-adj-values, as Redis: no (left as it was; set back to the value read when first adjusted), yes or relative (the value is added to the score the process had), absolute (the value as it is)." },
    Setting { name: "oom-score-adj-values", default: "0 200 800", live: true, kind: Kind::Special(parse_oom_score_adj_values),
        doc: "Three scores between -2000 and 2000 for oom-score-adj: a master, a replica, and Redis's background child. No child process is forked here (saves and rewrites run on threads of the server), so the third is checked and shown but never applied." },
];

pub fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case(name))
        .or_else(|| alias_of(name))
}

/// Redis 7 still accepts the names its packed encodings had before 7.0: (alias, setting).
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
    ("slaveof", "replicaof"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("repl-ping-slave-period", "repl-ping-replica-period"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("cluster-slave-no-failover", "cluster-replica-no-failover"),
    (
        "cluster-slave-validity-factor",
        "cluster-replica-validity-factor",
    ),
];

/// Redis settings that have no effect in tidecache, accepted from the config file and the
/// command line so a redis.conf (or Redis's test-suite `default.conf`) starts as it is; the
/// server logs one warning naming those it met. Each comes with the values accepted (empty:
/// any): a value that would claim what tidecache does not do (`daemonize yes`) is refused
/// like any bad value. Settings not in this list and not settings stop the start.
pub const IGNORED: &[(&str, &[&str])] = &[
    // The start-up banner always carries the PID.
    ("always-show-logo", &[]),
    // tidecache always runs in the foreground and writes no PID file.
    ("daemonize", &["no"]),
    ("supervised", &["no"]),
    ("pidfile", &[]),
    // Snapshot file settings: dump.rdb is always checksummed, and a rewrite's fsync policy
    // is the journal's own.
    ("rdbchecksum", &[]),
    ("no-appendfsync-on-rewrite", &[]),
    ("repl-disable-tcp-nodelay", &[]),
    ("replica-lazy-flush", &["no"]),
    ("rdb-del-sync-files", &["no"]),
    // Hash tables here are Rust's, resized as they grow.
    ("activerehashing", &[]),
    // Values are freed where they are deleted (UNLINK and FLUSH ... ASYNC free in the
    // background); the lazy variants of the other paths are not available.
    ("lazyfree-lazy-eviction", &["no"]),
    ("lazyfree-lazy-expire", &["no"]),
    ("lazyfree-lazy-server-del", &["no"]),
    ("lazyfree-lazy-user-del", &["no"]),
    ("lazyfree-lazy-user-flush", &["no"]),
    // The journal writes no timestamp annotations.
    ("aof-timestamp-enabled", &["no"]),
    // A rewrite's base and a snapshot are always fsynced every 4 MB as they are written.
    ("aof-rewrite-incremental-fsync", &["yes"]),
    ("rdb-save-incremental-fsync", &["yes"]),
    // The allocator is mimalloc, not jemalloc.
    ("jemalloc-bg-thread", &[]),
    // Transparent huge pages are always off for the process (util::alloc), Redis's default.
    ("disable-thp", &["yes"]),
    // TLS for the cluster bus (it runs in the clear here: only `no` is true), DH parameters (rustls uses ECDHE only), and a session
    // lifetime rustls does not expose.
    ("tls-cluster", &["no"]),
    ("tls-dh-params-file", &[]),
    ("tls-session-cache-timeout", &[]),
];

/// Start-only settings that `CONFIG SET` accepts when given the value already in force
/// (Redis changes them at run time; tidecache cannot, but a no-op is still true).
pub const SAME_VALUE_OK: &[&str] = &["bind", "shards", "admin-port", "admin-bind"];

/// Settings `CONFIG SET` refuses with `-LOADING` while data is loaded (Redis's
/// `DENY_LOADING_CONFIG`): where the files are, and the journal.
pub const DENY_LOADING: &[&str] = &["dir", "appendonly"];

/// Test knobs left out of `CONFIG GET` with a pattern (Redis's `HIDDEN_CONFIG`): named
/// exactly, they answer.
pub const HIDDEN: &[&str] = &["key-load-delay", "rdb-key-save-delay"];

/// Settings that `CONFIG SET` changes only where `enable-protected-configs` allows (Redis's
/// `PROTECTED_CONFIG`): where the server writes its files.
pub const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// The `IGNORED` entry for `name`, if `name` is not a setting.
pub fn ignored(name: &str) -> Option<(&'static str, &'static [&'static str])> {
    if setting(name).is_some() {
        return None;
    }
    IGNORED
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .copied()
}

fn alias_of(name: &str) -> Option<&'static Setting> {
    let (_, target) = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))?;
    SETTINGS.iter().find(|s| s.name == *target)
}

/// `aof-use-rdb-preamble`: only `no`, what the journal writes.
fn parse_rdb_preamble(value: &str) -> Result<String, String> {
    match value.to_ascii_lowercase().as_str() {
        "no" => Ok("no".into()),
        "yes" => Err("an RDB preamble is not available in tidecache: the journal's base is written as commands, so only 'aof-use-rdb-preamble no' is accepted".into()),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

/// `cluster-announce-hostname`, as Redis's `isValidAnnouncedHostname`.
fn parse_hostname(value: &str) -> Result<String, String> {
    if value.len() >= 256 {
        return Err("Hostnames must be less than 256 characters".into());
    }
    if !value
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
    {
        return Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into());
    }
    Ok(value.to_string())
}

/// `unixsocketperm`: octal permission bits, as Redis reads them (strtol base 8).
fn parse_socket_perm(value: &str) -> Result<String, String> {
    match u32::from_str_radix(value.trim(), 8) {
        Ok(p) if p <= 0o777 => Ok(format!("{p:o}")),
        _ => Err("argument must be an octal number between 0 and 777".into()),
    }
}

/// `repl-diskless-load`: `disabled` (through a file), `on-empty-db` or `swapdb` (through
/// memory; see server/replication.rs `receive_into_memory`).
fn parse_diskless_load(value: &str) -> Result<String, String> {
    match value.to_ascii_lowercase().as_str() {
        v @ ("disabled" | "on-empty-db" | "swapdb") => Ok(v.into()),
        _ => Err("argument(s) must be one of the following: disabled, on-empty-db, swapdb".into()),
    }
}

/// `maxmemory-clients`: read as Redis reads it (a memory value, or a percentage of
/// `maxmemory` up to 100%), and refused unless 0: client eviction is not built here, so a
/// limit would be a promise nothing keeps.
fn parse_maxmemory_clients(value: &str) -> Result<String, String> {
    let v = value.trim();
    let n = match parse_memory(v) {
        Some(n) => n,
        None => match v.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) if p > 100 => {
                return Err("percentage argument must be less or equal to 100".into())
            }
            Some(p) if p >= 0 => p as u64,
            _ => return Err("argument must be a memory or percent value".into()),
        },
    };
    if n == 0 {
        Ok("0".into())
    } else {
        Err("client eviction is not available in tidecache: only 'maxmemory-clients 0' (no limit) is accepted".into())
    }
}

/// The variables of `proc-title-template` (Redis's `redisProcTitleGetVariable`).
pub const PROC_TITLE_VARS: &[&str] = &[
    "title",
    "listen-addr",
    "server-mode",
    "port",
    "tls-port",
    "unixsocket",
    "config-file",
];

/// Expands a process-title template as Redis's `sdstemplate`: `{name}` is replaced by
/// `var(name)`, `{{` is a literal `{`; an unknown variable, a `{` at the end or one never
/// closed make it invalid (None). The result is trimmed of spaces at both ends.
pub fn expand_proc_title(template: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return None;
        }
        if let Some(tail) = after.strip_prefix('{') {
            out.push('{');
            rest = tail;
            continue;
        }
        let close = after.find('}')?;
        out.push_str(&var(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

/// `proc-title-template`: valid when every variable is known and the expansion is not
/// empty, checked as Redis checks it (an empty `{title}`, the other variables as a server
/// without cluster, sentinel or Unix socket shows them).
fn parse_proc_title_template(value: &str) -> Result<String, String> {
    let probe = |name: &str| match name {
        "title" | "server-mode" | "unixsocket" => Some(String::new()),
        "listen-addr" => Some("*:6379".into()),
        "port" | "tls-port" => Some("0".into()),
        "config-file" => Some("-".into()),
        _ => None,
    };
    match expand_proc_title(value, &probe) {
        Some(t) if !t.is_empty() => Ok(value.to_string()),
        _ => Err("template format is invalid or contains unknown variables".into()),
    }
}

/// `oom-score-adj`: Redis's enum, where `relative` is another name of `yes` (CONFIG GET
/// shows `yes`).
fn parse_oom_score_adj(value: &str) -> Result<String, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "no" => Ok("no".into()),
        "yes" | "relative" => Ok("yes".into()),
        "absolute" => Ok("absolute".into()),
        _ => Err("argument(s) must be one of the following: no, yes, relative, absolute".into()),
    }
}

/// `oom-score-adj-values`: three integers from -2000 to 2000 (master, replica, background
/// child), as Redis's `setConfigOOMScoreAdjValuesOption`.
fn parse_oom_score_adj_values(value: &str) -> Result<String, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    if words.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    let mut out = Vec::with_capacity(3);
    for w in words {
        match w.parse::<i64>() {
            Ok(n) if (-2000..=2000).contains(&n) => out.push(n.to_string()),
            _ => {
                return Err(
                    "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into(),
                )
            }
        }
    }
    Ok(out.join(" "))
}

/// The three values of a normalized `oom-score-adj-values`.
pub fn oom_score_adj_values(value: &str) -> [i32; 3] {
    let mut out = [0, 200, 800];
    for (slot, w) in out.iter_mut().zip(value.split_whitespace()) {
        *slot = w.parse().unwrap_or(*slot);
    }
    out
}

/// `replicaof`: `<host> <port>`, or empty.
fn parse_replicaof(value: &str) -> Result<String, String> {
    let parts: Vec<&str> = value.split_whitespace().collect();
    match parts.as_slice() {
        [] => Ok(String::new()),
        [h, p] if h.eq_ignore_ascii_case("no") && p.eq_ignore_ascii_case("one") => {
            Ok(String::new())
        }
        [h, p] => match p.parse::<u16>() {
            Ok(port) => Ok(format!("{h} {port}")),
            Err(_) => Err("Invalid master port".into()),
        },
        _ => Err("wrong number of arguments".into()),
    }
}

/// `dbfilename`: a file name, as Redis (which refuses a path).
fn parse_dbfilename(value: &str) -> Result<String, String> {
    if value.is_empty() {
        Err("dbfilename can't be empty".into())
    } else if value.contains('/') {
        Err("dbfilename can't be a path, just a filename".into())
    } else {
        Ok(value.to_string())
    }
}

/// Redis's settings that take several words (`MULTI_ARG_CONFIG`): a config line with the
/// name alone sets them empty.
const MULTI_ARG: &[&str] = &[
    "save",
    "bind",
    "client-output-buffer-limit",
    "latency-tracking-info-percentiles",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "oom-score-adj-values",
];

/// Redis's check of a `save` schedule: pairs of seconds (at least 1) and changes (at least
/// 0), or the empty schedule.
fn check_save_schedule(value: &str) -> Result<(), String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let valid = words.len().is_multiple_of(2)
        && words.iter().enumerate().all(|(j, w)| {
            w.parse::<i64>()
                .is_ok_and(|v| if j % 2 == 0 { v >= 1 } else { v >= 0 })
        });
    if valid {
        Ok(())
    } else {
        Err("Invalid save parameters".into())
    }
}

/// `save`: checked as Redis checks it, and written back as Redis's CONFIG GET shows it
/// (the numbers separated by one space; empty for no schedule).
fn parse_save(value: &str) -> Result<String, String> {
    check_save_schedule(value)?;
    let words: Vec<String> = value
        .split_whitespace()
        .map(|w| w.parse::<i64>().map(|n| n.to_string()).unwrap_or_default())
        .collect();
    Ok(words.join(" "))
}

/// SHUTDOWN's flags, in the order Redis's enum lists them.
const SHUTDOWN_FLAGS: &[&str] = &["save", "nosave", "now", "force"];

/// `shutdown-on-sigterm`/`-sigint`: Redis's multi-word enum (`default` is no flag), written
/// back as Redis's CONFIG GET shows it (the flags in enum order, or `default`).
fn parse_shutdown_flags(value: &str) -> Result<String, String> {
    const ONE_OF: &str =
        "argument(s) must be one of the following: default, save, nosave, now, force";
    let mut set = [false; 4];
    let words: Vec<&str> = value.split_whitespace().collect();
    if words.is_empty() {
        return Err(ONE_OF.into());
    }
    for w in words {
        let w = w.to_ascii_lowercase();
        if w == "default" {
            continue;
        }
        let i = SHUTDOWN_FLAGS.iter().position(|f| *f == w).ok_or(ONE_OF)?;
        set[i] = true;
    }
    if set[0] && set[1] {
        return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
    }
    let names: Vec<&str> = SHUTDOWN_FLAGS
        .iter()
        .zip(set)
        .filter_map(|(f, on)| on.then_some(*f))
        .collect();
    Ok(if names.is_empty() {
        "default".into()
    } else {
        names.join(" ")
    })
}

/// Whether a shutdown with these flags (`shutdown-on-sig*` or SHUTDOWN's own) saves
/// `dump.rdb`, as Redis decides: SAVE always, NOSAVE never, otherwise when a save schedule
/// is set.
pub fn shutdown_saves(flags: &str, save_schedule: &str) -> bool {
    let has = |f: &str| flags.split_whitespace().any(|w| w.eq_ignore_ascii_case(f));
    has("save") || (!has("nosave") && !save_schedule.trim().is_empty())
}

/// The pairs (seconds, changes) of a normalized `save` value.
pub fn save_schedule(value: &str) -> Vec<(u64, u64)> {
    let n: Vec<u64> = value
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    n.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// A percentile as Redis prints it (`%f`, trailing zeros trimmed): 50, 99.9.
pub fn percentile_name(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `latency-tracking-info-percentiles`: numbers from 0 to 100 separated by spaces, kept as
/// Redis prints them back (`0.0 50.0` reads back as `0 50`).
fn parse_percentiles(value: &str) -> Result<String, String> {
    let mut out = Vec::new();
    for w in value.split_whitespace() {
        match w.parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => out.push(percentile_name(p)),
            Ok(_) => return Err("percentile must be between 0.0 and 100.0".into()),
            Err(_) => return Err("Invalid value".into()),
        }
    }
    Ok(out.join(" "))
}

/// `proto-max-bulk-len`: Redis's lower bound (1mb), and an upper bound of `u32::MAX`, the
/// longest string value the key space stores (`util::packed`).
fn parse_bulk_len(value: &str) -> Result<String, String> {
    const MIN: u64 = 1 << 20;
    const MAX: u64 = crate::util::packed::MAX_LEN as u64;
    match parse_memory(value) {
        Some(n) if (MIN..=MAX).contains(&n) => Ok(n.to_string()),
        Some(_) => Err(format!(
            "argument must be between {MIN} and {MAX} inclusive"
        )),
        None => Err("argument must be a memory value".into()),
    }
}

fn parse_output_limits(v: &str) -> Result<String, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut current: HashMap<&str, [u64; 3]> = HashMap::new();
    for class in ["normal", "slave", "pubsub"] {
        let d = default_output_limit(class);
        current.insert(class, d);
    }
    for chunk in words.chunks(4) {
        let class = match chunk[0].to_ascii_lowercase().as_str() {
            "normal" => "normal",
            "slave" | "replica" => "slave",
            "pubsub" => "pubsub",
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let hard = parse_memory(chunk[1]);
        let soft = parse_memory(chunk[2]);
        let secs = chunk[3].parse::<u64>().ok();
        match (hard, soft, secs) {
            (Some(h), Some(s), Some(t)) => {
                current.insert(class, [h, s, t]);
            }
            _ => {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                )
            }
        }
    }
    Ok(["normal", "slave", "pubsub"]
        .iter()
        .map(|c| {
            let [h, s, t] = current[c];
            format!("{c} {h} {s} {t}")
        })
        .collect::<Vec<_>>()
        .join(" "))
}

fn default_output_limit(class: &str) -> [u64; 3] {
    match class {
        "slave" => [268435456, 67108864, 60],
        "pubsub" => [33554432, 8388608, 60],
        _ => [0, 0, 0],
    }
}

/// Validates notify-keyspace-events classes and returns them in Redis's canonical order.
fn parse_notify_classes(v: &str) -> Result<String, String> {
    const ALL: &str = "g$lshzxetd";
    let mut set = std::collections::BTreeSet::new();
    for c in v.chars() {
        match c {
            'A' => set.extend(ALL.chars()),
            'K' | 'E' | 'g' | '$' | 'l' | 's' | 'h' | 'z' | 'x' | 'e' | 't' | 'd' | 'm' | 'n' => {
                set.insert(c);
            }
            _ => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        }
    }
    // Canonical form, as Redis's keyspaceEventsFlagsToString.
    let mut out = String::new();
    if ALL.chars().all(|c| set.contains(&c)) {
        out.push('A');
    } else {
        for c in ALL.chars() {
            if set.contains(&c) {
                out.push(c);
            }
        }
    }
    for c in ['K', 'E', 'm', 'n'] {
        if set.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// Checks and normalizes a value for a setting. The error text is what follows
/// `CONFIG SET failed (possibly related to argument 'x') - `.
pub fn normalize(s: &Setting, value: &str) -> Result<String, String> {
    match s.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(min, max) => {
            let n: i64 = value
                .trim()
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if n < min || n > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(n.to_string())
        }
        Kind::Memory => parse_memory(value)
            .filter(|&n| n <= i64::MAX as u64)
            .map(|n| n.to_string())
            .ok_or_else(|| "argument must be a memory value".to_string()),
        Kind::Enum(options) => options
            .iter()
            .find(|o| o.eq_ignore_ascii_case(value))
            .map(|o| o.to_string())
            .ok_or_else(|| {
                format!(
                    "argument(s) must be one of the following: {}",
                    options.join(", ")
                )
            }),
        Kind::Str => Ok(value.to_string()),
        Kind::Special(f) => f(value),
    }
}

/// The settings in force, as normalized strings, plus where they came from.
#[derive(Clone, Debug)]
pub struct Config {
    values: HashMap<&'static str, String>,
    pub file: Option<PathBuf>,
    /// `IGNORED` settings met at start, in order, each once (the server names them all in
    /// one warning line).
    pub ignored: Vec<String>,
    /// A `save` line was read: the next ones add to its schedule (Redis replaces its
    /// default schedule at the first line of a file and appends the others).
    save_read: bool,
    /// `user <name> <rules...>` lines, each as its words after `user` (the ACL applies
    /// them at start, where the command table is known).
    pub users: Vec<Vec<String>>,
    /// `rename-command <name> <new name>` lines, in order (the command table applies them
    /// at start; an empty new name removes the command). CONFIG REWRITE keeps the lines.
    pub renames: Vec<(String, String)>,
}

impl Default for Config {
    fn default() -> Self {
        let values = SETTINGS
            .iter()
            .map(|s| {
                (
                    s.name,
                    normalize(s, s.default).unwrap_or_else(|_| s.default.to_string()),
                )
            })
            .collect();
        Config {
            values,
            file: None,
            ignored: Vec::new(),
            users: Vec::new(),
            renames: Vec::new(),
            save_read: false,
        }
    }
}

impl Config {
    /// Builds the configuration from `tidecache-server [conf] [--name value ...]`. As Redis
    /// does, the options become config lines appended after the file's text (see
    /// `args_to_lines`), so both are read by the same parser and an error names its line.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut cfg = Config::default();
        let mut rest = args;
        let mut text = String::new();
        if let Some(first) = rest.first() {
            if !first.starts_with("--") {
                let path = PathBuf::from(first);
                text = std::fs::read_to_string(&path).map_err(|e| {
                    format!(
                        "Fatal error, can't open config file '{}': {e}",
                        path.display()
                    )
                })?;
                cfg.file = Some(std::fs::canonicalize(&path).unwrap_or(path));
                rest = &rest[1..];
            }
        }
        let options = args_to_lines(rest);
        if !options.is_empty() {
            text.push('\n');
            text.push_str(&options);
        }
        cfg.load_text(&text)?;
        Ok(cfg)
    }

    /// Reads redis.conf-style text: `name value` lines, `#` comments.
    pub fn load_text(&mut self, text: &str) -> Result<(), String> {
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fatal = |why: &str| {
                format!(
                    "*** FATAL CONFIG FILE ERROR *** at line {} >>> '{}' {why}",
                    n + 1,
                    line
                )
            };
            let words = split_args(line.as_bytes())
                .ok_or_else(|| fatal("Unbalanced quotes in configuration line"))?;
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect();
            let Some((name, vals)) = words.split_first() else {
                continue;
            };
            // One value for a setting of one word (a number, yes/no, a choice), as Redis.
            let scalar = setting(name).is_some_and(|s| {
                matches!(
                    s.kind,
                    Kind::Bool | Kind::Int(..) | Kind::Memory | Kind::Enum(_)
                )
            });
            // Redis's settings of several words take a line with no value as the empty
            // list (the test suite writes `save ""` as a bare `save `); the others need
            // their one value.
            let multi = setting(name).is_some_and(|s| MULTI_ARG.contains(&s.name));
            if (vals.is_empty() && !multi) || (scalar && vals.len() != 1) {
                return Err(fatal("wrong number of arguments"));
            }
            if name.eq_ignore_ascii_case("rename-command") {
                let [from, to] = vals else {
                    return Err(fatal("wrong number of arguments"));
                };
                self.renames.push((from.clone(), to.clone()));
                continue;
            }
            if name.eq_ignore_ascii_case("user") {
                // Redis's ACLAppendUserForLoading: a name defined twice is an error.
                if self.users.iter().any(|u| u[0] == vals[0]) {
                    return Err(fatal(&format!(
                        "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
                        vals[0]
                    )));
                }
                self.users.push(vals.to_vec());
                continue;
            }
            self.set_from_source(name, &vals.join(" "))
                .map_err(|e| fatal(&e))?;
        }
        Ok(())
    }

    fn set_from_source(&mut self, name: &str, value: &str) -> Result<(), String> {
        if name.eq_ignore_ascii_case("save") {
            // As Redis: `save ""` (or a bare `save`) clears the schedule, and each other
            // line adds its pairs to what earlier lines set.
            let v = parse_save(value)?;
            let v = match self.values.get("save") {
                Some(old) if self.save_read && !old.is_empty() && !v.is_empty() => {
                    format!("{old} {v}")
                }
                _ => v,
            };
            self.save_read = true;
            self.values.insert("save", v);
            return Ok(());
        }
        if let Some((name, only)) = ignored(name) {
            if !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(value.trim())) {
                return Err(format!(
                    "'{name} {value}' is not available in tidecache: only '{name} {}' is accepted",
                    only.join("' or '")
                ));
            }
            if !self.ignored.iter().any(|n| n == name) {
                self.ignored.push(name.to_string());
            }
            return Ok(());
        }
        let s = setting(name)
            .ok_or_else(|| "Bad directive or wrong number of arguments".to_string())?;
        let v = normalize(s, value)?;
        self.values.insert(s.name, v);
        Ok(())
    }

    pub fn get(&self, name: &str) -> &str {
        self.values.get(name).map(String::as_str).unwrap_or("")
    }

    pub fn get_i64(&self, name: &str) -> i64 {
        self.get(name).parse().unwrap_or(0)
    }

    pub fn get_u64(&self, name: &str) -> u64 {
        self.get(name).parse().unwrap_or(0)
    }

    pub fn get_bool(&self, name: &str) -> bool {
        self.get(name) == "yes"
    }

    /// The number of runtime threads `io-threads` asks for (0 resolved against the cores).
    pub fn io_threads(&self) -> usize {
        match self.get_i64("io-threads") {
            n if n > 0 => n as usize,
            _ => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                (cores / 2).max(1)
            }
        }
    }

    /// Sets an already validated, normalized value.
    pub fn set_normalized(&mut self, name: &'static str, value: String) {
        self.values.insert(name, value);
    }

    /// `CONFIG GET` with glob patterns: (name, value) pairs in table order, each once.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(&'static str, String)> {
        SETTINGS
            .iter()
            .filter(|s| {
                // A hidden setting answers only a pattern that names it exactly.
                patterns.iter().any(|p| {
                    if HIDDEN.contains(&s.name) {
                        p.eq_ignore_ascii_case(s.name.as_bytes())
                    } else {
                        glob_match(p, s.name.as_bytes(), true)
                    }
                })
            })
            .map(|s| (s.name, self.get(s.name).to_string()))
            .chain(
                // An alias answers under its own name, as Redis 7 does.
                ALIASES
                    .iter()
                    .filter(|(alias, _)| {
                        patterns
                            .iter()
                            .any(|p| glob_match(p, alias.as_bytes(), true))
                    })
                    .map(|(alias, target)| (*alias, self.get(target).to_string())),
            )
            .collect()
    }

    /// `CONFIG REWRITE`: rewrites the config file in place, keeping comments and order,
    /// replacing each setting's line with its current value and appending changed settings
    /// the file did not mention.
    pub fn rewrite(&self) -> Result<(), String> {
        let path = self
            .file
            .as_ref()
            .ok_or("The server is running without a config file")?;
        let old =
            std::fs::read_to_string(path).map_err(|e| format!("Rewriting config file: {e}"))?;
        let text = self.rewritten_text(&old);
        write_atomically(path, &text).map_err(|e| format!("Rewriting config file: {e}"))
    }

    /// `DEBUG CONFIG-REWRITE-FORCE-ALL`: as `rewrite`, but every setting is written, its
    /// default included.
    pub fn rewrite_all(&self) -> Result<(), String> {
        let path = self
            .file
            .as_ref()
            .ok_or("The server is running without a config file")?;
        let old = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let mut text = self.rewritten_text(&old);
        let written: std::collections::HashSet<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let missing: Vec<&Setting> = SETTINGS
            .iter()
            .filter(|s| !written.contains(s.name))
            .collect();
        for s in missing {
            text.push_str(&format!("{} {}\n", s.name, quote(self.get(s.name))));
        }
        write_atomically(path, &text).map_err(|e| e.to_string())
    }

    fn rewritten_text(&self, old: &str) -> String {
        let mut seen = std::collections::HashSet::new();
        let mut out = String::new();
        // `user` lines: the users in force take the place of the first one (Redis's
        // rewriteConfigUserOption), the others go.
        let user_lines = |out: &mut String| {
            for words in &self.users {
                out.push_str("user");
                for w in words {
                    out.push(' ');
                    out.push_str(&quote(w));
                }
                out.push('\n');
            }
        };
        let mut users_written = false;
        for raw in old.lines() {
            let line = raw.trim();
            let name = line.split_whitespace().next().unwrap_or("");
            if !line.starts_with('#') && name.eq_ignore_ascii_case("user") {
                if !users_written {
                    user_lines(&mut out);
                    users_written = true;
                }
                continue;
            }
            if !line.starts_with('#') {
                if let Some(s) = setting(name) {
                    if seen.insert(s.name) {
                        out.push_str(&format!("{} {}\n", s.name, quote(self.get(s.name))));
                    }
                    continue;
                }
            }
            out.push_str(raw);
            out.push('\n');
        }
        let mut header = false;
        for s in SETTINGS {
            let default = normalize(s, s.default).unwrap_or_default();
            if !seen.contains(s.name) && self.get(s.name) != default {
                if !header {
                    out.push_str("\n# Generated by CONFIG REWRITE\n");
                    header = true;
                }
                out.push_str(&format!("{} {}\n", s.name, quote(self.get(s.name))));
            }
        }
        if !users_written && !self.users.is_empty() {
            if !header {
                out.push_str("\n# Generated by CONFIG REWRITE\n");
            }
            user_lines(&mut out);
        }
        out
    }
}

/// Redis's command line as config lines (its `main`): `--name` starts a line, every other
/// argument is appended to it quoted, so `--port 6379 6380` is the line `port "6379" "6380"`
/// (and an error). An argument holding both, `"--maxmemory 700mb"`, is a whole line. A name
/// with no value yet takes the next argument as its value even if it starts with `--`
/// (`--logfile --my--file`), except that `--save` followed by an option, or last, is `save ""`.
fn args_to_lines(args: &[String]) -> String {
    let mut out = String::new();
    let mut value_given = true;
    for (j, arg) in args.iter().enumerate() {
        match arg.strip_prefix("--") {
            Some(name) if value_given => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(name);
                out.push(' ');
                let words = split_args(arg.as_bytes()).map_or(0, |w| w.len());
                value_given = words != 1;
                if words == 1 && arg.eq_ignore_ascii_case("--save") {
                    match args.get(j + 1) {
                        Some(next) if next.starts_with("--") => {
                            out.push_str("\"\"");
                            value_given = true;
                        }
                        None => out.push_str("\"\""),
                        Some(_) => {}
                    }
                }
            }
            _ => {
                crate::util::sds::repr(&mut out, arg.as_bytes());
                out.push(' ');
                value_given = true;
            }
        }
    }
    out
}

fn quote(v: &str) -> String {
    if v.is_empty() || v.contains(['"', '\'', '\\']) {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        v.to_string()
    }
}

fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("rewrite.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {

    #[test]
    fn shutdown_flags_as_redis() {
        assert_eq!(parse_shutdown_flags("default").unwrap(), "default");
        assert_eq!(parse_shutdown_flags("NOW nosave").unwrap(), "nosave now");
        assert_eq!(parse_shutdown_flags("default force").unwrap(), "force");
        assert!(parse_shutdown_flags("save nosave").is_err());
        assert!(parse_shutdown_flags("later").is_err());
        assert!(parse_shutdown_flags("").is_err());
        assert!(shutdown_saves("save", ""));
        assert!(!shutdown_saves("nosave now", "900 1"));
        assert!(shutdown_saves("default", "900 1"));
        assert!(!shutdown_saves("default", ""));
    }
    use super::*;

    /// Redis's sdstemplate and validateProcTitleTemplate cases.
    #[test]
    fn proc_title_template_as_redis() {
        let var = |n: &str| match n {
            "title" => Some("srv".to_string()),
            "port" => Some("6379".to_string()),
            "server-mode" => Some(String::new()),
            _ => None,
        };
        assert_eq!(
            expand_proc_title("{title} {port} {server-mode}", &var).as_deref(),
            Some("srv 6379")
        );
        assert_eq!(
            expand_proc_title("  {{title}} {{ x ", &var).as_deref(),
            Some("{title}} { x")
        );
        for bad in ["{title", "a {", "{nosuch}", "{}"] {
            assert_eq!(expand_proc_title(bad, &var), None, "{bad}");
        }
        let s = setting("proc-title-template").unwrap();
        assert_eq!(
            normalize(s, "--my--title--template").as_deref(),
            Ok("--my--title--template")
        );
        assert!(normalize(
            s,
            "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file}"
        )
        .is_ok());
        // Empty once expanded (the title is empty when Redis checks): refused, as Redis.
        for bad in ["{invalid-var}", "{title}", " {server-mode} ", "", "{title"] {
            let e = normalize(s, bad).unwrap_err();
            assert!(e.contains("template format is invalid"), "{bad}: {e}");
        }
    }

    #[test]
    fn oom_and_client_memory_settings_are_checked_as_redis() {
        let adj = setting("oom-score-adj").unwrap();
        assert_eq!(normalize(adj, "relative").as_deref(), Ok("yes"));
        assert_eq!(normalize(adj, "ABSOLUTE").as_deref(), Ok("absolute"));
        assert!(normalize(adj, "maybe").is_err());
        let vals = setting("oom-score-adj-values").unwrap();
        assert_eq!(normalize(vals, " -5  0 2000").as_deref(), Ok("-5 0 2000"));
        assert_eq!(
            normalize(vals, "1 2").unwrap_err(),
            "wrong number of arguments"
        );
        for bad in ["1 2 2001", "1 x 3", "1 2 3.0"] {
            assert!(
                normalize(vals, bad)
                    .unwrap_err()
                    .contains("between -2000 and 2000"),
                "{bad}"
            );
        }
        assert_eq!(oom_score_adj_values("1 -2 3"), [1, -2, 3]);
        let mmc = setting("maxmemory-clients").unwrap();
        for ok in ["0", "0%", "0mb"] {
            assert_eq!(normalize(mmc, ok).as_deref(), Ok("0"), "{ok}");
        }
        assert_eq!(
            normalize(mmc, "200%").unwrap_err(),
            "percentage argument must be less or equal to 100"
        );
        assert!(normalize(mmc, "10%")
            .unwrap_err()
            .contains("client eviction is not available"));
        assert!(normalize(mmc, "1mb")
            .unwrap_err()
            .contains("client eviction is not available"));
        assert_eq!(
            normalize(mmc, "-1%").unwrap_err(),
            "argument must be a memory or percent value"
        );
        let mut c = Config::default();
        c.load_text("oom-score-adj-values 1 2 3\njemalloc-bg-thread yes\n")
            .unwrap();
        assert_eq!(c.get("oom-score-adj-values"), "1 2 3");
        assert_eq!(c.ignored, ["jemalloc-bg-thread"]);
    }

    #[test]
    fn every_default_is_valid() {
        for s in SETTINGS {
            assert!(normalize(s, s.default).is_ok(), "{}", s.name);
        }
    }

    /// A string's length is kept in 32 bits, so no client may send a longer one.
    #[test]
    fn bulk_len_stays_within_what_a_string_holds() {
        let s = setting("proto-max-bulk-len").unwrap();
        assert_eq!(normalize(s, "4294967295").as_deref(), Ok("4294967295"));
        assert_eq!(normalize(s, "1mb").as_deref(), Ok("1048576"));
        for bad in ["4gb", "5gb", "1000", "x"] {
            assert!(normalize(s, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shipped_conf_documents_every_setting_with_its_default() {
        let text = include_str!("../../conf/tidecache.conf");
        for s in SETTINGS {
            let line = if s.default.is_empty() {
                format!("{} \"\"", s.name)
            } else {
                format!("{} {}", s.name, s.default)
            };
            assert!(
                text.lines()
                    .any(|l| l.trim_start_matches("# ").trim() == line),
                "conf/tidecache.conf lacks the line '{line}'"
            );
        }
        let mut c = Config::default();
        c.load_text(text).unwrap();
    }

    #[test]
    fn ignored_settings_are_accepted_once_and_named() {
        for (name, _) in IGNORED {
            assert!(
                setting(name).is_none(),
                "{name} is a setting now: drop it from IGNORED"
            );
        }
        let mut c = Config::default();
        c.load_text("always-show-logo yes\ndaemonize no\npidfile /var/run/redis.pid\nALWAYS-show-logo no\nport 7000\n")
            .unwrap();
        assert_eq!(c.ignored, ["always-show-logo", "daemonize", "pidfile"]);
        assert_eq!(c.get("port"), "7000");
        let e = Config::default().load_text("daemonize yes").unwrap_err();
        assert!(e.contains("'daemonize yes' is not available"), "{e}");
        // Bad schedules and unknown settings stop the start.
        for line in ["save 900", "save 0 1", "nosuch 1"] {
            assert!(Config::default().load_text(line).is_err(), "{line}");
        }
        let c = Config::from_args(&["--unixsocket".into(), "/tmp/s".into()]).unwrap();
        assert!(c.ignored.is_empty());
        assert_eq!(c.get("unixsocket"), "/tmp/s");
        let conf = include_str!("../../conf/tidecache.conf").replace("\n# ", " ");
        for (name, _) in IGNORED {
            assert!(
                conf.contains(name),
                "conf/tidecache.conf does not list {name}"
            );
        }
    }

    /// Redis's default.conf for its tests has `save 900 1`, and the runner writes an
    /// override `save ""` as a bare `save `: lines add up, an empty one clears.
    #[test]
    fn save_lines_of_the_test_suite_start() {
        let mut c = Config::default();
        c.load_text("save 900 1\nsave 100   100\nbind \nport 7000\n")
            .unwrap();
        assert_eq!(c.get("save"), "900 1 100 100");
        assert_eq!(c.get("bind"), "");
        assert!(c.ignored.is_empty());
        let mut c = Config::default();
        c.load_text("save 900 1\nsave \n").unwrap();
        assert_eq!(c.get("save"), "");
        assert_eq!(save_schedule("900 1 100 100"), [(900, 1), (100, 100)]);
        for bad in [
            "save 900",
            "save 0 1",
            "save 1 -1",
            "save x 1",
            "port",
            "logfile",
        ] {
            let e = Config::default().load_text(bad).unwrap_err();
            assert!(e.contains("FATAL CONFIG FILE ERROR"), "{bad}: {e}");
        }
        let s = setting("save").unwrap();
        assert_eq!(
            normalize(s, " 900  1 300 10").as_deref(),
            Ok("900 1 300 10")
        );
        assert!(normalize(s, "900").is_err());
    }

    /// The cases of Redis's tests/unit/introspection.tcl "redis-server command line arguments".
    #[test]
    fn command_line_is_read_as_redis_reads_it() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let lines = |a: &[&str]| args_to_lines(&args(a));
        assert_eq!(
            lines(&["--port", "6379", "6380"]),
            "port \"6379\" \"6380\" "
        );
        assert_eq!(
            lines(&["--port", "--loglevel", "verbose"]),
            "port \"--loglevel\" \"verbose\" "
        );
        assert_eq!(
            lines(&["--save", "--loglevel", "verbose"]),
            "save \"\"\nloglevel \"verbose\" "
        );
        assert_eq!(
            lines(&["--loglevel", "verbose", "--save"]),
            "loglevel \"verbose\" \nsave \"\""
        );
        assert_eq!(
            lines(&["--maxmemory 700mb", "x\"\u{e9}"]),
            "maxmemory 700mb \"x\\\"\\xc3\\xa9\" "
        );
        let fails = |a: &[&str], why: &str| {
            let e = Config::from_args(&args(a)).unwrap_err();
            assert!(e.contains(why), "{a:?}: {e}");
        };
        fails(&["--port"], "'port' wrong number of arguments");
        // A setting of several words with none: its own check answers, as Redis's MULTI_ARG.
        fails(
            &["--shutdown-on-sigint"],
            "'shutdown-on-sigint' argument(s) must be one of the following",
        );
        fails(
            &["--port", "6379", "6380"],
            "'port \"6379\" \"6380\"' wrong number of arguments",
        );
        fails(
            &["--port", "--bla", "--loglevel", "verbose"],
            "'port \"--bla\"' argument couldn't be parsed into an integer",
        );
        fails(
            &["--logfile", "--my--log--file", "--loglevel", "--bla"],
            "'loglevel \"--bla\"' argument(s) must be one of the following",
        );
        let c = Config::from_args(&args(&[
            "--maxmemory 700mb",
            "--maxmemory-policy volatile-lru",
            "--logfile",
            "--my--log--file",
            "--save",
            "--requirepass",
            "a b\"c",
        ]))
        .unwrap();
        assert_eq!(c.get("maxmemory"), "734003200");
        assert_eq!(c.get("maxmemory-policy"), "volatile-lru");
        assert_eq!(c.get("logfile"), "--my--log--file");
        assert_eq!(c.get("save"), "");
        assert_eq!(c.get("requirepass"), "a b\"c");
    }

    #[test]
    fn args_override_file_and_rewrite_keeps_comments() {
        let mut c = Config::default();
        c.load_text("# hello\nport 7000\nhz 20\n").unwrap();
        assert_eq!(c.get("port"), "7000");
        let c2 = Config::from_args(&[
            "--hz".into(),
            "30".into(),
            "--bind".into(),
            "127.0.0.1".into(),
            "::1".into(),
        ])
        .unwrap();
        assert_eq!(c2.get("hz"), "30");
        assert_eq!(c2.get("bind"), "127.0.0.1 ::1");
        c.set_normalized("maxmemory", "100".into());
        let t = c.rewritten_text("# hello\nport 7000\nhz 20\nhz 21\n");
        assert_eq!(
            t,
            "# hello\nport 7000\nhz 20\n\n# Generated by CONFIG REWRITE\nmaxmemory 100\n"
        );
        assert!(Config::default().load_text("nosuch 1").is_err());
        assert_eq!(
            normalize(setting("notify-keyspace-events").unwrap(), "KEA").unwrap(),
            "AKE"
        );
    }
}
