"""Helpers shared by the redis-py scripts of the client matrix (tests/client_matrix.rs)."""

import sys
import time

failures = []


def check(cond, what):
    """Records one check; the script's exit status is the list of failed ones."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def calls(info):
    """`{command: calls}` from an `INFO commandstats` reply parsed by redis-py."""
    return {
        k[len("cmdstat_"):]: int(v["calls"])
        for k, v in info.items()
        if k.startswith("cmdstat_")
    }


def eventually(f, secs=2.0):
    """An invalidation is pushed when the write is made and reaches the cached client's
    socket a moment later (as with Redis): a read right after the write may still hit."""
    deadline = time.time() + secs
    while time.time() < deadline:
        if f():
            return True
        time.sleep(0.02)
    return f()


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed:")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("all checks passed")
