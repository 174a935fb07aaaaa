#!/usr/bin/env python3
"""Fault tests of tidecache's cluster mode with real processes and real clients (issue 45).

    sudo python3 scripts/fault-tests.py [--tidecache target/release/tidecache-server]

Needs root (network namespaces), `ip` (iproute2), `redis-cli` and `redis-server` 7, and
Python 3 with redis-py. Standard library + redis-py only. Runs in about 3 minutes.

Every node runs in a network namespace of its own (10.77.0.11-16, port 6379), the clients in
another (10.77.0.100), all joined by veth pairs to a bridge in a hub namespace. Nothing in the
root namespace is touched; every namespace (and with it every veth and the bridge) and every
process the script starts is removed on exit, Ctrl-C included.

1. Partition, against tidecache and then redis-server 7 (the same harness, as a control): a
   3 primaries + 3 replicas cluster; writers send SET of distinct keys,
   each followed by `WAIT 1 500` on the same connection; a write is acknowledged only if WAIT
   answered >= 1. One primary is cut off from the other nodes (blackhole routes both ways)
   while the clients still reach it, for longer than cluster-node-timeout (2000 ms) and until
   its replica has taken over; then the routes go. Checked: the replica was promoted, the old
   primary rejoined as a replica of it, every acknowledged write is readable through the
   cluster, and no write sent to the isolated primary while it was cut off was acknowledged.
2. kill -9 under load, 5 rounds (a different primary each round), against tidecache and then
   against redis-server 7 with the same harness: kill -9 of a primary, time until a write to a
   key of its slots succeeds again (the failover time), restart of the killed process (it must
   rejoin as a replica), and at the end every acknowledged write must be readable.

Exit status 1 if an acknowledged write is lost, if the isolated primary acknowledged a write,
if a failover takes longer than 30 s or a node does not rejoin; 0 otherwise. The failover
times of both servers are printed side by side (the target: tidecache's no longer than
redis-server's; reported, not enforced).
"""

import argparse
import ctypes
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.crc import key_slot
    from redis.exceptions import (
        ConnectionError as RConnectionError,
        MovedError,
        RedisError,
        ResponseError,
        TimeoutError as RTimeoutError,
    )
    from redis.retry import Retry
except ImportError:  # pragma: no cover
    sys.exit("fault-tests.py needs redis-py: pip install redis")

PORT = 6379
SUBNET = "10.77.0"
NODE_TIMEOUT_MS = 2000
WAIT_TIMEOUT_MS = 500
FAILOVER_LIMIT_S = 30.0
REJOIN_LIMIT_S = 60.0
N_NODES = 6
N_WRITERS = 3
WRITE_PAUSE_S = 0.002  # between two writes of one writer: keeps the load modest on 2 cores

T0 = time.monotonic()


def log(msg):
    now = time.time()
    wall = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
    print(f"[{time.monotonic() - T0:7.2f}s {wall}] {msg}", flush=True)


class Failure(Exception):
    """A check failed in a way that stops the current test."""


def sh(*argv, check=True):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


