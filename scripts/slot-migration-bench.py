#!/usr/bin/env python3
"""Atomic slot migration beside legacy resharding, on the same data (issue 46).

    python3 scripts/slot-migration-bench.py [--tidecache target/release/tidecache-server]
        [--keys 1000000] [--docs 200000] [--slots 4000]

Needs `redis-cli` 7 and Python 3 with redis-py. Runs in a few minutes on a 2-core machine.

Three tidecache masters (`redis-cli --cluster create`). On the master of slot 0: `--keys`
keys of 64 bytes (a third with a deadline) spread evenly over slots 0 .. `--slots`-1, and a
collection of `--docs` documents with a TTL index in one of those slots. A cluster client
(redis-py's RedisCluster) sends SET and GET to keys of those slots the whole time.

1. Idle: the client's latency for 5 s.
2. Atomic: `CLUSTER MIGRATION IMPORT 0 <slots-1>` on another master, until STATUS says
   completed. Measured: seconds, the source's CPU (utime+stime from /proc/PID/stat), the
   write pause, the client's p99 and its errors (RedisCluster follows MOVED by itself; any
   exception is an error). Then checked: every key and document is on the target with the
   index list, the source holds none of them, no acknowledged write is lost.
3. Legacy: `redis-cli --cluster reshard` moves the same slots back, key by key (MIGRATE),
   with the same client running. Same figures.

Prints a markdown table. Exit status 1 if a check fails.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import redis
from redis.cluster import RedisCluster


def crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_slot(key: str) -> int:
    k = key.encode()
    s = k.find(b"{")
    if s != -1:
        e = k.find(b"}", s + 1)
        if e != -1 and e != s + 1:
            k = k[s + 1:e]
    return crc16(k) % 16384


def tags_for(slots: int) -> list:
    """A hash tag for each slot below `slots`."""
    out = [None] * slots
    left = slots
    n = 0
    while left:
        t = f"t{n}"
        n += 1
        s = key_slot(t)
        if s < slots and out[s] is None:
            out[s] = t
            left -= 1
    return out


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p < 55000:
            try:
                with socket.socket() as s2:
                    s2.bind(("127.0.0.1", p + 10000))
                return p
            except OSError:
                continue


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class Node:
    def __init__(self, binary: str, root: str):
        self.port = free_port()
        self.dir = os.path.join(root, str(self.port))
        os.makedirs(self.dir)
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--cluster-enabled", "yes",
             "--dir", self.dir, "--save", "", "--appendonly", "no",
             "--cluster-node-timeout", "5000"],
            stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(100):
            try:
                self.conn().ping()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.1)
        raise SystemExit(f"node on {self.port} did not start")

    def conn(self):
        return redis.Redis(port=self.port, socket_timeout=600)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def owner_of(conn, slot: int) -> int:
    for a, b, m, *_ in conn.execute_command("CLUSTER", "SLOTS"):
        if a <= slot <= b:
            return m[1]
    raise SystemExit(f"no owner of slot {slot}")


class Client(threading.Thread):
    """SET and GET on keys of the moving slots through a cluster client, timed."""

    def __init__(self, port: int, keys: list):
        super().__init__(daemon=True)
        self.rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=10)
        self.keys = keys
        self.stop = threading.Event()
        self.lat = []
        self.errors = []
        self.acked = {}
        self.mark = None

    def take(self):
        lat, self.lat = self.lat, []
        return lat

    def run(self):
        i = 0
        while not self.stop.is_set():
            k = self.keys[i % len(self.keys)]
            w = f"{k}:w"
            t = time.perf_counter()
            try:
                if i % 2 == 0:
                    self.rc.set(w, i)
                    self.acked[w] = i
                else:
                    self.rc.get(k)
                self.lat.append(time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001 - every error counts
                self.errors.append(repr(e))
            i += 1


def p99(lat):
    if not lat:
        return float("nan")
    s = sorted(lat)
    return s[min(len(s) - 1, int(len(s) * 0.99))] * 1000


def fields_of(rows) -> dict:
    """The first task of a STATUS reply as a dict (a map, or field-value pairs)."""
    if not rows:
        return {}
    row = rows[0]
    if isinstance(row, dict):
        return row
    return dict(zip(row[::2], row[1::2]))


def names_in(conn, slots: int) -> int:
    pipe = conn.pipeline(transaction=False)
    for s in range(slots):
        pipe.execute_command("CLUSTER", "COUNTKEYSINSLOT", s)
    return sum(pipe.execute())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidecache", default="target/release/tidecache-server")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--slots", type=int, default=4000)
    args = ap.parse_args()
    if not shutil.which("redis-cli"):
        raise SystemExit("redis-cli is needed")
    root = tempfile.mkdtemp(prefix="tc-asm-bench-")
    nodes = [Node(args.tidecache, root) for _ in range(3)]
    failed = []
    try:
        out = subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in nodes],
             "--cluster-yes"], capture_output=True, text=True, timeout=120)
        if "[OK] All 16384 slots covered." not in out.stdout:
            raise SystemExit(out.stdout + out.stderr)
        for _ in range(200):
            if all(b"cluster_state:ok" in n.conn().execute_command("CLUSTER", "INFO") for n in nodes):
                break
            time.sleep(0.1)
        port = owner_of(nodes[0].conn(), 0)
        src = next(n for n in nodes if n.port == port)
        dst = next(n for n in nodes if n.port != port)
        assert owner_of(src.conn(), args.slots - 1) == src.port, "the source owns the slots"
        src_id = src.conn().execute_command("CLUSTER", "MYID").decode()
        dst_id = dst.conn().execute_command("CLUSTER", "MYID").decode()

        # The data.
        tags = tags_for(args.slots)
        c = src.conn()
        t0 = time.time()
        pipe = c.pipeline(transaction=False)
        value = b"v" * 64
        for i in range(args.keys):
            k = f"{{{tags[i % args.slots]}}}:k{i}"
            if i % 3 == 0:
                pipe.set(k, value, ex=86400)
            else:
                pipe.set(k, value)
            if i % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()
        coll = f"{{{tags[7]}}}sessions"
        c.execute_command("DOC.CREATEINDEX", coll, '{"user":1}')
        c.execute_command("DOC.EXPIREINDEX", coll, "accessTime", "3600")
        for b in range(0, args.docs, 1000):
            docs = [f'{{"_id":{i},"user":"u{i % 100}","accessTime":"$$NOW"}}'
                    for i in range(b, min(args.docs, b + 1000))]
            c.execute_command("DOC.INSERT", coll, *docs)
        indexes = c.execute_command("DOC.INDEXES", coll)
        # Sorted: the target's natural order is the order the copy inserted them in.
        sample = sorted(c.execute_command("DOC.FIND", coll, '{"_id":{"$in":[5,77777,199999]}}'))
        loaded = names_in(c, args.slots)
        print(f"loaded {loaded} names ({args.keys} keys, 1 collection of {args.docs} documents) "
              f"in {time.time() - t0:.1f} s", flush=True)

        client_keys = [f"{{{tags[i % args.slots]}}}:k{i}" for i in range(0, args.keys, args.keys // 2000)]
        client = Client(nodes[0].port, client_keys)
        client.start()
        time.sleep(5)
        idle = client.take()
        rows = []

        # Atomic slot migration.
        cpu0, t0 = cpu_seconds(src.proc.pid), time.time()
        d = dst.conn()
        task = d.execute_command("CLUSTER", "MIGRATION", "IMPORT", 0, args.slots - 1).decode()
        while True:
            fields = fields_of(d.execute_command("CLUSTER", "MIGRATION", "STATUS", "ID", task))
            state = fields.get(b"state", b"").decode()
            if state in ("completed", "failed", "canceled"):
                break
            time.sleep(0.02)
        flip = time.time() - t0
        if state != "completed":
            failed.append(f"the atomic migration ended {state}: {fields.get(b'last_error')}")
        # The source ends its task last, once it has deleted the slots' keys: the migration's
        # time and CPU are counted to there, as the legacy way's include its deletions.
        while True:
            src_fields = fields_of(src.conn().execute_command("CLUSTER", "MIGRATION", "STATUS", "ID", task))
            if src_fields.get(b"state", b"").decode() in ("completed", "failed", "canceled"):
                break
            time.sleep(0.02)
        secs, cpu = time.time() - t0, cpu_seconds(src.proc.pid) - cpu0
        during = client.take()
        errors = list(client.errors)
        client.errors.clear()
        pause = int(src_fields.get(b"write_pause_ms", -1))
        rows.append(("atomic (CLUSTER MIGRATION)", secs, cpu, pause, p99(during), len(errors)))
        print(f"atomic: flip after {flip:.2f} s, source done (slots deleted) after {secs:.2f} s, "
              f"source CPU {cpu:.2f} s, pause {pause} ms, p99 {p99(during):.2f} ms "
              f"(idle {p99(idle):.2f}), errors {len(errors)} {errors[:3]}", flush=True)
        moved_here = names_in(d, args.slots)
        left = names_in(src.conn(), args.slots)
        count = d.execute_command("DOC.COUNT", coll, "{}")
        if count != args.docs:
            failed.append(f"DOC.COUNT on the target: {count}")
        if d.execute_command("DOC.INDEXES", coll) != indexes:
            failed.append("the index list differs on the target")
        if left != 0:
            failed.append(f"the source still holds {left} names of the slots")
        if moved_here < loaded:
            failed.append(f"the target holds {moved_here} names, {loaded} were loaded")
        rc = client.rc
        if sorted(d.execute_command("DOC.FIND", coll, '{"_id":{"$in":[5,77777,199999]}}')) != sample:
            failed.append("documents (and their TTL dates) differ on the target")
        # The client writes increasing numbers: a key holds its last acknowledged one or later.
        lost = [k for k, v in list(client.acked.items())
                if (lambda got: got is None or int(got) < v)(rc.get(k))]
        if lost:
            failed.append(f"{len(lost)} acknowledged writes missing, e.g. {lost[:3]}")

        # Legacy resharding of the same slots back.
        cpu0, t0 = cpu_seconds(dst.proc.pid), time.time()
        out = subprocess.run(
            ["redis-cli", "--cluster", "reshard", f"127.0.0.1:{dst.port}",
             "--cluster-from", dst_id, "--cluster-to", src_id,
             "--cluster-slots", str(args.slots), "--cluster-yes"],
            capture_output=True, text=True, timeout=7200)
        secs, cpu = time.time() - t0, cpu_seconds(dst.proc.pid) - cpu0
        during = client.take()
        errors = list(client.errors)
        if out.returncode != 0 or "[ERR]" in out.stdout:
            failed.append("redis-cli --cluster reshard failed: " + out.stdout[-2000:] + out.stderr[-2000:])
        rows.append(("legacy (redis-cli --cluster reshard)", secs, cpu, None, p99(during), len(errors)))
        print(f"legacy: {secs:.2f} s, source CPU {cpu:.2f} s, p99 {p99(during):.2f} ms, "
              f"errors {len(errors)} {errors[:3]}", flush=True)
        client.stop.set()
        client.join()

        print()
        print(f"{loaded} names ({args.keys} keys of 64 bytes, a collection of {args.docs} documents "
              f"with a TTL index) in {args.slots} slots; client p99 idle {p99(idle):.2f} ms")
        print()
        print("| way | seconds | source CPU s | write pause ms | client p99 ms | client errors |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, secs, cpu, pause, lat, errs in rows:
            pause = "—" if pause is None else str(pause)
            print(f"| {name} | {secs:.2f} | {cpu:.2f} | {pause} | {lat:.2f} | {errs} |")
        if len(rows) == 2 and rows[0][1] > 0:
            print(f"\nspeed-up: {rows[1][1] / rows[0][1]:.1f}x in time, "
                  f"{rows[1][2] / max(rows[0][2], 1e-9):.1f}x in source CPU")
    finally:
        for n in nodes:
            n.stop()
        shutil.rmtree(root, ignore_errors=True)
    for f in failed:
        print("FAILED:", f, file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
