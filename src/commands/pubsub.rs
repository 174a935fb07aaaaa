//! Pub/sub family: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB, and the
//! sharded SSUBSCRIBE SUNSUBSCRIBE SPUBLISH as Redis 7 without cluster mode: shard channels
//! are a namespace of their own (no patterns), counted apart from the others.
//! The registry and delivery live in `state::pubsub`; these handlers keep the client's own
//! subscription sets and build Redis's confirmation replies (push frames in RESP3).
use crate::commands::args::{Args, CommandError};
use crate::commands::spec::{family, flag::*, CmdResult, CommandSpec, KeySpec};
use crate::commands::{help_reply, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::Ordering;

const PS: CommandSpec = family("pubsub", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    PS.cmd("subscribe", -2, subscribe).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Listen for messages published to the given channels")
        .complexity("O(N) where N is the number of channels to subscribe to.").args("channel..."),
    PS.cmd("unsubscribe", -1, unsubscribe).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Stop listening for messages posted to the given channels")
        .complexity("O(N) where N is the number of clients already subscribed to a channel.")
        .args("[channel...]"),
    PS.cmd("psubscribe", -2, psubscribe).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Listen for messages published to channels matching the given patterns")
        .complexity("O(N) where N is the number of patterns the client is already subscribed to.")
        .args("pattern:{pattern:pattern}..."),
    PS.cmd("punsubscribe", -1, punsubscribe).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Stop listening for messages posted to channels matching the given patterns")
        .complexity("O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).")
        .args("[pattern:pattern...]"),
    PS.cmd("publish", 3, publish).flags(PUBSUB | LOADING | STALE | FAST)
        .doc("2.0.0", "Post a message to a channel")
        .complexity("O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).")
        .args("channel message"),
    // The shard channel is described by a `not_key` key spec, as Redis 7 (cluster routing
    // reads it); key extraction, GETKEYS and ACL key checks skip such specs.
    PS.cmd("spublish", 3, spublish).flags(PUBSUB | LOADING | STALE | FAST).keys(1, 1, 1)
        .key_specs(SHARD_CHANNEL)
        .doc("7.0.0", "Post a message to a shard channel")
        .complexity("O(N) where N is the number of clients subscribed to the receiving shard channel.")
        .args("shardchannel message"),
    PS.cmd("ssubscribe", -2, ssubscribe).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .keys(1, -1, 1).key_specs(SHARD_CHANNELS)
        .doc("7.0.0", "Listen for messages published to the given shard channels")
        .complexity("O(N) where N is the number of shard channels to subscribe to.")
        .args("shardchannel..."),
    PS.cmd("sunsubscribe", -1, sunsubscribe).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .keys(1, -1, 1).key_specs(SHARD_CHANNELS)
        .doc("7.0.0", "Stop listening for messages posted to the given shard channels")
        .complexity("O(N) where N is the number of clients already subscribed to a shard channel.")
        .args("[shardchannel...]"),
    PS.cmd("pubsub", -2, pubsub_container).doc("2.8.0", "A container for Pub/Sub commands")
        .complexity("Depends on subcommand.").subs(PUBSUB_SUBCOMMANDS),
];

const SHARD_CHANNEL: &[KeySpec] = &[KeySpec::at(1, &["not_key"])];
const SHARD_CHANNELS: &[KeySpec] = &[KeySpec {
    flags: &["not_key"],
    begin: crate::commands::spec::Begin::Index(1),
    find: crate::commands::spec::Find::Range {
        last: -1,
        step: 1,
        limit: 0,
    },
}];

#[rustfmt::skip]
static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    PS.cmd("pubsub|numsub", -2, pubsub_numsub).flags(PUBSUB | LOADING | STALE)
        .doc("2.8.0", "Get the count of subscribers for channels")
        .complexity("O(N) for the NUMSUB subcommand, where N is the number of requested channels")
        .args("[channel...]"),
    PS.cmd("pubsub|help", 2, pubsub_help).flags(LOADING | STALE)
        .doc("6.2.0", "Show helpful text about the different subcommands"),
    PS.cmd("pubsub|channels", -2, pubsub_channels).flags(PUBSUB | LOADING | STALE)
        .doc("2.8.0", "List active channels")
        .complexity("O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)")
        .args("[pattern:pattern]"),
    PS.cmd("pubsub|shardchannels", -2, pubsub_shardchannels).flags(PUBSUB | LOADING | STALE)
        .doc("7.0.0", "List active shard channels")
        .complexity("O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).")
        .args("[pattern:pattern]"),
    PS.cmd("pubsub|shardnumsub", -2, pubsub_shardnumsub).flags(PUBSUB | LOADING | STALE)
        .doc("7.0.0", "Get the count of subscribers for shard channels")
        .complexity("O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels")
        .args("[shardchannel...]"),
    PS.cmd("pubsub|numpat", 2, pubsub_numpat).flags(PUBSUB | LOADING | STALE)
        .doc("2.8.0", "Get the count of unique patterns pattern subscriptions"),
];

