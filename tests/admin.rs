//! The admin port against the real binary: off by default (the process listens on its
//! RESP port only), loopback by default, `/metrics` as Prometheus text whose counters follow
//! the commands run (hits, misses, calls, a collection's documents, TTL deletions), 404 and
//! 405, malformed requests that leave the server serving, a port in use stopping the start,
//! and the status page rendered by headless Chromium with live numbers read from its DOM
//! (screenshot in target/artifacts/status-page.png).
//!
//! Without Chromium (`/usr/bin/chromium`, Debian's package) the browser test prints a NOTICE
//! and passes, except under CI (`CI` set), whose script installs it: there it fails.

mod support;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{err_text, eventually, q, strs, TestServer};

/// A port free now (the kernel's pick), for `--admin-port`: 0 there means off.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn start_admin(extra: &[&str]) -> (TestServer, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["--admin-port", p.as_str()];
    args.extend_from_slice(extra);
    (TestServer::start(&args), port)
}

struct HttpReply {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

/// Sends raw bytes to the admin port and reads the reply until the server closes.
fn http_raw(port: u16, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect admin port");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    // The server may answer and close before it has read everything (an oversized
    // request): what it answered is still read.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

fn http(port: u16, method: &str, path: &str) -> HttpReply {
    let req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    parse_reply(&http_raw(port, req.as_bytes()))
}

fn parse_reply(raw: &[u8]) -> HttpReply {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete HTTP reply");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    HttpReply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A parsed `/metrics` page: (name, sorted labels) → value.
struct Metrics(HashMap<(String, Vec<(String, String)>), f64>);

impl Metrics {
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut l: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.sort();
        self.0.get(&(name.to_string(), l)).copied()
    }

    fn val(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }
}

/// Reads Prometheus's text format 0.0.4 strictly: every sample belongs to a family declared
/// by one `# HELP` and one `# TYPE` line (counter or gauge) before it, a family's samples
/// are contiguous, label values are quoted with escapes, values are numbers.
fn parse_metrics(text: &str) -> Metrics {
    let mut out = HashMap::new();
    let mut helped = HashSet::new();
    let mut typed = HashMap::new();
    let mut finished: HashSet<String> = HashSet::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().expect("name");
            assert!(helped.insert(name.to_string()), "HELP twice for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut w = rest.split(' ');
            let (name, kind) = (w.next().expect("name"), w.next().expect("type"));
            assert!(matches!(kind, "counter" | "gauge"), "{line}");
            assert!(typed.insert(name.to_string(), kind.to_string()).is_none());
            if !current.is_empty() {
                finished.insert(std::mem::take(&mut current));
            }
            current = name.to_string();
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "line {line:?}");
        let (name, labels, value) = match line.find('{') {
            Some(i) => {
                let end = line.rfind('}').expect("closing brace");
                (
                    &line[..i],
                    parse_labels(&line[i + 1..end]),
                    &line[end + 1..],
                )
            }
            None => {
                let (n, v) = line.split_once(' ').expect("name value");
                (n, Vec::new(), v)
            }
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name {name:?}"
        );
        assert_eq!(name, current, "sample outside its family: {line}");
        assert!(!finished.contains(name), "family {name} split");
        assert!(helped.contains(name), "no HELP for {name}");
        let v: f64 = value.trim().parse().unwrap_or_else(|_| panic!("{line}"));
        if typed[name] == "counter" {
            assert!(v >= 0.0, "negative counter: {line}");
        }
        let mut labels = labels;
        labels.sort();
        assert!(
            out.insert((name.to_string(), labels), v).is_none(),
            "duplicate sample {line}"
        );
    }
    Metrics(out)
}

fn parse_labels(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        assert_eq!(chars.next(), Some('"'), "label {key} not quoted in {s}");
        let mut v = String::new();
        loop {
            match chars.next().expect("unterminated label value") {
                '\\' => match chars.next() {
                    Some('n') => v.push('\n'),
                    Some(c) => v.push(c),
                    None => panic!("bad escape"),
                },
                '"' => break,
                c => v.push(c),
            }
        }
        out.push((key, v));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    out
}

fn scrape(port: u16) -> Metrics {
    let r = http(port, "GET", "/metrics");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers.get("content-type").map(String::as_str),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    parse_metrics(&r.body)
}

/// Ports the process listens on (its sockets, matched in /proc/net/tcp{,6}), with the
/// address each is bound to.
fn listening(pid: u32) -> Vec<(String, u16)> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fds")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().to_string();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut out = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address, state 0A (LISTEN), inode.
            if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                let (addr, port) = f[1].split_once(':').expect("addr:port");
                out.push((
                    addr.to_string(),
                    u16::from_str_radix(port, 16).expect("port"),
                ));
            }
        }
    }
    out
}

