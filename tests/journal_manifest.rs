//! What the server does at start with the journal's manifest and the files it names, as
//! Redis 7.0's `aofLoadManifestFromFile` and `loadAppendOnlyFiles`: a damaged manifest or a
//! named file that is missing stops the start (exit 1, Redis's reason in the log) and leaves
//! every file as it was, since loading what remains would serve a shorter data set than the
//! one written; what Redis accepts (comments, unknown keys, gaps in the sequence, empty
//! files) loads every file; an append-only file of Redis before 7.0 in `dir` becomes the
//! base of a manifest.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{int, q, strs, TestServer};

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("tidecache-manifest-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("appendonlydir")).expect("temp dir");
    dir
}

/// One `SET key value` as a RESP record, as an AOF file holds it.
fn set_record(key: &str, value: &str) -> String {
    format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
        key.len(),
        value.len()
    )
}

/// Writes `name` in the journal directory with a `SET` of each pair.
fn aof_file(dir: &Path, name: &str, sets: &[(&str, &str)]) {
    let text: String = sets.iter().map(|(k, v)| set_record(k, v)).collect();
    std::fs::write(dir.join("appendonlydir").join(name), text).expect("write aof file");
}

fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("appendonlydir/appendonly.aof.manifest")
}

fn start(dir: &Path) -> TestServer {
    TestServer::start(&[
        "--dir",
        dir.to_str().expect("utf-8 path"),
        "--appendonly",
        "yes",
    ])
}

