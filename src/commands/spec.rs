//! The shape of one entry of the command table.
//!
//! Every command is described once, next to its implementation, by a [`CommandSpec`] row built
//! with a few `const fn` calls:
//!
//! ```text
//! HASH.cmd("hset", -4, hset).flags(WRITE | DENYOOM | FAST).key()
//!     .doc("2.0.0", "Set the string value of a hash field")
//!     .args("key field_value:{field value}..."),
//! ```
//!
//! The same row drives dispatch, arity errors, the dispatcher's decisions (flags), `COMMAND
//! INFO/DOCS/LIST/GETKEYS` (which redis-cli uses for its argument hints), key extraction and
//! ACL categories. The argument notation is parsed once, when the table is built
//! ([`parse_args`]); a unit test parses every row, so a malformed one fails the suite.
//!
//! ## Argument notation
//!
//! Space-separated elements, as Redis's own documentation writes a command line:
//!
//! | element | meaning |
//! | --- | --- |
//! | `name` / `name:kind` | an argument; kind is one of `key string integer double pattern unix-time` (default `string`) |
//! | `TOKEN` | a pure token (`NX`); its name is the token in lower case |
//! | `name=TOKEN`, `name='*'` | a pure token with another name (`change=CH`); quotes for tokens that are not words |
//! | `TOKEN=name:kind` | an argument introduced by a token (`EX=seconds:integer`) |
//! | `name:(a\|b\|c)` | one of the alternatives (each an element) |
//! | `name:{a b c}` | a block of elements |
//! | `[element]` | optional |
//! | `element...` | may repeat; `element+...` repeats with its token each time |
//!
//! A oneof or block may carry a token too: `FILTERBY=filterby:(...)`.

use crate::commands::args::Args;
use crate::commands::Ctx;
use crate::protocol::Reply;

/// What a handler returns: its reply, or the error that ends the command. Parse errors flow
/// out of the [`Args`] cursor with `?`.
pub type CmdResult = Result<Reply, crate::commands::args::CommandError>;

/// A command handler: reads its arguments from the cursor (which starts after the command
/// name, and after the subcommand name for a subcommand) and applies them.
pub type Handler = fn(&mut Ctx<'_>, &mut Args<'_>) -> CmdResult;

/// Command flags. The first group is what `COMMAND INFO` reports (Redis's names); the second
/// is read only by the dispatcher, so a family opts into a behaviour by its row alone.
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
    /// Runs on a slot this cluster node is importing without a preceding ASKING
    /// (RESTORE-ASKING, which MIGRATE sends).
    pub const ASKING: u32 = 1 << 16;
    /// May be called with no key (the scripts and functions): COMMAND GETKEYS answers the
    /// empty list instead of an error.
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    /// Refused with `-LOADING` while a replica loads its master's snapshot beside the data
    /// it serves (`repl-diskless-load swapdb`, INFO's `async_loading`): what would change
    /// the role, the persistence or the cluster under that load.
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;

    /// Runs at once inside MULTI instead of being queued (Redis: EXEC, DISCARD, MULTI,
    /// WATCH, QUIT, RESET).
    pub const TX_CONTROL: u32 = 1 << 24;
    /// Allowed while a RESP2 client is subscribed (Redis: the (P|S)(UN)SUBSCRIBE family,
    /// PING, QUIT, RESET).
    pub const SUBSCRIBED: u32 = 1 << 25;
    /// Its arguments after the name are shown as `(redacted)` to MONITOR (AUTH; HELLO
    /// redacts only what follows its AUTH token).
    pub const REDACTED: u32 = 1 << 26;
    /// Its key positions name collections, not keys (the `DOC.*` family): a slot's owner and
    /// a script's or transaction's keys count them apart, and its own arguments are never
    /// journaled for a document change (the changes are records of their own).
    pub const COLLECTION: u32 = 1 << 27;
    /// Journaled as itself when it succeeds although it changes no key and reports no
    /// document change: collection and index DDL, a collection arriving or leaving whole,
    /// the FUNCTION writes. It replays the same.
    pub const JOURNAL_SELF: u32 = 1 << 28;

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
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// ACL categories. A row names the ones its flags do not imply; [`CommandSpec::categories`]
/// adds the implied ones as Redis's `setImplicitACLCategories` does.
pub mod acl {
    pub const DOCUMENT: u32 = 1 << 0;
    pub const KEYSPACE: u32 = 1 << 1;
    pub const READ: u32 = 1 << 2;
    pub const WRITE: u32 = 1 << 3;
    pub const SET: u32 = 1 << 4;
    pub const SORTEDSET: u32 = 1 << 5;
    pub const LIST: u32 = 1 << 6;
    pub const HASH: u32 = 1 << 7;
    pub const STRING: u32 = 1 << 8;
    pub const BITMAP: u32 = 1 << 9;
    pub const HYPERLOGLOG: u32 = 1 << 10;
    pub const GEO: u32 = 1 << 11;
    pub const STREAM: u32 = 1 << 12;
    pub const PUBSUB: u32 = 1 << 13;
    pub const ADMIN: u32 = 1 << 14;
    pub const FAST: u32 = 1 << 15;
    pub const SLOW: u32 = 1 << 16;
    pub const BLOCKING: u32 = 1 << 17;
    pub const DANGEROUS: u32 = 1 << 18;
    pub const CONNECTION: u32 = 1 << 19;
    pub const TRANSACTION: u32 = 1 << 20;
    pub const SCRIPTING: u32 = 1 << 21;

