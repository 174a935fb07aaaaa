#!/usr/bin/env python3
"""Prints the head of each DOC.* section of docs/commands.md from a running server's table.

    python3 docs/tools/command_synopsis.py [port]      (default 6379)

For every DOC.* command (COMMAND LIST FILTERBY PATTERN doc.*, sorted) it prints

    ## DOC.NAME

    `DOC.NAME arg [OPTION value] ...`

    > summary of COMMAND DOCS

    Flags: write, denyoom. ACL categories: @document @write @slow.

which is exactly what tests/docs_commands.rs holds docs/commands.md to (the synopsis is
rendered from COMMAND DOCS's arguments by the same rules there). Paste a changed head into
the file when the table changes. Python 3 standard library only.
"""

import socket
import sys


def command(sock, f, *args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    sock.sendall(b"".join(out))
    return read(f)


def read(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2].decode()
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RuntimeError(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2].decode()
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read(f) for _ in range(n)]
    raise RuntimeError(f"unexpected reply {line!r}")


def pairs(flat):
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def render(arg):
    """One argument of COMMAND DOCS in Redis's usual notation."""
    a = pairs(arg)
    flags = a.get("flags") or []
    token = a.get("token")
    kind = a["type"]
    if kind == "pure-token":
        text = token
    elif kind in ("oneof", "block"):
        parts = [render(s) for s in a.get("arguments") or []]
        text = " | ".join(parts) if kind == "oneof" else " ".join(parts)
        # A choice is bracketed by <> unless the [] of an optional one already bound it.
        if kind == "oneof" and (token or "optional" not in flags):
            text = f"<{text}>"
        if token:
            text = f"{token} {text}"
    else:
        text = a.get("display_text") or a["name"]
        if token:
            text = f"{token} {text}"
    if "multiple" in flags:
        if "multiple_token" in flags or not token:
            text = f"{text} [{text} ...]"
        else:
            text = f"{text} [{text.split(' ', 1)[1]} ...]"
    if "optional" in flags:
        text = f"[{text}]"
    return text


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6379
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    names = sorted(command(sock, f, "COMMAND", "LIST", "FILTERBY", "PATTERN", "doc.*"))
    for name in names:
        docs = command(sock, f, "COMMAND", "DOCS", name)
        d = pairs(docs[1])
        synopsis = " ".join([name.upper()] + [render(a) for a in d.get("arguments") or []])
        info = command(sock, f, "COMMAND", "INFO", name)[0]
        flags = ", ".join(info[2]) or "none"
        print(f"## {name.upper()}\n\n`{synopsis}`\n\n> {d['summary']}\n\n"
              f"Flags: {flags}. ACL categories: {' '.join(info[6])}.\n")


if __name__ == "__main__":
    main()
