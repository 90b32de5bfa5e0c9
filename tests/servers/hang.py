"""A TCP server on loopback that accepts every connection, reads what it is sent, and never answers.

The fault a hung S3 endpoint or IMAP server shows a client: the connection
succeeds, the request goes out, and then nothing, until the client gives up.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType


class HungServer:
    """Listens on a free loopback port; ``port`` to connect to, ``wait_for_request`` to know a client is stuck."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.received = 0  # bytes read from all clients
        self.accepted = 0
        self._changed = threading.Condition()
        self._conns: list[socket.socket] = []
        self._closed = False

    def __enter__(self) -> HungServer:
        threading.Thread(target=self._accept, name="hung-accept", daemon=True).start()
        return self

    def __exit__(self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None) -> None:
        self._closed = True
        self.listener.close()
        for conn in self._conns:
            try:
                conn.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._changed:
                self._conns.append(conn)
                self.accepted += 1
                self._changed.notify_all()
            threading.Thread(target=self._drain, args=(conn,), name="hung-drain", daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return  # the client closed; keep our side open, say nothing
            with self._changed:
                self.received += len(data)
                self._changed.notify_all()

    def wait_for(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        """Wait (at most ``timeout`` s) until ``ready()`` is true, e.g. ``lambda: server.received > 0``."""
        end = time.monotonic() + timeout
        with self._changed:
            while not ready():
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
                self._changed.wait(min(left, 0.1))  # ``ready`` may also watch a process, which does not notify


class FreezingProxy:
    """A TCP proxy to ``upstream`` that goes silent on a connection once the client has sent ``freeze_on`` ``after`` times.

    From then on that connection forwards nothing either way and answers nothing (a server hung in the
    middle of a session); other connections, and new ones once ``freeze_on`` is None, pass through.
    """

    def __init__(self, upstream_port: int, freeze_on: bytes | None, after: int = 1) -> None:
        self.upstream_port = upstream_port
        self.freeze_on = freeze_on
        self.after = after
        self.seen = 0
        self.frozen = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> FreezingProxy:
        threading.Thread(target=self._accept, name="freeze-accept", daemon=True).start()
        return self

    def __exit__(self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None) -> None:
        self.listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._socks += [client, server]
            hold = threading.Event()
            threading.Thread(target=self._pump, args=(client, server, hold, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, hold, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, hold: threading.Event, from_client: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                return
            if from_client and self.freeze_on is not None and self.freeze_on in data:
                with self._lock:
                    self.seen += 1
                    if self.seen >= self.after:
                        hold.set()
                        self.frozen.set()
            if hold.is_set():
                continue  # swallow: the "server" says nothing more on this connection
            try:
                dst.sendall(data)
            except OSError:
                return
