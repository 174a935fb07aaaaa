//! MODULE: the container Redis 7.0 has, with no module API behind it. LIST is empty, LOAD and
//! UNLOAD fail as they fail on redis-server for a module that is not there, and the
//! `enable-module-command` guard answers as Redis's.

mod support;

use support::{err_text, ReferenceRedis, TestServer};

fn reply(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(v) => format!("{v:?}"),
        Err(_) => err_text(cmd.query::<redis::Value>(c)),
    }
}

#[test]
fn module_answers_as_redis_without_modules() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", reference.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut t = ours.conn();
    for args in [
        &["MODULE", "LIST"][..],
        &["MODULE", "HELP"],
        &["MODULE", "LOAD", "/nonexistent/module.so"],
        &["MODULE", "LOADEX", "/nonexistent/module.so", "ARGS", "a"],
        &["MODULE", "UNLOAD", "nosuch"],
        &["MODULE", "LIST", "extra"],
        &["MODULE", "NOSUCH"],
        &["MODULE"],
    ] {
        assert_eq!(reply(&mut t, args), reply(&mut r, args), "{args:?}");
    }
    // Allowed, LOAD fails as a module that cannot load fails there; UNLOAD finds nothing.
    let open = TestServer::start(&["--enable-module-command", "yes"]);
    let mut o = open.conn();
    assert_eq!(
        reply(&mut o, &["MODULE", "LOAD", "/nonexistent/module.so"]),
        "ERR Error loading the extension. Please check the server logs."
    );
    assert_eq!(
        reply(&mut o, &["MODULE", "UNLOAD", "nosuch"]),
        "ERR Error unloading module: no such module with that name"
    );
    assert_eq!(reply(&mut o, &["MODULE", "LIST"]), "array([])");
}