# ---------------------------------------------------------------------------- namespaces

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def enter_netns_fd(fd):
    """Moves the calling thread (and threads and children it starts later) into a netns."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def netns_path(name):
    for base in ("/run/netns", "/var/run/netns"):
        p = os.path.join(base, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"network namespace {name} not found")


class Net:
    """A hub namespace holding a bridge, one namespace per node and one for the clients."""

    def __init__(self, n_nodes):
        p = f"tcft{os.getpid()}"
        self.hub = f"{p}-hub"
        self.client = f"{p}-cl"
        self.node_ns = [f"{p}-n{i + 1}" for i in range(n_nodes)]
        self.node_ip = [f"{SUBNET}.{11 + i}" for i in range(n_nodes)]
        self.client_ip = f"{SUBNET}.100"
        self.created = []
        self.blackholes = []  # (namespace, destination) routes in force
        self.root_fd = None
        self.in_client = False

    @staticmethod
    def remove_stale():
        """Namespaces left by an earlier run of this script that was killed outright."""
        r = sh("ip", "netns", "list", check=False)
        for line in r.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            m = re.match(r"tcft(\d+)-", name)
            if m and not os.path.exists(f"/proc/{m.group(1)}"):
                pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                sh("ip", "netns", "del", name, check=False)
                log(f"removed stale namespace {name}")

    def _add_ns(self, name):
        sh("ip", "netns", "add", name)
        self.created.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")

    def up(self):
        self._add_ns(self.hub)
        sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.hub, "link", "set", "br0", "up")
        pairs = list(zip(self.node_ns, self.node_ip)) + [(self.client, self.client_ip)]
        for i, (ns, ip) in enumerate(pairs):
            self._add_ns(ns)
            port = f"v{i}"
            sh("ip", "-n", self.hub, "link", "add", port, "type", "veth",
               "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", self.hub, "link", "set", port, "master", "br0")
            sh("ip", "-n", self.hub, "link", "set", port, "up")
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def enter_client(self):
        self.root_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(netns_path(self.client), os.O_RDONLY)
        try:
            enter_netns_fd(fd)
        finally:
            os.close(fd)
        self.in_client = True

    def leave_client(self):
        if self.in_client:
            enter_netns_fd(self.root_fd)
            self.in_client = False
        if self.root_fd is not None:
            os.close(self.root_fd)
            self.root_fd = None

    def _blackhole(self, ns, dest):
        sh("ip", "-n", ns, "route", "add", "blackhole", f"{dest}/32")
        self.blackholes.append((ns, dest))

    def isolate(self, idx):
        """Cuts node idx off from every other node (not from the clients). Returns the time at
        which the node itself could no longer send to any other node."""
        others = [j for j in range(len(self.node_ns)) if j != idx]
        for j in others:
            self._blackhole(self.node_ns[idx], self.node_ip[j])
        t = time.monotonic()
        for j in others:
            self._blackhole(self.node_ns[j], self.node_ip[idx])
        return t

    def heal(self):
        while self.blackholes:
            ns, dest = self.blackholes.pop()
            sh("ip", "-n", ns, "route", "del", "blackhole", f"{dest}/32", check=False)

    def can_connect(self, from_ns, ip):
        """Whether a TCP connection from namespace from_ns to ip:PORT answers PING."""
        r = subprocess.run(["ip", "netns", "exec", from_ns, "timeout", "3", "redis-cli", "-h", ip,
                            "-p", str(PORT), "PING"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        return r.returncode == 0 and "PONG" in r.stdout

    def down(self):
        self.heal()
        self.leave_client()
        for ns in reversed(self.created):
            sh("ip", "netns", "del", ns, check=False)
        self.created.clear()


# ---------------------------------------------------------------------------- servers

class Node:
    def __init__(self, kind, binary, idx, net, workdir, test):
        self.kind = kind
        self.binary = binary
        self.idx = idx
        self.name = f"{kind}-n{idx + 1}"
        self.ns = net.node_ns[idx]
        self.ip = net.node_ip[idx]
        self.addr = (self.ip, PORT)
        self.dir = Path(workdir) / f"{test}-{kind}" / f"n{idx + 1}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "server.log"
        self.proc = None
        self.killed_at = None  # round of the last kill -9

    def argv(self):
        a = [self.binary, "--port", str(PORT), "--bind", self.ip, "--protected-mode", "no",
             "--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
             "--cluster-config-file", "nodes.conf", "--dir", str(self.dir), "--save", "",
             "--appendonly", "no"]
        if self.kind == "redis":
            a += ["--daemonize", "no", "--repl-diskless-sync-delay", "0"]
        return ["ip", "netns", "exec", self.ns] + a

    def start(self):
        with open(self.log_path, "ab") as logf:
            logf.write(f"\n===== fault-tests: start at {time.monotonic() - T0:.2f}s =====\n"
                       .encode())
            logf.flush()
            # A session of its own: Ctrl-C reaches the script, which stops the servers itself.
            self.proc = subprocess.Popen(self.argv(), stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure(f"{self.name} exited with {self.proc.returncode} at start; "
                              f"log: {self.log_path}\n{tail(self.log_path)}")
            try:
                if Link(self.addr, 1.0).call_once("PING") == "PONG":
                    return
            except (RedisError, OSError):
                pass
            time.sleep(0.05)
        raise Failure(f"{self.name} did not answer PING within 20 s; log: {self.log_path}")

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


def tail(path, lines=30):
    try:
        with open(path, "rb") as f:
            data = f.read().decode(errors="replace").splitlines()
        return "\n".join("    | " + l for l in data[-lines:])
    except OSError:
        return "    | (no log)"


# ---------------------------------------------------------------------------- clients

class Link:
    """One connection, no retries, no hidden reconnects: a WAIT goes on the connection of the
    SET before it."""

    def __init__(self, addr, timeout):
        self.addr = addr
        self.conn = redis.Connection(host=addr[0], port=addr[1], socket_timeout=timeout,
                                     socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0),
                                     decode_responses=True)

    def call(self, *args):
        self.conn.send_command(*args)
        return self.conn.read_response()

    def call_once(self, *args):
        try:
            return self.call(*args)
        finally:
            self.close()

    def close(self):
        try:
            self.conn.disconnect()
        except Exception:
            pass


CONN_ERRORS = (RConnectionError, RTimeoutError, OSError)


class ClusterClient:
    """A minimal cluster client: a slot map from CLUSTER SLOTS, MOVED followed, one
    connection per node."""

    def __init__(self, seeds, timeout=3.0):
        self.seeds = list(seeds)
        self.timeout = timeout
        self.slots = [None] * 16384
        self.links = {}
        self.last_refresh = 0.0

    def link(self, addr):
        l = self.links.get(addr)
        if l is None:
            l = self.links[addr] = Link(addr, self.timeout)
        return l

    def drop(self, addr):
        l = self.links.pop(addr, None)
        if l is not None:
            l.close()

    def close(self):
        for addr in list(self.links):
            self.drop(addr)

    def refresh(self, exclude=()):
        self.last_refresh = time.monotonic()
        seeds = [a for a in self.seeds if a not in exclude]
        random.shuffle(seeds)
        for addr in seeds:
            try:
                reply = self.link(addr).call("CLUSTER", "SLOTS")
            except RedisError:
                self.drop(addr)
                continue
            except OSError:
                self.drop(addr)
                continue
            for entry in reply:
                start, end, master = int(entry[0]), int(entry[1]), entry[2]
                owner = (master[0], int(master[1]))
                for s in range(start, end + 1):
                    self.slots[s] = owner
            return True
        return False

    def owner(self, key):
        return self.slots[key_slot(key.encode())]

    def get(self, key, redirects=5):
        for _ in range(redirects):
            addr = self.owner(key)
            if addr is None:
                self.refresh()
                continue
            try:
                return self.link(addr).call("GET", key)
            except MovedError as e:
                self.slots[e.slot_id] = (e.host, int(e.port))
            except CONN_ERRORS:
                self.drop(addr)
                self.refresh()
                time.sleep(0.1)
            except ResponseError:
                self.refresh()
                time.sleep(0.1)
        raise RedisError(f"GET {key}: no answer after {redirects} tries")


class Recorder:
    """What the writers sent: every attempt (send time, node, outcome) and the acknowledged
    keys with their values."""

    def __init__(self):
        self.attempts = []  # (t_send, addr, outcome) ; outcome 'acked', 'unacked' or 'err:<kind>'
        self.acked = {}
        self.lock = threading.Lock()


def error_kind(e):
    if isinstance(e, MovedError):
        return "MOVED"
    if isinstance(e, CONN_ERRORS):
        return "connection"
    text = str(e).split(" ")[0]
    if isinstance(e, ResponseError):
        name = type(e).__name__
        return name if name != "ResponseError" else (text or "ERR")
    return type(e).__name__


def writer(tid, prefix, seeds, stop, rec):
    cl = ClusterClient(seeds, timeout=WAIT_TIMEOUT_MS / 1000 + 2.5)
    cl.refresh()
    seq = 0
    attempts, acked = [], {}
    while not stop.is_set():
        if time.monotonic() - cl.last_refresh > 1.0:
            cl.refresh()
        seq += 1
        key = f"{prefix}:{tid}:{seq}"
        val = f"{seq}:{random.getrandbits(32)}"
        addr = cl.owner(key)
        if addr is None:
            cl.refresh()
            time.sleep(0.05)
            continue
        t_send = time.monotonic()
        outcome = None
        try:
            link = cl.link(addr)
            if link.call("SET", key, val) != "OK":
                outcome = "err:SET-reply"
            else:
                n = link.call("WAIT", 1, WAIT_TIMEOUT_MS)
                outcome = "acked" if int(n) >= 1 else "unacked"
        except MovedError as e:
            cl.slots[e.slot_id] = (e.host, int(e.port))
            outcome = "err:MOVED"
        except (RedisError, OSError) as e:
            outcome = "err:" + error_kind(e)
            if isinstance(e, CONN_ERRORS):
                cl.drop(addr)
            if time.monotonic() - cl.last_refresh > 0.2:
                cl.refresh()
            time.sleep(0.02)
        attempts.append((t_send, addr, outcome))
        if outcome == "acked":
            acked[key] = val
        time.sleep(WRITE_PAUSE_S)
    cl.close()
    with rec.lock:
        rec.attempts.extend(attempts)
        rec.acked.update(acked)


class Writers:
    def __init__(self, prefix, seeds, n=None):
        n = n or N_WRITERS
        self.stop_ev = threading.Event()
        self.rec = Recorder()
        self.threads = [threading.Thread(target=writer, args=(i, prefix, seeds, self.stop_ev,
                                                              self.rec), daemon=True)
                        for i in range(n)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(30)
        return self.rec


def verify_acked(seeds, acked):
    """Reads every acknowledged key through the cluster; returns the keys lost or changed."""
    cl = ClusterClient(seeds, timeout=5.0)
    if not cl.refresh():
        raise Failure("no node answers CLUSTER SLOTS for the final check")
    by_owner = {}
    for k in acked:
        by_owner.setdefault(cl.owner(k), []).append(k)
    lost, retry = [], []
    deadline = time.monotonic() + 120
    for addr, keys in by_owner.items():
        for i in range(0, len(keys), 500):
            batch = keys[i:i + 500]
            link = cl.link(addr)
            link.conn.send_packed_command(link.conn.pack_commands([("GET", k) for k in batch]))
            for k in batch:
                try:
                    v = link.conn.read_response()
                except ResponseError:
                    retry.append(k)
                    continue
                if v != acked[k]:
                    lost.append((k, acked[k], v))
    for k in retry:
        if time.monotonic() > deadline:
            raise Failure(f"reading the acknowledged keys back took over 120 s "
                          f"({len(retry)} needed a redirection)")
        v = cl.get(k)
        if v != acked[k]:
            lost.append((k, acked[k], v))
    cl.close()
    return lost


# ---------------------------------------------------------------------------- cluster state

def parse_info(text):
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def parse_nodes(text):
    nodes = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        host = f[1].split("@")[0].split(",")[0]
        ip, _, port = host.rpartition(":")
        slots = []
        for s in f[8:]:
            if s.startswith("["):
                continue
            a, _, b = s.partition("-")
            slots.append((int(a), int(b or a)))
        nodes.append({"id": f[0], "addr": (ip, int(port)) if port else None,
                      "flags": set(f[2].split(",")), "master": f[3], "link": f[7],
                      "slots": slots})
    return nodes


def query(addr, *args, timeout=1.5):
    return Link(addr, timeout).call_once(*args)


def cluster_health(nodes):
    """(True, '') when every node says cluster_state:ok, knows all the nodes healthy, three
    masters own all slots with one replica each, and each replica's link is up and synced."""
    layout = None
    for n in nodes:
        try:
            ci = parse_info(query(n.addr, "CLUSTER", "INFO"))
            view = parse_nodes(query(n.addr, "CLUSTER", "NODES"))
            repl = parse_info(query(n.addr, "INFO", "replication"))
        except (RedisError, OSError) as e:
            return False, f"{n.name}: {e}"
        if ci.get("cluster_state") != "ok":
            return False, f"{n.name}: cluster_state {ci.get('cluster_state')}"
        if len(view) != len(nodes):
            return False, f"{n.name}: knows {len(view)} nodes"
        for e in view:
            bad = e["flags"] & {"fail", "fail?", "handshake", "noaddr"}
            if bad:
                return False, f"{n.name}: sees {e['addr']} {','.join(sorted(bad))}"
        masters = {e["id"]: e for e in view if "master" in e["flags"] and e["slots"]}
        if len(masters) != 3 or sum(b - a + 1 for m in masters.values()
                                    for a, b in m["slots"]) != 16384:
            return False, f"{n.name}: {len(masters)} masters with slots"
        for mid in masters:
            reps = [e for e in view if "slave" in e["flags"] and e["master"] == mid]
            if len(reps) != 1:
                return False, f"{n.name}: master {masters[mid]['addr']} has {len(reps)} replicas"
        this = tuple(sorted((m["addr"], tuple(m["slots"])) for m in masters.values()))
        if layout is None:
            layout = this
        elif layout != this:
            return False, f"{n.name}: another slot layout"
        if repl.get("role") == "master":
            if not any("state=online" in v for k, v in repl.items() if re.match(r"slave\d+$", k)):
                return False, f"{n.name}: master without an online replica"
        else:
            if (repl.get("master_link_status") != "up"
                    or repl.get("master_sync_in_progress") != "0"):
                return False, f"{n.name}: replica link {repl.get('master_link_status')}"
    return True, ""


