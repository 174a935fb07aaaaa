//! `COMMAND INFO` and `COMMAND DOCS` replies, generated from the table entries.

use crate::commands::spec::{flag, Arg, ArgKind, CommandSpec};
use crate::protocol::Reply;

fn status(s: &str) -> Reply {
    Reply::Status(s.to_string())
}

fn bulk(s: &str) -> Reply {
    Reply::bulk_str(s)
}

pub fn info(spec: &CommandSpec) -> Reply {
    let flags = flag::NAMES
        .iter()
        .filter(|(f, _)| spec.has(*f))
        .map(|(_, n)| status(n))
        .collect();
    let acl = spec.acl.iter().map(|c| status(&format!("@{c}"))).collect();
    Reply::Array(vec![
        bulk(spec.name),
        Reply::Int(spec.arity as i64),
        Reply::Set(flags),
        Reply::Int(spec.first_key as i64),
        Reply::Int(spec.last_key as i64),
        Reply::Int(spec.step as i64),
        Reply::Set(acl),
        Reply::Set(vec![]),
        Reply::Array(key_specs(spec)),
        Reply::Array(spec.subcommands.iter().map(info).collect()),
    ])
}

fn key_specs(spec: &CommandSpec) -> Vec<Reply> {
    if spec.first_key <= 0 {
        return vec![];
    }
    let access = if spec.has(flag::WRITE) { "RW" } else { "RO" };
    let lastkey = if spec.last_key < 0 {
        spec.last_key
    } else {
        spec.last_key - spec.first_key
    };
    vec![Reply::Map(vec![
        (bulk("flags"), Reply::Set(vec![status(access)])),
        (
            bulk("begin_search"),
            Reply::Map(vec![
                (bulk("type"), bulk("index")),
                (
                    bulk("spec"),
                    Reply::Map(vec![(bulk("index"), Reply::Int(spec.first_key as i64))]),
                ),
            ]),
        ),
        (
            bulk("find_keys"),
            Reply::Map(vec![
                (bulk("type"), bulk("range")),
                (
                    bulk("spec"),
                    Reply::Map(vec![
                        (bulk("lastkey"), Reply::Int(lastkey as i64)),
                        (bulk("keystep"), Reply::Int(spec.step as i64)),
                        (bulk("limit"), Reply::Int(0)),
                    ]),
                ),
            ]),
        ),
    ])]
}

pub fn docs(spec: &CommandSpec) -> Reply {
    let mut m = vec![
        (bulk("summary"), bulk(spec.summary)),
        (bulk("since"), bulk(spec.since)),
        (bulk("group"), bulk(spec.group)),
        (bulk("complexity"), bulk(spec.complexity)),
    ];
    if !spec.args.is_empty() {
        m.push((
            bulk("arguments"),
            Reply::Array(spec.args.iter().map(arg_doc).collect()),
        ));
    }
    if !spec.subcommands.is_empty() {
        m.push((
            bulk("subcommands"),
            Reply::Map(
                spec.subcommands
                    .iter()
                    .map(|s| (bulk(s.name), docs(s)))
                    .collect(),
            ),
        ));
    }
    Reply::Map(m)
}

fn arg_doc(a: &Arg) -> Reply {
    let mut m = vec![
        (bulk("name"), bulk(a.name)),
        (bulk("type"), bulk(a.kind.name())),
    ];
    if !matches!(a.kind, ArgKind::PureToken | ArgKind::OneOf | ArgKind::Block) {
        m.push((bulk("display_text"), bulk(a.name)));
    }
    if a.kind == ArgKind::Key {
        m.push((bulk("key_spec_index"), Reply::Int(0)));
    }
    if let Some(t) = a.token {
        m.push((bulk("token"), bulk(t)));
    }
    let mut flags = vec![];
    if a.optional {
        flags.push(status("optional"));
    }
    if a.multiple {
        flags.push(status("multiple"));
    }
    if !flags.is_empty() {
        m.push((bulk("flags"), Reply::Set(flags)));
    }
    if !a.args.is_empty() {
        m.push((
            bulk("arguments"),
            Reply::Array(a.args.iter().map(arg_doc).collect()),
        ));
    }
    Reply::Map(m)
}
