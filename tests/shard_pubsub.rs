//! Sharded pub/sub as Redis 7 without cluster mode: SSUBSCRIBE / SUNSUBSCRIBE / SPUBLISH,
//! PUBSUB SHARDCHANNELS / SHARDNUMSUB, in RESP2 and RESP3, the separate subscription
//! counts, ACL channel rules, and CLIENT KILL / RESET / disconnect clearing them. Byte
//! exact replies on one connection are also in `tests/compare/shard_pubsub.txt`.

mod support;

use std::time::Duration;
use support::{eventually, int, q, resp, strs, TestServer};

fn bulk(s: &str) -> String {
    format!("${}\r\n{}\r\n", s.len(), s)
}

/// A RESP2 (`*`) or RESP3 (`>`) three-element pubsub frame ending in an integer.
fn confirm(head: char, kind: &str, ch: Option<&str>, n: i64) -> Vec<u8> {
    let ch = ch.map_or("$-1\r\n".to_string(), bulk);
    let ch = if head == '>' && ch == "$-1\r\n" {
        "_\r\n".to_string()
    } else {
        ch
    };
    format!("{head}3\r\n{}{ch}:{n}\r\n", bulk(kind)).into_bytes()
}

fn message(head: char, kind: &str, ch: &str, payload: &str) -> Vec<u8> {
    format!("{head}3\r\n{}{}{}", bulk(kind), bulk(ch), bulk(payload)).into_bytes()
}

#[test]
fn resp2_subscribe_publish_and_separate_counts() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut sub = s.raw();
    sub.send(&resp(&["SSUBSCRIBE", "chan1", "chan2", "chan1"]));
    let mut want = confirm('*', "ssubscribe", Some("chan1"), 1);
    want.extend(confirm('*', "ssubscribe", Some("chan2"), 2));
    want.extend(confirm('*', "ssubscribe", Some("chan1"), 2));
    assert_eq!(sub.read_n(want.len()), want);
    // SUBSCRIBE's count does not include the shard channels, and the reverse.
    sub.roundtrip(
        &resp(&["SUBSCRIBE", "chan1"]),
        &confirm('*', "subscribe", Some("chan1"), 1),
    );
    sub.roundtrip(
        &resp(&["PSUBSCRIBE", "chan*"]),
        &confirm('*', "psubscribe", Some("chan*"), 2),
    );
    // SPUBLISH reaches only shard subscribers (patterns never match shard channels);
    // PUBLISH only the plain ones.
    assert_eq!(int(&mut c, &["SPUBLISH", "chan1", "hello"]), 1);
    sub.roundtrip(b"", &message('*', "smessage", "chan1", "hello"));
    assert_eq!(int(&mut c, &["PUBLISH", "chan2", "x"]), 1);
    let pm = b"*4\r\n$8\r\npmessage\r\n$5\r\nchan*\r\n$5\r\nchan2\r\n$1\r\nx\r\n";
    assert_eq!(sub.read_n(pm.len()), pm);
    assert_eq!(
        strs(&mut c, &["PUBSUB", "SHARDNUMSUB", "chan1", "chan2", "nope"]),
        ["chan1", "1", "chan2", "1", "nope", "0"]
    );
    let mut chans = strs(&mut c, &["PUBSUB", "SHARDCHANNELS"]);
    chans.sort();
    assert_eq!(chans, ["chan1", "chan2"]);
    assert_eq!(strs(&mut c, &["PUBSUB", "SHARDCHANNELS", "*2"]), ["chan2"]);
    assert_eq!(strs(&mut c, &["PUBSUB", "CHANNELS"]), ["chan1"]);
    let info: String = q(&mut c, &["INFO", "stats"]).expect("INFO");
    assert!(
        info.contains("pubsub_channels:1\r\npubsub_patterns:1\r\npubsubshard_channels:2\r\n"),
        "{info}"
    );
    let list: String = q(&mut c, &["CLIENT", "LIST"]).expect("CLIENT LIST");
    let line = list
        .lines()
        .find(|l| l.contains("ssub=2"))
        .expect("CLIENT LIST shows ssub=2");
    assert!(
        line.contains("sub=1 psub=1 ssub=2") && line.contains("flags=P"),
        "{line}"
    );
    // Subscribed RESP2 mode: the shard family is allowed, SPUBLISH is not.
    sub.roundtrip(
        &resp(&["SUNSUBSCRIBE", "chan1", "other"]),
        &[
            confirm('*', "sunsubscribe", Some("chan1"), 1),
            confirm('*', "sunsubscribe", Some("other"), 1),
        ]
        .concat(),
    );
    sub.send(&resp(&["SPUBLISH", "chan2", "x"]));
    let e = sub.read_until(b"\r\n");
    assert!(e.starts_with(b"-ERR Can't execute 'spublish'"), "{e:?}");
    // Leaving the plain subscriptions leaves the client subscribed (shard ones remain).
    sub.send(&resp(&["UNSUBSCRIBE"]));
    sub.read_n(confirm('*', "unsubscribe", Some("chan1"), 1).len());
    sub.roundtrip(
        &resp(&["PUNSUBSCRIBE"]),
        &confirm('*', "punsubscribe", Some("chan*"), 0),
    );
    sub.roundtrip(&resp(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    sub.roundtrip(
        &resp(&["SUNSUBSCRIBE"]),
        &confirm('*', "sunsubscribe", Some("chan2"), 0),
    );
    sub.roundtrip(
        &resp(&["SUNSUBSCRIBE"]),
        &confirm('*', "sunsubscribe", None, 0),
    );
    sub.roundtrip(&resp(&["PING"]), b"+PONG\r\n");
    assert_eq!(int(&mut c, &["SPUBLISH", "chan2", "x"]), 0);
    assert!(strs(&mut c, &["PUBSUB", "SHARDCHANNELS"]).is_empty());
}

#[test]
fn resp3_pushes() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let mut sub = s.raw();
    sub.send(&resp(&["HELLO", "3"]));
    sub.read_until(b"modules\r\n*0\r\n");
    sub.roundtrip(
        &resp(&["SSUBSCRIBE", "ch"]),
        &confirm('>', "ssubscribe", Some("ch"), 1),
    );
    // RESP3 may run anything while subscribed, SPUBLISH to itself included. (Redis writes
    // the push before the reply; here pushes are drained between batches, after the
    // replies of the batch, as for PUBLISH — both arrive, in that order.)
    sub.roundtrip(
        &resp(&["SPUBLISH", "ch", "self"]),
        &[b":1\r\n".to_vec(), message('>', "smessage", "ch", "self")].concat(),
    );
    assert_eq!(int(&mut c, &["SPUBLISH", "ch", "hi"]), 1);
    sub.roundtrip(b"", &message('>', "smessage", "ch", "hi"));
    sub.roundtrip(
        &resp(&["SUNSUBSCRIBE", "ch"]),
        &confirm('>', "sunsubscribe", Some("ch"), 0),
    );
    sub.roundtrip(
        &resp(&["SUNSUBSCRIBE"]),
        &confirm('>', "sunsubscribe", None, 0),
    );
    // Inside MULTI it is refused at EXEC, as Redis refuses a DENY_BLOCKING client.
    sub.roundtrip(&resp(&["MULTI"]), b"+OK\r\n");
    sub.roundtrip(&resp(&["SSUBSCRIBE", "m"]), b"+QUEUED\r\n");
    sub.roundtrip(
        &resp(&["EXEC"]),
        b"*1\r\n-ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client\r\n",
    );
    assert_eq!(
        strs(&mut c, &["PUBSUB", "SHARDNUMSUB", "m"]),
        ["m", "0"],
        "nothing subscribed"
    );
}

