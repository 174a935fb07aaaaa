//! The Lua debugger (LDB) of EVAL scripts: `SCRIPT DEBUG SYNC`, as Redis 7's `ldb*` functions
//! in `eval.c`.
//!
//! **Sync sessions only.** Redis's `SCRIPT DEBUG YES` forks a child that runs the script on a
//! copy of the data set (its writes are thrown away) while the parent goes on serving
//! others. This server cannot fork, and running a YES session as a sync one would keep
//! writes the user was promised to lose, so `SCRIPT DEBUG YES` is refused with an error that
//! names SYNC. `SCRIPT DEBUG SYNC` is Redis's: the server serves no other command while the
//! session lasts (the script holds the exec gate exclusively, as any script does; other
//! clients wait for it and, past `busy-reply-threshold`, hear `-BUSY` as during a long
//! script), the data set keeps the script's writes, and the connection is closed once the
//! EVAL's reply is sent.
//!
//! **Where it runs.** A client in debug mode whose next request is EVAL (or EVAL_RO) does not
//! go through the dispatcher of its connection: the connection writes out what it owes,
//! then hands the request, its client state and a blocking duplicate of its socket to
//! [`run`], which starts a thread for the session. That thread dispatches the EVAL as the
//! script thread would (checks, exclusive gate, journal record) and, while the script runs,
//! talks to the client directly over the socket, as Redis does in its Lua hook (`connBlock`
//! and direct reads and writes): the session never needs the runtime's I/O, so it cannot be
//! held up by whatever else the runtime's threads wait on (a command waiting for the gate
//! the session holds blocks its whole thread). TLS connections have no plain socket to hand
//! over: their EVAL answers an error and debug mode is turned off.
//!
//! **The session.** The script runs with a Lua hook on every line and every 100,000
//! instructions, installed for that run only (ordinary scripts keep their instruction hook
//! alone and pay nothing). It stops before the first line, at breakpoints, after a `step`,
//! after `redis.breakpoint()`, and when a run without stops goes past
//! `busy-reply-threshold` (5 s when 0), as Redis's `luaLdbLineHook`. At a stop it sends the
//! log (an array of status replies) and reads debugger commands, each a RESP array, with
//! Redis's forgiving parser (`ldbReplParseCommand`: arguments of 1 to 1024 bytes, at most
//! 1024 of them; anything else is "protocol error", which ends the script; what follows
//! the parsed command in the same read is dropped, as Redis does). The command names are
//! compared whole, so an argument holding a NUL byte is an unknown command. A client that
//! goes away mid-session lets the script run to its end without further stops (Redis's
//! behaviour: the data set stays consistent, and an endless loop is still ended at its next
//! timeout stop with "timeout during Lua debugging with client closing connection"); then
//! the gate is released and the server serves others. SCRIPT KILL still reaches a session's
//! script through the instruction hook.
use super::{interrupt, raise, root_error};
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::{Lua, MultiValue, Table, Value};
use std::cell::RefCell;
use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Redis's `LDB_BREAKPOINTS_MAX`.
const BREAKPOINTS_MAX: usize = 64;
/// Redis's `LDB_MAX_LEN_DEFAULT`: replies and values logged are trimmed to this.
const MAX_LEN_DEFAULT: usize = 256;
/// Redis's `LDB_MAX_VALUES_DEPTH` (`LUA_MINSTACK/2`).
const MAX_VALUES_DEPTH: usize = 10;
/// A client that sends this much without a complete command ends the script.
const CBUF_MAX: usize = 1 << 20;
/// Redis's `connSendTimeout(ldb.conn, 5000)` for the session's writes.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The state of the session on its thread (Redis's global `ldb`).
struct Session {
    sock: std::net::TcpStream,
    /// Input not parsed yet.
    cbuf: Vec<u8>,
    /// Entries to send at the next stop (or at the end).
    logs: Vec<Vec<u8>>,
    bp: Vec<i64>,
    /// Stop at the next line whatever the breakpoints.
    step: bool,
    /// `redis.breakpoint()` was called: stop at the next line.
    luabp: bool,
    /// The script's source, one entry a line.
    src: Vec<Vec<u8>>,
    currentline: i64,
    maxlen: usize,
    maxlen_hint_sent: bool,
    /// The EVAL reached its run (an EVAL refused before, e.g. by ACL, starts no session).
    started: bool,
    /// The scripts' environment, for `eval`.
    env: Option<Table>,
    /// When the script last resumed (the timeout stop counts from there).
    resumed: Instant,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's session, if any (never while another call holds it).
fn with<R>(f: impl FnOnce(&mut Session) -> R) -> Option<R> {
    SESSION.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => s.as_mut().map(f),
        Err(_) => None,
    })
}

