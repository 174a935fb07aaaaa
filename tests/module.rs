//! MODULE: the container Redis 7.0 has, with no module API behind it. LIST is empty, LOAD and
//! UNLOAD fail as they fail on redis-server for a module that is not there, and the
//! `enable-module-command` guard answers as Redis's.

mod support;

use support::{reply_text, ReferenceRedis, TestServer};

#[test]
fn module_answers_as_redis_without_modules() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let mut r = reference.conn();
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
        assert_eq!(
            reply_text(&mut t, args),
            reply_text(&mut r, args),
            "{args:?}"
        );
    }
    // Allowed, LOAD fails as a module that cannot load fails there; UNLOAD finds nothing.
    let open = TestServer::start(&["--enable-module-command", "yes"]);
    let mut o = open.conn();
    assert_eq!(
        reply_text(&mut o, &["MODULE", "LOAD", "/nonexistent/module.so"]),
        "ERR Error loading the extension. Please check the server logs."
    );
    assert_eq!(
        reply_text(&mut o, &["MODULE", "UNLOAD", "nosuch"]),
        "ERR Error unloading module: no such module with that name"
    );
    assert_eq!(reply_text(&mut o, &["MODULE", "LIST"]), "array([])");
}
