//! The client matrix: general-purpose Redis clients, installed from their package
//! registries and unmodified, against the real server. Each test starts the binary and runs
//! one client's script (tests/clients/matrix/, tests/clients/node-matrix/) with its port; a
//! script checks what the server answered and exits non-zero listing what failed. The
//! `redis` crate's checks are Rust, in this file.
//!
//! - redis-py 8, sync and asyncio (tests/clients/requirements.txt pins it);
//! - ioredis 6 and node-redis 5 (tests/clients/node-matrix, pinned by its lock file and
//!   installed with `npm ci` when its node_modules are missing);
//! - the `redis` crate: multiplexed connection and ConnectionManager;
//! - redis-cli scripted (`--pipe`, `-3`, `--scan`, `--bigkeys`, `--memkeys`, `--latency`).
//!
//! A client that can't run here (python3, node or redis-cli missing, a package not
//! installed) prints a NOTICE and passes, except under CI (`CI` set), where `.ci/run`
//! installs them all: there it fails.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{run_bounded, TestServer};

/// The scripts take a few seconds; this only catches one that hangs.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

fn clients_dir(sub: &str) -> PathBuf {
    [env!("CARGO_MANIFEST_DIR"), "tests", "clients", sub]
        .iter()
        .collect()
}

/// Fails under CI, prints a NOTICE elsewhere; `true` when the caller should go on.
fn available(what: &str, missing: Option<String>) -> bool {
    let Some(why) = missing else { return true };
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} is needed under CI (.ci/run installs it): {why}"
    );
    eprintln!("NOTICE: {what} skipped: {why}");
    false
}

fn run_against_server(name: &str, mut cmd: Command) {
    let server = TestServer::start(&[]);
    cmd.arg(server.port.to_string());
    let (ok, output, secs) = run_bounded(cmd, SCRIPT_TIMEOUT);
    eprintln!("{name} ({secs:.1} s):\n{output}");
    assert!(ok, "{name} failed against tidecache:\n{output}");
}

// ---------------------------------------------------------------------------------------
// redis-py

/// `Some(reason)` when python3 or redis-py 8 can't be imported.
fn redis_py_missing() -> Option<String> {
    let probe = "import redis, redis.asyncio; from redis.cache import CacheConfig; \
                 assert int(redis.__version__.split('.')[0]) >= 8, redis.__version__";
    match Command::new("python3")
        .args(["-c", probe])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Err(e) => Some(format!("python3 not runnable ({e})")),
        Ok(o) if !o.status.success() => Some(format!(
            "redis-py 8 not importable: {} (python3 -m pip install -r tests/clients/requirements.txt)",
            String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
        )),
        Ok(_) => None,
    }
}

fn run_python(script: &str) {
    if !available(script, redis_py_missing()) {
        return;
    }
    let mut cmd = Command::new("python3");
    cmd.arg(clients_dir("matrix").join(script))
        // Keep the source tree free of __pycache__ (common.py is imported).
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_against_server(script, cmd);
}

/// redis-py 8 sync: RESP3 handshake and types, WATCH/MULTI with a retry after another
/// client's write, errors inside MULTI, pubsub over RESP2 and RESP3, the client-side cache
/// serving a repeated GET and DOC.FINDONE without a round trip until another client's
/// writes invalidate them, and DOC.* through `execute_command` (a TTL index included).
#[test]
fn redis_py_sync() {
    run_python("redis_py_sync.py");
}

/// redis-py 8 asyncio: RESP3, WATCH/MULTI retry and 50 concurrent WATCH increments, pubsub,
/// concurrent DOC.* commands.
#[test]
fn redis_py_asyncio() {
    run_python("redis_py_asyncio.py");
}

// ---------------------------------------------------------------------------------------
// Node: ioredis 6 and node-redis 5

/// `Some(reason)` when Node or the project's packages are not available. Installs them with
/// `npm ci` (the lock file) when node_modules is missing.
fn node_matrix_missing() -> Option<String> {
    let dir = clients_dir("node-matrix");
    if let Err(e) = Command::new("node").arg("--version").output() {
        return Some(format!("node not runnable ({e})"));
    }
    let installed = ["ioredis", "redis"].iter().all(|p| {
        dir.join("node_modules")
            .join(p)
            .join("package.json")
            .exists()
    });
    if installed {
        return None;
    }
    let mut npm = Command::new("npm");
    npm.args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir);
    let (ok, output, _) = run_bounded(npm, SCRIPT_TIMEOUT);
    (!ok).then(|| format!("npm ci in tests/clients/node-matrix failed: {output}"))
}

