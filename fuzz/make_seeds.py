#!/usr/bin/env python3
"""Writes the committed seed corpora, fuzz/seeds/<target>/, from the project's tests.

- resp_request, command: the command lines of tests/compare/*.txt (redis-cli quoting, split
  as redis-cli would) RESP-encoded, plus the DOC.* calls of tests/documents.rs,
  tests/aggregate.rs and tests/indexes.rs; resp_request also gets inline forms and a few
  malformed frames.
- ejson: the JSON documents, filters, updates and pipelines of those Rust tests, and the
  plain ones again as BSON.
- doc_query: those filters, updates, projections, sorts and pipelines combined into the
  target's five fields.
- stream_id: the IDs of tests/compare/streams.txt.
- lua_value: one recipe per kind of expression the target's generator builds (its input is
  a recipe, not Lua text), and nested ones.

Deterministic: running it again gives the same files. Run from anywhere:
    python3 fuzz/make_seeds.py
"""
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import struct

FUZZ = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(FUZZ)
SEEDS = os.path.join(FUZZ, "seeds")
SEP = b"\xff"


def resp(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def write(target, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def compare_commands():
    """(file stem, [argv]) for each tests/compare file, FLUSHALL and comments left out."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/compare/*.txt"))):
        cmds = []
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                argv = shlex.split(line)
            except ValueError:
                continue
            if argv and argv[0].upper() != "FLUSHALL":
                cmds.append(argv)
        out.append((os.path.basename(path)[:-4], cmds))
    return out


STR = r'(?:r#"(.*?)"#|"((?:[^"\\]|\\.)*)")'


def rust_strings(text):
    for m in re.finditer(STR, text, re.S):
        if m.group(1) is not None:
            yield m.group(1)
        else:
            yield bytes(m.group(2), "utf-8").decode("unicode_escape")


def doc_calls(text):
    """The `&["DOC.X", ...]` argument lists of a Rust test file."""
    calls = []
    for m in re.finditer(r'&\[\s*"(DOC\.[A-Z]+)"\s*,(.*?)\]', text, re.S):
        args = [m.group(1)] + list(rust_strings(m.group(2)))
        calls.append(args)
    return calls


def main():
    shutil.rmtree(SEEDS, ignore_errors=True)
    compare = compare_commands()
    rust = ""
    for name in ("documents", "aggregate", "indexes"):
        with open(os.path.join(ROOT, "tests", name + ".rs"), encoding="utf-8") as f:
            rust += f.read()
    calls = doc_calls(rust)

    # command: each compare file in pipelines of at most 60 commands, and the DOC calls.
    for _, cmds in compare:
        for i in range(0, len(cmds), 60):
            write("command", b"".join(resp(a) for a in cmds[i:i + 60]))
    for i in range(0, len(calls), 40):
        write("command", b"".join(resp(a) for a in calls[i:i + 40]))

    # resp_request: a control byte (limits, piece size), then RESP or inline requests.
    for n, (_, cmds) in enumerate(compare):
        body = b"".join(resp(a) for a in cmds[:12])
        write("resp_request", bytes([(n * 8 + 3) & 0xFF]) + body)
        inline = b"".join(
            " ".join(shlex.quote(x) for x in a).encode() + b"\r\n" for a in cmds[:6]
        )
        write("resp_request", bytes([(n * 8 + 3) & 0xFF]) + inline)
    for raw in [
        b"*0\r\n*-1\r\n*1\r\n$0\r\n\r\n",
        b"*2\r\n$3\r\nGET\r\n$-1\r\n",
        b"*1\r\n$01\r\nx\r\n",
        b"*1\r\n+OK\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n01234567890123456789\r\n",
        b"\r\n\n  \nPING \"a\\x41\\n\" 'b\\'c'\r\n",
        b"SET \"unbalanced\r\n",
        b"*11\r\n" + b"$1\r\na\r\n" * 11,
        b"*1\r\n$17000\r\n" + b"a" * 17000 + b"\r\n",
    ]:
        for ctl in (0x03, 0x07, 0x0B, 0x01):
            write("resp_request", bytes([ctl]) + raw)

    # ejson and doc_query: the JSON strings of the Rust tests.
    objs, arrays = [], []
    for s in rust_strings(rust):
        t = s.strip()
        if not t or t[0] not in "{[":
            continue
        try:
            v = json.loads(t)
        except ValueError:
            continue
        (objs if isinstance(v, dict) else arrays).append(t)
    objs = sorted(set(objs))
    arrays = sorted(set(arrays))
    for t in objs:
        write("ejson", b"\x00" + t.encode())
        try:
            write("ejson", b"\x01" + bson_doc(json.loads(t)))
        except (TypeError, OverflowError):
            pass
    updates = [o for o in objs if o.lstrip("{ ").startswith('"$') and not o.startswith('{"$and') and not o.startswith('{"$or')]
    updates += ['{"$set":{"a":5}}', '{"$inc":{"n":1}}', '{"$push":{"tags":"x"}}', '{"$unset":{"b.c":""}}']
    plain = [o for o in objs if o not in updates]
    keyish = [o for o in plain if re.fullmatch(r'\{("[\w.]+":-?1,?)+\}', o)] or ['{"a":1}']
    pipelines = [a for a in arrays if a.lstrip("[ ").startswith("{")] or ['[{"$match":{}}]']
    for i, filt in enumerate(plain[:150]):
        fields = [
            filt,
            updates[i % len(updates)],
            keyish[i % len(keyish)],
            keyish[(i + 1) % len(keyish)],
            pipelines[i % len(pipelines)],
        ]
        write("doc_query", SEP.join(f.encode() for f in fields))
    for p in pipelines:
        write("doc_query", SEP.join([b"{}", b"{}", b"{}", b"{}", p.encode()]))

    # stream_id: model operations (block size byte, then ops), then the test's IDs.
    ids = set()
    for name, cmds in compare:
        if name != "streams":
            continue
        for a in cmds:
            for x in a[1:]:
                if re.fullmatch(r"\(?[0-9]+(-([0-9]+|\*))?|[-+*$>]", x):
                    ids.add(x)
    ids = sorted(ids)
    for i in range(0, len(ids), 12):
        ops = bytes([i & 0xFF]) + bytes(range(0, 60, 1))
        write("stream_id", ops + SEP + " ".join(ids[i:i + 12]).encode())
    write("stream_id", bytes([0x83, 0, 1, 1, 0, 1, 2, 0, 2, 1, 3, 0, 0, 2, 5, 5, 0, 3, 0, 0, 255, 255, 0, 4, 1]))

    # lua_value: [control, recipe...]; the generator reads kind bytes k % 17.
    for kind in range(17):
        write("lua_value", bytes([0, kind, 3, 1, 2, 3, 4, 5, 6, 7, 8]))
        write("lua_value", bytes([1, kind, 4, 16, 5, 3, 65, 66, 67, 2, 7, 13, 3, 120, 121, 122]))
    write("lua_value", bytes([3, 16, 21, 2, 1, 13, 1, 9]))  # DEBUG PROTOCOL via pcall, RESP3
    write("lua_value", bytes([1, 10, 3, 3, 1, 65, 2, 4, 3, 2, 66, 7, 3, 67]))


def bson_doc(d):
    body = b"".join(bson_elem(k, v) for k, v in d.items())
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


def bson_elem(k, v):
    name = k.encode() + b"\x00"
    if isinstance(v, bool):
        return b"\x08" + name + (b"\x01" if v else b"\x00")
    if v is None:
        return b"\x0a" + name
    if isinstance(v, int):
        if -(2**31) <= v < 2**31:
            return b"\x10" + name + struct.pack("<i", v)
        return b"\x12" + name + struct.pack("<q", v)
    if isinstance(v, float):
        return b"\x01" + name + struct.pack("<d", v)
    if isinstance(v, str):
        s = v.encode() + b"\x00"
        return b"\x02" + name + struct.pack("<i", len(s)) + s
    if isinstance(v, dict):
        return b"\x03" + name + bson_doc(v)
    if isinstance(v, list):
        return b"\x04" + name + bson_doc({str(i): x for i, x in enumerate(v)})
    raise TypeError(type(v))


if __name__ == "__main__":
    main()
