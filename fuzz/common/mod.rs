//! An in-process server for the targets that run commands: the library's `Server` and one
//! client, driven through `commands::dispatch` as a connection drives them (as
//! benches/protocol.rs does), with no socket.
#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use tidecache::commands::{dispatch, Ctx};
use tidecache::config::Config;
use tidecache::protocol::Reply;
use tidecache::state::client::ClientState;
use tidecache::state::Server;

pub struct Harness {
    pub server: Arc<Server>,
    pub client: ClientState,
    out: BytesMut,
}

impl Harness {
    pub fn new() -> Harness {
        // A directory of its own, so that nothing a command might write lands in the
        // working tree; 1 MB is the smallest `proto-max-bulk-len`, and it also bounds how far
        // SETRANGE/SETBIT/APPEND can grow a string (a 512 MB string per input would only
        // measure the allocator). No `save` schedule: a fuzz run is not a server whose data
        // is worth a snapshot (and BGSAVE, which a target may send, starts no child process
        // outside the server binary: store::journal::child).
        let dir = std::env::temp_dir().join(format!("tidecache-fuzz-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let args: Vec<String> = [
            "--dir",
            &dir.to_string_lossy(),
            "--shards",
            "2",
            "--proto-max-bulk-len",
            "1mb",
            "--enable-debug-command",
            "yes",
            "--loglevel",
            "warning",
            "--save",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let config = Config::from_args(&args).expect("the fuzz configuration is valid");
        let server = Server::new(config);
        let addr = "127.0.0.1:1".parse().expect("static address");
        let client = ClientState::new(server.clients.register(addr, addr), true);
        Harness {
            server,
            client,
            out: BytesMut::new(),
        }
    }

    /// Runs one command as the connection would, and encodes its reply in the client's
    /// protocol. A command that blocks is answered as its timeout would answer it.
    pub fn run(&mut self, args: &[Bytes]) -> Reply {
        let mut ctx = Ctx {
            server: &self.server,
            client: &mut self.client,
        };
        let mut reply = dispatch(&mut ctx, args);
        if let Some(mut blocked) = self.client.blocked.take() {
            self.server.blocking.unblock(blocked.id, None);
            reply = Reply::NoReply;
            // A script's reply comes from the script thread; a key's waiter's from the
            // unblock above. Waits a bounded time either way.
            for _ in 0..2000 {
                match blocked.reply.try_recv() {
                    Ok(r) => {
                        reply = r;
                        break;
                    }
                    Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {
                        std::thread::sleep(std::time::Duration::from_millis(1))
                    }
                    Err(_) => break,
                }
            }
            self.server.blocking.forget(blocked.id);
        }
        self.out.clear();
        reply.encode(&mut self.out, self.client.resp3);
        check_encoding(&self.out, self.client.resp3);
        reply
    }

    pub fn run_strs(&mut self, args: &[&str]) -> Reply {
        let args: Vec<Bytes> = args
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        self.run(&args)
    }

    /// Back to a fresh connection on an empty server, so that an input's outcome does not
    /// depend on the inputs before it.
    pub fn reset(&mut self) {
        self.run_strs(&["RESET"]);
        self.run_strs(&["FLUSHALL"]);
    }
}

/// Splits fuzz bytes into fields at 0xFF bytes (never in UTF-8 text, so JSON seeds stay
/// readable in the corpus).
pub fn fields(data: &[u8]) -> Vec<&[u8]> {
    data.split(|&b| b == 0xFF).collect()
}

/// A reply's bytes must be whole RESP frames, nothing more or less: a malformed reply
/// desynchronizes the client for the rest of the connection. RESP2 replies may use only
/// RESP2's types.
pub fn check_encoding(out: &[u8], resp3: bool) {
    let mut at = 0;
    while at < out.len() {
        match frame(out, at, resp3, 0) {
            Some(next) => at = next,
            None => panic!(
                "malformed {} reply at byte {at}: {:?}",
                if resp3 { "RESP3" } else { "RESP2" },
                String::from_utf8_lossy(out)
            ),
        }
    }
}

/// The end of the frame starting at `at`, or `None` when it is not well formed.
fn frame(b: &[u8], at: usize, resp3: bool, depth: usize) -> Option<usize> {
    if depth > 10_000 {
        return None;
    }
    let kind = *b.get(at)?;
    let rest = b.get(at + 1..)?;
    let nl = rest.windows(2).position(|w| w == b"\r\n")?;
    let line = &rest[..nl];
    let after = at + 1 + nl + 2;
    let int = || -> Option<i64> { std::str::from_utf8(line).ok()?.parse().ok() };
    let no_crlf = || !line.contains(&b'\r') && !line.contains(&b'\n');
    match kind {
        b'+' | b'-' if no_crlf() => Some(after),
        b':' => int().map(|_| after),
        b'$' => match int()? {
            -1 => Some(after),
            n if n >= 0 => {
                let end = after + n as usize;
                (b.get(end..end + 2)? == b"\r\n").then_some(end + 2)
            }
            _ => None,
        },
        b'*' => match int()? {
            -1 => Some(after),
            n if n >= 0 => (0..n).try_fold(after, |p, _| frame(b, p, resp3, depth + 1)),
            _ => None,
        },
        _ if !resp3 => None,
        b'_' => line.is_empty().then_some(after),
        b'#' => matches!(line, b"t" | b"f").then_some(after),
        b',' => {
            let t = std::str::from_utf8(line).ok()?;
            (matches!(t, "inf" | "-inf" | "nan") || t.parse::<f64>().is_ok()).then_some(after)
        }
        b'(' => {
            let t = line.strip_prefix(b"-").unwrap_or(line);
            (!t.is_empty() && t.iter().all(u8::is_ascii_digit)).then_some(after)
        }
        b'=' | b'!' => {
            let n = usize::try_from(int()?).ok()?;
            let end = after + n;
            if kind == b'=' && (n < 4 || b.get(after + 3) != Some(&b':')) {
                return None;
            }
            (b.get(end..end + 2)? == b"\r\n").then_some(end + 2)
        }
        b'~' | b'>' => {
            let n = usize::try_from(int()?).ok()?;
            (0..n).try_fold(after, |p, _| frame(b, p, resp3, depth + 1))
        }
        b'%' | b'|' => {
            let n = usize::try_from(int()?).ok()?;
            let end = (0..2 * n).try_fold(after, |p, _| frame(b, p, resp3, depth + 1))?;
            // An attribute is followed by the value it describes.
            if kind == b'|' {
                frame(b, end, resp3, depth + 1)
            } else {
                Some(end)
            }
        }
        _ => None,
    }
}