fn run_node(script: &str) {
    if !available(script, node_matrix_missing()) {
        return;
    }
    let mut node = Command::new("node");
    node.current_dir(clients_dir("node-matrix")).arg(script);
    run_against_server(script, node);
}

/// ioredis 6: HELLO 3 by default (RESP3 maps and doubles with replyMapping "resp3"),
/// multi/exec with an error in its slot and a WATCH retry, a 1000-command pipeline, pubsub
/// over RESP2 and RESP3 (commands on the subscribed RESP3 connection), `call` for DOC.*.
#[test]
fn ioredis() {
    run_node("ioredis_matrix.js");
}

/// node-redis 5: `RESP: 3`, multi/exec with WatchError and a retry, pubsub over RESP2 and
/// RESP3, `sendCommand` for DOC.*, and its client-side cache: a repeated GET and a
/// repeated DOC.FINDONE (a CACHEABLE module command) reach the server once and another
/// client's SET and DOC.UPDATE invalidate them.
#[test]
fn node_redis() {
    run_node("node_redis_matrix.js");
}

// ---------------------------------------------------------------------------------------
// redis-cli

/// redis-cli scripted: `--pipe` of 100k SETs then DBSIZE, `-3` printing RESP3 maps, a
/// double and a set, `--scan --pattern`, `--bigkeys`, `--memkeys`, `--latency` and a
/// bounded `--latency-history`, each checked on its output (tests/clients/matrix/redis_cli.py,
/// which needs python3 but no client library).
#[test]
fn redis_cli_scripted() {
    let missing = match Command::new("redis-cli").arg("--version").output() {
        Err(e) => Some(format!("redis-cli not runnable ({e})")),
        Ok(_) => match Command::new("python3").arg("--version").output() {
            Err(e) => Some(format!("python3 not runnable ({e})")),
            Ok(_) => None,
        },
    };
    if !available("redis_cli.py", missing) {
        return;
    }
    let mut cmd = Command::new("python3");
    cmd.arg(clients_dir("matrix").join("redis_cli.py"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_against_server("redis_cli.py", cmd);
}

// ---------------------------------------------------------------------------------------
// The `redis` crate (async, tokio)

mod redis_crate {
    use super::support::TestServer;
    use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
    use redis::{AsyncCommands, AsyncConnectionConfig, PushInfo, PushKind, Value};
    use std::time::Duration;
    use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

    fn client(port: u16, resp3: bool) -> redis::Client {
        let proto = if resp3 { "?protocol=resp3" } else { "" };
        redis::Client::open(format!("redis://127.0.0.1:{port}/{proto}")).expect("client")
    }

    async fn multiplexed(port: u16, resp3: bool) -> MultiplexedConnection {
        client(port, resp3)
            .get_multiplexed_async_connection()
            .await
            .expect("connect")
    }

    /// The next pubsub message (kind Message/PMessage) pushed within 2 s, skipping the
    /// subscription confirmations.
    async fn next_message(rx: &mut UnboundedReceiver<PushInfo>) -> Option<PushInfo> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let push = tokio::time::timeout_at(deadline, rx.recv()).await.ok()??;
            if matches!(push.kind, PushKind::Message | PushKind::PMessage) {
                return Some(push);
            }
        }
    }

    fn text(v: &Value) -> String {
        match v {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }

    /// Multiplexed connection: RESP3 types, 200 concurrent INCRs on clones of one
    /// connection, a pipeline, a transaction with WATCH aborted by another client's write
    /// and then retried, RESP3 push pubsub, DOC.* through `redis::cmd`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn multiplexed_connection() {
        let server = TestServer::start(&[]);
        let mut admin = multiplexed(server.port, false).await;
        let mut con = multiplexed(server.port, true).await;

        // RESP3: a map and a double, as redis-server 7 sends them.
        let _: () = con
            .hset_multiple("h", &[("a", "1"), ("b", "2")])
            .await
            .unwrap();
        let map: Value = redis::cmd("HGETALL")
            .arg("h")
            .query_async(&mut con)
            .await
            .unwrap();
        let Value::Map(pairs) = &map else {
            panic!("HGETALL over RESP3 is not a map: {map:?}")
        };
        let mut pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (text(k), text(v))).collect();
        pairs.sort();
        assert_eq!(pairs, [("a".into(), "1".into()), ("b".into(), "2".into())]);
        let _: () = con.zadd("z", "m", 1.5).await.unwrap();
        let score: Value = redis::cmd("ZSCORE")
            .arg("z")
            .arg("m")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(score, Value::Double(1.5));

        // One connection, many callers: replies go back to the right future.
        let futures = (0..200).map(|i| {
            let mut c = con.clone();
            async move {
                let n: i64 = c.incr("hits", 1).await.unwrap();
                let echoed: String = redis::cmd("ECHO")
                    .arg(format!("e{i}"))
                    .query_async(&mut c)
                    .await
                    .unwrap();
                assert_eq!(echoed, format!("e{i}"));
                n
            }
        });
        let mut seen: Vec<i64> = Vec::new();
        for f in futures.collect::<Vec<_>>() {
            seen.push(tokio::spawn(f).await.unwrap());
        }
        seen.sort();
        assert_eq!(
            seen,
            (1..=200).collect::<Vec<i64>>(),
            "each INCR saw its own count"
        );

        // A pipeline.
        let (set, incr, got): (String, i64, String) = redis::pipe()
            .set("p", 10)
            .incr("p", 5)
            .get("p")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!((set.as_str(), incr, got.as_str()), ("OK", 15, "15"));

        // A transaction with WATCH: another client's write between WATCH and EXEC makes
        // EXEC answer nil (None); the retry runs. WATCH needs a connection of its own.
        let mut tx = multiplexed(server.port, true).await;
        let _: () = admin.set("counter", 10).await.unwrap();
        let mut attempts = 0;
        let result: (i64,) = loop {
            attempts += 1;
            let _: () = redis::cmd("WATCH")
                .arg("counter")
                .query_async(&mut tx)
                .await
                .unwrap();
            let n: i64 = tx.get("counter").await.unwrap();
            if attempts == 1 {
                let _: () = admin.set("counter", 100).await.unwrap();
            }
            let r: Option<(i64,)> = redis::pipe()
                .atomic()
                .set("counter", n + 1)
                .ignore()
                .get("counter")
                .query_async(&mut tx)
                .await
                .unwrap();
            if let Some(r) = r {
                break r;
            }
            assert!(attempts < 3, "EXEC kept aborting");
        };
        assert_eq!((attempts, result), (2, (101,)));
        // An error inside MULTI fails the transaction's reply.
        let err = redis::pipe()
            .atomic()
            .set("s", "abc")
            .incr("s", 1)
            .query_async::<(String, i64)>(&mut tx)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not an integer"), "{err}");
        let s: String = tx.get("s").await.unwrap();
        assert_eq!(s, "abc", "the SET before the error ran");

        // Pubsub over RESP3 pushes on a multiplexed connection.
        let (ptx, mut rx) = unbounded_channel();
        let config = AsyncConnectionConfig::new().set_push_sender(ptx);
        let mut sub = client(server.port, true)
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        sub.subscribe("news.tech").await.unwrap();
        sub.psubscribe("news.*").await.unwrap();
        let receivers: i64 = admin.publish("news.tech", "hello").await.unwrap();
        assert_eq!(receivers, 2);
        let mut got = vec![];
        for _ in 0..2 {
            let m = next_message(&mut rx).await.expect("a message");
            got.push((m.kind.clone(), m.data.iter().map(text).collect::<Vec<_>>()));
        }
        got.sort_by_key(|(k, _)| *k == PushKind::PMessage);
        assert_eq!(
            got,
            [
                (PushKind::Message, vec!["news.tech".into(), "hello".into()]),
                (
                    PushKind::PMessage,
                    vec!["news.*".into(), "news.tech".into(), "hello".into()]
                ),
            ]
        );
        // The subscribed RESP3 connection still runs commands.
        let v: String = sub.get("s").await.unwrap();
        assert_eq!(v, "abc");
        sub.unsubscribe("news.tech").await.unwrap();
        sub.punsubscribe("news.*").await.unwrap();
        let receivers: i64 = admin.publish("news.tech", "late").await.unwrap();
        assert_eq!(receivers, 0);

        // DOC.* through redis::cmd.
        let ids: Vec<String> = redis::cmd("DOC.INSERT")
            .arg("users")
            .arg(r#"{"_id":1,"name":"ada","age":36}"#)
            .arg(r#"{"_id":2,"name":"bob","age":17}"#)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(ids, ["1", "2"]);
        let found: Vec<String> = redis::cmd("DOC.FIND")
            .arg("users")
            .arg(r#"{"age":{"$gte":18}}"#)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(found, [r#"{"_id":1,"name":"ada","age":36}"#]);
        let upd: (i64, i64, Option<String>) = redis::cmd("DOC.UPDATE")
            .arg("users")
            .arg(r#"{"_id":5}"#)
            .arg(r#"{"$set":{"name":"eve"}}"#)
            .arg("UPSERT")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(upd, (0, 0, Some("5".into())));
        let one: Option<String> = redis::cmd("DOC.FINDONE")
            .arg("users")
            .arg(r#"{"_id":5}"#)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(one.as_deref(), Some(r#"{"_id":5,"name":"eve"}"#));
        let index: String = redis::cmd("DOC.EXPIREINDEX")
            .arg("users")
            .arg("seen")
            .arg(0)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(index, "seen_1");
        let deleted: i64 = redis::cmd("DOC.DELETE")
            .arg("users")
            .arg("{}")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(deleted, 3);
    }

    /// ConnectionManager: commands, a pipeline, a subscription; `CLIENT KILL` of its
    /// connection from another client; it reconnects by itself (a new client id), the data
    /// is there, and it resubscribes (a PUBLISH reaches it again).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connection_manager_reconnects_after_client_kill() {
        let server = TestServer::start(&[]);
        let mut admin = multiplexed(server.port, false).await;
        let (ptx, mut rx) = unbounded_channel();
        let config = ConnectionManagerConfig::new()
            .set_push_sender(ptx)
            .set_automatic_resubscription()
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let mut manager = ConnectionManager::new_with_config(client(server.port, true), config)
            .await
            .expect("connection manager");

        let _: () = manager.set("k", "v").await.unwrap();
        let (a, b): (String, i64) = redis::pipe()
            .get("k")
            .incr("n", 2)
            .query_async(&mut manager)
            .await
            .unwrap();
        assert_eq!((a.as_str(), b), ("v", 2));
        manager.subscribe("events").await.unwrap();
        let _: i64 = admin.publish("events", "before").await.unwrap();
        let m = next_message(&mut rx)
            .await
            .expect("message before the kill");
        assert_eq!(text(&m.data[1]), "before");

        let id: i64 = redis::cmd("CLIENT")
            .arg("ID")
            .query_async(&mut manager)
            .await
            .unwrap();
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async(&mut admin)
            .await
            .unwrap();
        assert_eq!(killed, 1, "CLIENT KILL ID found the manager's connection");

        // The first command after the kill may fail (the manager learns of the drop from
        // it) and starts the reconnection; the next ones go through the new connection.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let new_id = loop {
            let r: redis::RedisResult<i64> = redis::cmd("CLIENT")
                .arg("ID")
                .query_async(&mut manager)
                .await;
            if let Ok(n) = r {
                break n;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no reconnection: {r:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_ne!(new_id, id, "a new connection");
        let v: String = manager.get("k").await.unwrap();
        assert_eq!(v, "v");
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut admin)
            .await
            .unwrap();
        assert!(
            !clients.contains(&format!("id={id} ")),
            "the killed client is gone:\n{clients}"
        );

        // Resubscribed on the new connection.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let n: i64 = admin.publish("events", "after").await.unwrap();
            if n == 1 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "never resubscribed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let m = loop {
            let m = next_message(&mut rx)
                .await
                .expect("message after the reconnect");
            if text(&m.data[1]) == "after" {
                break m;
            }
        };
        assert_eq!(text(&m.data[0]), "events");
    }
}
