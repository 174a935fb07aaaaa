//! TLS (`tls-port`): real TLS clients (the `redis` crate over rustls, redis-cli --tls,
//! redis-py with ssl=True) against the real binary. The CAs, certificates and keys are made
//! at run time with rcgen into a temporary directory; no key is kept in the repository.

mod support;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use redis::{ClientTlsConfig, TlsCertificates};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::TestServer;

/// A certificate authority that signs server and client certificates.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer =
            CertifiedIssuer::self_signed(p, KeyPair::generate().expect("key")).expect("ca");
        Ca { issuer }
    }

    /// A leaf certificate for 127.0.0.1/localhost: (certificate PEM, key PEM).
    fn leaf(&self, name: &str, purpose: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut p = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("params");
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().expect("key");
        let cert = p.signed_by(&key, &self.issuer).expect("sign");
        (cert.pem(), key.serialize_pem())
    }
}

/// The files of one test: a CA with a server and a client certificate, and a second CA
/// (unknown to the server) with a client certificate of its own.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(test: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("tidecache-tls-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let pki = Pki { dir };
        for (ca_name, prefix) in [("tidecache test CA", ""), ("some other CA", "other-")] {
            let ca = Ca::new(ca_name);
            pki.write(&format!("{prefix}ca.crt"), &ca.issuer.pem());
            let (c, k) = ca.leaf("server", ExtendedKeyUsagePurpose::ServerAuth);
            pki.write(&format!("{prefix}server.crt"), &c);
            pki.write(&format!("{prefix}server.key"), &k);
            let (c, k) = ca.leaf("client", ExtendedKeyUsagePurpose::ClientAuth);
            pki.write(&format!("{prefix}client.crt"), &c);
            pki.write(&format!("{prefix}client.key"), &k);
        }
        pki
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.join(name), text).expect("write pem");
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(name)).expect("read pem")
    }

    /// The server's TLS options with this test's CA and server certificate.
    fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert-file".into(),
            self.path("server.crt"),
            "--tls-key-file".into(),
            self.path("server.key"),
            "--tls-ca-cert-file".into(),
            self.path("ca.crt"),
        ]
    }

    /// A connection over TLS trusting `ca`, with the client certificate `client` (the
    /// prefix of `<client>client.crt`) if any; it PINGs first, since under TLS 1.3 a
    /// refused client certificate shows only at the first read.
    fn connect(
        &self,
        port: u16,
        ca: &str,
        client: Option<&str>,
    ) -> redis::RedisResult<redis::Connection> {
        let certs = TlsCertificates {
            client_tls: client.map(|prefix| ClientTlsConfig {
                client_cert: self.read(&format!("{prefix}client.crt")),
                client_key: self.read(&format!("{prefix}client.key")),
            }),
            root_cert: Some(self.read(ca)),
        };
        let client = redis::Client::build_with_tls(format!("rediss://127.0.0.1:{port}/"), certs)?;
        let mut c = client.get_connection_with_timeout(Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        let pong: String = redis::cmd("PING").query(&mut c)?;
        assert_eq!(pong, "PONG");
        Ok(c)
    }

    /// A connection with this test's CA and client certificate, which must succeed.
    fn conn(&self, port: u16) -> redis::Connection {
        self.connect(port, "ca.crt", Some(""))
            .expect("TLS connection")
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Starts the server with `--port <plain> --tls-port <free port>` and `args`; `plain`
/// None: a free plain port too, Some(0): TLS only. Returns the server (its `port` is what
/// the banner says: the plain port, or the TLS one without a plain port) and the TLS port.
/// A port found free can be taken before the server binds it, so a failed start is tried
/// again on other ports.
fn start(plain: Option<u16>, args: &[String]) -> (TestServer, u16) {
    for _ in 0..5 {
        let tls_port = free_port();
        let port = plain.unwrap_or_else(free_port);
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
            .args([
                "--port",
                &port.to_string(),
                "--tls-port",
                &tls_port.to_string(),
            ])
            .args(["--loglevel", "notice", "--save", ""])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn server");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(rest) = line.split("started: port ").nth(1) {
                        let p: u16 = rest
                            .split(',')
                            .next()
                            .and_then(|p| p.parse().ok())
                            .unwrap_or(0);
                        let _ = tx.send(p);
                        sent = true;
                    }
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(p) => return (TestServer { child, port: p }, tls_port),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    panic!("server did not start");
}

/// Runs the server with `args` expecting it to refuse to start; returns what it logged.
fn start_fails(args: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args(["--port", "0", "--tls-port", &free_port().to_string()])
        .args(args)
        .output()
        .expect("run server");
    assert!(!out.status.success(), "the server started with {args:?}");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<T> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    let info: String = q(c, &["INFO", "server"]).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn verified_clients_are_served_on_the_tls_port_beside_the_plain_one() {
    let pki = Pki::new("both");
    let (s, tls_port) = start(None, &pki.server_args());
    let mut t = pki.conn(tls_port);
    let mut p = s.conn();
    let _: () = q(&mut t, &["SET", "k", "over tls"]).unwrap();
    assert_eq!(q::<String>(&mut p, &["GET", "k"]).unwrap(), "over tls");
    let _: () = q(&mut p, &["SET", "k2", "plain"]).unwrap();
    assert_eq!(q::<String>(&mut t, &["GET", "k2"]).unwrap(), "plain");
    // Documents over TLS, and a reply larger than one TLS record (16 KiB).
    let ids: Vec<String> = q(&mut t, &["DOC.INSERT", "u", r#"{"_id":1,"name":"ann"}"#]).unwrap();
    assert_eq!(ids, ["1"]);
    let doc: String = q(&mut t, &["DOC.FINDONE", "u", r#"{"name":"ann"}"#]).unwrap();
    assert_eq!(doc, r#"{"_id":1,"name":"ann"}"#);
    let big = "x".repeat(200_000);
    let _: () = q(&mut t, &["SET", "big", &big]).unwrap();
    assert_eq!(q::<String>(&mut t, &["GET", "big"]).unwrap(), big);
    // A pipeline of many requests in one write.
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("INCR").arg("n").ignore();
        if i == 499 {
            pipe.cmd("GET").arg("n");
        }
    }
    let (n,): (String,) = pipe.query(&mut t).unwrap();
    assert_eq!(n, "500");
    // A command blocked over TLS is served by a write on the plain port.
    let mut b = pki.conn(tls_port);
    let popped =
        std::thread::spawn(move || q::<Vec<String>>(&mut b, &["BLPOP", "queue", "5"]).unwrap());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(q::<i64>(&mut p, &["RPUSH", "queue", "job"]).unwrap(), 1);
    assert_eq!(popped.join().unwrap(), ["queue", "job"]);
    // INFO's tcp_port is the plain port while there is one; both clients are listed.
    assert_eq!(info_field(&mut t, "tcp_port"), s.port.to_string());
    let list: String = q(&mut p, &["CLIENT", "LIST"]).unwrap();
    assert!(
        list.contains(&format!("laddr=127.0.0.1:{tls_port} ")),
        "{list}"
    );
    assert!(
        list.contains(&format!("laddr=127.0.0.1:{} ", s.port)),
        "{list}"
    );
    // Plain RESP on the TLS port is not served: the connection ends with no byte sent (no
    // TLS alert a client could take for a reply), as with Redis.
    let mut raw = TcpStream::connect(("127.0.0.1", tls_port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = Vec::new();
    let _ = raw.read_to_end(&mut got);
    assert!(got.is_empty(), "{got:?}");
    // The plain port is not TLS.
    assert!(pki.connect(s.port, "ca.crt", Some("")).is_err());
}

#[test]
fn tls_auth_clients_yes_optional_no() {
    let pki = Pki::new("auth");
    let (s, tls_port) = start(None, &pki.server_args());
    let mut admin = s.conn();
    // yes (the default): a certificate from the configured CA is required.
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_ok());
    assert!(
        pki.connect(tls_port, "ca.crt", None).is_err(),
        "no certificate"
    );
    assert!(
        pki.connect(tls_port, "ca.crt", Some("other-")).is_err(),
        "certificate from another CA"
    );
    // The client checks the server too: a client trusting another CA refuses it.
    assert!(pki.connect(tls_port, "other-ca.crt", Some("")).is_err());
    // optional: no certificate is fine, a bad one is still refused.
    let _: () = q(
        &mut admin,
        &["CONFIG", "SET", "tls-auth-clients", "optional"],
    )
    .unwrap();
    assert!(pki.connect(tls_port, "ca.crt", None).is_ok());
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_ok());
    assert!(pki.connect(tls_port, "ca.crt", Some("other-")).is_err());
    // no: no certificate is asked for.
    let _: () = q(&mut admin, &["CONFIG", "SET", "tls-auth-clients", "no"]).unwrap();
    assert!(pki.connect(tls_port, "ca.crt", None).is_ok());
    assert!(pki.connect(tls_port, "ca.crt", Some("other-")).is_ok());
    let v: Vec<String> = q(&mut admin, &["CONFIG", "GET", "tls-auth-clients"]).unwrap();
    assert_eq!(v, ["tls-auth-clients", "no"]);
}

#[test]
fn port_0_serves_tls_only() {
    let pki = Pki::new("only");
    let (s, tls_port) = start(Some(0), &pki.server_args());
    // The banner and INFO's tcp_port name the TLS port, as Redis does without a plain one.
    assert_eq!(s.port, tls_port);
    let mut t = pki.conn(tls_port);
    assert_eq!(info_field(&mut t, "tcp_port"), tls_port.to_string());
    let v: Vec<String> = q(&mut t, &["CONFIG", "GET", "port"]).unwrap();
    assert_eq!(v, ["port", "0"]);
    // No socket of the server's is listening but the TLS one.
    let pid = s.child.id();
    let listening = listening_ports(pid);
    assert_eq!(listening, [tls_port], "listening ports of {pid}");
}

/// The TCP ports process `pid` listens on (from /proc: its sockets' inodes in
/// /proc/net/tcp and tcp6 with state 0A, LISTEN).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    l.strip_prefix("socket:[")
                        .and_then(|r| r.strip_suffix(']'))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                let port = f[1]
                    .rsplit(':')
                    .next()
                    .and_then(|h| u16::from_str_radix(h, 16).ok());
                if let Some(p) = port {
                    if !ports.contains(&p) {
                        ports.push(p);
                    }
                }
            }
        }
    }
    ports
}

#[test]
fn config_set_reloads_certificates_for_new_connections() {
    let pki = Pki::new("reload");
    let (s, tls_port) = start(None, &pki.server_args());
    let mut admin = s.conn();
    let mut old = pki.conn(tls_port);
    // A file that does not load answers an error and changes nothing.
    let e = q::<()>(
        &mut admin,
        &["CONFIG", "SET", "tls-cert-file", "/nonexistent/server.crt"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("possibly related to argument 'tls-cert-file'")
            && e.contains("Unable to update TLS configuration")
            && e.contains("/nonexistent/server.crt"),
        "{e}"
    );
    let e = q::<()>(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "tls-key-file",
            &pki.path("other-server.key"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("is not the key of the certificate"), "{e}");
    pki.write("junk.crt", "not a certificate\n");
    let e = q::<()>(
        &mut admin,
        &["CONFIG", "SET", "tls-cert-file", &pki.path("junk.crt")],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no certificate found"), "{e}");
    let v: Vec<String> = q(&mut admin, &["CONFIG", "GET", "tls-cert-file"]).unwrap();
    assert_eq!(v[1], pki.path("server.crt"));
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_ok());

    // The other CA's server certificate, and that CA for clients: new connections see it.
    let _: () = q(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &pki.path("other-server.crt"),
            "tls-key-file",
            &pki.path("other-server.key"),
            "tls-ca-cert-file",
            &pki.path("other-ca.crt"),
        ],
    )
    .unwrap();
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_err());
    assert!(pki.connect(tls_port, "other-ca.crt", Some("")).is_err());
    let mut new = pki
        .connect(tls_port, "other-ca.crt", Some("other-"))
        .expect("new certificates");
    // The connection made before the change goes on.
    let _: () = q(&mut old, &["SET", "a", "1"]).unwrap();
    assert_eq!(q::<String>(&mut new, &["GET", "a"]).unwrap(), "1");

    // Replacing the file's content and setting the same path reloads it (as Redis).
    std::fs::copy(pki.dir.join("server.crt"), pki.dir.join("other-server.crt")).unwrap();
    std::fs::copy(pki.dir.join("server.key"), pki.dir.join("other-server.key")).unwrap();
    std::fs::copy(pki.dir.join("ca.crt"), pki.dir.join("other-ca.crt")).unwrap();
    let _: () = q(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &pki.path("other-server.crt"),
        ],
    )
    .unwrap();
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_ok());

    // A directory of CAs works as the CA file does.
    let cadir = pki.dir.join("cas");
    std::fs::create_dir_all(&cadir).unwrap();
    std::fs::copy(pki.dir.join("ca.crt"), cadir.join("a.pem")).unwrap();
    std::fs::write(cadir.join("README"), "not a certificate").unwrap();
    let _: () = q(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "tls-ca-cert-file",
            "",
            "tls-ca-cert-dir",
            &cadir.to_string_lossy(),
        ],
    )
    .unwrap();
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_ok());
    assert!(pki.connect(tls_port, "ca.crt", Some("other-")).is_err());
}

