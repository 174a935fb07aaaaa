//! Runs the command sequences in `tests/compare/*.txt` against redis-server 7 and tidecache
//! and compares the raw replies byte for byte. Skipped, with a notice, when `redis-server` is
//! not on PATH (CI installs it).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::{ReferenceRedis, TestServer};
use tidecache::util::sds::split_args;

/// Reads one complete RESP reply and returns its bytes.
fn read_reply(r: &mut BufReader<TcpStream>, out: &mut Vec<u8>) {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).expect("read");
    out.extend_from_slice(&line);
    let body = String::from_utf8_lossy(&line[1..line.len().saturating_sub(2)]).to_string();
    let n: i64 = body.parse().unwrap_or(0);
    match line[0] {
        b'$' | b'=' | b'!' if n >= 0 => {
            let mut b = vec![0u8; n as usize + 2];
            r.read_exact(&mut b).expect("read bulk");
            out.extend_from_slice(&b);
        }
        b'*' | b'~' | b'>' => {
            for _ in 0..n.max(0) {
                read_reply(r, out);
            }
        }
        b'%' => {
            for _ in 0..2 * n.max(0) {
                read_reply(r, out);
            }
        }
        _ => {}
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

fn run(port: u16, cmds: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut w = s.try_clone().expect("clone");
    let mut r = BufReader::new(s);
    cmds.iter()
        .map(|c| {
            w.write_all(&encode(c)).expect("write");
            let mut out = Vec::new();
            read_reply(&mut r, &mut out);
            out
        })
        .collect()
}

#[test]
fn same_replies_as_redis() {
    let Some(redis) = ReferenceRedis::start() else {
        return;
    };
    let rport = redis.port;
    let ours = TestServer::start(&[]);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compare");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/compare")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut diffs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read sequence");
        let cmds: Vec<Vec<Vec<u8>>> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .map(|l| split_args(l.as_bytes()).expect("quoting"))
            .collect();
        let theirs = run(rport, &cmds);
        let mine = run(ours.port, &cmds);
        for (i, c) in cmds.iter().enumerate() {
            if theirs[i] != mine[i] {
                let cmd: Vec<String> = c
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into())
                    .collect();
                diffs.push(format!(
                    "{}: {}\n  redis:     {:?}\n  tidecache: {:?}",
                    f.file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default(),
                    cmd.join(" "),
                    String::from_utf8_lossy(&theirs[i]),
                    String::from_utf8_lossy(&mine[i])
                ));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