    /// Names in the order `COMMAND INFO` prints them (Redis's order; `document`, ours,
    /// first).
    pub const NAMES: &[(u32, &str)] = &[
        (DOCUMENT, "document"),
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
    ];

    /// A category by its name (case-insensitive, without the `@`).
    pub fn by_name(name: &str) -> Option<u32> {
        NAMES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(c, _)| *c)
    }
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

    fn from_name(s: &str) -> Option<ArgKind> {
        Some(match s {
            "string" => ArgKind::String,
            "integer" => ArgKind::Integer,
            "double" => ArgKind::Double,
            "key" => ArgKind::Key,
            "pattern" => ArgKind::Pattern,
            "unix-time" => ArgKind::UnixTime,
            _ => return None,
        })
    }
}

/// One argument of a command, for `COMMAND DOCS`, parsed from the row's notation.
#[derive(Debug, Clone, PartialEq)]
pub struct Arg {
    pub name: String,
    pub kind: ArgKind,
    /// The literal word that introduces the argument (`EX`, `LIMIT`, ...).
    pub token: Option<String>,
    pub optional: bool,
    pub multiple: bool,
    /// Repeats with its token each time (`GET pattern [GET pattern ...]`).
    pub multiple_token: bool,
    /// Members of a `OneOf` or `Block`.
    pub args: Vec<Arg>,
}

/// Where a command's keys are, for `COMMAND GETKEYS`, `COMMAND INFO`'s key specs and key
/// extraction. Rows with keys at fixed positions use [`CommandSpec::keys`] alone; commands
/// whose keys move (a key count, a keyword) add explicit specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    /// Redis's key-spec flags (`RW`, `RO`, `OW`, `RM`, `ACCESS`, `UPDATE`, `INSERT`, `DELETE`).
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

impl KeySpec {
    /// Keys counted by the argument at `at` (`numkeys key...`), as LMPOP, ZUNION or EVAL:
    /// `const LMPOP_KEYS: &[KeySpec] = &[KeySpec::keynum(1, &["RW", "ACCESS", "DELETE"])];`
    pub const fn keynum(at: i32, flags: &'static [&'static str]) -> KeySpec {
        KeySpec {
            flags,
            begin: Begin::Index(at),
            find: Find::Keynum {
                keynum_idx: 0,
                first: 1,
                step: 1,
            },
        }
    }

    /// One key at `at`.
    pub const fn at(at: i32, flags: &'static [&'static str]) -> KeySpec {
        KeySpec {
            flags,
            begin: Begin::Index(at),
            find: Find::Range {
                last: 0,
                step: 1,
                limit: 0,
            },
        }
    }
}

