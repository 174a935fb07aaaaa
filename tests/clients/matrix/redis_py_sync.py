"""redis-py 8 (sync, unmodified but for the cache's version gate below) against PORT.

    python3 redis_py_sync.py PORT

Checks, each on what the server answered:
- RESP3 handshake (`protocol=3`): HELLO's reply as redis-py keeps it, CLIENT INFO showing
  resp=3, RESP3 types (a map as a dict, a double as a float, a set as a set);
- `pipeline(transaction=True)`: WATCH, a write by another client between WATCH and EXEC
  makes EXEC fail (WatchError), the retry succeeds; an error inside MULTI is returned in its
  slot while the other commands run; `Redis.transaction()`; a 1000-command plain pipeline;
- pubsub (RESP2 and RESP3): SUBSCRIBE and PSUBSCRIBE confirmations, a message and a
  pmessage with their channel/pattern, PUBLISH's receiver count, UNSUBSCRIBE/PUNSUBSCRIBE;
- client-side cache (RESP3 + CLIENT TRACKING): a repeated GET and a repeated DOC.FINDONE
  reach the server once (INFO commandstats read from another connection), another client's
  write to the key invalidates the GET only, its DOC.UPDATE invalidates the document only,
  and one MULTI writing both invalidates both; an insert into the collection invalidates
  every cached query on it;
- `execute_command` for DOC.*: insert, find, findone, update (with upsert), a TTL index
  (DOC.EXPIREINDEX) hiding a due document at once and another one when it falls due, delete.

The version gate: redis-py's CacheProxyConnection.connect() refuses the cache unless HELLO
says `server: redis` and `version` >= CacheProxyConnection.MIN_ALLOWED_VERSION ("7.4.0" in
redis-py 8.1). The server reports 7.4.0, so the library runs unmodified; the script checks
that the gate passes rather than lowering it.
Exits non-zero listing what failed.
"""

import json
import sys
import time
from datetime import datetime, timedelta, timezone

import redis
from redis.cache import CacheConfig
from redis.connection import CacheProxyConnection

from common import calls, check, eventually, finish

PORT = int(sys.argv[1])


def version_tuple(v):
    return tuple(int(p) for p in v.split(".")[:3])


