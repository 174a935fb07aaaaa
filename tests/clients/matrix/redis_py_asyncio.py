"""redis-py 8's asyncio client (unmodified) against PORT.

    python3 redis_py_asyncio.py PORT

Checks, each on what the server answered:
- RESP3 handshake (`protocol=3`): HELLO's map, CLIENT INFO resp=3, RESP3 map/double/set;
- `pipeline(transaction=True)`: WATCH, another client's write between WATCH and EXEC makes
  EXEC fail (WatchError), the retry succeeds; concurrent WATCH/MULTI increments from ten
  tasks lose no update; an error inside MULTI stays in its slot;
- pubsub (RESP2 and RESP3): SUBSCRIBE/PSUBSCRIBE, message and pmessage, PUBLISH's receiver
  count, UNSUBSCRIBE/PUNSUBSCRIBE;
- `execute_command` for DOC.*: insert, find, update, findone, a TTL index, delete, with many
  concurrent commands on one client.

redis-py 8.1's asyncio client has no client-side cache (`cache_config` is a sync-only
option), so the cache is checked by redis_py_sync.py.
Exits non-zero listing what failed.
"""

import asyncio
import json
import sys
import time
from datetime import datetime, timedelta, timezone

import redis
import redis.asyncio as aredis

from common import check, finish

PORT = int(sys.argv[1])


