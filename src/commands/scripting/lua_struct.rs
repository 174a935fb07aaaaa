//! The `struct` library scripts see (Roberto Ierusalimschy's lua_struct.c, as Redis bundles
//! it): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, pos])`, `struct.size(fmt)`, with the
//! sizes, alignment and error texts of the C library on x86-64 (long and size_t 8 bytes, int 4,
//! maximum alignment 8, native order little-endian).

use mlua::{Lua, MultiValue, Table, Value};

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

const DEFAULT: Header = Header {
    little: true,
    align: 1,
};

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

fn arg_err(arg: usize, func: &str, msg: &str) -> mlua::Error {
    err(format!("bad argument #{arg} to '{func}' ({msg})"))
}

/// `getnum`: a decimal count at `fmt[*i..]`, or `df`.
fn getnum(fmt: &[u8], i: &mut usize, df: usize) -> mlua::Result<usize> {
    if !fmt.get(*i).is_some_and(|c| c.is_ascii_digit()) {
        return Ok(df);
    }
    let mut a: usize = 0;
    while let Some(c) = fmt.get(*i).filter(|c| c.is_ascii_digit()) {
        let d = (c - b'0') as usize;
        if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - d {
            return Err(err("integral size overflow"));
        }
        a = a * 10 + d;
        *i += 1;
    }
    Ok(a)
}

fn optsize(opt: u8, fmt: &[u8], i: &mut usize) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' | b'x' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => getnum(fmt, i, 1)?,
        b'i' | b'I' => {
            let sz = getnum(fmt, i, 4)?;
            if sz > MAXINTSIZE {
                return Err(err(format!(
                    "integral size {sz} is larger than limit of {MAXINTSIZE}"
                )));
            }
            sz
        }
        _ => 0,
    })
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn controloptions(
    opt: u8,
    fmt: &[u8],
    i: &mut usize,
    h: &mut Header,
    func: &str,
) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.little = false,
        b'<' => h.little = true,
        b'!' => {
            let a = getnum(fmt, i, MAXALIGN)?;
            if a == 0 || a & (a - 1) != 0 {
                return Err(err(format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
        }
        _ => {
            return Err(arg_err(
                1,
                func,
                &format!("invalid format option '{}'", opt as char),
            ))
        }
    }
    Ok(())
}

fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None | Some(Value::Nil) => "no value",
        Some(v) => v.type_name(),
    }
}

/// `luaL_checknumber` of argument `arg` (1-based, as Lua counts).
fn check_number(args: &MultiValue, arg: usize, func: &str) -> mlua::Result<f64> {
    let v = args.get(arg - 1);
    match v {
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| crate::util::num::parse_f64(s.trim().as_bytes()))
            .ok_or_else(|| arg_err(arg, func, "number expected, got string")),
        _ => {
            let t = if matches!(v, Some(Value::Nil)) {
                "nil"
            } else {
                type_name(v)
            };
            Err(arg_err(arg, func, &format!("number expected, got {t}")))
        }
    }
}

fn check_string(args: &MultiValue, arg: usize, func: &str) -> mlua::Result<Vec<u8>> {
    let v = args.get(arg - 1);
    match v {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(n.to_string().into_bytes()),
        Some(Value::Number(n)) => Ok(super::fmt_g(*n, 14).into_bytes()),
        _ => {
            let t = if matches!(v, Some(Value::Nil)) {
                "nil"
            } else {
                type_name(v)
            };
            Err(arg_err(arg, func, &format!("string expected, got {t}")))
        }
    }
}

fn put_integer(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let mut value = if n < 0.0 { n as i64 as u64 } else { n as u64 };
    let mut buf = [0u8; MAXINTSIZE];
    for k in 0..size {
        let idx = if little { k } else { size - 1 - k };
        buf[idx] = (value & 0xff) as u8;
        value >>= 8;
    }
    out.extend_from_slice(&buf[..size]);
}

