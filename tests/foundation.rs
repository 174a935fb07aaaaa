//! The server foundation, checked with the `redis` crate and raw TCP against the real binary.

mod support;

use redis::Value;
use support::{err_text, resp, TestServer};

#[test]
fn ping_echo_and_errors() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let msg: String = redis::cmd("PING").arg("hi").query(&mut c).unwrap();
    assert_eq!(msg, "hi");
    let echo: Vec<u8> = redis::cmd("ECHO")
        .arg(&b"a\x00b"[..])
        .query(&mut c)
        .unwrap();
    assert_eq!(echo, b"a\x00b");
    assert_eq!(
        err_text(redis::cmd("ECHO").query::<String>(&mut c)),
        "ERR wrong number of arguments for 'echo' command"
    );
    let mut raw = s.raw();
    raw.roundtrip(
        &resp(&["foo", "a", "b"]),
        b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
    );
    raw.roundtrip(
        &resp(&["FOO"]),
        b"-ERR unknown command 'FOO', with args beginning with: \r\n",
    );
    raw.roundtrip(
        &resp(&["client", "nosuch"]),
        b"-ERR unknown subcommand 'nosuch'. Try CLIENT HELP.\r\n",
    );
    raw.roundtrip(
        &resp(&["client", "setname"]),
        b"-ERR wrong number of arguments for 'client|setname' command\r\n",
    );
    // redis-py 8 sends this during its handshake; the error must not break the connection.
    raw.roundtrip(
        &resp(&["CLIENT", "MAINT_NOTIFICATIONS", "ON"]),
        b"-ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.\r\n",
    );
    raw.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
}