/// Commands a RESP2 client may run while subscribed (Redis 7's list).
pub fn allowed_when_subscribed(spec: &CommandSpec) -> bool {
    spec.has(SUBSCRIBED)
}

fn confirmation(kind: &'static str, channel: Option<Bytes>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk_str(kind),
        channel.map_or(Reply::Nil, Reply::Bulk),
        Reply::Int(count as i64),
    ])
}

fn subscribe_any(ctx: &mut Ctx<'_>, args: &mut Args<'_>, pattern: bool) -> CmdResult {
    let kind = if pattern { "psubscribe" } else { "subscribe" };
    let channels = args.rest();
    let mut out = Vec::with_capacity(channels.len());
    for ch in channels {
        let set = if pattern {
            &mut ctx.client.patterns
        } else {
            &mut ctx.client.channels
        };
        if set.insert(ch.clone()) {
            ctx.server.pubsub.subscribe(&ctx.client.handle, ch, pattern);
        }
        out.push(confirmation(kind, Some(ch.clone()), plain_count(ctx)));
    }
    publish_counts(ctx);
    Ok(Reply::Multi(out))
}

fn unsubscribe_any(ctx: &mut Ctx<'_>, args: &mut Args<'_>, pattern: bool) -> CmdResult {
    let kind = if pattern {
        "punsubscribe"
    } else {
        "unsubscribe"
    };
    let targets: Vec<Bytes> = if !args.is_empty() {
        args.rest().to_vec()
    } else if pattern {
        ctx.client.patterns.iter().cloned().collect()
    } else {
        ctx.client.channels.iter().cloned().collect()
    };
    if targets.is_empty() {
        return Ok(Reply::Multi(vec![confirmation(
            kind,
            None,
            plain_count(ctx),
        )]));
    }
    let mut out = Vec::with_capacity(targets.len());
    for ch in targets {
        let set = if pattern {
            &mut ctx.client.patterns
        } else {
            &mut ctx.client.channels
        };
        if set.remove(&ch) {
            ctx.server
                .pubsub
                .unsubscribe(ctx.client.handle.id, &ch, pattern);
        }
        out.push(confirmation(kind, Some(ch), plain_count(ctx)));
    }
    publish_counts(ctx);
    Ok(Reply::Multi(out))
}

/// The count SUBSCRIBE/PSUBSCRIBE confirmations carry: channels and patterns, not shard
/// channels (Redis's `clientSubscriptionsCount`).
fn plain_count(ctx: &Ctx<'_>) -> usize {
    ctx.client.channels.len() + ctx.client.patterns.len()
}

/// SSUBSCRIBE: each confirmation carries the shard-channel count alone. Refused where the
/// client could not read its pushes (inside EXEC or a script), as Redis refuses it to a
/// DENY_BLOCKING client, MULTI included (unlike SUBSCRIBE).
fn ssubscribe(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if ctx.client.in_exec {
        return Err(CommandError::msg(
            "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client",
        ));
    }
    let channels = args.rest();
    let mut out = Vec::new();
    for ch in channels {
        if ctx.client.shard_channels.insert(ch.clone()) {
            ctx.server.pubsub.ssubscribe(&ctx.client.handle, ch);
        }
        out.push(confirmation(
            "ssubscribe",
            Some(ch.clone()),
            ctx.client.shard_channels.len(),
        ));
    }
    publish_counts(ctx);
    Ok(Reply::Multi(out))
}

/// SUNSUBSCRIBE: the named shard channels, or all of them; with none to leave, one
/// confirmation with a null channel.
fn sunsubscribe(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let targets: Vec<Bytes> = if !args.is_empty() {
        args.rest().to_vec()
    } else {
        ctx.client.shard_channels.iter().cloned().collect()
    };
    if targets.is_empty() {
        return Ok(Reply::Multi(vec![confirmation("sunsubscribe", None, 0)]));
    }
    let mut out = Vec::with_capacity(targets.len());
    for ch in targets {
        if ctx.client.shard_channels.remove(&ch) {
            ctx.server.pubsub.sunsubscribe(ctx.client.handle.id, &ch);
        }
        let n = ctx.client.shard_channels.len();
        out.push(confirmation("sunsubscribe", Some(ch), n));
    }
    publish_counts(ctx);
    Ok(Reply::Multi(out))
}

fn spublish(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (channel, message) = (args.next_arg()?, args.next_arg()?);
    // Replicas deliver it to their own subscribers too (Redis propagates it to replicas,
    // not to the AOF), in the client's database as every propagated command: a stream that
    // has not selected it yet gets a SELECT first, as Redis's.
    // In cluster mode the bus carries it to the shard's nodes instead (Redis 7.0).
    match ctx.server.cluster.get() {
        Some(c) => c.with(|st| st.propagate_publish(channel, message, true)),
        None => crate::store::journal::replicate_only(
            Some(ctx.client.db),
            &[b"SPUBLISH", channel, message],
        ),
    }
    Ok(Reply::Int(
        ctx.server.pubsub.spublish(channel, message) as i64
    ))
}

