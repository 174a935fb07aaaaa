//! The code's layers point one way, and no two files depend on each other.
//!
//! Reads every `src/**/*.rs` (test modules excluded), takes each `crate::…` path (in `use`
//! items, braces expanded, and in code) and `super::…` path, resolves it to the deepest
//! module file that exists, and checks:
//! - **no cycle between files** (a `mod.rs` re-exporting its own children is structure, not
//!   a dependency, and is not counted);
//! - **no folder imports a folder above it** in [`LAYERS`] (ARCHITECTURE.md's code map).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Lowest first; each folder may use the ones listed after it.
const LAYERS: &[(&str, &[&str])] = &[
    ("util", &[]),
    ("protocol", &["util"]),
    ("wheel", &["util"]),
    ("config", &["util", "protocol"]),
    ("documents", &["util", "wheel"]),
    ("store", &["util", "wheel", "documents"]),
    (
        "state",
        &["util", "protocol", "wheel", "config", "documents", "store"],
    ),
    (
        "commands",
        &[
            "util",
            "protocol",
            "wheel",
            "config",
            "documents",
            "store",
            "state",
        ],
    ),
    (
        "server",
        &[
            "util",
            "protocol",
            "wheel",
            "config",
            "documents",
            "store",
            "state",
            "commands",
        ],
    ),
];

/// Module path (`store::keyspace`, `` for the crate root) of a source file.
fn module_of(rel: &Path) -> String {
    let s = rel.to_string_lossy().replace('\\', "/");
    let s = s.trim_end_matches(".rs");
    let s = s.strip_suffix("/mod").unwrap_or(s);
    if s == "lib" || s == "main" {
        return String::new();
    }
    s.replace('/', "::")
}

/// The source without `#[cfg(test)]` items (by convention the tests module ends the file).
fn without_tests(src: &str) -> &str {
    match src.find("#[cfg(test)]") {
        Some(i) => &src[..i],
        None => src,
    }
}

/// Every path after `crate::` or `super::` in `src`, with `{a, b::c}` groups expanded.
fn paths(src: &str, module: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = src.as_bytes();
    for (prefix, base) in [("crate::", String::new()), ("super::", parent(module))] {
        let mut from = 0;
        while let Some(i) = src[from..].find(prefix) {
            let at = from + i;
            from = at + prefix.len();
            // Not part of a longer identifier (`mycrate::`).
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            let (tree, _) = read_tree(&src[from..]);
            for p in tree {
                out.push(if base.is_empty() {
                    p
                } else {
                    format!("{base}::{p}")
                });
            }
        }
    }
    out
}

fn parent(module: &str) -> String {
    match module.rsplit_once("::") {
        Some((p, _)) => p.to_string(),
        None => String::new(),
    }
}

/// Reads `a::b::{c, d::{e}}` from the start of `s`: the expanded paths and the length read.
fn read_tree(s: &str) -> (Vec<String>, usize) {
    let b = s.as_bytes();
    let mut i = 0;
    let mut prefix = String::new();
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let word = &s[start..i];
        if !word.is_empty() {
            if !prefix.is_empty() {
                prefix.push_str("::");
            }
            prefix.push_str(word);
        }
        if s[i..].starts_with("::{") {
            i += 3;
            let mut out = Vec::new();
            loop {
                while i < b.len() && (b[i] == b' ' || b[i] == b'\n' || b[i] == b',') {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    return (out, i + 1);
                }
                let (sub, n) = read_tree(&s[i..]);
                for p in sub {
                    out.push(format!("{prefix}::{p}"));
                }
                i += n.max(1);
            }
        } else if s[i..].starts_with("::") {
            i += 2;
        } else {
            return (vec![prefix], i);
        }
    }
}

/// The deepest module of `modules` that `path` names (or lies in).
fn resolve(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path
        .split("::")
        .filter(|p| !p.is_empty() && *p != "self")
        .collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| modules.contains(m))
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

#[test]
fn layers_point_one_way_and_files_form_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read src") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut modules = BTreeSet::new();
    let mut sources = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&root).expect("under src");
        let m = module_of(rel);
        if rel.to_string_lossy() == "main.rs" {
            continue;
        }
        modules.insert(m.clone());
        sources.insert(m, std::fs::read_to_string(f).expect("read"));
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, src) in &sources {
        for p in paths(without_tests(src), m) {
            let Some(to) = resolve(&p, &modules) else {
                continue;
            };
            // Self, and a parent re-exporting its children, are not dependencies.
            if to == *m || (!m.is_empty() && to.starts_with(&format!("{m}::"))) || m.is_empty() {
                continue;
            }
            edges.entry(m.clone()).or_default().insert(to);
        }
    }
    // Layers.
    let mut upward = Vec::new();
    for (from, tos) in &edges {
        let Some((_, allowed)) = LAYERS.iter().find(|(l, _)| *l == top(from)) else {
            continue;
        };
        for to in tos {
            if top(to) != top(from) && !allowed.contains(&top(to)) {
                upward.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the layer order: {upward:#?}"
    );
    // Cycles (depth-first search for a back edge).
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
        found: &mut Vec<String>,
    ) {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for to in edges.get(m).into_iter().flatten() {
            match state.get(to.as_str()).copied().unwrap_or(0) {
                0 => visit(to, edges, state, path, found),
                1 => {
                    let i = path.iter().position(|p| p == to).unwrap_or(0);
                    found.push(format!("{} -> {to}", path[i..].join(" -> ")));
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    let mut found = Vec::new();
    for m in edges.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            visit(m, &edges, &mut state, &mut Vec::new(), &mut found);
        }
    }
    assert!(found.is_empty(), "import cycles between files: {found:#?}");
}
