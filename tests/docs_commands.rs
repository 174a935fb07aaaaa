//! docs/commands.md cannot drift from the command table: every `DOC.*` command the server
//! lists has a section there, and every `## DOC.*` section names a command the server has.
//!
//! The rule for a section: its heading is `## DOC.NAME`, and its first three non-empty lines
//! are, exactly,
//!
//! ```text
//! `DOC.NAME <synopsis rendered from COMMAND DOCS's arguments>`
//! > <COMMAND DOCS summary>
//! Flags: <COMMAND INFO flags>. ACL categories: <COMMAND INFO categories>.
//! ```
//!
//! `docs/tools/command_synopsis.py PORT` prints these heads from a running server (by the
//! same rendering rules as `render` below); on a mismatch this test prints the expected head.

mod support;

use redis::Value;
use std::collections::{BTreeMap, BTreeSet};
use support::TestServer;

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        other => panic!("expected a string, got {other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// A RESP2 flat `[name, value, ...]` list as a map.
fn pairs(v: &Value) -> BTreeMap<String, &Value> {
    items(v)
        .chunks(2)
        .map(|kv| (text(&kv[0]), &kv[1]))
        .collect()
}

fn strings(v: Option<&&Value>) -> Vec<String> {
    v.map(|v| items(v).iter().map(text).collect())
        .unwrap_or_default()
}

/// One argument of COMMAND DOCS in the notation of docs/commands.md: `TOKEN value`,
/// `[optional]`, `x [x ...]`, `<a | b>` for a required choice (or one after a token).
fn render(arg: &Value) -> String {
    let a = pairs(arg);
    let flags = strings(a.get("flags"));
    let has = |f: &str| flags.iter().any(|x| x == f);
    let token = a.get("token").map(|t| text(t));
    let kind = text(a["type"]);
    let mut out = match kind.as_str() {
        "pure-token" => token.clone().expect("pure-token has a token"),
        "oneof" | "block" => {
            let parts: Vec<String> = a
                .get("arguments")
                .map(|v| items(v).iter().map(render).collect())
                .unwrap_or_default();
            let mut s = parts.join(if kind == "oneof" { " | " } else { " " });
            if kind == "oneof" && (token.is_some() || !has("optional")) {
                s = format!("<{s}>");
            }
            match &token {
                Some(t) => format!("{t} {s}"),
                None => s,
            }
        }
        _ => {
            let shown = a
                .get("display_text")
                .map(|v| text(v))
                .unwrap_or_else(|| text(a["name"]));
            match &token {
                Some(t) => format!("{t} {shown}"),
                None => shown,
            }
        }
    };
    if has("multiple") {
        out = match &token {
            Some(_) if !has("multiple_token") => {
                let value = out.split_once(' ').map(|(_, v)| v.to_string());
                format!("{out} [{} ...]", value.unwrap_or_default())
            }
            _ => format!("{out} [{out} ...]"),
        };
    }
    if has("optional") {
        out = format!("[{out}]");
    }
    out
}

/// The head docs/commands.md must carry for `name`, from COMMAND DOCS and COMMAND INFO.
fn expected_head(c: &mut redis::Connection, name: &str) -> [String; 3] {
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg(name)
        .query(c)
        .expect("COMMAND DOCS");
    let docs = items(&docs);
    assert_eq!(docs.len(), 2, "COMMAND DOCS {name}: {docs:?}");
    let d = pairs(&docs[1]);
    let mut synopsis = vec![name.to_uppercase()];
    if let Some(args) = d.get("arguments") {
        synopsis.extend(items(args).iter().map(render));
    }
    let info: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(name)
        .query(c)
        .expect("COMMAND INFO");
    let info = items(&items(&info)[0]).to_vec();
    let flags = items(&info[2]).iter().map(text).collect::<Vec<_>>();
    let cats = items(&info[6]).iter().map(text).collect::<Vec<_>>();
    let flags = if flags.is_empty() {
        "none".to_string()
    } else {
        flags.join(", ")
    };
    [
        format!("`{}`", synopsis.join(" ")),
        format!("> {}", text(d["summary"])),
        format!("Flags: {flags}. ACL categories: {}.", cats.join(" ")),
    ]
}

/// `## DOC.*` sections of the file: heading → its first three non-empty lines.
fn sections(md: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_fence = false;
    for line in md.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence {
            if let Some(h) = line.strip_prefix("## ") {
                if h.to_uppercase().starts_with("DOC.") {
                    out.push((h.trim().to_string(), Vec::new()));
                    continue;
                }
                // Another section ends the previous command's.
                out.push((String::new(), Vec::new()));
                continue;
            }
        }
        if let Some((_, head)) = out.last_mut() {
            if head.len() < 3 && !line.trim().is_empty() {
                head.push(line.trim_end().to_string());
            }
        }
    }
    out.retain(|(h, _)| !h.is_empty());
    out
}