def date(dt):
    """Extended JSON date (milliseconds, UTC)."""
    return {"$date": dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"}


admin = redis.Redis(port=PORT, decode_responses=True)
admin.flushall()

# --- RESP3 handshake ------------------------------------------------------------------
r3 = redis.Redis(port=PORT, protocol=3, decode_responses=True)
check(r3.ping() is True, "PING over RESP3")
conn = r3.connection_pool.get_connection()
meta = conn.handshake_metadata
r3.connection_pool.release(conn)
check(isinstance(meta, dict), f"HELLO 3 replies a map ({type(meta).__name__})")
check(meta.get("proto") == 3, f"HELLO reports proto 3 ({meta.get('proto')!r})")
check(meta.get("server") == "redis", f"HELLO server field ({meta.get('server')!r})")
check(
    isinstance(meta.get("version"), str) and len(meta["version"].split(".")) == 3,
    f"HELLO version field ({meta.get('version')!r})",
)
check(r3.client_info().get("resp") == "3", "CLIENT INFO says resp=3")
r3.hset("h", mapping={"a": "1", "b": "2"})
raw_map = r3.execute_command("HGETALL", "h")
check(raw_map == {"a": "1", "b": "2"}, f"HGETALL is a RESP3 map ({raw_map!r})")
r3.zadd("z", {"m": 1.5})
score = r3.execute_command("ZSCORE", "z", "m")
check(isinstance(score, float) and score == 1.5, f"ZSCORE is a RESP3 double ({score!r})")
r3.sadd("s", "x", "y")
members = r3.execute_command("SMEMBERS", "s")
check(members == {"x", "y"}, f"SMEMBERS is a RESP3 set ({members!r})")
check(r3.get("missing") is None, "GET of a missing key is RESP3 null")

# --- transactions ---------------------------------------------------------------------
other = redis.Redis(port=PORT, decode_responses=True)
r3.set("counter", 10)
attempts = 0
with r3.pipeline(transaction=True) as pipe:
    while True:
        try:
            pipe.watch("counter")
            attempts += 1
            current = int(pipe.get("counter"))
            if attempts == 1:
                # Another client writes the watched key before EXEC: EXEC must fail.
                other.set("counter", 100)
            pipe.multi()
            pipe.set("counter", current + 1)
            pipe.get("counter")
            result = pipe.execute()
            break
        except redis.WatchError:
            if attempts > 3:
                raise
check(attempts == 2, f"WATCH: the first EXEC aborted, the retry ran ({attempts} attempts)")
check(result == [True, "101"], f"EXEC's replies ({result!r})")

with r3.pipeline(transaction=True) as pipe:
    pipe.set("str", "abc").incr("str").append("str", "d").get("str")
    res = pipe.execute(raise_on_error=False)
check(
    res[0] is True and isinstance(res[1], redis.ResponseError) and res[2:] == [4, "abcd"],
    f"an error inside MULTI stays in its slot, the rest runs ({res!r})",
)


def move(pipe):
    n = int(pipe.get("counter"))
    pipe.multi()
    pipe.set("counter", n * 2)


r3.transaction(move, "counter")
check(r3.get("counter") == "202", "Redis.transaction() with WATCH")

with r3.pipeline(transaction=False) as pipe:
    for i in range(1000):
        pipe.rpush("list", i)
    out = pipe.execute()
check(out[-1] == 1000 and r3.llen("list") == 1000, "1000-command pipeline")

# --- pubsub ---------------------------------------------------------------------------


def next_message(p, secs=2.0):
    deadline = time.time() + secs
    while time.time() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    return None


for proto in (2, 3):
    sub = redis.Redis(port=PORT, protocol=proto, decode_responses=True)
    p = sub.pubsub()
    p.subscribe("news.tech")
    p.psubscribe("news.*")
    confirms = [next_message(p), next_message(p)]
    check(
        [(m or {}).get("type") for m in confirms] == ["subscribe", "psubscribe"],
        f"RESP{proto}: subscribe/psubscribe confirmed ({confirms!r})",
    )
    check(confirms[1] and confirms[1]["data"] == 2, f"RESP{proto}: 2 subscriptions counted")
    receivers = admin.publish("news.tech", "hello")
    check(receivers == 2, f"RESP{proto}: PUBLISH reaches the channel and the pattern ({receivers})")
    got = [next_message(p), next_message(p)]
    kinds = sorted((m or {}).get("type", "none") for m in got)
    check(kinds == ["message", "pmessage"], f"RESP{proto}: message and pmessage ({got!r})")
    pm = next((m for m in got if m and m["type"] == "pmessage"), {})
    check(
        pm.get("pattern") == "news.*" and pm.get("channel") == "news.tech" and pm.get("data") == "hello",
        f"RESP{proto}: pmessage names pattern and channel",
    )
    check(admin.publish("news.sport", "x") == 1, f"RESP{proto}: only the pattern matches news.sport")
    m = next_message(p)
    check(m and m["channel"] == "news.sport", f"RESP{proto}: pattern message for news.sport")
    p.unsubscribe("news.tech")
    p.punsubscribe("news.*")
    unsubs = [next_message(p), next_message(p)]
    check(
        [(m or {}).get("type") for m in unsubs] == ["unsubscribe", "punsubscribe"]
        and unsubs[1]["data"] == 0,
        f"RESP{proto}: unsubscribed ({unsubs!r})",
    )
    check(admin.publish("news.tech", "late") == 0, f"RESP{proto}: nobody receives after unsubscribe")
    # The connection is still usable for commands after leaving pubsub.
    check(p.connection is not None, f"RESP{proto}: pubsub connection kept")
    p.close()
    sub.close()

# --- execute_command for DOC.* --------------------------------------------------------
admin.flushall()
ids = admin.execute_command(
    "DOC.INSERT", "users",
    json.dumps({"_id": 1, "name": "ada", "age": 36}),
    json.dumps({"_id": 2, "name": "bob", "age": 17}),
    json.dumps({"_id": 3, "name": "cy", "age": 52}),
)
check(ids == ["1", "2", "3"], f"DOC.INSERT replies the _ids ({ids!r})")
found = [json.loads(d) for d in admin.execute_command("DOC.FIND", "users", '{"age":{"$gte":18}}', "SORT", '{"age":-1}')]
check([d["_id"] for d in found] == [3, 1], f"DOC.FIND with a filter and a sort ({found!r})")
upd = admin.execute_command("DOC.UPDATE", "users", '{"_id":2}', '{"$inc":{"age":1}}')
check(upd == [1, 1, None], f"DOC.UPDATE replies [matched, modified, upserted] ({upd!r})")
upd = admin.execute_command("DOC.UPDATE", "users", '{"_id":9}', '{"$set":{"name":"dee"}}', "UPSERT")
check(upd == [0, 0, "9"], f"DOC.UPDATE UPSERT replies the new _id ({upd!r})")
one = json.loads(admin.execute_command("DOC.FINDONE", "users", '{"_id":2}'))
check(one == {"_id": 2, "name": "bob", "age": 18}, f"DOC.FINDONE sees the update ({one!r})")
check(admin.execute_command("DOC.FINDONE", "users", '{"_id":42}') is None, "DOC.FINDONE of no match is null")
deleted = admin.execute_command("DOC.DELETE", "users", '{"age":{"$lt":40}}')
check(deleted == 2, f"DOC.DELETE replies the count ({deleted!r})")
check(admin.execute_command("DOC.COUNT", "users", "{}") == 2, "DOC.COUNT after the delete")

now = datetime.now(timezone.utc)
admin.execute_command(
    "DOC.INSERT", "sessions",
    json.dumps({"_id": "old", "at": date(now - timedelta(hours=1))}),
    json.dumps({"_id": "soon", "at": date(now - timedelta(seconds=59))}),
    json.dumps({"_id": "fresh", "at": date(now)}),
)
name = admin.execute_command("DOC.EXPIREINDEX", "sessions", "at", 60)
check(name == "at_1", f"DOC.EXPIREINDEX names the index ({name!r})")
indexes = [json.loads(i) for i in admin.execute_command("DOC.INDEXES", "sessions")]
check(
    any(i.get("name") == "at_1" and i.get("expireAfterSeconds") == 60 for i in indexes),
    f"DOC.INDEXES shows the TTL ({indexes!r})",
)
alive = sorted(json.loads(d)["_id"] for d in admin.execute_command("DOC.FIND", "sessions", "{}"))
check(alive == ["fresh", "soon"], f"the due document is gone at once ({alive!r})")
check(
    eventually(lambda: admin.execute_command("DOC.COUNT", "sessions", "{}") == 1, secs=4.0),
    "the next document expires when it falls due",
)

# --- client-side cache ----------------------------------------------------------------
server_version = meta.get("version", "0.0.0")
# redis-py runs unmodified: its own version gate must let the cache in.
check(
    version_tuple(server_version) >= version_tuple(CacheProxyConnection.MIN_ALLOWED_VERSION),
    f"HELLO's version {server_version} passes redis-py's cache gate "
    f"({CacheProxyConnection.MIN_ALLOWED_VERSION})",
)


class DocCacheConfig(CacheConfig):
    """redis-py caches only its allow list (GET, HGET, ...); this adds DOC.FINDONE, a
    read-only command whose key is the collection (passed with `keys=[...]`)."""

    def is_allowed_to_cache(self, command):
        return command == "DOC.FINDONE" or super().is_allowed_to_cache(command)


admin.flushall()
admin.set("greeting", "v1")
admin.execute_command("DOC.INSERT", "users", '{"_id":1,"name":"ada"}')
cached = redis.Redis(port=PORT, protocol=3, cache_config=DocCacheConfig(), decode_responses=True)


def get():
    return cached.get("greeting")


def find():
    doc = cached.execute_command("DOC.FINDONE", "users", '{"_id":1}', keys=["users"])
    return json.loads(doc)["name"] if doc else None


def server_calls():
    c = calls(admin.info("commandstats"))
    return c.get("get", 0), c.get("doc.findone", 0)


admin.config_resetstat()
values = [(get(), find()) for _ in range(3)]
check(values == [("v1", "ada")] * 3, f"cached reads return the values ({values!r})")
check(server_calls() == (1, 1), f"3 GETs and 3 DOC.FINDONEs: (GET, FINDONE) reached the server {server_calls()} times")

admin.set("greeting", "v2")
check(eventually(lambda: get() == "v2"), "another client's SET invalidates the cached GET")
before = server_calls()
check(find() == "ada" and server_calls()[1] == before[1], "the document stays cached after SET")

admin.execute_command("DOC.UPDATE", "users", '{"_id":1}', '{"$set":{"name":"grace"}}')
check(eventually(lambda: find() == "grace"), "another client's DOC.UPDATE invalidates the cached DOC.FINDONE")
before = server_calls()
check(get() == "v2" and server_calls()[0] == before[0], "the GET stays cached after DOC.UPDATE")

# One transaction writing both invalidates both.
with admin.pipeline(transaction=True) as pipe:
    pipe.set("greeting", "v3")
    pipe.execute_command("DOC.UPDATE", "users", '{"_id":1}', '{"$set":{"name":"hopper"}}')
    pipe.execute()
check(eventually(lambda: (get(), find()) == ("v3", "hopper")), "one MULTI invalidates both entries")
before = server_calls()
[(get(), find()) for _ in range(2)]
check(server_calls() == before, f"both are cached again ({before} -> {server_calls()})")
# The server invalidates a collection as a whole (its name is the tracked key): two cached
# queries on it both go back to the server after an insert of an unrelated document.
def find_id(i):
    return cached.execute_command("DOC.FINDONE", "users", json.dumps({"_id": i}), keys=["users"])


admin.execute_command("DOC.INSERT", "users", '{"_id":2,"name":"bob"}')


def both_cached():
    # redis-py drops a reply whose key was invalidated while it was in flight (the insert's
    # invalidation can arrive just before it), so warm up until a round is all hits.
    find_id(1), find_id(2)
    start = server_calls()[1]
    find_id(1), find_id(2)
    return server_calls()[1] == start


check(eventually(both_cached), "two DOC.FINDONE queries cached side by side")
admin.execute_command("DOC.INSERT", "users", '{"_id":3,"name":"cy"}')


def both_refetched():
    start = server_calls()[1]
    find_id(1), find_id(2)
    return server_calls()[1] == start + 2


check(eventually(both_refetched), "an insert into the collection invalidates both queries")
cached.close()

finish()
