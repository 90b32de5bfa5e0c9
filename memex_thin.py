"""The ``memex`` console script's first lines: a ``memex search`` or ``memex show`` answered by a running server
before anything of memex is imported (issue 42 §4).

A search from a shell is mostly Python starting and importing: ``import memex`` (typing, dataclasses), the config
(tomllib, pathlib) and the query parser cost several times notmuch's whole search. So the console script (and
``python -m memex``) runs :func:`main` here first, a module of the standard library's ``os`` and ``sys`` (and
``socket`` once a beacon is found), outside the ``memex`` package so that importing it does not run
``memex/__init__``. It answers a line only when all of this holds, and otherwise hands it to
:func:`memex.cli.entry.main` untouched (today's path, the same output):

- the command word (after ``--config PATH``) is ``search`` or ``show``; ``MEMEX_DEBUG`` and ``MEMEX_NO_SERVER`` unset;
  stdout is not a terminal (a terminal's coloured lines are left to the in-process path);
- the config file is found by memex's own rule (:func:`config_path`; ``tests/core/test_thin.py`` pins that it agrees
  with :func:`memex.config.find_config`), and a server (``memex watch`` or ``memex serve``) left a beacon for that
  file in the private runtime folder (:func:`runtime_dir`: owned by this user, 0700) naming its socket and the
  config's identity (absolute path, size, modification time) as it read it, and the file is still that;
- the server answers ``OK``: it parsed the line as the plain path does (:func:`memex.cli.find.find_args`), its
  environment's facts that could change the output (:data:`FACTS`) equal this command's, and the CLI's own
  rendering code ran into per-request buffers without an error. Anything else (no beacon, a stale socket, another
  or a changed config, a bad query, an unknown message, a timeout): the in-process path, which says any error itself.

The server's stdout and stderr bytes are written as they are (stderr first: the only stderr of a successful search
is its notes, written before the results), and the exit code is 0.
"""

from __future__ import annotations

import os
import sys

