//! Pub/sub family: SUBSCRIBE PUBLISH PUBSUB ...
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers land with their issue.
use crate::commands::spec::{flag, Arg, ArgKind, CommandSpec};

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
                ..CommandSpec::DEFAULT
            },
        ],
        ..CommandSpec::DEFAULT
    },
];
