//! The sorted set family: ZADD ZRANGE ZUNIONSTORE ZPOPMIN ... Table rows first (transcribed
//! from Redis 7's COMMAND INFO / COMMAND DOCS), handlers below. The value itself (listpack
//! and skiplist forms) is `store::zset`.
use crate::commands::args::{
    mpop_args, random_count_args, Args, CommandError, CommandResult, MAX_RANDOM_REPLY,
};
use crate::commands::keys::{scan_cursor, scan_opts};
use crate::commands::spec::{acl, family, flag::*, Begin, CmdResult, CommandSpec, Find, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::eviction::rand_u64;
use crate::store::zset::ZSetValue;
use crate::store::{Keyspace, Value, WrongType};
use crate::util::glob::glob_match;
use crate::util::num::parse_i64;
use bytes::Bytes;

const FAMILY: CommandSpec = family("sorted-set", acl::SORTEDSET);
/// ZMPOP's and BZMPOP's `MIN|MAX` keyword: true for MAX.
const MIN_MAX: [(&[u8], bool); 2] = [(b"MIN", false), (b"MAX", true)];
const BZMPOP_KEYS: &[KeySpec] = &[KeySpec::keynum(2, &["RW", "access", "delete"])];

const KEYNUM_RO: &[KeySpec] = &[KeySpec {
    flags: &["RO", "access"],
    begin: Begin::Index(1),
    find: Find::Keynum {
        keynum_idx: 0,
        first: 1,
        step: 1,
    },
}];
const KEYNUM_RW: &[KeySpec] = &[KeySpec {
    flags: &["RW", "access", "delete"],
    begin: Begin::Index(1),
    find: Find::Keynum {
        keynum_idx: 0,
        first: 1,
        step: 1,
    },
}];
const STORE_KEYNUM: &[KeySpec] = &[
    KeySpec {
        flags: &["OW", "update"],
        begin: Begin::Index(1),
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["RO", "access"],
        begin: Begin::Index(2),
        find: Find::Keynum {
            keynum_idx: 0,
            first: 1,
            step: 1,
        },
    },
];

/// A destination key then a source key (ZRANGESTORE, GEOSEARCHSTORE).
pub(crate) const DST_SRC: &[KeySpec] = &[
    KeySpec {
        flags: &["OW", "update"],
        begin: Begin::Index(1),
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
    KeySpec {
        flags: &["RO", "access"],
        begin: Begin::Index(2),
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    },
];

const fn one_key(flags: &'static [&'static str]) -> [KeySpec; 1] {
    [KeySpec {
        flags,
        begin: Begin::Index(1),
        find: Find::Range {
            last: 0,
            step: 1,
            limit: 0,
        },
    }]
}
/// The single-key specs Redis reports (flags beyond RO/RW: access, update, delete).
pub(crate) const KS_RO_ACCESS: &[KeySpec] = &one_key(&["RO", "access"]);
pub(crate) const KS_RW_UPDATE: &[KeySpec] = &one_key(&["RW", "update"]);
const KS_RW_ACCESS_UPDATE: &[KeySpec] = &one_key(&["RW", "access", "update"]);
const KS_RW_DELETE: &[KeySpec] = &one_key(&["RW", "delete"]);
const KS_RW_ACCESS_DELETE: &[KeySpec] = &one_key(&["RW", "access", "delete"]);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    FAMILY.cmd("zadd", -4, zadd).flags(WRITE | DENYOOM | FAST).key().key_specs(KS_RW_UPDATE)
        .doc("1.2.0", "Add one or more members to a sorted set, or update its score if it already exists")
        .complexity("O(log(N)) for each item added, where N is the number of elements in the sorted set.")
        .args("key:key [condition:(NX|XX)] [comparison:(GT|LT)] [change=CH] [increment=INCR] score_member:{score:double member}..."),
    FAMILY.cmd("zincrby", 4, zincrby).flags(WRITE | DENYOOM | FAST).key().key_specs(KS_RW_ACCESS_UPDATE)
        .doc("1.2.0", "Increment the score of a member in a sorted set")
        .complexity("O(log(N)) where N is the number of elements in the sorted set.")
        .args("key:key increment:integer member"),
    FAMILY.cmd("zrem", -3, zrem).flags(WRITE | FAST).key().key_specs(KS_RW_DELETE)
        .doc("1.2.0", "Remove one or more members from a sorted set")
        .complexity("O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.")
        .args("key:key member..."),
    FAMILY.cmd("zcard", 2, zcard).flags(READONLY | FAST).key().key_spec_flags(&["RO"])
        .doc("1.2.0", "Get the number of members in a sorted set").args("key:key"),
    FAMILY.cmd("zcount", 4, zcount).flags(READONLY | FAST).key().key_specs(KS_RO_ACCESS)
        .doc("2.0.0", "Count the members in a sorted set with scores within the given values")
        .complexity("O(log(N)) with N being the number of elements in the sorted set.")
        .args("key:key min:double max:double"),
    FAMILY.cmd("zlexcount", 4, zlexcount).flags(READONLY | FAST).key().key_specs(KS_RO_ACCESS)
        .doc("2.8.9", "Count the number of members in a sorted set between a given lexicographical range")
        .complexity("O(log(N)) with N being the number of elements in the sorted set.")
        .args("key:key min max"),
    FAMILY.cmd("zscore", 3, zscore).flags(READONLY | FAST).key().key_specs(KS_RO_ACCESS)
        .doc("1.2.0", "Get the score associated with the given member in a sorted set")
        .args("key:key member"),
    FAMILY.cmd("zmscore", -3, zmscore).flags(READONLY | FAST).key().key_specs(KS_RO_ACCESS)
        .doc("6.2.0", "Get the score associated with the given members in a sorted set")
        .complexity("O(N) where N is the number of members being requested.")
        .args("key:key member..."),
    FAMILY.cmd("zrank", -3, zrank).flags(READONLY | FAST).key().key_specs(KS_RO_ACCESS)
        .doc("2.0.0", "Determine the index of a member in a sorted set")
        .complexity("O(log(N))").args("key:key member [WITHSCORE]"),
    FAMILY.cmd("zrevrank", -3, zrevrank).flags(READONLY | FAST).key().key_specs(KS_RO_ACCESS)
        .doc("2.0.0", "Determine the index of a member in a sorted set, with scores ordered from high to low")
        .complexity("O(log(N))").args("key:key member [WITHSCORE]"),
    FAMILY.cmd("zrange", -4, zrange).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("1.2.0", "Return a range of members in a sorted set")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.")
        .args("key:key start stop [sortby:(BYSCORE|BYLEX)] [REV] [LIMIT=limit:{offset:integer count:integer}] [WITHSCORES]"),
    FAMILY.cmd("zrangestore", -5, zrangestore).flags(WRITE | DENYOOM).keys(1, 2, 1).key_specs(DST_SRC)
        .doc("6.2.0", "Store a range of members from sorted set into another key")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.")
        .args("dst:key src:key min max [sortby:(BYSCORE|BYLEX)] [REV] [LIMIT=limit:{offset:integer count:integer}]"),
    FAMILY.cmd("zrangebyscore", -4, zrangebyscore).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("1.0.5", "Return a range of members in a sorted set, by score")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .args("key:key min:double max:double [WITHSCORES] [LIMIT=limit:{offset:integer count:integer}]"),
    FAMILY.cmd("zrevrangebyscore", -4, zrevrangebyscore).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("2.2.0", "Return a range of members in a sorted set, by score, with scores ordered from high to low")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .args("key:key max:double min:double [WITHSCORES] [LIMIT=limit:{offset:integer count:integer}]"),
    FAMILY.cmd("zrangebylex", -4, zrangebylex).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("2.8.9", "Return a range of members in a sorted set, by lexicographical range")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .args("key:key min max [LIMIT=limit:{offset:integer count:integer}]"),
    FAMILY.cmd("zrevrangebylex", -4, zrevrangebylex).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("2.8.9", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).")
        .args("key:key max min [LIMIT=limit:{offset:integer count:integer}]"),
    FAMILY.cmd("zrevrange", -4, zrevrange).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("1.2.0", "Return a range of members in a sorted set, by index, with scores ordered from high to low")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.")
        .args("key:key start:integer stop:integer [WITHSCORES]"),
    FAMILY.cmd("zremrangebyrank", 4, zremrangebyrank).flags(WRITE).key().key_specs(KS_RW_DELETE)
        .doc("2.0.0", "Remove all members in a sorted set within the given indexes")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.")
        .args("key:key start:integer stop:integer"),
    FAMILY.cmd("zremrangebyscore", 4, zremrangebyscore).flags(WRITE).key().key_specs(KS_RW_DELETE)
        .doc("1.2.0", "Remove all members in a sorted set within the given scores")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.")
        .args("key:key min:double max:double"),
    FAMILY.cmd("zremrangebylex", 4, zremrangebylex).flags(WRITE).key().key_specs(KS_RW_DELETE)
        .doc("2.8.9", "Remove all members in a sorted set between the given lexicographical range")
        .complexity("O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.")
        .args("key:key min max"),
    FAMILY.cmd("zpopmin", -2, zpopmin).flags(WRITE | FAST).key().key_specs(KS_RW_ACCESS_DELETE)
        .doc("5.0.0", "Remove and return members with the lowest scores in a sorted set")
        .complexity("O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.")
        .args("key:key [count:integer]"),
    FAMILY.cmd("zpopmax", -2, zpopmax).flags(WRITE | FAST).key().key_specs(KS_RW_ACCESS_DELETE)
        .doc("5.0.0", "Remove and return members with the highest scores in a sorted set")
        .complexity("O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.")
        .args("key:key [count:integer]"),
    FAMILY.cmd("zmpop", -4, zmpop).flags(WRITE | MOVABLEKEYS).key_specs(KEYNUM_RW)
        .doc("7.0.0", "Remove and return members with scores in a sorted set")
        .complexity("O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.")
        .args("numkeys:integer key:key... where:(MIN|MAX) [COUNT=count:integer]"),
    FAMILY.cmd("bzpopmin", -3, bzpopmin).flags(WRITE | NOSCRIPT | FAST | BLOCKING).keys(1, -2, 1).key_spec_flags(&["RW", "access", "delete"])
        .doc("5.0.0", "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available")
        .complexity("O(log(N)) with N being the number of elements in the sorted set.")
        .args("key:key... timeout:double"),
    FAMILY.cmd("bzpopmax", -3, bzpopmax).flags(WRITE | NOSCRIPT | FAST | BLOCKING).keys(1, -2, 1).key_spec_flags(&["RW", "access", "delete"])
        .doc("5.0.0", "Remove and return the member with the highest score from one or more sorted sets, or block until one is available")
        .complexity("O(log(N)) with N being the number of elements in the sorted set.")
        .args("key:key... timeout:double"),
    FAMILY.cmd("bzmpop", -5, bzmpop).flags(WRITE | BLOCKING | MOVABLEKEYS).key_specs(BZMPOP_KEYS)
        .doc("7.0.0", "Remove and return members with scores in a sorted set or block until one is available")
        .complexity("O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.")
        .args("timeout:double numkeys:integer key:key... where:(MIN|MAX) [COUNT=count:integer]"),
    FAMILY.cmd("zrandmember", -2, zrandmember).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("6.2.0", "Get one or multiple random elements from a sorted set")
        .complexity("O(N) where N is the number of elements returned")
        .args("key:key [options:{count:integer [WITHSCORES]}]"),
    FAMILY.cmd("zunion", -3, zunion).flags(READONLY | MOVABLEKEYS).key_specs(KEYNUM_RO)
        .doc("6.2.0", "Add multiple sorted sets")
        .complexity("O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.")
        .args("numkeys:integer key:key... [WEIGHTS=weight:integer...] [AGGREGATE=aggregate:(SUM|MIN|MAX)] [WITHSCORES]"),
    FAMILY.cmd("zinter", -3, zinter).flags(READONLY | MOVABLEKEYS).key_specs(KEYNUM_RO)
        .doc("6.2.0", "Intersect multiple sorted sets")
        .complexity("O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.")
        .args("numkeys:integer key:key... [WEIGHTS=weight:integer...] [AGGREGATE=aggregate:(SUM|MIN|MAX)] [WITHSCORES]"),
    FAMILY.cmd("zdiff", -3, zdiff).flags(READONLY | MOVABLEKEYS).key_specs(KEYNUM_RO)
        .doc("6.2.0", "Subtract multiple sorted sets")
        .complexity("O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.")
        .args("numkeys:integer key:key... [WITHSCORES]"),
    FAMILY.cmd("zunionstore", -4, zunionstore).flags(WRITE | DENYOOM | MOVABLEKEYS).key().key_specs(STORE_KEYNUM)
        .doc("2.0.0", "Add multiple sorted sets and store the resulting sorted set in a new key")
        .complexity("O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.")
        .args("destination:key numkeys:integer key:key... [WEIGHTS=weight:integer...] [AGGREGATE=aggregate:(SUM|MIN|MAX)]"),
    FAMILY.cmd("zinterstore", -4, zinterstore).flags(WRITE | DENYOOM | MOVABLEKEYS).key().key_specs(STORE_KEYNUM)
        .doc("2.0.0", "Intersect multiple sorted sets and store the resulting sorted set in a new key")
        .complexity("O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.")
        .args("destination:key numkeys:integer key:key... [WEIGHTS=weight:integer...] [AGGREGATE=aggregate:(SUM|MIN|MAX)]"),
    FAMILY.cmd("zdiffstore", -4, zdiffstore).flags(WRITE | DENYOOM | MOVABLEKEYS).key().key_specs(STORE_KEYNUM)
        .doc("6.2.0", "Subtract multiple sorted sets and store the resulting sorted set in a new key")
        .complexity("O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.")
        .args("destination:key numkeys:integer key:key..."),
    FAMILY.cmd("zintercard", -3, zintercard).flags(READONLY | MOVABLEKEYS).key_specs(KEYNUM_RO)
        .doc("7.0.0", "Intersect multiple sorted sets and return the cardinality of the result")
        .complexity("O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.")
        .args("numkeys:integer key:key... [LIMIT=limit:integer]"),
    FAMILY.cmd("zscan", -3, zscan).flags(READONLY).key().key_specs(KS_RO_ACCESS)
        .doc("2.8.0", "Incrementally iterate sorted sets elements and associated scores")
        .complexity("O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..")
        .args("key:key cursor:integer [MATCH=pattern:pattern] [COUNT=count:integer]"),
];

