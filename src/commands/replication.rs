//! The replication commands: REPLICAOF/SLAVEOF (replica side), REPLCONF, PSYNC and SYNC
//! (what a replica sends its master). PSYNC and SYNC hand their connection to the network
//! side (`server/replication.rs`), which sends the snapshot and then the stream.

use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec};
use crate::commands::{is, text, Ctx};
use crate::protocol::Reply;
use crate::state::replication::{self, Psync};

const REPL: CommandSpec = family("server", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    REPL.cmd("replicaof", 3, replicaof).flags(ADMIN | NOSCRIPT | STALE).acl(acl::SLOW)
        .doc("5.0.0", "Configures a server as replica of another, or promotes it to a master.")
        .complexity("O(1)").args("host port"),
    REPL.cmd("slaveof", 3, replicaof).flags(ADMIN | NOSCRIPT | STALE).acl(acl::SLOW)
        .doc("1.0.0", "Sets a Redis server as a replica of another, or promotes it to being a master.")
        .complexity("O(1)").args("host port"),
    REPL.cmd("replconf", -1, replconf).flags(ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY).acl(acl::SLOW)
        .doc("3.0.0", "An internal command for configuring the replication stream.")
        .complexity("O(1)"),
    REPL.cmd("psync", -3, psync).flags(ADMIN | NOSCRIPT | NO_MULTI).acl(acl::SLOW)
        .doc("2.8.0", "An internal command used in replication.")
        .args("replicationid offset:integer"),
    REPL.cmd("sync", 1, sync).flags(ADMIN | NOSCRIPT | NO_MULTI).acl(acl::SLOW)
        .doc("1.0.0", "An internal command used in replication."),
];

/// REPLICAOF host port | NO ONE (Redis's `replicaofCommand`).
fn replicaof(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let host = args.next_arg()?.to_vec();
    let port = args.next_arg()?.to_vec();
    if is(&host, "no") && is(&port, "one") {
        if replication::is_replica() {
            replication::unfollow();
            reapply_oom_score(ctx);
            tracing::warn!(
                "MASTER MODE enabled (user request from 'id={} addr={}')",
                ctx.client.id(),
                ctx.client.handle.addr
            );
        }
        return Ok(Reply::ok());
    }
    let port = crate::util::num::parse_i64(&port)
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| CommandError::msg("ERR value is not an integer or out of range"))?;
    let host = text(&host).to_string();
    let same = replication::repl()
        .master
        .lock()
        .as_ref()
        .is_some_and(|(h, p)| *h == host && *p as i64 == port);
    if same {
        tracing::info!("REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.");
        return Ok(Reply::Simple("OK Already connected to specified master"));
    }
    tracing::warn!(
        "REPLICAOF {host}:{port} enabled (user request from 'id={} addr={}')",
        ctx.client.id(),
        ctx.client.handle.addr
    );
    replication::follow(ctx.server, host, port as u16);
    reapply_oom_score(ctx);
    Ok(Reply::ok())
}

/// The OOM score follows the role (`oom-score-adj-values`: master, replica), as Redis's
/// replicationSetMaster/replicationUnsetMaster call setOOMScoreAdj.
fn reapply_oom_score(ctx: &Ctx<'_>) {
    if let Err(e) = ctx.server.apply_oom_score_adj() {
        tracing::warn!("{e}");
    }
}

/// REPLCONF option value ...: what a replica tells its master before PSYNC.
fn replconf(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let rest = args.rest();
    if rest.len() % 2 == 1 {
        return Err(CommandError::syntax());
    }
    let id = ctx.client.id();
    for pair in rest.chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        if is(opt, "listening-port") {
            let p = crate::util::num::parse_i64(val)
                .filter(|p| (0..=65535).contains(p))
                .ok_or_else(|| CommandError::msg("ERR value is not an integer or out of range"))?;
            replication::repl().confs.lock().entry(id).or_default().port = Some(p as u16);
        } else if is(opt, "ip-address") {
            replication::repl().confs.lock().entry(id).or_default().ip =
                Some(text(val).to_string());
        } else if is(opt, "capa") || is(opt, "rdb-only") || is(opt, "rdb-filter-only") {
            // Every replica gets the RDB with its length and PSYNC's +CONTINUE with the ID:
            // what `eof` and `psync2` announce the replica understands.
        } else if is(opt, "ack") || is(opt, "getack") {
            // ACK comes on a replica's stream (read there); GETACK on a master's stream
            // (answered by the link). Elsewhere, as Redis, no reply.
            return Ok(Reply::NoReply);
        } else {
            return Err(CommandError::msg(format!(
                "ERR Unrecognized REPLCONF option: {}",
                text(opt)
            )));
        }
    }
    Ok(Reply::ok())
}

/// No chained replication here: a replica serves no replicas of its own.
fn no_chaining() -> Result<(), CommandError> {
    if replication::is_replica() {
        return Err(CommandError::msg(
            "ERR this server is a replica and serves no replicas of its own (chained replication is not available)",
        ));
    }
    Ok(())
}

/// PSYNC replid offset: a full or partial resynchronisation, decided when the connection
/// hands over.
fn psync(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    no_chaining()?;
    let replid = text(args.next_arg()?).to_string();
    let offset = args.next_i64()?;
    replication::hand_off(Psync {
        replid: Some(replid),
        offset,
    });
    Ok(Reply::NoReply)
}

/// SYNC: the old protocol, always a full resynchronisation without the `+FULLRESYNC` line.
fn sync(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    args.finish()?;
    no_chaining()?;
    replication::hand_off(Psync {
        replid: None,
        offset: -1,
    });
    Ok(Reply::NoReply)
}
