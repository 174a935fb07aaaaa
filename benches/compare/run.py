#!/usr/bin/env python3
"""Side-by-side measurement of tidecache against redis-server 7.

    python3 benches/compare/run.py            # full run (15 to 20 minutes on 2 cores)
    python3 benches/compare/run.py --quick    # smoke-sized run (under 2 minutes), used by CI

Builds the release binary, starts `redis-server` and `target/release/tidecache-server` on free
ports (never 6379) and measures, always on both servers unless said otherwise:

1. throughput with `redis-benchmark -c 50`, alternating redis / tidecache per workload so that
   machine noise hits both (median of 3 rounds, 5 at pipeline 1, the order flipped each round);
2. RSS per key for keys of 32 B with `EX`, per hash of 2 fields with `EXPIRE`, and (tidecache
   only) per session document under a TTL index, loaded with `redis-cli --pipe`;
3. `DOC.FIND` by `_id` latency while a TTL index sweeps documents all due in the same second
   (tidecache only; idle vs during);
4. the hit ratio of a Zipf(0.99) GET / SET-on-miss trace under the same `maxmemory` with
   `allkeys-lru`;
5. GET and SET at pipeline 1 and 16 over TLS (`--only tls`, also in the default run), with a
   throwaway CA and server certificate made by `openssl` in a temporary directory;
6. GET and SET at pipeline 1 and 16 on each server standalone and as a one-node cluster owning
   every slot (`--only cluster`, also in the default run), and the per-slot key index's bytes
   per key.

Prints the tables, writes them to `target/compare/results.md` and `results.json`, and draws
`target/compare/throughput.svg` and `target/compare/expiry-latency.svg`.

A command a server does not implement (or that fails) makes its row "n/a (error: ...)"; the
run goes on and exits 0. The exit code is non-zero only when the harness itself breaks (the
build fails, a server does not start, an exception). Every subprocess has a timeout and every
server started here is killed on every exit path.

Python 3.11 standard library only, so it runs on a fresh machine.
"""

import argparse
import atexit
import datetime
import itertools
import hashlib
import json
import math
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "target", "compare")


class HarnessError(Exception):
    """The harness itself cannot go on (as opposed to a command a server lacks)."""


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def short(text, limit=70):
    # No "|": the text ends up in Markdown table cells.
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# RESP over a raw socket


