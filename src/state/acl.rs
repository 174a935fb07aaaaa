//! Users and their permissions, as Redis 7.0's ACL (`src/acl.c`): the rules `ACL SETUSER`
//! and `user` lines apply, what `ACL GETUSER/LIST` describe back, the permission check, the
//! `ACL LOG` and the registry of users.
//!
//! The command universe comes from the command table, which lives above this layer: the
//! commands layer builds a [`Catalog`] from the table once (`commands::acl::catalog`) and
//! passes it to whatever needs command names, categories or subcommands. A command's id is
//! its row in the table's statistics order (commands and subcommands), so ids are dense.
//!
//! Users are immutable snapshots (`Arc<User>`): a change builds a new one and replaces it in
//! the registry, and bumps the registry's epoch. A connection keeps its user's snapshot and
//! the epoch it read it at, so the per-command check of an unrestricted user is one compare
//! of a cached number with the epoch (see `commands::acl::permitted`).

use crate::util::glob::glob_match;
use crate::util::sha256;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// What a key pattern grants (`~` both, `%R~` read, `%W~` write).
pub mod perm {
    pub const READ: u8 = 1;
    pub const WRITE: u8 = 2;
    pub const ALL: u8 = READ | WRITE;
}

/// One command or subcommand of the table, as ACL sees it.
#[derive(Debug, Clone)]
pub struct CmdInfo {
    /// `get`, `client|kill`.
    pub name: &'static str,
    pub categories: u32,
    /// NO_AUTH commands (AUTH, HELLO, ...) run whatever the rules say, as in Redis.
    pub no_auth: bool,
    pub parent: Option<usize>,
    pub subs: Vec<usize>,
}

/// The commands and categories rules refer to, built from the command table.
pub struct Catalog {
    pub cmds: Vec<CmdInfo>,
    /// (bit, name) in `ACL CAT` order.
    pub categories: &'static [(u32, &'static str)],
    by_name: hashbrown::HashMap<String, usize>,
}

impl Catalog {
    pub fn new(cmds: Vec<CmdInfo>, categories: &'static [(u32, &'static str)]) -> Catalog {
        let by_name = cmds
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.to_string(), i))
            .collect();
        Catalog {
            cmds,
            categories,
            by_name,
        }
    }

    /// A command or `container|sub` by name, case-insensitively.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.by_name.get(&name).copied()
    }

    pub fn category(&self, name: &[u8]) -> Option<u32> {
        self.categories
            .iter()
            .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name))
            .map(|(c, _)| *c)
    }
}

/// Why a rule was refused: Redis's `ACLSetUserStringError` texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    UnknownName,
    Syntax,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSub,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::UnknownName => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// One set of permissions: the root selector of a user, or a `(...)` one.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub root: bool,
    /// `allcommands` / `+@all` with no command removed since.
    allcommands: bool,
    allkeys: bool,
    allchannels: bool,
    /// Command bits by id; ids past the vector read as `fill` (set by `+@all`, cleared by
    /// `-@all`: Redis's reserved "future commands" bit).
    words: Vec<u64>,
    fill: bool,
    /// `+select|0`: first arguments allowed for a command whose bit is clear.
    firstargs: Vec<(usize, Vec<String>)>,
    keys: Vec<(u8, Vec<u8>)>,
    channels: Vec<Vec<u8>>,
    /// The command rules as given since the last `+@all`/`-@all` (`+get`, `-@hash`,
    /// `+client|id`, `+select|0`), lowercased; `ACL GETUSER/LIST` and the ACL file show
    /// them after `+@all`/`-@all` (see [`Selector::keep_rule`]). Replaying them on a
    /// fresh selector gives the same bits, so the description round-trips.
    rules: Vec<String>,
}

/// `existing` is `new` itself or one of its subcommands (`client|id` for `client`):
/// Redis 7.2's `ACLSelectorRemoveCommandRule` match.
fn rule_covers(new: &str, existing: &str) -> bool {
    existing == new
        || (existing.len() > new.len()
            && existing.starts_with(new)
            && existing.as_bytes()[new.len()] == b'|')
}

impl Selector {
    fn new(root: bool, pubsub_all: bool) -> Selector {
        Selector {
            root,
            allcommands: false,
            allkeys: false,
            allchannels: pubsub_all,
            words: Vec::new(),
            fill: false,
            firstargs: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
            rules: Vec::new(),
        }
    }