/// Starts the server on `dir` expecting it to stop by itself; its exit code and the
/// Redis-format log (standard output). A server still running after 10 s is killed and
/// reported with no exit code.
fn start_refused(dir: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidecache-server"))
        .args(["--port", "0", "--save", "", "--appendonly", "yes", "--dir"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let code = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st.code();
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (code, reader.join().unwrap_or_default())
}

/// Every file of the journal directory with its content.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join("appendonlydir"))
        .expect("aof dir")
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    out.sort();
    out
}

/// Redis 7.0's integration/aof-multi-part cases where Redis refuses to start, each with the
/// reason its log gives, plus the refusals of `aofLoadManifestFromFile` that unit does not
/// reach (a path for a file name, a sequence of 0, an unbalanced quote, a last line without
/// its newline). The reason is logged once, after Redis's header and the offending line.
#[test]
fn a_damaged_manifest_stops_the_start_with_redis_s_reason() {
    let base = "file appendonly.aof.1.base.aof seq 1 type b\n";
    let incr1 = "file appendonly.aof.1.incr.aof seq 1 type i\n";
    let long = format!("{}\n", base.trim_end().repeat(30));
    let cases: Vec<(String, &str, Option<usize>)> = vec![
        (
            "file appendonly.aof.2.incr.aof seq 2 type i\nfile appendonly.aof.1.incr.aof seq 1 type i\n".into(),
            "Found a non-monotonic sequence number",
            Some(2),
        ),
        (
            format!("{incr1}\nfile appendonly.aof.3.incr.aof seq 3 type i\n"),
            "Invalid AOF manifest file format",
            Some(2),
        ),
        (
            format!("{base}file appendonly.aof.2.base.aof seq 2 type b\n{incr1}"),
            "Found duplicate base file information",
            Some(2),
        ),
        (
            format!("file appendonly.aof.1.base.aof seq 1 type x\n{incr1}"),
            "Unknown AOF file type",
            Some(1),
        ),
        (
            format!("filx appendonly.aof.1.base.aof seq 1 type b\n{incr1}"),
            "Invalid AOF manifest file format",
            Some(1),
        ),
        (
            format!("{base}file appendonly.aof.1.incr.aof type i\n"),
            "Invalid AOF manifest file format",
            Some(2),
        ),
        (
            format!("{long}{incr1}"),
            "The AOF manifest file contains too long line",
            Some(1),
        ),
        (
            format!("{base}file appendonly.aof.1.incr.aof seq 1 type i newkey\n"),
            "Invalid AOF manifest file format",
            Some(2),
        ),
        (String::new(), "Found an empty AOF manifest", None),
        (
            format!("{base}file ../appendonly.aof.1.incr.aof seq 1 type i\n"),
            "File can't be a path, just a filename",
            Some(2),
        ),
        (
            format!("{base}file appendonly.aof.1.incr.aof seq 0 type i\n"),
            "Invalid AOF manifest file format",
            Some(2),
        ),
        (
            format!("{base}file \"appendonly.aof.1.incr.aof seq 1 type i\n"),
            "Invalid AOF manifest file format",
            Some(2),
        ),
        (
            format!("{base}{}", incr1.trim_end()),
            "The AOF manifest file contains too long line",
            Some(2),
        ),
    ];
    for (i, (manifest, reason, line)) in cases.iter().enumerate() {
        let dir = temp_dir(&format!("bad{i}"));
        aof_file(&dir, "appendonly.aof.1.base.aof", &[("k1", "v1")]);
        aof_file(&dir, "appendonly.aof.1.incr.aof", &[("k2", "v2")]);
        aof_file(&dir, "appendonly.aof.2.incr.aof", &[("k3", "v3")]);
        aof_file(&dir, "appendonly.aof.3.incr.aof", &[("k4", "v4")]);
        std::fs::write(manifest_path(&dir), manifest).expect("manifest");
        let before = files(&dir);
        let (code, log) = start_refused(&dir);
        assert_eq!(code, Some(1), "{manifest:?}: {log}");
        assert_eq!(log.matches(reason).count(), 1, "{manifest:?}: {log}");
        assert!(
            log.contains("*** FATAL AOF MANIFEST FILE ERROR ***"),
            "{log}"
        );
        if let Some(n) = line {
            assert!(
                log.contains(&format!("Reading the manifest file, at line {n}")),
                "{manifest:?}: {log}"
            );
        }
        assert!(!log.contains("Ready to accept connections"), "{log}");
        assert_eq!(files(&dir), before, "{manifest:?}: the files changed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A file the manifest names that is not there stops the start before anything is loaded
/// (Redis checks every file's size first), naming the file and the system's reason; so does
/// a manifest naming the pre-7.0 file name when that file is in neither directory.
#[test]
fn a_missing_file_stops_the_start_before_anything_loads() {
    let dir = temp_dir("missing");
    aof_file(&dir, "appendonly.aof.1.base.aof", &[("k1", "v1")]);
    aof_file(&dir, "appendonly.aof.2.incr.aof", &[("k2", "v2")]);
    std::fs::write(
        manifest_path(&dir),
        "file appendonly.aof.1.base.aof seq 1 type b\n\
         file appendonly.aof.1.incr.aof seq 1 type i\n\
         file appendonly.aof.2.incr.aof seq 2 type i\n",
    )
    .expect("manifest");
    let before = files(&dir);
    let (code, log) = start_refused(&dir);
    assert_eq!(code, Some(1), "{log}");
    assert_eq!(
        log.matches("Unable to obtain the AOF file appendonly.aof.1.incr.aof length. stat: No such file or directory")
            .count(),
        1,
        "{log}"
    );
    assert!(!log.contains("DB loaded"), "{log}");
    assert_eq!(files(&dir), before);
    let _ = std::fs::remove_dir_all(&dir);

    let dir = temp_dir("missing-old");
    std::fs::write(manifest_path(&dir), "file appendonly.aof seq 1 type b\n").expect("manifest");
    let (code, log) = start_refused(&dir);
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains(
            "Unable to obtain the AOF file appendonly.aof length. stat: No such file or directory"
        ),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What Redis accepts loads every file: comments, a key it does not know, keys in capitals,
/// a history entry, a gap in the incremental sequence, an empty incremental file.
#[test]
fn an_accepted_manifest_loads_every_file() {
    let dir = temp_dir("accepted");
    aof_file(&dir, "appendonly.aof.1.base.aof", &[("k1", "v1")]);
    aof_file(&dir, "appendonly.aof.1.incr.aof", &[]);
    aof_file(&dir, "appendonly.aof.3.incr.aof", &[("k3", "v3")]);
    std::fs::write(
        manifest_path(&dir),
        "# a comment\n\
         FILE appendonly.aof.1.base.aof SEQ 1 TYPE b newkey newvalue\n\
         file appendonly.aof.0.base.aof seq 9 type h\n\
         file appendonly.aof.1.incr.aof seq 1 type i\n\
         file appendonly.aof.3.incr.aof seq 3 type i\n",
    )
    .expect("manifest");
    let s = start(&dir);
    let mut c = s.conn();
    assert_eq!(strs(&mut c, &["MGET", "k1", "k3"]), ["v1", "v3"]);
    assert_eq!(int(&mut c, &["DBSIZE"]), 2);
    // Appends go to the last incremental file.
    let _: () = q(&mut c, &["SET", "k4", "v4"]).expect("set");
    drop(c);
    drop(s);
    let last = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.3.incr.aof"))
        .expect("incr 3");
    assert!(last.contains("k4"), "{last}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An `appendonly.aof` of Redis before 7.0 in `dir` is moved into the journal directory as
/// the base of a new manifest and loaded (Redis's `aofUpgradePrepare`), where it used to be
/// left out of the data set; the same when an earlier upgrade wrote the manifest and stopped
/// before the move. When the directory already holds a file of that name, that one is the
/// base and the one in `dir` is left alone.
#[test]
fn an_old_style_aof_becomes_the_base_of_a_manifest() {
    let old = |dir: &Path, name: &str, sets: &[(&str, &str)]| {
        let text: String = sets.iter().map(|(k, v)| set_record(k, v)).collect();
        std::fs::write(dir.join(name), text).expect("old aof");
    };
    let want_manifest =
        "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
    for interrupted in [false, true] {
        let dir = std::env::temp_dir().join(format!(
            "tidecache-manifest-upgrade{interrupted}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        old(
            &dir,
            "appendonly.aof",
            &[("k1", "v1"), ("k2", "v2"), ("k3", "v3")],
        );
        if interrupted {
            std::fs::create_dir_all(dir.join("appendonlydir")).expect("aof dir");
            std::fs::write(manifest_path(&dir), "file appendonly.aof seq 1 type b\n")
                .expect("manifest");
        }
        let s = start(&dir);
        let mut c = s.conn();
        assert_eq!(
            strs(&mut c, &["MGET", "k1", "k2", "k3"]),
            ["v1", "v2", "v3"]
        );
        assert!(!dir.join("appendonly.aof").exists());
        assert!(dir.join("appendonlydir/appendonly.aof").exists());
        assert_eq!(
            std::fs::read_to_string(manifest_path(&dir)).expect("manifest"),
            want_manifest
        );
        let _: () = q(&mut c, &["SET", "k4", "v4"]).expect("set");
        drop(c);
        drop(s);
        let s = start(&dir);
        let mut c = s.conn();
        assert_eq!(int(&mut c, &["DBSIZE"]), 4);
        drop(c);
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }

    let dir = temp_dir("both");
    old(&dir, "appendonly.aof", &[("k1", "v1")]);
    std::fs::write(manifest_path(&dir), "file appendonly.aof seq 1 type b\n").expect("manifest");
    aof_file(&dir, "appendonly.aof", &[("k4", "v4"), ("k5", "v5")]);
    let s = start(&dir);
    let mut c = s.conn();
    assert_eq!(int(&mut c, &["EXISTS", "k1"]), 0);
    assert_eq!(strs(&mut c, &["MGET", "k4", "k5"]), ["v4", "v5"]);
    assert!(dir.join("appendonly.aof").exists());
    assert_eq!(
        std::fs::read_to_string(manifest_path(&dir)).expect("manifest"),
        want_manifest
    );
    drop(c);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
