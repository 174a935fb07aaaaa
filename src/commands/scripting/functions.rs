//! Redis 7.0 functions: FUNCTION LOAD|LIST|DELETE|FLUSH|DUMP|RESTORE|STATS|KILL|HELP and
//! FCALL/FCALL_RO (`functions.c`, `function_lua.c`).
//!
//! Libraries live in their own Lua state ([`FENGINE`], as Redis has one interpreter for
//! functions and another for EVAL): SCRIPT FLUSH does not touch them, FUNCTION FLUSH does not
//! touch the script cache. Loading a library runs its body once with the library API as the
//! only globals (`redis.register_function`, `redis.log`, the version fields); every global
//! lookup then goes through the same environment table whose index is switched back to the
//! full globals, so the callbacks a library registered see the runtime `redis` API when they
//! are called. The registry is the engine's ([`Registry`]): libraries by name (case-sensitive)
//! and functions by lower-cased name (FCALL is case-insensitive, as Redis's function dict).
//! The counts FUNCTION STATS shows are kept in atomics, since STATS runs while a function
//! holds the engine (it is one of the commands allowed during a busy script).

use super::*;
use crate::commands::text;
use crate::state::gate::{SCRIPT_EVAL, SCRIPT_FUNCTION};
use std::collections::{BTreeMap, HashMap};

pub(super) static FENGINE: Mutex<Option<Engine>> = Mutex::new(None);

static LIBRARIES: AtomicU64 = AtomicU64::new(0);
static FUNCTIONS: AtomicU64 = AtomicU64::new(0);
static FUNCTION_BYTES: AtomicU64 = AtomicU64::new(0);
static FUNCTION_VM: AtomicU64 = AtomicU64::new(0);

/// The function a run executes and its command (FUNCTION STATS's `running_script`).
static RUNNING: Mutex<Option<(String, Vec<Bytes>)>> = Mutex::new(None);

/// How long a library's body may run at FUNCTION LOAD (Redis's `LOAD_TIMEOUT_MS`).
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

const NAME_ERR: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Library count, function count, bytes of library code, memory of the functions' Lua state
/// (INFO memory).
pub fn stats() -> (u64, u64, u64, u64) {
    (
        LIBRARIES.load(Ordering::Relaxed),
        FUNCTIONS.load(Ordering::Relaxed),
        FUNCTION_BYTES.load(Ordering::Relaxed),
        FUNCTION_VM.load(Ordering::Relaxed),
    )
}

/// The functions engine's memory after a call (Lua's own count; see `scripting::run_script`).
pub(super) fn note_vm_memory(bytes: usize) {
    FUNCTION_VM.store(bytes as u64, Ordering::Relaxed);
}

pub(super) struct FunctionDef {
    pub name: String,
    /// In the Lua registry, as a cached script (see `scripting::Script`): a `Function`
    /// handle per loaded function would take a slot of mlua's bounded auxiliary stack.
    pub func: mlua::RegistryKey,
    pub desc: Option<String>,
    pub flags: u32,
}

pub(super) struct Library {
    code: Bytes,
    /// By name as registered.
    functions: BTreeMap<String, FunctionDef>,
}

#[derive(Default)]
pub(super) struct Registry {
    libraries: BTreeMap<String, Library>,
    /// Lower-cased function name → its library.
    owner: HashMap<String, String>,
}