#[test]
fn protocols_and_ciphers_apply_what_rustls_has() {
    let pki = Pki::new("ciphers");
    let (s, tls_port) = start(None, &pki.server_args());
    let mut admin = s.conn();
    let set = |c: &mut redis::Connection, name: &str, v: &str| -> Result<(), String> {
        q::<()>(c, &["CONFIG", "SET", name, v]).map_err(|e| e.to_string())
    };
    let e = set(&mut admin, "tls-ciphers", "RC4-SHA:DES-CBC3-SHA").unwrap_err();
    assert!(e.contains("selects no cipher this server supports"), "{e}");
    let e = set(&mut admin, "tls-ciphersuites", "TLS_AES_128_CCM_8_SHA256").unwrap_err();
    assert!(e.contains("names no TLSv1.3 ciphersuite"), "{e}");
    let e = set(&mut admin, "tls-protocols", "TLSv1 TLSv1.1").unwrap_err();
    assert!(e.contains("names no protocol this server supports"), "{e}");
    let e = set(&mut admin, "tls-protocols", "SSLv3").unwrap_err();
    assert!(e.contains("Invalid tls-protocols specified"), "{e}");
    // A refused value changed nothing.
    let v: Vec<String> = q(&mut admin, &["CONFIG", "GET", "tls-*ciphe*"]).unwrap();
    assert_eq!(
        v,
        [
            "tls-ciphers",
            "",
            "tls-ciphersuites",
            "",
            "tls-prefer-server-ciphers",
            "no"
        ]
    );
    // TLS 1.2 only, with one cipher of an OpenSSL cipher string; then TLS 1.3 with one suite.
    set(&mut admin, "tls-protocols", "TLSv1.2").unwrap();
    set(
        &mut admin,
        "tls-ciphers",
        "DEFAULT:!MEDIUM:!aRSA:!AES256:!CHACHA20",
    )
    .unwrap();
    set(&mut admin, "tls-prefer-server-ciphers", "yes").unwrap();
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_ok());
    set(&mut admin, "tls-protocols", "TLSv1.3").unwrap();
    set(
        &mut admin,
        "tls-ciphersuites",
        "TLS_CHACHA20_POLY1305_SHA256",
    )
    .unwrap();
    assert!(pki.connect(tls_port, "ca.crt", Some("")).is_ok());
    // An encrypted key is refused with the reason.
    pki.write(
        "enc.key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n",
    );
    let e = q::<()>(
        &mut admin,
        &[
            "CONFIG",
            "SET",
            "tls-key-file",
            &pki.path("enc.key"),
            "tls-key-file-pass",
            "secret",
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("tls-key-file-pass is not supported"), "{e}");
}

