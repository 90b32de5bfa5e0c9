"""Signal through a running ``signal-cli daemon``: its JSON-RPC (UNIX socket, TCP or HTTP), into the spool.

``daemon = "unix:/run/user/1000/signal-cli/socket"``, ``"tcp:127.0.0.1:7583"`` or ``"http://127.0.0.1:8080"``
names the daemon. It must run with ``--receive-mode=manual``: then it receives from Signal's servers only when a
client asks (the ``receive`` method), and what it returns is what it acknowledged to them. In its default mode it
receives on its own and hands each message to the clients connected at that moment only: a client that was away
(memex between two polls, a watcher restarting) loses what came meanwhile. memex asks for ``receive`` and writes the
messages it gets into the source's spool (:mod:`memex.state.spool`), synced to disk, before it renders or stores
anything; a message leaves the spool only once its record is stored. A daemon that answers ``receive`` with
"already being received" is in another mode: one warning a poll names it (``--receive-mode=manual`` is the fix),
and the messages it pushes to memex's connection meanwhile are spooled all the same.

Under ``memex watch`` (:mod:`memex.push`) the listener receives: on each connection it calls ``receive`` once (what
waited, and which mode the daemon is in), then subscribes (``subscribeReceive`` on the socket; the ``/api/v1/events``
Server-Sent Events stream over HTTP) and spools each message the daemon pushes, then wakes the poll. It marks the
spool (``listening``, with its pid) so that a poll, the watcher's or cron's, only takes the spool and leaves the
receiving to it (the daemon refuses a ``receive`` while a subscription runs).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from memex.plugin import Link, SourceError, Spool, backoff, ensure_private_dir

LISTENING = "listening"  # in the spool's folder: the pid of the watcher whose listener calls receive
ALREADY = "already being received"  # signal-cli's UserErrorException text when the daemon receives on its own
MAX_MESSAGES = 500  # per receive call
SSE_IDLE = 60.0  # seconds an SSE stream may stay silent (keep-alives every 15) before it is taken for dead


@dataclass(frozen=True)
class Address:
    """Where the daemon listens: ``kind`` unix (``path``), tcp or http (``host``, ``port``)."""

    kind: str
    path: str = ""
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        return f"unix:{self.path}" if self.kind == "unix" else f"{self.kind}://{self.host}:{self.port}"


def parse_address(text: str) -> Address | None:
    """``unix:PATH``, ``tcp:HOST:PORT`` or ``http://HOST:PORT`` as an :class:`Address`; None when it is none of them."""
    if text.startswith("unix:") and len(text) > 5:
        return Address("unix", path=os.path.expanduser(text[5:]))
    if text.startswith("tcp:"):
        host, _, port = text[4:].rpartition(":")
        return Address("tcp", host=host.strip("[]"), port=int(port)) if host and port.isdigit() and 0 < int(port) < 65536 else None
    if text.startswith("http://"):
        parts = urlsplit(text)
        if parts.hostname and (parts.path or "/") == "/":
            return Address("http", host=parts.hostname, port=parts.port or 80)
    return None


class DaemonRefused(SourceError):
    """The daemon answered a call with a JSON-RPC error."""

    def __init__(self, message: str, code: Any) -> None:
        super().__init__(message)
        self.code = code