impl Registry {
    pub(super) fn function(&self, name: &str) -> Option<&FunctionDef> {
        let lower = name.to_ascii_lowercase();
        let lib = self.owner.get(&lower)?;
        self.libraries
            .get(lib)?
            .functions
            .values()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    fn unlink(&mut self, lib: &str) -> Option<Library> {
        let l = self.libraries.remove(lib)?;
        for f in l.functions.keys() {
            self.owner.remove(&f.to_ascii_lowercase());
        }
        Some(l)
    }

    fn link(&mut self, name: String, lib: Library) {
        for f in lib.functions.keys() {
            self.owner.insert(f.to_ascii_lowercase(), name.clone());
        }
        self.libraries.insert(name, lib);
    }

    fn collides(&self, lib: &Library) -> Option<String> {
        lib.functions
            .keys()
            .find(|f| self.owner.contains_key(&f.to_ascii_lowercase()))
            .cloned()
    }
}

fn publish(eng: &Engine) {
    let reg = &eng.functions;
    LIBRARIES.store(reg.libraries.len() as u64, Ordering::Relaxed);
    FUNCTIONS.store(
        reg.libraries
            .values()
            .map(|l| l.functions.len() as u64)
            .sum(),
        Ordering::Relaxed,
    );
    FUNCTION_BYTES.store(
        reg.libraries
            .iter()
            .map(|(n, l)| (n.len() + l.code.len() + 64 * (1 + l.functions.len())) as u64)
            .sum(),
        Ordering::Relaxed,
    );
    FUNCTION_VM.store(eng.lua.used_memory() as u64, Ordering::Relaxed);
}

fn fengine(slot: &mut Option<Engine>) -> Result<&mut Engine, Reply> {
    if slot.is_none() {
        *slot = Some(Engine::new(true).map_err(|e| Reply::error(format!("ERR Lua init: {e}")))?);
    }
    Ok(slot.as_mut().expect("just set"))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `sdssplitargs` of the shebang line: words, with "double" and 'single' quoted parts.
fn split_args(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let mut cur = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '"' | '\'' => loop {
                    match chars.next() {
                        None => return None,
                        Some(q) if q == c => break,
                        Some('\\') if c == '"' => cur.extend(chars.next()),
                        Some(x) => cur.push(x),
                    }
                },
                _ => cur.push(c),
            }
        }
        out.push(cur);
    }
}

/// `functionExtractLibMetaData`: the library name and the code after the shebang line (the
/// newline kept, so line numbers hold).
fn metadata(code: &[u8]) -> Result<(String, String, usize), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let line = String::from_utf8_lossy(&code[..end]);
    let parts = match split_args(&line) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("Invalid library metadata".into()),
    };
    let engine = parts[0][2..].to_string();
    let mut name = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(p[5..].to_string());
            continue;
        }
        return Err(format!("Invalid metadata value given: {p}"));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    Ok((engine, name, end))
}

thread_local! {
    /// The functions the library being loaded registered so far, and when its load stops.
    pub(super) static LOADING: std::cell::RefCell<Option<(Vec<FunctionDef>, std::time::Instant)>> =
        const { std::cell::RefCell::new(None) };
}

/// The load hook's check: a library body that runs past the load timeout is stopped.
pub(super) fn load_timed_out() -> bool {
    LOADING.with(|l| {
        l.borrow()
            .as_ref()
            .is_some_and(|(_, start)| start.elapsed() > LOAD_TIMEOUT)
    })
}

/// `redis.register_function`, available only while a library loads.
pub(super) fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if LOADING.with(|l| l.borrow().is_none()) {
        return Err(raise(
            "redis.register_function can only be called on FUNCTION LOAD command",
        ));
    }
    let def = read_register_args(lua, args).map_err(|e| raise(&e))?;
    if !valid_name(&def.name) {
        return Err(raise(NAME_ERR));
    }
    LOADING.with(|l| {
        let mut l = l.borrow_mut();
        let Some((defs, _)) = l.as_mut() else {
            return Err(raise(
                "redis.register_function can only be called on FUNCTION LOAD command",
            ));
        };
        if defs.iter().any(|d| d.name == def.name) {
            return Err(raise("Function already exists in the library"));
        }
        defs.push(def);
        Ok(())
    })
}

fn lua_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Integer(n) => Some(n.to_string()),
        Value::Number(n) => Some(fmt_g(*n, 14)),
        _ => None,
    }
}

