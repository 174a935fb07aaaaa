#!/usr/bin/env python3
"""A client's latency while the server writes a snapshot (BGREWRITEAOF, then BGSAVE),
tidecache side by side with redis-server (which forks).

    python3 benches/compare/rewrite_latency.py                 # both servers, 1M keys
    python3 benches/compare/rewrite_latency.py --only tidecache --keys 200000
    python3 benches/compare/rewrite_latency.py --tidecache path/to/tidecache-server

For each server: start it with `appendonly yes` in a temporary directory (redis-server with
`aof-use-rdb-preamble no`, so both write a RESP base), load the keys with DEBUG POPULATE,
start one client process that sends GET and SET of random loaded keys one at a time (a
request, its reply, the next) and records when each started and how long it took, then:
a quiet stretch (idle), BGREWRITEAOF until `aof_rewrite_in_progress:0`, a quiet stretch,
BGSAVE until `rdb_bgsave_in_progress:0`. Prints worst / p99.9 / p99 / p50 for each window,
the worst stalls with their offset from the window's start, and the server's CPU time in
the window (utime+stime of the process and its reaped children, /proc/PID/stat) per client
request.

Build the release binary first (`cargo build --release`, with your CARGO_TARGET_DIR); the
default binary is target-rel/release then target/release. Python 3 standard library only.
"""

import argparse
import array
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2 :]
                return line
            self._fill()

    def reply(self):
        line = self._line()
        t = line[:1]
        if t in (b"+", b":"):
            return line[1:]
        if t == b"-":
            raise RuntimeError(line[1:].decode())
        if t == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            v, self.buf = self.buf[:n], self.buf[n + 2 :]
            return v
        if t == b"*":
            return [self.reply() for _ in range(int(line[1:]))]
        raise RuntimeError(f"unexpected reply {line!r}")

    def call(self, *args):
        self.sock.sendall(resp(*args))
        return self.reply()


def info_field(conn, section, field):
    text = conn.call("INFO", section).decode()
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def client_main(port, keys, out_path):
    """The latency client: runs until SIGTERM, then writes (start ns, latency ns) pairs."""
    import gc

    gc.disable()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    c = Conn(port)
    starts = array.array("q")
    lats = array.array("q")
    rnd = random.Random(7)
    # Pre-encoded requests, so the loop measures the server, not the encoding.
    reqs = []
    for i in range(4096):
        k = b"key:%d" % rnd.randrange(keys)
        if i % 2:
            reqs.append(resp(b"SET", k, b"value:x"))
        else:
            reqs.append(resp(b"GET", k))
    clock = time.perf_counter_ns
    sock = c.sock
    i = 0
    while not stop:
        r = reqs[i & 4095]
        i += 1
        t0 = clock()
        sock.sendall(r)
        c.reply()
        t1 = clock()
        starts.append(t0)
        lats.append(t1 - t0)
    with open(out_path, "wb") as f:
        n = len(starts)
        f.write(n.to_bytes(8, "little"))
        starts.tofile(f)
        lats.tofile(f)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime stime cutime cstime are fields 14-17 (1-based); fields[0] is field 3.
    return sum(int(x) for x in fields[11:15])


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, int(round(p / 100.0 * (len(sorted_vals) - 1))))
    return sorted_vals[i]