/// A session is running on this thread (Redis's `ldb.active`).
pub fn active() -> bool {
    SESSION.with(|s| s.try_borrow().map(|s| s.is_some()).unwrap_or(false))
}

/// Commands a script calls are logged with their replies (Redis's `ldbIsEnabled`: a
/// session, stepping).
pub fn enabled() -> bool {
    with(|s| s.step).unwrap_or(false)
}

impl Session {
    fn log(&mut self, entry: impl Into<Vec<u8>>) {
        self.logs.push(entry.into());
    }

    /// Redis's `ldbLogWithMaxLen`.
    fn log_max(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen > 0 && entry.len() > self.maxlen {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.log(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
        }
    }

    /// Redis's `ldbSendLogs`: the entries as an array of status replies (CR and LF made
    /// spaces). A write error is left for the next read to find, as Redis does.
    fn send_logs(&mut self) {
        let mut out = format!("*{}\r\n", self.logs.len()).into_bytes();
        for entry in self.logs.drain(..) {
            out.push(b'+');
            out.extend(
                entry
                    .iter()
                    .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
            );
            out.extend_from_slice(b"\r\n");
        }
        let _ = self.sock.write_all(&out);
    }

    fn source_line(&self, line: i64) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    /// Redis's `ldbLogSourceLine`.
    fn log_source_line(&mut self, line: i64) {
        let bp = self.bp.contains(&line);
        let current = self.currentline == line;
        let prefix = match (current, bp) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut entry = format!("{prefix}{line:<3} ").into_bytes();
        entry.extend_from_slice(self.source_line(line));
        self.log(entry);
    }

    /// Redis's `ldbList`.
    fn list(&mut self, around: i64, context: i64) {
        for j in 1..=self.src.len() as i64 {
            if around != 0 && (around - j).abs() > context {
                continue;
            }
            self.log_source_line(j);
        }
    }

    /// Redis's `ldbBreak`.
    fn breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.bp.is_empty() {
                self.log("No breakpoints set. Use 'b <line>' to add one.");
            } else {
                self.log(format!("{} breakpoints set:", self.bp.len()));
                for line in self.bp.clone() {
                    self.log_source_line(line);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = crate::util::num::parse_i64(arg) else {
                let mut e = b"Invalid argument:'".to_vec();
                e.extend_from_slice(arg);
                e.push(b'\'');
                self.log(e);
                continue;
            };
            if line == 0 {
                self.bp.clear();
                self.log("All breakpoints removed.");
            } else if line > 0 {
                if self.bp.len() == BREAKPOINTS_MAX {
                    self.log("Too many breakpoints set.");
                } else if line <= self.src.len() as i64 && !self.bp.contains(&line) {
                    self.bp.push(line);
                    self.list(line, 1);
                } else {
                    self.log("Wrong line number.");
                }
            } else if let Some(i) = self.bp.iter().position(|&b| b == -line) {
                self.bp.remove(i);
                self.log("Breakpoint removed.");
            } else {
                self.log("No breakpoint in the specified line.");
            }
        }
    }

    /// Redis's `ldbMaxlen`.
    fn set_maxlen(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut n = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if n != 0 && n <= 60 {
                n = 60;
            }
            self.maxlen = n as usize;
        }
        if self.maxlen > 0 {
            self.log(format!(
                "<value> replies are truncated at {} bytes.",
                self.maxlen
            ));
        } else {
            self.log("<value> replies are unlimited.");
        }
    }
}

/// C's `atoi` (leading blanks, a sign, digits; 0 when none), clamped to `i32`.
fn atoi(s: &[u8]) -> i64 {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut n: i64 = 0;
    while let Some(d) = s.get(i).filter(|c| c.is_ascii_digit()) {
        n = (n * 10 + (d - b'0') as i64).min(i32::MAX as i64 + 1);
        i += 1;
    }
    let n = if neg { -n } else { n };
    n.clamp(i32::MIN as i64, i32::MAX as i64)
}