const NAN_ERR: &str = "ERR resulting score is not a number (NaN)";
const SCORE_RANGE_ERR: &str = "ERR min or max is not a float";
const LEX_RANGE_ERR: &str = "ERR min or max not valid string range item";

// ---------------------------------------------------------------------------------------
// Parsing

/// A double as C's `strtod` reads a whole argument (leading spaces allowed, nothing after;
/// an empty argument reads 0 as Redis's range parser lets it).
fn strtod(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    // The common integer score (an optional '-' and up to 15 digits, exact in an f64)
    // without the UTF-8 check and the general float parser (about 200 instructions).
    let (neg, digits) = match b.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, b),
    };
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let n = digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        let f = n as f64;
        return Some(if neg { -f } else { f });
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    if t.is_empty() || t.ends_with(char::is_whitespace) {
        return None;
    }
    let f: f64 = t.parse().ok()?;
    (!f.is_nan()).then_some(f)
}

/// A score argument as Redis's `getDoubleFromObject`.
pub(crate) fn parse_score(b: &[u8]) -> CommandResult<f64> {
    if b.is_empty() || b[0].is_ascii_whitespace() {
        return Err(CommandError::not_float());
    }
    strtod(b).ok_or_else(CommandError::not_float)
}

#[derive(Clone, Copy, Debug)]
struct ScoreRange {
    min: f64,
    max: f64,
    minex: bool,
    maxex: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> CommandResult<ScoreRange> {
        let one = |b: &[u8]| -> Option<(f64, bool)> {
            match b.first() {
                Some(b'(') => strtod(&b[1..]).map(|f| (f, true)),
                _ => strtod(b).map(|f| (f, false)),
            }
        };
        match (one(min), one(max)) {
            (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange {
                min,
                max,
                minex,
                maxex,
            }),
            _ => Err(CommandError::msg(SCORE_RANGE_ERR)),
        }
    }
    fn gte_min(&self, s: f64) -> bool {
        if self.minex {
            s > self.min
        } else {
            s >= self.min
        }
    }
    fn lte_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }
    /// The ascending ranks `start..end` of the entries in range.
    fn ranks(&self, z: &ZSetValue) -> (usize, usize) {
        if self.min > self.max || (self.min == self.max && (self.minex || self.maxex)) {
            return (0, 0);
        }
        let start = z.count_before(|s, _| !self.gte_min(s));
        let end = z.count_before(|s, _| self.lte_max(s));
        (start, end.max(start))
    }
}

