//! CLUSTER, READONLY, READWRITE, ASKING, and the redirections of cluster mode (MOVED, ASK,
//! TRYAGAIN, CROSSSLOT, CLUSTERDOWN): parsing and replies here, the state in
//! `state::cluster`. Without `cluster-enabled yes` every subcommand answers as Redis does
//! ("ERR This instance has cluster support disabled"). The rows are Redis 7.0's, plus 7.2's
//! MYSHARDID (arity, flags, categories, docs).
use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{acl, family, flag::*, CmdResult, CommandSpec};
use crate::commands::Ctx;

const CLUSTER: CommandSpec = family("cluster", 0);
/// READONLY, READWRITE and ASKING: cluster commands in Redis's "connection" ACL category.
const CLUSTER_CONN: CommandSpec = family("cluster", acl::CONNECTION);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    CLUSTER.cmd("cluster", -2, container)
        .doc("3.0.0", "A container for cluster commands").complexity("Depends on subcommand.")
        .subs(SUBCOMMANDS),
    CLUSTER_CONN.cmd("readonly", 1, readonly).flags(LOADING | STALE | FAST)
        .doc("3.0.0", "Enables read queries for a connection to a cluster replica node").complexity("O(1)"),
    CLUSTER_CONN.cmd("readwrite", 1, readwrite).flags(LOADING | STALE | FAST)
        .doc("3.0.0", "Disables read queries for a connection to a cluster replica node").complexity("O(1)"),
    CLUSTER_CONN.cmd("asking", 1, asking).flags(FAST)
        .doc("3.0.0", "Sent by cluster clients after an -ASK redirect").complexity("O(1)"),
];

