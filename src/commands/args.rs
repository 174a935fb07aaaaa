//! The cursor a handler reads its arguments from, and the error that ends a command.
//!
//! A handler takes what it needs in order (`args.next_key()?`, `args.next_i64()?`), optional
//! tokens with [`Args::eat`] or by matching [`Args::next_token`], and ends with
//! [`Args::finish`] when nothing may follow. Every parse error carries Redis's exact text and
//! flows out with `?`; nothing is changed before a handler has read all it needs.

use crate::protocol::Reply;
use crate::util::num::{parse_f64, parse_i64};
use bytes::Bytes;
use std::borrow::Cow;

/// Redis's error texts for the failures every family shares.
pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_A_FLOAT: &str = "ERR value is not a valid float";
pub const SYNTAX: &str = "ERR syntax error";
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Why a command ended without its normal reply.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandError {
    /// `ERR wrong number of arguments for '<name>' command`: the dispatcher fills the name.
    WrongArity,
    /// Any other error reply; the text starts with its code (`ERR`, `WRONGTYPE`, ...).
    Msg(Cow<'static, str>),
    /// A reply built elsewhere that ends the command (an error, or a reply a helper decided).
    Reply(Reply),
}

pub type CommandResult<T> = Result<T, CommandError>;

impl CommandError {
    pub fn msg(text: impl Into<Cow<'static, str>>) -> CommandError {
        CommandError::Msg(text.into())
    }
    pub fn syntax() -> CommandError {
        CommandError::Msg(Cow::Borrowed(SYNTAX))
    }
    pub fn wrongtype() -> CommandError {
        CommandError::Msg(Cow::Borrowed(WRONGTYPE))
    }
    pub fn not_integer() -> CommandError {
        CommandError::Msg(Cow::Borrowed(NOT_AN_INTEGER))
    }
    pub fn not_float() -> CommandError {
        CommandError::Msg(Cow::Borrowed(NOT_A_FLOAT))
    }

    /// The reply for command `name` (the table name, `container|sub` for a subcommand).
    pub fn into_reply(self, name: &str) -> Reply {
        match self {
            CommandError::WrongArity => crate::commands::wrong_arity(name),
            CommandError::Msg(m) => Reply::Error(m.into_owned()),
            CommandError::Reply(r) => r,
        }
    }
}

impl From<crate::store::WrongType> for CommandError {
    fn from(_: crate::store::WrongType) -> CommandError {
        CommandError::wrongtype()
    }
}

impl From<Reply> for CommandError {
    fn from(r: Reply) -> CommandError {
        CommandError::Reply(r)
    }
}

/// An argument upper-cased into a small buffer, for matching against literal tokens without
/// allocating: `match args.next_token().as_deref() { Some(b"NX") => ..., _ => ... }`.
#[derive(Clone, Copy)]
pub struct Token {
    buf: [u8; 24],
    len: u8,
}

impl std::ops::Deref for Token {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

impl Token {
    /// Longer words than any token are kept empty, so they match no arm.
    pub fn of(b: &[u8]) -> Token {
        let mut t = Token {
            buf: [0; 24],
            len: 0,
        };
        if b.len() <= t.buf.len() {
            for (d, s) in t.buf.iter_mut().zip(b) {
                *d = s.to_ascii_uppercase();
            }
            t.len = b.len() as u8;
        }
        t
    }
}

/// A cursor over one request's arguments.
#[derive(Debug)]
pub struct Args<'a> {
    all: &'a [Bytes],
    pos: usize,
}

impl<'a> Args<'a> {
    /// A cursor over `all` (the whole request, name included) starting at `start`.
    pub fn new(all: &'a [Bytes], start: usize) -> Args<'a> {
        Args {
            all,
            pos: start.min(all.len()),
        }
    }

    /// The command name as the client sent it.
    pub fn name(&self) -> &'a [u8] {
        self.all.first().map_or(&[][..], |b| &b[..])
    }

    /// The whole request, name included (MULTI queues it, MONITOR shows it).
    pub fn all(&self) -> &'a [Bytes] {
        self.all
    }

    /// Arguments not read yet.
    pub fn len(&self) -> usize {
        self.all.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next argument without taking it.
    pub fn peek(&self) -> Option<&'a Bytes> {
        self.all.get(self.pos)
    }

    /// The next argument, if any.
    pub fn next_opt(&mut self) -> Option<&'a Bytes> {
        let a = self.all.get(self.pos)?;
        self.pos += 1;
        Some(a)
    }

    /// The next argument; missing is a syntax error (arity already guarantees the fixed ones).
    pub fn next_arg(&mut self) -> CommandResult<&'a Bytes> {
        self.next_opt().ok_or_else(CommandError::syntax)
    }

    /// The next argument, which the table names a key.
    pub fn next_key(&mut self) -> CommandResult<&'a Bytes> {
        self.next_arg()
    }

    /// The next argument as text (lossy UTF-8), for names and messages.
    pub fn next_text(&mut self) -> CommandResult<String> {
        Ok(String::from_utf8_lossy(self.next_arg()?).into_owned())
    }

    /// The next argument as a 64-bit integer, with Redis's error text.
    pub fn next_i64(&mut self) -> CommandResult<i64> {
        parse_i64(self.next_arg()?).ok_or_else(CommandError::not_integer)
    }

    /// The next argument as a double, with Redis's error text (`inf` and `-inf` accepted).
    pub fn next_f64(&mut self) -> CommandResult<f64> {
        parse_f64(self.next_arg()?).ok_or_else(CommandError::not_float)
    }

    /// The next argument upper-cased for matching against tokens (see [`Token`]).
    pub fn next_token(&mut self) -> Option<Token> {
        self.next_opt().map(|a| Token::of(a))
    }

    /// Takes the next argument if it is `keyword` (case-insensitive).
    pub fn eat(&mut self, keyword: &str) -> bool {
        match self.peek() {
            Some(a) if a.eq_ignore_ascii_case(keyword.as_bytes()) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// Takes everything left.
    pub fn rest(&mut self) -> &'a [Bytes] {
        let r = &self.all[self.pos..];
        self.pos = self.all.len();
        r
    }

    /// Takes everything left as (field, value) pairs; an odd count is a wrong arity.
    pub fn pairs(&mut self) -> CommandResult<std::slice::ChunksExact<'a, Bytes>> {
        if !self.len().is_multiple_of(2) {
            return Err(CommandError::WrongArity);
        }
        Ok(self.rest().chunks_exact(2))
    }

    /// Nothing may follow: anything left is a syntax error.
    pub fn finish(&self) -> CommandResult<()> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(CommandError::syntax())
        }
    }
}

