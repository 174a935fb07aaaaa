"""redis-cli (the one installed, Redis 7's) scripted against PORT, checking its output.

    python3 redis_cli.py PORT

- `--pipe`: 100,000 SETs in the protocol, piped; redis-cli reports 0 errors and 100,000
  replies, DBSIZE is 100,000 and a sampled key holds its value;
- `-3`: HELLO 3 and HGETALL print as RESP3 maps (`1# "k" => ...`), ZSCORE as a
  `(double)`, SMEMBERS as a set (`1~`), a missing key as `(nil)`;
- `--scan --pattern`: exactly the matching keys, each once, among others;
- `--bigkeys`: the biggest key of each type with its size in the type's unit, the per-type
  counts;
- `--memkeys`: the biggest key of each type by MEMORY USAGE (a 20 kB string is the
  biggest string, at least its length);
- `--latency`: one summary line `min max avg samples` (redis-cli prints it once and exits
  when its output is not a terminal), sane numbers; `--latency-history -i 1` bounded by
  `timeout` (with `--no-raw`, as on a terminal), at least one `min: .. max: .. avg: .. (N samples) -- 1.00 seconds range` line.
Uses no client library: only redis-cli. Exits non-zero listing what failed.
"""

import re
import subprocess
import sys

from common import check, finish

PORT = sys.argv[1]
BASE = ["redis-cli", "-p", PORT]


def cli(*args, stdin=None, timeout=60):
    out = subprocess.run(
        BASE + list(args), input=stdin, capture_output=True, timeout=timeout
    )
    return out.stdout.decode(errors="replace"), out.returncode


def q(*args):
    return cli(*args)[0].strip()


q("FLUSHALL")

# --- --pipe: 100k SETs ----------------------------------------------------------------
N = 100_000
buf = bytearray()
for i in range(N):
    k, v = f"key:{i}".encode(), f"value:{i}".encode()
    buf += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v)
out, rc = cli("--pipe", stdin=bytes(buf), timeout=90)
check(rc == 0, f"--pipe exits 0 ({rc})")
check(f"errors: 0, replies: {N}" in out, f"--pipe reports 0 errors and {N} replies ({out.strip()!r})")
check(q("DBSIZE") == str(N), f"DBSIZE after --pipe ({q('DBSIZE')})")
check(q("GET", "key:77777") == "value:77777", "a piped key holds its value")

# A pipe with an error in it: counted, and the rest still applied.
bad = b"SET a 1\r\nINCR a\r\nLPUSH a x\r\nINCR a\r\n"
out, rc = cli("--pipe", stdin=bad)
check("errors: 1, replies: 4" in out, f"--pipe counts the WRONGTYPE error ({out.strip()!r})")
check(q("GET", "a") == "3", "the commands around the error ran")
q("FLUSHALL")

# --- -3: RESP3 types ------------------------------------------------------------------
out = q("-3", "--no-raw", "HELLO", "3")
check(
    re.search(r'^1# "server" => "redis"$', out, re.M) is not None
    and re.search(r'^\d+# "proto" => \(integer\) 3$', out, re.M) is not None,
    f"-3 HELLO 3 prints a map ({out!r})",
)
q("HSET", "h", "f1", "v1", "f2", "v2")
out = q("-3", "--no-raw", "HGETALL", "h")
check(
    sorted(out.splitlines()) == ['1# "f1" => "v1"', '2# "f2" => "v2"']
    or sorted(out.splitlines()) == ['1# "f2" => "v2"', '2# "f1" => "v1"'],
    f"-3 HGETALL prints a map ({out!r})",
)
out = q("--no-raw", "HGETALL", "h")
check(out.splitlines()[0].startswith("1) "), f"without -3 HGETALL is a flat array ({out!r})")
q("ZADD", "z", "2.5", "m")
out = q("-3", "--no-raw", "ZSCORE", "z", "m")
check(out == "(double) 2.5", f"-3 ZSCORE prints a double ({out!r})")
q("SADD", "s", "only")
out = q("-3", "--no-raw", "SMEMBERS", "s")
check(out == '1~ "only"', f"-3 SMEMBERS prints a set ({out!r})")
out = q("-3", "--no-raw", "GET", "missing")
check(out == "(nil)", f"-3 GET of a missing key prints (nil) ({out!r})")
q("FLUSHALL")

