//! Transactions family: MULTI EXEC DISCARD WATCH UNWATCH.
//! Table entries transcribed from Redis 7's COMMAND INFO / COMMAND DOCS; handlers land with their issue.
use crate::commands::spec::{flag, Arg, ArgKind, CommandSpec};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "multi",
        arity: 1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::ALLOW_BUSY,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["fast", "transaction"],
        summary: "Mark the start of a transaction block",
        since: "1.2.0",
        group: "transactions",
        complexity: "O(1)",
        args: &[],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exec",
        arity: 1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::SKIP_SLOWLOG,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["slow", "transaction"],
        summary: "Execute all commands issued after MULTI",
        since: "1.2.0",
        group: "transactions",
        complexity: "Depends on commands in the transaction",
        args: &[],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "discard",
        arity: 1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::ALLOW_BUSY,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["fast", "transaction"],
        summary: "Discard all commands issued after MULTI",
        since: "2.0.0",
        group: "transactions",
        complexity: "O(N), when N is the number of queued commands",
        args: &[],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "watch",
        arity: -2,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::ALLOW_BUSY,
        first_key: 1,
        last_key: -1,
        step: 1,
        acl: &["fast", "transaction"],
        summary: "Watch the given keys to determine execution of the MULTI/EXEC block",
        since: "2.2.0",
        group: "transactions",
        complexity: "O(1) for every key.",
        args: &[Arg {
            name: "key",
            kind: ArgKind::Key,
            token: None,
            optional: false,
            multiple: true,
            args: &[],
        }],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unwatch",
        arity: 1,
        flags: flag::NOSCRIPT | flag::LOADING | flag::STALE | flag::FAST | flag::ALLOW_BUSY,
        first_key: 0,
        last_key: 0,
        step: 0,
        acl: &["fast", "transaction"],
        summary: "Forget about all watched keys",
        since: "2.2.0",
        group: "transactions",
        complexity: "O(1)",
        args: &[],
        ..CommandSpec::DEFAULT
    },
];