class RespError(str):
    """An error reply (`-ERR ...`), kept apart from simple strings."""


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Client:
    """A minimal RESP2 client: one socket, explicit pipelining, timeouts on every read."""

    def __init__(self, port, timeout=30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self):
        if self.pos > (1 << 20):
            del self.buf[: self.pos]
            self.pos = 0
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos : i])
                self.pos = i + 2
                return line
            self._fill()

    def _bytes(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n + 2
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode(errors="replace")
        if t == b"-":
            return RespError(rest.decode(errors="replace"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._bytes(n)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if t == b"%":
            return {self.read(): self.read() for _ in range(int(rest))}
        if t == b"_":
            return None
        if t == b",":
            return float(rest)
        if t == b"#":
            return rest == b"t"
        raise ConnectionError(f"unexpected reply line {line[:60]!r}")

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.read()

    def pipeline(self, payloads):
        """Sends already encoded commands in one write and reads one reply per command."""
        self.sock.sendall(b"".join(payloads))
        return [self.read() for _ in payloads]


def first_error(replies):
    for r in replies:
        if isinstance(r, RespError):
            return r
    return None


def load(client, payloads, batch=1000):
    """Pipelines `payloads` in batches; returns (errors, first error text)."""
    errors, first = 0, None
    for i in range(0, len(payloads), batch):
        for r in client.pipeline(payloads[i : i + batch]):
            if isinstance(r, RespError):
                errors += 1
                first = first or r
    return errors, first


# ---------------------------------------------------------------------------------------------
# processes


def free_port():
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port != 6379:
            return port


def free_cluster_port():
    """A free port whose cluster bus port (+10000) is free too; at most 55535, as Redis's
    cluster mode requires."""
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(20000, 55536)
        if port == 6379:
            continue
        socks = []
        try:
            for p in (port, port + 10000):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise HarnessError("no free port pair for a cluster node")


def run(cmd, timeout, stdin=None):
    """Runs `cmd`; returns (exit code or None on timeout, stdout, stderr). Never raises on
    failure of the command itself."""
    try:
        p = subprocess.run(
            cmd,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
            text=True,
            errors="replace",
        )
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, f"timeout after {timeout}s"


SERVERS = []
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, kind, argv, port, tag):
        self.kind, self.argv, self.port, self.tag = kind, argv, port, tag
        self.proc = None
        self.logpath = os.path.join(OUT, f"{kind}-{tag}.log")

    def start(self):
        self.logfile = open(self.logpath, "w")
        # An empty working directory of its own: a redis-server would load a dump.rdb it
        # found in the current directory and skew every figure.
        self.workdir = tempfile.mkdtemp(prefix=f"{self.kind}-{self.tag}-", dir=OUT)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=self.logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            raise HarnessError(f"cannot start {self.kind}: {e}") from e
        SERVERS.append(self)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                c = Client(self.port, timeout=2)
                r = c.call("PING")
                c.close()
                if r == "PONG":
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        with open(self.logpath, errors="replace") as f:
            tail = f.read()[-800:]
        raise HarnessError(f"{self.kind} did not start on port {self.port}: {tail}")

    def client(self, timeout=30.0):
        return Client(self.port, timeout)

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise HarnessError("no VmRSS")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self):
        """utime + stime of the server process (all its threads) from /proc/PID/stat."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            # The command name may hold spaces: fields count from after its ")".
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        try:
            self.logfile.close()
        except Exception:
            pass
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self in SERVERS:
            SERVERS.remove(self)


def stop_all():
    for s in list(SERVERS):
        try:
            s.stop()
        except Exception:
            pass


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)


class Env:
    def __init__(self, args):
        self.args = args
        # Servers run in directories of their own: paths must not depend on the current one.
        self.redis_bin = os.path.abspath(args.redis_server) if os.sep in args.redis_server \
            else args.redis_server
        self.tide_bin = os.path.abspath(args.tidecache)

    def redis(self, tag, *extra, port=None):
        port = port or free_port()
        argv = [self.redis_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--logfile", "", *extra]
        return Server("redis", argv, port, tag).start()

    def tide(self, tag, *extra, port=None):
        port = port or free_port()
        argv = [self.tide_bin, "--port", str(port), "--loglevel", "warning", "--save", "", *extra]
        return Server("tidecache", argv, port, tag).start()


# ---------------------------------------------------------------------------------------------
# 1. throughput

VALUE32 = "v" * 32
DOC_FIELDS = '"a":1,"b":"x","c":2.5,"d":true'


RATE_LIMITER = ("local c = redis.call('INCR', KEYS[1]) "
                "if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return c")
RATE_LIMITER_SHA = hashlib.sha1(RATE_LIMITER.encode()).hexdigest()


def workloads():
    """(name, redis command, tidecache command, pipeline, preload groups each side needs).

    `__rand_int__` becomes a 12-digit zero-padded number, which JSON refuses as a bare number
    (leading zeros), so documents carry it inside strings. DOC.INSERT leaves `_id` out (an
    ObjectId is generated): redis-benchmark stops at the first error reply, and random `_id`s
    would collide as duplicate keys.

    The DOC rows run on `sessions`, a collection with a TTL index on `accessTime` and a
    secondary index on `userID` (as the seed's login sessions), each beside the Redis command
    a user would run instead; the destructive DELETE rows come last."""
    set_ = ["SET", "key:__rand_int__", VALUE32]
    get = ["GET", "key:__rand_int__"]
    mset = ["MSET"] + ["key:__rand_int__", VALUE32] * 10
    mget = ["MGET"] + ["key:__rand_int__"] * 10
    hset4 = ["HSET", "h:__rand_int__", "a", "1", "b", "x", "c", "2.5", "d", "true"]
    hgetall = ["HGETALL", "h:__rand_int__"]
    sid = '{"_id":"__rand_int__"}'
    both = (1, 16)
    rows = [
        ("SET", set_, set_, both, [], []),
        ("GET", get, get, both, ["kv"], ["kv"]),
        ("MSET (10 keys)", mset, mset, (1,), [], []),
        ("MGET (10 keys)", mget, mget, both, ["kv"], ["kv"]),
        ("INCR", ["INCR", "counter:__rand_int__"], ["INCR", "counter:__rand_int__"], both, [], []),
        ("HSET", ["HSET", "myhash", "element:__rand_int__", VALUE32],
         ["HSET", "myhash", "element:__rand_int__", VALUE32], both, [], []),
        ("HGETALL (4 fields)", hgetall, hgetall, (1,), ["hash"], ["hash"]),
        ("DOC.FIND _id vs GET same JSON", ["GET", "j:__rand_int__"],
         ["DOC.FIND", "users", sid], both, ["json"], ["users"]),
        ("DOC.INSERT vs HSET 4 fields", hset4,
         ["DOC.INSERT", "inserts", '{"userID":"__rand_int__","accessTime":"$$NOW",' + DOC_FIELDS + "}"],
         both, [], ["inserts_indexes"]),
        ("DOC.FINDONE _id vs HGETALL", hgetall, ["DOC.FINDONE", "sessions", sid], both,
         ["hash"], ["sessions"]),
        ("DOC.FIND indexed vs HGETALL", hgetall,
         ["DOC.FIND", "sessions", '{"userID":"__rand_int__"}'], both, ["hash"], ["sessions"]),
        ("DOC.TOUCH vs HSET 1 field", ["HSET", "h:__rand_int__", "accessTime", "1700000000000"],
         ["DOC.TOUCH", "sessions", sid], both, ["hash"], ["sessions"]),
        ("DOC.COUNT indexed vs EXISTS", ["EXISTS", "key:__rand_int__"],
         ["DOC.COUNT", "sessions", '{"userID":"__rand_int__"}'], both, ["kv"], ["sessions"]),
        # After the indexed reads: each upsert moves a random session to a random userID, so
        # after it the userID the probe asks for may belong to no session.
        ("DOC.UPDATE _id $set $currentDate UPSERT vs HSET 2 fields",
         ["HSET", "h:__rand_int__", "userID", "__rand_int__", "accessTime", "1700000000000"],
         ["DOC.UPDATE", "sessions", sid,
          '{"$set":{"userID":"__rand_int__"},"$currentDate":{"accessTime":true}}', "UPSERT"],
         both, ["hash"], ["sessions"]),
        ("XADD s * f v", ["XADD", "mystream", "*", "f", "v"], ["XADD", "mystream", "*", "f", "v"],
         both, [], []),
        ("XREAD COUNT 100", ["XREAD", "COUNT", "100", "STREAMS", "bigstream", "0"],
         ["XREAD", "COUNT", "100", "STREAMS", "bigstream", "0"], both, ["stream"], ["stream"]),
        ("EVALSHA rate limiter (INCR + PEXPIRE)",
         ["EVALSHA", RATE_LIMITER_SHA, "1", "rl:__rand_int__", "60000"],
         ["EVALSHA", RATE_LIMITER_SHA, "1", "rl:__rand_int__", "60000"], both,
         ["script"], ["script"]),
        ("EVAL rate limiter, cached body", ["EVAL", RATE_LIMITER, "1", "rl:__rand_int__", "60000"],
         ["EVAL", RATE_LIMITER, "1", "rl:__rand_int__", "60000"], (1,), [], []),
    ] + [
        # redis-benchmark's own tests of the aggregate types.
        (name, cmd, cmd, both, needs, needs)
        for name, cmd, needs in [
            ("LPUSH", ["LPUSH", "mylist", VALUE32], []),
            ("RPUSH", ["RPUSH", "mylist", VALUE32], []),
            ("LPOP", ["LPOP", "mylist"], []),
            ("RPOP", ["RPOP", "mylist"], []),
            ("SADD", ["SADD", "myset", "element:__rand_int__"], []),
            ("SPOP", ["SPOP", "myset"], []),
            ("ZADD", ["ZADD", "myzset", "__rand_int__", "element:__rand_int__"], []),
            ("ZPOPMIN", ["ZPOPMIN", "myzset"], []),
            ("LRANGE_100", ["LRANGE", "biglist", "0", "99"], ["list600"]),
            ("LRANGE_300", ["LRANGE", "biglist", "0", "299"], ["list600"]),
            ("LRANGE_600", ["LRANGE", "biglist", "0", "599"], ["list600"]),
        ]
    ] + [
        # Last: they empty what the rows above read. After the first pass over the keyspace
        # most requests miss, on both servers alike.
        ("DOC.DELETE _id vs DEL (mostly misses after one pass)", ["DEL", "h:__rand_int__"],
         ["DOC.DELETE", "sessions", sid], both, ["hash"], ["sessions"]),
    ]
    return [(f"{name}{' -P 16' if p == 16 else ''}", r, t, p, rn, tn)
            for name, r, t, pipelines, rn, tn in rows for p in pipelines]


def user_doc(i):
    return '{"_id":"%012d","u":"%012d",%s}' % (i, i, DOC_FIELDS)


def iso_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def preload(server, keys):
    """Loads the data the read workloads need. Returns {group: None or error text}."""
    c = server.client(timeout=60)
    status = {}
    groups = {
        "kv": [encode("SET", "key:%012d" % i, VALUE32) for i in range(keys)],
        "hash": [encode("HSET", "h:%012d" % i, "a", 1, "b", "x", "c", 2.5, "d", "true")
                 for i in range(keys)],
        "json": [encode("SET", "j:%012d" % i, user_doc(i)) for i in range(keys)],
        # redis-benchmark's LRANGE tests read the first 100/300/600 of a long list.
        "list600": [encode("RPUSH", "biglist", *[VALUE32] * 100) for _ in range(6)],
        "stream": [encode("XADD", "bigstream", "*", "a", 1, "b", "x", "c", 2.5)
                   for _ in range(1000)],
        "script": [encode("SCRIPT", "LOAD", RATE_LIMITER)],
    }
    if server.kind == "tidecache":
        now = iso_now()
        # FIND by _id needs only the documents; `sessions` creates its indexes first, so that
        # inserts maintain them.
        groups["users"] = [encode("DOC.INSERT", "users", user_doc(i)) for i in range(keys)]
        groups["sessions"] = [encode("DOC.EXPIREINDEX", "sessions", "accessTime", 3600),
                              encode("DOC.CREATEINDEX", "sessions", '{"userID":1}')] + [
            encode("DOC.INSERT", "sessions",
                   '{"_id":"%012d","userID":"%012d","accessTime":{"$date":"%s"}}' % (i, i, now))
            for i in range(keys)]
        groups["inserts_indexes"] = [encode("DOC.EXPIREINDEX", "inserts", "accessTime", 3600),
                                     encode("DOC.CREATEINDEX", "inserts", '{"userID":1}')]
    for name, payloads in groups.items():
        try:
            errors, first = load(c, payloads)
            status[name] = None if errors == 0 else f"preload: {first}"
        except (OSError, ConnectionError) as e:
            status[name] = f"preload: {e}"
            c.close()
            c = server.client(timeout=60)
    c.close()
    return status


def explain_plan(server, coll, query):
    """The plan DOC.EXPLAIN names for `query` (IXSCAN, COLLSCAN...), or None."""
    try:
        c = server.client(timeout=10)
        try:
            r = c.call("DOC.EXPLAIN", coll, query)
        finally:
            c.close()
        return json.loads(r).get("plan") if isinstance(r, bytes) else None
    except (OSError, ValueError, AttributeError):
        return None


READS = {"GET", "MGET", "HGETALL", "EXISTS", "LRANGE", "XREAD", "DOC.FIND", "DOC.FINDONE",
         "DOC.COUNT"}


def probe(server, cmd):
    """Runs `cmd` once on a preloaded key. A read that finds nothing would be measured as a
    fast miss, not as the work the row names: that is an error too."""
    args = [a.replace("__rand_int__", "%012d" % 1) for a in cmd]
    try:
        c = server.client(timeout=10)
        try:
            r = c.call(*args)
        finally:
            c.close()
    except OSError as e:
        return short("server exited" if not server.alive() else e)
    if isinstance(r, RespError):
        return short(r)
    # A write may legitimately answer 0 (HSET of existing fields, DEL of a key gone).
    if args[0] in READS and (r is None or r == [] or r == 0):
        return short(f"{args[0]} found nothing for a preloaded key (reply {r!r})")
    return None


def bench(server, cmd, n, pipeline, keyspace, timeout, port=None, extra=(), prefix=()):
    """One redis-benchmark run: ({"rps", "p50_ms", "cpu_us"}, None) or (None, error text).
    `cpu_us` is the server's CPU (user + system, every thread) over the run divided by the
    requests: steadier than requests/s on a shared machine, where the load generator and the
    server fight for the same cores. `port` and `extra` (redis-benchmark options) are for
    the TLS rows: the TLS port, `--tls --cacert ...`; `prefix` runs redis-benchmark under
    another command (`taskset -c 0` for the threads rows)."""
    argv = [*prefix, "redis-benchmark", "-p", str(port or server.port), *extra, "-c", "50",
            "-n", str(n), "-P", str(pipeline), "-r", str(keyspace), "--csv", *cmd]
    cpu0 = server.cpu_seconds() if server.alive() else 0.0
    rc, out, err = run(argv, timeout)
    if not server.alive():
        return None, "server exited"
    cpu = server.cpu_seconds() - cpu0
    if rc is None:
        return None, err
    for line in (err + "\n" + out).splitlines():
        if "Error from server" in line or line.startswith("ERR") or "rror:" in line:
            return None, short(line.replace("Error from server: ", ""))
    rps = p50 = None
    for line in out.splitlines():
        # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
        fields = line.strip().strip('"').split('","')
        if len(fields) >= 8 and not line.startswith('"test"'):
            try:
                rps, p50 = float(fields[-7]), float(fields[-4])
            except ValueError:
                pass
    if rc != 0 or rps is None:
        return None, short(err or out or f"redis-benchmark exit {rc}")
    if rps <= 0:
        return None, "zero rps"
    return {"rps": rps, "p50_ms": p50, "cpu_us": cpu * 1e6 / n}, None


def throughput(env, quick):
    keys = 10_000 if quick else 100_000
    n_max = 20_000 if quick else 200_000
    rounds = 1 if quick else 3
    seconds = 0.5 if quick else 2.0  # target length of one run
    cal_n = 1000 if quick else 2000  # requests of the calibration run
    redis = env.redis("throughput")
    tide = env.tide("throughput")
    rows = []
    try:
        log(f"throughput: preloading {keys} keys, hashes, JSON strings and documents")
        pre = {"redis": preload(redis, keys), "tidecache": preload(tide, keys)}
        plan = explain_plan(tide, "sessions", '{"userID":"%012d"}' % 1)
        for name, rcmd, tcmd, pipeline, rneeds, tneeds in workloads():
            row = {"workload": name, "pipeline": pipeline, "redis": None, "tidecache": None,
                   "redis_error": None, "tidecache_error": None}
            cmds = {"redis": rcmd, "tidecache": tcmd}
            servers = {"redis": redis, "tidecache": tide}
            # Every DOC.INSERT adds a document: the Redis side then writes new keys too, not
            # the same 100k hashes over and over. They go to database 1, emptied after the
            # row: Redis keeps a database's keys in one table, so millions of them left in
            # database 0 would make every later row's lookups dearer on the Redis side only
            # (the documents go to a collection of their own).
            inserts = tcmd[0] == "DOC.INSERT"
            space = {"redis": 10**9 if inserts else keys, "tidecache": keys}
            extra = {"redis": ("--dbnum", "1") if inserts else (), "tidecache": ()}
            if tcmd[0] in ("DOC.FIND", "DOC.COUNT") and tcmd[1] == "sessions" \
                    and "_id" not in tcmd[2] and plan:
                row["note"] = f"plan {plan}"  # an "indexed" row that scans would say so
            for kind in ("redis", "tidecache"):
                for g in rneeds if kind == "redis" else tneeds:
                    if pre[kind].get(g, None) and not row[f"{kind}_error"]:
                        row[f"{kind}_error"] = pre[kind][g]
            # A short calibration run per server catches errors and sizes n so that a slow
            # command does not run for minutes; both servers then get the same n.
            cal = {}
            for kind in ("redis", "tidecache"):
                if row[f"{kind}_error"] or not servers[kind].alive():
                    row[f"{kind}_error"] = row[f"{kind}_error"] or "server exited"
                    continue
                needs = rneeds if kind == "redis" else tneeds
                err = probe(servers[kind], cmds[kind]) if needs else None
                if err:
                    row[f"{kind}_error"] = err
                    continue
                m, err = bench(servers[kind], cmds[kind], cal_n * pipeline, pipeline, space[kind], 60,
                               extra=extra[kind])
                if err:
                    row[f"{kind}_error"] = err
                else:
                    cal[kind] = m["rps"]
            if cal:
                n = int(min(n_max * pipeline, max(cal_n, min(cal.values()) * seconds)))
                samples = {k: [] for k in cal}
                # At pipeline 1 redis-benchmark, not the server, sets the pace, and its rounds
                # swing most (10-20% between rounds on 2 cores): five of them there, three at
                # pipeline 16. The order flips each round, so a drift of the machine over a
                # row does not always favour the same server.
                for r in range(rounds + (2 if pipeline == 1 and rounds > 1 else 0)):
                    for kind in ("redis", "tidecache")[::1 if r % 2 == 0 else -1]:
                        if kind not in samples or row[f"{kind}_error"]:
                            continue
                        timeout = max(60, 20 * n / cal[kind])
                        m, err = bench(servers[kind], cmds[kind], n, pipeline, space[kind], timeout,
                                       extra=extra[kind])
                        if err:
                            row[f"{kind}_error"] = err
                        else:
                            samples[kind].append(m)
                for kind, vals in samples.items():
                    if vals and not row[f"{kind}_error"]:
                        row[kind] = statistics.median(v["rps"] for v in vals)
                        row[kind + "_rounds"] = [v["rps"] for v in vals]
                        row[kind + "_cpu_us"] = statistics.median(v["cpu_us"] for v in vals)
                        if vals[0]["p50_ms"] is not None:
                            row[kind + "_p50_ms"] = statistics.median(v["p50_ms"] for v in vals)
                row["n"] = n
            if inserts and redis.alive():
                c = redis.client()
                c.call("SELECT", "1")
                c.call("FLUSHDB")
                c.close()
            rows.append(row)
            log(f"  {name:44} {fmt_rps(row, 'redis'):>14} {fmt_cpu(row, 'redis'):>6} µs"
                f" {fmt_rps(row, 'tidecache'):>14} {fmt_cpu(row, 'tidecache'):>6} µs")
    finally:
        redis.stop()
        tide.stop()
    return rows


def fmt_rps(row, kind):
    if row[kind] is not None:
        return f"{row[kind]:,.0f}"
    return f"n/a (error: {short(row[kind + '_error'] or 'unknown', 60)})"


def fmt_cpu(row, kind):
    v = row.get(kind + "_cpu_us")
    return "-" if v is None or row[kind] is None else f"{v:.2f}"


def fmt_p50(row):
    return " / ".join("-" if row.get(k + "_p50_ms") is None or row[k] is None
                      else f"{row[k + '_p50_ms']:.3f}" for k in ("redis", "tidecache"))


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


# ---------------------------------------------------------------------------------------------
# 2. memory


def write_resp(path, gen):
    with open(path, "wb") as f:
        batch = []
        for payload in gen:
            batch.append(payload)
            if len(batch) >= 10000:
                f.write(b"".join(batch))
                batch.clear()
        f.write(b"".join(batch))


def pipe_into(server, path, count, setup=()):
    """Loads `path` with redis-cli --pipe; returns (bytes of RSS per item, None) or (None, error)."""
    try:
        return _pipe_into(server, path, count, setup)
    except OSError as e:  # the server died or stopped answering (ConnectionError, timeouts)
        return None, short("server exited" if not server.alive() else e), None


def used_memory(server):
    """INFO memory's used_memory (what the server accounts for its data), or None."""
    c = server.client()
    try:
        r = c.call("INFO", "memory")
    finally:
        c.close()
    if isinstance(r, bytes):
        for line in r.decode(errors="replace").splitlines():
            if line.startswith("used_memory:"):
                try:
                    return int(line.split(":", 1)[1])
                except ValueError:
                    return None
    return None


def _pipe_into(server, path, count, setup):
    c = server.client()
    for args in setup:
        r = c.call(*args)
        if isinstance(r, RespError):
            c.close()
            return None, short(r), None
    c.close()
    time.sleep(0.3)
    before = server.rss_kib()
    used_before = used_memory(server)
    with open(path, "rb") as f:
        rc, out, err = run(["redis-cli", "-p", str(server.port), "--pipe"], 600, stdin=f)
    if not server.alive():
        return None, "server exited", None
    if rc is None:
        return None, err, None
    errors = replies = None
    for line in out.splitlines():
        if line.startswith("errors:"):
            parts = line.replace(",", "").split()
            errors, replies = int(parts[1]), int(parts[3])
    if errors is None:
        return None, short(err or out or f"redis-cli exit {rc}"), None
    if errors:
        first = next((ln for ln in err.splitlines() if ln.strip()), f"{errors} errors")
        return None, short(f"{errors}/{replies} errors: {first}"), None
    time.sleep(0.5)
    after = server.rss_kib()
    used_after = used_memory(server)
    used = None if used_before is None or used_after is None else (used_after - used_before) / count
    return (after - before) * 1024 / count, None, used


def memory(env, quick):
    count = 50_000 if quick else 1_000_000
    label = f"{count // 1000}k" if count < 1_000_000 else f"{count // 1_000_000}M"
    log(f"memory: generating {count} keys, hashes and documents")
    now_ms = int(time.time() * 1000)
    base = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    files = {
        "keys": lambda: (encode("SET", "k:%d" % i, VALUE32, "EX", 3600) for i in range(count)),
        "hashes2": lambda: (encode("HSET", "s:%d" % i, "userID", i, "accessTime", now_ms + i % 1000)
                            for i in range(count)),
        "stream": lambda: (encode("XADD", "events", "*", "a", i % 100, "b", "x", "c", 2.5)
                           for i in range(count)),
        "hashes": lambda: (encode("HSET", "s:%d" % i, "userID", i, "accessTime", now_ms + i % 1000)
                           + encode("EXPIRE", "s:%d" % i, 3600) for i in range(count)),
        "sets": lambda: (encode("SADD", "set:%d" % i, *("member:%d" % j for j in range(8)))
                         for i in range(count)),
        "zsets": lambda: (encode("ZADD", "zset:%d" % i,
                                 *(x for j in range(8) for x in (j * 1.5, "member:%d" % j)))
                          for i in range(count)),
        "lists": lambda: (encode("RPUSH", "list:%d" % i, *("element:%d" % j for j in range(100)))
                          for i in range(count // 100)),
        "docs": lambda: (encode("DOC.INSERT", "sessions",
                                '{"userID":%d,"accessTime":{"$date":"%s.%03dZ"}}' % (i, base, i % 1000))
                         for i in range(count)),
    }
    paths = {}
    for name, gen in files.items():
        paths[name] = os.path.join(OUT, f"load-{name}.resp")
        write_resp(paths[name], gen())
    rows = []
    specs = [
        (f"{label} keys, 32 B values, EX", "keys", "keys", ()),
        (f"{label} hashes of 2 fields", "hashes2", "hashes2", ()),
        (f"{label} hashes (userID, accessTime) + EXPIRE", "hashes", "hashes", ()),
        (f"{label} session documents, TTL index vs hashes", "hashes", "docs",
         (("DOC.EXPIREINDEX", "sessions", "accessTime", 3600),)),
        (f"{label} sets of 8 members", "sets", "sets", ()),
        (f"{label} sorted sets of 8 members", "zsets", "zsets", ()),
        (f"{count // 100} lists of 100 elements (per element)", "lists", "lists", ()),
        (f"{label} stream entries of 3 fields (one stream)", "stream", "stream", ()),
    ]
    for name, rfile, tfile, tsetup in specs:
        row = {"workload": name}
        for kind, fname, setup in (("redis", rfile, ()), ("tidecache", tfile, tsetup)):
            if kind == "redis" and rfile == "hashes" and tfile == "docs" and rows:
                # Redis keeps hashes where tidecache keeps documents: the same load as above.
                for k in ("redis", "redis_error", "redis_used"):
                    row[k] = rows[-1][k]
                continue
            srv = env.redis("memory") if kind == "redis" else env.tide("memory")
            try:
                per, err, used = pipe_into(srv, paths[fname], count, setup)
            finally:
                srv.stop()
            row[kind], row[kind + "_error"], row[kind + "_used"] = per, err, used
        rows.append(row)
        log(f"  {name:44} {fmt_bytes(row, 'redis'):>12} {fmt_bytes(row, 'tidecache'):>12}")
    for p in paths.values():
        os.unlink(p)
    rows.append(idle_connections(env, 1000 if quick else 10_000))
    log(f"  {rows[-1]['workload']:44} {fmt_bytes(rows[-1], 'redis'):>12} "
        f"{fmt_bytes(rows[-1], 'tidecache'):>12}")
    return rows


def idle_connections(env, count):
    """RSS growth per connection with `count` connections open, each after one PING."""
    import resource
    name = f"{count // 1000}k idle connections (per connection, after one PING)"
    row = {"workload": name}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 256
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
        except (ValueError, OSError):
            pass
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < want:
        for kind in ("redis", "tidecache"):
            row[kind], row[kind + "_error"], row[kind + "_used"] = None, "ulimit -n too low", None
        return row
    for kind in ("redis", "tidecache"):
        extra = ("--maxclients", str(count + 100))
        srv = env.redis("conns", *extra) if kind == "redis" else env.tide("conns", *extra)
        socks = []
        try:
            before = srv.rss_kib()
            for _ in range(count):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.sendall(encode("PING"))
                socks.append(s)
            for s in socks:
                if s.recv(16) != b"+PONG\r\n":
                    raise OSError("no PONG")
            time.sleep(1)
            row[kind] = (srv.rss_kib() - before) * 1024 / count
            row[kind + "_error"], row[kind + "_used"] = None, None
        except OSError as e:
            row[kind], row[kind + "_error"], row[kind + "_used"] = None, short(e), None
        finally:
            for s in socks:
                s.close()
            srv.stop()
    return row


def fmt_bytes(row, kind):
    if row[kind] is not None:
        return f"{row[kind]:.1f}"
    return f"n/a (error: {short(row[kind + '_error'] or 'unknown', 60)})"


# ---------------------------------------------------------------------------------------------
# 3. mass expiry


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def find_key(obj, key):
    """The first value of `key` anywhere in a parsed JSON object."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def doc_stats(c, coll):
    """(count, documents deleted by the TTL monitor) from DOC.STATS, or else from INFO
    documents (server-wide figures); None where unknown."""
    r = c.call("DOC.STATS", coll)
    if isinstance(r, bytes):
        try:
            st = json.loads(r)
        except ValueError:
            st = None
        count, deleted = find_key(st, "count"), find_key(st, "deletedDocuments")
        if isinstance(count, int) or isinstance(deleted, int):
            return (count if isinstance(count, int) else None,
                    deleted if isinstance(deleted, int) else None)
    r = c.call("INFO", "documents")
    if not isinstance(r, bytes):
        return None, None
    info = dict(line.split(":", 1) for line in r.decode(errors="replace").splitlines() if ":" in line)
    try:
        count = int(info["documents"]) if "documents" in info else None
        deleted = int(info["ttl_deleted_documents"]) if "ttl_deleted_documents" in info else None
    except ValueError:
        return None, None
    return count, deleted


def sweep_window(polls, count, total):
    """(start, end, how) of the sweep from (time, count, deleted) polls: from the last poll
    before the TTL monitor's deletions (or the collection size) moved until the poll that saw
    all `count` documents gone. None where the polls cannot tell."""
    for idx, how in ((2, "from the TTL monitor's deleted documents, polled every 100 ms"),
                     (1, "from the number of documents, polled every 100 ms")):
        vals = [(p[0], p[idx]) for p in polls if p[idx] is not None]
        if len(vals) < 2:
            continue
        base = vals[0][1]
        if idx == 2:
            done = [t for t, v in vals if v - base >= count]
            moved = [i for i, (t, v) in enumerate(vals) if v != base]
        else:
            if total is None:
                continue
            done = [t for t, v in vals if v <= total - count]
            moved = [i for i, (t, v) in enumerate(vals) if v != base]
        if done and moved:
            return vals[max(0, moved[0] - 1)][0], done[0], how
    return None


def mass_expiry(env, quick):
    tide = env.tide("expiry", "--ttl-monitor-period", "1")
    try:
        return _mass_expiry(tide, quick)
    except OSError as e:  # the server died or stopped answering (ConnectionError, timeouts)
        count = 50_000 if quick else 1_000_000
        return {"documents": count, "samples": [],
                "error": short("server exited" if not tide.alive() else e)}
    finally:
        tide.stop()


def _mass_expiry(tide, quick):
    count = 50_000 if quick else 1_000_000
    keep = 1000
    idle_window = 3.0 if quick else 5.0
    result = {"documents": count, "error": None, "samples": []}
    c = tide.client(timeout=30)
    r = c.call("DOC.EXPIREINDEX", "exp", "accessTime", 0)
    if isinstance(r, RespError):
        result["error"] = short(r)
        return result
    # Documents without the date field never expire: they are what DOC.FIND looks up.
    errors, first = load(c, [encode("DOC.INSERT", "exp", '{"_id":"keep-%d","userID":%d}' % (i, i))
                             for i in range(keep)])
    if errors:
        result["error"] = short(first)
        return result
    # Calibrate the insert rate so that every document can be in before the due second.
    t0 = time.time()
    calib = min(20_000, count // 5)
    errors, first = load(c, [encode("DOC.INSERT", "calib", '{"_id":%d,"accessTime":{"$date":"%s"}}'
                                    % (i, iso_now())) for i in range(calib)])
    if errors:
        result["error"] = short(first)
        return result
    rate = calib / max(time.time() - t0, 1e-3)
    c.call("DOC.DROP", "calib")
    due = int(time.time() + count / rate * 1.5 + idle_window + 2) + 1
    due_iso = datetime.datetime.fromtimestamp(due, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z")
    log(f"expiry: inserting {count} documents due at {due_iso} (insert rate ~{rate:,.0f}/s)")
    load_start = time.time()
    for start in range(0, count, 50_000):
        payloads = [encode("DOC.INSERT", "exp",
                           '{"_id":%d,"userID":%d,"accessTime":{"$date":"%s"}}' % (i, i, due_iso))
                    for i in range(start, min(count, start + 50_000))]
        errors, first = load(c, payloads)
        if errors:
            result["error"] = short(first)
            return result
    loaded = time.time()
    result["insert_rate"] = count / max(loaded - load_start, 1e-3)
    result["load_margin_s"] = due - loaded
    if due - loaded < 1.0:
        log("expiry: warning: loading ran up to the due second; the idle window is short")
    total, _ = doc_stats(c, "exp")
    result["count_before"] = total
    # DOC.STATS on a second connection, every 100 ms and between two timed requests (so it
    # delays the next one but is never inside a measured latency), tells when the sweep
    # starts and ends. One thread, so no interpreter lock skews the timings.
    pc = tide.client(timeout=30)
    polls = []
    rng = random.Random(7)
    samples = []
    end_by = due + (15 if quick else 30)
    next_poll = 0.0
    first_err = None
    window = None
    while time.time() < end_by:
        now = time.time()
        if now >= next_poll:
            polls.append((now - due, *doc_stats(pc, "exp")))
            next_poll = now + 0.1
            if window is None and now > due:
                window = sweep_window(polls, count, total)
            if window is not None and now - due > window[1] + 1.0:
                break
            # Figures that never move cannot show the sweep: stop after the fallback window.
            if window is None and now - due > 4.0 and all(p[1:] == polls[0][1:] for p in polls):
                break
        payload = encode("DOC.FIND", "exp", '{"_id":"keep-%d"}' % rng.randrange(keep))
        t = time.time()
        t1 = time.perf_counter()
        c.sock.sendall(payload)
        r = c.read()
        lat = (time.perf_counter() - t1) * 1e6
        if isinstance(r, RespError):
            first_err = first_err or r
            break
        samples.append((t - due, lat))
    pc.close()
    c.close()
    if first_err:
        result["error"] = short(first_err)
        return result
    # Without DOC.STATS figures: the due second and the next two monitor periods.
    window = window or sweep_window(polls, count, total) or \
        (0.0, 3.0, "assumed: the server's DOC.STATS and INFO documents did not show the sweep")
    sweep_start, sweep_end, how = window
    result.update(sweep_start_s=sweep_start, sweep_end_s=sweep_end, sweep_window_from=how)
    # Idle: the last seconds before the due second (not the moments right after the load).
    idle_end = min(-0.2, sweep_start)
    idle = [lat for t, lat in samples if idle_end - idle_window <= t < idle_end]
    result.update(idle_start_s=idle_end - idle_window, idle_end_s=idle_end)
    during = [lat for t, lat in samples if sweep_start <= t <= sweep_end]
    result.update(
        samples=samples, polls=polls,
        idle_n=len(idle), during_n=len(during),
        idle_p50=percentile(idle, 50), idle_p99=percentile(idle, 99),
        during_p50=percentile(during, 50), during_p99=percentile(during, 99),
        during_max=max(during) if during else None,
    )
    if not idle or not during:
        result["error"] = "no samples in the idle or the sweep window"
    return result


# ---------------------------------------------------------------------------------------------
# 4. Zipf trace under LRU


def zipf_trace(keys, requests, s=0.99, seed=42):
    cum = list(itertools.accumulate(1.0 / (k ** s) for k in range(1, keys + 1)))
    return random.Random(seed).choices(range(keys), cum_weights=cum, k=requests)


def replay(server, trace, value):
    c = server.client(timeout=60)
    gets = [encode("GET", "z:%d" % k) for k in range(max(trace) + 1)]
    hits = misses = 0
    first = None
    peak = 0
    t0 = time.time()
    try:
        for i in range(0, len(trace), 256):
            if i % (256 * 64) == 0:
                peak = max(peak, used_memory(server) or 0)
            chunk = trace[i : i + 256]
            replies = c.pipeline([gets[k] for k in chunk])
            missed = []
            for k, r in zip(chunk, replies):
                if isinstance(r, RespError):
                    first = first or r
                elif r is None:
                    misses += 1
                    missed.append(k)
                else:
                    hits += 1
            if first:
                break
            if missed:
                first = first_error(c.pipeline([encode("SET", "z:%d" % k, value) for k in missed]))
                if first:
                    break
        dbsize = c.call("DBSIZE")
        peak = max(peak, used_memory(server) or 0)
        rss = server.rss_kib() * 1024
    except (OSError, ConnectionError) as e:
        return {"error": short(e)}
    finally:
        c.close()
    if first:
        return {"error": short(first)}
    return {"hit_ratio": hits / max(1, hits + misses), "hits": hits, "misses": misses,
            "resident_keys": dbsize if isinstance(dbsize, int) else None,
            "peak_used_memory": peak, "rss": rss,
            "seconds": time.time() - t0, "error": None}


def zipf(env, quick):
    """The trace at the issue's maxmemory and at a quarter of it. At the first, nearly every
    distinct key of the trace fits, so both servers sit at the ceiling (requests minus
    distinct keys: misses nobody can avoid) and the ratios differ by a handful of hits; the
    second is where per-key memory and the choice of victims show. Both servers compare
    `maxmemory` with all of `used_memory` (every allocation of the process); the highest
    `used_memory` seen (polled every 16k requests) and the RSS at the end are reported."""
    keys = 100_000 if quick else 1_000_000
    requests = 200_000 if quick else 2_000_000
    # (maxmemory, value size): the trace's two budgets, and 1 KB values under 50 MB.
    budgets = [((8 if quick else 64) << 20, 100), ((4 if quick else 16) << 20, 100),
               ((8 if quick else 50) << 20, 1024)]
    trace = zipf_trace(keys, requests)
    distinct = len(set(trace))
    points = []
    for maxmemory, value_bytes in budgets:
        value = "z" * value_bytes
        log(f"zipf: {requests} requests over {keys} keys, s=0.99, maxmemory {maxmemory >> 20}mb "
            f"(at most {requests - distinct:,} hits: {distinct:,} distinct keys)")
        out = {"keys": keys, "requests": requests, "maxmemory_mb": maxmemory >> 20,
               "value_bytes": value_bytes, "ceiling": requests - distinct}
        for kind in ("redis", "tidecache"):
            extra = ("--maxmemory", str(maxmemory), "--maxmemory-policy", "allkeys-lru")
            srv = env.redis("zipf", *extra) if kind == "redis" else env.tide("zipf", *extra)
            try:
                out[kind] = replay(srv, trace, value)
            finally:
                srv.stop()
            r = out[kind]
            log(f"  {kind:10} " + (f"hit ratio {r['hit_ratio']:.4f}, {r['hits']:,} hits, "
                                   f"{r['resident_keys']:,} keys resident"
                                   if not r["error"] else f"n/a (error: {r['error']})"))
        points.append(out)
    first = dict(points[0])
    first["points"] = points
    return first


# ---------------------------------------------------------------------------------------------
# reports


def build_label(binary):
    """Which build `binary` is, as the results page names it: README's `cargo build
    --release` (laid out by the committed profile when the toolchain's LLVM reads it, as
    scripts/rustc-pgo decides), or another binary given with --tidecache."""
    default = os.path.join(ROOT, "target", "release", "tidecache-server")
    if os.path.realpath(binary) != os.path.realpath(default):
        return f"{binary} (given with --tidecache)"
    try:
        with open(os.path.join(ROOT, "pgo", "llvm-major")) as f:
            want = f.read().strip()
        with open(os.path.join(ROOT, "pgo", "trained-on")) as f:
            trained = f.read().strip()[:12]
        llvm = run(["rustc", "-vV"], 30)[1]
        have = next((line.split(":")[1].strip().split(".")[0] for line in llvm.splitlines()
                     if line.startswith("LLVM version:")), None)
    except OSError:
        return "cargo build --release (no profile in pgo/)"
    if have != want:
        return f"cargo build --release (rustc's LLVM {have} cannot read the LLVM {want} profile: no profile-guided layout)"
    return f"cargo build --release (laid out by pgo/tidecache.profdata, trained on {trained})"


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}"


def esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def footer_lines(results):
    """One line per memory row and one for the hit ratios, under the throughput bars."""
    lines = []
    for row in results.get("memory", []):
        r = ratio(row["tidecache"], row["redis"])
        lines.append(f"RSS per item, {row['workload']}: redis {fmt_bytes(row, 'redis')} B, tidecache "
                     f"{fmt_bytes(row, 'tidecache')} B" + (f" ({r:.2f}×)" if r is not None else ""))
    for z in (results.get("zipf") or {}).get("points", []):
        parts = []
        for kind in ("redis", "tidecache"):
            rr = z.get(kind) or {}
            parts.append(f"{kind} {rr['hit_ratio']:.4f}" if rr.get("hit_ratio") is not None
                         else f"{kind} n/a")
        lines.append(f"LRU hit ratio, Zipf 0.99 over {z['keys']:,} keys, maxmemory "
                     f"{z['maxmemory_mb']}mb: " + ", ".join(parts))
    e = results.get("expiry")
    if e and not e.get("error"):
        lines.append(f"DOC.FIND by _id p99 during the sweep of {e['documents']:,} documents: "
                     f"{e['during_p99']:.0f} µs vs {e['idle_p99']:.0f} µs idle "
                     f"({e['during_p99'] / e['idle_p99']:.2f}×)")
    return [short(line, 150) for line in lines]


def throughput_svg(rows, title, footer=()):
    width, left, bar_w, row_h = 980, 300, 470, 46
    height = 90 + row_h * len(rows) + 20 + 18 * len(footer)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">{esc(title)}</text>',
           '<text x="10" y="42">requests per second, redis-benchmark -c 50 (median of the rounds); '
           'each row scaled to its larger bar; ratio = tidecache / redis</text>',
           '<rect x="10" y="54" width="12" height="12" fill="#c0392b"/>'
           '<text x="27" y="65">redis-server</text>',
           '<rect x="130" y="54" width="12" height="12" fill="#2471a3"/>'
           '<text x="147" y="65">tidecache</text>']
    for i, row in enumerate(rows):
        y = 80 + i * row_h
        vals = [v for v in (row["redis"], row["tidecache"]) if v]
        top = max(vals) if vals else 1
        out.append(f'<text x="10" y="{y + 22}">{esc(row["workload"])}</text>')
        for j, (kind, color) in enumerate((("redis", "#c0392b"), ("tidecache", "#2471a3"))):
            by = y + 4 + j * 18
            v = row[kind]
            if v:
                w = max(1, bar_w * v / top)
                out.append(f'<rect x="{left}" y="{by}" width="{w:.1f}" height="15" fill="{color}"/>')
                out.append(f'<text x="{left + w + 5:.1f}" y="{by + 12}">{v:,.0f}</text>')
            else:
                out.append(f'<text x="{left}" y="{by + 12}" fill="#888">'
                           f'n/a ({esc(short(row[kind + "_error"] or "", 60))})</text>')
        r = ratio(row["tidecache"], row["redis"])
        label = f"{r:.2f}×" if r is not None else "n/a"
        color = "#1e8449" if r is not None and r >= 1 else ("#b9770e" if r is not None else "#888")
        out.append(f'<text x="{width - 15}" y="{y + 22}" text-anchor="end" font-weight="bold" '
                   f'fill="{color}">{label}</text>')
    for k, line in enumerate(footer):
        out.append(f'<text x="10" y="{90 + row_h * len(rows) + 10 + 18 * k}">{esc(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def latency_svg(res, title):
    width, height, left, right, top, bottom = 980, 420, 90, 20, 60, 50
    samples = res.get("samples") or []
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">{esc(title)}</text>']
    if not samples:
        out.append(f'<text x="10" y="60">n/a ({esc(res.get("error") or "no samples")})</text></svg>')
        return "\n".join(out) + "\n"
    out.append(f'<text x="10" y="42">DOC.FIND by _id, one at a time; per 50 ms: p50 (blue), '
               f'p99 (green), max (orange); log scale; shaded: idle, sweep of '
               f'{res["documents"]:,} documents due at t=0</text>')
    t_min, t_max = samples[0][0], samples[-1][0]
    buckets = {}
    for t, lat in samples:
        buckets.setdefault(int((t - t_min) / 0.05), []).append(lat)
    series = sorted((t_min + b * 0.05 + 0.025, statistics.median(v), percentile(v, 99), max(v))
                    for b, v in buckets.items())
    # Log scale: the median and a stall of 100 ms must both be readable.
    lo = 10 ** math.floor(math.log10(max(1.0, min(p[1] for p in series))))
    hi = 10 ** math.ceil(math.log10(max(p[3] for p in series) * 1.01))
    pw, ph = width - left - right, height - top - bottom

    def x(t):
        return left + (t - t_min) / max(t_max - t_min, 1e-9) * pw

    def y(v):
        return top + ph - (math.log10(max(v, lo)) - math.log10(lo)) / math.log10(hi / lo) * ph

    if res.get("idle_start_s") is not None:
        i0, i1 = max(t_min, res["idle_start_s"]), res["idle_end_s"]
        out.append(f'<rect x="{x(i0):.1f}" y="{top}" width="{max(1, x(i1) - x(i0)):.1f}" '
                   f'height="{ph}" fill="#eaf2f8"/>')
    s0, s1 = res.get("sweep_start_s") or 0.0, res.get("sweep_end_s") or 0.0
    out.append(f'<rect x="{x(s0):.1f}" y="{top}" width="{max(1, x(s1) - x(s0)):.1f}" height="{ph}" '
               f'fill="#fdebd0"/>')
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>')
    v = lo
    while v <= hi:
        out.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + pw}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 5}" y="{y(v) + 4:.1f}" text-anchor="end">{v:,.0f} µs</text>')
        v *= 10
    out.append(f'<line x1="{x(0):.1f}" y1="{top}" x2="{x(0):.1f}" y2="{top + ph}" stroke="#888" '
               f'stroke-dasharray="4 3"/>')
    step = 1 if t_max - t_min < 20 else 5
    t = math.ceil(t_min / step) * step
    while t <= t_max:
        out.append(f'<text x="{x(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{t}s</text>')
        t += step
    for idx, color in ((3, "#e67e22"), (2, "#1e8449"), (1, "#2471a3")):
        pts = " ".join(f"{x(p[0]):.1f},{y(p[idx]):.1f}" for p in series)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.2"/>')
    summary = (f'idle p50 {res["idle_p50"]:.0f} µs, p99 {res["idle_p99"]:.0f} µs — during the sweep '
               f'p50 {res["during_p50"]:.0f} µs, p99 {res["during_p99"]:.0f} µs '
               f'({res["during_p99"] / res["idle_p99"]:.2f}× idle p99)') if not res.get("error") else \
        f'n/a ({res["error"]})'
    out.append(f'<text x="{left}" y="{height - 12}">{esc(summary)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def spread(row):
    parts = []
    for kind in ("redis", "tidecache"):
        vals = row.get(kind + "_rounds") or []
        parts.append(f"{(max(vals) - min(vals)) / statistics.median(vals) * 100:.0f}%"
                     if len(vals) > 1 else "-")
    return " / ".join(parts)


def markdown(results):
    lines = [f"Run of {results['date']} on {results['machine']}; mode: {results['mode']}; "
             f"tidecache build: {results.get('build', 'cargo build --release')}.", ""]
    if "throughput" in results:
        lines += ["### Throughput (requests/s, redis-benchmark -c 50)", "",
                  "| workload | redis-server | tidecache | tidecache / redis | CPU µs/request redis / tidecache | CPU tidecache / redis | p50 ms redis / tidecache | spread of the rounds |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for row in results["throughput"]:
            r = ratio(row["tidecache"], row["redis"])
            c = ratio(row.get("tidecache_cpu_us") if row["tidecache"] else None,
                      row.get("redis_cpu_us") if row["redis"] else None)
            name = row["workload"] + (f" ({row['note']})" if row.get("note") else "")
            lines.append(f"| {name} | {fmt_rps(row, 'redis')} | {fmt_rps(row, 'tidecache')} | "
                         f"{'n/a' if r is None else f'{r:.2f}'} | "
                         f"{fmt_cpu(row, 'redis')} / {fmt_cpu(row, 'tidecache')} | "
                         f"{'n/a' if c is None else f'{c:.2f}'} | {fmt_p50(row)} | {spread(row)} |")
        lines += ["", "Median of the rounds (3; 5 at pipeline 1, where the rounds swing most; the "
                  "order of the servers flips each round). CPU µs/request is the server's user + system CPU "
                  "(every thread, from /proc/PID/stat) over a run divided by its requests: below "
                  "1 in the CPU ratio column is better. p50 is redis-benchmark's median latency. "
                  "The spread is (max - min) / median of each server's requests/s over the "
                  "rounds, redis / tidecache: ratios inside it are noise."]
        lines.append("")
    if "memory" in results:
        lines += ["### Memory (RSS growth per item, bytes)", "",
                  "| data | redis-server | tidecache | tidecache / redis | used_memory per item |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for row in results["memory"]:
            r = ratio(row["tidecache"], row["redis"])
            used = " / ".join("-" if row.get(k + "_used") is None else f"{row[k + '_used']:.1f}"
                              for k in ("redis", "tidecache"))
            lines.append(f"| {row['workload']} | {fmt_bytes(row, 'redis')} | {fmt_bytes(row, 'tidecache')} | "
                         f"{'n/a' if r is None else f'{r:.2f}'} | {used} |")
        lines += ["", "RSS growth (VmRSS after - before) / items; the last column is the growth of "
                  "INFO memory's used_memory, redis / tidecache, for reference. VmRSS includes "
                  "the executable's pages first run by the load (about 0.7 MB of tidecache's "
                  "code for the lists row, 0.7 B per element), which used_memory does not. "
                  "A list of one node of at most 254 elements is held in its key's entry "
                  "(no node deque)."]
        lines.append("")
    if "expiry" in results:
        e = results["expiry"]
        lines += [f"### Mass expiry ({e['documents']:,} documents due in the same second, "
                  "ttl-monitor-period 1, tidecache)", ""]
        if e.get("error"):
            lines.append(f"n/a (error: {e['error']})")
        else:
            lines += ["| DOC.FIND by _id | samples | p50 µs | p99 µs |", "| --- | ---: | ---: | ---: |",
                      f"| idle | {e['idle_n']} | {e['idle_p50']:.0f} | {e['idle_p99']:.0f} |",
                      f"| during the sweep | {e['during_n']} | {e['during_p50']:.0f} | {e['during_p99']:.0f} |",
                      "",
                      f"p99 during / idle: {e['during_p99'] / e['idle_p99']:.2f}. Sweep window: "
                      f"{e['sweep_start_s']:+.2f} s to {e['sweep_end_s']:+.2f} s from the due second "
                      f"({e['sweep_window_from']}); insert rate while loading "
                      f"{e['insert_rate']:,.0f} documents/s."]
        lines.append("")
    if "zipf" in results:
        z = results["zipf"]
        lines += [f"### LRU hit ratio (Zipf s=0.99, {z['requests']:,} GETs over {z['keys']:,} keys, "
                  "SET of the value on miss, allkeys-lru)", "",
                  f"At most {z['ceiling']:,} hits are possible: the rest are first requests of "
                  "a key.", "",
                  "| maxmemory | value | server | hit ratio | hits | keys resident at the end | peak used_memory MB | RSS at the end MB |",
                  "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
        for p in z.get("points", [z]):
            for kind in ("redis", "tidecache"):
                r = p.get(kind) or {"error": "not run"}
                if r.get("error"):
                    lines.append(f"| {p['maxmemory_mb']}mb | {p['value_bytes']} B | {kind} | n/a (error: {r['error']}) | | | | |")
                else:
                    lines.append(f"| {p['maxmemory_mb']}mb | {p['value_bytes']} B | {kind} | {r['hit_ratio']:.4f} | "
                                 f"{r['hits']:,} | {r['resident_keys']:,} | "
                                 f"{r.get('peak_used_memory', 0) / 2**20:.1f} | "
                                 f"{r.get('rss', 0) / 2**20:.1f} |")
        lines.append("")
    if "threads" in results:
        lines.append(threads_markdown(results["threads"]))
    if "persistence" in results:
        lines.append(persistence_markdown(results["persistence"]))
    if "tls" in results:
        lines.append(tls_markdown(results["tls"]))
    if "cluster" in results:
        lines.append(cluster_markdown(results["cluster"]))
    return "\n".join(lines)


def publish(md, results):
    """docs/BENCHMARKS.md (the tables of this run) and docs/compare.svg (its chart)."""
    head = [
        "# Benchmarks: tidecache next to redis-server",
        "",
        "Generated by `python3 benches/compare/run.py --publish` (see README, \"Measuring against",
        "Redis\"); every figure below comes from that one run. Ratios are tidecache / redis: above",
        "1 is better for throughput and hit ratio, below 1 is better for memory. Where a DOC.*",
        "command is compared with a Redis command, the Redis column runs what a Redis user would",
        "run instead (named after \"vs\"). Machines are noisy: compare ratios within one run.",
        "Figures from earlier runs, with the notes that went with them, are kept in",
        "[architecture-history.md](architecture-history.md) (not regenerated).",
        "",
        f"redis-server: `{results.get('redis_version', '')}`",
        "",
        "![throughput](compare.svg)",
        "",
    ]
    with open(os.path.join(ROOT, "docs", "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(head) + "\n" + md.rstrip("\n") + "\n")
    if "throughput" in results:
        shutil.copyfile(os.path.join(OUT, "throughput.svg"), os.path.join(ROOT, "docs", "compare.svg"))
    log("wrote docs/BENCHMARKS.md and docs/compare.svg")

# ---------------------------------------------------------------------------------------------
# 4b. threads: how throughput scales with io-threads


def threads(env, quick):
    """GET and SET at -P 1 and -P 16 (redis-benchmark -c 50, 100k keys), each server started
    fresh per configuration and preloaded with the keys:
    - pinned: the server on CPU 1 and redis-benchmark on CPU 0 (`taskset`), so the server has
      one core to itself: redis-server against tidecache with io-threads 1;
    - shared: nothing pinned, both on every core: redis-server against tidecache with
      io-threads 1 and with io-threads 2.
    Rows alternate between servers per round; medians of the rounds."""
    cores = os.cpu_count() or 1
    pin = cores >= 2 and run(["taskset", "-c", "0", "true"], 10)[0] == 0
    keys = 10_000 if quick else 100_000
    rounds = 1 if quick else 3
    cmds = [("GET", ["GET", "key:__rand_int__"]),
            ("SET", ["SET", "key:__rand_int__", VALUE32])]
    configs = []
    if pin:
        configs.append(("pinned (server on CPU 1, redis-benchmark on CPU 0)", ["taskset", "-c", "1"],
                        ["taskset", "-c", "0"], [("tidecache io-threads 1", ["--io-threads", "1"])]))
    configs.append(("shared (nothing pinned)", [], [],
                    [("tidecache io-threads 1", ["--io-threads", "1"]),
                     ("tidecache io-threads 2", ["--io-threads", "2"])]))
    out = {"cores": cores, "pinned": pin, "rows": []}
    for label, server_prefix, bench_prefix, tides in configs:
        variants = [("redis-server", None)] + [(name, extra) for name, extra in tides]
        servers = {}
        try:
            for name, extra in variants:
                log(f"threads: {label}: starting {name}")
                if extra is None:
                    srv = env.redis("threads")
                else:
                    srv = env.tide("threads", *extra)
                if server_prefix:
                    run(["taskset", "-a", "-p", "-c", server_prefix[-1], str(srv.proc.pid)], 10)
                c = srv.client()
                load(c, [encode("SET", f"key:{i:012d}", VALUE32) for i in range(keys)])
                c.close()
                servers[name] = srv
            for cname, cmd in cmds:
                for pipeline in (1, 16):
                    n = (20_000 if quick else 200_000) * (4 if pipeline > 1 else 1)
                    samples = {name: [] for name in servers}
                    for _ in range(rounds):
                        for name, srv in servers.items():
                            m, err = bench(srv, cmd, n, pipeline, keys, max(120, n / 200),
                                           prefix=bench_prefix)
                            if m:
                                samples[name].append(m)
                    row = {"setup": label, "command": cname, "pipeline": pipeline, "servers": {}}
                    for name, vals in samples.items():
                        if vals:
                            row["servers"][name] = {
                                "rps": statistics.median(v["rps"] for v in vals),
                                "cpu_us": statistics.median(v["cpu_us"] for v in vals)}
                    out["rows"].append(row)
                    log(f"threads: {label}: {cname} -P {pipeline}: " + ", ".join(
                        f"{k} {v['rps']:,.0f}/s {v['cpu_us']:.2f} µs" for k, v in row["servers"].items()))
        finally:
            for srv in servers.values():
                srv.stop()
    return out


def threads_markdown(t):
    lines = [f"### Throughput by io-threads ({t['cores']} cores; requests/s and server CPU µs per request)", ""]
    names = []
    for row in t["rows"]:
        for name in row["servers"]:
            if name not in names:
                names.append(name)
    lines += ["| setup | command | " + " | ".join(names) + " |",
              "| --- | --- | " + " | ".join("---:" for _ in names) + " |"]
    for row in t["rows"]:
        cells = []
        for name in names:
            v = row["servers"].get(name)
            cells.append("n/a" if v is None else f"{v['rps']:,.0f} ({v['cpu_us']:.2f} µs)")
        lines.append(f"| {row['setup']} | {row['command']} -P {row['pipeline']} | " + " | ".join(cells) + " |")
    if not t["pinned"]:
        lines += ["", "No pinned rows: `taskset` is missing or the machine has one core."]
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# 5. persistence (`--only persistence`)


def info_field(server_or_port, section, field):
    port = server_or_port if isinstance(server_or_port, int) else server_or_port.port
    c = Client(port, timeout=30)
    try:
        r = c.call("INFO", section)
    finally:
        c.close()
    if isinstance(r, bytes):
        for line in r.decode(errors="replace").splitlines():
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    return None


def wait_rewrite(server, timeout=600):
    """Waits until no AOF rewrite runs (or is scheduled)."""
    deadline = time.time() + timeout
    time.sleep(0.2)
    while time.time() < deadline:
        if info_field(server, "persistence", "aof_rewrite_in_progress") == "0" and \
                info_field(server, "persistence", "aof_rewrite_scheduled") == "0":
            return True
        time.sleep(0.05)
    return False


def bench_pair(servers, cmds, pipeline, keyspace, n, rounds, ports=None, extra=()):
    """redis-benchmark on both servers (alternating), same n and settings; a row as the
    throughput table's. `ports` (by kind) and `extra`: as `bench`'s."""
    row = {"pipeline": pipeline, "redis": None, "tidecache": None,
           "redis_error": None, "tidecache_error": None, "n": n}
    samples = {"redis": [], "tidecache": []}
    for _ in range(rounds):
        for kind in ("redis", "tidecache"):
            if kind not in servers or row[kind + "_error"]:
                continue
            m, err = bench(servers[kind], cmds[kind], n, pipeline, keyspace, max(120, n / 200),
                           (ports or {}).get(kind), extra)
            if err:
                row[kind + "_error"] = err
            else:
                samples[kind].append(m)
    for kind, vals in samples.items():
        if vals and not row[kind + "_error"]:
            row[kind] = statistics.median(v["rps"] for v in vals)
            row[kind + "_rounds"] = [v["rps"] for v in vals]
            row[kind + "_cpu_us"] = statistics.median(v["cpu_us"] for v in vals)
            row[kind + "_p50_ms"] = statistics.median(v["p50_ms"] for v in vals)
    return row


def persistence_throughput(env, quick):
    """SET under appendonly yes (everysec at -P 1 and 16, always at -P 1) and DOC.INSERT with
    and without J; both servers with the same settings (appendonly yes, the policy set with
    CONFIG SET on both before each row)."""
    n = 20_000 if quick else 200_000
    rounds = 1 if quick else 2
    common = ("--appendonly", "yes", "--appendfsync", "everysec")
    redis = env.redis("aof", *common, "--aof-use-rdb-preamble", "no")
    tide = env.tide("aof", *common)
    servers = {"redis": redis, "tidecache": tide}
    set_ = ["SET", "key:__rand_int__", VALUE32]
    hset4 = ["HSET", "h:__rand_int__", "a", "1", "b", "x", "c", "2.5", "d", "true"]
    doc = '{"userID":"__rand_int__",' + DOC_FIELDS + "}"
    rows = []
    try:
        c = tide.client()
        c.call("DOC.CREATEINDEX", "inserts", '{"userID":1}')
        c.close()
        plan = [
            ("SET, appendonly yes, appendfsync everysec", "everysec", set_, set_, 1, n),
            ("SET, appendonly yes, appendfsync everysec -P 16", "everysec", set_, set_, 16, n * 4),
            ("SET, appendonly yes, appendfsync always", "always", set_, set_, 1, n // 4),
            ("DOC.INSERT (no J) vs HSET 4 fields, everysec", "everysec", hset4,
             ["DOC.INSERT", "inserts", doc], 1, n),
            ("DOC.INSERT J vs HSET 4 fields under appendfsync always", None, hset4,
             ["DOC.INSERT", "inserts", doc, "J"], 1, n // 4),
        ]
        for name, policy, rcmd, tcmd, pipeline, count in plan:
            for kind, srv in servers.items():
                # The J row: tidecache stays on everysec (J waits for the fsync itself); the
                # Redis column is the durable equivalent, appendfsync always.
                pol = policy or ("always" if kind == "redis" else "everysec")
                cl = srv.client()
                cl.call("CONFIG", "SET", "appendfsync", pol)
                cl.close()
            row = bench_pair(servers, {"redis": rcmd, "tidecache": tcmd}, pipeline, 10**9, count, rounds)
            row["workload"] = name
            rows.append(row)
            log(f"  {name:58} {fmt_rps(row, 'redis'):>12} {fmt_cpu(row, 'redis'):>6} µs"
                f" {fmt_rps(row, 'tidecache'):>12} {fmt_cpu(row, 'tidecache'):>6} µs")
    finally:
        redis.stop()
        tide.stop()
    by = {r["workload"]: r for r in rows}
    j = by.get("DOC.INSERT J vs HSET 4 fields under appendfsync always", {}).get("tidecache")
    nj = by.get("DOC.INSERT (no J) vs HSET 4 fields, everysec", {}).get("tidecache")
    return rows, (None if not j or not nj else j / nj)


def spawn_on(argv, workdir, logname):
    log_f = open(os.path.join(OUT, logname), "w")
    proc = subprocess.Popen(argv, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log_f,
                            stderr=subprocess.STDOUT, start_new_session=True)
    srv = Server("spawned", argv, int(argv[argv.index("--port") + 1]), logname)
    srv.proc, srv.logfile, srv.workdir = proc, log_f, None
    SERVERS.append(srv)
    return srv


def stop_keep(srv):
    """Stops a server started by `spawn_on`, keeping its directory."""
    if srv.proc.poll() is None:
        srv.proc.terminate()
        try:
            srv.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            srv.proc.wait(timeout=10)
    srv.logfile.close()
    if srv in SERVERS:
        SERVERS.remove(srv)


def time_to_ready(argv, workdir, logname, timeout=600):
    """Starts a server on `workdir` and times it until PING answers PONG (not -LOADING)."""
    t0 = time.time()
    srv = spawn_on(argv, workdir, logname)
    while time.time() - t0 < timeout:
        if srv.proc.poll() is not None:
            return srv, None
        try:
            c = Client(srv.port, timeout=5)
            r = c.call("PING")
            c.close()
            if r == "PONG":
                return srv, time.time() - t0
        except OSError:
            pass
        time.sleep(0.01)
    return srv, None


def dir_bytes(path, pred=lambda name: True):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if pred(f))
    return total


def rewrite_latency(srv):
    """BGREWRITEAOF while one client sends GETs back to back: (worst ms, p99 ms, requests,
    seconds the rewrite took)."""
    stop = [False]
    lat = []
    import threading

    def pinger():
        c = Client(srv.port, timeout=30)
        while not stop[0]:
            t = time.perf_counter()
            c.call("GET", "key:%012d" % random.randrange(1000))
            lat.append(time.perf_counter() - t)
        c.close()

    th = threading.Thread(target=pinger)
    th.start()
    time.sleep(0.3)
    t0 = time.time()
    c = Client(srv.port, timeout=30)
    c.call("BGREWRITEAOF")
    c.close()
    lat.clear()  # only what overlaps the rewrite
    ok = wait_rewrite(srv)
    took = time.time() - t0
    stop[0] = True
    th.join()
    if not ok or not lat:
        return None
    return max(lat) * 1000, percentile(lat, 99) * 1000, len(lat), took


def persistence_restart(env, quick):
    """1M keys (and 1M documents on tidecache): on-disk size per key, time to restart, worst
    latency of a client during BGREWRITEAOF, on both servers."""
    keys = 100_000 if quick else 1_000_000
    label = f"{keys // 1000}k" if keys < 1_000_000 else f"{keys // 1_000_000}M"
    kv = os.path.join(OUT, "persist-kv.resp")
    docs = os.path.join(OUT, "persist-docs.resp")
    log(f"persistence: generating {label} keys and documents")
    write_resp(kv, (encode("SET", "key:%012d" % i, VALUE32) for i in range(keys)))
    write_resp(docs, (encode("DOC.INSERT", "users", user_doc(i)) for i in range(keys)))
    res = {"keys": keys, "label": label}
    base = tempfile.mkdtemp(prefix="persist-", dir=OUT)
    rdir, tdir = os.path.join(base, "redis"), os.path.join(base, "tidecache")
    os.makedirs(rdir)
    os.makedirs(tdir)
    rport, tport = free_port(), free_port()
    rargv = [env.redis_bin, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--daemonize", "no",
             "--logfile", "", "--dir", rdir, "--auto-aof-rewrite-percentage", "0"]
    # No automatic rewrite on either side: the one measured is the BGREWRITEAOF sent here,
    # over every key (an automatic one during the load would cover part of them).
    targv = [env.tide_bin, "--port", str(tport), "--loglevel", "warning", "--save", "",
             "--appendonly", "yes", "--dir", tdir, "--auto-aof-rewrite-percentage", "0"]
    try:
        for kind, argv, d in (("redis", rargv, rdir), ("tidecache", targv, tdir)):
            srv, _ = time_to_ready(argv, d, f"{kind}-persist.log")
            with open(kv, "rb") as f:
                run(["redis-cli", "-p", str(srv.port), "--pipe"], 900, stdin=f)
            # A rewrite of the keys alone: the base's size per key, and a client's worst
            # latency meanwhile.
            lat = rewrite_latency(srv)
            if lat:
                res[kind + "_rewrite_max_ms"], res[kind + "_rewrite_p99_ms"], \
                    res[kind + "_rewrite_requests"], res[kind + "_rewrite_s"] = lat
            aofdir = os.path.join(d, "appendonlydir")
            res[kind + "_aof_bytes_per_key"] = dir_bytes(aofdir, lambda f: ".base." in f) / keys
            c = Client(srv.port, timeout=600)
            c.call("SAVE")
            c.close()
            res[kind + "_rdb_bytes_per_key"] = os.path.getsize(os.path.join(d, "dump.rdb")) / keys
            stop_keep(srv)
            # Restart from the journal/AOF (keys only).
            srv, secs = time_to_ready(argv, d, f"{kind}-persist-aof.log")
            res[kind + "_restart_aof_s"] = secs
            stop_keep(srv)
            # Restart from dump.rdb alone.
            shutil.rmtree(aofdir, ignore_errors=True)
            no_aof = [a if a != "yes" or argv[i - 1] != "--appendonly" else "no"
                      for i, a in enumerate(argv)]
            srv, secs = time_to_ready(no_aof, d, f"{kind}-persist-rdb.log")
            res[kind + "_restart_rdb_s"] = secs
            stop_keep(srv)
        # tidecache: 1M keys + 1M documents in the journal (after a rewrite), restarted.
        srv, _ = time_to_ready(targv, tdir, "tidecache-persist-docs.log")
        with open(kv, "rb") as f:
            run(["redis-cli", "-p", str(srv.port), "--pipe"], 900, stdin=f)
        with open(docs, "rb") as f:
            run(["redis-cli", "-p", str(srv.port), "--pipe"], 1800, stdin=f)
        c = Client(srv.port, timeout=600)
        c.call("BGREWRITEAOF")
        c.close()
        wait_rewrite(srv)
        res["tidecache_docs_base_bytes"] = dir_bytes(os.path.join(tdir, "appendonlydir"),
                                                     lambda f: ".base." in f)
        stop_keep(srv)
        srv, secs = time_to_ready(targv, tdir, "tidecache-persist-docs2.log")
        res["tidecache_restart_docs_s"] = secs
        c = Client(srv.port, timeout=60)
        res["tidecache_docs_loaded"] = [c.call("DBSIZE"), c.call("DOC.COUNT", "users", "{}")]
        c.close()
        stop_keep(srv)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        for p in (kv, docs):
            try:
                os.remove(p)
            except OSError:
                pass
    return res


def persistence(env, quick):
    log("persistence: throughput under appendonly yes")
    rows, j_ratio = persistence_throughput(env, quick)
    log("persistence: sizes, restart times, latency during BGREWRITEAOF")
    res = persistence_restart(env, quick)
    res["rows"] = rows
    res["j_ratio"] = j_ratio
    return res


def persistence_markdown(p):
    f = lambda v, spec: "n/a" if v is None else format(v, spec)
    lines = ["### Persistence (appendonly yes; redis-benchmark -c 50, same settings on both)", "",
             "| workload | redis-server | tidecache | tidecache / redis | CPU µs/request redis / tidecache |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for row in p["rows"]:
        r = ratio(row["tidecache"], row["redis"])
        lines.append(f"| {row['workload']}{' -P ' + str(row['pipeline']) if row['pipeline'] > 1 and '-P' not in row['workload'] else ''} | "
                     f"{fmt_rps(row, 'redis')} | {fmt_rps(row, 'tidecache')} | "
                     f"{'n/a' if r is None else f'{r:.2f}'} | "
                     f"{fmt_cpu(row, 'redis')} / {fmt_cpu(row, 'tidecache')} |")
    lines += ["", f"DOC.INSERT with J / without J (tidecache): {f(p.get('j_ratio'), '.2f')} "
              "(target: 0.5 or more).", ""]
    lab = p["label"]
    lines += [f"| {lab} keys of 32 B | redis-server | tidecache |", "| --- | ---: | ---: |",
              f"| AOF/journal base after a rewrite, bytes per key (RESP; Redis with aof-use-rdb-preamble no) | "
              f"{f(p.get('redis_aof_bytes_per_key'), '.1f')} | {f(p.get('tidecache_aof_bytes_per_key'), '.1f')} |",
              f"| dump.rdb, bytes per key | {f(p.get('redis_rdb_bytes_per_key'), '.1f')} | "
              f"{f(p.get('tidecache_rdb_bytes_per_key'), '.1f')} |",
              f"| restart from the AOF/journal, s | {f(p.get('redis_restart_aof_s'), '.2f')} | "
              f"{f(p.get('tidecache_restart_aof_s'), '.2f')} |",
              f"| restart from dump.rdb, s | {f(p.get('redis_restart_rdb_s'), '.2f')} | "
              f"{f(p.get('tidecache_restart_rdb_s'), '.2f')} |",
              f"| BGREWRITEAOF: a client's worst GET latency, ms | {f(p.get('redis_rewrite_max_ms'), '.2f')} | "
              f"{f(p.get('tidecache_rewrite_max_ms'), '.2f')} |",
              f"| BGREWRITEAOF: p99 GET latency, ms | {f(p.get('redis_rewrite_p99_ms'), '.3f')} | "
              f"{f(p.get('tidecache_rewrite_p99_ms'), '.3f')} |",
              f"| BGREWRITEAOF: duration, s (GETs measured) | {f(p.get('redis_rewrite_s'), '.2f')} ({p.get('redis_rewrite_requests', 'n/a')}) | "
              f"{f(p.get('tidecache_rewrite_s'), '.2f')} ({p.get('tidecache_rewrite_requests', 'n/a')}) |",
              "",
              f"tidecache with {lab} keys + {lab} documents in the journal (after a rewrite, base "
              f"{f((p.get('tidecache_docs_base_bytes') or 0) / 2**20, '.1f')} MB): restart in "
              f"{f(p.get('tidecache_restart_docs_s'), '.2f')} s (loaded: DBSIZE, DOC.COUNT = "
              f"{p.get('tidecache_docs_loaded')}). Restart = process start until PING answers PONG.",
              ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# 6. TLS (`--only tls`)


def get_set_plan(label=""):
    """GET and SET of `key:__rand_int__` at pipeline 1 and 16: (name, command, pipeline) rows
    for the parts that measure just those (TLS, cluster)."""
    return [(f"{verb}{label}", cmd, pipeline)
            for verb, cmd in (("GET", ["GET", "key:__rand_int__"]),
                              ("SET", ["SET", "key:__rand_int__", VALUE32]))
            for pipeline in (1, 16)]


def make_test_certs(d):
    """A throwaway CA and a server certificate it signed (EC P-256, valid for localhost and
    127.0.0.1, two days) in `d`, made with `openssl`: (ca, cert, key) paths, or raises
    HarnessError with openssl's complaint."""
    ca, ca_key = os.path.join(d, "ca.crt"), os.path.join(d, "ca.key")
    crt, key, csr = (os.path.join(d, n) for n in ("server.crt", "server.key", "server.csr"))
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2",
         "-subj", "/CN=tidecache compare harness CA"],
        ["openssl", "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost"],
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
         "-out", crt, "-days", "2", "-extfile", ext],
    ]
    for argv in steps:
        try:
            rc, out, err = run(argv, 60)
        except OSError as e:  # no openssl on PATH
            raise HarnessError(f"openssl: {e}") from e
        if rc != 0:
            raise HarnessError(f"openssl {argv[1]}: {short(err or out)}")
    return ca, crt, key


def tls(env, quick):
    """GET and SET at pipeline 1 and 16 over TLS on both servers, same run, same certificate
    (no client certificates: `tls-auth-clients no`). Each server also keeps a plain port, used
    only to start it and preload keys; redis-benchmark talks to the TLS port alone. Its 50
    connections each make one handshake, which the CPU per request includes (a small share
    at these request counts). A server that cannot start with TLS makes its rows n/a."""
    keys = 10_000 if quick else 100_000
    n = 4_000 if quick else 100_000
    rounds = 1 if quick else 3
    plan = get_set_plan(" over TLS")
    rows = [{"workload": name, "pipeline": p, "redis": None, "tidecache": None,
             "redis_error": None, "tidecache_error": None} for name, _, p in plan]
    d = tempfile.mkdtemp(prefix="tls-", dir=OUT)
    servers, ports, errors, ca = {}, {}, {}, None
    try:
        try:
            ca, crt, key = make_test_certs(d)
        except HarnessError as e:
            errors = {"redis": str(e), "tidecache": str(e)}
        if not errors:
            for kind in ("redis", "tidecache"):
                ports[kind] = free_port()
                opts = ("--tls-port", str(ports[kind]), "--tls-cert-file", crt,
                        "--tls-key-file", key, "--tls-ca-cert-file", ca,
                        "--tls-auth-clients", "no")
                try:
                    servers[kind] = (env.redis if kind == "redis" else env.tide)("tls", *opts)
                except HarnessError as e:  # e.g. a redis-server built without TLS
                    errors[kind] = short(e)
        for kind, srv in servers.items():
            log(f"tls: preloading {keys} keys on {kind}")
            c = srv.client(timeout=60)
            try:
                bad, first = load(c, [encode("SET", "key:%012d" % i, VALUE32) for i in range(keys)])
            finally:
                c.close()
            if bad:
                errors[kind] = f"preload: {first}"
        extra = ("--tls", "--cacert", ca)
        for row, (name, cmd, pipeline) in zip(rows, plan):
            for kind, e in errors.items():
                row[kind + "_error"] = e
            live = {k: s for k, s in servers.items() if k not in errors}
            if live:
                got = bench_pair(live, {k: cmd for k in live}, pipeline, keys,
                                 n * (4 if pipeline > 1 else 1), rounds, ports, extra)
                for kind in live:
                    for field in ("", "_error", "_rounds", "_cpu_us", "_p50_ms"):
                        if kind + field in got:
                            row[kind + field] = got[kind + field]
                row["n"] = got["n"]
            log(f"  {name + ' -P ' + str(pipeline):44} {fmt_rps(row, 'redis'):>14} "
                f"{fmt_cpu(row, 'redis'):>6} µs {fmt_rps(row, 'tidecache'):>14} "
                f"{fmt_cpu(row, 'tidecache'):>6} µs")
    finally:
        for srv in servers.values():
            srv.stop()
        shutil.rmtree(d, ignore_errors=True)
    return rows


def tls_markdown(rows):
    lines = ["### TLS (requests/s, redis-benchmark -c 50 --tls; tls-auth-clients no, EC P-256)", "",
             "| workload | redis-server | tidecache | tidecache / redis | CPU µs/request redis / tidecache | CPU tidecache / redis | p50 ms redis / tidecache | spread of the rounds |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        r = ratio(row["tidecache"], row["redis"])
        c = ratio(row.get("tidecache_cpu_us") if row["tidecache"] else None,
                  row.get("redis_cpu_us") if row["redis"] else None)
        lines.append(f"| {row['workload']} -P {row['pipeline']} | {fmt_rps(row, 'redis')} | "
                     f"{fmt_rps(row, 'tidecache')} | {'n/a' if r is None else f'{r:.2f}'} | "
                     f"{fmt_cpu(row, 'redis')} / {fmt_cpu(row, 'tidecache')} | "
                     f"{'n/a' if c is None else f'{c:.2f}'} | {fmt_p50(row)} | {spread(row)} |")
    lines += ["", "Same measures as the throughput table; each of the 50 connections makes one "
              "TLS handshake, included in the CPU per request.", ""]
    return "\n".join(lines)



# ---------------------------------------------------------------------------------------------
# 7. cluster mode (`--only cluster`)


def cluster_node(env, kind, tag):
    """One server in cluster mode owning every slot (a cluster of one node: redis-benchmark
    needs no redirection), up once `cluster_state` is ok."""
    start = env.redis if kind == "redis" else env.tide
    srv = start(tag, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                port=free_cluster_port())
    c = srv.client()
    try:
        r = c.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        if r != "OK":
            raise HarnessError(f"{kind}: CLUSTER ADDSLOTSRANGE answered {r!r}")
        deadline = time.time() + 20
        while time.time() < deadline:
            info = c.call("CLUSTER", "INFO")
            if isinstance(info, bytes) and b"cluster_state:ok" in info:
                return srv
            time.sleep(0.05)
    finally:
        c.close()
    raise HarnessError(f"{kind} in cluster mode did not reach cluster_state:ok")


def cluster(env, quick):
    """GET and SET at pipeline 1 and 16 on each server standalone and as a one-node cluster
    owning every slot, all four in one run, rounds alternating the four (the order rotated
    each round): the cost of cluster mode itself (slot routing, the per-slot key index) as
    CPU per request, cluster / standalone. Then the memory the per-slot key index takes:
    used_memory after loading the same keys, cluster minus standalone, per key."""
    keys = 10_000 if quick else 100_000
    n = 20_000 if quick else 200_000
    rounds = 1 if quick else 5
    mem_keys = 100_000 if quick else 1_000_000
    plan = get_set_plan()
    order = [("redis", "standalone"), ("redis", "cluster"),
             ("tidecache", "standalone"), ("tidecache", "cluster")]
    servers = {}
    out = {"rows": [], "memory": {}, "keys": mem_keys}
    try:
        for kind, mode in order:
            servers[(kind, mode)] = (cluster_node(env, kind, "cluster") if mode == "cluster"
                                     else (env.redis if kind == "redis" else env.tide)("standalone"))
        for (kind, mode), srv in servers.items():
            log(f"cluster: preloading {keys} keys on {kind} {mode}")
            c = srv.client(timeout=60)
            try:
                bad, first = load(c, [encode("SET", "key:%012d" % i, VALUE32) for i in range(keys)])
            finally:
                c.close()
            if bad:
                raise HarnessError(f"cluster preload on {kind} {mode}: {first}")
        for name, cmd, pipeline in plan:
            nreq = n * (4 if pipeline > 1 else 1)
            samples = {k: [] for k in servers}
            errors = {}
            for r in range(rounds):
                turn = order[r % 4:] + order[:r % 4]
                for k in turn:
                    if k in errors:
                        continue
                    m, err = bench(servers[k], cmd, nreq, pipeline, keys, max(120, nreq / 200))
                    if err:
                        errors[k] = err
                    else:
                        samples[k].append(m)
            row = {"workload": name, "pipeline": pipeline, "n": nreq}
            for (kind, mode), vals in samples.items():
                key = f"{kind}_{mode}"
                row[key + "_error"] = errors.get((kind, mode))
                if vals and (kind, mode) not in errors:
                    row[key + "_rps"] = statistics.median(v["rps"] for v in vals)
                    row[key + "_cpu_us"] = statistics.median(v["cpu_us"] for v in vals)
                    row[key + "_cpu_rounds"] = [v["cpu_us"] for v in vals]
            out["rows"].append(row)
            log(f"  {name} -P {pipeline}: " + "  ".join(
                f"{kind} {mode} {row.get(f'{kind}_{mode}_cpu_us') or float('nan'):.2f} µs"
                for kind, mode in order))
        # The index's memory: the same keys into each server emptied, used_memory before and
        # after; cluster minus standalone is the index (its fixed part included).
        for (kind, mode), srv in servers.items():
            log(f"cluster: {mem_keys} keys into {kind} {mode} for the index's memory")
            c = srv.client(timeout=120)
            try:
                c.call("FLUSHALL")
                before = used_memory(srv)
                for lo in range(0, mem_keys, 100_000):
                    bad, first = load(c, [encode("SET", "key:%012d" % i, VALUE32)
                                          for i in range(lo, min(mem_keys, lo + 100_000))])
                    if bad:
                        raise HarnessError(f"cluster memory load on {kind} {mode}: {first}")
            finally:
                c.close()
            after = used_memory(srv)
            out["memory"][f"{kind}_{mode}"] = None if before is None or after is None \
                else (after - before) / mem_keys
    finally:
        for srv in servers.values():
            srv.stop()
    return out


def cluster_markdown(res):
    def cpu(row, key):
        v = row.get(key + "_cpu_us")
        return f"n/a (error: {short(row.get(key + '_error') or 'unknown', 50)})" if v is None \
            else f"{v:.2f}"

    def rel(row, kind):
        a, b = row.get(kind + "_cluster_cpu_us"), row.get(kind + "_standalone_cpu_us")
        r = ratio(a, b)
        return "n/a" if r is None else f"{r:.3f}"

    lines = ["### Cluster mode: a one-node cluster owning every slot beside the same server "
             "standalone (CPU µs/request, redis-benchmark -c 50)", "",
             "| workload | redis standalone | redis cluster | redis cluster / standalone | "
             "tidecache standalone | tidecache cluster | tidecache cluster / standalone | "
             "requests/s tidecache cluster |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in res["rows"]:
        rps = row.get("tidecache_cluster_rps")
        lines.append(f"| {row['workload']} -P {row['pipeline']} | "
                     f"{cpu(row, 'redis_standalone')} | {cpu(row, 'redis_cluster')} | "
                     f"{rel(row, 'redis')} | {cpu(row, 'tidecache_standalone')} | "
                     f"{cpu(row, 'tidecache_cluster')} | {rel(row, 'tidecache')} | "
                     f"{'n/a' if rps is None else f'{rps:,.0f}'} |")
    mem = res["memory"]

    def idx(kind):
        a, b = mem.get(kind + "_cluster"), mem.get(kind + "_standalone")
        return "n/a" if a is None or b is None else f"{a - b:.1f}"

    lines += ["", "Median of the rounds; each round runs the four servers in turn, the order "
              "rotated each round. Cluster / standalone above 1 is what cluster mode costs.", "",
              f"Per-slot key index (used_memory growth from empty to {res['keys']:,} keys of 32 B, "
              f"cluster minus standalone, bytes per key, its fixed part included): redis-server {idx('redis')}, tidecache "
              f"{idx('tidecache')}.", ""]
    return "\n".join(lines)

# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small n and datasets (CI smoke test)")
    ap.add_argument("--no-build", action="store_true", help="skip cargo build --release")
    ap.add_argument("--only", default="throughput,memory,expiry,zipf,tls,threads,cluster",
                    help="comma-separated parts to run (default: all but persistence; "
                    "persistence runs alone with --only persistence)")
    ap.add_argument("--publish", action="store_true",
                    help="also write docs/BENCHMARKS.md and docs/compare.svg (after a full run)")
    ap.add_argument("--redis-server", default="redis-server")
    ap.add_argument("--tidecache", default=os.path.join(ROOT, "target", "release", "tidecache-server"))
    args = ap.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = set(parts) - {"throughput", "memory", "expiry", "zipf", "tls", "threads",
                            "persistence", "cluster"}
    if unknown:
        ap.error(f"unknown parts: {', '.join(sorted(unknown))}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    atexit.register(stop_all)
    os.makedirs(OUT, exist_ok=True)
    started = time.time()
    try:
        for tool in ("redis-benchmark", "redis-cli"):
            if run([tool, "--version"], 10)[0] != 0:
                raise HarnessError(f"{tool} not found (apt-get install redis-tools)")
        if run([args.redis_server, "--version"], 10)[0] != 0:
            raise HarnessError(f"{args.redis_server} not found (apt-get install redis-server)")
        if not args.no_build:
            log("cargo build --release")
            rc, _, err = run(["cargo", "build", "--release", "--manifest-path",
                              os.path.join(ROOT, "Cargo.toml")], 1800)
            if rc != 0:
                raise HarnessError(f"cargo build --release failed: {err[-2000:]}")
        env = Env(args)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        results = {"date": stamp, "machine": machine(), "mode": "quick" if args.quick else "full",
                   "build": build_label(args.tidecache),
                   "redis_version": run([args.redis_server, "--version"], 10)[1].strip()}
        if "throughput" in parts:
            results["throughput"] = throughput(env, args.quick)
        if "memory" in parts:
            results["memory"] = memory(env, args.quick)
        if "expiry" in parts:
            results["expiry"] = mass_expiry(env, args.quick)
        if "zipf" in parts:
            results["zipf"] = zipf(env, args.quick)
        if "threads" in parts:
            results["threads"] = threads(env, args.quick)
        if "persistence" in parts:
            results["persistence"] = persistence(env, args.quick)
        if "tls" in parts:
            log("tls: GET and SET over TLS")
            results["tls"] = tls(env, args.quick)
        if "cluster" in parts:
            log("cluster: GET and SET standalone and as a one-node cluster")
            results["cluster"] = cluster(env, args.quick)

        title = f"tidecache vs redis-server 7 — {stamp} — {results['machine']}"
        if "throughput" in results:
            with open(os.path.join(OUT, "throughput.svg"), "w") as f:
                f.write(throughput_svg(results["throughput"], title, footer_lines(results)))
        if "expiry" in results:
            with open(os.path.join(OUT, "expiry-latency.svg"), "w") as f:
                f.write(latency_svg(results["expiry"], "Mass expiry: " + title))
        md = markdown(results)
        with open(os.path.join(OUT, "results.md"), "w") as f:
            f.write(md)
        if "expiry" in results:
            results["expiry"].pop("samples", None)
        with open(os.path.join(OUT, "results.json"), "w") as f:
            json.dump(results, f, indent=2, default=str)
        print(md)
        if args.publish:
            publish(md, results)
        log(f"done in {time.time() - started:.0f}s; charts and tables in {os.path.relpath(OUT, ROOT)}/")
        return 0
    except HarnessError as e:
        log(f"harness error: {e}")
        return 2
    finally:
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
