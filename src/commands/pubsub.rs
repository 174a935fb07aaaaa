//! Pub/sub family: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH PUBSUB.
//! The registry and delivery live in `server::pubsub`; these handlers keep the client's own
//! subscription sets and build Redis's confirmation replies (push frames in RESP3).
use crate::commands::spec::{flag, Arg, ArgKind, CommandSpec};
use crate::commands::{help_reply, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::Ordering;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "subscribe",
        arity: -2,
        flags: flag::PUBSUB | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["pubsub", "slow"],
        summary: "Listen for messages published to the given channels",
        since: "2.0.0",
        group: "pubsub",
        complexity: "O(N) where N is the number of channels to subscribe to.",
        args: &[
            Arg { name: "channel", kind: ArgKind::String, token: None, optional: false, multiple: true, args: &[] },
        ],
        handler: subscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unsubscribe",
        arity: -1,
        flags: flag::PUBSUB | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["pubsub", "slow"],
        summary: "Stop listening for messages posted to the given channels",
        since: "2.0.0",
        group: "pubsub",
        complexity: "O(N) where N is the number of clients already subscribed to a channel.",
        args: &[
            Arg { name: "channel", kind: ArgKind::String, token: None, optional: true, multiple: true, args: &[] },
        ],
        handler: unsubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "psubscribe",
        arity: -2,
        flags: flag::PUBSUB | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["pubsub", "slow"],
        summary: "Listen for messages published to channels matching the given patterns",
        since: "2.0.0",
        group: "pubsub",
        complexity: "O(N) where N is the number of patterns the client is already subscribed to.",
        args: &[
            Arg { name: "pattern", kind: ArgKind::Block, token: None, optional: false, multiple: true, args: &[
                Arg { name: "pattern", kind: ArgKind::Pattern, token: None, optional: false, multiple: false, args: &[] },
            ] },
        ],
        handler: psubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "punsubscribe",
        arity: -1,
        flags: flag::PUBSUB | flag::NOSCRIPT | flag::LOADING | flag::STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["pubsub", "slow"],
        summary: "Stop listening for messages posted to channels matching the given patterns",
        since: "2.0.0",
        group: "pubsub",
        complexity: "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).",
        args: &[
            Arg { name: "pattern", kind: ArgKind::Pattern, token: None, optional: true, multiple: true, args: &[] },
        ],
        handler: punsubscribe,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "publish",
        arity: 3,
        flags: flag::PUBSUB | flag::LOADING | flag::STALE | flag::FAST,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["pubsub", "fast"],
        summary: "Post a message to a channel",
        since: "2.0.0",
        group: "pubsub",
        complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        args: &[
            Arg { name: "channel", kind: ArgKind::String, token: None, optional: false, multiple: false, args: &[] },
            Arg { name: "message", kind: ArgKind::String, token: None, optional: false, multiple: false, args: &[] },
        ],
        handler: publish,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "pubsub",
        arity: -2,
        flags: 0,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["slow"],
        summary: "A container for Pub/Sub commands",
        since: "2.8.0",
        group: "pubsub",
        complexity: "Depends on subcommand.",
        args: &[],
        subcommands: &[
            CommandSpec {
                name: "pubsub|numsub",
                arity: -2,
                flags: flag::PUBSUB | flag::LOADING | flag::STALE,
                first_key: 0,
                last_key: 0,
                step: 0,
                acl: &["pubsub", "slow"],
                summary: "Get the count of subscribers for channels",
                since: "2.8.0",
                group: "pubsub",
                complexity: "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
                args: &[
                    Arg { name: "channel", kind: ArgKind::String, token: None, optional: true, multiple: true, args: &[] },
                ],
                handler: pubsub_numsub,
        ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|help",
                arity: 2,
                flags: flag::LOADING | flag::STALE,
                first_key: 0,
                last_key: 0,
                step: 0,
                acl: &["slow"],
                summary: "Show helpful text about the different subcommands",
                since: "6.2.0",
                group: "pubsub",
                complexity: "O(1)",
                args: &[],
                handler: pubsub_help,
        ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|channels",
                arity: -2,
                flags: flag::PUBSUB | flag::LOADING | flag::STALE,
                first_key: 0,
                last_key: 0,
                step: 0,
                acl: &["pubsub", "slow"],
                summary: "List active channels",
                since: "2.8.0",
                group: "pubsub",
                complexity: "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
                args: &[
                    Arg { name: "pattern", kind: ArgKind::Pattern, token: None, optional: true, multiple: false, args: &[] },
                ],
                handler: pubsub_channels,
        ..CommandSpec::DEFAULT
            },
            CommandSpec {
                name: "pubsub|numpat",
                arity: 2,
                flags: flag::PUBSUB | flag::LOADING | flag::STALE,
                first_key: 0,
                last_key: 0,
                step: 0,
                acl: &["pubsub", "slow"],
                summary: "Get the count of unique patterns pattern subscriptions",
                since: "2.8.0",
                group: "pubsub",
                complexity: "O(1)",
                args: &[],
                handler: pubsub_numpat,
        ..CommandSpec::DEFAULT
            },
        ],
        handler: pubsub_container,
    },
];

/// Commands a RESP2 client may run while subscribed (Redis 7's list).
pub fn allowed_when_subscribed(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
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
