//! FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS/KILL and FCALL/FCALL_RO, with Redis
//! 7.0's replies and error texts.

mod support;

use redis::Value;
use support::{err_text, q, TestServer};

fn lib(name: &str, func: &str, body: &str) -> String {
    format!(
        "#!lua name={name}\nredis.register_function('{func}', function(KEYS, ARGV)\n {body} \nend)"
    )
}

fn load(c: &mut redis::Connection, code: &str) -> redis::RedisResult<String> {
    q(c, &["FUNCTION", "LOAD", code])
}

#[test]
fn load_call_delete_and_errors() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    assert_eq!(
        load(&mut c, &lib("test", "test", "return 'hello'")).unwrap(),
        "test"
    );
    assert_eq!(
        q::<String>(&mut c, &["FCALL", "test", "0"]).unwrap(),
        "hello"
    );
    // Function names are case-insensitive.
    assert_eq!(
        q::<String>(&mut c, &["FCALL", "TEST", "0"]).unwrap(),
        "hello"
    );
    let e = err_text(load(&mut c, &lib("test", "test", "return 1")));
    assert_eq!(e, "ERR Library 'test' already exists");
    let e = err_text(q::<String>(
        &mut c,
        &["FUNCTION", "LOAD", "foo", "bar", "x"],
    ));
    assert_eq!(e, "ERR Unknown option given: foo");
    let e = err_text(load(&mut c, &lib("bad-name", "f", "return 1")));
    assert!(
        e.starts_with("ERR Library names can only contain letters"),
        "{e}"
    );
    let e = err_text(load(
        &mut c,
        "#!bad_engine name=x\nredis.register_function('f', function() end)",
    ));
    assert_eq!(e, "ERR Engine 'bad_engine' not found");
    let e = err_text(load(&mut c, "#!lua name=x\nbad script"));
    assert!(e.starts_with("ERR Error compiling function"), "{e}");
    let e = err_text(load(&mut c, "#!lua name=x\nreturn 1"));
    assert_eq!(e, "ERR No functions registered");
    let e = err_text(load(&mut c, "#!lua name=x\nredis.call('ping')"));
    assert_eq!(e, "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'");
    let e = err_text(load(
        &mut c,
        "#!lua name=x\nlocal a = 1 while 1 do a = a + 1 end",
    ));
    assert_eq!(
        e,
        "ERR Error registering functions: ERR FUNCTION LOAD timeout"
    );
    let e = err_text(load(&mut c, "#!lua name=x\na = 1"));
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
    let e = err_text(load(&mut c, "#!lua name=x\nredis.register_function('f1')"));
    assert!(e.contains("calling redis.register_function with a single argument is only applicable to Lua table"), "{e}");
    let e = err_text(load(&mut c, "#!lua name=x\nredis.register_function{function_name='f1', callback=function() end, flags={'bad'}}"));
    assert!(e.ends_with("unknown flag given"), "{e}");
    let e = err_text(load(&mut c, "#!lua name=x\nredis.register_function('f', function() end)\nredis.register_function('f', function() end)"));
    assert!(e.ends_with("Function already exists in the library"), "{e}");
    // A function name another library holds.
    let e = err_text(load(&mut c, &lib("other", "test", "return 1")));
    assert_eq!(e, "ERR Function test already exists");
    // A failed REPLACE keeps the old library.
    let e = err_text(q::<String>(
        &mut c,
        &["FUNCTION", "LOAD", "REPLACE", "#!lua name=test\nerror('x')"],
    ));
    assert!(e.starts_with("ERR Error registering functions"), "{e}");
    assert_eq!(
        q::<String>(&mut c, &["FCALL", "test", "0"]).unwrap(),
        "hello"
    );

    let e = err_text(q::<String>(&mut c, &["FCALL", "test", "bad"]));
    assert_eq!(e, "ERR Bad number of keys provided");
    let e = err_text(q::<String>(&mut c, &["FCALL", "test", "10", "k"]));
    assert_eq!(e, "ERR Number of keys can't be greater than number of args");
    let e = err_text(q::<String>(&mut c, &["FCALL", "test", "-1", "k"]));
    assert_eq!(e, "ERR Number of keys can't be negative");
    let e = err_text(q::<String>(&mut c, &["FCALL", "nope", "0"]));
    assert_eq!(e, "ERR Function not found");
    let _: () = q(&mut c, &["FUNCTION", "DELETE", "test"]).unwrap();
    let e = err_text(q::<String>(&mut c, &["FUNCTION", "DELETE", "test"]));
    assert_eq!(e, "ERR Library not found");
    let e = err_text(q::<String>(&mut c, &["FCALL", "test", "0"]));
    assert_eq!(e, "ERR Function not found");
    let e = err_text(q::<String>(&mut c, &["FUNCTION", "KILL"]));
    assert_eq!(e, "NOTBUSY No scripts in execution right now.");
}