/// What [`parse_command`] found in the input.
enum Parsed {
    Command(Vec<Vec<u8>>),
    More,
    Error,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Redis's `ldbReplParseCommand`: a multibulk of 1 to 1024 arguments of 1 to 1024 bytes,
/// found from the first `*` of the input; forgiving about what precedes it. The C version
/// works on a NUL-terminated copy, so its searches stop at a NUL byte: so do these.
fn parse_command(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::More;
    }
    let text = match buf.iter().position(|&c| c == 0) {
        Some(nul) => &buf[..nul],
        None => buf,
    };
    let Some(star) = text.iter().position(|&c| c == b'*') else {
        return Parsed::Error;
    };
    let mut p = star + 1;
    let Some(end) = find(&text[p..], b"\r\n") else {
        return Parsed::More;
    };
    let argc = atoi(&buf[p..p + end]);
    if !(1..=1024).contains(&argc) {
        return Parsed::Error;
    }
    p += end + 2;
    let mut argv = Vec::new();
    while (argv.len() as i64) < argc {
        match buf.get(p) {
            None | Some(0) => return Parsed::More,
            Some(b'$') => {}
            Some(_) => return Parsed::Error,
        }
        let from = p + 1;
        let stop = buf[from..]
            .iter()
            .position(|&c| c == 0)
            .map_or(buf.len(), |n| from + n);
        let Some(end) = find(&buf[from..stop], b"\r\n") else {
            return Parsed::More;
        };
        let len = atoi(&buf[from..from + end]);
        if !(1..=1024).contains(&len) {
            return Parsed::Error;
        }
        p = from + end + 2;
        let len = len as usize;
        if p + len + 2 > buf.len() {
            return Parsed::More;
        }
        argv.push(buf[p..p + len].to_vec());
        p += len;
        if &buf[p..p + 2] != b"\r\n" {
            return Parsed::Error;
        }
        p += 2;
    }
    Parsed::Command(argv)
}

// ---------------------------------------------------------------------------------------------
// What scripts and `redis.call` log.

/// `redis.breakpoint()`: stop at the next line; false outside a session.
pub fn breakpoint() -> bool {
    with(|s| s.luabp = true).is_some()
}

/// `redis.debug(...)`: logs its arguments (nothing outside a session).
pub fn debug(args: &MultiValue) {
    if !active() {
        return;
    }
    let line = with(|s| s.currentline).unwrap_or(0);
    let mut entry = format!("<debug> line {line}: ").into_bytes();
    for (i, v) in args.iter().enumerate() {
        if i > 0 {
            entry.extend_from_slice(b", ");
        }
        cat_value(&mut entry, v, 0);
    }
    with(|s| s.log(entry));
}

/// A command a script calls, while stepping: `<redis> name args...` (ten at most).
pub fn log_command(argv: &[Bytes]) {
    let mut entry = b"<redis>".to_vec();
    for (j, a) in argv.iter().enumerate() {
        if j == 10 {
            entry.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
            break;
        }
        entry.push(b' ');
        entry.extend_from_slice(a);
    }
    with(|s| s.log(entry));
}

/// An error raised by `redis.call` itself (unknown command, not allowed...), while stepping.
pub fn log_error(msg: &str) {
    with(|s| s.log(format!("<error> {msg}")));
}

/// A command's reply, while stepping, in Redis's human form (`ldbRedisProtocolToHuman`).
pub fn log_reply(reply: &Reply, resp3: bool) {
    let mut buf = bytes::BytesMut::new();
    reply.encode(&mut buf, resp3);
    let mut out = b"<reply> ".to_vec();
    let mut pos = 0;
    human(&mut out, &buf, &mut pos);
    with(|s| s.log_max(out));
}

/// `sdscatrepr`: quoted, with escapes.
fn repr(out: &mut Vec<u8>, b: &[u8]) {
    let mut s = String::new();
    crate::util::sds::repr(&mut s, b);
    out.extend_from_slice(s.as_bytes());
}