fn read_register_args(lua: &Lua, args: MultiValue) -> Result<FunctionDef, String> {
    let keep = |f: Function| lua.create_registry_value(f).map_err(|e| e.to_string());
    match args.len() {
        1 => {
            let Some(Value::Table(t)) = args.front() else {
                return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
            };
            let (mut name, mut desc, mut func, mut flags) = (None, None, None, 0);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                let Some(key) = lua_string(&k) else {
                    return Err(
                        "named argument key given to redis.register_function is not a string"
                            .into(),
                    );
                };
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => name = Some(lua_string(&v).ok_or(
                        "function_name argument given to redis.register_function must be a string",
                    )?),
                    "description" => desc = Some(lua_string(&v).ok_or(
                        "description argument given to redis.register_function must be a string",
                    )?),
                    "callback" => match v {
                        Value::Function(f) => func = Some(f),
                        _ => return Err(
                            "callback argument given to redis.register_function must be a function"
                                .into(),
                        ),
                    },
                    "flags" => {
                        let Value::Table(ft) = v else {
                            return Err("flags argument to redis.register_function must be a table representing function flags".into());
                        };
                        flags = read_flags(&ft).ok_or("unknown flag given")?;
                    }
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let Some(name) = name else {
                return Err("redis.register_function must get a function name argument".into());
            };
            let Some(func) = func else {
                return Err("redis.register_function must get a callback argument".into());
            };
            Ok(FunctionDef {
                name,
                func: keep(func)?,
                desc,
                flags,
            })
        }
        2 => {
            let Some(name) = args.front().and_then(lua_string) else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Some(Value::Function(func)) = args.get(1) else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            Ok(FunctionDef {
                name,
                func: keep(func.clone())?,
                desc: None,
                flags: 0,
            })
        }
        _ => Err("wrong number of arguments to redis.register_function".into()),
    }
}

fn read_flags(t: &Table) -> Option<u32> {
    let mut flags = 0;
    for i in 1.. {
        match t.raw_get::<Value>(i).ok()? {
            Value::Nil => break,
            Value::String(s) => {
                let s = s.to_str().ok()?.to_ascii_lowercase();
                flags |= flag_bit(&s)?;
            }
            _ => return None,
        }
    }
    Some(flags)
}

