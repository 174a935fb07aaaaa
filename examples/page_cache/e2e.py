#!/usr/bin/env python3
"""End-to-end test of examples/page_cache against a real tidecache server.

    python3 examples/page_cache/e2e.py path/to/tidecache-server [path/to/page_cache]

Starts the server on a free port (TTL monitor every second, strict reads off so that a page
that disappears was removed by the TTL monitor and not merely hidden), starts two instances
of the example app on free ports, and checks:

  1. a first request is a MISS and slow (the render delay), the second a HIT and fast;
  2. the cached page is a document DOC.FIND sees, with its tags and both indexes in place;
  3. POST /invalidate/<tag> removes exactly the pages carrying the tag (and uses the index);
  4. 20 concurrent requests for a missing page cause exactly one render;
  5. the same across two app instances (the SET NX PX lock in tidecache);
  6. a stale page is served STALE to 20 concurrent requests and re-rendered exactly once;
  7. the TTL index removes a page nobody reads, while a page that is read stays.

Python 3 standard library only. Exits 1 naming every check that failed.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

RENDER_MS = 300
FRESH_MS = 1500
TTL_SECS = 3
MONITOR_SECS = 1

failures = []


def check(name, ok, detail=""):
    status = "ok  " if ok else "FAIL"
    print(f"{status} {name}" + (f": {detail}" if detail and not ok else ""), flush=True)
    if not ok:
        failures.append(f"{name}: {detail}" if detail else name)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Resp:
    """A minimal RESP2 client: enough to send commands and read their replies."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = self.sock.makefile("rb")

    def __call__(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _read(self):
        line = self.buf.readline()
        if not line:
            raise ConnectionError("server closed the connection")
        kind, rest = line[:1], line[1:-2].decode()
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.buf.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply line {line!r}")


def http(method, url, timeout=20):
    """Returns (status, X-Cache header, body text, seconds taken)."""
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read().decode()
            return r.status, r.headers.get("X-Cache"), body, time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("X-Cache"), e.read().decode(), time.monotonic() - t0


def concurrently(n, fn):
    """Runs fn() on n threads released at once; returns their results in thread order."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def run(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as e:  # reported by the caller as a failed request
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def wait_for(what, probe, seconds):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up in {seconds}s: {last}")


def stats(base):
    return json.loads(http("GET", base + "/stats")[2])


def renders(base, path):
    return stats(base)["renders"].get(path, 0)


def find(db, filter_):
    return [json.loads(d) for d in db("DOC.FIND", "pages", json.dumps(filter_))]


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    server_bin = os.path.abspath(sys.argv[1])
    here = os.path.dirname(os.path.abspath(__file__))
    app_bin = sys.argv[2] if len(sys.argv) > 2 else os.environ.get(
        "PAGE_CACHE_BIN", os.path.join(here, "target", "release", "page_cache"))
    for b in (server_bin, app_bin):
        if not os.access(b, os.X_OK):
            print(f"not an executable: {b}")
            return 2

    workdir = tempfile.mkdtemp(prefix="page_cache_e2e.")
    procs = []
    try:
        sport = free_port()
        server = subprocess.Popen(
            [server_bin, "--port", str(sport), "--dir", workdir,
             "--ttl-monitor-period", str(MONITOR_SECS), "--ttl-strict-reads", "no",
             "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "server.log"), "w"))
        procs.append(server)
        wait_for("tidecache", lambda: Resp(sport)("PING") == "PONG", 10)
        db = Resp(sport)

        bases = []
        for i in range(2):
            port = free_port()
            app = subprocess.Popen(
                [app_bin, "--tidecache-url", f"redis://127.0.0.1:{sport}/",
                 "--listen", f"127.0.0.1:{port}", "--fresh-ms", str(FRESH_MS),
                 "--ttl-secs", str(TTL_SECS), "--render-delay-ms", str(RENDER_MS)],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, f"app{i}.log"), "w"))
            procs.append(app)
            base = f"http://127.0.0.1:{port}"
            wait_for(f"page_cache #{i}", lambda b=base: http("GET", b + "/stats")[0] == 200, 20)
            bases.append(base)
        base, other = bases

        # 1. MISS then HIT.
        st, xc, body1, t1 = http("GET", base + "/product/1")
        check("first request is a MISS", st == 200 and xc == "MISS", f"status {st}, X-Cache {xc}")
        check("a MISS waits for the render", t1 >= RENDER_MS / 1000 * 0.9, f"took {t1:.3f}s")
        st, xc, body2, t2 = http("GET", base + "/product/1")
        check("second request is a HIT", st == 200 and xc == "HIT", f"status {st}, X-Cache {xc}")
        check("a HIT is fast", t2 < RENDER_MS / 1000 / 2, f"took {t2:.3f}s")
        check("a HIT serves the cached page", body1 == body2)

        # 2. The page is a document with its tags; the indexes are there.
        docs = find(db, {"_id": "/product/1"})
        check("DOC.FIND sees the cached page", len(docs) == 1, f"{docs}")
        if docs:
            d = docs[0]
            check("the document carries its tags", d.get("tags") == ["product:1", "category:hats"],
                  f"tags {d.get('tags')}")
            check("the document holds the HTML", d.get("html") == body1)
            check("the document has a lastRead date", "$date" in (d.get("lastRead") or {}),
                  f"lastRead {d.get('lastRead')}")
        idx = {i["name"]: i for i in map(json.loads, db("DOC.INDEXES", "pages"))}
        check("TTL index on lastRead", idx.get("lastRead_1", {}).get("expireAfterSeconds") == TTL_SECS,
              f"indexes {idx}")
        check("index on tags", idx.get("tags_1", {}).get("key") == {"tags": 1}, f"indexes {idx}")

        # 3. Invalidation by tag removes exactly the tagged pages.
        for p in ("/product/4", "/product/7", "/product/5", "/category/hats", "/category/shoes"):
            http("GET", base + p)
        st, _, body, _ = http("POST", base + "/invalidate/product:4")
        deleted = json.loads(body).get("deleted") if st == 200 else None
        check("invalidate answers the number of pages removed", deleted == 2, f"status {st}, {body}")
        left = {d["_id"] for d in find(db, {})}
        check("invalidated pages are gone", not left & {"/product/4", "/category/hats"}, f"left {left}")
        check("other pages stay", {"/product/1", "/product/7", "/product/5", "/category/shoes"} <= left,
              f"left {left}")
        plan = json.loads(db("DOC.EXPLAIN", "pages", json.dumps({"tags": "product:7"})))
        check("a tag lookup uses the tags index", plan.get("plan") == "IXSCAN" and plan.get("index") == "tags_1",
              f"{plan}")
        st, xc, _, _ = http("GET", base + "/product/4")
        check("an invalidated page is a MISS again", xc == "MISS", f"X-Cache {xc}")

        # 4. Single flight for a missing page, one instance.
        res = concurrently(20, lambda i: http("GET", base + "/product/10"))
        bad = [r for r in res if isinstance(r, Exception) or r[0] != 200]
        check("20 concurrent requests for a missing page all succeed", not bad, f"{bad[:3]}")
        n = renders(base, "/product/10")
        check("20 concurrent requests for a missing page: exactly one render", n == 1, f"{n} renders")
        check("... and they all got the same page", len({r[2] for r in res if not isinstance(r, Exception)}) == 1)

        # 5. Single flight across two instances (the lock key in tidecache).
        res = concurrently(20, lambda i: http("GET", (base, other)[i % 2] + "/product/13"))
        bad = [r for r in res if isinstance(r, Exception) or r[0] != 200]
        check("20 requests over two instances all succeed", not bad, f"{bad[:3]}")
        n = renders(base, "/product/13") + renders(other, "/product/13")
        check("20 requests over two instances: exactly one render", n == 1, f"{n} renders")

        # 6. Stale while revalidate, once.
        http("GET", base + "/product/11")
        time.sleep(FRESH_MS / 1000 + 0.3)
        res = concurrently(20, lambda i: http("GET", base + "/product/11"))
        ok = [r for r in res if not isinstance(r, Exception) and r[0] == 200]
        kinds = [r[1] for r in ok]
        check("20 requests for a stale page all succeed", len(ok) == 20, f"{len(ok)} succeeded")
        check("a stale page is served STALE at once", kinds.count("STALE") >= 1
              and set(kinds) <= {"STALE", "HIT"}, f"X-Cache {kinds}")
        slow = [r[3] for r in ok if r[1] == "STALE" and r[3] >= RENDER_MS / 1000]
        check("STALE responses do not wait for the render", not slow, f"{len(slow)} waited: {slow[:3]}")
        deadline = time.monotonic() + 5
        while renders(base, "/product/11") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(RENDER_MS / 1000 * 2)  # room for a wrong second revalidation to show
        n = renders(base, "/product/11")
        check("a stale page is re-rendered exactly once", n == 2, f"{n} renders (1 expected before + 1)")
        st, xc, body, _ = http("GET", base + "/product/11")
        check("after revalidation the new page is a HIT", xc == "HIT" and "render #2" in body,
              f"X-Cache {xc}, {body[-80:]!r}")
        s = stats(base)
        check("/stats counts hits, misses and stale", s["hits"] >= 2 and s["misses"] >= 3 and s["stale"] >= 1,
              f"{s}")

        # 7. The TTL index removes what nobody reads; reading keeps a page alive.
        db("DOC.DELETE", "pages", "{}")
        before = json.loads(db("DOC.STATS", "pages"))["ttl"]["deletedDocuments"]
        http("GET", base + "/product/20")  # never read again
        http("GET", base + "/product/21")  # read every 0.5 s
        limit = TTL_SECS + MONITOR_SECS + 6
        gone_at, xc = None, None
        t0 = time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            # Once the unread page is gone, keep reading the other one past two more passes.
            if elapsed > limit or (gone_at is not None and elapsed > gone_at + 2 * MONITOR_SECS + 1):
                break
            _, xc, _, _ = http("GET", base + "/product/21")
            if xc == "MISS":
                break
            if gone_at is None and db("DOC.COUNT", "pages", json.dumps({"_id": "/product/20"})) == 0:
                gone_at = elapsed
            time.sleep(0.5)
        check("a page nobody reads is removed by the TTL index", gone_at is not None,
              f"still there after {limit}s")
        if gone_at is not None:
            check("... not before its TTL", gone_at >= TTL_SECS - 0.5, f"gone after {gone_at:.1f}s")
        after = json.loads(db("DOC.STATS", "pages"))["ttl"]["deletedDocuments"]
        check("... by the TTL monitor (DOC.STATS ttl.deletedDocuments)", after - before == 1,
              f"deletedDocuments {before} -> {after}")
        check("a page that is read stays (FINDONE ... TOUCH refreshes lastRead)", xc != "MISS"
              and db("DOC.COUNT", "pages", json.dumps({"_id": "/product/21"})) == 1, f"X-Cache {xc}")
        st, xc, _, _ = http("GET", base + "/product/20")
        check("an expired page is a MISS", xc == "MISS", f"X-Cache {xc}")
    except Exception as e:
        check("the test ran to its end", False, repr(e))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        if failures:
            for name in ("server.log", "app0.log", "app1.log"):
                path = os.path.join(workdir, name)
                if os.path.exists(path):
                    tail = open(path).read()[-2000:]
                    if tail.strip():
                        print(f"--- {name} (tail)\n{tail}")
        shutil.rmtree(workdir, ignore_errors=True)

    if failures:
        print(f"\npage_cache e2e: {len(failures)} failed:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print("\npage_cache e2e: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
