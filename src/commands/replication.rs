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
    REPL.cmd("replicaof", 3, replicaof).flags(ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING).acl(acl::SLOW)
        .doc("5.0.0", "Configures a server as replica of another, or promotes it to a master.")
        .complexity("O(1)").args("host port"),
    REPL.cmd("slaveof", 3, replicaof).flags(ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING).acl(acl::SLOW)
        .doc("1.0.0", "Sets a Redis server as a replica of another, or promotes it to being a master.")
        .complexity("O(1)").args("host port"),
    REPL.cmd("replconf", -1, replconf).flags(ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY).acl(acl::SLOW)
        .doc("3.0.0", "An internal command for configuring the replication stream.")
        .complexity("O(1)"),
    REPL.cmd("psync", -3, psync).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI).acl(acl::SLOW)
        .doc("2.8.0", "An internal command used in replication.")
        .args("replicationid offset:integer"),
    REPL.cmd("sync", 1, sync).flags(ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI).acl(acl::SLOW)
        .doc("1.0.0", "An internal command used in replication."),
    REPL.cmd("failover", -1, failover).flags(ADMIN | NOSCRIPT | STALE).acl(acl::SLOW | acl::DANGEROUS)
        .doc("6.2.0", "Starts a coordinated failover between the primary and a replica.")
        .complexity("O(1)")
        .args("[TO=target:{host port:integer [FORCE]}] [ABORT] [TIMEOUT=milliseconds:integer]"),
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
        .ok_or_else(CommandError::not_integer)?;
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
                .ok_or_else(CommandError::not_integer)?;
            replication::repl().confs.lock().entry(id).or_default().port = Some(p as u16);
        } else if is(opt, "ip-address") {
            replication::repl().confs.lock().entry(id).or_default().ip =
                Some(text(val).to_string());
        } else if is(opt, "capa") {
            // `eof`: a diskless transfer may go to it (`repl-diskless-sync`). Every replica
            // gets PSYNC's +CONTINUE with the ID, what `psync2` announces.
            if is(val, "eof") {
                replication::repl().confs.lock().entry(id).or_default().eof = true;
            }
        } else if is(opt, "rdb-only") || is(opt, "rdb-filter-only") {
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

/// A replica serves replicas of its own (chained replication) once its link is up: they
/// follow its master's stream, which it proxies (Redis's `syncCommand`).
fn master_link_up() -> Result<(), CommandError> {
    if replication::is_replica() && !replication::repl().link_up.get() {
        return Err(CommandError::msg(
            "NOMASTERLINK Can't SYNC while not connected with my master",
        ));
    }
    Ok(())
}

/// PSYNC replid offset [FAILOVER]: a full or partial resynchronisation, decided when the
/// connection hands over. With FAILOVER (from the master this replica follows, during its
/// FAILOVER) this replica first becomes a master, as Redis's `syncCommand`.
fn psync(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let all = args.rest().to_vec();
    if all.len() > 2 && is(&all[2], "failover") {
        tracing::warn!("Failover request received for replid {}.", text(&all[0]));
        if !replication::is_replica() {
            return Err(CommandError::msg(
                "ERR PSYNC FAILOVER can't be sent to a master.",
            ));
        }
        if *replication::repl().master_replid.lock() != text(&all[0]) {
            return Err(CommandError::msg(
                "ERR PSYNC FAILOVER replid must match my replid.",
            ));
        }
        replication::unfollow();
        reapply_oom_score(ctx);
        crate::state::redis_log::line(
            ctx.server,
            false,
            &format!(
                "MASTER MODE enabled (failover request from 'id={} addr={}')",
                ctx.client.id(),
                ctx.client.handle.addr
            ),
        );
    }
    // Replicas do not sync with a master that is handing its role over.
    if replication::failover_phase() != replication::FailoverPhase::None {
        return Err(CommandError::msg(
            "NOMASTERLINK Can't SYNC while failing over",
        ));
    }
    master_link_up()?;
    let replid = text(&all[0]).to_string();
    let offset = crate::util::num::parse_i64(&all[1]).ok_or_else(CommandError::not_integer)?;
    replication::hand_off(Psync {
        replid: Some(replid),
        offset,
    });
    Ok(Reply::NoReply)
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: the coordinated failover of a
/// standalone master (Redis 6.2's `failoverCommand`). Writes pause; once a replica (the one
/// named, or the first found) has acknowledged the whole stream, this server follows it and
/// asks it, with `PSYNC ... FAILOVER`, to become the master; the pause ends when that PSYNC
/// is answered. A timeout without a replica in sync abandons the failover, unless FORCE.
fn failover(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if ctx.server.cluster.get().is_some() {
        return Err(CommandError::msg(
            "ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.",
        ));
    }
    let all = args.rest().to_vec();
    if all.len() == 1 && is(&all[0], "abort") {
        return match replication::abort_failover("Failover manually aborted") {
            Some(line) => {
                crate::state::redis_log::line(ctx.server, false, &line);
                Ok(Reply::ok())
            }
            None => Err(CommandError::msg("ERR No failover in progress.")),
        };
    }
    let (mut timeout_ms, mut force, mut target) = (0i64, false, None::<(String, i64)>);
    let mut j = 0;
    while j < all.len() {
        let a = &all[j];
        if is(a, "timeout") && j + 1 < all.len() && timeout_ms == 0 {
            timeout_ms =
                crate::util::num::parse_i64(&all[j + 1]).ok_or_else(CommandError::not_integer)?;
            if timeout_ms <= 0 {
                return Err(CommandError::msg(
                    "ERR FAILOVER timeout must be greater than 0",
                ));
            }
            j += 2;
        } else if is(a, "to") && j + 2 < all.len() && target.is_none() {
            let port =
                crate::util::num::parse_i64(&all[j + 2]).ok_or_else(CommandError::not_integer)?;
            target = Some((text(&all[j + 1]).to_string(), port));
            j += 3;
        } else if is(a, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CommandError::syntax());
        }
    }
    if replication::failover_phase() != replication::FailoverPhase::None {
        return Err(CommandError::msg("ERR FAILOVER already in progress."));
    }
    if replication::is_replica() {
        return Err(CommandError::msg(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    let replicas = replication::repl().replicas.lock().clone();
    if replicas.is_empty() {
        return Err(CommandError::msg(
            "ERR FAILOVER requires connected replicas.",
        ));
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Err(CommandError::msg(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let target = match target {
        Some((host, port)) => {
            let Some(r) = replicas
                .iter()
                .find(|r| r.ip == host && i64::from(r.port) == port)
            else {
                return Err(CommandError::msg(
                    "ERR FAILOVER target HOST and PORT is not a replica.",
                ));
            };
            if r.state != "online" {
                return Err(CommandError::msg(
                    "ERR FAILOVER target replica is not online.",
                ));
            }
            crate::state::redis_log::line(
                ctx.server,
                false,
                &format!("FAILOVER requested to {host}:{port}."),
            );
            Some((host, r.port))
        }
        None => {
            crate::state::redis_log::line(ctx.server, false, "FAILOVER requested to any replica.");
            None
        }
    };
    *replication::repl().failover.lock() = replication::Failover {
        phase: replication::FailoverPhase::WaitForSync,
        target,
        deadline_ms: (timeout_ms > 0)
            .then(|| crate::util::clock::now_ms() as u64 + timeout_ms as u64),
        force,
    };
    crate::state::pause::pause(
        crate::state::pause::Purpose::Failover,
        crate::state::pause::WRITE,
        None,
    );
    // The replicas acknowledge once a second; asking now saves most of that wait.
    crate::store::journal::replicate_only(None, &[b"REPLCONF", b"GETACK", b"*"]);
    let server = ctx.server.clone();
    tokio::spawn(async move {
        while drive_failover(&server) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    Ok(Reply::ok())
}

/// Before a shutdown (SHUTDOWN without NOW, a signal): with replicas attached and
/// `shutdown-timeout` above 0, writes are paused and the replicas asked for their offsets,
/// and the shutdown waits until every one has acknowledged the whole stream or the timeout
/// passes, as Redis's `isReadyToShutdown` (the replicas then lose nothing this master
/// acknowledged). A lagging replica is logged when the time runs out. False when SHUTDOWN
/// ABORT cancelled the wait: writes are resumed and the server goes on. Blocks its thread.
pub fn wait_replicas_before_shutdown(server: &crate::state::Server) -> bool {
    use std::sync::atomic::Ordering;
    if !shutdown_waits_for_replicas(server) {
        return true;
    }
    // Replicas that acknowledged everything need no wait and no GETACK, which would move the
    // offset the shutdown save records (Redis's isReadyToShutdown).
    let offset = replication::offset();
    if replication::repl()
        .replicas
        .lock()
        .iter()
        .all(|r| r.ack >= offset)
    {
        return true;
    }
    let timeout = server.config.read().get_u64("shutdown-timeout");
    let wait = &server.shutdown_wait;
    wait.abort.store(false, Ordering::SeqCst);
    wait.deadline_ms.store(
        crate::util::clock::now_ms() as u64 + timeout * 1000,
        Ordering::SeqCst,
    );
    crate::state::pause::pause(
        crate::state::pause::Purpose::Shutdown,
        crate::state::pause::WRITE,
        None,
    );
    crate::state::redis_log::line(server, false, "Waiting for replicas before shutting down.");
    crate::store::journal::replicate_only(None, &[b"REPLCONF", b"GETACK", b"*"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout);
    let done = loop {
        if wait.abort.load(Ordering::SeqCst) {
            crate::state::pause::unpause(crate::state::pause::Purpose::Shutdown);
            break false;
        }
        let offset = replication::offset();
        let replicas = replication::repl().replicas.lock().clone();
        let lagging: Vec<_> = replicas.iter().filter(|r| r.ack < offset).collect();
        if lagging.is_empty() || std::time::Instant::now() >= deadline {
            for r in &lagging {
                let lag = (crate::util::clock::now_ms() as u64).saturating_sub(r.ack_ms) / 1000;
                crate::state::redis_log::line(
                    server,
                    true,
                    &format!(
                        "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={}.",
                        r.ip,
                        r.port,
                        offset - r.ack,
                        r.state
                    ),
                );
            }
            crate::state::redis_log::line(
                server,
                false,
                &format!(
                    "{} of {} replicas are in sync when shutting down.",
                    replicas.len() - lagging.len(),
                    replicas.len()
                ),
            );
            break true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    wait.deadline_ms.store(0, Ordering::SeqCst);
    done
}

/// Whether a shutdown now would wait for replicas: some are attached and `shutdown-timeout`
/// is above 0.
pub fn shutdown_waits_for_replicas(server: &crate::state::Server) -> bool {
    server.config.read().get_u64("shutdown-timeout") > 0
        && !replication::repl().replicas.lock().is_empty()
}

/// One step of a FAILOVER waiting for a replica in sync (Redis's `updateFailoverStatus`);
/// false once there is nothing more to wait for here (the link takes it on, or it ended).
fn drive_failover(server: &std::sync::Arc<crate::state::Server>) -> bool {
    let f = replication::repl().failover.lock().clone();
    if f.phase != replication::FailoverPhase::WaitForSync {
        return false;
    }
    let now = crate::util::clock::now_ms() as u64;
    let log = |line: &str| crate::state::redis_log::line(server, false, line);
    let go = |host: String, port: u16| {
        replication::repl().failover.lock().phase = replication::FailoverPhase::InProgress;
        replication::follow(server, host, port);
    };
    if f.deadline_ms.is_some_and(|d| d <= now) {
        match (f.force, f.target) {
            (true, Some((host, port))) => {
                log(&format!(
                    "FAILOVER to {host}:{port} time out exceeded, failing over."
                ));
                go(host, port);
            }
            _ => {
                if let Some(line) =
                    replication::abort_failover("Replica never caught up before timeout")
                {
                    log(&line);
                }
            }
        }
        return false;
    }
    let offset = replication::offset();
    let replicas = replication::repl().replicas.lock().clone();
    let synced = replicas.iter().find(|r| {
        r.ack == offset
            && f.target
                .as_ref()
                .is_none_or(|(h, p)| *h == r.ip && *p == r.port)
    });
    let Some(r) = synced else {
        return true;
    };
    let (host, port) = (r.ip.clone(), r.port);
    replication::repl().failover.lock().target = Some((host.clone(), port));
    log(&format!(
        "Failover target {host}:{port} is synced, failing over."
    ));
    go(host, port);
    false
}

/// SYNC: the old protocol, always a full resynchronisation without the `+FULLRESYNC` line.
fn sync(_ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    args.finish()?;
    master_link_up()?;
    replication::hand_off(Psync {
        replid: None,
        offset: -1,
    });
    Ok(Reply::NoReply)
}
