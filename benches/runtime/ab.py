#!/usr/bin/env python3
"""The runtime of `io-threads 1`, side by side: redis-server, tidecache on its default
runtime (one-worker multi-thread, scripts inline) and tidecache with
TIDECACHE_CURRENT_THREAD=1 (current-thread runtime, scripts on the script thread).

    python3 benches/runtime/ab.py --tidecache target-rel/release/tidecache-server [--rounds 3]
    python3 benches/runtime/ab.py --tidecache ... --callgrind   # instructions per request

Throughput: redis-benchmark -c 50, the three servers alternating per workload and round;
CPU per request = the server's utime+stime (/proc/PID/stat) over the requests. Callgrind:
the server under `valgrind --tool=callgrind`, counters zeroed after the warm-up, user-space
instructions (all threads) over the requests. Python standard library only.
"""
import argparse, hashlib, os, re, shutil, socket, subprocess, sys, tempfile, time

SCRIPT = ("local c = redis.call('INCR', KEYS[1]) "
          "if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return c")
SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
TICK = os.sysconf("SC_CLK_TCK")

WORKLOADS = [  # (name, pipeline, command)
    ("GET", 1, ["GET", "key:__rand_int__"]),
    ("GET", 16, ["GET", "key:__rand_int__"]),
    ("SET", 1, ["SET", "key:__rand_int__", "v" * 32]),
    ("SET", 16, ["SET", "key:__rand_int__", "v" * 32]),
    ("INCR", 1, ["INCR", "ctr:__rand_int__"]),
    ("INCR", 16, ["INCR", "ctr:__rand_int__"]),
    ("EVALSHA", 1, ["EVALSHA", SHA, "1", "rl:__rand_int__", "60000"]),
    ("EVALSHA", 16, ["EVALSHA", SHA, "1", "rl:__rand_int__", "60000"]),
    ("EVAL cached body", 1, ["EVAL", SCRIPT, "1", "rl:__rand_int__", "60000"]),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_ready(port, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.2)
    raise SystemExit(f"server on {port} did not start")


def cli(port, *args):
    subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, check=True, timeout=60)


def bench(port, pipeline, cmd, n):
    r = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(n), "-P",
                        str(pipeline), "-r", "100000", "-q", "--csv", *cmd],
                       capture_output=True, text=True, timeout=600)
    m = re.search(r'^"[^"]*","([0-9.]+)"', r.stdout, re.M)
    if not m:
        raise SystemExit(f"redis-benchmark: {r.stdout} {r.stderr}")
    return float(m.group(1))


def start(kind, binary, port, tmp, valgrind=None):
    env = dict(os.environ)
    if kind == "redis":
        argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                "--dir", tmp]
    else:
        # The process title would hide the valgrind command line callgrind_control looks for.
        argv = [binary, "--port", str(port), "--save", "", "--dir", tmp,
                "--set-proc-title", "no"]
        if kind == "tidecache-current-thread":
            env["TIDECACHE_CURRENT_THREAD"] = "1"
    if valgrind:
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={valgrind}"] + argv
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, 120 if valgrind else 30)
    cli(port, "SCRIPT", "LOAD", SCRIPT)
    return p


def throughput(args, kinds, tmp):
    servers = {}
    try:
        for k in kinds:
            port = free_port()
            servers[k] = (start(k, args.tidecache, port, tmp), port)
        rows = {}
        for rnd in range(args.rounds):
            for name, pl, cmd in WORKLOADS:
                n = args.n * (4 if pl > 1 else 1)
                order = kinds if rnd % 2 == 0 else list(reversed(kinds))
                for k in order:
                    proc, port = servers[k]
                    bench(port, pl, cmd, n // 10)  # warm-up
                    t0 = cpu_ticks(proc.pid)
                    rps = bench(port, pl, cmd, n)
                    cpu = (cpu_ticks(proc.pid) - t0) / TICK / n * 1e6
                    rows.setdefault((name, pl, k), []).append((rps, cpu))
                    print(f"round {rnd} {name} P{pl} {k}: {rps:,.0f}/s {cpu:.2f} us", file=sys.stderr)
        print("| row | " + " | ".join(kinds) + " | inline/redis | current/redis |")
        print("|---" * (len(kinds) + 3) + "|")
        for name, pl, _ in WORKLOADS:
            cells, med = [], {}
            for k in kinds:
                v = sorted(rows[(name, pl, k)])
                rps = v[len(v) // 2][0]
                cpu = sorted(c for _, c in v)[len(v) // 2]
                med[k] = rps
                cells.append(f"{rps:,.0f}/s {cpu:.2f} µs")
            ratios = [f"{med[k] / med['redis']:.2f}" for k in kinds[1:]]
            print(f"| {name} P{pl} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    finally:
        for proc, _ in servers.values():
            proc.kill()
            proc.wait()


def callgrind(args, kinds, tmp):
    print("| row | " + " | ".join(f"{k} instr/req" for k in kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    results = {}
    for k in kinds:
        port = free_port()
        out = os.path.join(tmp, f"cg.{k}.out")
        proc = start(k, args.tidecache, port, tmp, valgrind=out)
        try:
            for name, pl, cmd in WORKLOADS:
                n = args.cg_n
                bench(port, pl, cmd, n // 5)  # warm-up (allocations, first lookups)
                subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True)
                bench(port, pl, cmd, n)
                r = subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True)
                total = 0
                for f in os.listdir(tmp):
                    if f.startswith(f"cg.{k}.out"):
                        path = os.path.join(tmp, f)
                        with open(path, errors="replace") as fh:
                            for line in fh:
                                if line.startswith("summary:") or line.startswith("totals:"):
                                    total += int(line.split()[1])
                                    break
                        os.remove(path)
                results[(name, pl, k)] = total / n
                print(f"{name} P{pl} {k}: {total / n:,.0f}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait()
    for name, pl, _ in WORKLOADS:
        print(f"| {name} P{pl} | " + " | ".join(f"{results[(name, pl, k)]:,.0f}" for k in kinds) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidecache", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--cg-n", type=int, default=20000)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--skip-redis", action="store_true", help="callgrind: tidecache only")
    args = ap.parse_args()
    kinds = ["redis", "tidecache", "tidecache-current-thread"]
    if args.skip_redis:
        kinds = kinds[1:]
    tmp = tempfile.mkdtemp(prefix="runtime-ab-")
    try:
        (callgrind if args.callgrind else throughput)(args, kinds, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