#[test]
fn off_by_default_and_not_settable_at_run_time() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "admin-*"]).expect("config get");
    assert_eq!(got, ["admin-port", "0", "admin-bind", "127.0.0.1"]);
    let ports: Vec<u16> = listening(s.child.id()).into_iter().map(|l| l.1).collect();
    assert!(
        !ports.is_empty() && ports.iter().all(|&p| p == s.port),
        "{ports:?}"
    );
    // Start-only: a change is refused (it would do nothing), the value in force is a no-op.
    let e = err_text(q::<()>(&mut c, &["CONFIG", "SET", "admin-port", "24999"]));
    assert!(e.contains("can't set immutable config"), "{e}");
    let e = err_text(q::<()>(&mut c, &["CONFIG", "SET", "admin-bind", "0.0.0.0"]));
    assert!(e.contains("can't set immutable config"), "{e}");
    let _: () = q(&mut c, &["CONFIG", "SET", "admin-port", "0"]).expect("same value");
    let ports: Vec<u16> = listening(s.child.id()).into_iter().map(|l| l.1).collect();
    assert!(ports.iter().all(|&p| p == s.port), "{ports:?}");
}

#[test]
fn loopback_by_default_and_a_port_in_use_stops_the_start() {
    let (s, port) = start_admin(&[]);
    let admin: Vec<(String, u16)> = listening(s.child.id())
        .into_iter()
        .filter(|l| l.1 == port)
        .collect();
    // 127.0.0.1 as /proc/net/tcp writes it (little-endian hex), and nothing on IPv6.
    assert_eq!(admin, [("0100007F".to_string(), port)]);
    let mut c = s.conn();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "admin-port"]).expect("config get");
    assert_eq!(got, ["admin-port".to_string(), port.to_string()]);

    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let p = taken.local_addr().expect("addr").port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args(["--port", "0", "--admin-port", &p])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server started with its admin port in use");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(1));
    let mut out = String::new();
    let _ = child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out);
    assert!(
        out.contains(&format!("Failed listening on admin port {p}")),
        "{out}"
    );
}