fn pubsub_shardchannels(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if args.len() > 1 {
        return Err(too_many(args));
    }
    let pattern = args.next_opt().map(|p| &p[..]);
    Ok(Reply::Array(
        ctx.server
            .pubsub
            .shard_channel_names(pattern)
            .into_iter()
            .map(Reply::Bulk)
            .collect(),
    ))
}

fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let channels = args.rest();
    let mut out = Vec::new();
    for ch in channels {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(ctx.server.pubsub.shard_numsub(ch) as i64));
    }
    Ok(Reply::Array(out))
}

/// Redis's `addReplySubcommandSyntaxError`: names the subcommand as the client wrote it.
fn too_many(args: &Args<'_>) -> CommandError {
    let sub = args
        .all()
        .get(1)
        .map(|s| String::from_utf8_lossy(s).into_owned());
    CommandError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
        sub.unwrap_or_default()
    ))
}

/// Mirrors the subscription counts where CLIENT LIST and CLIENT KILL TYPE read them.
fn publish_counts(ctx: &Ctx<'_>) {
    let h = &ctx.client.handle;
    h.sub_count
        .store(ctx.client.channels.len() as u32, Ordering::Relaxed);
    h.psub_count
        .store(ctx.client.patterns.len() as u32, Ordering::Relaxed);
    h.ssub_count
        .store(ctx.client.shard_channels.len() as u32, Ordering::Relaxed);
}

/// A cluster slot left this node's shard: the client's shard channels of that slot are
/// unsubscribed, each confirmed as SUNSUBSCRIBE confirms it (Redis's `removeChannelsInSlot`
/// notifies the clients the same way). The confirmations, for the connection to send.
pub fn shard_slot_lost(ctx: &mut Ctx<'_>, slot: u16) -> Vec<Reply> {
    let lost: Vec<Bytes> = ctx
        .client
        .shard_channels
        .iter()
        .filter(|c| crate::state::cluster::key_slot(c) == slot)
        .cloned()
        .collect();
    let mut out = Vec::with_capacity(lost.len());
    for ch in lost {
        ctx.client.shard_channels.remove(&ch);
        ctx.server.pubsub.sunsubscribe(ctx.client.handle.id, &ch);
        out.push(confirmation(
            "sunsubscribe",
            Some(ch),
            ctx.client.shard_channels.len(),
        ));
    }
    publish_counts(ctx);
    out
}

/// Drops every subscription of the client (RESET, disconnect).
pub fn leave_all(ctx: &mut Ctx<'_>) {
    let channels: Vec<Bytes> = ctx.client.channels.drain().collect();
    let patterns: Vec<Bytes> = ctx.client.patterns.drain().collect();
    let shard: Vec<Bytes> = ctx.client.shard_channels.drain().collect();
    ctx.server
        .pubsub
        .forget_client(ctx.client.handle.id, &channels, &patterns, &shard);
    ctx.client.handle.monitor.store(false, Ordering::Relaxed);
    publish_counts(ctx);
}

fn subscribe(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    subscribe_any(ctx, args, false)
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    subscribe_any(ctx, args, true)
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    unsubscribe_any(ctx, args, false)
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    unsubscribe_any(ctx, args, true)
}

fn publish(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let (channel, message) = (args.next_arg()?, args.next_arg()?);
    // In the client's database, as SPUBLISH.
    // In cluster mode the bus carries it to every node instead (Redis 7.0).
    match ctx.server.cluster.get() {
        Some(c) => c.with(|st| st.propagate_publish(channel, message, false)),
        None => crate::store::journal::replicate_only(
            Some(ctx.client.db),
            &[b"PUBLISH", channel, message],
        ),
    }
    Ok(Reply::Int(
        ctx.server.pubsub.publish(channel, message) as i64
    ))
}

/// Only reached with no subcommand, which the arity check already refuses.
fn pubsub_container(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Err(CommandError::WrongArity)
}

fn pubsub_channels(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    if args.len() > 1 {
        return Err(too_many(args));
    }
    let pattern = args.next_opt().map(|p| &p[..]);
    Ok(Reply::Array(
        ctx.server
            .pubsub
            .channel_names(pattern)
            .into_iter()
            .map(Reply::Bulk)
            .collect(),
    ))
}

fn pubsub_numsub(ctx: &mut Ctx<'_>, args: &mut Args<'_>) -> CmdResult {
    let channels = args.rest();
    let mut out = Vec::with_capacity(2 * channels.len());
    for ch in channels {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(ctx.server.pubsub.numsub(ch) as i64));
    }
    Ok(Reply::Array(out))
}

fn pubsub_numpat(ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(Reply::Int(ctx.server.pubsub.numpat() as i64))
}

fn pubsub_help(_ctx: &mut Ctx<'_>, _args: &mut Args<'_>) -> CmdResult {
    Ok(help_reply(
        "pubsub",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    ))
}
