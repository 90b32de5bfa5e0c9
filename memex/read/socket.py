"""The read socket: while ``memex watch`` or ``memex serve`` runs, it keeps the archive open and answers ``memex
search`` and ``memex show`` over a Unix socket in the state folder (:func:`serve_socket`; the client:
:mod:`memex.read.client`).

- Where: ``<state_dir>/read/read.sock``, the folder 0700 and the socket 0600 (made under a umask that leaves no
  moment when it is more open); a connection from another user is refused (``SO_PEERCRED``) besides.
- A socket left by a server that died (nobody accepts on it) is stale: the next server replaces it, and a client
  answers in-process meanwhile. A socket a live server listens on is left alone (a second server does not serve).
- The protocol: one JSON request a connection (``{"v", "op", "config", "args"}``), one JSON answer (``{"ok": ...}`` or
  ``{"error": "..."}``). The answers are the read model's data, rendered by the client with the same code as an
  in-process run, so the output is the same bytes either way. An error (a bad query, an unknown key, a config file
  that is not the one the server read) sends the client in-process, where the same error is said as always.
- A thin client (:mod:`memex_thin`, the console script's first lines) sends a whole command line instead
  (:func:`thin_reply`): the server checks the config's identity and the environment's facts, runs the CLI's own
  code (:func:`memex.cli.find.rendering`) into per-request buffers and answers the bytes of stdout and stderr, or
  ``NO`` on any doubt or error (the client then runs in-process). For it the server leaves a beacon naming its
  socket in the private runtime folder (:func:`write_beacon`), removed when it closes.
- Read-only: each answer is a call of :class:`memex.read.archive.Archive`; nothing here writes (but the beacon).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memex_thin
from memex.read.archive import Archive
from memex.read.client import MAX_PATH, PROTOCOL, config_identity, socket_path

REQUEST_MAX = 1 << 20  # bytes of a request at most (a query and a few numbers)
REQUEST_WAIT = 10.0  # seconds a connection may take to send its request
LISTEN_BACKLOG = 64

# A command line rendered for a thin client: (argv, the read model's answer to (op, args), the config) -> the text of
# stdout and stderr, or None when it is not a line to answer so. The CLI's own code (memex.cli.find.render_line),
# given by the command that starts the server (memex watch, memex serve): this layer is below the CLI's.
Render = Callable[[list[str], Callable[[str, dict[str, Any]], Any], Any], tuple[str, str] | None]


class SocketServer:
    """A listening read socket and its thread; :meth:`close` stops it and removes the socket (if still its own)."""

    def __init__(self, archive: Archive, path: str, sock: socket.socket | None, render: Render | None = None) -> None:
        self.archive = archive
        self.render = render
        self.path = path
        self.identity = config_identity(archive.cfg.path)
        self._sock = sock
        self._inode = os.stat(path).st_ino if sock is not None else None
        self._thread: threading.Thread | None = None
        self.answered = 0  # requests answered (not those sent in-process with an error)
        self.rendered = 0  # of them, thin clients' command lines answered with their output (:meth:`thin_reply`)
        self._count = threading.Lock()
        self.beacon = write_beacon(path, archive.cfg.path) if sock is not None and render is not None else None
        if sock is not None:
            self._thread = threading.Thread(target=self._accept, name="read-socket", daemon=True)
            self._thread.start()

    @property
    def serving(self) -> bool:
        """Whether this server listens (False when another live server holds the socket, or it cannot be made)."""
        return self._sock is not None

    def close(self) -> None:
        """Stop answering and remove the socket (unless another server has replaced it since)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        remove_beacon(self.beacon, self.path)
        try:
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> SocketServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            sock = self._sock
            if sock is None:
                return
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(conn,), name="read-socket-answer", daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        """Read one request from ``conn``, answer it, close it."""
        with conn:
            try:
                if not _same_user(conn):
                    return
                conn.settimeout(REQUEST_WAIT)
                chunks, size = [], 0
                while size <= REQUEST_MAX and (chunk := conn.recv(1 << 16)):
                    chunks.append(chunk)
                    size += len(chunk)
                body = b"".join(chunks)
                if body.startswith(memex_thin.PROTOCOL):
                    sent = self.thin_reply(body[len(memex_thin.PROTOCOL) :])
                else:
                    sent = json.dumps(self.reply(body), ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
                conn.settimeout(None)
                conn.sendall(sent)
            except OSError:
                return  # the client went away: nothing to tell

    def reply(self, body: bytes) -> dict[str, Any]:
        """The answer to one request (``{"ok": ...}`` or ``{"error": line}``)."""
        try:
            request = json.loads(body)
        except ValueError:
            return {"error": "not a JSON request"}
        if not isinstance(request, dict) or request.get("v") != PROTOCOL or not isinstance(request.get("args"), dict):
            return {"error": f"not a request of protocol {PROTOCOL}"}
        if request.get("config") != self.identity:
            return {"error": "another config file (or this one changed since the server started): answer in-process"}
        try:
            result = answer(self.archive, str(request.get("op")), request["args"])
        except Exception as exc:  # every fault of one request is that request's: the client answers in-process
            return {"error": f"{type(exc).__name__}: {exc}"}
        with self._count:
            self.answered += 1
        return {"ok": result}

    def thin_reply(self, body: bytes) -> bytes:
        """The answer to a thin client's command line: ``OK``, stdout's length (8 bytes), stdout's and stderr's
        bytes, exactly what the command prints in-process; or ``NO`` (the client answers in-process)."""
        fields = [f.decode("utf-8", "surrogateescape") for f in body.split(b"\0")]
        try:
            n = int(fields[3])
            facts, (out_enc, out_errors, err_enc, err_errors), argv = fields[4 : 4 + n], fields[4 + n : 8 + n], fields[8 + n :]
        except (IndexError, ValueError):
            return b"NO"
        if self.render is None or fields[:3] != [str(x) for x in self.identity] or facts != memex_thin.facts(os.environ):
            return b"NO"  # another config, one changed since, or an environment that may print otherwise
        try:
            # the data as the JSON requests get it (a round trip through JSON), so that it renders the same
            text = self.render(argv, lambda op, args: json.loads(json.dumps(answer(self.archive, op, args))), self.archive.cfg)
            if text is None:
                return b"NO"  # a line for click, or not one a thin client sends
            stdout, stderr = text[0].encode(out_enc, out_errors), text[1].encode(err_enc, err_errors)
        except Exception:  # every fault of one request is that request's: the client answers in-process and says it
            return b"NO"
        with self._count:
            self.answered += 1
            self.rendered += 1
        return b"OK" + len(stdout).to_bytes(8, "big") + stdout + stderr


def write_beacon(socket_path: str, config: Path | None) -> str | None:
    """Leave, for thin clients, a beacon naming ``socket_path`` and the identity of ``config`` in the private
    runtime folder (made 0700 if missing; none when it is not this user's alone). Its path, or None."""
    if config is None:
        return None
    folder = memex_thin.runtime_dir(os.environ)
    found = memex_thin.identity(os.path.abspath(config))
    if found is None:
        return None
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if not memex_thin.private(folder):
            return None
        path = memex_thin.beacon_path(folder, found[0])
        part = f"{path}.{os.getpid()}.part"
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write("\n".join([os.path.abspath(socket_path), *found, ""]))
        os.replace(part, path)
    except OSError:
        return None  # too long a name, a read-only folder: the thin clients answer in-process
    return path


def remove_beacon(path: str | None, socket_path: str) -> None:
    """Remove the beacon at ``path`` unless another server has written its own there since."""
    if path is None:
        return
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            if f.readline().rstrip("\n") == os.path.abspath(socket_path):
                os.unlink(path)
    except OSError:
        pass


def answer(archive: Archive, op: str, args: dict[str, Any]) -> Any:
    """The read model's data for one operation of ``memex search`` or ``memex show`` (JSON-able)."""
    if op == "search":
        notes: list[str] = []
        rows = archive.search_rows(str(args["query"]), int(args["limit"]), rank=bool(args["rank"]), notes=notes)
        return {"rows": rows, "notes": notes}
    if op == "count":
        return archive.count(str(args["query"]), conversations=bool(args["conversations"]), people=False)
    if op == "group_counts":
        return archive.group_counts(str(args["query"]), str(args["by"]), int(args["limit"]))
    if op == "threads":
        return archive.threads(str(args["query"]), int(args["limit"]))
    if op in ("show", "thread"):
        from memex.read.show import conversation, find, revisions

        key, record = find(archive.cfg, archive.store, str(args["ref"]))
        if op == "show":
            return {"key": key, "record": record, "revisions": revisions(archive.store, key)}
        return [[k, d, r] for k, d, r in conversation(archive.cfg, archive.store, key, record)]
    raise ValueError(f"no operation {op!r}")


def serve_socket(archive: Archive, state_dir: Path, render: Render | None = None) -> SocketServer:
    """Answer ``memex search`` and ``memex show`` for ``archive`` on the read socket of ``state_dir`` until the
    handle's ``close()``. A live server already there is left alone (the handle then serves nothing: ``serving``
    is False); a stale socket is replaced. With ``render`` (:data:`Render`), thin clients' command lines are answered
    too, and a beacon tells them where."""
    from memex.state.files import ensure_private_dir

    path = socket_path(state_dir)
    if len(os.fsencode(path)) >= MAX_PATH:
        return SocketServer(archive, path, None)  # too long a path for a socket: the commands answer in-process
    ensure_private_dir(Path(path).parent)
    if os.path.exists(path):
        if _listening(path):
            return SocketServer(archive, path, None)
        os.unlink(path)  # stale: its server died
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    except OSError:
        sock.close()
        return SocketServer(archive, path, None)  # another server bound it in between
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(LISTEN_BACKLOG)
    return SocketServer(archive, path, sock, render)


def _listening(path: str) -> bool:
    """Whether a server accepts on the socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer runs as this process's user (Linux: ``SO_PEERCRED``; elsewhere the 0700 folder decides)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())