/// Redis's `scripts_flags_def`, in its order (FUNCTION LIST shows them so).
const FLAG_NAMES: &[(u32, &str)] = &[
    (sflag::NO_WRITES, "no-writes"),
    (sflag::ALLOW_OOM, "allow-oom"),
    (sflag::ALLOW_STALE, "allow-stale"),
    (sflag::NO_CLUSTER, "no-cluster"),
    (sflag::ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
];

fn flag_bit(name: &str) -> Option<u32> {
    FLAG_NAMES.iter().find(|(_, n)| *n == name).map(|(b, _)| *b)
}

/// `functionsCreateWithLibraryCtx`: compiles `code`, runs its body to register its
/// functions, and links the library into `reg` (replacing one of the same name if
/// `replace`). Nothing changes on error.
fn create_library(
    eng: &mut Engine,
    reg: &mut Registry,
    code: &[u8],
    replace: bool,
) -> Result<String, String> {
    let (engine, name, shebang_end) = metadata(code)?;
    if !valid_name(&name) {
        return Err(NAME_ERR.into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    if reg.libraries.contains_key(&name) && !replace {
        return Err(format!("Library '{name}' already exists"));
    }
    let func = eng
        .lua
        .load(&code[shebang_end..])
        .set_name("@user_function")
        .set_environment(eng.env.clone())
        .into_function()
        .map_err(|e| {
            let msg = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                e => e.to_string(),
            };
            format!("Error compiling function: {msg}")
        })?;
    let defs = eng.load_library(&func)?;
    if defs.is_empty() {
        return Err("No functions registered".into());
    }
    let mut functions = BTreeMap::new();
    for d in defs {
        functions.insert(d.name.clone(), d);
    }
    let lib = Library {
        code: Bytes::copy_from_slice(code),
        functions,
    };
    let old = reg.unlink(&name);
    if let Some(f) = reg.collides(&lib) {
        let err = format!("Function {f} already exists");
        if let Some(old) = old {
            reg.link(name, old);
        }
        return Err(err);
    }
    reg.link(name.clone(), lib);
    Ok(name)
}

impl Engine {
    /// Runs a library's body with the library API as its globals; the functions it
    /// registered, or Redis's "Error registering functions" text.
    fn load_library(&mut self, body: &Function) -> Result<Vec<FunctionDef>, String> {
        LOADING.with(|l| *l.borrow_mut() = Some((Vec::new(), std::time::Instant::now())));
        // A SCRIPT KILL that came as the last script ended must not stop this load.
        KILL.store(false, Ordering::Release);
        let _ = self.set_loading.call::<()>(true);
        let res = self.runner.call::<MultiValue>(body.clone());
        let _ = self.set_loading.call::<()>(false);
        let defs = LOADING
            .with(|l| l.borrow_mut().take())
            .map(|(d, _)| d)
            .unwrap_or_default();
        let res = res.map_err(|e| format!("Error registering functions: {}", root_error(&e)))?;
        let mut it = res.into_iter();
        if matches!(it.next(), Some(Value::Boolean(true))) {
            return Ok(defs);
        }
        let msg = match it.next() {
            Some(Value::Table(t)) => t.raw_get::<String>("err").unwrap_or_default(),
            Some(v) => lua_string(&v).unwrap_or_default(),
            None => String::new(),
        };
        Err(format!("Error registering functions: {msg}"))
    }
}

// ---------------------------------------------------------------------------------------------
// FCALL

pub(super) fn fcall(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(detach(ctx, args.all(), |ctx, argv| {
        fcall_generic(ctx, argv, false)
    }))
}

pub(super) fn fcall_ro(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Ok(detach(ctx, args.all(), |ctx, argv| {
        fcall_generic(ctx, argv, true)
    }))
}

fn fcall_generic(ctx: &mut Ctx<'_>, argv: &[Bytes], ro: bool) -> Reply {
    if ctx.server.pubsub.monitoring() {
        let from = ctx.client.handle.addr.to_string();
        ctx.server.pubsub.feed_monitors(ctx.client.db, &from, argv);
    }
    let mut guard = FENGINE.lock();
    let eng = match fengine(&mut guard) {
        Ok(e) => e,
        Err(r) => return r,
    };
    let name = String::from_utf8_lossy(&argv[1]).into_owned();
    let Some(def) = eng.functions.function(&name) else {
        return Reply::error("ERR Function not found");
    };
    let numkeys = match crate::util::num::parse_i64(&argv[2]) {
        Some(n) => n,
        None => return Reply::error("ERR Bad number of keys provided"),
    };
    if numkeys > (argv.len() - 3) as i64 {
        return Reply::error("ERR Number of keys can't be greater than number of args");
    }
    if numkeys < 0 {
        return Reply::error("ERR Number of keys can't be negative");
    }
    let numkeys = numkeys as usize;
    let callable = Callable {
        func: def.func.id(),
        flags: def.flags,
        name: &def.name,
        function: true,
    };
    *RUNNING.lock() = Some((callable.name.to_string(), argv.to_vec()));
    let reply = run_callable(
        eng,
        ctx,
        callable,
        &argv[3..3 + numkeys],
        &argv[3 + numkeys..],
        ro,
    );
    *RUNNING.lock() = None;
    reply
}

// ---------------------------------------------------------------------------------------------
// FUNCTION subcommands

pub(super) fn function_load(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let rest = args.rest();
    let mut replace = false;
    let (code, opts) = rest.split_last().ok_or(CommandError::WrongArity)?;
    for o in opts {
        if crate::commands::is(o, "replace") {
            replace = true;
            continue;
        }
        return Err(CommandError::msg(format!(
            "ERR Unknown option given: {}",
            String::from_utf8_lossy(o)
        )));
    }
    let mut g = FENGINE.lock();
    let eng = match fengine(&mut g) {
        Ok(e) => e,
        Err(r) => return Ok(r),
    };
    let mut reg = std::mem::take(&mut eng.functions);
    let res = create_library(eng, &mut reg, code, replace);
    eng.functions = reg;
    publish(eng);
    match res {
        Ok(name) => Ok(Reply::Bulk(Bytes::from(name))),
        Err(e) => Err(CommandError::msg(format!("ERR {e}"))),
    }
}

pub(super) fn function_delete(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let name = String::from_utf8_lossy(args.next_arg()?).into_owned();
    let mut g = FENGINE.lock();
    let eng = match fengine(&mut g) {
        Ok(e) => e,
        Err(r) => return Ok(r),
    };
    if eng.functions.unlink(&name).is_none() {
        return Err(CommandError::msg("ERR Library not found"));
    }
    publish(eng);
    Ok(Reply::ok())
}

/// Drops every library (FUNCTION FLUSH's effect; also DEBUG LOADAOF before its replay).
pub fn flush_libraries() {
    let mut g = FENGINE.lock();
    if let Some(eng) = g.as_mut() {
        eng.functions = Registry::default();
        let _ = eng.lua.gc_collect();
        publish(eng);
    }
}

pub(super) fn function_flush(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if args.all().len() > 3 {
        return Err(subcommand_syntax(args));
    }
    let rest = args.rest();
    if let [m] = rest {
        if !crate::commands::is(m, "sync") && !crate::commands::is(m, "async") {
            return Err(CommandError::msg(
                "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
            ));
        }
    }
    flush_libraries();
    Ok(Reply::ok())
}

/// Redis's `addReplySubcommandSyntaxError`: the subcommand as the client spelled it.
fn subcommand_syntax(args: &Args<'_>) -> CommandError {
    let sub = args.all().get(1).map(|s| text(s)).unwrap_or_default();
    let sub: String = sub.chars().take(128).collect();
    CommandError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try FUNCTION HELP."
    ))
}