/// Where the search for a key spec's keys starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// At this argument index.
    Index(i32),
    /// After this keyword, searched from `start_from` (negative: from the end, backwards).
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
}

/// Which arguments from the start are keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Find {
    /// `last` relative to the start (negative: from the end), every `step`; `limit` > 1
    /// takes 1/limit of what is left (XREAD's half).
    Range { last: i32, step: i32, limit: i32 },
    /// A count of keys at `keynum_idx` (relative to the start), keys from `first` after it.
    Keynum {
        keynum_idx: i32,
        first: i32,
        step: i32,
    },
}

/// The key flags of one call of a command whose key specs say `VARIABLE_FLAGS`.
pub type KeyFlagsFn = fn(&[bytes::Bytes]) -> &'static [&'static str];

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
    /// Explicit key specs; empty: one derived from first/last/step.
    pub key_specs: &'static [KeySpec],
    /// For key specs flagged `variable_flags` (as SET, whose key is only overwritten
    /// without GET): the flags a given call's keys really get (`COMMAND GETKEYSANDFLAGS`),
    /// as Redis's `getkeys_proc`.
    pub key_flags: Option<KeyFlagsFn>,
    /// The flags of the key spec derived from first/last/step (Redis's per-command key-spec
    /// flags, e.g. `RW insert` for LPUSH); empty: `RW` for a write command, `RO access`
    /// otherwise.
    pub derived_key_flags: &'static [&'static str],
    /// ACL categories the flags do not imply (bit set of [`acl`] constants).
    pub acl: u32,
    pub summary: &'static str,
    pub since: &'static str,
    /// `connection`, `server`, `generic`, `string`, `hash`, `transactions`, `pubsub`, `document`.
    pub group: &'static str,
    pub complexity: &'static str,
    /// The arguments in the notation above.
    pub args: &'static str,
    pub subcommands: &'static [CommandSpec],
    pub handler: Handler,
    /// Where the handler's cursor starts: after the name, and after the subcommand name for
    /// a subcommand (`container|sub`). Computed from the name when the row is built.
    pub first_arg: usize,
}

/// A family's defaults: `const HASH: CommandSpec = family("hash", acl::HASH);`, then each row
/// starts with `HASH.cmd(name, arity, handler)`.
pub const fn family(group: &'static str, acl: u32) -> CommandSpec {
    CommandSpec {
        name: "",
        arity: 1,
        flags: 0,
        first_key: 0,
        last_key: 0,
        step: 0,
        key_specs: &[],
        key_flags: None,
        derived_key_flags: &[],
        acl,
        summary: "",
        since: "1.0.0",
        group,
        complexity: "O(1)",
        args: "",
        subcommands: &[],
        handler: not_yet_implemented,
        first_arg: 1,
    }
}

