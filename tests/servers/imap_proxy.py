"""A real TCP proxy in front of Dovecot that can rewrite the client's IMAP commands (to make the server misbehave).

The poller talks IMAP to the proxy; the proxy forwards every byte to Dovecot
and back, except that a command line matched by ``rewrite`` is replaced
before Dovecot sees it. Narrowing a ``UID FETCH`` set this way makes Dovecot
answer ``OK`` with no data for a UID that exists: what Gmail is reported to do.
With ``respond`` set (before the client connects), each line Dovecot sends is
passed through it too, so a tagged ``OK`` can become the ``NO Some messages
could not be FETCHed (Failure)`` Gmail sends after the mails it could serve.

For the push tests it also misbehaves like a network: :meth:`ImapProxy.blackhole` makes the connections open now
stop forwarding anything, either way, without closing (a NAT that forgot them, a dead link); later connections
work. ``idle_limit`` (seconds) makes it drop a client that sent nothing for that long, with the ``BYE`` a server
sends an IDLE client after its 30 minutes, on a clock the test picks.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

Rewrite = Callable[[bytes], bytes]


class ImapProxy:
    """Forwards loopback connections to ``upstream_port``; ``rewrite`` may change each client line."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.rewrite: Rewrite = lambda line: line
        self.respond: Rewrite | None = None  # rewrites Dovecot's lines (read line by line) when set
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self.idle_limit: float | None = None  # drop (with a BYE) a client silent this many seconds
        self.dropped = 0  # connections dropped for idleness
        self.accepted = 0  # connections accepted
        self.lines = 0  # client lines forwarded
        self._holed: set[int] = set()  # fileno of client sockets whose connection is black-holed
        self._heard: dict[socket.socket, float] = {}  # client -> monotonic time it last sent something
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)
        reaper = threading.Thread(target=self._reap, daemon=True)
        reaper.start()
        self._threads.append(reaper)

    def blackhole(self) -> int:
        """Make every connection open now stop forwarding (either way) without closing; returns how many."""
        with self._lock:
            clients = [c for c in self._heard]
            self._holed.update(id(c) for c in clients)
        return len(clients)

    def _reap(self) -> None:
        while not self._stop.wait(0.1):
            limit = self.idle_limit
            if limit is None:
                continue
            now = time.monotonic()
            with self._lock:
                idle = [c for c, heard in self._heard.items() if now - heard > limit and id(c) not in self._holed]
                for client in idle:
                    del self._heard[client]
            for client in idle:
                self.dropped += 1
                with contextlib.suppress(OSError):
                    client.sendall(b"* BYE Disconnected for inactivity.\r\n")
                    client.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            upstream.settimeout(None)
            self._socks += [client, upstream]
            with self._lock:
                self.accepted += 1
                self._heard[client] = time.monotonic()
            for target, args in ((self._down, (upstream, client)), (self._up, (client, upstream))):
                thread = threading.Thread(target=target, args=args, daemon=True)
                thread.start()
                self._threads.append(thread)

    def _down(self, upstream: socket.socket, client: socket.socket) -> None:
        respond = self.respond
        if respond is not None:
            with contextlib.suppress(OSError), upstream.makefile("rb") as lines:
                for line in lines:
                    client.sendall(respond(line))
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if id(client) not in self._holed:
                    client.sendall(data)
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)

    def _up(self, client: socket.socket, upstream: socket.socket) -> None:
        with contextlib.suppress(OSError), client.makefile("rb") as lines:
            for line in lines:
                if id(client) in self._holed:
                    continue
                with self._lock:
                    self.lines += 1
                    if client in self._heard:
                        self._heard[client] = time.monotonic()
                upstream.sendall(self.rewrite(line))
        with self._lock:
            self._heard.pop(client, None)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop accepting, close every connection, and join the threads (each within a deadline)."""
        self._stop.set()
        self.listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)


@contextlib.contextmanager
def imap_proxy(upstream_port: int) -> Iterator[ImapProxy]:
    """An :class:`ImapProxy` for the duration of the block."""
    proxy = ImapProxy(upstream_port)
    try:
        yield proxy
    finally:
        proxy.close()