/// The tail `numkeys key... WHERE [COUNT count]` of LMPOP, BLMPOP, ZMPOP and BZMPOP, with
/// Redis's errors: the keys, the value `ends` gives the `WHERE` keyword (`LEFT`/`RIGHT`,
/// `MIN`/`MAX`, upper case), and the count (1 when not given).
pub fn mpop_args<'a, T: Copy>(
    args: &mut Args<'a>,
    ends: [(&[u8], T); 2],
) -> CommandResult<(&'a [Bytes], T, usize)> {
    let numkeys = match crate::util::num::parse_i64(args.next_arg()?) {
        Some(n) if n > 0 => n as usize,
        _ => return Err(CommandError::msg("ERR numkeys should be greater than 0")),
    };
    let rest = args.rest();
    if numkeys >= rest.len() {
        return Err(CommandError::syntax());
    }
    let (keys, tail) = rest.split_at(numkeys);
    let mut tail = Args::new(tail, 0);
    let end = match tail.next_token() {
        Some(t) if *t == *ends[0].0 => ends[0].1,
        Some(t) if *t == *ends[1].0 => ends[1].1,
        _ => return Err(CommandError::syntax()),
    };
    let mut count = None;
    while let Some(opt) = tail.next_token() {
        match &*opt {
            b"COUNT" if count.is_none() && !tail.is_empty() => {
                count = match crate::util::num::parse_i64(tail.next_arg()?) {
                    Some(n) if n > 0 => Some(n as usize),
                    _ => return Err(CommandError::msg("ERR count should be greater than 0")),
                };
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    Ok((keys, end, count.unwrap_or(1)))
}

/// The longest reply HRANDFIELD, SRANDMEMBER and ZRANDMEMBER give for a negative count
/// (Redis has no bound and would try to build any reply a client asks for).
pub const MAX_RANDOM_REPLY: usize = 1 << 24;

/// `[count [WITHSCORES|WITHVALUES]]` of ZRANDMEMBER and HRANDFIELD with Redis's errors: the
/// count (`None`: one element, not an array) and whether `with` was given. A count whose
/// doubling could overflow is refused with `with`, as Redis does.
pub fn random_count_args(args: &mut Args<'_>, with: &str) -> CommandResult<(Option<i64>, bool)> {
    let count = match args.next_opt() {
        None => None,
        Some(c) => match crate::util::num::parse_i64(c) {
            Some(i64::MIN) => {
                return Err(CommandError::msg(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                ))
            }
            Some(n) => Some(n),
            None => return Err(CommandError::not_integer()),
        },
    };
    let with = match args.next_opt() {
        None => false,
        Some(a) if crate::commands::is(a, with) && args.is_empty() => true,
        Some(_) => return Err(CommandError::syntax()),
    };
    if with && count.is_some_and(|n| n.unsigned_abs() > (i64::MAX / 2) as u64) {
        return Err(CommandError::msg("ERR value is out of range"));
    }
    Ok((count, with))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn cursor_reads_in_order_with_redis_errors() {
        let r = req(&["set", "k", "12", "nx", "ex", "x", "1.5"]);
        let mut a = Args::new(&r, 1);
        assert_eq!(a.name(), b"set");
        assert_eq!(&a.next_key().unwrap()[..], b"k");
        assert_eq!(a.next_i64().unwrap(), 12);
        assert!(matches!(a.next_token().as_deref(), Some(b"NX")));
        assert!(!a.eat("PX"));
        assert!(a.eat("EX"));
        assert_eq!(a.next_i64(), Err(CommandError::not_integer()));
        assert_eq!(a.next_f64().unwrap(), 1.5);
        assert!(a.finish().is_ok());
        assert_eq!(a.next_arg(), Err(CommandError::syntax()));
        let r = req(&["hset", "k", "f", "v", "g"]);
        let mut a = Args::new(&r, 2);
        assert_eq!(a.pairs().err(), Some(CommandError::WrongArity));
        assert_eq!(
            CommandError::WrongArity.into_reply("hset"),
            Reply::error("ERR wrong number of arguments for 'hset' command")
        );
        assert_eq!(Token::of(&[b'a'; 40]).len(), 0);
    }
}