#[test]
fn select_range() {
    let s = TestServer::start(&[]);
    let mut raw = s.raw();
    raw.roundtrip(&resp(&["SELECT", "15"]), b"+OK\r\n");
    raw.roundtrip(
        &resp(&["SELECT", "16"]),
        b"-ERR DB index is out of range\r\n",
    );
    raw.roundtrip(
        &resp(&["SELECT", "-1"]),
        b"-ERR DB index is out of range\r\n",
    );
    raw.roundtrip(
        &resp(&["SELECT", "x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    let s4 = TestServer::start(&["--databases", "4"]);
    let mut raw = s4.raw();
    raw.roundtrip(
        &resp(&["SELECT", "4"]),
        b"-ERR DB index is out of range\r\n",
    );
}

#[test]
fn hello_3_and_resp3_shapes() {
    let s = TestServer::start(&[]);
    let mut raw = s.raw();
    // RESP2 shapes first.
    raw.roundtrip(&resp(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    raw.roundtrip(
        &resp(&["CONFIG", "GET", "hz"]),
        b"*2\r\n$2\r\nhz\r\n$2\r\n10\r\n",
    );
    raw.send(&resp(&["HELLO", "3"]));
    let reply = String::from_utf8(raw.read_n(1)).unwrap();
    assert_eq!(reply, "%");
    // The rest of the map; then RESP3 shapes.
    let rest = raw.read_until(b"modules\r\n*0\r\n");
    let text = String::from_utf8_lossy(&rest);
    for field in [
        "server",
        "version",
        "proto\r\n:3",
        "id\r\n:",
        "mode\r\n$10\r\nstandalone",
        "role\r\n$6\r\nmaster",
        "modules",
    ] {
        assert!(text.contains(field), "HELLO 3 lacks {field}: {text}");
    }
    raw.roundtrip(&resp(&["CLIENT", "GETNAME"]), b"_\r\n");
    raw.roundtrip(
        &resp(&["CONFIG", "GET", "hz"]),
        b"%1\r\n$2\r\nhz\r\n$2\r\n10\r\n",
    );
    raw.roundtrip(
        &resp(&["HELLO", "4"]),
        b"-NOPROTO unsupported protocol version\r\n",
    );
    raw.roundtrip(
        &resp(&["HELLO", "x"]),
        b"-ERR Protocol version is not an integer or out of range\r\n",
    );
    raw.roundtrip(&resp(&["RESET"]), b"+RESET\r\n");
    raw.roundtrip(&resp(&["CLIENT", "GETNAME"]), b"$-1\r\n");
}

#[test]
fn redis_rs_pipelined_handshake_and_resp3_client() {
    let s = TestServer::start(&[]);
    // HELLO, SELECT and CLIENT SETINFO in one write, as redis-rs sends them.
    let mut raw = s.raw();
    let mut batch = resp(&["HELLO", "3"]);
    batch.extend(resp(&["SELECT", "2"]));
    batch.extend(resp(&["CLIENT", "SETINFO", "LIB-NAME", "redis-rs"]));
    batch.extend(resp(&["CLIENT", "SETINFO", "LIB-VER", "1.0"]));
    batch.extend(resp(&["PING"]));
    raw.send(&batch);
    raw.read_until(b"+OK\r\n+OK\r\n+OK\r\n+PONG\r\n");
    // The real client library, with a database in the URL.
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/3?protocol=resp3", s.port)).unwrap();
    let mut c = client.get_connection().unwrap();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
    assert!(info.contains("db=3"), "{info}");
    assert!(info.contains("resp=3"), "{info}");
}

#[test]
fn config_get_set_and_rewrite() {
    let dir = std::env::temp_dir().join(format!("tidecache-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("t.conf");
    std::fs::write(&conf, "# my settings\nhz 20\nmaxmemory-samples 7\n").unwrap();
    let s = TestServer::start_with(Some(conf.to_str().unwrap()), &["--maxmemory-samples", "9"]);
    let mut c = s.conn();
    let get = |c: &mut redis::Connection, k: &str| -> Vec<String> {
        redis::cmd("CONFIG").arg("GET").arg(k).query(c).unwrap()
    };
    assert_eq!(get(&mut c, "hz"), vec!["hz", "20"]);
    assert_eq!(
        get(&mut c, "maxmemory-samples"),
        vec!["maxmemory-samples", "9"],
        "command line overrides file"
    );
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("100mb")
        .query(&mut c)
        .unwrap();
    assert_eq!(get(&mut c, "maxmemory"), vec!["maxmemory", "104857600"]);
    let many = get(&mut c, "max*");
    assert!(
        many.chunks(2).any(|p| p[0] == "maxmemory-policy"),
        "{many:?}"
    );
    assert!(many.chunks(2).all(|p| p[0].starts_with("max")), "{many:?}");
    assert_eq!(
        err_text(redis::cmd("CONFIG").arg("SET").arg("databases").arg("4").query::<()>(&mut c)),
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    );
    // All or nothing: a bad second value leaves the first unchanged.
    assert!(redis::cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg("30")
        .arg("maxmemory-policy")
        .arg("bogus")
        .query::<()>(&mut c)
        .is_err());
    assert_eq!(get(&mut c, "hz"), vec!["hz", "20"]);
    assert!(err_text(
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("nosuch")
            .arg("1")
            .query::<()>(&mut c)
    )
    .starts_with("ERR Unknown option"));
    assert!(redis::cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg("abc")
        .query::<()>(&mut c)
        .is_err());
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("ttl-monitor-period")
        .arg("5")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG").arg("REWRITE").query(&mut c).unwrap();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.starts_with("# my settings\nhz 20\nmaxmemory-samples 9\n"),
        "{text}"
    );
    assert!(text.contains("ttl-monitor-period 5"), "{text}");
    assert!(text.contains("maxmemory 104857600"), "{text}");
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Redis 7's guards: `dir` and `dbfilename` change only where `enable-protected-configs`
/// allows (default no), and a test knob (`key-load-delay`) answers CONFIG GET only when named.
#[test]
fn protected_and_hidden_settings() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let e = err_text(support::q::<()>(&mut c, &["CONFIG", "SET", "dir", "/tmp"]));
    assert_eq!(
        e,
        "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
    );
    // Nothing of the refused CONFIG SET changed.
    let e = err_text(support::q::<()>(
        &mut c,
        &["CONFIG", "SET", "hz", "50", "dbfilename", "x.rdb"],
    ));
    assert!(
        e.contains("'dbfilename') - can't set protected config"),
        "{e}"
    );
    let hz: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hz")
        .query(&mut c)
        .unwrap();
    assert_eq!(hz, ["hz", "10"]);
    let all: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(&mut c)
        .unwrap();
    assert!(!all.iter().any(|n| n == "key-load-delay"));
    let named: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("key-load-delay")
        .query(&mut c)
        .unwrap();
    assert_eq!(named, ["key-load-delay", "0"]);
    let open = TestServer::start(&["--enable-protected-configs", "local"]);
    let mut c = open.conn();
    let dir = std::env::temp_dir();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("dir")
        .arg(dir.to_str().unwrap())
        .query(&mut c)
        .unwrap();
}

#[test]
fn command_table_introspection() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    assert!(count >= 25, "{count}");
    let all: Vec<Value> = redis::cmd("COMMAND").query(&mut c).unwrap();
    assert_eq!(all.len() as i64, count);
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("echo")
        .arg("nosuchcmd")
        .arg("client|id")
        .query(&mut c)
        .unwrap();
    assert_eq!(info.len(), 3);
    let Value::Array(echo) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(echo[0], Value::BulkString(b"echo".to_vec()));
    assert_eq!(echo[1], Value::Int(2));
    assert_eq!(info[1], Value::Nil);
    let Value::Array(id) = &info[2] else {
        panic!("{info:?}")
    };
    assert_eq!(id[0], Value::BulkString(b"client|id".to_vec()));
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("echo")
        .query(&mut c)
        .unwrap();
    let text = format!("{docs:?}");
    for k in [
        "summary",
        "since",
        "group",
        "connection",
        "arguments",
        "message",
    ] {
        assert!(text.contains(k), "COMMAND DOCS echo lacks {k}: {text}");
    }
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("MEMORY")
        .arg("USAGE")
        .arg("foo")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, vec!["foo"]);
    assert_eq!(
        err_text(
            redis::cmd("COMMAND")
                .arg("GETKEYS")
                .arg("PING")
                .query::<Vec<String>>(&mut c)
        ),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        err_text(
            redis::cmd("COMMAND")
                .arg("GETKEYS")
                .arg("NOSUCH")
                .arg("x")
                .query::<Vec<String>>(&mut c)
        ),
        "ERR Invalid command specified"
    );
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains(&"ping".to_string()));
    let filtered: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("PATTERN")
        .arg("cl*")
        .query(&mut c)
        .unwrap();
    // Subcommands are listed and matched by their full names, as Redis 7 does.
    assert_eq!(filtered[0], "client");
    assert!(filtered.contains(&"client|id".to_string()));
    assert!(filtered.contains(&"cluster|info".to_string()));
    assert!(filtered
        .iter()
        .all(|n| n.starts_with("client") || n.starts_with("cluster")));
    assert!(list.contains(&"config|get".to_string()));
}

#[test]
fn client_commands() {
    let s = TestServer::start(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("alpha")
        .query(&mut a)
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("beta")
        .query(&mut b)
        .unwrap();
    let name: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut a).unwrap();
    assert_eq!(name, "alpha");
    assert!(redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("has space")
        .query::<()>(&mut a)
        .is_err());
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut a).unwrap();
    assert!(
        list.contains("name=alpha") && list.contains("name=beta"),
        "{list}"
    );
    assert_eq!(list.lines().count(), 2, "{list}");
    let b_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut b).unwrap();
    let only_b: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("ID")
        .arg(b_id)
        .query(&mut a)
        .unwrap();
    assert!(only_b.contains("name=beta") && !only_b.contains("name=alpha"));
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(b_id)
        .query(&mut a)
        .unwrap();
    assert_eq!(killed, 1);
    assert!(
        redis::cmd("PING").query::<String>(&mut b).is_err(),
        "killed client still served"
    );
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(b_id)
        .query(&mut a)
        .unwrap();
    assert_eq!(killed, 0);

    // CLIENT REPLY: OFF and SKIP drop replies, ON restores them.
    let mut raw = s.raw();
    let mut batch = resp(&["CLIENT", "REPLY", "OFF"]);
    batch.extend(resp(&["ECHO", "hidden"]));
    batch.extend(resp(&["CLIENT", "REPLY", "ON"]));
    batch.extend(resp(&["CLIENT", "REPLY", "SKIP"]));
    batch.extend(resp(&["ECHO", "skipped"]));
    batch.extend(resp(&["ECHO", "shown"]));
    raw.send(&batch);
    let expected = b"+OK\r\n$5\r\nshown\r\n";
    assert_eq!(
        String::from_utf8_lossy(&raw.read_n(expected.len())),
        String::from_utf8_lossy(expected)
    );
}

#[test]
fn inline_commands_and_long_pipeline() {
    let s = TestServer::start(&[]);
    let mut raw = s.raw();
    raw.roundtrip(b"PING\r\n", b"+PONG\r\n");
    raw.roundtrip(b"ECHO \"a b\"\n", b"$3\r\na b\r\n");
    raw.roundtrip(b"\r\nPING\r\n", b"+PONG\r\n");
    // As in Redis, a NUL ends an inline line (this once made the splitter spin).
    raw.roundtrip(b"PING\0junk\r\n", b"+PONG\r\n");

    let mut c = s.conn();
    let mut p = redis::pipe();
    for _ in 0..100_000 {
        p.cmd("PING");
    }
    p.cmd("ECHO").arg("last");
    let replies: Vec<String> = p.query(&mut c).unwrap();
    assert_eq!(replies.len(), 100_001);
    assert!(replies[..100_000].iter().all(|r| r == "PONG"));
    assert_eq!(replies[100_000], "last");
}

#[test]
fn protocol_errors_close_only_the_offender() {
    let s = TestServer::start(&["--proto-max-bulk-len", "1mb"]);
    let mut bystander = s.conn();
    let mut raw = s.raw();
    raw.roundtrip(
        b"*abc\r\n",
        b"-ERR Protocol error: invalid multibulk length\r\n",
    );
    assert!(raw.closed());
    // A huge claimed length is refused from its header alone, before the bytes are sent.
    let mut raw = s.raw();
    raw.roundtrip(
        b"*1\r\n$999999999999\r\n",
        b"-ERR Protocol error: invalid bulk length\r\n",
    );
    assert!(raw.closed());
    let mut raw = s.raw();
    raw.roundtrip(
        b"*1\r\n$2000000\r\n",
        b"-ERR Protocol error: invalid bulk length\r\n",
    );
    let mut raw = s.raw();
    raw.roundtrip(
        b"*2\r\n$4\r\nECHO\r\n:1\r\n",
        b"-ERR Protocol error: expected '$', got ':'\r\n",
    );
    let mut raw = s.raw();
    raw.roundtrip(
        b"ECHO \"unbalanced\r\n",
        b"-ERR Protocol error: unbalanced quotes in request\r\n",
    );
    let pong: String = redis::cmd("PING").query(&mut bystander).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn requirepass_guards_every_command() {
    let s = TestServer::start(&["--requirepass", "secret"]);
    let mut raw = s.raw();
    raw.roundtrip(&resp(&["PING"]), b"-NOAUTH Authentication required.\r\n");
    raw.roundtrip(
        &resp(&["AUTH", "wrong"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    raw.roundtrip(&resp(&["AUTH", "secret"]), b"+OK\r\n");
    raw.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
    // Before authentication, frames are capped as in Redis.
    let mut raw = s.raw();
    raw.roundtrip(
        b"*11\r\n",
        b"-ERR Protocol error: unauthenticated multibulk length\r\n",
    );
    let client = redis::Client::open(format!(
        "redis://:secret@127.0.0.1:{}/?protocol=resp3",
        s.port
    ))
    .unwrap();
    let mut c = client.get_connection().unwrap();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    let unauth = TestServer::start(&[]);
    let mut raw = unauth.raw();
    raw.roundtrip(
        &resp(&["AUTH", "x"]),
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
}

#[test]
fn server_commands() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
    let _: () = redis::cmd("FLUSHDB").query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHALL").arg("ASYNC").query(&mut c).unwrap();
    assert_eq!(
        err_text(redis::cmd("FLUSHALL").arg("BAD").query::<()>(&mut c)),
        "ERR syntax error"
    );
    let t: Vec<String> = redis::cmd("TIME").query(&mut c).unwrap();
    assert_eq!(t.len(), 2);
    assert!(t[0].parse::<u64>().unwrap() > 1_700_000_000);
    assert!(t[1].parse::<u64>().unwrap() < 1_000_000);
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    for needle in [
        "server_name:tidecache",
        "redis_version:7.",
        "loading:0",
        "# Clients",
        "connected_clients:1",
        "# Keyspace",
    ] {
        assert!(info.contains(needle), "INFO lacks {needle}");
    }
    let docs: String = redis::cmd("INFO").arg("documents").query(&mut c).unwrap();
    assert!(docs.starts_with("# Documents\r\n"), "{docs}");
    assert!(!docs.contains("# Server"));
}

#[test]
fn shutdown_command_exits_zero() {
    let mut s = TestServer::start(&[]);
    let mut raw = s.raw();
    raw.send(&resp(&["SHUTDOWN"]));
    assert!(raw.closed());
    assert_eq!(s.wait_exit(), Some(0));
}

#[test]
fn sigterm_exits_zero() {
    let mut s = TestServer::start(&[]);
    let mut c = s.conn();
    let _: String = redis::cmd("PING").query(&mut c).unwrap();
    s.signal("-TERM");
    assert_eq!(s.wait_exit(), Some(0));
}

/// INFO cpu reports the process's CPU time as Redis names it, and it grows with work.
#[test]
fn info_cpu_section() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let read = |c: &mut redis::Connection, f: &str| -> f64 {
        support::info_value(c, "cpu", f)
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0)
    };
    for f in [
        "used_cpu_sys",
        "used_cpu_user",
        "used_cpu_sys_children",
        "used_cpu_user_children",
        "used_cpu_sys_main_thread",
        "used_cpu_user_main_thread",
    ] {
        assert!(read(&mut c, f) >= 0.0, "{f}");
    }
    let before = read(&mut c, "used_cpu_user") + read(&mut c, "used_cpu_sys");
    let mut pipe = redis::pipe();
    for i in 0..20000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let after = read(&mut c, "used_cpu_user") + read(&mut c, "used_cpu_sys");
    assert!(after > before, "{before} -> {after}");
}

#[test]
fn command_getkeysandflags() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let v: Vec<(String, Vec<String>)> = redis::cmd("COMMAND")
        .arg("GETKEYSANDFLAGS")
        .arg("LMPOP")
        .arg("2")
        .arg("a")
        .arg("b")
        .arg("LEFT")
        .query(&mut c)
        .unwrap();
    let flags = vec!["RW".to_string(), "access".into(), "delete".into()];
    assert_eq!(v, vec![("a".into(), flags.clone()), ("b".into(), flags)]);
    let v: Vec<(String, Vec<String>)> = redis::cmd("COMMAND")
        .arg("GETKEYSANDFLAGS")
        .arg("GET")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, vec![("k".into(), vec!["RO".into(), "access".into()])]);
}
