//! DUMP and RESTORE: one value in Redis 7.0's serialized form (`store::rdb`), so values move
//! between tidecache and redis-server in both directions.
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers below.
use crate::commands::args::{Args, CommandError, NOT_AN_INTEGER};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec, KeySpec};
use crate::commands::Ctx;
use crate::protocol::Reply;
use crate::state::pubsub::class;
use crate::store::{rdb, Ttl};
use crate::util::num::parse_i64;

const GENERIC: CommandSpec = family("generic", acl::KEYSPACE);

const DUMP_KEYS: &[KeySpec] = &[KeySpec::at(1, &["RO", "access"])];
const RESTORE_KEYS: &[KeySpec] = &[KeySpec::at(1, &["OW", "update"])];

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    GENERIC.cmd("dump", 2, dump).flags(READONLY).key().key_specs(DUMP_KEYS)
        .doc("2.6.0", "Return a serialized version of the value stored at the specified key.")
        .complexity("O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).")
        .args("key:key"),
    GENERIC.cmd("restore", -4, restore).flags(WRITE | DENYOOM).key().key_specs(RESTORE_KEYS)
        .acl(acl::DANGEROUS)
        .doc("2.6.0", "Create a key using the provided serialized value, previously obtained using DUMP.")
        .complexity("O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).")
        .args("key:key ttl:integer serialized-value [REPLACE] [ABSTTL] [IDLETIME=seconds:integer] [FREQ=frequency:integer]"),
    GENERIC.cmd("restore-asking", -4, restore).flags(WRITE | DENYOOM | ASKING).key().key_specs(RESTORE_KEYS)
        .acl(acl::DANGEROUS)
        .doc("3.0.0", "An internal command for migrating keys in a cluster")
        .complexity("O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).")
        .args("key:key ttl:integer serialized-value [REPLACE] [ABSTTL] [IDLETIME=seconds:integer] [FREQ=frequency:integer]"),
];

fn dump(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    args.finish()?;
    // As Redis's rdbSaveRawString, DUMP follows `rdbcompression`.
    let lzf = ctx.server.config.read().get_bool("rdbcompression");
    let payload = ctx.server.store.with_key(ctx.client.db, key, |ks, h| {
        ks.get(h, key).map(|e| rdb::dump_as(&e.value, lzf))
    });
    Ok(payload.map_or(Reply::Nil, Reply::bulk))
}

/// Whether `sanitize-dump-payload` asks for this RESTORE's payload to be deeply checked
/// (Redis's `rdbLoadObject`): `clients` leaves out the journal's replay, this replica's
/// master and users with `skip-sanitize-payload`. Every payload is decoded entry by entry
/// here whatever the setting; it decides what INFO counts.
fn counts_as_sanitized(ctx: &Ctx<'_>) -> bool {
    match ctx.server.config.read().get("sanitize-dump-payload") {
        "yes" => true,
        "clients" => {
            !crate::store::journal::loading()
                && !crate::state::replication::applying()
                && ctx
                    .client
                    .user
                    .as_ref()
                    .is_none_or(|u| u.sanitize != Some(false))
        }
        _ => false,
    }
}

/// Redis's `restoreCommand` (cluster.c), in its order of checks: options, BUSYKEY, the TTL,
/// the payload's footer, then its contents.
fn restore(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let key = args.next_key()?;
    let ttl_arg = args.next_arg()?;
    let payload = args.next_arg()?;
    let rest = args.rest();
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 0;
    while j < rest.len() {
        let a = &rest[j];
        let more = rest.len() - j - 1;
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if a.eq_ignore_ascii_case(b"idletime") && more >= 1 && freq.is_none() {
            let v = parse_i64(&rest[j + 1]).ok_or(CommandError::msg(NOT_AN_INTEGER))?;
            if v < 0 {
                return Err(CommandError::msg(
                    "ERR Invalid IDLETIME value, must be >= 0",
                ));
            }
            idle = Some(v);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"freq") && more >= 1 && idle.is_none() {
            let v = parse_i64(&rest[j + 1]).ok_or(CommandError::msg(NOT_AN_INTEGER))?;
            if !(0..=255).contains(&v) {
                return Err(CommandError::msg(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CommandError::syntax());
        }
        j += 1;
    }
    // IDLETIME and FREQ are parsed and checked as Redis does, but not applied: a key's
    // access word (LRU clock / LFU counter) is private to the key space, which offers no
    // way to set it, so a restored key starts with a fresh one as any new key does.
    let _ = (idle, freq);

    // Decode before taking the lock; the errors are reported in Redis's order below.
    let ttl = parse_i64(ttl_arg);
    let decoded = if rdb::verify(payload) {
        Some(rdb::load_counted(payload).map(|(v, blobs)| {
            if counts_as_sanitized(ctx) {
                ctx.server
                    .stats
                    .dump_payload_sanitizations
                    .fetch_add(blobs, std::sync::atomic::Ordering::Relaxed);
            }
            v
        }))
    } else {
        None
    };
    let db = ctx.client.db;
    let outcome = ctx.server.store.with_key(db, key, |ks, h| {
        if !replace && ks.contains(h, key) {
            return Err(CommandError::msg("BUSYKEY Target key name already exists."));
        }
        let ttl = ttl.ok_or(CommandError::msg(NOT_AN_INTEGER))?;
        if ttl < 0 {
            return Err(CommandError::msg("ERR Invalid TTL value, must be >= 0"));
        }
        let value = match decoded {
            None => {
                return Err(CommandError::msg(
                    "ERR DUMP payload version or checksum are wrong",
                ))
            }
            Some(Err(_)) => return Err(CommandError::msg("ERR Bad data format")),
            Some(Ok(v)) => v,
        };
        let deadline = match ttl {
            0 => None,
            t if absttl => Some(t),
            // Redis adds the time without an overflow check: a sum that wraps is in the
            // past, and no key is created.
            t => Some(t.wrapping_add(crate::util::clock::now_ms())),
        };
        if let (Some(at), false) = (deadline, absttl) {
            // Journaled with its absolute deadline (Redis 7: RESTORE … ABSTTL).
            let at = at.to_string();
            let mut argv: Vec<&[u8]> = vec![b"RESTORE", key, at.as_bytes(), payload];
            if replace {
                argv.push(b"REPLACE");
            }
            argv.push(b"ABSTTL");
            crate::commands::journal::journal_as(&argv);
        }
        if let Some(at) = deadline {
            // While the journal is replayed a past deadline is kept (see `journal::loading`).
            if at <= crate::util::clock::now_ms() && !crate::store::journal::loading() {
                // Already expired: nothing is created; a replaced key is deleted.
                let deleted = replace && ks.remove(h, key).is_some();
                return Ok(if deleted { "del" } else { "" });
            }
        }
        let t = deadline.map_or(Ttl::Clear, Ttl::At);
        ks.set(h, key, value, t);
        Ok("restore")
    })?;
    if !outcome.is_empty() {
        ctx.server.notify(db, class::GENERIC, outcome, key);
    }
    Ok(Reply::ok())
}