impl CommandSpec {
    /// A row of this family: name, Redis arity, handler.
    pub const fn cmd(mut self, name: &'static str, arity: i32, handler: Handler) -> CommandSpec {
        self.name = name;
        self.arity = arity;
        self.handler = handler;
        let b = name.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'|' {
                self.first_arg = 2;
            }
            i += 1;
        }
        self
    }
    /// Adds [`flag`]s.
    pub const fn flags(mut self, f: u32) -> CommandSpec {
        self.flags |= f;
        self
    }
    /// Keys at first..=last (negative: from the end), every `step`.
    pub const fn keys(mut self, first: i32, last: i32, step: i32) -> CommandSpec {
        self.first_key = first;
        self.last_key = last;
        self.step = step;
        self
    }
    /// The common case: one key, the first argument.
    pub const fn key(self) -> CommandSpec {
        self.keys(1, 1, 1)
    }
    /// The flags of a call's keys, for key specs flagged `VARIABLE_FLAGS`.
    pub const fn key_flags(mut self, f: KeyFlagsFn) -> CommandSpec {
        self.key_flags = Some(f);
        self
    }
    /// The flags of the key spec derived from `keys`/`key` (as redis-server 7's COMMAND
    /// INFO gives them: ACL `%R~`/`%W~` selectors and DRYRUN read them).
    pub const fn key_spec_flags(mut self, flags: &'static [&'static str]) -> CommandSpec {
        self.derived_key_flags = flags;
        self
    }
    pub const fn key_specs(mut self, specs: &'static [KeySpec]) -> CommandSpec {
        self.key_specs = specs;
        self
    }
    /// Adds ACL categories the flags do not imply.
    pub const fn acl(mut self, cats: u32) -> CommandSpec {
        self.acl |= cats;
        self
    }
    /// Replaces the family's categories (a row that does not share them).
    pub const fn only_acl(mut self, cats: u32) -> CommandSpec {
        self.acl = cats;
        self
    }
    pub const fn group(mut self, group: &'static str) -> CommandSpec {
        self.group = group;
        self
    }
    /// The Redis version it appeared in and its one-line summary.
    pub const fn doc(mut self, since: &'static str, summary: &'static str) -> CommandSpec {
        self.since = since;
        self.summary = summary;
        self
    }
    pub const fn complexity(mut self, c: &'static str) -> CommandSpec {
        self.complexity = c;
        self
    }
    pub const fn args(mut self, notation: &'static str) -> CommandSpec {
        self.args = notation;
        self
    }
    pub const fn subs(mut self, subs: &'static [CommandSpec]) -> CommandSpec {
        self.subcommands = subs;
        self
    }

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

    /// Every ACL category of the command: the row's own plus those its flags imply (write,
    /// read, admin + dangerous, pubsub, fast, blocking, and slow when not fast), as Redis's
    /// `setImplicitACLCategories`.
    pub fn categories(&self) -> u32 {
        let mut c = self.acl;
        let implied = [
            (flag::WRITE, acl::WRITE),
            (flag::ADMIN, acl::ADMIN | acl::DANGEROUS),
            (flag::PUBSUB, acl::PUBSUB),
            (flag::FAST, acl::FAST),
            (flag::BLOCKING, acl::BLOCKING),
        ];
        for (f, a) in implied {
            if self.has(f) {
                c |= a;
            }
        }
        if self.has(flag::READONLY) && c & acl::SCRIPTING == 0 {
            c |= acl::READ;
        }
        if c & acl::FAST == 0 {
            c |= acl::SLOW;
        }
        c
    }

    /// The key specs `COMMAND INFO` reports and key extraction follows: the explicit ones,
    /// or one from first/last/step.
    pub fn effective_key_specs(&self) -> Vec<KeySpec> {
        if !self.key_specs.is_empty() {
            return self.key_specs.to_vec();
        }
        if self.first_key <= 0 {
            return Vec::new();
        }
        let last = if self.last_key < 0 {
            self.last_key
        } else {
            self.last_key - self.first_key
        };
        vec![KeySpec {
            flags: if !self.derived_key_flags.is_empty() {
                self.derived_key_flags
            } else if self.has(flag::WRITE) {
                &["RW"]
            } else {
                &["RO", "access"]
            },
            begin: Begin::Index(self.first_key),
            find: Find::Range {
                last,
                step: self.step,
                limit: 0,
            },
        }]
    }

    /// The first key of a request whose argument count is `argc` and whose first arguments
    /// are `lead`, when the table says where it is without looking further: the legacy
    /// first-key position (GET, SET, HSET...) or a leading key count (EVAL, FCALL). A hint
    /// for warming the key space (`commands::warm_keys`), not for routing or ACL checks,
    /// which use [`CommandSpec::key_positions`].
    pub fn first_key_of<'a>(&self, argc: usize, lead: &[&'a [u8]]) -> Option<&'a [u8]> {
        if self.first_key > 0 {
            return lead.get(self.first_key as usize).copied();
        }
        match self.key_specs.first()? {
            KeySpec {
                begin: Begin::Index(b),
                find: Find::Keynum {
                    keynum_idx, first, ..
                },
                ..
            } if *b > 0 && *keynum_idx >= 0 && *first > *keynum_idx => {
                let count = crate::util::num::parse_i64(lead.get((b + keynum_idx) as usize)?)?;
                let at = (b + first) as usize;
                (count > 0 && at < argc)
                    .then(|| lead.get(at).copied())
                    .flatten()
            }
            _ => None,
        }
    }

    /// Positions of the keys in `args` (which includes the command name).
    pub fn key_positions(&self, args: &[bytes::Bytes]) -> Vec<usize> {
        self.key_positions_with_flags(args)
            .into_iter()
            .map(|(i, _)| i)
            .collect()
    }

    /// Positions of the keys in `args`, each with the flags of the key spec that found it
    /// (`COMMAND GETKEYSANDFLAGS`).
    pub fn key_positions_with_flags(
        &self,
        args: &[bytes::Bytes],
    ) -> Vec<(usize, &'static [&'static str])> {
        self.positions(args, false)
    }

    /// What cluster routing hashes (Redis's getNodeByQuery): the keys and the shard
    /// channels (`not_key` specs: SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE), and whether the
    /// command names shard channels.
    pub fn routing_positions(&self, args: &[bytes::Bytes]) -> (Vec<usize>, bool) {
        let channels = self
            .effective_key_specs()
            .iter()
            .any(|ks| ks.flags.contains(&"not_key"));
        let pos = self
            .positions(args, true)
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        (pos, channels)
    }

    fn positions(
        &self,
        args: &[bytes::Bytes],
        not_keys: bool,
    ) -> Vec<(usize, &'static [&'static str])> {
        let argc = args.len();
        let mut out = Vec::new();
        // Positions found by a spec flagged `incomplete` (MIGRATE's KEYS).
        let mut incomplete_from = None;
        for ks in self.effective_key_specs() {
            // A `not_key` spec (SPUBLISH's shard channel) names no key: Redis leaves it out
            // of GETKEYS and ACL key checks too.
            if ks.flags.contains(&"not_key") && !not_keys {
                continue;
            }
            if ks.flags.contains(&"incomplete") && incomplete_from.is_none() {
                incomplete_from = Some(out.len());
            }
            let start = match ks.begin {
                Begin::Index(i) if i > 0 && (i as usize) < argc => i as usize,
                Begin::Index(_) => continue,
                Begin::Keyword {
                    keyword,
                    start_from,
                } => {
                    let found = if start_from >= 0 {
                        (start_from.max(1) as usize..argc)
                            .find(|&i| args[i].eq_ignore_ascii_case(keyword.as_bytes()))
                    } else {
                        let from = argc as i64 + start_from as i64;
                        (1..=from.max(0) as usize)
                            .rev()
                            .find(|&i| i < argc && args[i].eq_ignore_ascii_case(keyword.as_bytes()))
                    };
                    match found {
                        Some(i) if i + 1 < argc => i + 1,
                        _ => continue,
                    }
                }
            };
            match ks.find {
                Find::Range { last, step, limit } => {
                    let step = step.max(1) as usize;
                    let end = if last < 0 {
                        let from_end = (-last) as usize;
                        if argc < from_end {
                            continue;
                        }
                        let mut end = argc - from_end;
                        if limit > 1 && end >= start {
                            end = start + (end - start + 1) / limit as usize - 1;
                        }
                        end
                    } else {
                        (start + last as usize).min(argc - 1)
                    };
                    let flags = match self.key_flags {
                        Some(f) if ks.flags.contains(&"variable_flags") => f(args),
                        _ => ks.flags,
                    };
                    let mut i = start;
                    while i <= end && i < argc {
                        out.push((i, flags));
                        i += step;
                    }
                }
                Find::Keynum {
                    keynum_idx,
                    first,
                    step,
                } => {
                    let at = start + keynum_idx as usize;
                    let n = args.get(at).and_then(|a| crate::util::num::parse_i64(a));
                    let first_at = start + first as usize;
                    // A count that is not a number, negative, or names keys past the
                    // end makes the whole call's keys invalid, as Redis's
                    // `getKeysUsingKeySpecs` (no keys at all): the command then answers
                    // its own error (EVAL's "Number of keys can't be greater than number
                    // of args") rather than an ACL refusal of a key it will never touch.
                    let n = match n {
                        Some(n)
                            if n >= 0 && (n as u64) <= (argc.saturating_sub(first_at)) as u64 =>
                        {
                            n as usize
                        }
                        _ => return Vec::new(),
                    };
                    let mut i = first_at;
                    for _ in 0..n {
                        if i >= argc {
                            break;
                        }
                        out.push((i, ks.flags));
                        i += step.max(1) as usize;
                    }
                }
            }
        }
        // Redis asks the command (its getkeys proc) when a spec is incomplete; MIGRATE's is
        // the one here: once KEYS names the keys, its key argument (the empty string) is not
        // one.
        if let Some(from) = incomplete_from.filter(|&f| f < out.len()) {
            let mut i = 0;
            out.retain(|&(pos, _)| {
                i += 1;
                i > from || !args[pos].is_empty()
            });
        }
        out
    }
}