#[test]
fn bad_tls_settings_stop_the_start() {
    let pki = Pki::new("start");
    let mut args = pki.server_args();
    args[1] = pki.path("missing.crt");
    let log = start_fails(&args);
    assert!(
        log.contains("Failed to configure TLS") && log.contains("missing.crt"),
        "{log}"
    );
    let log = start_fails(&["--tls-cert-file".into(), pki.path("server.crt")]);
    assert!(log.contains("No tls-key-file configured"), "{log}");
    let mut args = pki.server_args();
    args.truncate(4);
    let log = start_fails(&args);
    assert!(
        log.contains("Either tls-ca-cert-file or tls-ca-cert-dir must be specified"),
        "{log}"
    );
    // Without client authentication no CA is needed.
    args.extend(["--tls-auth-clients".into(), "no".into()]);
    let (_s, tls_port) = start(Some(0), &args);
    assert!(pki.connect(tls_port, "ca.crt", None).is_ok());
}

/// A peer that connects and never says hello holds neither the accept loop nor other
/// clients, and is dropped after the handshake timeout (10 s).
#[test]
fn a_stalled_handshake_blocks_nothing_and_times_out() {
    let pki = Pki::new("stall");
    let (_s, tls_port) = start(Some(0), &pki.server_args());
    let began = Instant::now();
    let mut stalled: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", tls_port)).unwrap())
        .collect();
    for _ in 0..3 {
        let mut c = pki.conn(tls_port);
        let _: () = q(&mut c, &["SET", "x", "y"]).unwrap();
    }
    assert!(began.elapsed() < Duration::from_secs(5));
    let s0 = &mut stalled[0];
    s0.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 16];
    let r = s0.read(&mut buf);
    let waited = began.elapsed();
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(18),
        "closed after {waited:?}"
    );
}