#[derive(Clone, Debug)]
enum Lex {
    Min,
    Max,
    Incl(Bytes),
    Excl(Bytes),
}

#[derive(Clone, Debug)]
struct LexRange {
    min: Lex,
    max: Lex,
}

impl LexRange {
    fn parse(min: &Bytes, max: &Bytes) -> CommandResult<LexRange> {
        let one = |b: &Bytes| -> Option<Lex> {
            match b.first() {
                Some(b'+') if b.len() == 1 => Some(Lex::Max),
                Some(b'-') if b.len() == 1 => Some(Lex::Min),
                Some(b'(') => Some(Lex::Excl(b.slice(1..))),
                Some(b'[') => Some(Lex::Incl(b.slice(1..))),
                _ => None,
            }
        };
        match (one(min), one(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(CommandError::msg(LEX_RANGE_ERR)),
        }
    }
    fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Incl(x) => m >= &x[..],
            Lex::Excl(x) => m > &x[..],
        }
    }
    fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(x) => m <= &x[..],
            Lex::Excl(x) => m < &x[..],
        }
    }
    fn is_empty(&self) -> bool {
        match (&self.min, &self.max) {
            (Lex::Max, _) | (_, Lex::Min) => true,
            (Lex::Min, _) | (_, Lex::Max) => false,
            (Lex::Incl(a), Lex::Incl(b)) => a > b,
            (Lex::Incl(a), Lex::Excl(b))
            | (Lex::Excl(a), Lex::Incl(b))
            | (Lex::Excl(a), Lex::Excl(b)) => a >= b,
        }
    }
    fn ranks(&self, z: &ZSetValue) -> (usize, usize) {
        if self.is_empty() {
            return (0, 0);
        }
        let start = z.count_before(|_, m| !self.gte_min(m));
        let end = z.count_before(|_, m| self.lte_max(m));
        (start, end.max(start))
    }
}

/// A rank range as Redis sanitizes one: `None` when empty, else ascending-or-as-given
/// ranks `start..=end` within `len`.
fn rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let llen = len as i64;
    let mut start = if start < 0 { llen + start } else { start };
    let mut end = if end < 0 { llen + end } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    Some((start as usize, end as usize))
}

// ---------------------------------------------------------------------------------------
// Replies

/// A score as text, as Redis 7.0 prints it (`%.17g`): the same text as `Reply::Double`.
pub fn fmt_score(d: f64) -> String {
    crate::util::num::format_g17(d)
}

fn score_reply(s: f64) -> Reply {
    Reply::Double(s)
}

/// Appends one (member, score) of a range reply: member alone, or flat member + score in
/// RESP2, or a [member, score] pair in RESP3.
fn push_entry(out: &mut Vec<Reply>, m: &[u8], s: f64, withscores: bool, resp3: bool) {
    let member = Reply::Bulk(Bytes::copy_from_slice(m));
    if !withscores {
        out.push(member);
    } else if resp3 {
        out.push(Reply::Array(vec![member, score_reply(s)]));
    } else {
        out.push(member);
        out.push(score_reply(s));
    }
}

// ---------------------------------------------------------------------------------------
// Access helpers

pub(crate) fn read_zset<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(Option<&ZSetValue>) -> R,
) -> CommandResult<R> {
    Ok(ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        ks.read_as::<ZSetValue, _>(h, key, f)
    })?)
}