pub(super) fn function_list(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let rest = args.rest();
    let (mut with_code, mut pattern): (bool, Option<&[u8]>) = (false, None);
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if !with_code && crate::commands::is(a, "withcode") {
            with_code = true;
        } else if pattern.is_none() && crate::commands::is(a, "libraryname") {
            if i + 1 >= rest.len() {
                return Err(CommandError::msg("ERR library name argument was not given"));
            }
            i += 1;
            pattern = Some(&rest[i]);
        } else {
            return Err(CommandError::msg(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(a)
            )));
        }
        i += 1;
    }
    let g = FENGINE.lock();
    let mut out = Vec::new();
    if let Some(eng) = g.as_ref() {
        for (name, lib) in &eng.functions.libraries {
            if let Some(p) = pattern {
                if !crate::util::glob::glob_match(p, name.as_bytes(), false) {
                    continue;
                }
            }
            let functions = lib
                .functions
                .values()
                .map(|f| {
                    Reply::Map(vec![
                        (bulk("name"), bulk(&f.name)),
                        (
                            bulk("description"),
                            f.desc.as_deref().map(bulk).unwrap_or(Reply::Nil),
                        ),
                        (
                            bulk("flags"),
                            Reply::Set(
                                FLAG_NAMES
                                    .iter()
                                    .filter(|(b, _)| f.flags & b != 0)
                                    .map(|(_, n)| Reply::Status(n.to_string()))
                                    .collect(),
                            ),
                        ),
                    ])
                })
                .collect();
            let mut m = vec![
                (bulk("library_name"), bulk(name)),
                (bulk("engine"), bulk("LUA")),
                (bulk("functions"), Reply::Array(functions)),
            ];
            if with_code {
                m.push((bulk("library_code"), Reply::Bulk(lib.code.clone())));
            }
            out.push(Reply::Map(m));
        }
    }
    Ok(Reply::Array(out))
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

/// RDB_OPCODE_FUNCTION2: a library's code follows.
const OPCODE_FUNCTION2: u8 = 245;

/// The code of every loaded library, in name order (what a snapshot re-creates them
/// from: `FUNCTION LOAD` in an AOF base, `RDB_OPCODE_FUNCTION2` in a `dump.rdb`).
pub fn library_codes() -> Vec<Bytes> {
    let g = FENGINE.lock();
    g.as_ref().map_or_else(Vec::new, |eng| {
        eng.functions
            .libraries
            .values()
            .map(|l| l.code.clone())
            .collect()
    })
}

