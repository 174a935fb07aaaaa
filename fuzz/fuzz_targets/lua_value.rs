//! Lua ↔ RESP conversion (src/commands/scripting.rs), through EVAL on an in-process server.
//!
//! The input is read as a recipe for a Lua expression — nil, booleans, integers and floats at
//! their edges (NaN, ±inf, -0, 2^53, 2^63), strings with any bytes, arrays with holes, tables
//! with string keys, the reply tables `{ok=}`, `{err=}`, `{double=}`, `{map=}`, `{set=}`,
//! `{big_number=}`, `{verbatim_string=}`, nested up to a depth — and calls of
//! `redis.pcall` whose replies (RESP2 or RESP3 after `redis.setresp(3)`, including DEBUG
//! PROTOCOL's every RESP3 type) are converted to Lua and back. The script is
//! `return <expression>`, run by EVAL with the caller in RESP2 or RESP3, so both the
//! Lua → reply conversion and the reply → Lua one run on every shape the recipe builds.
//! Only literals and calls are generated: no loops, so no input can make a script run
//! forever.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use std::fmt::Write;
use std::sync::Mutex;

static HARNESS: Mutex<Option<common::Harness>> = Mutex::new(None);

/// Commands a generated script may call: reads and writes of every type, and replies of
/// every RESP3 shape.
const CALLS: &[&str] = &[
    "PING",
    "ECHO",
    "SET",
    "GET",
    "INCRBYFLOAT",
    "HSET",
    "HGETALL",
    "HRANDFIELD",
    "RPUSH",
    "LRANGE",
    "SADD",
    "SMEMBERS",
    "ZADD",
    "ZRANGE",
    "ZSCORE",
    "ZRANDMEMBER",
    "XADD",
    "XRANGE",
    "XINFO",
    "TYPE",
    "OBJECT",
    "DEBUG",
    "GEOPOS",
    "GEOADD",
    "DOC.INSERT",
    "DOC.FIND",
    "COMMAND",
    "NOSUCHCOMMAND",
    "EXPIRE",
    "TTL",
];

struct Gen<'a> {
    data: &'a [u8],
    out: String,
}

impl Gen<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn string(&mut self) {
        let n = (self.byte() % 12) as usize;
        self.out.push('"');
        for _ in 0..n {
            let b = self.byte();
            // Decimal escapes carry any byte, NUL and invalid UTF-8 included.
            let _ = write!(self.out, "\\{b}");
        }
        self.out.push('"');
    }

    fn number(&mut self) {
        let b = self.byte();
        let s = match b % 16 {
            0 => "0/0".to_string(),
            1 => "1/0".to_string(),
            2 => "-1/0".to_string(),
            3 => "-0.0".to_string(),
            4 => "2^53".to_string(),
            5 => "2^63".to_string(),
            6 => "-2^63".to_string(),
            7 => "2^64".to_string(),
            8 => "0.1".to_string(),
            9 => "1e308*10".to_string(),
            10 => format!("{}.5", self.byte() as i8),
            _ => format!(
                "{}",
                i32::from_le_bytes([b, self.byte(), self.byte(), self.byte()])
            ),
        };
        let _ = write!(self.out, "({s})");
    }

    fn expr(&mut self, depth: u32) {
        let k = self.byte();
        let leaf = depth >= 6 || self.data.is_empty();
        match if leaf { k % 5 } else { k % 17 } {
            0 => self.out.push_str("nil"),
            1 => self
                .out
                .push_str(if k & 0x80 != 0 { "true" } else { "false" }),
            2 => self.number(),
            3 | 4 => self.string(),
            5 | 6 => {
                // An array, perhaps with holes (nil elements end it in Redis's conversion).
                let n = self.byte() % 6;
                self.out.push('{');
                for _ in 0..n {
                    self.expr(depth + 1);
                    self.out.push(',');
                }
                self.out.push('}');
            }
            7 => {
                self.out.push_str("{ok=");
                self.expr(depth + 1);
                self.out.push('}');
            }
            8 => {
                self.out.push_str("{err=");
                self.expr(depth + 1);
                self.out.push('}');
            }
            9 => {
                self.out.push_str("{double=");
                self.expr(depth + 1);
                self.out.push('}');
            }
            10 | 11 => {
                let name = if k % 17 == 10 { "map" } else { "set" };
                let n = self.byte() % 4;
                let _ = write!(self.out, "{{{name}={{");
                for _ in 0..n {
                    self.out.push('[');
                    self.expr(depth + 1);
                    self.out.push_str("]=");
                    self.expr(depth + 1);
                    self.out.push(',');
                }
                self.out.push_str("}}");
            }
            12 => {
                self.out.push_str("{big_number=");
                self.expr(depth + 1);
                self.out.push('}');
            }
            13 => {
                self.out.push_str("{verbatim_string={format=");
                self.expr(depth + 1);
                self.out.push_str(",string=");
                self.expr(depth + 1);
                self.out.push_str("}}");
            }
            14 => {
                // A table with both kinds of keys.
                self.out.push_str("{a=");
                self.expr(depth + 1);
                self.out.push_str(",[2]=");
                self.expr(depth + 1);
                self.out.push_str(",[1]=");
                self.expr(depth + 1);
                self.out.push('}');
            }
            15 => {
                let f = match self.byte() % 3 {
                    0 => "redis.status_reply",
                    1 => "redis.error_reply",
                    _ => "redis.sha1hex",
                };
                let _ = write!(self.out, "{f}(");
                self.string();
                self.out.push(')');
            }
            _ => {
                let name = CALLS[self.byte() as usize % CALLS.len()];
                let _ = write!(self.out, "redis.pcall('{name}'");
                let n = self.byte() % 5;
                for _ in 0..n {
                    self.out.push(',');
                    match self.byte() % 4 {
                        0 => self.number(),
                        1 => {
                            // Words commands know, so calls get past their parsers.
                            let w = [
                                "k",
                                "h",
                                "z",
                                "s",
                                "x",
                                "*",
                                "-",
                                "+",
                                "0",
                                "1",
                                "f",
                                "v",
                                "WITHSCORES",
                                "PROTOCOL",
                                "MAP",
                                "SET",
                                "DOUBLE",
                                "BIGNUM",
                                "VERBATIM",
                                "ATTRIB",
                                "PUSH",
                                "TRUE",
                                "NULL",
                                "ENCODING",
                                "STREAM",
                                "FULL",
                                "-3",
                                "{}",
                                "{\"a\":1}",
                                "INFO",
                            ];
                            let word = w[self.byte() as usize % w.len()];
                            let _ = write!(self.out, "'{word}'");
                        }
                        _ => self.string(),
                    }
                }
                self.out.push(')');
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let mut g = Gen {
        data: rest,
        out: String::new(),
    };
    if ctl & 1 != 0 {
        g.out.push_str("redis.setresp(3); ");
    }
    g.out.push_str("return ");
    g.expr(0);
    let script = std::mem::take(&mut g.out);
    let mut guard = HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    let h = guard.get_or_insert_with(common::Harness::new);
    h.reset();
    if ctl & 2 != 0 {
        h.run_strs(&["HELLO", "3"]);
    }
    h.run_strs(&["EVAL", &script, "0"]);
});