PROTOCOL = b"memex-thin 1\0"  # a request's first bytes (the read socket's JSON requests start with "{")
COMMANDS = ("search", "show")
FACTS = ("TZ", "NO_COLOR", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_TIME", "PYTHONIOENCODING", "PYTHONUTF8")
CONNECT_WAIT = 1.0  # seconds to connect (a listening server accepts at once)
ANSWER_WAIT = 60.0  # seconds for the answer; past it the command answers in-process
BEACON_SUFFIX = ".beacon"


def config_path(explicit: str | None, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The absolute path of the config file memex reads (memex.config's rule: ``--config``, ``$MEMEX_CONFIG``, the
    user config folder), or None where that rule would need more than this (no ``HOME``, macOS)."""
    path = explicit or environ.get("MEMEX_CONFIG")
    if path:
        return os.path.abspath(os.path.expanduser(path))
    if sys.platform == "darwin":
        return None
    base = environ.get("XDG_CONFIG_HOME")
    if not base:
        home = environ.get("HOME")
        if not home:
            return None
        base = os.path.join(home, ".config")
    return os.path.abspath(os.path.join(base, "memex", "config.toml"))


def runtime_dir(environ: dict[str, str] | os._Environ[str]) -> str:
    """The per-user folder of the servers' beacons: ``$XDG_RUNTIME_DIR/memex``, else ``/tmp/memex-UID``."""
    base = environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isabs(base):
        return os.path.join(base, "memex")
    return f"/tmp/memex-{os.getuid()}"


def beacon_path(folder: str, config: str) -> str:
    """The beacon of the server reading ``config`` (an absolute path): named by the path itself, ``%`` and ``/``
    escaped, so two config files never share one."""
    return os.path.join(folder, config.replace("%", "%25").replace("/", "%2F") + BEACON_SUFFIX)


def identity(config: str) -> list[str] | None:
    """What tells client and server that they read the same config file, unchanged: path, size, mtime_ns."""
    try:
        st = os.stat(config)
    except OSError:
        return None
    return [config, str(st.st_size), str(st.st_mtime_ns)]


def facts(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """The environment's facts that may change a command's output (:data:`FACTS`), as client and server compare them."""
    return [f"{k}={environ[k]}" if k in environ else k for k in FACTS]


def private(folder: str) -> bool:
    """Whether ``folder`` is a folder of this user's that nobody else may read or write."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return (st.st_mode & 0o170777) == 0o040700 and st.st_uid == os.getuid()


def _command(argv: list[str]) -> tuple[str | None, str | None]:
    """The ``--config`` value and the command word of ``argv``."""
    if argv[:1] == ["--config"] and len(argv) > 1:
        return argv[1], argv[2] if len(argv) > 2 else None
    if argv[:1] and argv[0].startswith("--config="):
        return argv[0][len("--config=") :], argv[1] if len(argv) > 1 else None
    return None, argv[0] if argv else None


def request(argv: list[str], environ: dict[str, str] | os._Environ[str]) -> tuple[str, bytes] | None:
    """The socket to ask and the request to send for ``argv``, or None for the in-process path."""
    if "MEMEX_DEBUG" in environ or environ.get("MEMEX_NO_SERVER") or environ.get("MEMEX_CONFIG") == "":
        return None
    out, err = sys.stdout, sys.stderr
    if out is None or err is None or not (hasattr(out, "buffer") and hasattr(err, "buffer")) or out.isatty():
        return None
    explicit, command = _command(argv)
    if command not in COMMANDS or explicit == "":
        return None
    config = config_path(explicit, environ)
    folder = runtime_dir(environ)
    if config is None or not private(folder):
        return None
    try:
        with open(beacon_path(folder, config), encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().split("\n")
    except (OSError, ValueError):
        return None
    found = identity(config)
    if len(lines) != 5 or found is None or lines[1:4] != found:
        return None
    encodings = [out.encoding, out.errors or "strict", err.encoding, err.errors or "strict"]
    told = facts(environ)
    fields = [*found, str(len(told)), *told, *encodings, *argv]
    return lines[0], PROTOCOL + b"\0".join(x.encode("utf-8", "surrogateescape") for x in fields)


def ask(socket_path: str, body: bytes) -> tuple[bytes, bytes] | None:
    """The server's stdout and stderr bytes for ``body``, or None (no server, an error, no answer in time).

    Through ``_socket``, the C module the standard library's ``socket`` wraps: importing ``socket`` itself (with
    ``enum`` and ``selectors``) costs about 3 ms here, a tenth of the whole command's budget; the calls are the same."""
    try:
        import _socket as sockets
    except ImportError:  # an interpreter without it
        import socket as sockets  # type: ignore[no-redef]

    conn = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_WAIT)
        conn.connect(socket_path)
        conn.settimeout(ANSWER_WAIT)
        conn.sendall(body)
        conn.shutdown(sockets.SHUT_WR)
        chunks = []
        while chunk := conn.recv(1 << 16):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        conn.close()
    reply = b"".join(chunks)
    if not reply.startswith(b"OK") or len(reply) < 10:
        return None
    size = int.from_bytes(reply[2:10], "big")
    if len(reply) < 10 + size:
        return None
    return reply[10 : 10 + size], reply[10 + size :]


def answered(argv: list[str], environ: dict[str, str] | os._Environ[str]) -> bool:
    """Whether a running server answered ``argv`` and its output is written (see the module's docstring)."""
    asked = request(argv, environ)
    got = ask(*asked) if asked is not None else None
    if got is None:
        return False
    out, err = got
    try:
        for stream, data in ((sys.stderr, err), (sys.stdout, out)):
            if data:
                stream.flush()
                stream.buffer.write(data)
                stream.flush()
    except BrokenPipeError:  # the reader has gone: end as the in-process path does (memex.cli.entry.end_quietly)
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        sys.exit(1)
    return True


def main() -> None:
    """The ``memex`` command: answered by a running server when it can be (see above), else by memex itself."""
    if len(sys.argv) > 2 and answered(sys.argv[1:], os.environ):
        sys.exit(0)
    from memex.cli.entry import main as memex_main

    memex_main()