#[test]
fn kill_reset_and_disconnect_clear_shard_subscriptions() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    let numsub = |c: &mut redis::Connection| -> String {
        strs(c, &["PUBSUB", "SHARDNUMSUB", "k"])[1].clone()
    };
    // RESET.
    let mut a = s.raw();
    a.roundtrip(
        &resp(&["SSUBSCRIBE", "k"]),
        &confirm('*', "ssubscribe", Some("k"), 1),
    );
    assert_eq!(numsub(&mut c), "1");
    a.roundtrip(&resp(&["RESET"]), b"+RESET\r\n");
    assert_eq!(numsub(&mut c), "0");
    // CLIENT KILL TYPE pubsub: a client with only shard channels is a pubsub client.
    a.roundtrip(
        &resp(&["SSUBSCRIBE", "k"]),
        &confirm('*', "ssubscribe", Some("k"), 1),
    );
    assert_eq!(int(&mut c, &["CLIENT", "KILL", "TYPE", "pubsub"]), 1);
    assert!(a.closed());
    assert!(eventually(5.0, || numsub(&mut c) == "0"));
    // Disconnect.
    let mut b = s.raw();
    b.roundtrip(
        &resp(&["SSUBSCRIBE", "k"]),
        &confirm('*', "ssubscribe", Some("k"), 1),
    );
    drop(b);
    assert!(eventually(5.0, || numsub(&mut c) == "0"));
    assert_eq!(int(&mut c, &["SPUBLISH", "k", "x"]), 0);
}

#[test]
fn acl_channel_rules_apply() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    q::<()>(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "su",
            "on",
            ">pw",
            "resetchannels",
            "&ch:*",
            "+@all",
            "~*",
        ],
    )
    .expect("SETUSER");
    let mut u = s.raw();
    u.roundtrip(&resp(&["AUTH", "su", "pw"]), b"+OK\r\n");
    let noperm =
        b"-NOPERM this user has no permissions to access one of the channels used as arguments\r\n";
    // One refused channel refuses the whole command, nothing is subscribed.
    u.roundtrip(&resp(&["SSUBSCRIBE", "ch:1", "other"]), noperm);
    u.roundtrip(&resp(&["SPUBLISH", "other", "x"]), noperm);
    u.roundtrip(&resp(&["SPUBLISH", "ch:1", "x"]), b":0\r\n");
    // Unsubscribing is never refused.
    u.roundtrip(
        &resp(&["SUNSUBSCRIBE", "other"]),
        &confirm('*', "sunsubscribe", Some("other"), 0),
    );
    u.roundtrip(
        &resp(&["SSUBSCRIBE", "ch:1"]),
        &confirm('*', "ssubscribe", Some("ch:1"), 1),
    );
    let dry: String = q(&mut c, &["ACL", "DRYRUN", "su", "SPUBLISH", "zz", "x"]).expect("DRYRUN");
    assert_eq!(
        dry,
        "This user has no permissions to access the 'zz' channel"
    );
    // Narrowing the user's channels closes its subscriber whose shard channel is no
    // longer granted (Redis's ACLKillPubsubClientsIfNeeded).
    q::<()>(&mut c, &["ACL", "SETUSER", "su", "resetchannels", "&other"]).expect("SETUSER");
    u.0.set_read_timeout(Some(Duration::from_secs(5))).ok();
    assert!(
        u.closed(),
        "subscriber with a revoked shard channel is closed"
    );
    assert!(eventually(5.0, || strs(
        &mut c,
        &["PUBSUB", "SHARDNUMSUB", "ch:1"]
    )[1] == "0"));
}
