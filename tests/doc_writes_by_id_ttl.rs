//! Writes by `_id` that go in place (DOC.UPDATE of `$set`/`$currentDate`, DOC.TOUCH) read
//! whether the document is due from its TTL entries rather than from its bytes: an expired
//! document is gone for them as for every other command, and a live one is written.

mod support;

use support::{int, q, strs, TestServer};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn date(ms: i64) -> String {
    format!(r#"{{"$date":{{"$numberLong":"{ms}"}}}}"#)
}

#[test]
fn in_place_writes_by_id_skip_expired_documents_and_refresh_live_ones() {
    let s = TestServer::start(&["--ttl-monitor-period", "3600"]);
    let mut c = s.conn();
    let _: String = q(&mut c, &["DOC.EXPIREINDEX", "s", "accessTime", "5"]).expect("index");
    let _: String = q(&mut c, &["DOC.CREATEINDEX", "s", r#"{"userID":1}"#]).expect("index");
    let now = now_ms();
    for (id, at) in [("old", now - 10_000), ("live", now - 1_000)] {
        let doc = format!(
            r#"{{"_id":"{id}","userID":"u-{id}","accessTime":{}}}"#,
            date(at)
        );
        assert_eq!(strs(&mut c, &["DOC.INSERT", "s", &doc]).len(), 1);
    }
    let upd = r#"{"$set":{"userID":"u-new"},"$currentDate":{"accessTime":true}}"#;
    // Expired: not touched, not updated; an upsert inserts it anew.
    assert_eq!(int(&mut c, &["DOC.TOUCH", "s", r#"{"_id":"old"}"#]), 0);
    let r: Vec<redis::Value> = q(&mut c, &["DOC.UPDATE", "s", r#"{"_id":"old"}"#, upd]).expect("u");
    assert_eq!(r[0], redis::Value::Int(0));
    let r: Vec<redis::Value> = q(
        &mut c,
        &["DOC.UPDATE", "s", r#"{"_id":"old"}"#, upd, "UPSERT"],
    )
    .expect("upsert");
    assert_eq!(
        (&r[0], &r[1]),
        (&redis::Value::Int(0), &redis::Value::Int(0))
    );
    assert!(!matches!(r[2], redis::Value::Nil), "{r:?}");
    // Live: updated in place, its index entry moved.
    let r: Vec<redis::Value> = q(
        &mut c,
        &["DOC.UPDATE", "s", r#"{"_id":"live"}"#, upd, "UPSERT"],
    )
    .expect("upsert");
    assert_eq!(
        (&r[0], &r[1]),
        (&redis::Value::Int(1), &redis::Value::Int(1))
    );
    assert_eq!(int(&mut c, &["DOC.COUNT", "s", r#"{"userID":"u-new"}"#]), 2);
    assert_eq!(
        int(&mut c, &["DOC.COUNT", "s", r#"{"userID":"u-live"}"#]),
        0
    );
    assert_eq!(int(&mut c, &["DOC.TOUCH", "s", r#"{"_id":"live"}"#]), 1);
    // Setting the indexed field to what it holds keeps its one entry.
    let same = r#"{"$set":{"userID":"u-new"},"$currentDate":{"accessTime":true}}"#;
    let r: Vec<redis::Value> =
        q(&mut c, &["DOC.UPDATE", "s", r#"{"_id":"live"}"#, same]).expect("u");
    assert_eq!(r[0], redis::Value::Int(1));
    assert_eq!(int(&mut c, &["DOC.COUNT", "s", r#"{"userID":"u-new"}"#]), 2);
}