    /// Records a command rule that was just applied (`allow` its sign, `name` the command,
    /// `cmd|sub`, `cmd|firstarg` or `@category`), as Redis 7.2's `ACLUpdateCommandRules`:
    /// earlier rules about the same command (or its subcommands) are dropped and the rule is
    /// appended, so the text stays in the order given and replays to the same bits.
    fn keep_rule(&mut self, allow: bool, name: &str) {
        let name = name.to_ascii_lowercase();
        self.rules.retain(|r| !rule_covers(&name, &r[1..]));
        self.rules
            .push(format!("{}{name}", if allow { '+' } else { '-' }));
    }

    fn bit(&self, id: usize) -> bool {
        self.words
            .get(id / 64)
            .map_or(self.fill, |w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        let w = id / 64;
        if self.words.len() <= w {
            let fill = if self.fill { u64::MAX } else { 0 };
            self.words.resize(w + 1, fill);
        }
        if on {
            self.words[w] |= 1 << (id % 64);
        } else {
            self.words[w] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// Redis's `ACLChangeSelectorPerm`: a command and all its subcommands.
    fn change_perm(&mut self, cat: &Catalog, id: usize, on: bool) {
        self.set_bit(id, on);
        self.firstargs.retain(|(i, _)| *i != id);
        for &s in &cat.cmds[id].subs {
            self.set_bit(s, on);
        }
    }

    fn set_category(&mut self, cat: &Catalog, flag: u32, on: bool) {
        for (id, c) in cat.cmds.iter().enumerate() {
            if c.categories & flag != 0 {
                self.change_perm(cat, id, on);
            }
        }
    }

    fn all_commands(&mut self, on: bool) {
        self.words.clear();
        self.fill = on;
        self.allcommands = on;
        self.firstargs.clear();
        self.rules.clear();
    }

    /// Redis's `ACLSetSelector`: one rule about commands, keys or channels.
    fn apply(&mut self, cat: &Catalog, op: &[u8]) -> Result<(), RuleError> {
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || op == b"&*" {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all_commands(true);
        } else if is("nocommands") || is("-@all") {
            self.all_commands(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let (flags, pattern) = if op[0] == b'%' {
                let mut flags = 0;
                let mut at = 1;
                loop {
                    match op.get(at).map(|c| c.to_ascii_uppercase()) {
                        Some(b'R') if flags & perm::READ == 0 => flags |= perm::READ,
                        Some(b'W') if flags & perm::WRITE == 0 => flags |= perm::WRITE,
                        Some(b'~') => {
                            at += 1;
                            break;
                        }
                        _ => return Err(RuleError::Syntax),
                    }
                    at += 1;
                }
                (flags, &op[at..])
            } else {
                (perm::ALL, &op[1..])
            };
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|(_, p)| p == pattern) {
                Some((f, _)) => *f |= flags,
                None => self.keys.push((flags, pattern.to_vec())),
            }
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let id = cat.lookup(name).ok_or(RuleError::UnknownName)?;
                    self.change_perm(cat, id, true);
                    self.keep_rule(true, cat.cmds[id].name);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let id = cat.lookup(base).ok_or(RuleError::UnknownName)?;
                    if cat.cmds[id].parent.is_some() {
                        return Err(RuleError::FirstArgOfSub);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !cat.cmds[id].subs.is_empty() {
                        let sub = cat.lookup(name).ok_or(RuleError::UnknownName)?;
                        self.change_perm(cat, sub, true);
                    } else {
                        // SELECT|0, DEBUG|OBJECT: a first argument of a command without
                        // subcommands (deprecated in Redis, still accepted).
                        let sub = String::from_utf8_lossy(sub).into_owned();
                        match self.firstargs.iter_mut().find(|(i, _)| *i == id) {
                            Some((_, list)) => {
                                if !list.iter().any(|s| s.eq_ignore_ascii_case(&sub)) {
                                    list.push(sub);
                                }
                            }
                            None => self.firstargs.push((id, vec![sub])),
                        }
                    }
                    // As Redis: the text as given (`+client|id`, `+select|0`).
                    self.keep_rule(true, &String::from_utf8_lossy(name));
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = cat.lookup(&op[1..]).ok_or(RuleError::UnknownName)?;
            self.change_perm(cat, id, false);
            self.keep_rule(false, cat.cmds[id].name);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let flag = cat.category(&op[2..]).ok_or(RuleError::UnknownName)?;
            let allow = op[0] == b'+';
            self.set_category(cat, flag, allow);
            let name = cat
                .categories
                .iter()
                .find(|(f, _)| *f == flag)
                .map_or("", |(_, n)| n);
            self.keep_rule(allow, &format!("@{name}"));
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Whether this selector lets `id` run with `args` (the command's own arguments from
    /// the name on), with the keys and channels the command names.
    fn check(&self, cat: &Catalog, call: &Call<'_>) -> Result<(), Denied> {
        let info = &cat.cmds[call.id];
        if !self.allcommands && !info.no_auth && !self.bit(call.id) {
            let at = if info.parent.is_some() { 2 } else { 1 };
            let first = call.args.get(at);
            let ok = first.is_some_and(|a| {
                self.firstargs
                    .iter()
                    .find(|(i, _)| *i == call.id)
                    .is_some_and(|(_, list)| {
                        list.iter().any(|s| s.as_bytes().eq_ignore_ascii_case(a))
                    })
            });
            if !ok {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            for &(pos, need) in call.keys {
                if !self.key_ok(&call.args[pos], need) {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.allchannels {
            for &(pos, pattern) in call.channels {
                if !channel_ok(&self.channels, &call.args[pos], pattern) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }

    fn key_ok(&self, key: &[u8], need: u8) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|(f, p)| f & need == need && glob_match(p, key, false))
    }

    /// Redis's `ACLSelectorHasUnrestrictedKeyAccess`: `~*`-like access for `need`.
    fn unrestricted_keys(&self, need: u8) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|(f, p)| f & need == need && p.as_slice() == b"*")
    }

    /// The key patterns as `ACL GETUSER` shows them.
    pub fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        let parts: Vec<String> = self
            .keys
            .iter()
            .map(|(f, p)| {
                let prefix = match *f {
                    perm::READ => "%R~",
                    perm::WRITE => "%W~",
                    _ => "~",
                };
                format!("{prefix}{}", String::from_utf8_lossy(p))
            })
            .collect();
        parts.join(" ")
    }

    /// The channel patterns as `ACL GETUSER` shows them.
    pub fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let parts: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        parts.join(" ")
    }

    /// Redis 7.2's `ACLDescribeSelectorCommandRules`: `+@all` or `-@all` (whether commands
    /// added later are allowed), then the command rules as given, in order: a rule that
    /// changes nothing where it stands (`+@all +client|id`, `-@all -@dangerous`) is kept, so
    /// the text is what the user said and replays to the same permissions (ACL SAVE and
    /// LOAD keep it as it is). Redis 7.0 instead searched for the categories that fit the
    /// bits best, which rewrote what was said and depended on its command table.
    pub fn describe_commands(&self) -> String {
        let mut out = String::from(if self.fill { "+@all" } else { "-@all" });
        for r in &self.rules {
            out.push(' ');
            out.push_str(r);
        }
        out
    }

    /// The whole selector in rule form (ACL LIST), as Redis's `ACLDescribeSelector`.
    fn describe(&self) -> String {
        let mut out = String::new();
        if self.allkeys {
            out.push_str("~* ");
        } else {
            for k in self.describe_keys().split(' ').filter(|s| !s.is_empty()) {
                out.push_str(k);
                out.push(' ');
            }
        }
        if self.allchannels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}

/// Redis's `ACLCheckChannelAgainstList`: a PSUBSCRIBE pattern must be granted literally; a
/// channel is matched against the granted patterns.
fn channel_ok(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p.as_slice() == channel
        } else {
            glob_match(p, channel, false)
        }
    })
}

/// A command about to run, as the check needs it: its id, its arguments (name first), the
/// positions of its keys with the access each needs ([`perm`]), and of its channels with
/// whether each is a pattern.
pub struct Call<'a> {
    pub id: usize,
    pub args: &'a [bytes::Bytes],
    pub keys: &'a [(usize, u8)],
    pub channels: &'a [(usize, bool)],
}

/// Why a command was refused; the position is the argument's index in the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

/// A user: flags, password hashes and selectors (the first is the root one).
#[derive(Debug, Clone)]
pub struct User {
    pub name: Vec<u8>,
    /// Identity across changes; a user deleted and created again is another one.
    pub id: u64,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) / `skip-sanitize-payload` (Some(false)).
    pub sanitize: Option<bool>,
    pub passwords: Vec<[u8; 32]>,
    pub selectors: Vec<Selector>,
}

impl User {
    fn new(name: &[u8], id: u64, pubsub_all: bool) -> User {
        User {
            name: name.to_vec(),
            id,
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, pubsub_all)],
        }
    }

    /// Redis's default user: `on nopass ~* &* +@all`.
    fn default_user(id: u64) -> User {
        let mut u = User::new(b"default", id, true);
        u.enabled = true;
        u.nopass = true;
        let s = &mut u.selectors[0];
        s.all_commands(true);
        s.allkeys = true;
        s.allchannels = true;
        u
    }

    pub fn name_text(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// Everything allowed: one selector with every command, key and channel. A connection
    /// of such a user skips the check entirely.
    pub fn unrestricted(&self) -> bool {
        let s = &self.selectors[0];
        self.selectors.len() == 1 && s.allcommands && s.allkeys && s.allchannels
    }

    /// Some selector restricts keys (so the command's keys must be extracted).
    pub fn restricts_keys(&self) -> bool {
        self.selectors.iter().any(|s| !s.allkeys)
    }

    pub fn restricts_channels(&self) -> bool {
        self.selectors.iter().any(|s| !s.allchannels)
    }

    /// Redis's `ACLSetUser`: one rule. `pubsub_all` is `acl-pubsub-default allchannels`.
    pub fn apply(&mut self, cat: &Catalog, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                sha256::sha256(&op[1..])
            } else {
                sha256::parse_hex(&op[1..]).ok_or(RuleError::BadHash)?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                sha256::sha256(&op[1..])
            } else {
                sha256::parse_hex(&op[1..]).ok_or(RuleError::BadHash)?
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let inner = &op[1..op.len() - 1];
            let mut s = Selector::new(false, pubsub_all);
            let words = crate::util::sds::split_args(inner).ok_or(RuleError::Syntax)?;
            for w in words {
                s.apply(cat, &w)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.allkeys = false;
            root.keys.clear();
            root.allchannels = pubsub_all;
            root.channels.clear();
            self.enabled = false;
            self.sanitize = Some(true);
            self.selectors.truncate(1);
            self.selectors[0].all_commands(false);
        } else {
            self.selectors[0].apply(cat, op)?;
        }
        Ok(())
    }

    /// Redis's `ACLDescribeUser`: the user's rules as `ACL LIST` and the ACL file show them.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        out.push_str(if self.enabled { "on " } else { "off " });
        if self.nopass {
            out.push_str("nopass ");
        }
        match self.sanitize {
            Some(false) => out.push_str("skip-sanitize-payload "),
            Some(true) => out.push_str("sanitize-payload "),
            None => {}
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(&sha256::hex(p));
            out.push(' ');
        }
        for s in &self.selectors {
            if s.root {
                out.push_str(&s.describe());
            } else {
                out.push_str(&format!(" ({})", s.describe()));
            }
        }
        out
    }

    /// The flags `ACL GETUSER` lists, in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// Redis's `ACLCheckAllUserCommandPerm`: allowed if one selector allows it; else the
    /// error of the selector that got furthest (a command refusal only if none knew the
    /// command; else the key or channel at the largest position).
    pub fn check(&self, cat: &Catalog, call: &Call<'_>) -> Result<(), Denied> {
        let rank = |d: Denied| match d {
            Denied::Command => (0, 0),
            Denied::Key(p) => (1, p),
            Denied::Channel(p) => (2, p),
        };
        let mut worst = Denied::Command;
        for s in &self.selectors {
            match s.check(cat, call) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    if rank(d) > rank(worst) {
                        worst = d;
                    }
                }
            }
        }
        Err(worst)
    }

    /// Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess` (SORT BY/GET): one selector
    /// allows the call and grants `need` on every key.
    pub fn unrestricted_key_access(&self, cat: &Catalog, call: &Call<'_>, need: u8) -> bool {
        self.selectors
            .iter()
            .any(|s| s.check(cat, call).is_ok() && s.unrestricted_keys(need))
    }

    /// Whether `password` opens this user (enabled, and nopass or a matching hash, compared
    /// in constant time).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = sha256::sha256(password);
        let mut ok = false;
        for p in &self.passwords {
            ok |= sha256::same(p, &hash);
        }
        ok
    }

    /// Redis's `ACLKillPubsubClientsIfNeeded` test: whether subscribers of the old rules
    /// may keep their subscriptions under the new ones without a check (the new channels
    /// include every old one), or must be checked.
    pub fn channels_shrank_from(&self, old: &User) -> bool {
        if self.selectors.iter().any(|s| s.allchannels) {
            return false;
        }
        let upcoming: Vec<&Vec<u8>> = self.selectors.iter().flat_map(|s| &s.channels).collect();
        for s in &old.selectors {
            if s.allchannels {
                return true;
            }
            if s.channels.iter().any(|c| !upcoming.contains(&c)) {
                return true;
            }
        }
        false
    }

    /// Whether a subscriber to `channel` (a pattern if `is_pattern`) may keep it.
    pub fn may_keep_subscription(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.allchannels || channel_ok(&s.channels, channel, is_pattern))
    }
}