#[rustfmt::skip]
static SUBCOMMANDS: &[CommandSpec] = &[
    CLUSTER.cmd("cluster|addslots", -3, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Assign new hash slots to receiving node").complexity("O(N) where N is the total number of hash slot arguments"),
    CLUSTER.cmd("cluster|addslotsrange", -4, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("7.0.0", "Assign new hash slots to receiving node").complexity("O(N) where N is the total number of the slots between the start slot and end slot arguments."),
    CLUSTER.cmd("cluster|bumpepoch", 2, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Advance the cluster config epoch").complexity("O(1)"),
    CLUSTER.cmd("cluster|count-failure-reports", 3, subcommand).flags(ADMIN | STALE)
        .doc("3.0.0", "Return the number of failure reports active for a given node").complexity("O(N) where N is the number of failure reports"),
    CLUSTER.cmd("cluster|countkeysinslot", 3, subcommand).flags(STALE)
        .doc("3.0.0", "Return the number of local keys in the specified hash slot").complexity("O(1)"),
    CLUSTER.cmd("cluster|delslots", -3, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Set hash slots as unbound in receiving node").complexity("O(N) where N is the total number of hash slot arguments"),
    CLUSTER.cmd("cluster|delslotsrange", -4, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("7.0.0", "Set hash slots as unbound in receiving node").complexity("O(N) where N is the total number of the slots between the start slot and end slot arguments."),
    CLUSTER.cmd("cluster|failover", -2, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Forces a replica to perform a manual failover of its master.").complexity("O(1)"),
    CLUSTER.cmd("cluster|flushslots", 2, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Delete a node's own slots information").complexity("O(1)"),
    CLUSTER.cmd("cluster|forget", 3, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Remove a node from the nodes table").complexity("O(1)"),
    CLUSTER.cmd("cluster|getkeysinslot", 4, subcommand).flags(STALE)
        .doc("3.0.0", "Return local key names in the specified hash slot").complexity("O(log(N)) where N is the number of requested keys"),
    CLUSTER.cmd("cluster|help", 2, subcommand).flags(LOADING | STALE)
        .doc("5.0.0", "Show helpful text about the different subcommands").complexity("O(1)"),
    CLUSTER.cmd("cluster|info", 2, subcommand).flags(STALE)
        .doc("3.0.0", "Provides info about Redis Cluster node state").complexity("O(1)"),
    CLUSTER.cmd("cluster|keyslot", 3, subcommand).flags(STALE)
        .doc("3.0.0", "Returns the hash slot of the specified key").complexity("O(N) where N is the number of bytes in the key"),
    CLUSTER.cmd("cluster|links", 2, subcommand).flags(STALE)
        .doc("7.0.0", "Returns a list of all TCP links to and from peer nodes in cluster").complexity("O(N) where N is the total number of Cluster nodes"),
    CLUSTER.cmd("cluster|meet", -4, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Force a node cluster to handshake with another node").complexity("O(1)"),
    CLUSTER.cmd("cluster|migration", -4, subcommand).flags(ADMIN | STALE)
        .doc("8.4.0", "Start, monitor, and cancel atomic slot migration tasks").complexity("O(N) where N is the total number of the slots between the start slot and end slot arguments."),
    CLUSTER.cmd("cluster|syncslots", -6, subcommand).flags(ADMIN | STALE | NOSCRIPT | NO_MULTI)
        .doc("8.4.0", "An internal command of atomic slot migration: the target asks the source for the slots").complexity("O(N) where N is the number of keys in the slots."),
    CLUSTER.cmd("cluster|myid", 2, subcommand).flags(STALE)
        .doc("3.0.0", "Return the node id").complexity("O(1)"),
    CLUSTER.cmd("cluster|myshardid", 2, subcommand).flags(STALE)
        .doc("7.2.0", "Returns the shard ID of a node.").complexity("O(1)"),
    CLUSTER.cmd("cluster|nodes", 2, subcommand).flags(STALE)
        .doc("3.0.0", "Get Cluster config for the node").complexity("O(N) where N is the total number of Cluster nodes"),
    CLUSTER.cmd("cluster|replicas", 3, subcommand).flags(ADMIN | STALE)
        .doc("5.0.0", "List replica nodes of the specified master node").complexity("O(1)"),
    CLUSTER.cmd("cluster|replicate", 3, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Reconfigure a node as a replica of the specified master node").complexity("O(1)"),
    CLUSTER.cmd("cluster|reset", -2, subcommand).flags(ADMIN | NOSCRIPT | STALE)
        .doc("3.0.0", "Reset a Redis Cluster node").complexity("O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect."),
    CLUSTER.cmd("cluster|saveconfig", 2, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Forces the node to save cluster state on disk").complexity("O(1)"),
    CLUSTER.cmd("cluster|set-config-epoch", 3, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Set the configuration epoch in a new node").complexity("O(1)"),
    CLUSTER.cmd("cluster|setslot", -4, subcommand).flags(ADMIN | STALE | NO_ASYNC_LOADING)
        .doc("3.0.0", "Bind a hash slot to a specific node").complexity("O(1)"),
    CLUSTER.cmd("cluster|shards", 2, subcommand).flags(STALE)
        .doc("7.0.0", "Get array of cluster slots to node mappings").complexity("O(N) where N is the total number of cluster nodes"),
    CLUSTER.cmd("cluster|slaves", 3, subcommand).flags(ADMIN | STALE)
        .doc("3.0.0", "List replica nodes of the specified master node").complexity("O(1)"),
    CLUSTER.cmd("cluster|slots", 2, subcommand).flags(STALE)
        .doc("3.0.0", "Get array of Cluster slot to node mappings").complexity("O(N) where N is the total number of Cluster nodes"),
];

use crate::commands::text;
use crate::protocol::cluster_bus as wire;
use crate::protocol::Reply;
use crate::state::cluster::{self, nodes_conf, todo, Cluster, Query, Route};
use crate::state::Server;
use bytes::Bytes;
use std::sync::Arc;

const DISABLED: &str = "ERR This instance has cluster support disabled";

fn container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

fn enabled<'a>(ctx: &Ctx<'a>) -> Result<&'a Cluster, CommandError> {
    ctx.server.cluster.get().ok_or(CommandError::msg(DISABLED))
}

fn readonly(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    enabled(ctx)?;
    ctx.client.cluster_readonly = true;
    Ok(Reply::ok())
}

fn readwrite(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    enabled(ctx)?;
    ctx.client.cluster_readonly = false;
    Ok(Reply::ok())
}

fn asking(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    enabled(ctx)?;
    ctx.client.cluster_asking = true;
    Ok(Reply::ok())
}

/// A slot argument (Redis's `getSlotOrReply`).
fn slot_arg(arg: &[u8]) -> Result<u16, CommandError> {
    match crate::util::num::parse_i64(arg) {
        Some(n) if (0..cluster::SLOTS as i64).contains(&n) => Ok(n as u16),
        _ => Err(CommandError::msg("ERR Invalid or out of range slot")),
    }
}

fn int_arg(arg: &[u8]) -> Result<i64, CommandError> {
    crate::util::num::parse_i64(arg).ok_or_else(CommandError::not_integer)
}

fn unknown_node(arg: &[u8]) -> CommandError {
    CommandError::msg(format!("ERR Unknown node {}", text(arg)))
}

/// Every CLUSTER subcommand (Redis's `clusterCommand`).
fn subcommand(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let c = enabled(ctx)?;
    let all = args.all();
    let sub = text(&all[1]).to_ascii_lowercase();
    let server = ctx.server;
    let now = crate::util::clock::now_ms();
    let offset = crate::state::cluster::my_offset();
    let reply = match sub.as_str() {
        "help" => return Ok(help()),
        "myid" => {
            let st = c.lock();
            Reply::bulk(Bytes::copy_from_slice(&st.myself))
        }
        "myshardid" => {
            // The shard is named by its master's id (a master's own, a replica's master's).
            let st = c.lock();
            let shard = st.my_master().unwrap_or(st.myself);
            Reply::bulk(Bytes::copy_from_slice(&shard))
        }
        "nodes" => {
            let st = c.lock();
            Reply::Verbatim(Bytes::from(nodes_conf::describe(&st, 0)))
        }
        "slots" => c.with(|st| {
            st.my_repl_offset = offset;
            nodes_conf::slots_reply(st)
        }),
        "shards" => c.with(|st| {
            st.my_repl_offset = offset;
            nodes_conf::shards_reply(st)
        }),
        "info" => {
            let mut text = info_text(&c.lock());
            migration_info(&c.migrations, &mut text);
            Reply::Verbatim(Bytes::from(text))
        }
        "migration" => return migration(server, c, all),
        "syncslots" => return syncslots(c, all),
        "keyslot" => Reply::Int(cluster::key_slot(&all[2]) as i64),
        "countkeysinslot" => {
            let slot = int_arg(&all[2])?;
            if !(0..cluster::SLOTS as i64).contains(&slot) {
                return Err(CommandError::msg("ERR Invalid slot"));
            }
            Reply::Int(count_names_in_slot(&server.store, slot as u16) as i64)
        }
        "getkeysinslot" => {
            let slot = int_arg(&all[2])?;
            let max = int_arg(&all[3])?;
            if !(0..cluster::SLOTS as i64).contains(&slot) || max < 0 {
                return Err(CommandError::msg("ERR Invalid slot or number of keys"));
            }
            let keys = names_in_slot(&server.store, slot as u16, max as usize);
            Reply::Array(keys.into_iter().map(Reply::Bulk).collect())
        }
        "meet" => {
            if all.len() != 4 && all.len() != 5 {
                return Err(CommandError::WrongArity);
            }
            let port = crate::util::num::parse_i64(&all[3]).ok_or_else(|| {
                CommandError::msg(format!(
                    "ERR Invalid TCP base port specified: {}",
                    text(&all[3])
                ))
            })?;
            let cport = match all.get(4) {
                Some(a) => crate::util::num::parse_i64(a).ok_or_else(|| {
                    CommandError::msg(format!("ERR Invalid TCP bus port specified: {}", text(a)))
                })?,
                None => port + 10000,
            };
            let ip = text(&all[2]).to_string();
            let normalized = ip.parse::<std::net::IpAddr>().ok().map(|a| a.to_string());
            let valid_ports = (1..=65535).contains(&port) && (1..=65535).contains(&cport);
            match normalized {
                Some(ip) if valid_ports => {
                    c.with(|st| st.start_handshake(ip, port as u16, cport as u16, now));
                    Reply::ok()
                }
                _ => {
                    return Err(CommandError::msg(format!(
                        "ERR Invalid node address specified: {}:{}",
                        text(&all[2]),
                        text(&all[3])
                    )))
                }
            }
        }
        "addslots" | "delslots" => {
            let del = sub == "delslots";
            let slots = all[2..]
                .iter()
                .map(|a| slot_arg(a))
                .collect::<Result<Vec<u16>, _>>()?;
            c.with(|st| {
                update_slots(st, slots.iter().map(|s| (*s, *s)), del)?;
                st.todo(todo::UPDATE_STATE | todo::SAVE_CONFIG);
                Ok::<_, CommandError>(Reply::ok())
            })?
        }
        "addslotsrange" | "delslotsrange" => {
            if all.len() % 2 == 1 {
                return Err(CommandError::WrongArity);
            }
            let del = sub == "delslotsrange";
            let mut ranges = Vec::new();
            for pair in all[2..].chunks(2) {
                let (a, b) = (slot_arg(&pair[0])?, slot_arg(&pair[1])?);
                if a > b {
                    return Err(CommandError::msg(format!(
                        "ERR start slot number {a} is greater than end slot number {b}"
                    )));
                }
                ranges.push((a, b));
            }
            c.with(|st| {
                update_slots(st, ranges.into_iter(), del)?;
                st.todo(todo::UPDATE_STATE | todo::SAVE_CONFIG);
                Ok::<_, CommandError>(Reply::ok())
            })?
        }
        "flushslots" => {
            if server.store.dbsize(0) != 0 {
                return Err(CommandError::msg(
                    "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.",
                ));
            }
            c.with(|st| {
                let me = st.myself;
                st.del_node_slots(me);
                st.todo(todo::UPDATE_STATE | todo::SAVE_CONFIG);
            });
            Reply::ok()
        }
        "setslot" => setslot(server, c, all, now)?,
        "bumpepoch" => c.with(|st| {
            let bumped = st.bump_epoch_without_consensus();
            let epoch = st.me().map(|m| m.config_epoch).unwrap_or(0);
            Reply::Status(format!(
                "{} {epoch}",
                if bumped { "BUMPED" } else { "STILL" }
            ))
        }),
        "saveconfig" => c.with(|st| match nodes_conf::save(st, true) {
            Ok(()) => Ok(Reply::ok()),
            Err(e) => Err(CommandError::msg(format!(
                "ERR error saving the cluster node config: {e}"
            ))),
        })?,
        "forget" => c.with(|st| {
            let Some(name) = st.lookup_name(&all[2]) else {
                return Err(unknown_node(&all[2]));
            };
            if name == st.myself {
                return Err(CommandError::msg(
                    "ERR I tried hard but I can't forget myself...",
                ));
            }
            if st.my_master() == Some(name) && !st.myself_is_master() {
                return Err(CommandError::msg("ERR Can't forget my master!"));
            }
            st.blacklist_add(name, now);
            st.del_node(name);
            st.todo(todo::UPDATE_STATE | todo::SAVE_CONFIG);
            Ok(Reply::ok())
        })?,
        "count-failure-reports" => c.with(|st| {
            let Some(name) = st.lookup_name(&all[2]) else {
                return Err(unknown_node(&all[2]));
            };
            Ok(Reply::Int(st.failure_reports(name, now) as i64))
        })?,
        "replicas" | "slaves" => {
            let st = c.lock();
            let Some(n) = st.lookup(&all[2]) else {
                return Err(unknown_node(&all[2]));
            };
            if n.is_replica() {
                return Err(CommandError::msg("ERR The specified node is not a master"));
            }
            let lines = n
                .replicas
                .iter()
                .filter_map(|r| st.nodes.get(r))
                .map(|r| Reply::bulk(Bytes::from(nodes_conf::describe_node(&st, r))))
                .collect();
            Reply::Array(lines)
        }
        "replicate" => {
            c.with(|st| {
                let Some(n) = st.lookup(&all[2]) else {
                    return Err(unknown_node(&all[2]));
                };
                let name = n.name;
                if name == st.myself {
                    return Err(CommandError::msg("ERR Can't replicate myself"));
                }
                if n.is_replica() {
                    return Err(CommandError::msg(
                        "ERR I can only replicate a master, not a replica.",
                    ));
                }
                let me_master = st.myself_is_master();
                let my_slots = st.me().map(|m| m.numslots).unwrap_or(0);
                if me_master && (my_slots != 0 || server.store.dbsize(0) != 0) {
                    return Err(CommandError::msg(
                        "ERR To set a master the node must be empty and without assigned slots.",
                    ));
                }
                st.set_master(name);
                st.todo(todo::UPDATE_STATE | todo::SAVE_CONFIG);
                Ok(())
            })?;
            Reply::ok()
        }
        "set-config-epoch" => {
            let epoch = int_arg(&all[2])?;
            c.with(|st| {
                if epoch < 0 {
                    return Err(CommandError::msg(format!(
                        "ERR Invalid config epoch specified: {epoch}"
                    )));
                }
                if st.nodes.len() > 1 {
                    return Err(CommandError::msg("ERR The user can assign a config epoch only when the node does not know any other node."));
                }
                if st.me().is_some_and(|m| m.config_epoch != 0) {
                    return Err(CommandError::msg("ERR Node config epoch is already non-zero"));
                }
                if let Some(m) = st.me_mut() {
                    m.config_epoch = epoch as u64;
                }
                if st.current_epoch < epoch as u64 {
                    st.current_epoch = epoch as u64;
                }
                st.log(
                    crate::state::redis_log::Level::Warning,
                    format!("configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH"),
                );
                st.todo(todo::UPDATE_STATE | todo::SAVE_CONFIG);
                Ok(Reply::ok())
            })?
        }
        "reset" => {
            let hard = match all.get(2) {
                None => false,
                Some(a) if crate::commands::is(a, "hard") => true,
                Some(a) if crate::commands::is(a, "soft") => false,
                Some(_) => return Err(CommandError::syntax()),
            };
            if c.lock().myself_is_master() && server.store.dbsize(ctx.client.db) != 0 {
                return Err(CommandError::msg(
                    "ERR CLUSTER RESET can't be called with master nodes containing keys",
                ));
            }
            let was_replica = !c.lock().myself_is_master();
            if was_replica {
                crate::state::replication::unfollow();
                // A replica that leaves its master empties its data set (Redis's
                // clusterReset: emptyData).
                server.store.flush(None);
            }
            c.with(|st| st.reset(hard, now));
            Reply::ok()
        }
        "links" => links_reply(&c.lock(), now),
        "failover" => {
            let (force, takeover) = match all.get(2) {
                None => (false, false),
                Some(a) if crate::commands::is(a, "force") => (true, false),
                Some(a) if crate::commands::is(a, "takeover") => (true, true),
                Some(_) => return Err(CommandError::syntax()),
            };
            if all.len() > 3 {
                return Err(CommandError::syntax());
            }
            c.with(|st| {
                st.my_repl_offset = offset;
                st.start_manual_failover(force, takeover, now)
            })
            .map_err(CommandError::msg)?;
            Reply::ok()
        }
        _ => {
            return Err(CommandError::msg(format!(
                "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
                text(&all[1])
            )))
        }
    };
    apply_effects(server, c);
    Ok(reply)
}

/// ADDSLOTS/DELSLOTS and their RANGE forms: every slot checked before any changes
/// (Redis's `checkSlotAssignmentsOrReply` and `clusterUpdateSlots`).
fn update_slots(
    st: &mut cluster::ClusterState,
    ranges: impl Iterator<Item = (u16, u16)>,
    del: bool,
) -> Result<(), CommandError> {
    let mut seen = vec![false; cluster::SLOTS];
    let mut todo_slots = Vec::new();
    for (a, b) in ranges {
        for slot in a..=b {
            let assigned = st.slots[slot as usize].is_some();
            if del && !assigned {
                return Err(CommandError::msg(format!(
                    "ERR Slot {slot} is already unassigned"
                )));
            } else if !del && assigned {
                return Err(CommandError::msg(format!(
                    "ERR Slot {slot} is already busy"
                )));
            }
            if std::mem::replace(&mut seen[slot as usize], true) {
                return Err(CommandError::msg(format!(
                    "ERR Slot {slot} specified multiple times"
                )));
            }
            todo_slots.push(slot);
        }
    }
    let me = st.myself;
    for slot in todo_slots {
        st.set_importing(slot, None);
        if del {
            st.del_slot(slot);
        } else {
            st.add_slot(me, slot);
        }
    }
    Ok(())
}

/// The master SETSLOT names: `unknown` prefixes the error for a name not known (Redis's
/// words differ by action).
fn master_named(
    st: &cluster::ClusterState,
    arg: &[u8],
    unknown: &str,
) -> Result<wire::NodeName, CommandError> {
    let Some(n) = st.lookup(arg) else {
        return Err(CommandError::msg(format!("ERR {unknown} {}", text(arg))));
    };
    if n.is_replica() {
        return Err(CommandError::msg("ERR Target node is not a master"));
    }
    Ok(n.name)
}

/// CLUSTER SETSLOT slot IMPORTING|MIGRATING node | STABLE | NODE node.
fn setslot(server: &Arc<Server>, c: &Cluster, all: &[Bytes], now: i64) -> CmdResult {
    if !c.lock().myself_is_master() {
        return Err(CommandError::msg(
            "ERR Please use SETSLOT only with masters.",
        ));
    }
    let slot = slot_arg(&all[2])?;
    let action = text(&all[3]).to_ascii_lowercase();
    let keys_here = || names_in_slot(&server.store, slot, 1).len();
    c.with(|st| {
        let me = st.myself;
        match (action.as_str(), all.len()) {
            ("migrating", 5) => {
                if st.slots[slot as usize] != Some(me) {
                    return Err(CommandError::msg(format!(
                        "ERR I'm not the owner of hash slot {slot}"
                    )));
                }
                let name = master_named(st, &all[4], "I don't know about node")?;
                st.set_migrating(slot, Some(name));
            }
            ("importing", 5) => {
                if st.slots[slot as usize] == Some(me) {
                    return Err(CommandError::msg(format!(
                        "ERR I'm already the owner of hash slot {slot}"
                    )));
                }
                let name = master_named(st, &all[4], "I don't know about node")?;
                st.set_importing(slot, Some(name));
            }
            ("stable", 4) => {
                st.set_importing(slot, None);
                st.set_migrating(slot, None);
            }
            ("node", 5) => {
                let name = master_named(st, &all[4], "Unknown node")?;
                let holds_keys = keys_here() != 0;
                if st.slots[slot as usize] == Some(me) && name != me && holds_keys {
                    return Err(CommandError::msg(format!(
                        "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                    )));
                }
                if !holds_keys && st.migrating_to.contains_key(&slot) {
                    st.set_migrating(slot, None);
                }
                let was_mine = st.slots[slot as usize] == Some(me);
                st.del_slot(slot);
                st.add_slot(name, slot);
                let left_empty = st.me().is_some_and(|m| m.numslots == 0);
                if was_mine && name != me && left_empty {
                    st.log(
                        crate::state::redis_log::Level::Warning,
                        format!(
                            "Configuration change detected. Reconfiguring myself as a replica of {}",
                            wire::name_str(&name)
                        ),
                    );
                    st.set_master(name);
                    st.todo(todo::SAVE_CONFIG | todo::UPDATE_STATE | todo::FSYNC_CONFIG);
                }
                if name == me && st.importing_from.contains_key(&slot) {
                    if st.bump_epoch_without_consensus() {
                        st.log(
                            crate::state::redis_log::Level::Warning,
                            format!("configEpoch updated after importing slot {slot}"),
                        );
                    }
                    st.set_importing(slot, None);
                    st.broadcast_pong(now);
                }
            }
            _ => {
                return Err(CommandError::msg(
                    "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
                ))
            }
        }
        st.todo(todo::SAVE_CONFIG | todo::UPDATE_STATE);
        Ok(())
    })?;
    Ok(Reply::ok())
}

fn info_text(st: &cluster::ClusterState) -> String {
    let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
    // One lookup a run of slots with one owner, not one a slot.
    for (a, b, owner) in st.slot_runs() {
        let Some(n) = st.nodes.get(&owner) else {
            continue;
        };
        let len = (b - a) as usize + 1;
        assigned += len;
        if n.failed() {
            fail += len;
        } else if n.timed_out() {
            pfail += len;
        } else {
            ok += len;
        }
    }
    let my_epoch = match st.me() {
        Some(m) if m.is_replica() => m
            .slaveof
            .and_then(|s| st.nodes.get(&s))
            .map(|s| s.config_epoch)
            .unwrap_or(m.config_epoch),
        Some(m) => m.config_epoch,
        None => 0,
    };
    let mut s = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n",
        if st.ok { "ok" } else { "fail" },
        st.nodes.len(),
        st.size,
        st.current_epoch,
    );
    let mut total = 0;
    for (t, n) in st.stats_sent.iter().enumerate() {
        if *n > 0 {
            total += n;
            s.push_str(&format!(
                "cluster_stats_messages_{}_sent:{n}\r\n",
                type_name(t)
            ));
        }
    }
    s.push_str(&format!("cluster_stats_messages_sent:{total}\r\n"));
    let mut total = 0;
    for (t, n) in st.stats_received.iter().enumerate() {
        if *n > 0 {
            total += n;
            s.push_str(&format!(
                "cluster_stats_messages_{}_received:{n}\r\n",
                type_name(t)
            ));
        }
    }
    s.push_str(&format!("cluster_stats_messages_received:{total}\r\n"));
    s.push_str(&format!(
        "total_cluster_links_buffer_limit_exceeded:{}\r\n",
        st.links_buffer_limit_exceeded
    ));
    s
}

/// CLUSTER INFO's atomic slot migration fields (Redis 8.4).
fn migration_info(m: &cluster::migration::Migrations, s: &mut String) {
    use std::sync::atomic::Ordering::Relaxed;
    s.push_str(&format!(
        "cluster_slot_migration_active_tasks:{}\r\n\
         cluster_slot_migration_active_trim_running:{}\r\n\
         cluster_slot_migration_active_trim_current_job_keys:{}\r\n\
         cluster_slot_migration_active_trim_current_job_trimmed:{}\r\n\
         cluster_slot_migration_stats_active_trim_started:{}\r\n\
         cluster_slot_migration_stats_active_trim_completed:{}\r\n\
         cluster_slot_migration_stats_active_trim_cancelled:{}\r\n",
        m.active_count(),
        m.trims_running.load(Relaxed),
        m.trim_job_keys.load(Relaxed),
        m.trim_job_trimmed.load(Relaxed),
        m.trims_started.load(Relaxed),
        m.trims_completed.load(Relaxed),
        m.trims_cancelled.load(Relaxed),
    ));
}

/// CLUSTER MIGRATION IMPORT | STATUS | CANCEL (Redis 8.4's atomic slot migration).
fn migration(server: &Arc<Server>, c: &Cluster, all: &[Bytes]) -> CmdResult {
    use cluster::migration::{self as asm, st, Task};
    let sub = text(&all[2]).to_ascii_lowercase();
    match sub.as_str() {
        "import" => {
            let args: Vec<&[u8]> = all[3..].iter().map(|a| &a[..]).collect();
            let ranges =
                asm::parse_ranges(&args).map_err(|e| CommandError::msg(format!("ERR {e}")))?;
            let (source, dest) = {
                let st = c.lock();
                if !st.myself_is_master() {
                    return Err(CommandError::msg(
                        "ERR This node is a replica, slots can only be imported to a master",
                    ));
                }
                let mut owner = None;
                for slot in asm::slots_of(&ranges) {
                    let Some(o) = st.slots[slot as usize] else {
                        return Err(CommandError::msg(format!("ERR Slot {slot} has no owner")));
                    };
                    if o == st.myself {
                        return Err(CommandError::msg(
                            "ERR this node is already the owner of the slot range",
                        ));
                    }
                    if owner.is_some_and(|x| x != o) {
                        return Err(CommandError::msg(
                            "ERR Slots are not served by the same node",
                        ));
                    }
                    if st.migrating_to.contains_key(&slot) || st.importing_from.contains_key(&slot)
                    {
                        return Err(CommandError::msg(format!(
                            "ERR Slot {slot} is being migrated with CLUSTER SETSLOT"
                        )));
                    }
                    owner = Some(o);
                }
                let owner = owner.ok_or(CommandError::WrongArity)?;
                (
                    wire::name_str(&owner).to_string(),
                    wire::name_str(&st.myself).to_string(),
                )
            };
            let Some(start) = c.migrations.starter() else {
                return Err(CommandError::msg(
                    "ERR atomic slot migration is not running on this node",
                ));
            };
            let id = asm::new_id();
            let now = crate::util::clock::now_ms();
            c.migrations
                .add(Task {
                    id: id.clone(),
                    ranges,
                    source,
                    dest,
                    importing: true,
                    state: st::CONNECTING,
                    last_error: String::new(),
                    retries: 0,
                    create_time: now,
                    start_time: -1,
                    done_time: -1,
                    write_pause_ms: 0,
                    cancel: Arc::default(),
                })
                .map_err(|e| CommandError::msg(format!("ERR {e}")))?;
            start(server, id.clone());
            Ok(Reply::bulk(Bytes::from(id)))
        }
        "status" => {
            let tasks = match (all.len(), all.get(3).map(|a| text(a).to_ascii_lowercase())) {
                (4, Some(a)) if a == "all" => c.migrations.all(),
                (5, Some(a)) if a == "id" => c.migrations.get(&text(&all[4])).into_iter().collect(),
                (_, Some(a)) if a == "all" || a == "id" => return Err(CommandError::WrongArity),
                _ => return Err(CommandError::msg("ERR unknown argument")),
            };
            Ok(Reply::Array(tasks.iter().map(task_status).collect()))
        }
        "cancel" => {
            let id = match (all.len(), text(&all[3]).to_ascii_lowercase().as_str()) {
                (5, "id") => Some(text(&all[4]).to_string()),
                (4, "all") => None,
                (_, "id" | "all") => return Err(CommandError::WrongArity),
                _ => return Err(CommandError::msg("ERR unknown argument")),
            };
            Ok(Reply::Int(c.migrations.cancel(id.as_deref()) as i64))
        }
        _ => Err(CommandError::msg("ERR unknown argument")),
    }
}

/// One task as CLUSTER MIGRATION STATUS shows it (a map in RESP3, pairs in RESP2).
fn task_status(t: &cluster::migration::Task) -> Reply {
    let b = |s: &str| Reply::bulk(Bytes::copy_from_slice(s.as_bytes()));
    Reply::Map(vec![
        (b("id"), b(&t.id)),
        (b("slots"), b(&t.ranges_text())),
        (b("source"), b(&t.source)),
        (b("dest"), b(&t.dest)),
        (
            b("operation"),
            b(if t.importing { "import" } else { "migrate" }),
        ),
        (b("state"), b(t.state)),
        (b("last_error"), b(&t.last_error)),
        (b("retries"), Reply::Int(t.retries as i64)),
        (b("create_time"), Reply::Int(t.create_time)),
        (b("start_time"), Reply::Int(t.start_time)),
        (b("end_time"), Reply::Int(t.done_time)),
        (b("write_pause_ms"), Reply::Int(t.write_pause_ms)),
    ])
}

/// CLUSTER SYNCSLOTS <task-id> <target-id> <start> <end> [...]: sent by a migration's target
/// to this node, the slots' owner; the connection then carries the slots' snapshot and
/// their later writes to the target (`server::slot_migration`).
fn syncslots(c: &Cluster, all: &[Bytes]) -> CmdResult {
    use crate::state::replication::SlotSync;
    use cluster::migration::{self as asm, st, Task};
    if all.len() < 6 {
        return Err(CommandError::WrongArity);
    }
    let id = text(&all[2]).to_string();
    let args: Vec<&[u8]> = all[4..].iter().map(|a| &a[..]).collect();
    let ranges = asm::parse_ranges(&args).map_err(|e| CommandError::msg(format!("ERR {e}")))?;
    let (me, dest) = {
        let mut st = c.lock();
        let Some(dest) = st.lookup_name(&all[3]) else {
            return Err(CommandError::msg(format!(
                "ERR Unknown node {}",
                text(&all[3])
            )));
        };
        if !st.myself_is_master() {
            return Err(CommandError::msg("ERR This node is not a master"));
        }
        for slot in asm::slots_of(&ranges) {
            if st.slots[slot as usize] != Some(st.myself) {
                return Err(CommandError::msg(format!(
                    "ERR I'm not the owner of hash slot {slot}"
                )));
            }
            if st.migrating_to.contains_key(&slot) {
                return Err(CommandError::msg(format!(
                    "ERR Slot {slot} is being migrated with CLUSTER SETSLOT"
                )));
            }
        }
        st.exporting.extend(asm::slots_of(&ranges));
        (
            wire::name_str(&st.myself).to_string(),
            wire::name_str(&dest).to_string(),
        )
    };
    let now = crate::util::clock::now_ms();
    let added = c.migrations.add(Task {
        id: id.clone(),
        ranges: ranges.clone(),
        source: me,
        dest: dest.clone(),
        importing: false,
        state: st::SEND_BULK_AND_STREAM,
        last_error: String::new(),
        retries: 0,
        create_time: now,
        start_time: now,
        done_time: -1,
        write_pause_ms: 0,
        cancel: Arc::default(),
    });
    if let Err(e) = added {
        let mut st = c.lock();
        for slot in asm::slots_of(&ranges) {
            st.exporting.remove(&slot);
        }
        return Err(CommandError::msg(format!("ERR {e}")));
    }
    crate::state::replication::hand_off_slots(SlotSync { id, ranges, dest });
    Ok(Reply::NoReply)
}

/// Redis's `clusterGetMessageTypeString`.
fn type_name(t: usize) -> &'static str {
    match t {
        0 => "ping",
        1 => "pong",
        2 => "meet",
        3 => "fail",
        4 => "publish",
        5 => "auth-req",
        6 => "auth-ack",
        7 => "update",
        8 => "mfstart",
        9 => "module",
        10 => "publishshard",
        _ => "unknown",
    }
}

/// CLUSTER LINKS (Redis 7.0's `addReplyClusterLinkDescription`).
fn links_reply(st: &cluster::ClusterState, now: i64) -> Reply {
    let mut out = Vec::new();
    let mut links: Vec<&cluster::Link> = st.links.values().filter(|l| l.node.is_some()).collect();
    links.sort_by_key(|l| l.id);
    for l in links {
        let Some(name) = l.node else { continue };
        let pending = l.pending.load(std::sync::atomic::Ordering::Relaxed) as i64;
        out.push(Reply::Map(vec![
            (
                Reply::bulk_str("direction"),
                Reply::bulk_str(if l.inbound { "from" } else { "to" }),
            ),
            (
                Reply::bulk_str("node"),
                Reply::bulk(Bytes::copy_from_slice(&name)),
            ),
            (Reply::bulk_str("create-time"), Reply::Int(l.ctime)),
            (
                Reply::bulk_str("events"),
                Reply::bulk_str(if l.inbound { "r" } else { "rw" }),
            ),
            (
                Reply::bulk_str("send-buffer-allocated"),
                Reply::Int(pending),
            ),
            (Reply::bulk_str("send-buffer-used"), Reply::Int(pending)),
        ]));
    }
    let _ = now;
    Reply::Array(out)
}

fn help() -> Reply {
    crate::commands::help_reply(
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Assign slots to current node.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Assign slots which are between <start-slot> and <end-slot> to current node.",
            "BUMPEPOCH",
            "    Advance the cluster config epoch.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Return number of failure reports for <node-id>.",
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Delete slots information from current node.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Promote current replica node to being a master.",
            "FORGET <node-id>",
            "    Remove a node from the cluster.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "FLUSHSLOTS",
            "    Delete current node own slots information.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MEET <ip> <port> [<bus-port>]",
            "    Connect nodes into a working cluster.",
            "MIGRATION IMPORT <start-slot> <end-slot> [<start-slot> <end-slot> ...]",
            "    Import the slot ranges from their owner (atomic slot migration).",
            "MIGRATION STATUS [ID <task-id> | ALL]",
            "    Show the atomic slot migration tasks.",
            "MIGRATION CANCEL <ID <task-id> | ALL>",
            "    Cancel atomic slot migration tasks.",
            "MYID",
            "    Return the node id.",
            "MYSHARDID",
            "    Return the node's shard id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICATE <node-id>",
            "    Configure current node as replica to <node-id>.",
            "RESET [HARD|SOFT]",
            "    Reset current node (default: soft).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Set config epoch of current node.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Set slot state.",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SAVECONFIG",
            "    Force saving cluster configuration on disk.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "LINKS",
            "    Return information about all network links between this node and its peers.",
            "    Output format is an array where each array element is a map containing attributes of a link",
        ],
    )
}

/// What a change of the cluster state asks of the rest of the server, done once its lock is
/// released: the log lines, messages for this node's subscribers, replication to start or
/// stop, keys of lost slots to delete.
pub fn apply_effects(server: &Arc<Server>, c: &Cluster) {
    let (lines, fx) = {
        let mut st = c.lock();
        (std::mem::take(&mut st.log), std::mem::take(&mut st.fx))
    };
    for (level, line) in lines {
        use crate::state::redis_log::Level;
        match level {
            Level::Verbose => tracing::debug!("{line}"),
            // Both to the log and to Redis's log format, as Redis's cluster lines.
            _ => crate::state::redis_log::line(server, level == Level::Warning, &line),
        }
    }
    for (sharded, channel, message) in fx.publish {
        if sharded {
            server.pubsub.spublish(&channel, &message);
        } else {
            server.pubsub.publish(&channel, &message);
        }
    }
    for slot in fx.channel_slots {
        server.pubsub.shard_slot_lost(slot, cluster::key_slot);
    }
    for slot in fx.delete_slots {
        let n = delete_keys_in_slot(server, slot);
        tracing::info!("Deleted {n} keys from slot {slot} this node no longer serves");
    }
    if let Some((ip, port)) = fx.replicate_to {
        // Nothing happens when it already follows that master.
        crate::state::replication::follow(server, ip, port);
    }
    if fx.promote {
        crate::state::replication::unfollow();
        if let Err(e) = server.apply_oom_score_adj() {
            tracing::warn!("{e}");
        }
    }
}

/// An atomic slot migration's trim: deletes the keys and collections of database 0 in
/// `slots` (given away, or of an import that did not finish), a batch of keys at a time,
/// each batch journaled as one `DEL` and each collection as `DOC.JOURNALDROP`, so this
/// node's journal and replicas drop them too. How many names went.
pub fn trim_slots(server: &Arc<Server>, slots: impl Iterator<Item = u16>) -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    let slots: Vec<u16> = slots.collect();
    let migrations = server.cluster.get().map(|c| &c.migrations);
    if let Some(m) = migrations {
        m.trims_started.fetch_add(1, Relaxed);
        m.trims_running.fetch_add(1, Relaxed);
        let total: usize = slots
            .iter()
            .map(|&s| count_names_in_slot(&server.store, s))
            .sum();
        m.trim_job_keys.store(total as u64, Relaxed);
        m.trim_job_trimmed.store(0, Relaxed);
    }
    let mut n = 0;
    for slot in slots {
        loop {
            let keys = crate::store::slot_keys(&server.store, slot, 256);
            if keys.is_empty() {
                break;
            }
            let mut l = server.store.lock_keys(&keys);
            let mut gone: Vec<&[u8]> = vec![b"DEL"];
            for (i, k) in keys.iter().enumerate() {
                let h = l.hash(i);
                if l.ks(i, 0).remove(h, k).is_some() {
                    server.notify(0, crate::state::pubsub::class::GENERIC, "del", k);
                    gone.push(k);
                }
            }
            if gone.len() > 1 {
                crate::store::journal::change_record(0, &gone);
            }
            let removed = gone.len() - 1;
            n += removed;
            drop(l);
            if let Some(m) = migrations {
                m.trim_job_trimmed.fetch_add(removed as u64, Relaxed);
            }
            if removed == 0 {
                // Listed but not removable (already gone meanwhile): nothing more to do.
                break;
            }
        }
        for name in collections_in_slot(&server.store, slot) {
            let removed = server.store.remove_moved(0, &name, None, || {
                crate::store::journal::change_record(0, &[b"DOC.JOURNALDROP", name.as_bytes()]);
            });
            n += removed as usize;
        }
    }
    if let Some(m) = migrations {
        m.trims_running.fetch_sub(1, Relaxed);
        m.trims_completed.fetch_add(1, Relaxed);
        m.trim_job_keys.store(0, Relaxed);
        m.trim_job_trimmed.store(0, Relaxed);
    }
    n
}

/// At start, on a master: the keys and collections of slots another node owns and this one
/// neither imports nor migrates (CLUSTER SETSLOT) are deleted, journaled — what an atomic
/// slot migration this node was importing when it stopped left, as Redis 8.4 trims the
/// slots a node does not own. The slots and how many names went.
pub fn trim_unowned(server: &Arc<Server>) -> (Vec<u16>, usize) {
    let Some(c) = server.cluster.get() else {
        return (Vec::new(), 0);
    };
    let slots: Vec<u16> = {
        let st = c.lock();
        if !st.myself_is_master() {
            return (Vec::new(), 0);
        }
        (0..cluster::SLOTS as u16)
            .filter(|&s| {
                st.slots[s as usize].is_some_and(|o| o != st.myself)
                    && !st.importing_from.contains_key(&s)
                    && !st.migrating_to.contains_key(&s)
            })
            .collect()
    };
    let held: Vec<u16> = slots
        .into_iter()
        .filter(|&s| count_names_in_slot(&server.store, s) > 0)
        .collect();
    if held.is_empty() {
        return (held, 0);
    }
    let n = trim_slots(server, held.iter().copied());
    (held, n)
}

/// Deletes the keys and collections of database 0 in `slot` (a slot this node lost while
/// holding some); how many.
pub fn delete_keys_in_slot(server: &Arc<Server>, slot: u16) -> usize {
    let keys = crate::store::slot_keys(&server.store, slot, usize::MAX);
    let mut n = keys.len();
    for k in keys {
        let mut l = server.store.lock_keys(std::slice::from_ref(&k));
        let h = l.hash(0);
        if l.ks(0, 0).remove(h, &k).is_some() {
            server.notify(0, crate::state::pubsub::class::GENERIC, "del", &k);
        }
    }
    // Removed as a moved collection is (no change stream entry) and, as the keys, not
    // journaled: a replica drops them when it resyncs.
    for name in collections_in_slot(&server.store, slot) {
        if server.store.remove_moved(0, &name, None, || {}) {
            n += 1;
        }
    }
    n
}

/// The collections of database 0 whose name hashes to `slot`. In cluster mode a
/// collection's name is a key (every DOC.* command is routed by it), so a slot's listing and
/// count include its collections and resharding moves them: MIGRATE sends a collection
/// named in its keys. O(collections) a call: the names are filtered, not indexed by slot.
fn collections_in_slot(store: &crate::store::Store, slot: u16) -> Vec<String> {
    store.collection_names_where(0, |n| cluster::key_slot(n.as_bytes()) == slot)
}

/// CLUSTER GETKEYSINSLOT: up to `max` names of `slot`, its keys first, then its
/// collections that are not also a key. A name that is both is listed once, as MIGRATE of
/// that name moves both.
pub fn names_in_slot(store: &crate::store::Store, slot: u16, max: usize) -> Vec<Bytes> {
    let mut out = crate::store::slot_keys(store, slot, max);
    if out.len() < max {
        // Every key of the slot is listed: a collection whose name is a key is among them.
        for name in collections_in_slot(store, slot) {
            if out.len() >= max {
                break;
            }
            if !store.exists(0, name.as_bytes()) {
                out.push(Bytes::from(name));
            }
        }
    }
    out
}

/// CLUSTER COUNTKEYSINSLOT and the bus's check for a slot still holding data: the names
/// [`names_in_slot`] lists.
pub fn count_names_in_slot(store: &crate::store::Store, slot: u16) -> usize {
    let collections = collections_in_slot(store, slot)
        .iter()
        .filter(|n| !store.exists(0, n.as_bytes()))
        .count();
    crate::store::count_keys_in_slot(store, slot) + collections
}

/// The cluster check of Redis's `processCommand`: None when the command runs here, else the
/// redirection or refusal to answer. Commands without keys run anywhere, except EXEC, whose
/// queued commands are checked together.
pub fn redirect(ctx: &mut Ctx<'_>, spec: &'static CommandSpec, args: &[Bytes]) -> Option<Reply> {
    let c = ctx.server.cluster.get()?;
    let asking = std::mem::take(&mut ctx.client.cluster_asking);
    // The common case first (GET, SET, INCR…: one key at a fixed position) on a slot served
    // plainly here: one slot computation and two loads, before any of what follows.
    let first = spec.first_key as usize;
    if first > 0
        && spec.last_key == spec.first_key
        && !spec.has(MOVABLEKEYS)
        && first < args.len()
        && c.served_plainly(cluster::key_slot(&args[first]))
    {
        return None;
    }
    let mut keys: smallvec::SmallVec<[&[u8]; 4]> = smallvec::SmallVec::new();
    // A script counts with its shebang's flags (Redis's getCommandFlags).
    let mut write = crate::commands::scripting::command_flags(spec, args) & WRITE != 0;
    let mut pubsubshard = false;
    let is_exec = spec.name == "exec";
    // Whether the keys name collections (DOC.* commands) or keys (the others): a slot half
    // moved sends a name it no longer holds to the target (ASK), checked in its namespace.
    let mut names_collections = !is_exec && spec.has(COLLECTION);
    let mut names_keys = !is_exec && !names_collections;
    if is_exec {
        let m = ctx.client.multi.as_ref()?;
        for (flags, queued) in &m.queued {
            write |= flags & WRITE != 0;
            if let Ok(qspec) = crate::commands::resolve(queued) {
                names_collections |= qspec.has(COLLECTION);
                names_keys |= !qspec.has(COLLECTION);
                let (pos, _) = qspec.routing_positions(queued);
                keys.extend(pos.into_iter().map(|i| queued[i].as_ref()));
            }
        }
    } else if spec.key_specs.is_empty() && !spec.has(MOVABLEKEYS) {
        // The common case without allocating: keys at first..=last by step (Redis's
        // legacy key positions), which the table derives the key spec from.
        let argc = args.len() as i64;
        let last = if spec.last_key < 0 {
            argc + spec.last_key as i64
        } else {
            (spec.last_key as i64).min(argc - 1)
        };
        let mut i = spec.first_key as i64;
        while i > 0 && i <= last {
            keys.push(args[i as usize].as_ref());
            i += spec.step.max(1) as i64;
        }
    } else {
        let (pos, channels) = spec.routing_positions(args);
        pubsubshard = channels;
        keys.extend(pos.into_iter().map(|i| args[i].as_ref()));
    }
    if keys.is_empty() && !is_exec {
        // ASKING lasts for the next command, whatever it is.
        if spec.name == "asking" {
            ctx.client.cluster_asking = asking;
        }
        return None;
    }
    let store = &ctx.server.store;
    let route = c.route(
        &Query {
            keys: &keys,
            write,
            pubsubshard,
            asking: asking || spec.has(ASKING),
            readonly: ctx.client.cluster_readonly,
            migrate: spec.name == "migrate",
        },
        &|k| {
            (names_keys && store.holds(0, false, k))
                || (names_collections && store.holds(0, true, k))
        },
    );
    match route {
        Route::Here => None,
        r => Some(Reply::error(r.error_text())),
    }
}