pub(super) fn function_dump(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    use crate::store::rdb;
    let g = FENGINE.lock();
    let mut out = Vec::new();
    if let Some(eng) = g.as_ref() {
        for lib in eng.functions.libraries.values() {
            out.push(OPCODE_FUNCTION2);
            put_len(&mut out, lib.code.len() as u64);
            out.extend_from_slice(&lib.code);
        }
    }
    out.extend_from_slice(&rdb::RDB_VERSION.to_le_bytes());
    let crc = rdb::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(Reply::Bulk(Bytes::from(out)))
}

fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 64 {
        out.push(len as u8);
    } else if len < 16384 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// An RDB length: (value, is a special encoding).
fn get_len(b: &[u8], pos: &mut usize) -> Option<(u64, bool)> {
    let first = *b.get(*pos)?;
    *pos += 1;
    Some(match first >> 6 {
        0 => ((first & 0x3f) as u64, false),
        1 => {
            let next = *b.get(*pos)?;
            *pos += 1;
            ((((first & 0x3f) as u64) << 8) | next as u64, false)
        }
        2 => match first {
            0x80 => {
                let v = u32::from_be_bytes(b.get(*pos..*pos + 4)?.try_into().ok()?);
                *pos += 4;
                (v as u64, false)
            }
            0x81 => {
                let v = u64::from_be_bytes(b.get(*pos..*pos + 8)?.try_into().ok()?);
                *pos += 8;
                (v, false)
            }
            _ => return None,
        },
        _ => ((first & 0x3f) as u64, true),
    })
}

/// An RDB string (plain, integer-encoded or LZF-compressed).
fn get_string(b: &[u8], pos: &mut usize) -> Option<Vec<u8>> {
    let (len, special) = get_len(b, pos)?;
    if !special {
        let end = pos.checked_add(usize::try_from(len).ok()?)?;
        let s = b.get(*pos..end)?.to_vec();
        *pos = end;
        return Some(s);
    }
    let int = |n: usize, pos: &mut usize| -> Option<i64> {
        let bytes = b.get(*pos..*pos + n)?;
        *pos += n;
        let mut v: i64 = 0;
        for (i, x) in bytes.iter().enumerate() {
            v |= (*x as i64) << (8 * i);
        }
        let shift = 64 - 8 * n as u32;
        Some((v << shift) >> shift)
    };
    match len {
        0 => int(1, pos).map(|v| v.to_string().into_bytes()),
        1 => int(2, pos).map(|v| v.to_string().into_bytes()),
        2 => int(4, pos).map(|v| v.to_string().into_bytes()),
        3 => {
            let (clen, _) = get_len(b, pos)?;
            let (ulen, _) = get_len(b, pos)?;
            let end = pos.checked_add(usize::try_from(clen).ok()?)?;
            let data = b.get(*pos..end)?;
            *pos = end;
            crate::store::rdb::lzf_decompress(data, ulen).ok()
        }
        _ => None,
    }
}

