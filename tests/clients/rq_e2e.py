#!/usr/bin/env python3
"""End-to-end check: an unmodified rq (Redis Queue) worker against tidecache.

Usage: python3 rq_e2e.py PORT [--scheduled]

Enqueues jobs from this process, runs `rq worker --burst` as a subprocess (it works through
the queue and exits), then reads the outcome back from the server:

  * successful jobs: status finished, return values read back;
  * a job that raises: status failed, listed in the queue's FailedJobRegistry, with the
    exception in its stored exc_info;
  * a job that depends on another runs after it, with the value it computed.

With --scheduled it also checks a job enqueued with `enqueue_in(2 s)` that the worker's
scheduler (`--with-scheduler`) moves to the queue no sooner than its due time (rq keeps
scheduled times in whole seconds, so "due" is the second that now + 2 s falls in).

Everything is bounded (well under 60 s); the worker's process group is killed on exit, and
its log is printed when a check fails. Exits 0 when all checks pass, 1 with a message naming
the failed check, 2 when rq is not installed.

The job functions live in this module, imported by the worker as `rq_e2e`.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

try:
    from redis import Redis
    from rq import Queue
    from rq.job import Job, JobStatus
    from rq.registry import FailedJobRegistry, FinishedJobRegistry
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(f"rq is not installed: {e}", file=sys.stderr)
    sys.exit(2)


def add(x, y):
    return x + y


def fail(msg):
    raise ValueError(msg)


def stamp():
    return time.time()


def double_dependency(job_id):
    """Doubles the result of the job it depends on (read back through rq itself)."""
    from rq import get_current_job

    job = get_current_job()
    dep = Job.fetch(job_id, connection=job.connection)
    return dep.return_value() * 2


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


def stop(proc):
    """Stops the worker and its work horses (its whole process group)."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(5)
            return
        except subprocess.TimeoutExpired:
            continue


def run_worker(url, queue, log_path, here, extra, timeout):
    """Runs `rq worker --burst` until it exits (it must, within `timeout`)."""
    env = dict(
        os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p),
    )
    with open(log_path, "a") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "rq.cli", "worker", "--burst", "--url", url,
                "--name", f"e2e-{os.getpid()}-{time.monotonic_ns()}", *extra, queue,
            ],
            cwd=here,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        proc.wait(within(timeout))
    except subprocess.TimeoutExpired:
        stop(proc)
        raise Failed(f"rq worker --burst did not finish within {timeout} s")
    finally:
        stop(proc)
    check(proc.returncode == 0, f"rq worker --burst exited with status {proc.returncode}")


def run_checks(port, scheduled, log_path, here):
    url = f"redis://127.0.0.1:{port}/0"
    conn = Redis.from_url(url, socket_timeout=10)
    qname = f"e2e-{os.getpid()}"
    q = Queue(qname, connection=conn)

    t = time.monotonic()
    ok_jobs = [q.enqueue("rq_e2e.add", i, i) for i in range(10)]
    bad = q.enqueue("rq_e2e.fail", "boom from rq e2e")
    first = q.enqueue("rq_e2e.add", 20, 1)
    dependent = q.enqueue("rq_e2e.double_dependency", first.id, depends_on=first)
    check(q.count == 12, f"queue length after enqueueing: {q.count} (expected 12)")
    check(
        dependent.get_status() == JobStatus.DEFERRED,
        f"dependent job status before the worker: {dependent.get_status()}",
    )
    print(f"ok   13 jobs enqueued ({time.monotonic() - t:.2f} s)")

    t = time.monotonic()
    extra = ["--with-scheduler"] if scheduled else []
    later = None
    if scheduled:
        sent = time.time()
        later = q.enqueue_in(timedelta(seconds=2), "rq_e2e.stamp")
    run_worker(url, qname, log_path, here, extra, 30)
    print(f"ok   rq worker --burst finished ({time.monotonic() - t:.2f} s)")

    for i, job in enumerate(ok_jobs):
        job.refresh()
        check(job.get_status() == JobStatus.FINISHED, f"job {i}: status {job.get_status()}")
        check(job.return_value() == 2 * i, f"job {i}: result {job.return_value()!r}")
    finished = FinishedJobRegistry(queue=q)
    check(
        all(j.id in finished.get_job_ids() for j in ok_jobs),
        "finished jobs missing from the FinishedJobRegistry",
    )
    print("ok   10 results read back, jobs in the finished registry")

    bad.refresh()
    check(bad.get_status() == JobStatus.FAILED, f"failing job: status {bad.get_status()}")
    failed = FailedJobRegistry(queue=q)
    check(bad.id in failed.get_job_ids(), f"failing job not in the failed registry: {failed.get_job_ids()}")
    info = bad.exc_info or ""
    check("ValueError: boom from rq e2e" in info, f"failing job: exc_info {info!r}")
    print("ok   failing job is FAILED, in the FailedJobRegistry with its ValueError")

    dependent.refresh()
    check(
        dependent.get_status() == JobStatus.FINISHED,
        f"dependent job: status {dependent.get_status()}",
    )
    check(dependent.return_value() == 42, f"dependent job: result {dependent.return_value()!r}")
    print("ok   dependent job ran after its dependency (42)")

    if scheduled:
        later.refresh()
        # A burst worker with a scheduler may finish before the job is due: run it again.
        deadline = time.monotonic() + within(15)
        while later.get_status() != JobStatus.FINISHED and time.monotonic() < deadline:
            time.sleep(0.5)
            run_worker(url, qname, log_path, here, extra, 30)
            later.refresh()
        check(later.get_status() == JobStatus.FINISHED, f"scheduled job: status {later.get_status()}")
        ran = later.return_value()
        # rq schedules in whole seconds: the job is due at the second sent + 2 falls in.
        due = int(sent + 2)
        check(ran >= due, f"scheduled job ran {ran - sent:.3f} s after enqueue_in, before its due second")
        print(
            f"ok   enqueue_in(2 s) job ran {ran - sent:.2f} s after sending, "
            f"in or after its due second (rq schedules in whole seconds)"
        )


def main():
    # Killed by a harness's timeout: still run the cleanup (stop the worker).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    scheduled = "--scheduled" in sys.argv[1:]
    if len(args) != 1 or not args[0].isdigit():
        print("usage: rq_e2e.py PORT [--scheduled]", file=sys.stderr)
        return 64
    here = os.path.dirname(os.path.abspath(__file__))
    log = tempfile.NamedTemporaryFile(prefix="rq_e2e_worker_", suffix=".log", delete=False)
    log.close()
    global _deadline
    started = time.monotonic()
    _deadline = started + BUDGET
    status = 1
    try:
        run_checks(args[0], scheduled, log.name, here)
        status = 0
    except Failed as e:
        print(f"FAIL rq end-to-end: {e}", file=sys.stderr)
    except Exception as e:  # timeouts, connection errors, unexpected replies
        print(f"FAIL rq end-to-end: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        if status != 0:
            with open(log.name, encoding="utf-8", errors="replace") as f:
                tail = f.read()[-6000:]
            print("---- rq worker log (tail) ----", file=sys.stderr)
            print(tail, file=sys.stderr)
        os.unlink(log.name)
    print(f"{'passed' if status == 0 else 'failed'} in {time.monotonic() - started:.2f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
