//! Pub/sub family: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB.
//! The registry and delivery live in `server::pubsub`; these handlers keep the client's own
//! subscription sets and build Redis's confirmation replies (push frames in RESP3).
use crate::commands::spec::{family, flag::*, CommandSpec};
use crate::commands::{help_reply, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::Ordering;

const PS: CommandSpec = family("pubsub", 0);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    PS.cmd("subscribe", -2, legacy!(subscribe)).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Listen for messages published to the given channels")
        .complexity("O(N) where N is the number of channels to subscribe to.").args("channel..."),
    PS.cmd("unsubscribe", -1, legacy!(unsubscribe)).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Stop listening for messages posted to the given channels")
        .complexity("O(N) where N is the number of clients already subscribed to a channel.")
        .args("[channel...]"),
    PS.cmd("psubscribe", -2, legacy!(psubscribe)).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Listen for messages published to channels matching the given patterns")
        .complexity("O(N) where N is the number of patterns the client is already subscribed to.")
        .args("pattern:{pattern:pattern}..."),
    PS.cmd("punsubscribe", -1, legacy!(punsubscribe)).flags(PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED)
        .doc("2.0.0", "Stop listening for messages posted to channels matching the given patterns")
        .complexity("O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).")
        .args("[pattern:pattern...]"),
    PS.cmd("publish", 3, legacy!(publish)).flags(PUBSUB | LOADING | STALE | FAST)
        .doc("2.0.0", "Post a message to a channel")
        .complexity("O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).")
        .args("channel message"),
    PS.cmd("pubsub", -2, legacy!(pubsub_container)).doc("2.8.0", "A container for Pub/Sub commands")
        .complexity("Depends on subcommand.").subs(PUBSUB_SUBCOMMANDS),
];

#[rustfmt::skip]
static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    PS.cmd("pubsub|numsub", -2, legacy!(pubsub_numsub)).flags(PUBSUB | LOADING | STALE)
        .doc("2.8.0", "Get the count of subscribers for channels")
        .complexity("O(N) for the NUMSUB subcommand, where N is the number of requested channels")
        .args("[channel...]"),
    PS.cmd("pubsub|help", 2, legacy!(pubsub_help)).flags(LOADING | STALE)
        .doc("6.2.0", "Show helpful text about the different subcommands"),
    PS.cmd("pubsub|channels", -2, legacy!(pubsub_channels)).flags(PUBSUB | LOADING | STALE)
        .doc("2.8.0", "List active channels")
        .complexity("O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)")
        .args("[pattern:pattern]"),
    PS.cmd("pubsub|numpat", 2, legacy!(pubsub_numpat)).flags(PUBSUB | LOADING | STALE)
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

fn subscribe_any(ctx: &mut Ctx<'_>, args: &[Bytes], pattern: bool) -> Reply {
    let kind = if pattern { "psubscribe" } else { "subscribe" };
    let mut out = Vec::with_capacity(args.len() - 1);
    for ch in &args[1..] {
        let set = if pattern {
            &mut ctx.client.patterns
        } else {
            &mut ctx.client.channels
        };
        if set.insert(ch.clone()) {
            ctx.server.pubsub.subscribe(&ctx.client.handle, ch, pattern);
        }
        out.push(confirmation(
            kind,
            Some(ch.clone()),
            ctx.client.subscriptions(),
        ));
    }
    publish_counts(ctx);
    Reply::Multi(out)
}

fn unsubscribe_any(ctx: &mut Ctx<'_>, args: &[Bytes], pattern: bool) -> Reply {
    let kind = if pattern {
        "punsubscribe"
    } else {
        "unsubscribe"
    };
    let targets: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else if pattern {
        ctx.client.patterns.iter().cloned().collect()
    } else {
        ctx.client.channels.iter().cloned().collect()
    };
    if targets.is_empty() {
        return Reply::Multi(vec![confirmation(kind, None, ctx.client.subscriptions())]);
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
        out.push(confirmation(kind, Some(ch), ctx.client.subscriptions()));
    }
    publish_counts(ctx);
    Reply::Multi(out)
}

/// Mirrors the subscription counts where CLIENT LIST and CLIENT KILL TYPE read them.
fn publish_counts(ctx: &Ctx<'_>) {
    let h = &ctx.client.handle;
    h.sub_count
        .store(ctx.client.channels.len(), Ordering::Relaxed);
    h.psub_count
        .store(ctx.client.patterns.len(), Ordering::Relaxed);
}

/// Drops every subscription of the client (RESET, disconnect).
pub fn leave_all(ctx: &mut Ctx<'_>) {
    let channels: Vec<Bytes> = ctx.client.channels.drain().collect();
    let patterns: Vec<Bytes> = ctx.client.patterns.drain().collect();
    ctx.server
        .pubsub
        .forget_client(ctx.client.handle.id, &channels, &patterns);
    ctx.client.handle.monitor.store(false, Ordering::Relaxed);
    publish_counts(ctx);
}

fn subscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    subscribe_any(ctx, args, false)
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    subscribe_any(ctx, args, true)
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    unsubscribe_any(ctx, args, false)
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    unsubscribe_any(ctx, args, true)
}

fn publish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    Reply::Int(ctx.server.pubsub.publish(&args[1], &args[2]) as i64)
}

fn pubsub_container(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    crate::commands::wrong_arity("pubsub")
}

fn pubsub_channels(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return Reply::error(
            "ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.",
        );
    }
    let pattern = args.get(2).map(|p| &p[..]);
    Reply::Array(
        ctx.server
            .pubsub
            .channel_names(pattern)
            .into_iter()
            .map(Reply::Bulk)
            .collect(),
    )
}

fn pubsub_numsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let mut out = Vec::with_capacity(2 * (args.len() - 2));
    for ch in &args[2..] {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(ctx.server.pubsub.numsub(ch) as i64));
    }
    Reply::Array(out)
}

fn pubsub_numpat(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    Reply::Int(ctx.server.pubsub.numpat() as i64)
}

fn pubsub_help(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Reply {
    help_reply(
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
    )
}
