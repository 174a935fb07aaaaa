//! ARCHITECTURE.md stays a map of the code: it names every source file under `src/` by its
//! path from the repository root (`src/state/pause.rs`), and it stays short.

use std::path::{Path, PathBuf};

/// The most ARCHITECTURE.md may weigh, in bytes.
const MAX_BYTES: usize = 15_000;

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Whether `text` names `path` as a path of its own: not as the tail of a longer one
/// (`src/documents/query.rs` inside `src/commands/documents/query.rs`), nor as the head of
/// a longer name.
fn mentions(text: &str, path: &str) -> bool {
    let part_of_path = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    let mut from = 0;
    while let Some(i) = text[from..].find(path) {
        let at = from + i;
        let end = at + path.len();
        let before = text[..at].chars().next_back();
        let after = text[end..].chars().next();
        if !before.is_some_and(part_of_path)
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return true;
        }
        from = at + 1;
    }
    false
}

#[test]
fn architecture_md_names_every_source_file_and_stays_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc_path = root.join("ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&doc_path)
        .unwrap_or_else(|e| panic!("read {}: {e}", doc_path.display()));

    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(!files.is_empty(), "no .rs file found under src/");
    let mut missing: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(root)
                .expect("under the repository root")
                .to_string_lossy()
                .replace('\\', "/")
        })
        .filter(|rel| !mentions(&doc, rel))
        .collect();
    missing.sort();

    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "ARCHITECTURE.md does not mention {} source file(s) (name each by its path in the \
             code map, with what it holds):\n  {}",
            missing.len(),
            missing.join("\n  ")
        ));
    }
    if doc.len() > MAX_BYTES {
        problems.push(format!(
            "ARCHITECTURE.md is {} bytes, more than {MAX_BYTES}: keep it a map (measurements \
             go to docs/architecture-history.md or docs/BENCHMARKS.md)",
            doc.len()
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn a_path_inside_a_longer_path_is_not_a_mention() {
    let doc = "`src/commands/documents/query.rs` and src/util/glob.rs, `src/util/mod.rs`.";
    assert!(mentions(doc, "src/commands/documents/query.rs"));
    assert!(!mentions(doc, "src/documents/query.rs"));
    assert!(mentions(doc, "src/util/glob.rs"));
    assert!(mentions(doc, "src/util/mod.rs"));
    assert!(!mentions("src/util/mod.rss", "src/util/mod.rs"));
}