def wait_port(port, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            c = Conn(port)
            if c.call("PING") == b"PONG":
                return c
        except (OSError, RuntimeError):
            pass
        time.sleep(0.05)
    raise RuntimeError("server did not start")


def wait_loading(conn, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            conn.call("PING")
            return
        except RuntimeError as e:
            if "LOADING" not in str(e):
                raise
        time.sleep(0.05)


def wait_done(conn, field, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if info_field(conn, "persistence", field) == "0":
            return
        time.sleep(0.01)
    raise RuntimeError(f"{field} did not reach 0")


def measure(name, argv, args):
    tmp = tempfile.mkdtemp(prefix=f"rewrite-latency-{name}-")
    port = free_port()
    full = argv + ["--port", str(port), "--dir", tmp]
    log(f"{name}: {' '.join(full)}")
    logf = open(os.path.join(tmp, "server.log"), "w")
    proc = subprocess.Popen(full, stdout=logf, stderr=subprocess.STDOUT, cwd=tmp)
    client = None
    try:
        ctl = wait_port(port, proc)
        wait_loading(ctl)
        t = time.time()
        ctl.call("DEBUG", "POPULATE", args.keys)
        log(f"{name}: {args.keys} keys loaded in {time.time() - t:.1f} s")
        # Start from one base and an empty incremental file, as after any rewrite.
        ctl.call("BGREWRITEAOF")
        time.sleep(0.2)
        wait_done(ctl, "aof_rewrite_in_progress")
        out = os.path.join(tmp, "lat.bin")
        client = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--client", str(port), str(args.keys), out]
        )
        time.sleep(args.quiet)
        windows = {}
        t_idle = time.perf_counter_ns()
        time.sleep(args.quiet)
        windows["idle"] = (t_idle, time.perf_counter_ns(), None)
        for what, cmd, field in [
            ("bgrewriteaof", "BGREWRITEAOF", "aof_rewrite_in_progress"),
            ("bgsave", "BGSAVE", "rdb_bgsave_in_progress"),
        ]:
            c0 = cpu_ticks(proc.pid)
            t0 = time.perf_counter_ns()
            ctl.call(cmd)
            time.sleep(0.05)
            wait_done(ctl, field)
            t1 = time.perf_counter_ns()
            c1 = cpu_ticks(proc.pid)
            windows[what] = (t0, t1, c1 - c0)
            time.sleep(args.quiet)
        client.send_signal(signal.SIGTERM)
        client.wait(timeout=60)
        client = None
        with open(out, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            starts = array.array("q")
            starts.fromfile(f, n)
            lats = array.array("q")
            lats.fromfile(f, n)
        hz = os.sysconf("SC_CLK_TCK")
        rows = {}
        for what, (t0, t1, ticks) in windows.items():
            sel = [(s, l) for s, l in zip(starts, lats) if t0 <= s <= t1]
            vals = sorted(l for _, l in sel)
            worst = sorted(sel, key=lambda x: -x[1])[:5]
            cpu_ms = None if ticks is None else ticks * 1000.0 / hz
            rows[what] = {
                "secs": (t1 - t0) / 1e9,
                "n": len(vals),
                "worst": (vals[-1] if vals else 0) / 1e6,
                "p999": pct(vals, 99.9) / 1e6,
                "p99": pct(vals, 99) / 1e6,
                "p50": pct(vals, 50) / 1e6,
                "stalls": [((s - t0) / 1e6, l / 1e6) for s, l in worst],
                "cpu_ms": cpu_ms,
            }
        return rows, tmp
    finally:
        if client is not None:
            client.kill()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        logf.close()


def print_rows(name, rows):
    print(f"\n{name}")
    print(f"  {'window':<13}{'secs':>7}{'requests':>10}{'worst ms':>10}{'p99.9':>8}{'p99':>8}{'p50':>8}{'cpu ms':>9}{'cpu us/req':>11}")
    for what, r in rows.items():
        cpu = "" if r["cpu_ms"] is None else f"{r['cpu_ms']:.0f}"
        per = "" if r["cpu_ms"] is None or not r["n"] else f"{r['cpu_ms'] * 1000 / r['n']:.0f}"
        print(
            f"  {what:<13}{r['secs']:>7.2f}{r['n']:>10}{r['worst']:>10.2f}{r['p999']:>8.2f}"
            f"{r['p99']:>8.3f}{r['p50']:>8.3f}{cpu:>9}{per:>11}"
        )
        if what != "idle":
            s = ", ".join(f"{l:.1f} ms at +{t:.0f} ms" for t, l in r["stalls"])
            print(f"  {'':<13}worst: {s}")
    sys.stdout.flush()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        client_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--quiet", type=float, default=1.5, help="seconds between the windows")
    ap.add_argument("--only", choices=["tidecache", "redis"])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    ap.add_argument("--tidecache")
    args = ap.parse_args()
    bin_ = args.tidecache and os.path.abspath(args.tidecache)
    if not bin_:
        for d in ("target-rel", "target"):
            p = os.path.join(ROOT, d, "release", "tidecache-server")
            if os.path.exists(p):
                bin_ = p
                break
    servers = []
    if args.only != "redis":
        if not bin_:
            sys.exit("no release tidecache-server: build it first or pass --tidecache")
        servers.append(("tidecache", [bin_, "--appendonly", "yes", "--enable-debug-command", "yes"]))
    if args.only != "tidecache":
        servers.append(
            (
                "redis-server",
                [
                    shutil.which("redis-server") or "redis-server",
                    "--save", "",
                    "--appendonly", "yes",
                    "--aof-use-rdb-preamble", "no",
                    "--enable-debug-command", "yes",
                ],
            )
        )
    for r in range(args.rounds):
        for name, argv in servers:
            rows, tmp = measure(name, argv, args)
            print_rows(f"{name} ({args.keys} keys, round {r + 1})", rows)
            if args.keep:
                log(f"kept {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
