//! `COMMAND INFO` and `COMMAND DOCS` replies, generated from the table rows.

use crate::commands::spec::{acl, flag, parse_args, Arg, ArgKind, Begin, CommandSpec, Find};
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
    let cats = spec.categories();
    let acl = acl::NAMES
        .iter()
        .filter(|(c, _)| cats & c != 0)
        .map(|(_, n)| status(&format!("@{n}")))
        .collect();
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
    spec.effective_key_specs()
        .iter()
        .map(|ks| {
            let begin = match ks.begin {
                Begin::Index(i) => (
                    "index",
                    Reply::Map(vec![(bulk("index"), Reply::Int(i as i64))]),
                ),
                Begin::Keyword {
                    keyword,
                    start_from,
                } => (
                    "keyword",
                    Reply::Map(vec![
                        (bulk("keyword"), bulk(keyword)),
                        (bulk("startfrom"), Reply::Int(start_from as i64)),
                    ]),
                ),
            };
            let find = match ks.find {
                Find::Range { last, step, limit } => (
                    "range",
                    Reply::Map(vec![
                        (bulk("lastkey"), Reply::Int(last as i64)),
                        (bulk("keystep"), Reply::Int(step as i64)),
                        (bulk("limit"), Reply::Int(limit as i64)),
                    ]),
                ),
                Find::Keynum {
                    keynum_idx,
                    first,
                    step,
                } => (
                    "keynum",
                    Reply::Map(vec![
                        (bulk("keynumidx"), Reply::Int(keynum_idx as i64)),
                        (bulk("firstkey"), Reply::Int(first as i64)),
                        (bulk("keystep"), Reply::Int(step as i64)),
                    ]),
                ),
            };
            Reply::Map(vec![
                (
                    bulk("flags"),
                    Reply::Set(ks.flags.iter().map(|f| status(f)).collect()),
                ),
                (
                    bulk("begin_search"),
                    Reply::Map(vec![(bulk("type"), bulk(begin.0)), (bulk("spec"), begin.1)]),
                ),
                (
                    bulk("find_keys"),
                    Reply::Map(vec![(bulk("type"), bulk(find.0)), (bulk("spec"), find.1)]),
                ),
            ])
        })
        .collect()
}

pub fn docs(spec: &CommandSpec) -> Reply {
    let mut m = vec![
        (bulk("summary"), bulk(spec.summary)),
        (bulk("since"), bulk(spec.since)),
        (bulk("group"), bulk(spec.group)),
        (bulk("complexity"), bulk(spec.complexity)),
    ];
    // Every row's notation parses (a unit test holds the table to it).
    let args = parse_args(spec.args).unwrap_or_default();
    if !args.is_empty() {
        // A key argument points at its key spec: the first for a command with one, else the
        // key arguments in order, one spec each.
        let specs = spec.effective_key_specs().len().max(1);
        let mut keys_seen = 0;
        m.push((
            bulk("arguments"),
            Reply::Array(
                args.iter()
                    .map(|a| arg_doc(a, specs, &mut keys_seen))
                    .collect(),
            ),
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

fn arg_doc(a: &Arg, specs: usize, keys_seen: &mut usize) -> Reply {
    let mut m = vec![
        (bulk("name"), bulk(&a.name)),
        (bulk("type"), bulk(a.kind.name())),
    ];
    if !matches!(a.kind, ArgKind::PureToken | ArgKind::OneOf | ArgKind::Block) {
        m.push((bulk("display_text"), bulk(&a.name)));
    }
    if a.kind == ArgKind::Key {
        let index = if specs == 1 {
            0
        } else {
            (*keys_seen).min(specs - 1)
        };
        *keys_seen += 1;
        m.push((bulk("key_spec_index"), Reply::Int(index as i64)));
    }
    if let Some(t) = &a.token {
        m.push((bulk("token"), bulk(t)));
    }
    let mut flags = vec![];
    if a.optional {
        flags.push(status("optional"));
    }
    if a.multiple {
        flags.push(status("multiple"));
    }
    if a.multiple_token {
        flags.push(status("multiple_token"));
    }
    if !flags.is_empty() {
        m.push((bulk("flags"), Reply::Set(flags)));
    }
    if !a.args.is_empty() {
        m.push((
            bulk("arguments"),
            Reply::Array(
                a.args
                    .iter()
                    .map(|x| arg_doc(x, specs, keys_seen))
                    .collect(),
            ),
        ));
    }
    Reply::Map(m)
}