#[test]
fn metrics_follow_the_commands() {
    let (s, port) = start_admin(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let before = scrape(port);
    assert_eq!(before.val("redis_up", &[]), 1.0);
    let info = before
        .0
        .keys()
        .find(|(n, _)| n == "redis_instance_info")
        .expect("redis_instance_info");
    let resp_port = ("tcp_port".to_string(), s.port.to_string());
    assert!(info.1.contains(&resp_port), "{info:?}");
    assert!(info.1.contains(&("role".to_string(), "master".to_string())));
    assert_eq!(before.val("redis_db_keys", &[("db", "db0")]), 0.0);

    let _: () = q(&mut c, &["SET", "k", "v"]).expect("set");
    let _: () = q(&mut c, &["SET", "t", "v", "EX", "100"]).expect("set");
    let _: Option<String> = q(&mut c, &["GET", "k"]).expect("get");
    let _: Option<String> = q(&mut c, &["GET", "nosuch1"]).expect("get");
    let _: Option<String> = q(&mut c, &["GET", "nosuch2"]).expect("get");
    let _ = err_text(q::<()>(&mut c, &["INCR", "k"]));
    // Three documents already past their date under a 1 s TTL index, one far in the future.
    let past = r#"{"$date":{"$numberLong":"1000"}}"#;
    let future = r#"{"$date":{"$numberLong":"99999999999999"}}"#;
    let docs: Vec<String> = (0..3)
        .map(|i| format!(r#"{{"_id":{i},"at":{past}}}"#))
        .chain([format!(r#"{{"_id":"keep","at":{future}}}"#)])
        .collect();
    let mut args = vec!["DOC.INSERT", "sess\"ions"];
    args.extend(docs.iter().map(String::as_str));
    assert_eq!(strs(&mut c, &args).len(), 4);
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "sess\"ions", "at", "1"]).expect("index");

    let after = scrape(port);
    let d = |name: &str, labels: &[(&str, &str)]| {
        after.val(name, labels) - before.get(name, labels).unwrap_or(0.0)
    };
    assert_eq!(d("redis_keyspace_hits_total", &[]), 1.0);
    assert_eq!(d("redis_keyspace_misses_total", &[]), 2.0);
    assert!(d("redis_commands_processed_total", &[]) >= 8.0);
    assert_eq!(d("redis_commands_total", &[("cmd", "get")]), 3.0);
    assert_eq!(d("redis_commands_total", &[("cmd", "set")]), 2.0);
    assert_eq!(
        d("redis_commands_failed_calls_total", &[("cmd", "incr")]),
        1.0
    );
    assert!(after.val("redis_commands_duration_seconds_total", &[("cmd", "set")]) > 0.0);
    assert!(after.val("redis_errors_total", &[("err", "ERR")]) >= 1.0);
    assert_eq!(after.val("redis_db_keys", &[("db", "db0")]), 2.0);
    assert_eq!(after.val("redis_db_keys_expiring", &[("db", "db0")]), 1.0);
    assert!(d("redis_net_input_bytes_total", &[]) > 0.0);
    assert!(after.val("redis_memory_used_bytes", &[]) > 0.0);
    assert!(after.val("redis_memory_used_rss_bytes", &[]) > 0.0);
    assert!(after.val("redis_connected_clients", &[]) >= 1.0);
    assert_eq!(after.val("tidecache_collections", &[]), 1.0);
    // The collection's name needs escaping in the label: the parser reads it back.
    let coll = [("db", "db0"), ("collection", "sess\"ions")];
    assert!(eventually(10.0, || {
        let m = scrape(port);
        m.val("tidecache_collection_ttl_deleted_total", &coll) == 3.0
            && m.val("tidecache_collection_documents", &coll) == 1.0
            && m.val("tidecache_collection_ttl_passes_total", &coll) >= 1.0
            && m.val("tidecache_ttl_deleted_documents_total", &[]) == 3.0
            && m.val("tidecache_documents", &[]) == 1.0
    }));

    // The same numbers as INFO and DOC.STATS: one source, not a second count.
    let info: String = q(&mut c, &["INFO", "stats"]).expect("info");
    let hits: f64 = info
        .lines()
        .find_map(|l| l.strip_prefix("keyspace_hits:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("keyspace_hits");
    assert_eq!(scrape(port).val("redis_keyspace_hits_total", &[]), hits);

    // stats.json, what the page polls, carries the collection too.
    let r = http(port, "GET", "/stats.json");
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    let v: serde_json::Value = serde_json::from_str(&r.body).expect("json");
    let row = v["collection_stats"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == "sess\"ions"))
        .expect("collection row");
    assert_eq!(row["documents"], 1);
    assert_eq!(row["ttl_deleted"], 3);
}

#[test]
fn status_page_paths_and_bad_requests() {
    let (s, port) = start_admin(&[]);
    let page = http(port, "GET", "/");
    assert_eq!(page.status, 200);
    assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
    assert!(page.body.contains("id=\"ops-per-sec\""));
    // Nothing is loaded from elsewhere: no src/href attributes, no CSS url() or @import.
    for bad in ["src=", "href=", "url(", "@import"] {
        assert!(!page.body.contains(bad), "the page has {bad}");
    }
    let r = http(port, "GET", "/nope");
    assert_eq!(r.status, 404);
    let r = http(port, "GET", "/metrics/extra");
    assert_eq!(r.status, 404);
    let r = http(port, "POST", "/metrics");
    assert_eq!(r.status, 405);
    assert_eq!(r.headers["allow"], "GET, HEAD");
    // A query string does not change the route.
    assert_eq!(http(port, "GET", "/stats.json?x=1").status, 200);

    // Malformed requests are answered 400 and closed, and the server goes on.
    let junk: [&[u8]; 4] = [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
        b"\x00\xff\x16\x03\x01\x02\x00\r\n\r\n",
    ];
    for j in junk {
        let out = http_raw(port, j);
        assert_eq!(parse_reply(&out).status, 400, "for {j:?}");
    }
    // Headers past the buffer limit are refused (431), not buffered without end. (The
    // reply can be lost to a reset when the server closes with the rest unread.)
    let mut big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 200_000));
    big.extend_from_slice(b"\r\n\r\n");
    let out = http_raw(port, &big);
    if !out.is_empty() {
        assert_eq!(parse_reply(&out).status, 431);
    }
    // A client that sends half a request and waits does not block others.
    let mut idle = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    idle.write_all(b"GET /metr").expect("write");
    assert_eq!(http(port, "GET", "/metrics").status, 200);
    drop(idle);
    // Keep-alive: two requests on one connection.
    let two = http_raw(
        port,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&two);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{}",
        &text[..40.min(text.len())]
    );
    assert!(text.contains("HTTP/1.1 404"));
    let mut c = s.conn();
    let pong: String = q(&mut c, &["PING"]).expect("ping");
    assert_eq!(pong, "PONG");
}

// ---- the status page in headless Chromium ----

const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless Chromium on `url` with `extra` arguments for at most a minute; its stdout.
fn chromium(url: &str, extra: &[&str]) -> String {
    let profile = std::env::temp_dir().join(format!(
        "tidecache-chromium-{}-{}",
        std::process::id(),
        free_port()
    ));
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().expect("reader")
}

/// The attribute `attr` of the element whose opening tag holds `marker`.
fn attr_of(dom: &str, marker: &str, attr: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{attr}=\"");
    let from = tag.find(&key)? + key.len();
    let len = tag[from..].find('"')?;
    Some(tag[from..from + len].to_string())
}

fn dom_number(dom: &str, id: &str) -> f64 {
    attr_of(dom, &format!("id=\"{id}\""), "data-value")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number for #{id} in the page"))
}

/// A cell of the collections table: the row `data-collection`, the cell `data-field`.
fn collection_cell(dom: &str, collection: &str, field: &str) -> f64 {
    let row_at = dom
        .find(&format!("data-collection=\"{collection}\""))
        .unwrap_or_else(|| panic!("no row for {collection}"));
    let row = &dom[row_at..row_at + dom[row_at..].find("</tr>").expect("row end")];
    attr_of(row, &format!("data-field=\"{field}\""), "data-value")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} for {collection}"))
}