/// One RESP value of `r` at `pos` in Redis's debugger notation.
fn human(out: &mut Vec<u8>, r: &[u8], pos: &mut usize) {
    let start = *pos;
    let Some(kind) = r.get(start).copied() else {
        return;
    };
    let eol = find(&r[start..], b"\r\n").map_or(r.len(), |n| start + n);
    let head = &r[(start + 1).min(eol)..eol];
    *pos = (eol + 2).min(r.len());
    let count = |h: &[u8]| crate::util::num::parse_i64(h).unwrap_or(0);
    let items = |out: &mut Vec<u8>, pos: &mut usize, n: i64, sep: &[u8]| {
        for j in 0..n.max(0) {
            human(out, r, pos);
            if j != n - 1 {
                out.extend_from_slice(sep);
            }
        }
    };
    match kind {
        b':' | b'(' => out.extend_from_slice(head),
        b'$' | b'=' => {
            let n = count(head);
            if n < 0 {
                out.extend_from_slice(b"NULL");
            } else {
                let n = n as usize;
                let data = r.get(*pos..(*pos + n).min(r.len())).unwrap_or(&[]);
                repr(out, data);
                *pos = (*pos + n + 2).min(r.len());
            }
        }
        b'+' | b'-' => repr(out, &r[start..eol]),
        b'*' | b'>' => {
            let n = count(head);
            if n < 0 {
                out.extend_from_slice(b"NULL");
            } else {
                out.push(b'[');
                items(out, pos, n, b",");
                out.push(b']');
            }
        }
        b'~' => {
            out.extend_from_slice(b"~(");
            items(out, pos, count(head), b",");
            out.push(b')');
        }
        b'%' => {
            let n = count(head);
            out.push(b'{');
            for j in 0..n.max(0) {
                human(out, r, pos);
                out.extend_from_slice(b" => ");
                human(out, r, pos);
                if j != n - 1 {
                    out.push(b',');
                }
            }
            out.push(b'}');
        }
        b'_' => out.extend_from_slice(b"(null)"),
        b'#' => out.extend_from_slice(if head == b"t" { b"#true" } else { b"#false" }),
        b',' => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(head);
        }
        _ => {}
    }
}

