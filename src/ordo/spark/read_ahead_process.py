"""The second process of `read_ahead`: reads packed pages of a SQLite tag view, sends them back.

Run as `python -I -S read_ahead_process.py` by ordo.spark.read_ahead, so it imports
only the standard library (no site packages, no ordo: it starts in about 20 ms). Requests come
pickled on stdin, one at a time: the file (a SharedFile as a tuple: URI, path, (device, inode),
busy timeout), the page query and its parameters, which parameter is the page's `after`, the
page size and how many pages to read.
Each page goes back pickled on stdout as ("page", row, is_last), the row being what the
packing query returned (its first packed column the keys); a failure as ("error", text), after
which the next request may come. It ends when stdin ends. Ctrl-C is for the parent, which
stops it.
"""

from __future__ import annotations

import os
import pickle
import signal
import sqlite3
import sys
from typing import Any, BinaryIO


def _greatest_key(keys: bytes) -> bytes:
    """The greatest of packed 16-byte keys (the order of an aggregate's input is unspecified)."""
    return max(keys[i : i + 16] for i in range(0, len(keys), 16))


def _connect(uri: str, path: str, identity: Any, busy_timeout_s: float) -> sqlite3.Connection:
    """A read connection to the file the parent opened; OSError if the path names another now."""
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=busy_timeout_s)
    conn.execute("PRAGMA query_only = true")
    status = os.stat(path)
    if identity is not None and (status.st_dev, status.st_ino) != tuple(identity):
        conn.close()
        msg = f"{path} is not the file the planner opened"
        raise OSError(msg)
    return conn


def _serve(request: tuple[Any, ...], out: BinaryIO, conns: dict[str, sqlite3.Connection]) -> None:
    """Read the request's pages, each sent as soon as it is read."""
    (uri, path, identity, busy_timeout_s), sql, params, after_index, limit, pages = request
    conn = conns.get(uri)
    if conn is None:
        conn = conns[uri] = _connect(uri, path, identity, busy_timeout_s)
    params = list(params)
    for number in range(1, pages + 1):
        row = conn.execute(sql, params).fetchone()
        is_last = number == pages or row[0] < limit
        pickle.dump(("page", row, is_last), out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()
        if is_last:
            return
        params[after_index] = _greatest_key(row[1])


def main() -> None:
    """Serve requests until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests, out = sys.stdin.buffer, sys.stdout.buffer
    conns: dict[str, sqlite3.Connection] = {}
    while True:
        try:
            request = pickle.load(requests)  # noqa: S301 - from the planner that started it
        except EOFError:
            return
        try:
            _serve(request, out, conns)
        except BrokenPipeError:  # the parent stopped reading: it is done with this process
            os._exit(0)
        except (sqlite3.Error, OSError) as exc:
            pickle.dump(("error", f"{type(exc).__name__}: {exc}"), out)
            out.flush()


if __name__ == "__main__":
    main()