#[test]
fn keys_flags_and_read_only() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    load(
        &mut c,
        &lib("w", "setter", "return redis.call('set', KEYS[1], ARGV[1])"),
    )
    .unwrap();
    assert_eq!(
        q::<String>(&mut c, &["FCALL", "setter", "1", "x", "foo"]).unwrap(),
        "OK"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "x"]).unwrap(), "foo");
    let e = err_text(q::<String>(
        &mut c,
        &["FCALL_RO", "setter", "1", "x", "foo"],
    ));
    assert_eq!(
        e,
        "ERR Can not execute a script with write flag using *_ro command."
    );
    load(
        &mut c,
        "#!lua name=ro\nredis.register_function{function_name='getter', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}\nredis.register_function{function_name='bad', callback=function(keys) return redis.call('set', keys[1], 1) end, flags={'no-writes'}}",
    )
    .unwrap();
    assert_eq!(
        q::<String>(&mut c, &["FCALL_RO", "getter", "1", "x"]).unwrap(),
        "foo"
    );
    let e = err_text(q::<String>(&mut c, &["FCALL", "bad", "1", "x"]));
    assert!(e.starts_with("ERR Write commands are not allowed from read-only scripts. script: bad, on @user_function:"), "{e}");
    let keys: Vec<String> = q(
        &mut c,
        &["COMMAND", "GETKEYS", "FCALL", "setter", "1", "x", "foo"],
    )
    .unwrap();
    assert_eq!(keys, ["x"]);
    // Runtime globals are the full API; the library API is gone after the load.
    load(&mut c, "#!lua name=inner\nredis.register_function('reg', function() redis.register_function('x', function() end) end)").unwrap();
    let e = err_text(q::<String>(&mut c, &["FCALL", "reg", "0"]));
    assert!(
        e.contains("attempt to call field 'register_function' (a nil value)"),
        "{e}"
    );
}