/// The selectors of a user split on `(...)` spanning several arguments, as Redis's
/// `ACLMergeSelectorArguments`; `Err(i)` names the argument whose `(` is never closed.
pub fn merge_selector_args(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((start, mut acc)) = open.take() {
            acc.push(b' ');
            acc.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(acc);
            } else {
                open = Some((start, acc));
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.clone()));
            continue;
        }
        out.push(op.clone());
    }
    match open {
        Some((start, _)) => Err(start),
        None => Ok(out),
    }
}

/// Where a refusal happened, for `ACL LOG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

/// One `ACL LOG` entry.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Last updated (Redis 7.2's `timestamp-last-updated`).
    pub ctime_ms: u64,
    pub client_info: String,
    /// Redis 7.2's `entry-id` and `timestamp-created`: set by [`Acl::log`] when the entry is
    /// new (a grouped event keeps them).
    pub entry_id: u64,
    pub created_ms: u64,
}

/// Entries within this many milliseconds of each other, with the same reason, context,
/// object and user, are one entry with a count (Redis's grouping).
const LOG_GROUPING_MS: u64 = 60_000;

/// Every user, the log, and the epoch connections compare with.
pub struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    /// Bumped after every change of any user; starts at 1 (0 is "never read").
    epoch: AtomicU64,
    next_id: AtomicU64,
    log: Mutex<VecDeque<LogEntry>>,
    /// Entries ever created (Redis's `ACLLogEntryCount`: not reset by ACL LOG RESET).
    log_created: AtomicU64,
    pub log_max: AtomicUsize,
    /// `acl-pubsub-default allchannels`.
    pub pubsub_all: AtomicBool,
}