/// Redis's `ldbCatStackValue`: a Lua value as the debugger shows it.
fn cat_value(out: &mut Vec<u8>, v: &Value, level: usize) {
    if level == MAX_VALUES_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let level = level + 1;
    match v {
        Value::String(s) => repr(out, &s.as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => out.extend_from_slice(super::fmt_g(*n, 6).as_bytes()),
        Value::Integer(n) => out.extend_from_slice(super::fmt_g(*n as f64, 6).as_bytes()),
        Value::Nil => out.extend_from_slice(b"nil"),
        Value::Table(t) => {
            // Both forms are built in one pass, as Redis does; the array one is used when
            // the keys were 1, 2, 3... in iteration order.
            let mut expected = 1.0;
            let mut is_array = true;
            let (mut as_array, mut as_map) = (Vec::new(), Vec::new());
            for pair in t.clone().pairs::<Value, Value>() {
                let Ok((k, val)) = pair else { break };
                let index = match k {
                    Value::Integer(i) => Some(i as f64),
                    Value::Number(n) => Some(n),
                    _ => None,
                };
                if is_array && index != Some(expected) {
                    is_array = false;
                }
                cat_value(&mut as_array, &val, level);
                as_array.extend_from_slice(b"; ");
                as_map.push(b'[');
                cat_value(&mut as_map, &k, level);
                as_map.extend_from_slice(b"]=");
                cat_value(&mut as_map, &val, level);
                as_map.extend_from_slice(b"; ");
                expected += 1.0;
            }
            let chosen = if is_array { as_array } else { as_map };
            out.push(b'{');
            out.extend_from_slice(&chosen[..chosen.len().saturating_sub(2)]);
            out.push(b'}');
        }
        other => {
            let name = match other {
                Value::Function(_) => "function",
                Value::UserData(_) => "userdata",
                Value::Thread(_) => "thread",
                Value::LightUserData(_) => "light-userdata",
                _ => "unknown",
            };
            out.extend_from_slice(format!("\"{name}@{:p}\"", other.to_pointer()).as_bytes());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The hook and the debugger's commands.

/// Called by `eval_generic` for an EVAL on a session's thread: the session starts (its
/// source split in lines, as Redis keeps it for `list`). False when there is no session.
pub fn begin(body: &[u8]) -> bool {
    with(|s| {
        let mut body = body;
        while let Some(b) = body
            .strip_suffix(b"\n")
            .or_else(|| body.strip_suffix(b"\r"))
        {
            body = b;
        }
        s.src = body.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
        s.started = true;
        s.resumed = Instant::now();
    })
    .is_some()
}

/// The environment scripts run in, for the debugger's `eval` and `redis`.
pub fn set_env(env: &Table) {
    with(|s| s.env = Some(env.clone()));
}

/// The hook of a debugged run (every line, and every 100,000 instructions): Redis's
/// `luaLdbLineHook`.
pub fn hook(lua: &Lua, ar: &mlua::debug::Debug) -> mlua::Result<mlua::VmState> {
    let count = matches!(ar.event(), mlua::debug::DebugEvent::Count);
    if count {
        // SCRIPT KILL and the run's other checks, as the ordinary instruction hook.
        interrupt()?;
    }
    let line = ar.current_line().map_or(-1, |l| l as i64);
    let user = ar
        .source()
        .short_src
        .as_deref()
        .is_some_and(|s| s.contains("user_script"));
    let mut timeout = false;
    let stopped = with(|s| {
        s.currentline = line;
        if !user {
            return false;
        }
        let bp = s.bp.contains(&line) || s.luabp;
        if count && !s.step && !bp {
            let limit = match crate::state::BUSY_REPLY_THRESHOLD_MS.load(Ordering::Relaxed) {
                0 => 5000,
                ms => ms,
            };
            if s.resumed.elapsed() < Duration::from_millis(limit) {
                return false;
            }
            timeout = true;
            s.step = true;
        }
        if !(s.step || bp) {
            return false;
        }
        let reason = if bp {
            if s.luabp {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        s.step = false;
        s.luabp = false;
        s.log(format!("* Stopped at {line}, stop reason = {reason}"));
        s.log_source_line(line);
        s.send_logs();
        true
    })
    .unwrap_or(false);
    if !stopped {
        return Ok(mlua::VmState::Continue);
    }
    let connected = repl(lua)?;
    if !connected && timeout {
        return Err(raise(
            "timeout during Lua debugging with client closing connection",
        ));
    }
    with(|s| s.resumed = Instant::now());
    Ok(mlua::VmState::Continue)
}

/// The next command from the client: Ok(None) once it went away.
fn read_command() -> mlua::Result<Option<Vec<Vec<u8>>>> {
    loop {
        let parsed = with(|s| parse_command(&s.cbuf)).unwrap_or(Parsed::Error);
        match parsed {
            Parsed::Command(argv) => {
                // Redis empties its whole buffer after a command.
                with(|s| s.cbuf.clear());
                return Ok(Some(argv));
            }
            Parsed::Error => return Err(raise("protocol error")),
            Parsed::More => {}
        }
        let mut buf = [0u8; 1024];
        let got = with(|s| loop {
            match s.sock.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        });
        let n = match got {
            Some(Ok(n)) if n > 0 => n,
            _ => {
                // The client is gone: the script runs on without stops.
                with(|s| {
                    s.step = false;
                    s.bp.clear();
                });
                return Ok(None);
            }
        };
        let over = with(|s| {
            s.cbuf.extend_from_slice(&buf[..n]);
            if s.cbuf.len() > CBUF_MAX {
                s.cbuf = Vec::new();
                true
            } else {
                false
            }
        })
        .unwrap_or(true);
        if over {
            return Err(raise("max client buffer reached"));
        }
    }
}

/// Redis's `ldbRepl`: serves debugger commands until one resumes the script. Ok(false)
/// when the client went away.
fn repl(lua: &Lua) -> mlua::Result<bool> {
    loop {
        let Some(argv) = read_command()? else {
            return Ok(false);
        };
        let name = argv[0].to_ascii_lowercase();
        let is = |short: &str, long: &str| name == short.as_bytes() || name == long.as_bytes();
        if is("h", "help") {
            with(|s| {
                for line in HELP {
                    s.log(*line);
                }
                s.send_logs();
            });
        } else if is("s", "step") || is("n", "next") {
            with(|s| s.step = true);
            return Ok(true);
        } else if is("c", "continue") {
            return Ok(true);
        } else if is("t", "trace") {
            trace(lua);
            with(Session::send_logs);
        } else if is("m", "maxlen") {
            with(|s| {
                s.set_maxlen(&argv);
                s.send_logs();
            });
        } else if is("b", "break") {
            with(|s| {
                s.breakpoints(&argv);
                s.send_logs();
            });
        } else if is("e", "eval") {
            eval(lua, &argv);
            with(Session::send_logs);
        } else if is("a", "abort") {
            return Err(raise("script aborted for user request"));
        } else if argv.len() > 1 && is("r", "redis") {
            redis(lua, &argv);
            with(Session::send_logs);
        } else if is("p", "print") {
            if argv.len() == 2 {
                print_var(lua, &argv[1]);
            } else {
                print_all(lua);
            }
            with(Session::send_logs);
        } else if is("l", "list") {
            with(|s| {
                let mut around = s.currentline;
                let mut context = 5;
                if argv.len() > 1 {
                    let n = atoi(&argv[1]);
                    if n > 0 {
                        around = n;
                    }
                }
                if argv.len() > 2 {
                    context = atoi(&argv[2]);
                }
                s.list(around, context);
                s.send_logs();
            });
        } else if is("w", "whole") {
            with(|s| {
                s.list(1, 1_000_000);
                s.send_logs();
            });
        } else {
            with(|s| {
                s.log("<error> Unknown Redis Lua debugger command or wrong number of arguments.");
                s.send_logs();
            });
        }
    }
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// A value logged with a prefix, trimmed to `maxlen` (Redis's `ldbLogStackValue`).
fn log_value(prefix: &[u8], v: &Value) {
    let mut entry = prefix.to_vec();
    cat_value(&mut entry, v, 0);
    with(|s| s.log_max(entry));
}

/// `eval <code>`: compiled as an expression (`return <code>`), else as a statement, run in
/// the scripts' environment, its first result shown (Redis's `ldbEval`).
fn eval(lua: &Lua, argv: &[Vec<u8>]) {
    let code = argv[1..].join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    let Some(env) = with(|s| s.env.clone()).flatten() else {
        return;
    };
    let load = |src: &[u8]| {
        lua.load(src)
            .set_name("@ldb_eval")
            .set_environment(env.clone())
            .into_function()
    };
    let func = match load(&expr).or_else(|_| load(&code)) {
        Ok(f) => f,
        Err(e) => {
            let msg = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                e => e.to_string(),
            };
            with(|s| s.log(format!("<error> {msg}")));
            return;
        }
    };
    match func.call::<Value>(()) {
        Ok(v) => log_value(b"<retval> ", &v),
        Err(e) => {
            // The message alone, as Lua's own `lua_tostring` of the error: mlua appends
            // a traceback.
            let msg = root_error(&e);
            let msg = msg.split("\nstack traceback:").next().unwrap_or_default();
            with(|s| s.log(format!("<error> {msg}")));
        }
    }
}

/// `redis <cmd...>`: runs the command through `redis.call` with logging on, so the command
/// and its reply (or error) are logged as a script's would be (Redis's `ldbRedis`).
fn redis(lua: &Lua, argv: &[Vec<u8>]) {
    let Some(env) = with(|s| s.env.clone()).flatten() else {
        return;
    };
    let call = env
        .get::<Table>("redis")
        .and_then(|r| r.get::<mlua::Function>("call"));
    let Ok(call) = call else {
        return;
    };
    let mut args = MultiValue::new();
    for a in &argv[1..] {
        match lua.create_string(a) {
            Ok(s) => args.push_back(Value::String(s)),
            Err(_) => return,
        }
    }
    with(|s| s.step = true);
    let _ = call.call::<Value>(args);
    with(|s| s.step = false);
}

/// `trace`: the script's frames, innermost first (Redis's `ldbTrace`).
fn trace(lua: &Lua) {
    let mut level = 0;
    let mut found = 0;
    while let Some((user, name, line)) = lua.inspect_stack(level, |d| {
        let src = d.source();
        let user = src
            .short_src
            .as_deref()
            .is_some_and(|s| s.contains("user_script"));
        // The script's own chunk is called by this server's runner, not from C as in
        // Redis: it is the top level whatever name its caller gave it.
        let name = if src.what == "main" {
            None
        } else {
            d.names().name.map(|n| n.into_owned())
        };
        (user, name, d.current_line().map_or(-1, |l| l as i64))
    }) {
        if user {
            let label = if found == 0 { "In" } else { "From" };
            let name = name.unwrap_or_else(|| "top level".into());
            with(|s| {
                s.log(format!("{label} {name}:"));
                s.log_source_line(line);
            });
            found += 1;
        }
        level += 1;
    }
    if level == 0 {
        with(|s| s.log("<error> Can't retrieve Lua stack."));
    }
}

/// The locals of the script's frames, innermost first, each frame's as (name, value) in
/// order (`first`: the innermost frame only). Lua's `lua_getlocal` has no safe wrapper in
/// mlua (and the `debug` library cannot be loaded into a safe state), hence the raw call;
/// it only reads the stack and pushes copies of the values.
fn frame_locals(lua: &Lua, first: bool) -> Vec<Vec<(Vec<u8>, Value)>> {
    use mlua::ffi;
    // SAFETY: the closure runs as a protected C function on this state's own stack; every
    // push is preceded by `lua_checkstack`, `ar` is filled by `lua_getstack` before use,
    // and the names are NUL-terminated strings owned by Lua, copied at once.
    let values = unsafe {
        lua.exec_raw::<MultiValue>((), |state| {
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            let mut level = 0;
            let mut frames = 0;
            while ffi::lua_getstack(state, level, &mut ar) != 0 {
                level += 1;
                if ffi::lua_getinfo(state, c"S".as_ptr(), &mut ar) == 0 || ar.source.is_null() {
                    continue;
                }
                if std::ffi::CStr::from_ptr(ar.source).to_bytes() != b"@user_script" {
                    continue;
                }
                if first && frames == 1 {
                    break;
                }
                frames += 1;
                if ffi::lua_checkstack(state, 1) == 0 {
                    return;
                }
                // A frame starts with `false`; then name, value pairs.
                ffi::lua_pushboolean(state, 0);
                let mut i = 1;
                loop {
                    if ffi::lua_checkstack(state, 2) == 0 {
                        return;
                    }
                    let name = ffi::lua_getlocal(state, &ar, i);
                    if name.is_null() {
                        break;
                    }
                    ffi::lua_pushstring(state, name);
                    ffi::lua_insert(state, -2);
                    i += 1;
                }
            }
        })
    };
    let mut frames: Vec<Vec<(Vec<u8>, Value)>> = Vec::new();
    let Ok(values) = values else {
        return frames;
    };
    let mut it = values.into_iter();
    while let Some(v) = it.next() {
        match v {
            Value::Boolean(false) => frames.push(Vec::new()),
            Value::String(name) => {
                let value = it.next().unwrap_or(Value::Nil);
                if let Some(f) = frames.last_mut() {
                    f.push((name.as_bytes().to_vec(), value));
                }
            }
            _ => {}
        }
    }
    frames
}

/// `print <var>`: the first local of that name from the current frame outwards, else the
/// globals KEYS and ARGV (Redis's `ldbPrint`).
fn print_var(lua: &Lua, name: &[u8]) {
    for frame in frame_locals(lua, false) {
        if let Some((_, v)) = frame.iter().find(|(n, _)| n == name) {
            log_value(b"<value> ", v);
            return;
        }
    }
    if name == b"ARGV" || name == b"KEYS" {
        let name = String::from_utf8_lossy(name);
        let v = lua.globals().raw_get::<Value>(&*name).unwrap_or(Value::Nil);
        log_value(b"<value> ", &v);
    } else {
        with(|s| s.log("No such variable."));
    }
}

/// `print`: every local of the current frame (Redis's `ldbPrintAll`).
fn print_all(lua: &Lua) {
    let mut vars = 0;
    if let Some(frame) = frame_locals(lua, true).into_iter().next() {
        for (name, v) in frame {
            if name.windows(12).any(|w| w == b"(*temporary)") {
                continue;
            }
            let mut prefix = b"<value> ".to_vec();
            prefix.extend_from_slice(&name);
            prefix.extend_from_slice(b" = ");
            log_value(&prefix, &v);
            vars += 1;
        }
    }
    if vars == 0 {
        with(|s| s.log("No local variables in the current context."));
    }
}

// ---------------------------------------------------------------------------------------------
// The session's thread and the connection's side.

/// Whether the connection hands `args` to a debugging session: EVAL or EVAL_RO from a client
/// in debug mode, outside MULTI (a queued EVAL runs under EXEC as any).
pub fn starts_session(client: &crate::state::client::ClientState, args: &[Bytes]) -> bool {
    client.script_debug
        && client.multi.is_none()
        && (args[0].eq_ignore_ascii_case(b"eval") || args[0].eq_ignore_ascii_case(b"eval_ro"))
}

/// What a session gives back to its connection.
pub struct Done {
    pub client: crate::state::client::ClientState,
    /// The EVAL's reply, to be written after the session's last log.
    pub reply: Reply,
    /// The session ran (the connection then closes after the reply, as Redis's sync mode);
    /// false when the EVAL was refused before its run (ACL, arity...): debug mode stays.
    pub ended: bool,
}

/// Runs a debugging session for `argv` (an EVAL) on a thread of its own, talking to the
/// client over `sock` (a duplicate of the connection's socket; `pending`: input already
/// read after the EVAL). The connection must not touch its socket until this returns.
/// None if the thread could not start (the client state is then lost: the connection
/// closes).
pub async fn run(
    server: &Arc<crate::state::Server>,
    client: crate::state::client::ClientState,
    argv: Vec<Bytes>,
    sock: std::net::TcpStream,
    pending: Vec<u8>,
) -> Option<Done> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = server.clone();
    let runtime = tokio::runtime::Handle::try_current().ok();
    let spawned = std::thread::Builder::new()
        .name("ldb".into())
        .stack_size(super::STACK_SIZE)
        .spawn(move || {
            let _rt = runtime.as_ref().map(|h| h.enter());
            let _ = tx.send(session(&server, client, &argv, sock, pending));
        });
    if let Err(e) = spawned {
        tracing::warn!("could not start a Lua debugging session: {e}");
        return None;
    }
    rx.await.ok()
}

/// The session's thread: the EVAL through the dispatcher, the script run under the hook.
fn session(
    server: &Arc<crate::state::Server>,
    mut client: crate::state::client::ClientState,
    argv: &[Bytes],
    sock: std::net::TcpStream,
    pending: Vec<u8>,
) -> Done {
    // Blocking reads and writes for the session (the socket's flags are shared with the
    // connection's, which is idle meanwhile); restored before the connection gets it back.
    let _ = sock.set_nonblocking(false);
    let _ = sock.set_write_timeout(Some(SEND_TIMEOUT));
    let restore = sock.try_clone();
    SESSION.with(|s| {
        *s.borrow_mut() = Some(Session {
            sock,
            cbuf: pending,
            logs: Vec::new(),
            bp: Vec::new(),
            step: true,
            luabp: false,
            src: Vec::new(),
            currentline: -1,
            maxlen: MAX_LEN_DEFAULT,
            maxlen_hint_sent: false,
            started: false,
            env: None,
            resumed: Instant::now(),
        })
    });
    super::SCRIPT_THREAD.with(|c| c.set(true));
    let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut ctx = crate::commands::Ctx {
            server,
            client: &mut client,
        };
        crate::commands::dispatch(&mut ctx, argv)
    }))
    .unwrap_or_else(|_| Reply::error("ERR the debugging session failed"));
    let started = with(|s| {
        if s.started {
            tracing::warn!("Redis synchronous debugging eval session ended");
            s.log("<endsession>");
            s.send_logs();
        }
        s.started
    })
    .unwrap_or(false);
    // Drops the session (its Lua handles too) before the thread ends.
    SESSION.with(|s| s.borrow_mut().take());
    if let Ok(sock) = restore {
        let _ = sock.set_write_timeout(None);
        let _ = sock.set_nonblocking(true);
    }
    Done {
        client,
        reply,
        ended: started,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(p: Parsed) -> Option<Vec<Vec<u8>>> {
        match p {
            Parsed::Command(a) => Some(a),
            _ => None,
        }
    }

    #[test]
    fn parses_as_redis_does() {
        assert_eq!(
            cmd(parse_command(b"*2\r\n$1\r\np\r\n$3\r\nfoo\r\n")),
            Some(vec![b"p".to_vec(), b"foo".to_vec()])
        );
        assert!(matches!(parse_command(b"*2\r\n$1\r\np\r\n"), Parsed::More));
        assert!(matches!(
            parse_command(b"*2\r\n$1\r\np\r\n$3\r\nfo"),
            Parsed::More
        ));
        assert!(matches!(parse_command(b"s\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*0\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Error));
        assert!(matches!(
            parse_command(b"*1\r\n$1\r\nab\r\n"),
            Parsed::Error
        ));
        // A NUL byte inside an argument is data.
        assert_eq!(
            cmd(parse_command(b"*1\r\n$3\r\na\0b\r\n")),
            Some(vec![b"a\0b".to_vec()])
        );
    }

    #[test]
    fn human_replies() {
        let mut out = Vec::new();
        let mut pos = 0;
        human(&mut out, b"*3\r\n:1\r\n$2\r\nhi\r\n$-1\r\n", &mut pos);
        assert_eq!(out, b"[1,\"hi\",NULL]");
        let mut out = Vec::new();
        let mut pos = 0;
        human(&mut out, b"-ERR x\r\n", &mut pos);
        assert_eq!(out, b"\"-ERR x\"");
    }

    #[test]
    fn atoi_is_c_atoi() {
        assert_eq!(atoi(b"12abc"), 12);
        assert_eq!(atoi(b" -7"), -7);
        assert_eq!(atoi(b"x"), 0);
    }
}