/// A write on the zset at `key`: `f` returns its result and whether it changed the set.
/// Returns `None` for a missing key unless `create`, and whether the key was deleted
/// because the set was emptied.
fn write_zset<R>(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut ZSetValue) -> (R, bool),
) -> CommandResult<(Option<R>, bool)> {
    ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        let mut emptied = false;
        let r = ks.write_as::<ZSetValue, _>(h, key, create, |z| {
            let existed = !z.is_empty();
            let (r, ch) = f(z);
            emptied = existed && z.is_empty();
            (r, ch)
        })?;
        Ok((r, emptied))
    })
}

fn notify(ctx: &Ctx<'_>, event: &'static str, key: &[u8]) {
    ctx.server.notify(ctx.client.db, class::ZSET, event, key);
}

fn notify_del(ctx: &Ctx<'_>, key: &[u8]) {
    ctx.server.notify(ctx.client.db, class::GENERIC, "del", key);
}

// ---------------------------------------------------------------------------------------
// ZADD / ZINCRBY

#[derive(Default, Clone, Copy)]
pub(crate) struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub ch: bool,
    pub incr: bool,
}

fn zadd(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let mut f = AddFlags::default();
    while let Some(a) = args.peek() {
        match &*crate::commands::args::Token::of(a) {
            b"NX" => f.nx = true,
            b"XX" => f.xx = true,
            b"GT" => f.gt = true,
            b"LT" => f.lt = true,
            b"CH" => f.ch = true,
            b"INCR" => f.incr = true,
            _ => break,
        }
        args.next_opt();
    }
    let rest = args.rest();
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(CommandError::syntax());
    }
    if f.nx && f.xx {
        return Err(CommandError::msg(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CommandError::msg(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest.len() > 2 {
        return Err(CommandError::msg(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    // The common single pair is parsed onto the stack (no allocation per ZADD).
    if let [score, member] = rest {
        return zadd_generic(ctx, key, f, &[(parse_score(score)?, member)]);
    }
    let mut pairs = Vec::new();
    for p in rest.chunks_exact(2) {
        pairs.push((parse_score(&p[0])?, &p[1]));
    }
    zadd_generic(ctx, key, f, &pairs)
}

fn zincrby(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let by = parse_score(args.next_arg()?)?;
    let member = args.next_arg()?;
    let f = AddFlags {
        incr: true,
        ..Default::default()
    };
    zadd_generic(ctx, key, f, &[(by, member)])
}

pub(crate) fn zadd_generic(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    f: AddFlags,
    pairs: &[(f64, &Bytes)],
) -> CmdResult {
    let (r, _) = write_zset(ctx, key, !f.xx, |z| {
        let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
        let mut last = 0.0;
        for &(score, member) in pairs {
            match z.score(member) {
                Some(cur) => {
                    if f.nx {
                        continue;
                    }
                    let new = if f.incr {
                        let n = cur + score;
                        if n.is_nan() {
                            return (Err(CommandError::msg(NAN_ERR)), added + updated > 0);
                        }
                        n
                    } else {
                        score
                    };
                    if (f.lt && new >= cur) || (f.gt && new <= cur) {
                        continue;
                    }
                    if new != cur {
                        z.insert(member, new);
                        updated += 1;
                    }
                    last = new;
                    processed += 1;
                }
                None => {
                    if f.xx {
                        continue;
                    }
                    z.insert(member, score);
                    added += 1;
                    last = score;
                    processed += 1;
                }
            }
        }
        (Ok((added, updated, processed, last)), added + updated > 0)
    })?;
    let (added, updated, processed, last) = match r {
        None => (0, 0, 0, 0.0),
        Some(r) => r?,
    };
    if added + updated > 0 {
        notify(ctx, if f.incr { "zincr" } else { "zadd" }, key);
    }
    Ok(if f.incr {
        if processed > 0 {
            score_reply(last)
        } else {
            Reply::Nil
        }
    } else {
        Reply::Int(if f.ch { added + updated } else { added })
    })
}

// ---------------------------------------------------------------------------------------
// Simple reads and removals

fn zrem(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let members = args.rest();
    let (r, emptied) = write_zset(ctx, key, false, |z| {
        let n = members.iter().filter(|m| z.remove(m).is_some()).count();
        (n, n > 0)
    })?;
    let n = r.unwrap_or(0);
    if n > 0 {
        notify(ctx, "zrem", key);
        if emptied {
            notify_del(ctx, key);
        }
    }
    Ok(Reply::Int(n as i64))
}

fn zcard(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    read_zset(ctx, key, |z| Reply::Int(z.map_or(0, |z| z.len()) as i64))
}

fn zcount(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let r = ScoreRange::parse(args.next_arg()?, args.next_arg()?)?;
    read_zset(ctx, key, |z| {
        Reply::Int(z.map_or(0, |z| {
            let (a, b) = r.ranks(z);
            b - a
        }) as i64)
    })
}

fn zlexcount(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let r = LexRange::parse(args.next_arg()?, args.next_arg()?)?;
    read_zset(ctx, key, |z| {
        Reply::Int(z.map_or(0, |z| {
            let (a, b) = r.ranks(z);
            b - a
        }) as i64)
    })
}

fn zscore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (key, member) = (args.next_key()?, args.next_arg()?);
    read_zset(ctx, key, |z| {
        z.and_then(|z| z.score(member))
            .map_or(Reply::Nil, score_reply)
    })
}

fn zmscore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let members = args.rest();
    read_zset(ctx, key, |z| {
        Reply::Array(
            members
                .iter()
                .map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, score_reply))
                .collect(),
        )
    })
}

fn rank_generic(ctx: &mut Ctx<'_>, args: &mut Args<'_>, rev: bool) -> CmdResult {
    let (key, member) = (args.next_key()?, args.next_arg()?);
    // Redis 7.2's WITHSCORE: [rank, score], or a null array for a missing member.
    let withscore = match args.len() {
        0 => false,
        1 if crate::commands::is(args.next_arg()?, "WITHSCORE") => true,
        1 => return Err(CommandError::syntax()),
        _ => return Err(CommandError::WrongArity),
    };
    read_zset(ctx, key, |z| {
        match z.and_then(|z| z.rank(member).map(|r| (r, z.len()))) {
            None if withscore => Reply::NilArray,
            None => Reply::Nil,
            Some(((r, score), len)) => {
                let rank = Reply::Int(if rev { len - 1 - r } else { r } as i64);
                if withscore {
                    Reply::Array(vec![rank, Reply::Double(score)])
                } else {
                    rank
                }
            }
        }
    })
}

fn zrank(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    rank_generic(ctx, args, false)
}

fn zrevrank(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    rank_generic(ctx, args, true)
}

// ---------------------------------------------------------------------------------------
// ZRANGE and its older forms

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

enum RangeSpec {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

struct RangeQuery {
    spec: RangeSpec,
    rev: bool,
    withscores: bool,
    offset: i64,
    limit: i64,
}

/// Parses `<min> <max> [options]` as Redis's `zrangeGenericCommand` (the cursor is after the
/// source key).
fn parse_range(
    args: &mut Args<'_>,
    store: bool,
    mut rt: RangeType,
    rev: Option<bool>,
) -> CommandResult<RangeQuery> {
    let a = args.next_arg()?;
    let b = args.next_arg()?;
    let mut withscores = false;
    let mut offset = 0i64;
    let mut limit = -1i64;
    let mut dir = rev;
    while let Some(opt) = args.next_opt() {
        let left = args.len();
        let t = crate::commands::args::Token::of(opt);
        match &*t {
            b"WITHSCORES" if !store => withscores = true,
            b"LIMIT" if left >= 2 => {
                offset = args.next_i64()?;
                limit = args.next_i64()?;
            }
            b"REV" if dir.is_none() => dir = Some(true),
            b"BYLEX" if rt == RangeType::Auto => rt = RangeType::Lex,
            b"BYSCORE" if rt == RangeType::Auto => rt = RangeType::Score,
            _ => return Err(CommandError::syntax()),
        }
    }
    let rev = dir.unwrap_or(false);
    if rt == RangeType::Auto {
        rt = RangeType::Rank;
    }
    if limit != -1 && rt == RangeType::Rank {
        return Err(CommandError::msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && rt == RangeType::Lex {
        return Err(CommandError::msg(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (min, max) = if rev && rt != RangeType::Rank {
        (b, a)
    } else {
        (a, b)
    };
    let spec = match rt {
        RangeType::Score => RangeSpec::Score(ScoreRange::parse(min, max)?),
        RangeType::Lex => RangeSpec::Lex(LexRange::parse(min, max)?),
        _ => RangeSpec::Rank(
            parse_i64(min).ok_or_else(CommandError::not_integer)?,
            parse_i64(max).ok_or_else(CommandError::not_integer)?,
        ),
    };
    Ok(RangeQuery {
        spec,
        rev,
        withscores,
        offset,
        limit,
    })
}

/// The entries a range query selects, in reply order.
fn run_range(q: &RangeQuery, z: &ZSetValue) -> Vec<(Vec<u8>, f64)> {
    let len = z.len();
    match &q.spec {
        RangeSpec::Rank(s, e) => {
            let Some((s, e)) = rank_range(*s, *e, len) else {
                return Vec::new();
            };
            let n = e - s + 1;
            let it = if q.rev {
                z.iter_from(len - 1 - s, true)
            } else {
                z.iter_from(s, false)
            };
            it.take(n).map(|(m, sc)| (m.to_vec(), sc)).collect()
        }
        RangeSpec::Score(_) | RangeSpec::Lex(_) => {
            let (a, b) = match &q.spec {
                RangeSpec::Score(r) => r.ranks(z),
                RangeSpec::Lex(r) => r.ranks(z),
                RangeSpec::Rank(..) => (0, 0),
            };
            if q.offset < 0 || (q.offset > 0 && q.offset as usize >= len) || a >= b {
                return Vec::new();
            }
            let n = b - a;
            let off = q.offset as usize;
            if off >= n {
                return Vec::new();
            }
            let take = if q.limit < 0 {
                n - off
            } else {
                (q.limit as usize).min(n - off)
            };
            let it = if q.rev {
                z.iter_from(b - 1 - off, true)
            } else {
                z.iter_from(a + off, false)
            };
            it.take(take).map(|(m, sc)| (m.to_vec(), sc)).collect()
        }
    }
}

fn range_command(
    ctx: &mut Ctx<'_>,
    args: &mut Args<'_>,
    rt: RangeType,
    rev: Option<bool>,
) -> CmdResult {
    let key = args.next_key()?;
    let q = parse_range(args, false, rt, rev)?;
    let resp3 = ctx.client.resp3;
    read_zset(ctx, key, |z| {
        let mut out = Vec::new();
        if let Some(z) = z {
            for (m, s) in run_range(&q, z) {
                push_entry(&mut out, &m, s, q.withscores, resp3);
            }
        }
        Reply::Array(out)
    })
}

fn zrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_command(ctx, args, RangeType::Auto, None)
}
fn zrevrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_command(ctx, args, RangeType::Rank, Some(true))
}
fn zrangebyscore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_command(ctx, args, RangeType::Score, Some(false))
}
fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_command(ctx, args, RangeType::Score, Some(true))
}
fn zrangebylex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_command(ctx, args, RangeType::Lex, Some(false))
}
fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    range_command(ctx, args, RangeType::Lex, Some(true))
}

/// Stores `entries` as a fresh sorted set at key `i` of a locked set of keys (deleting the
/// key when empty); returns the stored size. Emits `event` or `del` as Redis.
/// How a stored result picks its encoding, as Redis builds it.
#[derive(Clone, Copy)]
pub(crate) enum Build {
    /// A skiplist, packed at the end if it fits (ZUNIONSTORE & co, GEO stores).
    Shrink,
    /// Started for an expected size, converted while filling (ZRANGESTORE).
    Hint(usize),
}

pub(crate) fn store_result(
    ctx: &Ctx<'_>,
    ks: &mut Keyspace,
    h: u64,
    key: &[u8],
    entries: Vec<(Vec<u8>, f64)>,
    event: &'static str,
    build: Build,
) -> usize {
    let n = entries.len();
    if n == 0 {
        if ks.remove(h, key).is_some() {
            notify_del(ctx, key);
        }
        return 0;
    }
    let mut z = match build {
        Build::Shrink => ZSetValue::new_skiplist(),
        Build::Hint(n) => ZSetValue::with_size_hint(n),
    };
    for (m, s) in entries {
        z.insert(&m, s);
    }
    if let Build::Shrink = build {
        z.shrink_if_fits();
    }
    ks.set(h, key, Value::ZSet(Box::new(z)), crate::store::Ttl::Clear);
    notify(ctx, event, key);
    n
}

fn zrangestore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let dst = args.next_key()?;
    let src = args.next_key()?;
    let q = parse_range(args, true, RangeType::Auto, None)?;
    let db = ctx.client.db;
    let keys = [src, dst];
    let mut l = ctx.server.store.lock_keys(&keys);
    let h = l.hash(0);
    let entries = l
        .ks(0, db)
        .read_as::<ZSetValue, _>(h, src, |z| z.map_or_else(Vec::new, |z| run_range(&q, z)))?;
    let h = l.hash(1);
    // Redis sizes the destination by the rank range's length; score and lex ranges start
    // packed.
    let hint = match q.spec {
        RangeSpec::Rank(..) => entries.len(),
        _ => 0,
    };
    let n = store_result(
        ctx,
        l.ks(1, db),
        h,
        dst,
        entries,
        "zrangestore",
        Build::Hint(hint),
    );
    Ok(Reply::Int(n as i64))
}

// ---------------------------------------------------------------------------------------
// Range removals

fn zremrange(ctx: &mut Ctx<'_>, args: &mut Args<'_>, rt: RangeType) -> CmdResult {
    let key = args.next_key()?;
    let (a, b) = (args.next_arg()?, args.next_arg()?);
    let (spec, event) = match rt {
        RangeType::Score => (
            RangeSpec::Score(ScoreRange::parse(a, b)?),
            "zremrangebyscore",
        ),
        RangeType::Lex => (RangeSpec::Lex(LexRange::parse(a, b)?), "zremrangebylex"),
        _ => (
            RangeSpec::Rank(
                parse_i64(a).ok_or_else(CommandError::not_integer)?,
                parse_i64(b).ok_or_else(CommandError::not_integer)?,
            ),
            "zremrangebyrank",
        ),
    };
    let (r, emptied) = write_zset(ctx, key, false, |z| {
        let (s, e) = match &spec {
            RangeSpec::Rank(s, e) => match rank_range(*s, *e, z.len()) {
                Some((s, e)) => (s, e + 1),
                None => (0, 0),
            },
            RangeSpec::Score(r) => r.ranks(z),
            RangeSpec::Lex(r) => r.ranks(z),
        };
        let n = z.remove_ranks(s, e).len();
        (n, n > 0)
    })?;
    let n = r.unwrap_or(0);
    if n > 0 {
        notify(ctx, event, key);
        if emptied {
            notify_del(ctx, key);
        }
    }
    Ok(Reply::Int(n as i64))
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    zremrange(ctx, args, RangeType::Rank)
}
fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    zremrange(ctx, args, RangeType::Score)
}
fn zremrangebylex(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    zremrange(ctx, args, RangeType::Lex)
}