fn get_integer(b: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = b.len();
    for k in 0..size {
        let idx = if little { size - 1 - k } else { k };
        l = (l << 8) | b[idx] as u64;
    }
    if !signed {
        return l as f64;
    }
    // C shifts by the count modulo 64 on x86-64 (sizes above 8 bytes).
    let mask = u64::MAX.wrapping_shl((size * 8) as u32 - 1);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let fmt = check_string(&args, 1, "pack")?;
    let mut h = DEFAULT;
    let mut arg = 2;
    let mut total = 0usize;
    let mut out = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        let toalign = gettoalign(total, &h, opt, size);
        total += toalign;
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(&args, arg, "pack")?;
                arg += 1;
                put_integer(&mut out, n, h.little, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(&args, arg, "pack")? as f32;
                arg += 1;
                if h.little {
                    out.extend_from_slice(&f.to_le_bytes());
                } else {
                    out.extend_from_slice(&f.to_be_bytes());
                }
            }
            b'd' => {
                let d = check_number(&args, arg, "pack")?;
                arg += 1;
                if h.little {
                    out.extend_from_slice(&d.to_le_bytes());
                } else {
                    out.extend_from_slice(&d.to_be_bytes());
                }
            }
            b'c' | b's' => {
                let s = check_string(&args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_err(arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => controloptions(opt, &fmt, &mut i, &mut h, "pack")?,
        }
        total += size;
    }
    lua.create_string(&out)
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt = check_string(&args, 1, "unpack")?;
    let data = check_string(&args, 2, "unpack")?;
    let ld = data.len();
    let pos = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => check_number(&args, 3, "unpack")? as i64,
    };
    if pos <= 0 {
        return Err(arg_err(3, "unpack", "offset must be 1 or greater"));
    }
    let mut pos = (pos - 1) as usize;
    let mut h = DEFAULT;
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    let short = || arg_err(2, "unpack", "data string too short");
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let mut size = optsize(opt, &fmt, &mut i)?;
        pos += gettoalign(pos, &h, opt, size);
        if size > ld || pos > ld - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                out.push(Value::Number(get_integer(
                    &data[pos..pos + size],
                    h.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().map_err(|_| short())?;
                let f = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(f as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().map_err(|_| short())?;
                let d = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.last() {
                        Some(Value::Number(n)) => Some(*n),
                        Some(Value::Integer(n)) => Some(*n as f64),
                        Some(Value::String(s)) => s
                            .to_str()
                            .ok()
                            .and_then(|s| crate::util::num::parse_f64(s.trim().as_bytes())),
                        _ => None,
                    };
                    let Some(n) = prev else {
                        return Err(err("format 'c0' needs a previous size"));
                    };
                    out.pop();
                    size = if n > 0.0 { n as usize } else { 0 };
                    if size > ld || pos > ld - size {
                        return Err(short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(err("unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => controloptions(opt, &fmt, &mut i, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Integer(pos as i64 + 1));
    Ok(MultiValue::from_iter(out))
}

fn size(_lua: &Lua, args: MultiValue) -> mlua::Result<i64> {
    let fmt = check_string(&args, 1, "size")?;
    let mut h = DEFAULT;
    let mut pos = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let opt = fmt[i];
        i += 1;
        let size = optsize(opt, &fmt, &mut i)?;
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_err(1, "size", "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_err(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            controloptions(opt, &fmt, &mut i, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos as i64)
}

/// `luaL_error`'s position prefix: the calling Lua line (`user_script:1: ...`).
fn located<T>(lua: &Lua, r: mlua::Result<T>) -> mlua::Result<T> {
    r.map_err(|e| match e {
        mlua::Error::RuntimeError(msg) => {
            let at = lua.inspect_stack(1, |d| {
                let line = d.current_line();
                let src = d.source().short_src.map(|s| s.to_string());
                (src, line)
            });
            match at {
                Some((Some(src), Some(line))) => err(format!("{src}:{line}: {msg}")),
                _ => err(msg),
            }
        }
        e => e,
    })
}

pub(super) fn struct_lib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, a| located(lua, pack(lua, a)))?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, a| located(lua, unpack(lua, a)))?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|lua, a| located(lua, size(lua, a)))?,
    )?;
    Ok(t)
}