class Client:
    """JSON-RPC calls to one daemon; each call on a fresh connection (a socket, or one HTTP request)."""

    def __init__(self, source: str, address: Address, account: str) -> None:
        self.source, self.address, self.account = source, address, account
        self.pushed: list[dict[str, Any]] = []  # receive notifications the daemon sent beside the answers (its own mode)
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._id = 0

    def call(self, method: str, params: dict[str, Any] | None, timeout: float) -> Any:
        """The result of ``method``; SourceError when the daemon cannot be reached, DaemonRefused on its error."""
        with self._lock:
            self._id += 1
            request = {"jsonrpc": "2.0", "id": self._id, "method": method, **({"params": params} if params else {})}
        try:
            answer = self._http(request, timeout) if self.address.kind == "http" else self._stream(request, timeout)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            why = "timed out" if isinstance(exc, TimeoutError) else (getattr(exc, "strerror", None) or type(exc).__name__)
            raise SourceError(
                f"source {self.source!r}: the signal-cli daemon at {self.address} cannot be reached for {method} ({why}); is "
                f"`signal-cli -a {self.account} daemon --receive-mode=manual` running there?"
            ) from None
        error = answer.get("error")
        if isinstance(error, dict):
            message = str(error.get("message", "error"))[:300]
            raise DaemonRefused(f"source {self.source!r}: the signal-cli daemon at {self.address} refused {method}: {message}",
                                error.get("code"))  # fmt: skip
        return answer.get("result")

    def _stream(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One request over the socket or TCP connection; notifications read before the answer are kept."""
        a = self.address
        sock = self._socket()
        self._sock = sock
        try:
            sock.settimeout(timeout)
            sock.connect(a.path if a.kind == "unix" else (a.host, a.port))
            sock.sendall(json.dumps(request).encode() + b"\n")
            with sock.makefile("rb") as lines:
                for line in lines:
                    message = json.loads(line)
                    if message.get("id") == request["id"]:
                        return dict(message)
                    self._keep(message)
            raise ConnectionResetError("closed before answering")
        finally:
            self._sock = None
            sock.close()

    def _socket(self) -> socket.socket:
        """A new socket of the daemon's family (UNIX, IPv4, IPv6)."""
        a = self.address
        if a.kind == "unix":
            return socket.socket(socket.AF_UNIX)
        return socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET)

    def _http(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        conn = http.client.HTTPConnection(self.address.host, self.address.port, timeout=timeout)
        try:
            conn.request("POST", "/api/v1/rpc", body=json.dumps(request), headers={"Content-Type": "application/json"})
            self._sock = conn.sock
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise http.client.HTTPException(f"HTTP {resp.status}")
            return dict(json.loads(body))
        finally:
            self._sock = None
            conn.close()

    def follow(self, each: Callable[[dict[str, Any]], None], *, subscribe: bool) -> None:
        """Stay connected and hand each message the daemon pushes to ``each``: over the socket its ``receive``
        notifications (after ``subscribeReceive`` with ``subscribe``: a daemon in manual mode receives only for a
        subscriber), over HTTP the ``/api/v1/events`` stream (Server-Sent Events; it subscribes by itself). Returns
        when the connection ends, raises SourceError when it cannot be opened or goes silent: over HTTP
        :data:`SSE_IDLE` seconds without a byte (the daemon's keep-alives come every 15)."""
        a = self.address
        try:
            if a.kind == "http":
                conn = http.client.HTTPConnection(a.host, a.port, timeout=SSE_IDLE)
                conn.request("GET", "/api/v1/events", headers={"Accept": "text/event-stream"})
                self._sock = conn.sock
                resp = conn.getresponse()
                if resp.status != 200:
                    raise http.client.HTTPException(f"HTTP {resp.status}")
                for raw in iter(resp.readline, b""):
                    if raw.startswith(b"data:"):
                        self._keep({"method": "receive", "params": json.loads(raw[5:])})
                        self._hand(each)
                return
            sock = self._socket()
            self._sock = sock
            with sock:
                sock.settimeout(SSE_IDLE)
                sock.connect(a.path if a.kind == "unix" else (a.host, a.port))
                sock.settimeout(None)  # no keep-alives on the socket: a quiet subscription is not a dead one
                if subscribe:
                    sock.sendall(json.dumps({"jsonrpc": "2.0", "id": "memex-subscribe", "method": "subscribeReceive"}).encode() + b"\n")
                with sock.makefile("rb") as lines:
                    for line in lines:
                        self._keep(json.loads(line))
                        self._hand(each)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            why = "timed out" if isinstance(exc, TimeoutError) else (getattr(exc, "strerror", None) or type(exc).__name__)
            raise SourceError(f"source {self.source!r}: the signal-cli daemon at {self.address}: {why}") from None
        finally:
            self._sock = None

    def _hand(self, each: Callable[[dict[str, Any]], None]) -> None:
        pushed, self.pushed = self.pushed, []
        for message in pushed:
            each(message)

    def _keep(self, message: dict[str, Any]) -> None:
        """A ``receive`` notification (the daemon's own mode; or a subscription's) is a message: keep it for the spool."""
        if message.get("method") == "receive" and isinstance(message.get("params"), dict):
            params = message["params"]
            self.pushed.append(params.get("result", params) if "subscription" in params else params)

    def cut(self) -> None:
        """Shut the connection of a call in progress (from another thread): the call ends at once."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def spool_messages(spool: Spool, messages: list[Any]) -> int:
    """Write ``messages`` (``{"envelope": ..., "account": ...}``) to the spool as one entry, synced; returns how many."""
    if messages:
        spool.add(b"".join(json.dumps(m, ensure_ascii=False).encode() + b"\n" for m in messages))
    return len(messages)


def listener_pid(spool: Spool) -> int | None:
    """The pid of a live watcher whose listener receives for this spool, or None."""
    try:
        pid = int((spool.root / LISTENING).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


class DaemonListener:
    """``memex watch``'s receiver for a signal source with a daemon (:class:`memex.push.Listener`)."""

    def __init__(self, source: str, address: Address, account: str, spool: Spool, timeout: float) -> None:
        self.source, self.spool, self.timeout = source, spool, timeout
        self.client = Client(source, address, account)
        self._stopping = False
        self.mark()  # before the watcher's first poll, which must leave the receiving to this listener

    def mark(self) -> None:
        """Mark the spool as received for by this process (:func:`listener_pid`)."""
        ensure_private_dir(self.spool.root)
        (self.spool.root / LISTENING).write_text(str(os.getpid()))

    def listen(self, link: Link) -> None:
        """Call ``receive`` back to back until the stop; spool what comes and wake the poll."""
        marker = self.spool.root / LISTENING
        self.mark()
        attempt, up, warned = 0, False, False
        key = str(self.client.address)
        try:
            while not link.stop.is_set():
                try:
                    on_its_own = False
                    try:  # what waits (manual mode), and which mode the daemon is in
                        got = self.client.call("receive", {"timeout": 0, "maxMessages": MAX_MESSAGES}, self.timeout)
                    except DaemonRefused as exc:
                        if ALREADY not in str(exc):
                            raise
                        on_its_own, got = True, []
                    pushed, self.client.pushed = self.client.pushed, []
                    if not up:
                        up, attempt = True, 0
                        link.up(key, how="signal-cli daemon" + (" (its own receive mode: pushed messages only)" if on_its_own else ""))
                        link.wake("connected")
                    if spool_messages(self.spool, pushed + (list(got) if isinstance(got, list) else [])):
                        link.wake("new")
                    if on_its_own and not warned:
                        warned = True
                        link.log.warning("source.warning", reason=mode_warning(self.source, key))
                    self._follow(link, subscribe=not on_its_own)  # until the connection ends
                    if link.stop.is_set() or self._stopping:
                        break
                    raise SourceError("the daemon closed the connection")
                except SourceError as exc:  # unreachable, refused, or the connection ended: again, with backoff
                    if link.stop.is_set() or self._stopping:
                        break
                    up = False
                    wait = backoff(attempt)
                    attempt += 1
                    link.down(key, str(exc), wait)
                    link.sleep(wait)
        finally:
            link.closed(key)
            with contextlib.suppress(OSError):
                if marker.read_text().strip() == str(os.getpid()):
                    marker.unlink()

    def _follow(self, link: Link, *, subscribe: bool) -> None:
        """Spool each message the daemon pushes (synced), then wake the poll."""

        def each(message: dict[str, Any]) -> None:
            spool_messages(self.spool, [message])
            link.wake("new")

        self.client.follow(each, subscribe=subscribe)

    def close(self) -> None:
        """End a receive in progress."""
        self._stopping = True
        self.client.cut()


def mode_warning(source: str, where: str) -> str:
    """The one warning for a daemon that receives on its own."""
    return (f"source {source!r}: the signal-cli daemon at {where} receives messages on its own (it was not started with "
            "--receive-mode=manual), so it hands a message only to the clients connected when it comes and memex, between "
            "two polls or restarting, misses the rest; restart it with `signal-cli -a ACCOUNT daemon ... --receive-mode=manual`")  # fmt: skip
