"""The thin client of the read socket (:mod:`memex.read.socket`): ``memex search`` and ``memex show`` ask a running
``memex watch`` or ``memex serve`` first, and answer in-process when :func:`ask` gives None.

It imports only the standard library's ``socket``, ``json`` and ``os``: a search answered by the server costs the
command line's start, the config and one round trip. None (answer in-process, as without a server) when there is no
socket, nobody listens on it (a stale socket of a server that died), the server answers with an error (the
in-process run then says it, the same line either way), or it takes longer than :data:`ANSWER_WAIT`.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

SOCKET_DIR = "read"  # the socket's folder in the state folder (0700)
SOCKET_NAME = "read.sock"  # the socket (0600)
PROTOCOL = 1
CONNECT_WAIT = 1.0  # seconds to connect (a listening server accepts at once)
ANSWER_WAIT = 60.0  # seconds for the answer; past it the command answers in-process
MAX_PATH = 104  # bytes of a Unix socket's path (sun_path: 108 on Linux, 104 on macOS)


def socket_path(state_dir: str | os.PathLike[str]) -> str:
    """Where the read socket of ``state_dir`` is."""
    return os.path.join(os.fspath(state_dir), SOCKET_DIR, SOCKET_NAME)


def config_identity(path: str | os.PathLike[str] | None) -> list[Any]:
    """What tells the server that the client read the same config file, unchanged: its absolute path, size and
    modification time (None for a config that is no file)."""
    if path is None:
        return [None]
    try:
        st = os.stat(path)
    except OSError:
        return [os.path.abspath(path)]
    return [os.path.abspath(path), st.st_size, st.st_mtime_ns]


def ask(state_dir: str | os.PathLike[str], config_path: str | os.PathLike[str] | None, op: str, **args: Any) -> Any:
    """The server's answer to ``op`` with ``args``, or None (see the module docstring)."""
    path = socket_path(state_dir)
    if len(os.fsencode(path)) >= MAX_PATH:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_WAIT)
        conn.connect(path)
        conn.settimeout(ANSWER_WAIT)
        request = {"v": PROTOCOL, "op": op, "config": config_identity(config_path), "args": args}
        conn.sendall(json.dumps(request).encode() + b"\n")
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(1 << 16):
            chunks.append(chunk)
        reply = json.loads(b"".join(chunks))
    except (OSError, ValueError):
        return None
    finally:
        conn.close()
    return reply.get("ok") if isinstance(reply, dict) else None
