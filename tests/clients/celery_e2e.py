#!/usr/bin/env python3
"""End-to-end check: an unmodified Celery worker against tidecache.

Usage: python3 celery_e2e.py PORT

Celery uses tidecache as both its broker (kombu's Redis transport: LPUSH/BRPOP queues,
MULTI/EXEC pipelines, the unacked hash and sorted set, PUBLISH/PSUBSCRIBE fanout) and its
result backend (SET with expiry, GET/MGET, SUBSCRIBE on each task's channel for the result,
list counters for chords). The script starts `celery worker` as a subprocess, then checks
that:

  * a group of 20 additions comes back complete and in order;
  * a task that raises is reported as FAILURE with its exception type, message and traceback;
  * a task sent with countdown=2 runs no sooner than 2 s after it was sent;
  * a chord (a group whose results feed a callback) reaches its callback;
  * a remote-control ping (a broadcast, answered on a reply queue) reaches the worker;
  * the worker logged no error besides the failing task's.

Everything is bounded (the whole run stays well under 60 s); the worker's process group is
killed on exit, and its log is printed when a check fails. Exits 0 when all checks pass,
1 with a message naming the failed check, 2 when Celery is not installed.

The module also serves as the worker's app module (`celery -A celery_e2e`): the port comes
from the TIDECACHE_PORT environment variable there.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    from celery import Celery, chord, group
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(f"celery is not installed: {e}", file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__" and len(sys.argv) > 1:
    PORT = next((a for a in sys.argv[1:] if a.isdigit()), "6379")
else:
    PORT = os.environ.get("TIDECACHE_PORT", "6379")

app = Celery(
    "celery_e2e",
    broker=f"redis://127.0.0.1:{PORT}/0",
    backend=f"redis://127.0.0.1:{PORT}/1",
)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=300,
    broker_connection_retry_on_startup=True,
    # Fail fast instead of retrying forever when the server is unreachable.
    broker_connection_max_retries=3,
    redis_socket_connect_timeout=5,
    worker_hijack_root_logger=False,
)


def emulate_scripts():
    """Diagnostic only (--emulate-scripts): runs, client side, the Lua scripts a worker needs
    to start and run plain tasks, so the rest of Celery's traffic can be exercised against a
    server without EVALSHA. This is not Celery unmodified: a pass in this mode shows only that
    nothing else is missing. Chords stay out (their scripts are the result backend's core).
    """
    import kombu.transport.redis as kombu_redis
    import redis.commands.core as core
    from redis.client import Pipeline
    from redis.lock import Lock

    def b(v):
        return v if isinstance(v, bytes) else str(v).encode()

    def lock_release(client, keys, args):
        if client.get(keys[0]) == b(args[0]):
            client.delete(keys[0])
            return 1
        return 0

    def refresh_binding(client, keys, args):
        client.sadd(keys[0], args[0])
        deadline = int(time.time() * 1000) + int(args[2])
        client.zadd(keys[1], {args[1]: deadline}, gt=True)
        return None

    def sweep_bindings(client, keys, args):
        if isinstance(client, Pipeline):
            raise RuntimeError("sweep emulation does not run in a pipeline")
        now = int(time.time() * 1000)
        overdue = client.zrangebyscore(keys[0], "-inf", now, start=0, num=int(args[2]))
        for exchange in overdue:
            exchange = b(exchange)
            if not client.exists(b(args[1]) + exchange):
                client.delete(b(args[0]) + exchange)
            client.zrem(keys[0], exchange)
        return len(overdue)

    known = {
        Lock.LUA_RELEASE_SCRIPT: lock_release,
        kombu_redis.REFRESH_BINDING: refresh_binding,
        kombu_redis.SWEEP_BINDINGS: sweep_bindings,
    }
    original = core.Script.__call__

    def call(self, keys=None, args=None, client=None):
        fn = known.get(self.script)
        if fn is None:
            return original(self, keys, args, client)
        return fn(client if client is not None else self.registered_client, list(keys or []),
                  list(args or []))

    core.Script.__call__ = call


EMULATE_SCRIPTS = os.environ.get("TIDECACHE_EMULATE_SCRIPTS") == "1" or (
    __name__ == "__main__" and "--emulate-scripts" in sys.argv[1:]
)
if EMULATE_SCRIPTS:
    emulate_scripts()


@app.task(name="e2e.add")
def add(x, y):
    return x + y


@app.task(name="e2e.fail")
def fail(msg):
    raise ValueError(msg)


@app.task(name="e2e.stamp")
def stamp():
    return time.time()


@app.task(name="e2e.total")
def total(values):
    return sum(values)


class Failed(Exception):
    pass


#: The whole run (worker start, checks, worker stop) stays within this many seconds.
BUDGET = 45.0
_deadline = time.monotonic() + BUDGET


def within(seconds):
    """`seconds`, cut to what is left of the run's budget; fails once it is spent."""
    left = _deadline - time.monotonic()
    if left <= 0:
        raise Failed(f"over the run's {BUDGET:.0f} s budget")
    return min(seconds, left)


def check(cond, what):
    if not cond:
        raise Failed(what)


def wait_worker_ready(proc, log_path, timeout):
    """Waits for the worker's 'ready.' line; fails early if the worker exits."""
    deadline = time.monotonic() + within(timeout)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failed(f"celery worker exited with status {proc.returncode} before it was ready")
        with open(log_path, encoding="utf-8", errors="replace") as f:
            if " ready." in f.read():
                return
        time.sleep(0.1)
    raise Failed(f"celery worker not ready after {timeout} s")


def stop(proc):
    """Stops the worker (a warm shutdown: SIGTERM to the main process, which ends its pool),
    then kills whatever is left of its process group."""
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(5)


def run_checks(hostname):
    # 0. Remote control: a broadcast (fanout over PUBLISH/PSUBSCRIBE) answered on a reply queue.
    t = time.monotonic()
    replies = app.control.ping(destination=[hostname], timeout=within(5))
    check(
        any(r.get(hostname) == {"ok": "pong"} for r in replies),
        f"control ping: replies {replies!r}",
    )
    print(f"ok   control ping answered by the worker ({time.monotonic() - t:.2f} s)")

    t = time.monotonic()
    # 1. A group of 20 additions: every result, in order.
    res = group(add.s(i, i) for i in range(20)).apply_async()
    got = res.get(timeout=within(20))
    check(got == [2 * i for i in range(20)], f"group results: {got!r}")
    check(res.successful(), "group not reported successful")
    print(f"ok   group of 20 additions ({time.monotonic() - t:.2f} s)")

    # 2. A task that raises: FAILURE, with its exception, through the result backend.
    t = time.monotonic()
    r = fail.delay("boom from e2e")
    try:
        r.get(timeout=within(15))
        raise Failed("failing task: get() did not raise")
    except ValueError as e:
        check("boom from e2e" in str(e), f"failing task: exception text {e!r}")
    check(r.state == "FAILURE", f"failing task: state {r.state}")
    check(r.failed(), "failing task: failed() is false")
    check(isinstance(r.result, ValueError), f"failing task: result {r.result!r}")
    check(
        r.traceback and "ValueError: boom from e2e" in r.traceback,
        f"failing task: traceback {r.traceback!r}",
    )
    # Read back by a fresh AsyncResult (the backend's stored meta, not a cached value).
    again = app.AsyncResult(r.id)
    check(again.state == "FAILURE", f"failing task re-read: state {again.state}")
    check(isinstance(again.result, ValueError), f"failing task re-read: {again.result!r}")
    print(f"ok   failing task reported as FAILURE/ValueError ({time.monotonic() - t:.2f} s)")

    # 3. countdown=2: runs no sooner than 2 s after it was sent.
    t = time.monotonic()
    sent = time.time()
    r = stamp.apply_async(countdown=2)
    check(r.state == "PENDING", f"countdown task: state right after sending {r.state}")
    ran = r.get(timeout=within(20))
    check(ran - sent >= 2.0, f"countdown task ran {ran - sent:.3f} s after sending (< 2 s)")
    check(ran - sent < 15.0, f"countdown task ran {ran - sent:.3f} s after sending (too late)")
    print(f"ok   countdown=2 task ran after {ran - sent:.2f} s ({time.monotonic() - t:.2f} s)")

    # 4. A chord: the redis backend counts the header's results in the backend itself.
    if EMULATE_SCRIPTS:
        print("skip chord (its result-backend scripts are not emulated)")
        return
    t = time.monotonic()
    r = chord(add.s(i, 1) for i in range(10))(total.s())
    got = r.get(timeout=within(20))
    check(got == sum(i + 1 for i in range(10)), f"chord result {got!r}")
    print(f"ok   chord of 10 into a callback ({time.monotonic() - t:.2f} s)")


def main():
    # Killed by a harness's timeout: still run the cleanup (stop the worker).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = [a for a in sys.argv[1:] if a != "--emulate-scripts"]
    if len(args) != 1 or not args[0].isdigit():
        print("usage: celery_e2e.py PORT [--emulate-scripts]", file=sys.stderr)
        return 64
    port = args[0]
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(
        os.environ, TIDECACHE_PORT=port, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
        TIDECACHE_EMULATE_SCRIPTS="1" if EMULATE_SCRIPTS else "0",
        PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p),
    )
    log = tempfile.NamedTemporaryFile(prefix="celery_e2e_worker_", suffix=".log", delete=False)
    log.close()
    global _deadline
    started = time.monotonic()
    _deadline = started + BUDGET
    hostname = f"e2e-{os.getpid()}@{socket.gethostname()}"
    with open(log.name, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "celery_e2e", "worker",
                "--loglevel", "INFO", "--concurrency", "2", "--pool", "prefork",
                "--hostname", hostname,
            ],
            cwd=here,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    status = 1
    try:
        wait_worker_ready(proc, log.name, 20)
        print(f"ok   worker ready ({time.monotonic() - started:.2f} s)")
        run_checks(hostname)
        stop(proc)
        with open(log.name, encoding="utf-8", errors="replace") as f:
            unexpected = [
                line for line in f
                if ("ERROR/" in line or "CRITICAL/" in line) and "e2e.fail[" not in line
            ]
        check(not unexpected, f"errors in the worker log: {unexpected[:5]!r}")
        status = 0
    except Failed as e:
        print(f"FAIL celery end-to-end: {e}", file=sys.stderr)
    except Exception as e:  # timeouts, connection errors, unexpected replies
        print(f"FAIL celery end-to-end: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        stop(proc)
        if status != 0:
            with open(log.name, encoding="utf-8", errors="replace") as f:
                tail = f.read()[-6000:]
            print("---- celery worker log (tail) ----", file=sys.stderr)
            print(tail, file=sys.stderr)
        os.unlink(log.name)
    print(f"{'passed' if status == 0 else 'failed'} in {time.monotonic() - started:.2f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