# --- a small data set for --scan, --bigkeys, --memkeys ---------------------------------
script = []
for i in range(300):
    script.append(f"SET user:{i} name{i}")
for i in range(200):
    script.append(f"SET session:{i} s{i}")
script.append("SET big:str " + "x" * 20000)
script.append("RPUSH big:list " + " ".join(str(i) for i in range(1000)))
script.append("RPUSH small:list a b")
script.append("HSET big:hash " + " ".join(f"f{i} {i}" for i in range(300)))
script.append("SADD big:set " + " ".join(f"m{i}" for i in range(150)))
script.append("ZADD big:zset " + " ".join(f"{i} z{i}" for i in range(120)))
script.append("XADD big:stream * a 1")
script.append("XADD big:stream * a 2")
out, rc = cli(stdin=("\n".join(script) + "\n").encode())
total = 300 + 200 + 7
check(q("DBSIZE") == str(total), f"data set loaded ({q('DBSIZE')} keys)")

out, rc = cli("--scan", "--pattern", "user:*")
keys = out.split()
check(rc == 0 and len(keys) == 300, f"--scan --pattern user:* returns 300 keys ({len(keys)})")
check(set(keys) == {f"user:{i}" for i in range(300)}, "--scan returns exactly the matching keys, each once")
out, _ = cli("--scan", "--pattern", "big:*")
check(sorted(out.split()) == sorted(
    ["big:str", "big:list", "big:hash", "big:set", "big:zset", "big:stream"]
), f"--scan --pattern big:* ({sorted(out.split())})")

out, rc = cli("--bigkeys")
check(rc == 0 and f"Sampled {total} keys in the keyspace!" in out, "--bigkeys sampled every key")
for line in [
    "Biggest string found '\"big:str\"' has 20000 bytes",
    "Biggest   list found '\"big:list\"' has 1000 items",
    "Biggest   hash found '\"big:hash\"' has 300 fields",
    "Biggest    set found '\"big:set\"' has 150 members",
    "Biggest   zset found '\"big:zset\"' has 120 members",
    "Biggest stream found '\"big:stream\"' has 2 entries",
    "2 lists with 1002 items",
    f"{300 + 200 + 1} strings with",
]:
    check(line in out, f"--bigkeys: {line}")

out, rc = cli("--memkeys")
check(rc == 0 and f"Sampled {total} keys in the keyspace!" in out, "--memkeys sampled every key")
m = re.search(r"Biggest string found '\"([^\"]+)\"' has (\d+) bytes", out)
check(m is not None and m.group(1) == "big:str" and int(m.group(2)) >= 20000,
      f"--memkeys: the biggest string by MEMORY USAGE ({m and m.groups()})")
for kind, key in [("list", "big:list"), ("hash", "big:hash"), ("set", "big:set"), ("zset", "big:zset")]:
    m = re.search(r"Biggest +%s found '\"([^\"]+)\"' has (\d+) bytes" % kind, out)
    check(m is not None and m.group(1) == key and int(m.group(2)) > 0,
          f"--memkeys: the biggest {kind} ({m and m.groups()})")
usage = int(q("MEMORY", "USAGE", "big:list"))
check(f"Biggest   list found '\"big:list\"' has {usage} bytes" in out,
      f"--memkeys reports MEMORY USAGE's number ({usage})")

# --- --latency --------------------------------------------------------------------------
out, rc = cli("--latency", timeout=20)
parts = out.split()
check(rc == 0 and len(parts) == 4, f"--latency prints one summary line ({out.strip()!r})")
if len(parts) == 4:
    lo, hi, avg, samples = float(parts[0]), float(parts[1]), float(parts[2]), int(parts[3])
    check(0 <= lo <= avg <= hi and samples >= 10, f"--latency: min <= avg <= max, {samples} samples")
proc = subprocess.run(
    # --no-raw: the terminal output format (rows end with a range note) into a pipe.
    ["timeout", "2.5"] + BASE + ["--no-raw", "--latency-history", "-i", "1"],
    capture_output=True,
)
text = proc.stdout.decode(errors="replace")
rows = re.findall(r"min: (\d+), max: (\d+), avg: ([\d.]+) \((\d+) samples\) -- 1\.\d+ seconds range", text)
check(len(rows) >= 1 and all(int(r[3]) > 0 for r in rows),
      f"--latency-history -i 1: per-second rows ({rows})")

finish()