// ---------------------------------------------------------------------------------------
// Pops

/// Pops up to `count` entries from the low (`max` false) or high end of the sorted set at
/// `key` in a locked key space (`h` its hash), deleting the key when emptied. Returns them
/// in pop order; empty when the key does not exist. The caller emits the keyspace events
/// (`zpopmin`/`zpopmax`, and `del` when the key is gone afterwards). For the blocking forms.
pub fn pop_from(
    ks: &mut Keyspace,
    h: u64,
    key: &[u8],
    max: bool,
    count: usize,
) -> Result<Vec<(Vec<u8>, f64)>, WrongType> {
    Ok(ks
        .write_as::<ZSetValue, _>(h, key, false, |z| {
            let len = z.len();
            let n = count.min(len);
            let mut v = if max {
                z.remove_ranks(len - n, len)
            } else {
                z.remove_ranks(0, n)
            };
            if max {
                v.reverse();
            }
            let ch = !v.is_empty();
            if ch {
                // Journaled as the plain pop of what it took (blocking, served, ZMPOP).
                let n = v.len().to_string();
                let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
                crate::commands::journal::journal_as(&[name, key, n.as_bytes()]);
            }
            (v, ch)
        })?
        .unwrap_or_default())
}

/// The entries of a pop as reply elements: flat member, score pairs, or `[member, score]`
/// arrays when `nested` (RESP3 with a count, ZMPOP and BZMPOP).
pub fn pop_reply(entries: Vec<(Vec<u8>, f64)>, nested: bool) -> Vec<Reply> {
    let mut out = Vec::new();
    for (m, s) in entries {
        push_entry(&mut out, &m, s, true, nested);
    }
    out
}

