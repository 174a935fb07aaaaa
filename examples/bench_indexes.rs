//! Measures secondary indexes against a running tidecache: the bulk insert rate of log events
//! without and with two secondary indexes, and `DOC.FIND` by an indexed field against the
//! same query by collection scan.
//!
//! ```text
//! cargo run --release --example bench_indexes -- [redis://127.0.0.1:6379/] [documents]
//! ```

use std::time::Instant;

use tidecache::util::rng::XorShift as Rng;

const BATCH: usize = 1000;

fn event(rng: &mut Rng, i: u64) -> String {
    // One event a second from 2000-10-01; 1000 hosts, 500 paths.
    let t = 970_358_400_000i64 + i as i64 * 1000;
    format!(
        r#"{{"host":"10.{}.{}.{}","time":{{"$date":{{"$numberLong":"{t}"}}}},"path":"/p{}","status":200,"response_size":{},"user_agent":"Mozilla/5.0"}}"#,
        rng.below(4),
        rng.below(16),
        rng.below(16),
        rng.below(500),
        rng.below(50_000)
    )
}

fn load(con: &mut redis::Connection, coll: &str, n: u64) -> f64 {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let started = Instant::now();
    let mut i = 0;
    while i < n {
        // Pipelined batches keep the connection busy without waiting for each reply.
        let mut pipe = redis::pipe();
        for _ in 0..8 {
            if i >= n {
                break;
            }
            let mut cmd = redis::cmd("DOC.INSERT");
            cmd.arg(coll);
            for _ in 0..BATCH.min((n - i) as usize) {
                cmd.arg(event(&mut rng, i));
                i += 1;
            }
            pipe.add_command(cmd).ignore();
        }
        pipe.query::<()>(con).expect("insert");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn time_find(
    con: &mut redis::Connection,
    coll: &str,
    filter: &str,
    runs: u32,
) -> (f64, usize, String) {
    let mut n = 0;
    let started = Instant::now();
    for _ in 0..runs {
        let out: Vec<String> = redis::cmd("DOC.FIND")
            .arg(coll)
            .arg(filter)
            .query(con)
            .expect("find");
        n = out.len();
    }
    let per = started.elapsed().as_secs_f64() * 1e6 / runs as f64;
    let plan: String = redis::cmd("DOC.EXPLAIN")
        .arg(coll)
        .arg(filter)
        .query(con)
        .expect("explain");
    (per, n, plan)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .map_or("redis://127.0.0.1:6379/", String::as_str);
    let n: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let client = redis::Client::open(url).expect("url");
    let mut con = client.get_connection().expect("connect");
    let _: () = redis::cmd("FLUSHALL").query(&mut con).expect("flush");

    let plain = load(&mut con, "plain", n);
    println!(
        "bulk insert, no secondary index:    {plain:>10.0} docs/s ({n} docs, batches of {BATCH})"
    );
    for keys in [r#"{"host":1,"time":1}"#, r#"{"path":1}"#] {
        let _: String = redis::cmd("DOC.CREATEINDEX")
            .arg("indexed")
            .arg(keys)
            .query(&mut con)
            .expect("index");
    }
    let indexed = load(&mut con, "indexed", n);
    println!("bulk insert, two secondary indexes: {indexed:>10.0} docs/s");

    let started = Instant::now();
    let _: String = redis::cmd("DOC.CREATEINDEX")
        .arg("plain")
        .arg(r#"{"path":1}"#)
        .query(&mut con)
        .expect("index");
    println!(
        "index build over {n} docs:         {:>10.2} s",
        started.elapsed().as_secs_f64()
    );
    let _: String = redis::cmd("DOC.DROPINDEX")
        .arg("plain")
        .arg("path_1")
        .query(&mut con)
        .expect("drop");

    for filter in [
        r#"{"path":"/p17"}"#.to_string(),
        r#"{"host":"10.1.2.3","time":{"$gte":{"$date":"2000-10-01T00:00:00Z"},"$lt":{"$date":"2000-10-02T00:00:00Z"}}}"#.to_string(),
    ] {
        let (ix_us, ix_n, ix_plan) = time_find(&mut con, "indexed", &filter, 50);
        let (cs_us, cs_n, cs_plan) = time_find(&mut con, "plain", &filter, 3);
        assert_eq!(ix_n, cs_n);
        println!("DOC.FIND {filter}: {ix_n} docs");
        println!("  indexed:  {ix_us:>12.0} µs/query  {ix_plan}");
        println!("  COLLSCAN: {cs_us:>12.0} µs/query  {cs_plan}");
    }
}