pub(super) fn function_restore(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if args.all().len() > 4 {
        return Err(subcommand_syntax(args));
    }
    let rest = args.rest();
    #[derive(PartialEq)]
    enum Policy {
        Append,
        Replace,
        Flush,
    }
    let policy =
        match rest.get(1) {
            None => Policy::Append,
            Some(p) if crate::commands::is(p, "append") => Policy::Append,
            Some(p) if crate::commands::is(p, "replace") => Policy::Replace,
            Some(p) if crate::commands::is(p, "flush") => Policy::Flush,
            Some(_) => return Err(CommandError::msg(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let data = &rest[0];
    if !crate::store::rdb::verify(data) {
        return Err(CommandError::msg(
            "ERR DUMP payload version or checksum are wrong",
        ));
    }
    let mut g = FENGINE.lock();
    let eng = match fengine(&mut g) {
        Ok(e) => e,
        Err(r) => return Ok(r),
    };
    let body = &data[..data.len() - 10];
    let mut fresh = Registry::default();
    let mut pos = 0;
    let mut err = None;
    while pos < body.len() {
        let t = body[pos];
        pos += 1;
        if t != OPCODE_FUNCTION2 {
            err = Some("given type is not a function".to_string());
            break;
        }
        let Some(code) = get_string(body, &mut pos) else {
            err = Some("failed loading the given functions payload".to_string());
            break;
        };
        if let Err(e) = create_library(eng, &mut fresh, &code, false) {
            err = Some(e);
            break;
        }
    }
    if let Some(e) = err {
        return Err(CommandError::msg(format!("ERR {e}")));
    }
    if policy == Policy::Flush {
        eng.functions = fresh;
    } else {
        let mut reg = std::mem::take(&mut eng.functions);
        let mut replaced = Vec::new();
        let mut failed = None;
        for name in fresh.libraries.keys() {
            if reg.libraries.contains_key(name) {
                if policy == Policy::Append {
                    failed = Some(format!("Library {name} already exists"));
                    break;
                }
                if let Some(old) = reg.unlink(name) {
                    replaced.push((name.clone(), old));
                }
            }
        }
        if failed.is_none() {
            if let Some(f) = fresh.libraries.values().find_map(|l| reg.collides(l)) {
                failed = Some(format!("Function {f} already exists"));
            }
        }
        if let Some(e) = failed {
            for (name, old) in replaced {
                reg.link(name, old);
            }
            eng.functions = reg;
            return Err(CommandError::msg(format!("ERR {e}")));
        }
        let libs = std::mem::take(&mut fresh.libraries);
        for (name, lib) in libs {
            reg.link(name, lib);
        }
        eng.functions = reg;
    }
    publish(eng);
    Ok(Reply::ok())
}

pub(super) fn function_stats(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    let running = ctx.server.exec_gate.script_running();
    if let Some((SCRIPT_EVAL, _)) = running {
        return Err(CommandError::msg(busy_text(SCRIPT_EVAL)));
    }
    let script = match (running, RUNNING.lock().clone()) {
        (Some((SCRIPT_FUNCTION, ms)), Some((name, argv))) => Reply::Map(vec![
            (bulk("name"), bulk(&name)),
            (
                bulk("command"),
                Reply::Array(argv.into_iter().map(Reply::Bulk).collect()),
            ),
            (bulk("duration_ms"), Reply::Int(ms as i64)),
        ]),
        _ => Reply::Nil,
    };
    Ok(Reply::Map(vec![
        (bulk("running_script"), script),
        (
            bulk("engines"),
            Reply::Map(vec![(
                bulk("LUA"),
                Reply::Map(vec![
                    (
                        bulk("libraries_count"),
                        Reply::Int(LIBRARIES.load(Ordering::Relaxed) as i64),
                    ),
                    (
                        bulk("functions_count"),
                        Reply::Int(FUNCTIONS.load(Ordering::Relaxed) as i64),
                    ),
                ]),
            )]),
        ),
    ]))
}

pub(super) fn function_kill(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    kill(ctx, SCRIPT_FUNCTION)
}

pub(super) fn function_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "function",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_metadata() {
        assert_eq!(
            metadata(b"#!lua name=\"foo\"\nx").map(|(e, n, _)| (e, n)),
            Ok(("lua".into(), "foo".into()))
        );
        assert!(metadata(b"#!lua\nx").unwrap_err().contains("not given"));
        assert!(metadata(b"#!lua name=a name=b\nx")
            .unwrap_err()
            .contains("multiple"));
        assert!(metadata(b"#!lua foo=bar\nx")
            .unwrap_err()
            .contains("Invalid metadata value given: foo=bar"));
    }

    #[test]
    fn rdb_lengths_round_trip() {
        for n in [0u64, 63, 64, 16383, 16384, 1 << 33] {
            let mut out = Vec::new();
            put_len(&mut out, n);
            let mut pos = 0;
            assert_eq!(get_len(&out, &mut pos), Some((n, false)));
            assert_eq!(pos, out.len());
        }
    }
}