/// The handler for a documented command whose implementation has not landed yet.
pub fn not_yet_implemented(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    Err(crate::commands::args::CommandError::msg(format!(
        "ERR '{}' is not yet implemented in this version of tidecache",
        String::from_utf8_lossy(args.name()).to_lowercase()
    )))
}

/// Parses a row's argument notation (see the module docs) into `COMMAND DOCS` arguments.
pub fn parse_args(notation: &str) -> Result<Vec<Arg>, String> {
    let mut p = NotationParser {
        s: notation.as_bytes(),
        i: 0,
    };
    let args = p.seq(None)?;
    if p.i != p.s.len() {
        return Err(format!("unexpected '{}' at {}", p.s[p.i] as char, p.i));
    }
    Ok(args)
}

struct NotationParser<'a> {
    s: &'a [u8],
    i: usize,
}

fn is_token_word(w: &str) -> bool {
    !w.is_empty()
        && w.bytes().any(|c| c.is_ascii_uppercase())
        && w.bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

impl NotationParser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// Elements until `end` (or the end of the text).
    fn seq(&mut self, end: Option<u8>) -> Result<Vec<Arg>, String> {
        let mut out = Vec::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                None if end.is_none() => return Ok(out),
                None => return Err(format!("missing '{}'", end.unwrap_or(b'?') as char)),
                Some(c) if Some(c) == end => return Ok(out),
                Some(b'|') if end == Some(b')') => return Ok(out),
                Some(_) => out.push(self.element()?),
            }
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at {}", c as char, self.i))
        }
    }

    fn element(&mut self) -> Result<Arg, String> {
        let mut arg = if self.peek() == Some(b'[') {
            self.i += 1;
            self.skip_spaces();
            let mut a = self.element()?;
            self.skip_spaces();
            self.expect(b']')?;
            a.optional = true;
            a
        } else {
            self.core()?
        };
        if self.s[self.i..].starts_with(b"+...") {
            self.i += 4;
            arg.multiple = true;
            arg.multiple_token = true;
        } else if self.s[self.i..].starts_with(b"...") {
            self.i += 3;
            arg.multiple = true;
        }
        Ok(arg)
    }

    fn word(&mut self) -> String {
        let start = self.i;
        while let Some(c) = self.peek() {
            let dot = c == b'.' && !self.s[self.i..].starts_with(b"...");
            if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || dot {
                self.i += 1;
            } else {
                break;
            }
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    fn quoted(&mut self) -> Result<String, String> {
        self.expect(b'\'')?;
        let start = self.i;
        while self.peek().is_some_and(|c| c != b'\'') {
            self.i += 1;
        }
        let t = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        self.expect(b'\'')?;
        Ok(t)
    }

    /// `TOKEN`, `name`, `name:kind`, `name=TOKEN`, `TOKEN=name...`, `name:(..)`, `name:{..}`.
    fn core(&mut self) -> Result<Arg, String> {
        let first = self.word();
        if first.is_empty() {
            return Err(format!("expected an argument at {}", self.i));
        }
        if self.peek() == Some(b'=') {
            self.i += 1;
            if is_token_word(&first) {
                // TOKEN=name:kind (or a token-led oneof / block).
                let mut a = self.core()?;
                a.token = Some(first);
                return Ok(a);
            }
            // name=TOKEN or name='tok': a pure token with its own name.
            let token = if self.peek() == Some(b'\'') {
                self.quoted()?
            } else {
                self.word()
            };
            return Ok(pure(first, token));
        }
        if self.peek() == Some(b':') {
            self.i += 1;
            return match self.peek() {
                Some(b'(') => {
                    self.i += 1;
                    let mut alts = Vec::new();
                    loop {
                        let mut alt = self.seq(Some(b')'))?;
                        if alt.len() != 1 {
                            return Err(format!("one element per alternative in '{first}'"));
                        }
                        alts.push(alt.remove(0));
                        match self.peek() {
                            Some(b'|') => self.i += 1,
                            _ => break,
                        }
                    }
                    self.expect(b')')?;
                    Ok(group(first, ArgKind::OneOf, alts))
                }
                Some(b'{') => {
                    self.i += 1;
                    let members = self.seq(Some(b'}'))?;
                    self.expect(b'}')?;
                    Ok(group(first, ArgKind::Block, members))
                }
                _ => {
                    let kind = self.word();
                    let kind = ArgKind::from_name(&kind)
                        .ok_or_else(|| format!("unknown kind '{kind}' of '{first}'"))?;
                    Ok(plain(first, kind))
                }
            };
        }
        if is_token_word(&first) {
            let name = first.to_lowercase();
            return Ok(pure(name, first));
        }
        Ok(plain(first, ArgKind::String))
    }
}

fn plain(name: String, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
        multiple_token: false,
        args: Vec::new(),
    }
}