VERBOSE = False


def wait_until(pred, timeout, what, interval=0.1):
    """Polls pred() -> (ok, why) until ok; a Failure after timeout. With --verbose, logs each
    change of the reason it was still waiting for."""
    start = time.monotonic()
    deadline = start + timeout
    last, seen = "", []
    while time.monotonic() < deadline:
        ok, why = pred()
        if ok:
            if VERBOSE and seen:
                log(f"  waited {time.monotonic() - start:.2f} s for {what}: " +
                    "; ".join(f"+{t:.2f}s {w}" for t, w in seen))
            return
        if why != last:
            seen.append((time.monotonic() - start, why))
            last = why
        time.sleep(interval)
    raise Failure(f"{what}: not within {timeout:.0f} s (last: {last}; before: "
                  + "; ".join(f"+{t:.2f}s {w}" for t, w in seen[-6:-1]) + ")")


def topology(node):
    """{master addr: replica addr} and {master addr: slots} as node sees them."""
    view = parse_nodes(query(node.addr, "CLUSTER", "NODES"))
    ids = {e["id"]: e for e in view}
    masters = {e["addr"]: e["slots"] for e in view if "master" in e["flags"] and e["slots"]}
    replica_of = {}
    for e in view:
        if "slave" in e["flags"] and e["master"] in ids:
            replica_of[ids[e["master"]]["addr"]] = e["addr"]
    return masters, replica_of


