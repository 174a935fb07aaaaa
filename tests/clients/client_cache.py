"""redis-py's client-side cache (RESP3 + CLIENT TRACKING) against the server on PORT.

    python3 client_cache.py PORT

Checks, counting the server's calls with INFO commandstats from a second, uncached client:
- a repeated GET is served from redis-py's cache (one call on the server), and another
  client's SET invalidates it (the next GET goes to the server and sees the new value);
- DOC.FINDONE through execute_command: redis-py caches only the read-only commands of its
  allow list (CacheConfig.DEFAULT_ALLOW_LIST: GET, HGET, ...), so with the default config every
  DOC.FINDONE goes to the server; with a config that allows it (and the collection given as
  the command's key, keys=[...]) it is served from the cache until another client's
  DOC.UPDATE invalidates the collection.
- FLUSHALL (a null invalidation) empties the cache.

redis-py (8.1) enables its cache only when HELLO reports `server: redis` and a `version` of
at least CacheProxyConnection.MIN_ALLOWED_VERSION ("7.4.0"); the server reports 7.4.0, so the
library runs unmodified (the script checks the gate passes).
Exits non-zero with what failed.
"""

import sys
import time

import redis
from redis.cache import CacheConfig
from redis.connection import CacheProxyConnection

PORT = int(sys.argv[1])


def version_tuple(v):
    return tuple(int(p) for p in v.split(".")[:3])


failures = []
_reported = redis.Redis(port=PORT, decode_responses=True).info("server")["redis_version"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


check(
    version_tuple(_reported) >= version_tuple(CacheProxyConnection.MIN_ALLOWED_VERSION),
    f"the reported version {_reported} passes redis-py's cache gate "
    f"({CacheProxyConnection.MIN_ALLOWED_VERSION}), so the library runs unmodified",
)


def calls(admin, cmd):
    stats = admin.info("commandstats")
    row = stats.get("cmdstat_" + cmd)
    return int(row["calls"]) if row else 0


def eventually(f, secs=2.0):
    """The invalidation is pushed when the write is made; it reaches the cached client's
    socket a moment later (as with Redis), so a read right after may still hit."""
    deadline = time.time() + secs
    while time.time() < deadline:
        if f():
            return True
        time.sleep(0.02)
    return f()


class DocCacheConfig(CacheConfig):
    """The default allow list plus DOC.FINDONE."""

    def is_allowed_to_cache(self, command):
        return command == "DOC.FINDONE" or super().is_allowed_to_cache(command)


admin = redis.Redis(port=PORT, decode_responses=True)
admin.flushall()
cached = redis.Redis(
    port=PORT, protocol=3, cache_config=CacheConfig(), decode_responses=True
)

# GET: one round trip for three reads.
admin.set("k", "v1")
admin.config_resetstat()
values = [cached.get("k") for _ in range(3)]
check(values == ["v1"] * 3, f"GET returns the value each time ({values})")
check(calls(admin, "get") == 1, f"3 GETs, {calls(admin, 'get')} reached the server")

# Another client's write invalidates it.
admin.set("k", "v2")
check(eventually(lambda: cached.get("k") == "v2"), "GET sees v2 after SET by another client")
n = calls(admin, "get")
cached.get("k")
check(calls(admin, "get") == n, "the new value is cached again")

# DOC.FINDONE with the default allow list: not cached by redis-py.
admin.execute_command("DOC.INSERT", "users", '{"_id":1,"name":"ada"}')
admin.config_resetstat()
for _ in range(2):
    cached.execute_command("DOC.FINDONE", "users", '{"_id":1}', keys=["users"])
check(
    calls(admin, "doc.findone") == 2,
    "default CacheConfig: each DOC.FINDONE reaches the server "
    f"({calls(admin, 'doc.findone')} of 2)",
)

# With DOC.FINDONE allowed: cached until the collection changes.
doc_cached = redis.Redis(
    port=PORT, protocol=3, cache_config=DocCacheConfig(), decode_responses=True
)
admin.config_resetstat()


def find():
    return doc_cached.execute_command("DOC.FINDONE", "users", '{"_id":1}', keys=["users"])


first = [find() for _ in range(3)]
check(all("ada" in str(d) for d in first), f"DOC.FINDONE returns the document ({first[0]})")
check(
    calls(admin, "doc.findone") == 1,
    f"3 DOC.FINDONE, {calls(admin, 'doc.findone')} reached the server",
)
admin.execute_command("DOC.UPDATE", "users", '{"_id":1}', '{"$set":{"name":"grace"}}')
check(eventually(lambda: "grace" in str(find())), "DOC.UPDATE by another client invalidates it")
# A GET cached on the same client stays cached: only the collection was invalidated.
n = calls(admin, "get")
doc_cached.get("k")
doc_cached.get("k")
check(calls(admin, "get") == n + 1, "GET cached next to the document")

# FLUSHALL: a null invalidation empties both caches.
admin.flushall()
check(eventually(lambda: doc_cached.get("k") is None), "FLUSHALL empties the cache")
check(eventually(lambda: find() is None), "the document is gone after FLUSHALL")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