#[test]
fn status_page_renders_live_numbers_in_headless_chromium() {
    if !Path::new(CHROMIUM).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the status page test needs Chromium under CI (apt-get install chromium)"
        );
        eprintln!(
            "NOTICE: status page test skipped: {CHROMIUM} is missing (apt-get install chromium)"
        );
        return;
    }
    let (s, port) = start_admin(&["--ttl-monitor-period", "1"]);
    let mut c = s.conn();
    let past = r#"{"$date":{"$numberLong":"1000"}}"#;
    let docs: Vec<String> = (0..5)
        .map(|i| format!(r#"{{"_id":{i},"at":{past}}}"#))
        .chain((0..7).map(|i| format!(r#"{{"_id":"u{i}"}}"#)))
        .collect();
    let mut args = vec!["DOC.INSERT", "sessions"];
    args.extend(docs.iter().map(String::as_str));
    assert_eq!(strs(&mut c, &args).len(), 12);
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "sessions", "at", "1"]).expect("index");
    let _: Vec<String> = q(&mut c, &["DOC.INSERT", "users", r#"{"_id":1}"#]).expect("insert");

    // Load while the page is read: the sampler's commands/s must see it.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        let client = s.client();
        std::thread::spawn(move || {
            let mut c = client.get_connection().expect("connect");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut p = redis::pipe();
                for i in 0..50 {
                    p.cmd("SET").arg(format!("k{}", i % 10)).arg(n).ignore();
                    p.cmd("GET").arg(format!("k{}", i % 20)).ignore();
                }
                let _: () = p.query(&mut c).expect("load");
                n += 1;
            }
            n
        })
    };
    // Two samples of load, a second apart, and the TTL pass over `sessions`.
    assert!(eventually(10.0, || {
        let m = scrape(port);
        m.val(
            "tidecache_collection_ttl_deleted_total",
            &[("db", "db0"), ("collection", "sessions")],
        ) == 5.0
    }));
    std::thread::sleep(Duration::from_millis(2500));

    let url = format!("http://127.0.0.1:{port}/");
    // Virtual time: the page's one-second polls run back to back (three of them), each
    // waiting for its fetch; then the DOM as the scripts left it.
    let dom = chromium(&url, &["--virtual-time-budget=3000", "--dump-dom"]);
    let updates: u64 = attr_of(&dom, "<body", "data-updates")
        .and_then(|v| v.parse().ok())
        .expect("body data-updates");
    assert!(updates >= 1, "the page never got stats.json");
    let ops = dom_number(&dom, "ops-per-sec");
    assert!(ops > 0.0, "commands/s on the page: {ops}");
    assert!(dom_number(&dom, "commands-processed") > 1000.0);
    assert!(dom_number(&dom, "used-memory") > 0.0);
    assert!(dom_number(&dom, "connected-clients") >= 2.0);
    assert_eq!(dom_number(&dom, "keys"), 10.0);
    assert_eq!(dom_number(&dom, "collections"), 2.0);
    assert_eq!(dom_number(&dom, "documents"), 8.0);
    assert_eq!(dom_number(&dom, "ttl-deleted"), 5.0);
    assert_eq!(collection_cell(&dom, "0/sessions", "documents"), 7.0);
    assert_eq!(collection_cell(&dom, "0/sessions", "ttl-deleted"), 5.0);
    assert_eq!(
        collection_cell(&dom, "0/sessions", "expired-last-minute"),
        5.0
    );
    assert_eq!(collection_cell(&dom, "0/users", "documents"), 1.0);
    // The charts were drawn: commands/s, memory, and `sessions` (the one collection with
    // expirations) in the expirations chart.
    assert_eq!(dom.matches("<polyline").count(), 3, "charts not drawn");
    assert_eq!(
        attr_of(&dom, "data-series=\"0/sessions\"", "data-value").as_deref(),
        Some("5")
    );
    assert!(
        dom.contains("data-command=\"set\""),
        "slowest commands table"
    );

    let artifacts: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    let shot = artifacts.join("status-page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &url,
        &[
            "--virtual-time-budget=3000",
            "--window-size=1280,1000",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    stop.store(true, Ordering::Relaxed);
    assert!(load.join().expect("load thread") > 0);
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
    eprintln!("status page screenshot: {}", shot.display());
}