fn pure(name: String, token: String) -> Arg {
    Arg {
        token: Some(token),
        ..plain(name, ArgKind::PureToken)
    }
}

fn group(name: String, kind: ArgKind, args: Vec<Arg>) -> Arg {
    Arg {
        args,
        ..plain(name, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notation_covers_redis_argument_shapes() {
        let a = parse_args(
            "key value [condition:(NX|XX)] [GET] [expiration:(EX=seconds:integer|PXAT=unix-time-milliseconds:unix-time|KEEPTTL)]",
        )
        .unwrap();
        assert_eq!(a.len(), 5);
        assert_eq!(a[0].kind, ArgKind::String);
        assert_eq!(
            (a[2].name.as_str(), a[2].kind, a[2].optional),
            ("condition", ArgKind::OneOf, true)
        );
        assert_eq!(a[2].args[1].token.as_deref(), Some("XX"));
        assert_eq!(a[3].name, "get");
        let ex = &a[4].args[0];
        assert_eq!(
            (ex.name.as_str(), ex.kind, ex.token.as_deref()),
            ("seconds", ArgKind::Integer, Some("EX"))
        );
        assert_eq!(a[4].args[1].kind, ArgKind::UnixTime);
        let b = parse_args("key:key field_value:{field value}... [change=CH] [auto_id='*'] [GET=pattern:pattern+...] [FILTERBY=filterby:(MODULE=module-name|ACLCAT=category)]").unwrap();
        assert_eq!(b[0].kind, ArgKind::Key);
        assert!(b[1].multiple && b[1].kind == ArgKind::Block && b[1].args.len() == 2);
        assert_eq!(
            (b[2].name.as_str(), b[2].token.as_deref()),
            ("change", Some("CH"))
        );
        assert_eq!(b[3].token.as_deref(), Some("*"));
        assert!(b[4].multiple && b[4].multiple_token && b[4].optional);
        assert_eq!(
            (b[5].kind, b[5].token.as_deref()),
            (ArgKind::OneOf, Some("FILTERBY"))
        );
        for bad in ["[key", "x:(a|b", "x:nosuchkind", "x:{a"] {
            assert!(parse_args(bad).is_err(), "{bad}");
        }
    }
}
