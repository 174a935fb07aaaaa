//! Cluster nodes for the integration tests: tidecache or redis-server with
//! `cluster-enabled yes` on free ports, each in a directory of its own, and the
//! `redis-cli --cluster` steps the tests share.
#![allow(dead_code)]

use super::eventually;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One cluster node (tidecache, or redis-server as the reference) with its own directory.
pub struct Node {
    pub child: Child,
    pub port: u16,
    pub dir: PathBuf,
    pub redis: bool,
}

pub fn free_port_pair() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = l.local_addr().expect("addr").port();
        if p < 55535 && std::net::TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
            return p;
        }
    }
}

pub fn redis_server_available() -> bool {
    tool_available("redis-server")
}

/// Whether `tool` (redis-server, redis-cli) runs here: CI installs them, so a missing one
/// fails there, and is a notice elsewhere.
pub fn tool_available(tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "{tool} is needed for the cluster tests under CI"
    );
    if !found {
        eprintln!("NOTICE: {tool} not on PATH; cluster test skipped");
    }
    found
}

impl Node {
    pub fn start(redis: bool, extra: &[&str]) -> Node {
        let port = free_port_pair();
        let dir = std::env::temp_dir().join(format!(
            "tc-cluster-{}-{port}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        Self::start_in(redis, port, dir, extra)
    }

    pub fn start_in(redis: bool, port: u16, dir: PathBuf, extra: &[&str]) -> Node {
        let bin = if redis {
            "redis-server".to_string()
        } else {
            env!("CARGO_BIN_EXE_tidecache-server").to_string()
        };
        let child = Command::new(bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "3000",
                "--dir",
                dir.to_str().expect("utf-8 dir"),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(extra)
            .stdout(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let node = Node {
            child,
            port,
            dir,
            redis,
        };
        assert!(
            eventually(10.0, || node
                .try_cmd(&["PING"])
                .is_some_and(|r| r == "PONG")),
            "node on {port} did not start"
        );
        node
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn try_cmd(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    pub fn cmd(&self, args: &[&str]) -> String {
        self.try_cmd(args)
            .unwrap_or_else(|| panic!("redis-cli {args:?} on {} failed", self.port))
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("client")
            .get_connection()
            .expect("connect")
    }

    pub fn info_field(&self, field: &str) -> String {
        let info = self.cmd(&["CLUSTER", "INFO"]);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or("")
            .trim()
            .to_string()
    }

    pub fn myid(&self) -> String {
        self.cmd(&["CLUSTER", "MYID"])
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            // The node's log stays for the failure's diagnosis.
            eprintln!("node {} log: {}", self.port, self.dir.join("log").display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn redis_cli(args: &[&str], timeout: Duration) -> (bool, String) {
    let mut cmd = Command::new("redis-cli");
    cmd.args(args);
    let (ok, out, _) = super::run_bounded(cmd, timeout);
    (ok, out)
}

pub fn create(nodes: &[&Node], replicas: usize) {
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(nodes.iter().map(|n| n.addr()));
    args.extend([
        "--cluster-replicas".into(),
        replicas.to_string(),
        "--cluster-yes".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out) = redis_cli(&args, Duration::from_secs(60));
    assert!(ok, "redis-cli --cluster create failed:\n{out}");
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    for n in nodes {
        assert!(
            eventually(20.0, || n.info_field("cluster_state") == "ok"),
            "node {} did not reach cluster_state:ok: {}",
            n.port,
            n.cmd(&["CLUSTER", "NODES"])
        );
    }
}

pub fn check(node: &Node) -> String {
    let (ok, out) = redis_cli(
        &["--cluster", "check", &node.addr()],
        Duration::from_secs(30),
    );
    assert!(ok, "redis-cli --cluster check failed:\n{out}");
    assert!(
        out.contains("[OK] All nodes agree about slots configuration."),
        "{out}"
    );
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    out
}