def date(dt):
    return {"$date": dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"}


async def next_message(p, secs=2.0):
    deadline = time.time() + secs
    while time.time() < deadline:
        m = await p.get_message(timeout=0.1)
        if m is not None:
            return m
    return None


async def handshake(admin):
    r3 = aredis.Redis(port=PORT, protocol=3, decode_responses=True)
    check(await r3.ping() is True, "PING over RESP3")
    hello = await r3.execute_command("HELLO", 3)
    check(isinstance(hello, dict) and hello.get("proto") == 3, f"HELLO 3 is a map with proto 3 ({hello!r})")
    check((await r3.client_info()).get("resp") == "3", "CLIENT INFO says resp=3")
    await r3.hset("h", mapping={"a": "1"})
    check(await r3.execute_command("HGETALL", "h") == {"a": "1"}, "HGETALL is a RESP3 map")
    await r3.zadd("z", {"m": 2.25})
    score = await r3.execute_command("ZSCORE", "z", "m")
    check(isinstance(score, float) and score == 2.25, f"ZSCORE is a RESP3 double ({score!r})")
    await r3.sadd("s", "x")
    check(await r3.execute_command("SMEMBERS", "s") == {"x"}, "SMEMBERS is a RESP3 set")
    await r3.aclose()


async def transactions(admin):
    r = aredis.Redis(port=PORT, protocol=3, decode_responses=True)
    await r.set("counter", 10)
    attempts = 0
    async with r.pipeline(transaction=True) as pipe:
        while True:
            try:
                await pipe.watch("counter")
                attempts += 1
                current = int(await pipe.get("counter"))
                if attempts == 1:
                    await admin.set("counter", 100)
                pipe.multi()
                pipe.set("counter", current + 1)
                pipe.get("counter")
                result = await pipe.execute()
                break
            except redis.WatchError:
                if attempts > 3:
                    raise
    check(attempts == 2, f"WATCH: the first EXEC aborted, the retry ran ({attempts} attempts)")
    check(result == [True, "101"], f"EXEC's replies ({result!r})")

    # Ten tasks, each on its own pooled connection, increment with WATCH/MULTI: retries
    # absorb the conflicts and no increment is lost.
    await r.set("shared", 0)
    retries = 0

    async def bump():
        nonlocal retries
        for _ in range(5):
            async with r.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        await pipe.watch("shared")
                        n = int(await pipe.get("shared"))
                        await asyncio.sleep(0)
                        pipe.multi()
                        pipe.set("shared", n + 1)
                        await pipe.execute()
                        break
                    except redis.WatchError:
                        retries += 1

    await asyncio.gather(*(bump() for _ in range(10)))
    check(await r.get("shared") == "50", f"50 concurrent WATCH increments ({await r.get('shared')}, {retries} retries)")

    async with r.pipeline(transaction=True) as pipe:
        pipe.set("str", "abc").incr("str").get("str")
        res = await pipe.execute(raise_on_error=False)
    check(
        res[0] is True and isinstance(res[1], redis.ResponseError) and res[2] == "abc",
        f"an error inside MULTI stays in its slot ({res!r})",
    )
    await r.aclose()


async def pubsub(admin):
    for proto in (2, 3):
        sub = aredis.Redis(port=PORT, protocol=proto, decode_responses=True)
        p = sub.pubsub()
        await p.subscribe("chat")
        await p.psubscribe("chat.*")
        confirms = [await next_message(p), await next_message(p)]
        check(
            [(m or {}).get("type") for m in confirms] == ["subscribe", "psubscribe"],
            f"RESP{proto}: subscribe/psubscribe confirmed ({confirms!r})",
        )
        check(await admin.publish("chat", "hi") == 1, f"RESP{proto}: PUBLISH chat reaches 1")
        m = await next_message(p)
        check(m and m["type"] == "message" and m["data"] == "hi", f"RESP{proto}: message ({m!r})")
        check(await admin.publish("chat.room1", "yo") == 1, f"RESP{proto}: PUBLISH chat.room1 reaches 1")
        m = await next_message(p)
        check(
            m and m["type"] == "pmessage" and m["pattern"] == "chat.*" and m["channel"] == "chat.room1",
            f"RESP{proto}: pmessage ({m!r})",
        )
        await p.unsubscribe("chat")
        await p.punsubscribe("chat.*")
        unsubs = [await next_message(p), await next_message(p)]
        check(
            [(m or {}).get("type") for m in unsubs] == ["unsubscribe", "punsubscribe"],
            f"RESP{proto}: unsubscribed ({unsubs!r})",
        )
        check(await admin.publish("chat", "late") == 0, f"RESP{proto}: nobody receives after unsubscribe")
        await p.aclose()
        await sub.aclose()


async def documents(admin):
    r = aredis.Redis(port=PORT, protocol=3, decode_responses=True)
    await r.flushall()
    # 200 inserts, 50 in flight at once on one client (its pool opens up to 100).
    ids = []
    for batch in range(4):
        ids += await asyncio.gather(
            *(
                r.execute_command("DOC.INSERT", "items", json.dumps({"_id": i, "n": i % 10}))
                for i in range(batch * 50, batch * 50 + 50)
            )
        )
    check(ids == [[str(i)] for i in range(200)], "200 concurrent DOC.INSERTs reply their _ids")
    check(await r.execute_command("DOC.COUNT", "items", '{"n":3}') == 20, "DOC.COUNT with a filter")
    found = [json.loads(d) for d in await r.execute_command("DOC.FIND", "items", '{"n":3}', "SORT", '{"_id":1}', "LIMIT", 3)]
    check([d["_id"] for d in found] == [3, 13, 23], f"DOC.FIND SORT LIMIT ({found!r})")
    upd = await r.execute_command("DOC.UPDATE", "items", '{"n":3}', '{"$set":{"hit":true}}', "MULTI")
    check(upd == [20, 20, None], f"DOC.UPDATE MULTI ({upd!r})")
    one = json.loads(await r.execute_command("DOC.FINDONE", "items", '{"_id":13}'))
    check(one == {"_id": 13, "n": 3, "hit": True}, f"DOC.FINDONE sees the update ({one!r})")
    check(await r.execute_command("DOC.DELETE", "items", '{"hit":true}', "LIMIT", 1) == 1, "DOC.DELETE LIMIT 1")
    check(await r.execute_command("DOC.DELETE", "items", '{"hit":true}') == 19, "DOC.DELETE the rest")

    now = datetime.now(timezone.utc)
    await r.execute_command(
        "DOC.INSERT", "tokens",
        json.dumps({"_id": "a", "exp": date(now - timedelta(seconds=10))}),
        json.dumps({"_id": "b", "exp": date(now + timedelta(days=1))}),
    )
    check(await r.execute_command("DOC.EXPIREINDEX", "tokens", "exp", 0) == "exp_1", "DOC.EXPIREINDEX")
    left = [json.loads(d)["_id"] for d in await r.execute_command("DOC.FIND", "tokens", "{}")]
    check(left == ["b"], f"a due document is hidden at once ({left!r})")
    await r.aclose()


async def main():
    admin = aredis.Redis(port=PORT, decode_responses=True)
    await admin.flushall()
    await handshake(admin)
    await transactions(admin)
    await pubsub(admin)
    await documents(admin)
    await admin.aclose()


asyncio.run(main())
finish()