#[test]
fn every_doc_command_has_a_matching_section_and_every_section_a_command() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let names: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("PATTERN")
        .arg("doc.*")
        .query(&mut c)
        .expect("COMMAND LIST");
    assert!(
        names.len() >= 15,
        "the server lists too few DOC.* commands: {names:?}"
    );
    let names: BTreeSet<String> = names.iter().map(|n| n.to_uppercase()).collect();

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md");
    let md = std::fs::read_to_string(path).expect("docs/commands.md");
    let found = sections(&md);

    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (heading, _) in &found {
        if !names.contains(heading) {
            problems.push(format!(
                "section `## {heading}` names no command the server has"
            ));
        }
        if !seen.insert(heading.clone()) {
            problems.push(format!("section `## {heading}` appears twice"));
        }
    }
    for name in &names {
        let want = expected_head(&mut c, name);
        match found.iter().find(|(h, _)| h == name) {
            None => problems.push(format!(
                "no section for {name}; add:\n\n## {name}\n\n{}\n\n{}\n\n{}\n",
                want[0], want[1], want[2]
            )),
            Some((_, head)) if head.as_slice() != want.as_slice() => problems.push(format!(
                "the head of `## {name}` does not match the command table\n  found:\n    {}\n  expected:\n    {}",
                head.join("\n    "),
                want.join("\n    ")
            )),
            Some(_) => {}
        }
    }
    assert!(
        problems.is_empty(),
        "docs/commands.md is out of step with the command table \
         (docs/tools/command_synopsis.py prints the heads):\n\n{}",
        problems.join("\n\n")
    );
}

#[test]
fn the_synopsis_notation_is_the_one_the_file_explains() {
    // The rendering rules on hand-made COMMAND DOCS arguments, so a change to `render` that
    // the file's explanation no longer describes shows here.
    let arg = |pairs: &[(&str, Value)]| {
        Value::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| [Value::BulkString(k.as_bytes().to_vec()), v.clone()])
                .collect(),
        )
    };
    let s = |t: &str| Value::BulkString(t.as_bytes().to_vec());
    let flags = |f: &[&str]| Value::Array(f.iter().map(|x| s(x)).collect());
    let doc = arg(&[
        ("name", s("document")),
        ("type", s("string")),
        ("display_text", s("document")),
        ("flags", flags(&["multiple"])),
    ]);
    assert_eq!(render(&doc), "document [document ...]");
    let skip = arg(&[
        ("name", s("skip")),
        ("type", s("integer")),
        ("token", s("SKIP")),
        ("flags", flags(&["optional"])),
    ]);
    assert_eq!(render(&skip), "[SKIP skip]");
    let off = arg(&[
        ("name", s("off")),
        ("type", s("pure-token")),
        ("token", s("OFF")),
    ]);
    let stream = arg(&[("name", s("stream")), ("type", s("string"))]);
    let choice = arg(&[
        ("name", s("changes")),
        ("type", s("oneof")),
        ("token", s("CHANGES")),
        ("arguments", Value::Array(vec![off.clone(), stream.clone()])),
    ]);
    assert_eq!(render(&choice), "CHANGES <OFF | stream>");
    let eq = arg(&[
        ("name", s("eq")),
        ("type", s("pure-token")),
        ("token", s("=")),
    ]);
    let approx = arg(&[
        ("name", s("approx")),
        ("type", s("pure-token")),
        ("token", s("~")),
    ]);
    let optional = arg(&[
        ("name", s("op")),
        ("type", s("oneof")),
        ("flags", flags(&["optional"])),
        ("arguments", Value::Array(vec![eq, approx])),
    ]);
    assert_eq!(render(&optional), "[= | ~]");
}
