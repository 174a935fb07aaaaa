//! FAILOVER, the coordinated failover of a standalone master (Redis 6.2+): writes pause, the
//! chosen replica catches up, the master follows it and asks it to take over; the roles swap
//! with every acknowledged write on both. Its refusals answer as redis-server's.

mod support;

use support::{eventually, info_value, q, replicate, reply_text, ReferenceRedis, TestServer};

#[test]
fn refusals_answer_as_redis() {
    let Some(reference) = ReferenceRedis::start() else {
        return;
    };
    let ours = TestServer::start(&[]);
    let mut r = reference.conn();
    let mut t = ours.conn();
    for args in [
        &["FAILOVER"][..],
        &["FAILOVER", "ABORT"],
        &["FAILOVER", "TIMEOUT", "0"],
        &["FAILOVER", "TIMEOUT", "x"],
        &["FAILOVER", "TO", "127.0.0.1", "x"],
        &["FAILOVER", "FORCE"],
        &["FAILOVER", "NOSUCH"],
        &["FAILOVER", "ABORT", "FORCE"],
        &["FAILOVER", "TO", "127.0.0.1", "1", "FORCE"],
    ] {
        assert_eq!(
            reply_text(&mut t, args),
            reply_text(&mut r, args),
            "{args:?}"
        );
    }
}

#[test]
fn the_master_hands_over_to_its_replica_and_follows_it() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    replicate(&mut r, &master);
    for i in 0..100 {
        let _: () = q(&mut m, &["SET", &format!("k{i}"), &i.to_string()]).unwrap();
    }
    assert_eq!(
        info_value(&mut m, "replication", "master_failover_state").as_deref(),
        Some("no-failover")
    );
    // A replica is not a target of its own; a target must be a replica.
    assert_eq!(
        reply_text(&mut r, &["FAILOVER"]),
        "ERR FAILOVER is not valid when server is a replica."
    );
    assert_eq!(
        reply_text(&mut m, &["FAILOVER", "TO", "127.0.0.1", "1"]),
        "ERR FAILOVER target HOST and PORT is not a replica."
    );
    assert_eq!(reply_text(&mut m, &["FAILOVER"]), "ok");
    assert!(
        eventually(10.0, || info_value(&mut r, "replication", "role")
            .as_deref()
            == Some("master")
            && info_value(&mut m, "replication", "role").as_deref()
                == Some("slave")
            && info_value(&mut m, "replication", "master_link_status")
                .as_deref()
                == Some("up")),
        "roles did not swap: replica {:?}, master {:?}",
        info_value(&mut r, "replication", "role"),
        info_value(&mut m, "replication", "role")
    );
    assert_eq!(
        info_value(&mut m, "replication", "master_port").as_deref(),
        Some(replica.port.to_string().as_str())
    );
    assert_eq!(
        info_value(&mut m, "replication", "master_failover_state").as_deref(),
        Some("no-failover")
    );
    // Every write is on the new master, and its writes reach the old one.
    for i in 0..100 {
        let v: String = q(&mut r, &["GET", &format!("k{i}")]).unwrap();
        assert_eq!(v, i.to_string());
    }
    let _: () = q(&mut r, &["SET", "after", "1"]).unwrap();
    assert!(eventually(5.0, || q::<Option<String>>(
        &mut m,
        &["GET", "after"]
    )
    .ok()
    .flatten()
    .as_deref()
        == Some("1")));
    // The old master refuses writes as a replica does.
    let e = support::err_text(q::<String>(&mut m, &["SET", "x", "1"]));
    assert!(e.starts_with("READONLY"), "{e}");
}

/// A replica that cannot acknowledge (stopped): the failover waits with writes paused;
/// ABORT ends it, TIMEOUT gives up on it, and FORCE goes on after the timeout anyway.
#[test]
fn a_failover_waits_for_sync_and_ends_by_abort_timeout_or_force() {
    let master = TestServer::start(&[]);
    let replica = TestServer::start(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    replicate(&mut r, &master);
    let port = replica.port.to_string();
    replica.signal("-STOP");
    let _: () = q(&mut m, &["SET", "unacked", "1"]).unwrap();
    let state = |m: &mut redis::Connection| {
        info_value(m, "replication", "master_failover_state").unwrap_or_default()
    };

    assert_eq!(
        reply_text(
            &mut m,
            &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "60000"]
        ),
        "ok"
    );
    assert_eq!(state(&mut m), "waiting-for-sync");
    assert_eq!(
        reply_text(&mut m, &["FAILOVER"]),
        "ERR FAILOVER already in progress."
    );
    assert_eq!(reply_text(&mut m, &["FAILOVER", "ABORT"]), "ok");
    assert_eq!(state(&mut m), "no-failover");
    let _: () = q(&mut m, &["SET", "k", "v"]).unwrap();

    // A timeout without FORCE gives up, and writes resume.
    assert_eq!(
        reply_text(
            &mut m,
            &["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "300"]
        ),
        "ok"
    );
    assert!(eventually(5.0, || state(&mut m) == "no-failover"));
    assert_eq!(
        info_value(&mut m, "replication", "role").as_deref(),
        Some("master")
    );
    let _: () = q(&mut m, &["SET", "k2", "v"]).unwrap();

    // FORCE goes on after the timeout: the replica takes over once it runs again, with
    // what it had acknowledged and what the master sent it meanwhile.
    assert_eq!(
        reply_text(
            &mut m,
            &[
                "FAILOVER",
                "TO",
                "127.0.0.1",
                &port,
                "TIMEOUT",
                "300",
                "FORCE"
            ]
        ),
        "ok"
    );
    assert!(eventually(5.0, || state(&mut m) == "failover-in-progress"));
    replica.signal("-CONT");
    assert!(
        eventually(10.0, || info_value(&mut r, "replication", "role")
            .as_deref()
            == Some("master")),
        "the replica did not take over"
    );
    assert!(eventually(10.0, || state(&mut m) == "no-failover"
        && info_value(&mut m, "replication", "role").as_deref()
            == Some("slave")));
    let v: Option<String> = q(&mut r, &["GET", "k2"]).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
}