fn zpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>, max: bool) -> CmdResult {
    let key = args.next_key()?;
    if args.len() > 1 {
        return Err(CommandError::syntax());
    }
    let count = match args.next_opt() {
        None => None,
        Some(c) => match parse_i64(c) {
            None | Some(i64::MIN..=-1) => {
                return Err(CommandError::msg(
                    "ERR value is out of range, must be positive",
                ))
            }
            Some(n) => Some(n as usize),
        },
    };
    let nested = ctx.client.resp3 && count.is_some();
    let db = ctx.client.db;
    let (v, gone) = ctx.server.store.with_key(db, key, |ks, h| {
        let v = pop_from(ks, h, key, max, count.unwrap_or(1))?;
        let gone = !v.is_empty() && !ks.contains(h, key);
        Ok::<_, CommandError>((v, gone))
    })?;
    if !v.is_empty() {
        notify(ctx, if max { "zpopmax" } else { "zpopmin" }, key);
        if gone {
            notify_del(ctx, key);
        }
    }
    Ok(Reply::Array(pop_reply(v, nested)))
}

fn zpopmin(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    zpop(ctx, args, false)
}
fn zpopmax(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    zpop(ctx, args, true)
}

fn zmpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (keys, max, count) = mpop_args(args, MIN_MAX)?;
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(keys);
    for (i, key) in keys.iter().enumerate() {
        let h = l.hash(i);
        let ks = l.ks(i, db);
        let v = pop_from(ks, h, key, max, count)?;
        if v.is_empty() {
            continue;
        }
        let gone = !ks.contains(h, key);
        notify(ctx, if max { "zpopmax" } else { "zpopmin" }, key);
        if gone {
            notify_del(ctx, key);
        }
        return Ok(Reply::Array(vec![
            Reply::Bulk((*key).clone()),
            Reply::Array(pop_reply(v, true)),
        ]));
    }
    Ok(Reply::NilArray)
}

// ---------------------------------------------------------------------------------------
// Blocking pops: BZPOPMIN BZPOPMAX BZMPOP (served like BLPOP, see `commands::blocking`)

/// Pops from the sorted set at `key` for a client (blocked or not): the popped entries, with
/// the keyspace events sent. Empty when the key holds nothing.
fn pop_for(
    server: &crate::state::Server,
    db: usize,
    key: &[u8],
    max: bool,
    count: usize,
) -> Result<Vec<(Vec<u8>, f64)>, WrongType> {
    server.store.with_key(db, key, |ks, h| {
        let v = pop_from(ks, h, key, max, count)?;
        if !v.is_empty() {
            server.notify(
                db,
                class::ZSET,
                if max { "zpopmax" } else { "zpopmin" },
                key,
            );
            if !ks.contains(h, key) {
                server.notify(db, class::GENERIC, "del", key);
            }
        }
        Ok(v)
    })
}

/// BZPOPMIN/BZPOPMAX's reply: `[key, member, score]`.
fn bzpop_reply(key: &[u8], mut v: Vec<(Vec<u8>, f64)>) -> Option<Reply> {
    let (m, s) = v.pop()?;
    Some(Reply::Array(vec![
        Reply::Bulk(Bytes::copy_from_slice(key)),
        Reply::Bulk(m.into()),
        score_reply(s),
    ]))
}

