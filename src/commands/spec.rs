//! The shape of one entry of the command table.
//!
//! Every command is described once, next to its implementation, by a [`CommandSpec`]. The same
//! description drives dispatch, arity errors, `COMMAND INFO`, `COMMAND DOCS` (which redis-cli
//! uses for its argument hints) and key extraction (`COMMAND GETKEYS`, shard routing).

use crate::commands::Ctx;
use crate::protocol::Reply;
use bytes::Bytes;

/// A command handler: parses its arguments (`args[0]` is the command name) and applies them.
pub type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> Reply;

/// Command flags, as `COMMAND INFO` reports them.
pub mod flag {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const LOADING: u32 = 1 << 6;
    pub const STALE: u32 = 1 << 7;
    pub const SKIP_MONITOR: u32 = 1 << 8;
    pub const SKIP_SLOWLOG: u32 = 1 << 9;
    pub const FAST: u32 = 1 << 10;
    pub const NO_AUTH: u32 = 1 << 11;
    pub const NO_MULTI: u32 = 1 << 12;
    pub const ALLOW_BUSY: u32 = 1 << 13;
    pub const MOVABLEKEYS: u32 = 1 << 14;
    pub const BLOCKING: u32 = 1 << 15;

    /// Names in the order Redis prints them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
        (MOVABLEKEYS, "movablekeys"),
    ];
}

/// The type of an argument in `COMMAND DOCS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    String,
    Integer,
    Double,
    Key,
    Pattern,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

impl ArgKind {
    pub fn name(self) -> &'static str {
        match self {
            ArgKind::String => "string",
            ArgKind::Integer => "integer",
            ArgKind::Double => "double",
            ArgKind::Key => "key",
            ArgKind::Pattern => "pattern",
            ArgKind::UnixTime => "unix-time",
            ArgKind::PureToken => "pure-token",
            ArgKind::OneOf => "oneof",
            ArgKind::Block => "block",
        }
    }
}

/// One argument of a command, for `COMMAND DOCS`.
#[derive(Debug)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    /// The literal word that introduces the argument (`EX`, `LIMIT`, ...).
    pub token: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
    /// Members of a `OneOf` or `Block`.
    pub args: &'static [Arg],
}

impl Arg {
    pub const fn new(name: &'static str, kind: ArgKind) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            args: &[],
        }
    }
    /// A required argument of the given kind.
    pub const fn key(name: &'static str) -> Arg {
        Arg::new(name, ArgKind::Key)
    }
    pub const fn string(name: &'static str) -> Arg {
        Arg::new(name, ArgKind::String)
    }
    pub const fn integer(name: &'static str) -> Arg {
        Arg::new(name, ArgKind::Integer)
    }
    pub const fn double(name: &'static str) -> Arg {
        Arg::new(name, ArgKind::Double)
    }
    pub const fn pattern(name: &'static str) -> Arg {
        Arg::new(name, ArgKind::Pattern)
    }
    pub const fn unix_time(name: &'static str) -> Arg {
        Arg::new(name, ArgKind::UnixTime)
    }
    /// A bare keyword such as `NX`: its name is its token.
    pub const fn token(name: &'static str, token: &'static str) -> Arg {
        Arg {
            name,
            kind: ArgKind::PureToken,
            token: Some(token),
            optional: false,
            multiple: false,
            args: &[],
        }
    }
    pub const fn oneof(name: &'static str, args: &'static [Arg]) -> Arg {
        Arg {
            name,
            kind: ArgKind::OneOf,
            token: None,
            optional: false,
            multiple: false,
            args,
        }
    }
    pub const fn block(name: &'static str, args: &'static [Arg]) -> Arg {
        Arg {
            name,
            kind: ArgKind::Block,
            token: None,
            optional: false,
            multiple: false,
            args,
        }
    }
    /// This argument introduced by a keyword: `Arg::integer("seconds").with_token("EX")`.
    pub const fn with_token(mut self, token: &'static str) -> Arg {
        self.token = Some(token);
        self
    }
    pub const fn optional(mut self) -> Arg {
        self.optional = true;
        self
    }
    pub const fn multiple(mut self) -> Arg {
        self.multiple = true;
        self
    }
}

/// One entry of the command table.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name; subcommands are named `container|sub` as in Redis (`client|id`).
    pub name: &'static str,
    /// Redis arity: positive = exact argument count (name included), negative = at least -arity.
    pub arity: i32,
    /// Bit set of [`flag`] constants.
    pub flags: u32,
    /// Key positions: first key, last key (negative counts from the end), step. 0,0,0 = no keys.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    /// ACL categories without the `@` (`keyspace`, `read`, `fast`, ...).
    pub acl: &'static [&'static str],
    pub summary: &'static str,
    pub since: &'static str,
    /// `connection`, `server`, `generic`, `string`, `hash`, `transactions`, `pubsub`, `document`.
    pub group: &'static str,
    pub complexity: &'static str,
    pub args: &'static [Arg],
    pub subcommands: &'static [CommandSpec],
    pub handler: Handler,
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Positions of the keys in `args` (which includes the command name), per first/last/step.
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
        let mut out = Vec::new();
        if self.first_key <= 0 || self.step <= 0 {
            return out;
        }
        let first = self.first_key as usize;
        let last = if self.last_key < 0 {
            let from_end = (-self.last_key) as usize;
            if argc < from_end {
                return out;
            }
            argc - from_end
        } else {
            (self.last_key as usize).min(argc.saturating_sub(1))
        };
        let mut i = first;
        while i <= last && i < argc {
            out.push(i);
            i += self.step as usize;
        }
        out
    }
}

/// The handler for a documented command whose implementation has not landed yet.
pub fn not_yet_implemented(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Reply::error(format!(
        "ERR '{}' is not yet implemented in this version of tidecache",
        String::from_utf8_lossy(&args[0]).to_lowercase()
    ))
}

/// Default values for struct-update syntax in the tables:
/// `CommandSpec { name: "get", arity: 2, ..CommandSpec::DEFAULT }`.
impl CommandSpec {
    pub const DEFAULT: CommandSpec = CommandSpec {
        name: "",
        arity: 1,
        flags: 0,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &[],
        summary: "",
        since: "1.0.0",
        group: "generic",
        complexity: "O(1)",
        args: &[],
        subcommands: &[],
        handler: not_yet_implemented,
    };
}