#[test]
fn list_dump_restore_flush_stats() {
    let s = TestServer::start(&[]);
    let mut c = s.conn();
    load(
        &mut c,
        "#!lua name=lib\nredis.register_function{function_name='f1', callback=function() return 'hello' end, description='some desc', flags={'allow-oom', 'no-writes'}}",
    )
    .unwrap();
    let list: Value = q(&mut c, &["FUNCTION", "LIST"]).unwrap();
    let expect = Value::Array(vec![Value::Array(vec![
        Value::BulkString(b"library_name".to_vec()),
        Value::BulkString(b"lib".to_vec()),
        Value::BulkString(b"engine".to_vec()),
        Value::BulkString(b"LUA".to_vec()),
        Value::BulkString(b"functions".to_vec()),
        Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"name".to_vec()),
            Value::BulkString(b"f1".to_vec()),
            Value::BulkString(b"description".to_vec()),
            Value::BulkString(b"some desc".to_vec()),
            Value::BulkString(b"flags".to_vec()),
            Value::Array(vec![
                Value::SimpleString("no-writes".into()),
                Value::SimpleString("allow-oom".into()),
            ]),
        ])]),
    ])]);
    assert_eq!(list, expect);
    let none: Vec<Value> = q(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME", "nomatch*"]).unwrap();
    assert!(none.is_empty());
    let e = err_text(q::<String>(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME"]));
    assert_eq!(e, "ERR library name argument was not given");
    let e = err_text(q::<String>(&mut c, &["FUNCTION", "LIST", "bad"]));
    assert_eq!(e, "ERR Unknown argument bad");

    let dump: Vec<u8> = q(&mut c, &["FUNCTION", "DUMP"]).unwrap();
    let _: () = q(&mut c, &["FUNCTION", "FLUSH"]).unwrap();
    let empty: Vec<Value> = q(&mut c, &["FUNCTION", "LIST"]).unwrap();
    assert!(empty.is_empty());
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&dump)
        .query(&mut c)
        .unwrap();
    assert_eq!(q::<String>(&mut c, &["FCALL", "f1", "0"]).unwrap(), "hello");
    let e = err_text(
        redis::cmd("FUNCTION")
            .arg("RESTORE")
            .arg(&dump)
            .query::<()>(&mut c),
    );
    assert_eq!(e, "ERR Library lib already exists");
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&dump)
        .arg("REPLACE")
        .query(&mut c)
        .unwrap();
    let e = err_text(q::<String>(&mut c, &["FUNCTION", "RESTORE", "bad_payload"]));
    assert_eq!(e, "ERR DUMP payload version or checksum are wrong");
    let e = err_text(q::<String>(&mut c, &["FUNCTION", "RESTORE", "a", "b", "c"]));
    assert_eq!(
        e,
        "ERR unknown subcommand or wrong number of arguments for 'RESTORE'. Try FUNCTION HELP."
    );
    let e = err_text(
        redis::cmd("FUNCTION")
            .arg("RESTORE")
            .arg(&dump)
            .arg("bad")
            .query::<()>(&mut c),
    );
    assert_eq!(
        e,
        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
    );
    // FLUSHALL does not touch functions; the payload restores with FLUSH over another library.
    let _: () = q(&mut c, &["FLUSHALL"]).unwrap();
    load(&mut c, &lib("other", "g", "return 2")).unwrap();
    let _: () = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&dump)
        .arg("FLUSH")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        err_text(q::<String>(&mut c, &["FCALL", "g", "0"])),
        "ERR Function not found"
    );

    let stats: Value = q(&mut c, &["FUNCTION", "STATS"]).unwrap();
    assert_eq!(
        stats,
        Value::Array(vec![
            Value::BulkString(b"running_script".to_vec()),
            Value::Nil,
            Value::BulkString(b"engines".to_vec()),
            Value::Array(vec![
                Value::BulkString(b"LUA".to_vec()),
                Value::Array(vec![
                    Value::BulkString(b"libraries_count".to_vec()),
                    Value::Int(1),
                    Value::BulkString(b"functions_count".to_vec()),
                    Value::Int(1),
                ]),
            ]),
        ])
    );
    let n = support::info_value(&mut c, "memory", "number_of_functions");
    assert_eq!(n.as_deref(), Some("1"));
    let vm: u64 = support::info_value(&mut c, "memory", "used_memory_vm_functions")
        .unwrap()
        .parse()
        .unwrap();
    assert!(vm > 0);
    let e = err_text(q::<String>(&mut c, &["FUNCTION", "FLUSH", "bad"]));
    assert_eq!(e, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
}

/// A busy function: BUSY names FUNCTION KILL, STATS shows it, SCRIPT KILL does not kill it,
/// FUNCTION KILL does.
#[test]
fn busy_function_and_function_kill() {
    let s = TestServer::start(&["--busy-reply-threshold", "50"]);
    let mut c = s.conn();
    load(
        &mut c,
        &lib("spin", "spin", "local a = 1 while true do a = a + 1 end"),
    )
    .unwrap();
    let client = s.client();
    let runner = std::thread::spawn(move || {
        let mut r = client.get_connection().unwrap();
        err_text(q::<String>(&mut r, &["FCALL", "spin", "0"]))
    });
    assert!(support::eventually(5.0, || {
        q::<String>(&mut c, &["PING"]).is_err_and(|e| e.code() == Some("BUSY"))
    }));
    let e = err_text(q::<String>(&mut c, &["PING"]));
    assert_eq!(
        e,
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    );
    let stats: Value = q(&mut c, &["FUNCTION", "STATS"]).unwrap();
    let Value::Array(items) = stats else {
        panic!("{stats:?}")
    };
    let Value::Array(running) = &items[1] else {
        panic!("{items:?}")
    };
    assert_eq!(running[1], Value::BulkString(b"spin".to_vec()));
    assert_eq!(
        running[3],
        Value::Array(vec![
            Value::BulkString(b"FCALL".to_vec()),
            Value::BulkString(b"spin".to_vec()),
            Value::BulkString(b"0".to_vec()),
        ])
    );
    let e = err_text(q::<String>(&mut c, &["SCRIPT", "KILL"]));
    assert!(e.starts_with("BUSY"), "{e}");
    let _: () = q(&mut c, &["FUNCTION", "KILL"]).unwrap();
    let e = runner.join().unwrap();
    assert!(e.contains("Script killed by user with SCRIPT KILL"), "{e}");
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
}