fn bzpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>, max: bool) -> CmdResult {
    let all = args.rest();
    let (keys, timeout) = all.split_at(all.len() - 1);
    let deadline = crate::commands::blocking::parse_timeout(&timeout[0])?;
    let db = ctx.client.db;
    for key in keys {
        let v = pop_for(ctx.server, db, key, max, 1)?;
        if let Some(r) = bzpop_reply(key, v) {
            return Ok(r);
        }
    }
    let attempt = move |server: &crate::state::Server, key: &Bytes| {
        bzpop_reply(key, pop_for(server, db, key, max, 1).ok()?)
    };
    crate::commands::blocking::block_on(
        ctx,
        keys.to_vec(),
        Box::new(attempt),
        Reply::NilArray,
        deadline,
    )
}

fn bzpopmin(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    bzpop(ctx, args, false)
}
fn bzpopmax(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    bzpop(ctx, args, true)
}

fn bzmpop(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let timeout = args.next_arg()?;
    let (keys, max, count) = mpop_args(args, MIN_MAX)?;
    let keys = keys.to_vec();
    let deadline = crate::commands::blocking::parse_timeout(timeout)?;
    let db = ctx.client.db;
    let reply = |key: &[u8], v: Vec<(Vec<u8>, f64)>| {
        Reply::Array(vec![
            Reply::Bulk(Bytes::copy_from_slice(key)),
            Reply::Array(pop_reply(v, true)),
        ])
    };
    for key in &keys {
        let v = pop_for(ctx.server, db, key, max, count)?;
        if !v.is_empty() {
            return Ok(reply(key, v));
        }
    }
    let attempt = move |server: &crate::state::Server, key: &Bytes| {
        let v = pop_for(server, db, key, max, count).ok()?;
        (!v.is_empty()).then(|| reply(key, v))
    };
    crate::commands::blocking::block_on(ctx, keys, Box::new(attempt), Reply::NilArray, deadline)
}

// ---------------------------------------------------------------------------------------
// ZRANDMEMBER

fn zrandmember(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let resp3 = ctx.client.resp3;
    let key = args.next_key()?;
    let (count, withscores) = random_count_args(args, "WITHSCORES")?;
    read_zset(ctx, key, |z| {
        let Some(count) = count else {
            return match z {
                None => Reply::Nil,
                Some(z) => z
                    .at(rand_u64() as usize % z.len().max(1))
                    .map_or(Reply::Nil, |(m, _)| Reply::Bulk(Bytes::copy_from_slice(m))),
            };
        };
        let Some(z) = z.filter(|z| !z.is_empty()) else {
            return Reply::Array(vec![]);
        };
        let len = z.len();
        let picks: Vec<(&[u8], f64)> = if count >= 0 {
            let n = (count as usize).min(len);
            if n == len {
                z.iter().collect()
            } else {
                // Distinct members: a random sample of ranks (Floyd's algorithm).
                let mut chosen = std::collections::BTreeSet::new();
                for j in (len - n)..len {
                    let t = rand_u64() as usize % (j + 1);
                    if !chosen.insert(t) {
                        chosen.insert(j);
                    }
                }
                let mut v: Vec<(&[u8], f64)> = chosen.into_iter().filter_map(|r| z.at(r)).collect();
                // Shuffle so the reply order is random too.
                for i in (1..v.len()).rev() {
                    let j = rand_u64() as usize % (i + 1);
                    v.swap(i, j);
                }
                v
            }
        } else {
            let n = (count.unsigned_abs() as usize).min(MAX_RANDOM_REPLY);
            let mut v = Vec::with_capacity(n.min(1 << 16));
            if z.encoding() == "listpack" {
                // Reaching a rank is a scan in the packed form: index it once.
                let all: Vec<(&[u8], f64)> = z.iter().collect();
                for _ in 0..n {
                    v.push(all[rand_u64() as usize % len]);
                }
            } else {
                for _ in 0..n {
                    if let Some(e) = z.at(rand_u64() as usize % len) {
                        v.push(e);
                    }
                }
            }
            v
        };
        let mut out = Vec::new();
        for (m, s) in picks {
            push_entry(&mut out, m, s, withscores, resp3);
        }
        Reply::Array(out)
    })
}

// ---------------------------------------------------------------------------------------
// ZUNION / ZINTER / ZDIFF (and STORE), ZINTERCARD

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(acc: &mut f64, v: f64, a: Aggregate) {
    match a {
        Aggregate::Sum => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        Aggregate::Min => {
            if v < *acc {
                *acc = v
            }
        }
        Aggregate::Max => {
            if v > *acc {
                *acc = v
            }
        }
    }
}

/// One input of a set operation: a sorted set's entries, or a set's members with score 1.
type Input = Vec<(Vec<u8>, f64)>;

/// The members of a plain set as inputs of score 1.
fn set_members(s: &crate::store::SetValue) -> Input {
    s.iter().map(|m| (m.into_owned(), 1.0)).collect()
}

struct SetOpArgs<'a> {
    keys: Vec<&'a Bytes>,
    weights: Vec<f64>,
    agg: Aggregate,
    withscores: bool,
    limit: usize,
}