def slot_set(ranges):
    s = set()
    for a, b in ranges:
        s.update(range(a, b + 1))
    return s


def start_cluster(test, kind, binary, net, workdir):
    nodes = [Node(kind, binary, i, net, workdir, test) for i in range(N_NODES)]
    for n in nodes:
        n.start()
    r = subprocess.run(["redis-cli", "--cluster", "create"] + [f"{n.ip}:{PORT}" for n in nodes]
                       + ["--cluster-replicas", "1", "--cluster-yes"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if r.returncode != 0 or "[OK] All 16384 slots covered" not in r.stdout:
        raise Failure(f"redis-cli --cluster create failed for {kind}:\n{r.stdout}")
    wait_until(lambda: cluster_health(nodes), 60, f"{kind} cluster healthy after create")
    log(f"{kind}: 3+3 cluster up")
    return nodes


def stop_nodes(nodes):
    for n in nodes:
        n.stop()


def addr_s(addr):
    return f"{addr[0]}:{addr[1]}" if addr else "?"


# ---------------------------------------------------------------------------- test 1: partition

def partition_test(kind, binary, net, workdir, failures):
    res = {"kind": kind}
    nodes = start_cluster("partition", kind, binary, net, workdir)
    by_addr = {n.addr: n for n in nodes}
    seeds = [n.addr for n in nodes]
    writers = None
    try:
        masters, replica_of = topology(nodes[0])
        victim_addr = sorted(masters)[0]
        victim, replica = by_addr[victim_addr], by_addr[replica_of[victim_addr]]
        res["pair"] = f"{victim.name.split('-')[-1]} / {replica.name.split('-')[-1]}"
        writers = Writers(f"part-{kind}", seeds)
        writers.start()
        time.sleep(3)
        log(f"{kind} partition: isolating {victim.name} ({victim.ip}, primary) from the other "
            f"nodes; "
            f"its replica is {replica.name} ({replica.ip})")
        t_iso = net.isolate(victim.idx)
        log(f"{kind} partition: routes in place")
        # The cut must be real: the isolated node reaches no other node, no node reaches it,
        # the clients still reach it.
        for n in nodes:
            if n is victim:
                continue
            if net.can_connect(victim.ns, n.ip) or net.can_connect(n.ns, victim.ip):
                raise Failure(f"isolation leaks: {victim.name} <-> {n.name} still connect")
        try:
            if query(victim.addr, "PING") != "PONG":
                raise Failure("the client namespace cannot reach the isolated primary")
        except (RedisError, OSError) as e:
            raise Failure(f"the client namespace cannot reach the isolated primary: {e}")
        log(f"{kind} partition: verified: cut off from the 5 other nodes, reachable from the "
            "clients")

        def promoted():
            try:
                role = parse_info(query(replica.addr, "INFO", "replication")).get("role")
                seen = 0
                vslots = masters[victim_addr]
                for n in nodes:
                    if n is victim:
                        continue
                    m, _ = topology(n)
                    if m.get(replica.addr) == vslots:
                        seen += 1
                return role == "master" and seen >= 3, f"role {role}, {seen} nodes agree"
            except (RedisError, OSError) as e:
                return False, str(e)

        try:
            wait_until(promoted, FAILOVER_LIMIT_S, f"failover of isolated {victim.name}")
        except Failure as e:
            failures.append(f"{kind} partition: {e}")
            res["failover_s"] = None
            raise
        t_prom = time.monotonic()
        res["failover_s"] = t_prom - t_iso
        log(f"{kind} partition: {replica.name} took over after {res['failover_s']:.2f} s")
        # Stay isolated at least 6 s (3 x the node timeout) and 2 s past the takeover.
        time.sleep(max(0.0, max(t_iso + 6.0, t_prom + 2.0) - time.monotonic()))
        try:
            vinfo = parse_info(query(victim.addr, "CLUSTER", "INFO"))
            res["isolated_state"] = vinfo.get("cluster_state")
        except (RedisError, OSError) as e:
            res["isolated_state"] = f"? ({e})"
        t_heal = time.monotonic()
        net.heal()
        res["isolation_s"] = t_heal - t_iso
        log(f"{kind} partition: healed after {res['isolation_s']:.2f} s "
            f"(isolated node's cluster_state then: {res['isolated_state']})")

        def rejoined():
            ok, why = cluster_health(nodes)
            if not ok:
                return ok, why
            repl = parse_info(query(victim.addr, "INFO", "replication"))
            if repl.get("role") != "slave" or repl.get("master_host") != replica.ip:
                return False, f"{victim.name} role {repl.get('role')} of {repl.get('master_host')}"
            return True, ""

        try:
            wait_until(rejoined, REJOIN_LIMIT_S, f"{victim.name} rejoining as a replica")
            res["rejoin_s"] = time.monotonic() - t_heal
            log(f"{kind} partition: {victim.name} is a replica of {replica.name} "
                f"{res['rejoin_s']:.2f} s after the heal; cluster healthy")
        except Failure as e:
            failures.append(f"{kind} partition: {e}")
            res["rejoin_s"] = None
        time.sleep(2)
        rec = writers.stop()
        writers = None
        sent_iso = [a for a in rec.attempts
                    if a[1] == victim.addr and t_iso <= a[0] <= t_heal]
        res["writes"] = len(rec.attempts)
        res["acked"] = len(rec.acked)
        res["iso_sent"] = len(sent_iso)
        res["iso_acked"] = sum(1 for a in sent_iso if a[2] == "acked")
        outcomes = {}
        for a in sent_iso:
            outcomes[a[2]] = outcomes.get(a[2], 0) + 1
        res["iso_outcomes"] = outcomes
        res["iso_unacked"] = outcomes.get("unacked", 0)
        res["iso_down"] = outcomes.get("err:ClusterDownError", 0)
        res["iso_other"] = (res["iso_sent"] - res["iso_acked"] - res["iso_unacked"]
                            - res["iso_down"])
        lost = verify_acked(seeds, rec.acked)
        res["lost"] = len(lost)
        log(f"{kind} partition: {res['writes']} writes, {res['acked']} acknowledged, "
            f"{len(lost)} lost; "
            f"{res['iso_sent']} sent to the isolated primary, {res['iso_acked']} acknowledged "
            f"({outcomes})")
        if lost:
            failures.append(f"{kind} partition: {len(lost)} acknowledged writes lost, "
                            f"e.g. {lost[:3]}")
        if res["iso_acked"]:
            failures.append(f"{kind} partition: the isolated primary acknowledged "
                            f"{res['iso_acked']} "
                            f"writes (WAIT 1 >= 1)")
        if res["iso_sent"] == 0:
            failures.append(f"{kind} partition: no write reached the isolated primary while "
                            "isolated "
                            "(the test checked nothing)")
        return res
    finally:
        if writers is not None:
            writers.stop()
        net.heal()
        stop_nodes(nodes)


# ---------------------------------------------------------------------------- test 2: kill -9

def probe_failover(seeds, key, t_kill, limit):
    """Time from t_kill until a SET of key succeeds."""
    cl = ClusterClient(seeds, timeout=1.0)
    cl.refresh()
    try:
        while time.monotonic() - t_kill < limit:
            addr = cl.owner(key)
            if addr is None:
                cl.refresh()
                time.sleep(0.01)
                continue
            try:
                if cl.link(addr).call("SET", key, "probe") == "OK":
                    return time.monotonic() - t_kill, addr
            except MovedError as e:
                cl.slots[e.slot_id] = (e.host, int(e.port))
                continue
            except (RedisError, OSError) as e:
                if isinstance(e, CONN_ERRORS):
                    cl.drop(addr)
                cl.refresh()
            time.sleep(0.01)
        return None, None
    finally:
        cl.close()


def kill_test(kind, binary, net, workdir, rounds, failures):
    res = {"kind": kind, "times": [], "rounds": []}
    nodes = start_cluster("kill", kind, binary, net, workdir)
    by_addr = {n.addr: n for n in nodes}
    seeds = [n.addr for n in nodes]
    writers = Writers(f"kill-{kind}", seeds)
    interrupted = False
    try:
        writers.start()
        time.sleep(2)
        for rnd in range(1, rounds + 1):
            wait_until(lambda: cluster_health(nodes), REJOIN_LIMIT_S,
                       f"{kind} round {rnd}: cluster healthy before the kill")
            time.sleep(1)
            live = next(n for n in nodes if n.alive())
            masters, replica_of = topology(live)
            # A different primary each round: one never killed, else the one killed longest ago.
            cands = sorted(masters, key=lambda a: (by_addr[a].killed_at or 0, a))
            victim = by_addr[cands[0]]
            replica = by_addr[replica_of[victim.addr]]
            vslots = slot_set(masters[victim.addr])
            i = 0
            while key_slot(f"probe:{rnd}:{i}".encode()) not in vslots:
                i += 1
            probe_key = f"probe:{rnd}:{i}"
            log(f"{kind} round {rnd}: kill -9 {victim.name} (primary of {len(vslots)} slots, "
                f"replica {replica.name})")
            t_kill = time.monotonic()
            victim.kill9()
            victim.killed_at = rnd
            dt, new_owner = probe_failover(seeds, probe_key, t_kill, FAILOVER_LIMIT_S)
            if dt is None:
                failures.append(f"{kind} round {rnd}: no write to {victim.name}'s slots "
                                f"succeeded within {FAILOVER_LIMIT_S:.0f} s of the kill")
                res["rounds"].append((rnd, victim.name, None))
                raise Failure(failures[-1])
            res["times"].append(dt)
            res["rounds"].append((rnd, victim.name, dt))
            log(f"{kind} round {rnd}: first write to the killed primary's slots after "
                f"{dt:.2f} s, on {addr_s(new_owner)}")
            if new_owner != replica.addr:
                log(f"{kind} round {rnd}: note: the slots went to {addr_s(new_owner)}, "
                    f"not to the replica {replica.name}")
            victim.start()

            def rejoined():
                ok, why = cluster_health(nodes)
                if not ok:
                    return ok, why
                role = parse_info(query(victim.addr, "INFO", "replication")).get("role")
                return role == "slave", f"{victim.name} role {role}"

            try:
                wait_until(rejoined, REJOIN_LIMIT_S, f"{kind} round {rnd}: {victim.name} "
                           f"rejoining as a replica")
            except Failure as e:
                failures.append(str(e))
                raise
            log(f"{kind} round {rnd}: {victim.name} restarted and rejoined as a replica")
        time.sleep(1)
    except Failure as e:
        if str(e) not in failures:
            failures.append(str(e))
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        rec = writers.stop()
        res["writes"] = len(rec.attempts)
        res["acked"] = len(rec.acked)
        try:
            if interrupted:
                raise Failure("interrupted")
            lost = verify_acked(seeds, rec.acked)
            res["lost"] = len(lost)
            if lost:
                failures.append(f"{kind} kill -9: {len(lost)} acknowledged writes lost, "
                                f"e.g. {lost[:3]}")
        except (RedisError, OSError, Failure) as e:
            res["lost"] = None
            failures.append(f"{kind} kill -9: final read failed: {e}")
        log(f"{kind} kill -9: {res['writes']} writes, {res['acked']} acknowledged, "
            f"{res['lost']} lost")
        stop_nodes(nodes)
    return res


# ---------------------------------------------------------------------------- report

def fmt_s(x):
    return "-" if x is None else f"{x:.2f} s"


def stats(times):
    if not times:
        return None, None, None
    return statistics.median(times), min(times), max(times)


def report(args, parts, kills, failures):
    print()
    print("=" * 78)
    print(f"fault tests: tidecache {args.tidecache} vs {args.redis_server}")
    print("=" * 78)
    if parts:
        print()
        print("1. partition: a primary cut off from the other nodes (not from the clients), "
              "then healed")
        print(f"  {'':<46}" + "".join(f"{p['kind']:>16}" for p in parts))

        def prow(label, key, f=lambda v: v):
            vals = [p.get(key) for p in parts]
            print(f"  {label:<46}" + "".join(
                f"{'-' if v is None else f(v):>16}" for v in vals))

        prow("primary isolated / its replica", "pair")
        prow("writes sent", "writes")
        prow("acknowledged (WAIT 1 >= 1)", "acked")
        prow("acknowledged and lost (must be 0)", "lost")
        prow("sent to the isolated primary while isolated", "iso_sent")
        prow("  of which acknowledged (must be 0)", "iso_acked")
        prow("  answered OK but WAIT 1 gave 0", "iso_unacked")
        prow("  refused (CLUSTERDOWN)", "iso_down")
        prow("  other errors", "iso_other")
        prow("isolation lasted", "isolation_s", fmt_s)
        prow("isolated node's cluster_state at the end", "isolated_state")
        prow("replica took over after (from the cut)", "failover_s", fmt_s)
        prow("old primary a replica again (after heal)", "rejoin_s", fmt_s)
    if kills:
        print()
        print(f"2. kill -9 of a primary under load ({args.rounds} rounds); failover time = kill "
              f"to first successful write to a key of its slots")
        kinds = [k["kind"] for k in kills]
        print(f"  {'':<34}" + "".join(f"{k:>20}" for k in kinds))

        def row(label, vals):
            print(f"  {label:<34}" + "".join(f"{'-' if v is None else v:>20}" for v in vals))

        row("writes sent", [k.get("writes") for k in kills])
        row("acknowledged (WAIT 1 >= 1)", [k.get("acked") for k in kills])
        row("acknowledged and lost (must be 0)", [k.get("lost") for k in kills])
        row("rounds with a failover", [len(k["times"]) for k in kills])
        st = [stats(k["times"]) for k in kills]
        row("failover median", [fmt_s(s[0]) for s in st])
        row("failover min", [fmt_s(s[1]) for s in st])
        row("failover max", [fmt_s(s[2]) for s in st])
        for i in range(args.rounds):
            vals = []
            for k in kills:
                if i < len(k["rounds"]):
                    _, name, dt = k["rounds"][i]
                    vals.append(f"{name.split('-')[-1]} {fmt_s(dt)}")
                else:
                    vals.append(None)
            row(f"round {i + 1} (node killed, time)", vals)
        if len(kills) == 2 and all(k["times"] for k in kills):
            a, b = stats(kills[0]["times"])[0], stats(kills[1]["times"])[0]
            verdict = "met" if a <= b else "NOT met"
            print(f"  target tidecache median <= redis-server median: {verdict} "
                  f"({a:.2f} s vs {b:.2f} s)")
    print()
    if failures:
        print("FAILED:")
        for f in failures:
            print(f"  - {f}")
    else:
        print("PASSED: no acknowledged write lost, the isolated primary acknowledged nothing, "
              "every failover within 30 s, every old primary rejoined as a replica")
    print("=" * 78)


# ---------------------------------------------------------------------------- main

def main():
    global VERBOSE, N_WRITERS
    repo = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tidecache", default=str(repo / "target/release/tidecache-server"),
                    help="tidecache-server binary (default: target/release/tidecache-server)")
    ap.add_argument("--redis-server", default="redis-server", help="redis-server 7 binary")
    ap.add_argument("--rounds", type=int, default=5, help="kill -9 rounds per server")
    ap.add_argument("--only", choices=["partition", "kill"], help="run one test only")
    ap.add_argument("--no-redis", action="store_true",
                    help="run against tidecache only (no redis-server columns)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    ap.add_argument("--writers", type=int, default=N_WRITERS,
                    help=f"writer threads per test (default {N_WRITERS})")
    ap.add_argument("--verbose", action="store_true",
                    help="log what each wait for the cluster was waiting on")
    args = ap.parse_args()
    VERBOSE = args.verbose
    N_WRITERS = args.writers

    if os.geteuid() != 0:
        sys.exit("fault-tests.py needs root (network namespaces): run it with sudo")
    for tool in ("ip", "redis-cli"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found")
    args.tidecache = str(Path(args.tidecache).resolve()) if os.sep in args.tidecache \
        else shutil.which(args.tidecache) or args.tidecache
    if not os.access(args.tidecache, os.X_OK):
        sys.exit(f"{args.tidecache}: not an executable (cargo build --release, or --tidecache)")
    if not args.no_redis:
        rs = shutil.which(args.redis_server)
        if rs is None:
            sys.exit(f"{args.redis_server} not found (--no-redis skips it)")
        args.redis_server = rs

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGINT too: a shell without job control starts background jobs with SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    workdir = tempfile.mkdtemp(prefix="tidecache-fault-")
    log(f"work directory {workdir} (node logs: <test>-<server>/nN/server.log)")
    failures, parts, kills = [], [], []
    net = Net(N_NODES)
    interrupted = False
    try:
        Net.remove_stale()
        net.up()
        net.enter_client()
        log(f"namespaces up: hub {net.hub}, nodes {net.node_ns[0]}..{net.node_ns[-1]} "
            f"({net.node_ip[0]}..{net.node_ip[-1]}), clients {net.client} ({net.client_ip})")
        servers = [("tidecache", args.tidecache)]
        if not args.no_redis:
            servers.append(("redis", args.redis_server))
        if args.only in (None, "partition"):
            for kind, binary in servers:
                try:
                    parts.append(partition_test(kind, binary, net, workdir, failures))
                except Failure as e:
                    if str(e) not in " ".join(failures):
                        failures.append(f"{kind} partition: {e}")
                    parts.append({"kind": kind})
        if args.only in (None, "kill"):
            for kind, binary in servers:
                try:
                    kills.append(kill_test(kind, binary, net, workdir, args.rounds, failures))
                except Failure as e:  # the cluster did not even start
                    failures.append(f"{kind} kill -9: {e}")
                    kills.append({"kind": kind, "times": [], "rounds": []})
    except KeyboardInterrupt:
        interrupted = True
        failures.append("interrupted")
    finally:
        # Every server still running is in one of our namespaces: stop them, then remove
        # the namespaces (the veths and the bridge go with them).
        for ns in net.created:
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                if int(pid) == os.getpid():
                    continue  # the clients' namespace holds this script's own threads
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        net.down()
        left = [l for l in sh("ip", "netns", "list", check=False).stdout.splitlines()
                if l.startswith(f"tcft{os.getpid()}-")]
        if left:
            print(f"warning: namespaces left: {left}", file=sys.stderr)
    report(args, parts, kills, failures)
    if failures or args.keep:
        print(f"node logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(130 if interrupted else (1 if failures else 0))


if __name__ == "__main__":
    main()
