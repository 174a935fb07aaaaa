//! A script's `{big_number = ...}` reply: a RESP3 big number to a RESP3 client (CR and LF
//! made spaces), a bulk string to a RESP2 one, as Redis's `addReplyBigNum` (Redis's
//! unit/scripting "malformed big number protocol parsing").

mod support;

use support::{resp, TestServer};

const SCRIPT: &str = "return {1, {big_number='123\\r\\n123'}}";

#[test]
fn big_number_follows_the_callers_protocol() {
    let s = TestServer::start(&[]);
    let mut r = s.raw();
    r.roundtrip(
        &resp(&["EVAL", SCRIPT, "0"]),
        b"*2\r\n:1\r\n$8\r\n123  123\r\n",
    );
    r.send(&resp(&["HELLO", "3"]));
    r.read_until(b"modules\r\n*0\r\n");
    r.roundtrip(&resp(&["EVAL", SCRIPT, "0"]), b"*2\r\n:1\r\n(123  123\r\n");
    // Whatever protocol the script itself chose.
    r.roundtrip(
        &resp(&["EVAL", &format!("redis.setresp(3) {SCRIPT}"), "0"]),
        b"*2\r\n:1\r\n(123  123\r\n",
    );
}