fn parse_setop<'a>(
    args: &mut Args<'a>,
    op: SetOp,
    store: bool,
    card: bool,
    name: &str,
) -> CommandResult<SetOpArgs<'a>> {
    let n = parse_i64(args.next_arg()?).ok_or_else(CommandError::not_integer)?;
    if n < 1 {
        return Err(CommandError::msg(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    if n as u64 > args.len() as u64 {
        return Err(CommandError::syntax());
    }
    let n = n as usize;
    let keys: Vec<&Bytes> = (0..n).filter_map(|_| args.next_opt()).collect();
    let mut o = SetOpArgs {
        keys,
        weights: vec![1.0; n],
        agg: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    while let Some(a) = args.next_opt() {
        let remaining = args.len() + 1;
        let t = crate::commands::args::Token::of(a);
        match &*t {
            b"WEIGHTS" if op != SetOp::Diff && !card && remaining > n => {
                for w in o.weights.iter_mut() {
                    *w = args
                        .next_opt()
                        .and_then(|a| parse_score(a).ok())
                        .ok_or_else(|| CommandError::msg("ERR weight value is not a float"))?;
                }
            }
            b"AGGREGATE" if op != SetOp::Diff && !card && remaining >= 2 => {
                o.agg = match args.next_token().as_deref() {
                    Some(b"SUM") => Aggregate::Sum,
                    Some(b"MIN") => Aggregate::Min,
                    Some(b"MAX") => Aggregate::Max,
                    _ => return Err(CommandError::syntax()),
                };
            }
            b"WITHSCORES" if !store && !card => o.withscores = true,
            b"LIMIT" if card && remaining >= 2 => {
                o.limit = match args.next_opt().and_then(|a| parse_i64(a)) {
                    None | Some(i64::MIN..=-1) => {
                        return Err(CommandError::msg("ERR LIMIT can't be negative"))
                    }
                    Some(l) => l as usize,
                };
            }
            _ => return Err(CommandError::syntax()),
        }
    }
    Ok(o)
}

/// Reads the inputs of a set operation from the locked keys `base..` (WRONGTYPE for
/// anything but sorted sets and sets).
fn read_inputs(
    l: &mut crate::store::multi::Locked<'_>,
    db: usize,
    keys: &[&Bytes],
    base: usize,
) -> CommandResult<Vec<Input>> {
    let mut inputs = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        let h = l.hash(base + i);
        let ks = l.ks(base + i, db);
        let input = match ks.get(h, k) {
            None => Vec::new(),
            Some(e) => match &e.value {
                Value::ZSet(z) => z.iter().map(|(m, s)| (m.to_vec(), s)).collect(),
                Value::Set(s) => set_members(s),
                _ => return Err(CommandError::wrongtype()),
            },
        };
        inputs.push(input);
    }
    Ok(inputs)
}

fn compute(op: SetOp, inputs: Vec<Input>, weights: &[f64], agg: Aggregate) -> Vec<(Vec<u8>, f64)> {
    let weighted = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    match op {
        SetOp::Diff => {
            let mut it = inputs.into_iter();
            let Some(first) = it.next() else {
                return Vec::new();
            };
            let others: Vec<hashbrown::HashSet<Vec<u8>>> = it
                .map(|v| v.into_iter().map(|(m, _)| m).collect())
                .collect();
            first
                .into_iter()
                .filter(|(m, _)| !others.iter().any(|o| o.contains(m)))
                .collect()
        }
        SetOp::Union => {
            // Redis accumulates the inputs from the smallest to the largest (which decides
            // the rounding of sums).
            let mut ins: Vec<(Input, f64)> =
                inputs.into_iter().zip(weights.iter().copied()).collect();
            ins.sort_by_key(|(i, _)| i.len());
            let mut acc: hashbrown::HashMap<Vec<u8>, f64> = hashbrown::HashMap::new();
            for (input, w) in ins {
                for (m, s) in input {
                    let v = weighted(s, w);
                    match acc.get_mut(&m) {
                        Some(a) => aggregate(a, v, agg),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
            acc.into_iter().collect()
        }
        SetOp::Inter => {
            let mut order: Vec<usize> = (0..inputs.len()).collect();
            order.sort_by_key(|&i| inputs[i].len());
            let maps: Vec<hashbrown::HashMap<&[u8], f64>> = inputs
                .iter()
                .map(|v| v.iter().map(|(m, s)| (&m[..], *s)).collect())
                .collect();
            let first = order[0];
            let mut out = Vec::new();
            'outer: for (m, s) in &inputs[first] {
                let mut score = weighted(*s, weights[first]);
                for &j in &order[1..] {
                    match maps[j].get(&m[..]) {
                        None => continue 'outer,
                        // Redis zeroes a NaN product only for the first input here.
                        Some(&o) => aggregate(&mut score, o * weights[j], agg),
                    }
                }
                out.push((m.clone(), score));
            }
            out
        }
    }
}

fn sort_entries(v: &mut [(Vec<u8>, f64)]) {
    v.sort_by(|a, b| crate::store::zset::cmp_entry(a.1, &a.0, b.1, &b.0));
}

fn setop(ctx: &mut Ctx<'_>, args: &mut Args<'_>, op: SetOp, name: &str) -> CmdResult {
    let o = parse_setop(args, op, false, false, name)?;
    let db = ctx.client.db;
    let resp3 = ctx.client.resp3;
    let mut l = ctx.server.store.lock_keys(&o.keys);
    let inputs = read_inputs(&mut l, db, &o.keys, 0)?;
    drop(l);
    let mut res = compute(op, inputs, &o.weights, o.agg);
    sort_entries(&mut res);
    let mut out = Vec::new();
    for (m, s) in res {
        push_entry(&mut out, &m, s, o.withscores, resp3);
    }
    Ok(Reply::Array(out))
}

fn setop_store(
    ctx: &mut Ctx<'_>,
    args: &mut Args<'_>,
    op: SetOp,
    name: &str,
    event: &'static str,
) -> CmdResult {
    let dst = args.next_key()?;
    let o = parse_setop(args, op, true, false, name)?;
    let db = ctx.client.db;
    let mut keys: Vec<&Bytes> = vec![dst];
    keys.extend(o.keys.iter().copied());
    let mut l = ctx.server.store.lock_keys(&keys);
    let inputs = read_inputs(&mut l, db, &o.keys, 1)?;
    let mut res = compute(op, inputs, &o.weights, o.agg);
    sort_entries(&mut res);
    let h = l.hash(0);
    let n = store_result(ctx, l.ks(0, db), h, dst, res, event, Build::Shrink);
    Ok(Reply::Int(n as i64))
}

fn zunion(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setop(ctx, args, SetOp::Union, "zunion")
}
fn zinter(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setop(ctx, args, SetOp::Inter, "zinter")
}
fn zdiff(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setop(ctx, args, SetOp::Diff, "zdiff")
}
fn zunionstore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setop_store(ctx, args, SetOp::Union, "zunionstore", "zunionstore")
}
fn zinterstore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setop_store(ctx, args, SetOp::Inter, "zinterstore", "zinterstore")
}
fn zdiffstore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    setop_store(ctx, args, SetOp::Diff, "zdiffstore", "zdiffstore")
}

fn zintercard(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let o = parse_setop(args, SetOp::Inter, false, true, "zintercard")?;
    let db = ctx.client.db;
    let mut l = ctx.server.store.lock_keys(&o.keys);
    let inputs = read_inputs(&mut l, db, &o.keys, 0)?;
    drop(l);
    let n = compute(SetOp::Inter, inputs, &o.weights, Aggregate::Sum).len();
    let n = if o.limit > 0 { n.min(o.limit) } else { n };
    Ok(Reply::Int(n as i64))
}

// ---------------------------------------------------------------------------------------
// ZSCAN

/// ZSCAN returns the whole set in one reply with cursor 0 (as Redis does for listpack-encoded
/// sets), so no member present for the whole iteration can be missed.
fn zscan(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    scan_cursor(args)?;
    let o = scan_opts(args, false)?;
    read_zset(ctx, key, |z| {
        let mut out = Vec::new();
        if let Some(z) = z {
            for (m, s) in z.iter() {
                if o.pattern.as_ref().is_none_or(|p| glob_match(p, m, false)) {
                    out.push(Reply::Bulk(Bytes::copy_from_slice(m)));
                    out.push(Reply::bulk(fmt_score(s)));
                }
            }
        }
        Reply::Array(vec![Reply::bulk_str("0"), Reply::Array(out)])
    })
}