impl Default for Acl {
    fn default() -> Self {
        Acl::new()
    }
}

impl Acl {
    pub fn new() -> Acl {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::default_user(1)));
        Acl {
            users: RwLock::new(users),
            epoch: AtomicU64::new(1),
            next_id: AtomicU64::new(2),
            log: Mutex::new(VecDeque::new()),
            log_created: AtomicU64::new(0),
            log_max: AtomicUsize::new(128),
            pubsub_all: AtomicBool::new(false),
        }
    }

    /// Read on every command (a plain load on x86). Acquire, paired with the bump made
    /// after the users' lock is released: a connection that sees the new number then reads
    /// the changed users, never the old ones under the new number.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get(b"default")
            .unwrap_or_else(|| Arc::new(User::default_user(1)))
    }

    /// The current version of `user`, or None if it was deleted (or replaced by a new user
    /// of the same name).
    pub fn current(&self, user: &User) -> Option<Arc<User>> {
        self.get(&user.name).filter(|u| u.id == user.id)
    }

    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Whether a new connection must authenticate: the default user has a password or is
    /// off (Redis's `authRequired`).
    pub fn default_needs_auth(&self) -> bool {
        let d = self.default_user();
        !d.nopass || !d.enabled
    }

    /// Redis's `ACLStringSetUser`: applies `rules` to a copy of the user (a fresh one if
    /// it does not exist) and stores it only if every rule applied. Returns the new user
    /// and the old one.
    pub fn set_user(
        &self,
        cat: &Catalog,
        name: &[u8],
        rules: &[Vec<u8>],
    ) -> Result<(Arc<User>, Option<Arc<User>>), String> {
        let merged = merge_selector_args(rules).map_err(|i| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&rules[i])
            )
        })?;
        let pubsub_all = self.pubsub_all.load(Ordering::Relaxed);
        let mut users = self.users.write();
        let old = users.get(name).cloned();
        let mut u = match &old {
            Some(o) => (**o).clone(),
            None => User::new(
                name,
                self.next_id.fetch_add(1, Ordering::Relaxed),
                pubsub_all,
            ),
        };
        for op in &merged {
            u.apply(cat, op, pubsub_all).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        let u = Arc::new(u);
        users.insert(name.to_vec(), u.clone());
        drop(users);
        self.bump();
        Ok((u, old))
    }

    /// Removes users; the caller closes their connections.
    pub fn delete(&self, names: &[&[u8]]) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        let gone: Vec<Arc<User>> = names.iter().filter_map(|n| users.remove(*n)).collect();
        drop(users);
        if !gone.is_empty() {
            self.bump();
        }
        gone
    }

    /// Replaces every user at once (ACL LOAD, start-up): `default` is created as Redis's
    /// default user if the set does not define it. Returns the users replaced.
    pub fn replace_all(&self, mut new: BTreeMap<Vec<u8>, User>) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        let mut fresh = BTreeMap::new();
        let default_id = users.get(b"default".as_slice()).map_or(1, |u| u.id);
        if !new.contains_key(b"default".as_slice()) {
            new.insert(b"default".to_vec(), User::default_user(default_id));
        }
        for (name, mut u) in new {
            // The default user keeps its identity (Redis copies the new rules into it), so
            // its connections stay; every other user is new.
            if name == b"default" {
                u.id = default_id;
            }
            fresh.insert(name, Arc::new(u));
        }
        let old = std::mem::replace(&mut *users, fresh);
        drop(users);
        self.bump();
        old.into_values().filter(|u| u.name != b"default").collect()
    }

    /// A user built from rules without storing it (ACL LOAD and start-up validate every
    /// line before anything changes).
    pub fn build_user(
        &self,
        cat: &Catalog,
        name: &[u8],
        rules: &[Vec<u8>],
    ) -> Result<User, (Vec<u8>, RuleError)> {
        let pubsub_all = self.pubsub_all.load(Ordering::Relaxed);
        let mut u = User::new(
            name,
            self.next_id.fetch_add(1, Ordering::Relaxed),
            pubsub_all,
        );
        for op in rules {
            u.apply(cat, op, pubsub_all).map_err(|e| (op.clone(), e))?;
        }
        Ok(u)
    }

    /// `requirepass`: the default user's password (`resetpass` then `>pass`, or `nopass`).
    pub fn set_default_password(&self, password: &str) {
        let mut users = self.users.write();
        let mut d = users
            .get(b"default".as_slice())
            .map_or_else(|| User::default_user(1), |u| (**u).clone());
        d.nopass = false;
        d.passwords.clear();
        if password.is_empty() {
            d.nopass = true;
        } else {
            d.passwords.push(sha256::sha256(password.as_bytes()));
        }
        users.insert(b"default".to_vec(), Arc::new(d));
        drop(users);
        self.bump();
    }

    /// Redis's `addACLLogEntry`: a similar entry among the 10 newest is bumped and moved to
    /// the front; else a new one is added and the log trimmed to `acllog-max-len`.
    pub fn log(&self, mut entry: LogEntry) {
        let mut log = self.log.lock();
        let similar = log.iter().take(10).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.ctime_ms.abs_diff(entry.ctime_ms) <= LOG_GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        if let Some(i) = similar {
            if let Some(mut e) = log.remove(i) {
                e.count += 1;
                e.ctime_ms = entry.ctime_ms;
                e.client_info = std::mem::take(&mut entry.client_info);
                log.push_front(e);
            }
            return;
        }
        entry.entry_id = self.log_created.fetch_add(1, Ordering::Relaxed);
        entry.created_ms = entry.ctime_ms;
        log.push_front(entry);
        let max = self.log_max.load(Ordering::Relaxed);
        log.truncate(max);
    }

    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().iter().take(count).cloned().collect()
    }

    pub fn log_reset(&self) {
        self.log.lock().clear();
    }

    pub fn trim_log(&self) {
        let max = self.log_max.load(Ordering::Relaxed);
        self.log.lock().truncate(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        const CATS: &[(u32, &str)] = &[(1, "read"), (2, "write"), (4, "admin")];
        let c = |name: &'static str, categories, parent, subs: Vec<usize>| CmdInfo {
            name,
            categories,
            no_auth: false,
            parent,
            subs,
        };
        Catalog::new(
            vec![
                c("get", 1, None, vec![]),
                c("set", 2, None, vec![]),
                c("config", 4, None, vec![3, 4]),
                c("config|get", 4, Some(2), vec![]),
                c("config|set", 4, Some(2), vec![]),
                c("select", 0, None, vec![]),
            ],
            CATS,
        )
    }

    fn user(rules: &str) -> Result<User, RuleError> {
        let cat = catalog();
        let mut u = User::new(b"u", 9, false);
        for r in rules.split(' ') {
            u.apply(&cat, r.as_bytes(), false)?;
        }
        Ok(u)
    }

    fn call<'a>(id: usize, args: &'a [bytes::Bytes], keys: &'a [(usize, u8)]) -> Call<'a> {
        Call {
            id,
            args,
            keys,
            channels: &[],
        }
    }

    #[test]
    fn rules_check_and_describe() {
        let cat = catalog();
        let u = user("on >p ~app:* +@read -@all +get +config -config|set +select|0").unwrap();
        assert!(u.password_ok(b"p") && !u.password_ok(b"q"));
        assert_eq!(
            u.selectors[0].describe_commands(),
            "-@all +get +config -config|set +select|0"
        );
        let a = |v: &[&str]| {
            v.iter()
                .map(|s| bytes::Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        let get_ok = a(&["get", "app:1"]);
        assert_eq!(u.check(&cat, &call(0, &get_ok, &[(1, perm::READ)])), Ok(()));
        let get_other = a(&["get", "other"]);
        assert_eq!(
            u.check(&cat, &call(0, &get_other, &[(1, perm::READ)])),
            Err(Denied::Key(1))
        );
        let set = a(&["set", "app:1", "v"]);
        assert_eq!(u.check(&cat, &call(1, &set, &[])), Err(Denied::Command));
        assert_eq!(
            u.check(&cat, &call(4, &a(&["config", "set"]), &[])),
            Err(Denied::Command)
        );
        assert_eq!(u.check(&cat, &call(3, &a(&["config", "get"]), &[])), Ok(()));
        assert_eq!(u.check(&cat, &call(5, &a(&["select", "0"]), &[])), Ok(()));
        assert_eq!(
            u.check(&cat, &call(5, &a(&["select", "1"]), &[])),
            Err(Denied::Command)
        );
        let all = user("+@all -@write").unwrap();
        assert_eq!(all.selectors[0].describe_commands(), "+@all -@write");
        assert_eq!(user("+config|get|x").unwrap_err(), RuleError::FirstArgOfSub);
        assert_eq!(user("+nosuch").unwrap_err(), RuleError::UnknownName);
        assert_eq!(user("~* ~x").unwrap_err(), RuleError::KeyAfterAll);
        assert_eq!(user("#abc").unwrap_err(), RuleError::BadHash);
        let rw = user("%R~r* %W~w* %RW~b").unwrap();
        assert_eq!(rw.selectors[0].describe_keys(), "%R~r* %W~w* ~b");
    }

    /// The command rules read back in the order given, a rule about a command replacing
    /// earlier ones about it or its subcommands (Redis 7.2's `ACLUpdateCommandRules`); a rule
    /// that changes nothing where it stands is kept, as 7.2 keeps it.
    #[test]
    fn command_rules_read_back_as_given() {
        let cases = [
            ("+@all -config +config|get", "+@all -config +config|get"),
            ("-@all +config|get +config", "-@all +config"),
            ("-@all +config +config|get", "-@all +config +config|get"),
            ("+@all -config|set -config", "+@all -config"),
            ("-@all +get -set +set -get", "-@all +set -get"),
            ("-@all +@read +@write +@read", "-@all +@write +@read"),
            ("-@all +@READ +GeT", "-@all +@read +get"),
            ("-@all +@write +get", "-@all +@write +get"),
            ("+@all +config|get", "+@all +config|get"),
            ("-@all -@admin", "-@all -@admin"),
            (
                "-@all +select|0 +select|1 +SELECT|0",
                "-@all +select|1 +select|0",
            ),
            ("-@all +select|0 -select", "-@all -select"),
            ("+@all -get -@all +set", "-@all +set"),
            ("-@all +get allcommands -set", "+@all -set"),
        ];
        for (rules, want) in cases {
            let u = user(rules).unwrap();
            assert_eq!(u.selectors[0].describe_commands(), want, "{rules}");
        }
    }

    /// Whatever the rules, their description replays to the same permissions: the
    /// invariant Redis checks (and panics on) in `ACLDescribeSelectorCommandRules`.
    #[test]
    fn described_rules_replay_to_the_same_bits() {
        let cat = catalog();
        let ops = [
            "+get",
            "-get",
            "+set",
            "-set",
            "+config",
            "-config",
            "+config|get",
            "+config|set",
            "-config|get",
            "-config|set",
            "+select",
            "-select",
            "+select|0",
            "+select|1",
            "+@read",
            "-@read",
            "+@write",
            "-@write",
            "+@admin",
            "-@admin",
            "+@all",
            "-@all",
        ];
        let mut rng = crate::util::rng::XorShift::new(7);
        for _ in 0..3000 {
            let mut s = Selector::new(true, false);
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let op = ops[rng.below(ops.len() as u64) as usize];
                s.apply(&cat, op.as_bytes()).unwrap();
            }
            let text = s.describe_commands();
            let kept = s.rules.len() + 1;
            let mut again = Selector::new(true, false);
            for op in text.split(' ') {
                again.apply(&cat, op.as_bytes()).unwrap();
            }
            for id in 0..cat.cmds.len() {
                assert_eq!(s.bit(id), again.bit(id), "{text}: {}", cat.cmds[id].name);
            }
            assert_eq!(s.fill, again.fill, "{text}");
            let norm = |f: &[(usize, Vec<String>)]| {
                let mut v: Vec<(usize, Vec<String>)> = f
                    .iter()
                    .map(|(i, l)| {
                        let mut l = l.clone();
                        l.sort();
                        (*i, l)
                    })
                    .filter(|(_, l)| !l.is_empty())
                    .collect();
                v.sort();
                v
            };
            assert_eq!(norm(&s.firstargs), norm(&again.firstargs), "{text}");
            assert_eq!(again.describe_commands(), text);
            assert!(text.split(' ').count() <= kept, "{text}");
        }
    }

    /// Odd rules from a client answer an error or apply; none panics.
    #[test]
    fn odd_rules_never_panic() {
        let cat = catalog();
        let odd = [
            "",
            "+",
            "-",
            "@",
            "+@",
            "-@",
            "%",
            "%R",
            "%RR~x",
            "%X~y",
            "~",
            "&",
            "(",
            ")",
            "()",
            "(\"\")",
            "( )",
            "(\"\" +get)",
            "+|",
            "+get|",
            "+|x",
            "+config|",
            "-config|get",
            "#",
            "!",
            ">",
            "<",
            "(+get",
            "((+get))",
            "(%R)",
            "(~a b)",
            "+config|get|x|y",
        ];
        for a in odd {
            for b in odd {
                let mut u = User::new(b"u", 1, false);
                let _ = u.apply(&cat, a.as_bytes(), false);
                let _ = u.apply(&cat, b.as_bytes(), true);
                let _ = u.describe();
            }
        }
        let _ = merge_selector_args(&[b"(".to_vec(), b"".to_vec(), b")".to_vec()]);
        let _ = merge_selector_args(&[b"".to_vec()]);
    }

    #[test]
    fn a_bad_rule_changes_nothing() {
        let cat = catalog();
        let acl = Acl::new();
        acl.set_user(&cat, b"u", &[b"on".to_vec(), b"+get".to_vec()])
            .unwrap();
        let before = acl.get(b"u").unwrap().describe();
        assert!(acl
            .set_user(&cat, b"u", &[b"+set".to_vec(), b"+nosuch".to_vec()])
            .is_err());
        assert_eq!(acl.get(b"u").unwrap().describe(), before);
        assert!(acl.set_user(&cat, b"v", &[b"(+get".to_vec()]).is_err());
        assert!(acl.get(b"v").is_none());
    }
}