/// Whether `name probe...` runs; under CI (which installs redis-tools and redis-py) it must.
fn tool(name: &str, probe: &[&str]) -> bool {
    let ok = Command::new(name)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} ({probe:?}) is needed under CI"
        );
        eprintln!("NOTICE: {name} not available here ({probe:?}): skipped");
    }
    ok
}

#[test]
fn redis_cli_and_redis_py_over_tls() {
    let pki = Pki::new("tools");
    let (_s, tls_port) = start(Some(0), &pki.server_args());
    let port = tls_port.to_string();
    if tool("redis-cli", &["--tls", "--version"]) {
        let cli = |args: &[&str]| {
            let out = Command::new("redis-cli")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "--tls",
                    "--cacert",
                    &pki.path("ca.crt"),
                ])
                .args([
                    "--cert",
                    &pki.path("client.crt"),
                    "--key",
                    &pki.path("client.key"),
                ])
                .args(args)
                .output()
                .expect("redis-cli");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        assert_eq!(cli(&["SET", "cli", "ok"]), "OK");
        assert_eq!(cli(&["GET", "cli"]), "ok");
        assert_eq!(cli(&["DOC.INSERT", "c", r#"{"_id":"a"}"#]), r#""a""#);
    }
    if tool("python3", &["-c", "import redis"]) {
        let script = r#"
import sys, redis
port, ca, cert, key = sys.argv[1:]
r = redis.Redis(host="127.0.0.1", port=int(port), ssl=True, ssl_ca_certs=ca,
                ssl_certfile=cert, ssl_keyfile=key)
r.set("py", "ok")
r.execute_command("DOC.INSERT", "p", '{"_id":"b","n":1}')
print(r.get("py").decode(), r.execute_command("DOC.FINDONE", "p", '{"_id":"b"}').decode())
"#;
        let out = Command::new("python3")
            .args(["-c", script, &port, &pki.path("ca.crt")])
            .args([pki.path("client.crt"), pki.path("client.key")])
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.trim(), r#"ok {"_id":"b","n":1}"#);
    }
}

/// An idle TLS connection holds its session (rustls's buffers) but no read buffer of ours:
/// the read takes one only once input arrived, as on a plain connection.
#[test]
fn idle_tls_connections_hold_no_read_buffer() {
    const N: usize = 200;
    let pki = Pki::new("idle");
    let mut args = pki.server_args();
    args.extend(["--tls-auth-clients".into(), "no".into()]);
    let (s, tls_port) = start(Some(0), &args);
    let pid = s.child.id();
    let mut worker = pki.connect(tls_port, "ca.crt", None).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let before = support::rss_kib(pid);
    let idle: Vec<redis::Connection> = (0..N)
        .map(|_| pki.connect(tls_port, "ca.crt", None).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let after = support::rss_kib(pid);
    let per_conn = after.saturating_sub(before) as f64 * 1024.0 / N as f64;
    eprintln!("RSS growth per idle TLS connection: {per_conn:.0} bytes (this build)");
    // About 15 KB in a debug build (rustls's session); holding a 16 KB read buffer while
    // waiting made it 31 KB.
    assert!(
        per_conn < 24.0 * 1024.0,
        "{per_conn} bytes per idle TLS connection"
    );
    let _: () = q(&mut worker, &["SET", "still", "served"]).unwrap();
    drop(idle);
}

fn link_status(c: &mut redis::Connection) -> Option<String> {
    support::info_value(c, "replication", "master_link_status")
}

/// `tls-replication yes`: a replica links to its master's TLS port with this test's CA and
/// its client certificate, and the stream flows; a replica that does not trust the master's
/// CA, or presents no certificate to a master that asks for one, or speaks plain TCP to the
/// TLS port, never links.
#[test]
fn tls_replication_links_only_with_trusted_certificates() {
    let pki = Pki::new("replication");
    let (master, tls_port) = start(None, &pki.server_args());
    let mut m = master.conn();
    let _: () = support::q(&mut m, &["SET", "before", "1"]).unwrap();
    let replica_args = |ca: &str, client: bool| {
        let mut a = vec![
            "--tls-replication".to_string(),
            "yes".into(),
            "--tls-ca-cert-file".into(),
            pki.path(ca),
        ];
        if client {
            a.extend([
                "--tls-client-cert-file".into(),
                pki.path("client.crt"),
                "--tls-client-key-file".into(),
                pki.path("client.key"),
            ]);
        }
        a
    };
    let args = replica_args("ca.crt", true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let replica = TestServer::start(&args);
    let mut r = replica.conn();
    support::replicate_port(&mut r, tls_port);
    let _: () = support::q(&mut m, &["SET", "after", "2"]).unwrap();
    assert!(support::eventually(10.0, || {
        support::q::<Option<String>>(&mut r, &["GET", "after"])
            .ok()
            .flatten()
            .as_deref()
            == Some("2")
    }));
    assert_eq!(
        support::strs(&mut r, &["MGET", "before"]),
        ["1".to_string()]
    );

    let refused: [(Vec<String>, &str); 3] = [
        (replica_args("other-ca.crt", true), "an unknown CA"),
        (replica_args("ca.crt", false), "no client certificate"),
        (Vec::new(), "plain TCP"),
    ];
    for (args, why) in refused {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let other = TestServer::start(&args);
        let mut o = other.conn();
        let _: String =
            support::q(&mut o, &["REPLICAOF", "127.0.0.1", &tls_port.to_string()]).unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(link_status(&mut o).as_deref(), Some("down"), "{why}");
        assert_eq!(support::int(&mut o, &["EXISTS", "before"]), 0, "{why}");
    }
}

/// TLS replication with redis-server on the other side, both ways: a redis-server master
/// on its TLS port feeding tidecache, and tidecache's TLS port feeding a redis-server replica
/// with `tls-replication yes`.
#[test]
fn tls_replication_with_redis_server_both_ways() {
    let pki = Pki::new("replication-redis");
    let redis_tls = free_port();
    let tls_args = [
        "--tls-port".to_string(),
        redis_tls.to_string(),
        "--tls-cert-file".into(),
        pki.path("server.crt"),
        "--tls-key-file".into(),
        pki.path("server.key"),
        "--tls-ca-cert-file".into(),
        pki.path("ca.crt"),
    ];
    let ref_args: Vec<&str> = tls_args.iter().map(String::as_str).collect();
    let Some(redis_master) = support::ReferenceRedis::start_with(&ref_args) else {
        return;
    };
    let mut rm = redis_master.conn();
    let _: () = support::q(&mut rm, &["SET", "from-redis", "1"]).unwrap();
    let replica_args = [
        "--tls-replication",
        "yes",
        "--tls-ca-cert-file",
        &pki.path("ca.crt"),
        "--tls-client-cert-file",
        &pki.path("client.crt"),
        "--tls-client-key-file",
        &pki.path("client.key"),
    ]
    .map(String::from);
    let args: Vec<&str> = replica_args.iter().map(String::as_str).collect();
    let replica = TestServer::start(&args);
    let mut r = replica.conn();
    support::replicate_port(&mut r, redis_tls);
    let _: () = support::q(&mut rm, &["SET", "streamed", "2"]).unwrap();
    assert!(support::eventually(10.0, || {
        support::q::<Vec<Option<String>>>(&mut r, &["MGET", "from-redis", "streamed"]).ok()
            == Some(vec![Some("1".into()), Some("2".into())])
    }));

    let (master, tls_port) = start(None, &pki.server_args());
    let mut m = master.conn();
    let _: () = support::q(&mut m, &["SET", "from-tidecache", "3"]).unwrap();
    let redis_replica_args = [
        "--tls-replication",
        "yes",
        "--tls-cert-file",
        &pki.path("client.crt"),
        "--tls-key-file",
        &pki.path("client.key"),
        "--tls-ca-cert-file",
        &pki.path("ca.crt"),
    ]
    .map(String::from);
    let args: Vec<&str> = redis_replica_args.iter().map(String::as_str).collect();
    let Some(redis_replica) = support::ReferenceRedis::start_with(&args) else {
        return;
    };
    let mut rr = redis_replica.conn();
    support::replicate_port(&mut rr, tls_port);
    let _: () = support::q(&mut m, &["SET", "streamed", "4"]).unwrap();
    assert!(support::eventually(10.0, || {
        support::q::<Vec<Option<String>>>(&mut rr, &["MGET", "from-tidecache", "streamed"]).ok()
            == Some(vec![Some("3".into()), Some("4".into())])
    }));
}

/// `tls-replication yes` without a CA to check the master by is refused at start and by
/// CONFIG SET, with the reason, and CONFIG SET changes nothing.
#[test]
fn tls_replication_without_a_ca_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args(["--port", "0", "--tls-replication", "yes"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("tls-ca-cert-file"), "{text}");
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let e = support::q::<()>(&mut c, &["CONFIG", "SET", "tls-replication", "yes"]).unwrap_err();
    assert!(e.to_string().contains("tls-ca-cert-file"), "{e}");
    assert_eq!(
        support::strs(&mut c, &["CONFIG", "GET", "tls-replication"]),
        ["tls-replication", "no"]
    );
}
