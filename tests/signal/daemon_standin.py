"""A stand-in for ``signal-cli daemon`` at its socket boundary: signal-cli's JSON-RPC over a UNIX socket and HTTP.

Run as a process (``python -m tests.signal.daemon_standin FOLDER --socket PATH --http PORT [--mode MODE]``), so that a
test can kill it and start it again. Its messages are the lines queued in ``FOLDER/queue.jsonl``
(:func:`tests.signal.signal_standin.queue`) after the offset in ``FOLDER/acked``, as for the ``receive`` stand-in;
a message it hands over is acknowledged (the offset moves): Signal's server never sends it again. As
signal-cli-jsonrpc(5) and its source (``ReceiveCommand``, ``HttpServerHandler``) describe:

- ``--mode manual`` (``--receive-mode=manual``): nothing is received until a client calls ``receive``
  (params ``timeout``, seconds, default 3, and ``maxMessages``); the call waits for a first message up to
  ``timeout``, then keeps taking messages until ``timeout`` passes with none or ``maxMessages`` are taken, and its
  result is the list of them (``{"envelope": ..., "account": ...}``). A second ``receive`` while one runs is refused
  with error -1 "Receive command cannot be used if messages are already being received.".
- ``--mode on-start`` (the daemon's default): it receives on its own: each queued line is acknowledged at once and
  sent as a ``receive`` notification to the socket clients connected then and to the ``/api/v1/events`` (SSE)
  listeners; a client that is not connected misses it. ``receive`` is refused as above.
- ``subscribeReceive`` (manual mode): the answer is the subscription id (0), and from then on the daemon receives
  for that connection, each message a notification ``{"method": "receive", "params": {"subscription": 0,
  "result": ...}}``, until the client disconnects; an ``/api/v1/events`` stream subscribes the same way. While a
  subscription runs, ``receive`` is refused as above.
- ``listGroups``: the list in ``FOLDER/groups.json``. HTTP: ``POST /api/v1/rpc``, ``GET /api/v1/events``,
  ``GET /api/v1/check``. Unknown methods: error -32601.

It writes ``FOLDER/daemon.ready`` once it listens, and logs each call's method to ``FOLDER/calls.log``.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socket
import socketserver
import threading
import time
from pathlib import Path
from typing import Any

ALREADY = {"code": -1, "message": "Receive command cannot be used if messages are already being received."}


class Daemon:
    """The daemon's state: the queue, who listens, whether a receive runs."""

    def __init__(self, folder: Path, mode: str) -> None:
        self.folder, self.mode = folder, mode
        self.lock = threading.Lock()
        self.receiving = False
        self.listeners: list[Any] = []  # callables taking one message (socket clients, SSE streams)
        self.subscribed: list[Any] = []  # manual mode: the listeners that subscribed

    def _take(self, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` queued messages, acknowledged (the offset moved) as they are taken."""
        acked = self.folder / "acked"
        offset = int(acked.read_text() or 0) if acked.exists() else 0
        with open(self.folder / "queue.jsonl", "rb") as q:
            q.seek(offset)
            lines = [line for line in q.readlines() if line.endswith(b"\n")][:limit]
        if lines:
            offset += sum(len(line) for line in lines)
            (self.folder / "acked.tmp").write_text(str(offset))
            os.replace(self.folder / "acked.tmp", acked)
        return [json.loads(line) for line in lines]

    def receive(self, params: dict[str, Any]) -> dict[str, Any]:
        """The ``receive`` method (manual mode only)."""
        with self.lock:
            if self.mode != "manual" or self.receiving or self.subscribed:
                return {"error": ALREADY}
            self.receiving = True
        try:
            timeout = float(params.get("timeout", 3.0))
            limit = int(params.get("maxMessages", -1))
            limit = limit if limit > 0 else 1 << 30
            got: list[dict[str, Any]] = []
            quiet_until = time.monotonic() + timeout
            while len(got) < limit and time.monotonic() < quiet_until:
                more = self._take(limit - len(got))
                if more:
                    got += more
                    quiet_until = time.monotonic() + timeout
                else:
                    time.sleep(0.02)  # the stand-in's own receive loop, as the real one waits on Signal's websocket
            return {"result": got}
        finally:
            with self.lock:
                self.receiving = False

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one JSON-RPC request."""
        method = request.get("method")
        with open(self.folder / "calls.log", "a") as log:
            log.write(f"{method}\n")
        if method == "receive":
            answer = self.receive(request.get("params") or {})
        elif method == "listGroups":
            path = self.folder / "groups.json"
            answer = {"result": json.loads(path.read_text()) if path.exists() else []}
        else:
            answer = {"error": {"code": -32601, "message": "Method not implemented"}}
        return {"jsonrpc": "2.0", "id": request.get("id"), **answer}

    def pump(self) -> None:
        """Receive as the mode says: in the default mode always, each message handed to whoever listens now; in manual
        mode only while a client subscribed, to the subscribers."""
        while True:
            with self.lock:
                listeners = list(self.listeners if self.mode != "manual" else self.subscribed)
            for message in self._take(1000) if listeners else []:
                for send in listeners:
                    try:
                        send(message)
                    except OSError:
                        self.forget(send)
            time.sleep(0.02)

    def forget(self, send: Any) -> None:
        """A listener is gone (its subscription with it)."""
        with self.lock:
            for group in (self.listeners, self.subscribed):
                if send in group:
                    group.remove(send)


def serve_socket(daemon: Daemon, path: str) -> None:
    """JSON-RPC, one JSON object a line, over a UNIX socket."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            lock = threading.Lock()

            def send(obj: dict[str, Any]) -> None:
                with lock:
                    self.wfile.write(json.dumps(obj).encode() + b"\n")
                    self.wfile.flush()

            def notify(message: dict[str, Any]) -> None:
                params = {"subscription": 0, "result": message} if notify in daemon.subscribed else message
                send({"jsonrpc": "2.0", "method": "receive", "params": params})

            with daemon.lock:
                daemon.listeners.append(notify)
            try:
                for line in self.rfile:
                    request = json.loads(line)
                    if request.get("method") == "subscribeReceive" and daemon.mode == "manual":
                        with daemon.lock:
                            daemon.subscribed.append(notify)
                        send({"jsonrpc": "2.0", "id": request.get("id"), "result": 0})
                        continue
                    send(daemon.call(request))
            except (OSError, ValueError):
                pass
            finally:
                daemon.forget(notify)

    if os.path.exists(path):
        os.unlink(path)
    server = socketserver.ThreadingUnixStreamServer(path, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def serve_http(daemon: Daemon, port: int) -> None:
    """POST /api/v1/rpc, GET /api/v1/events (SSE), GET /api/v1/check."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: Any) -> None:
            pass

        def do_POST(self) -> None:
            if self.path != "/api/v1/rpc":
                self.send_error(404)
                return
            body = json.dumps(daemon.call(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/api/v1/check":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path != "/api/v1/events":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
            gone = threading.Event()
            lock = threading.Lock()

            def sse(message: dict[str, Any]) -> None:
                with lock:
                    self.wfile.write(b"event:receive\ndata:" + json.dumps(message).encode() + b"\n\n")
                    self.wfile.flush()

            with daemon.lock:
                daemon.listeners.append(sse)
                if daemon.mode == "manual":
                    daemon.subscribed.append(sse)
            try:
                while not gone.wait(15):
                    with lock:
                        self.wfile.write(b":\n\n")  # keep-alive, as ServerSentEventSender.sendKeepAlive
                        self.wfile.flush()
            except OSError:
                pass
            finally:
                daemon.forget(sse)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    """Serve until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--socket")
    parser.add_argument("--http", type=int)
    parser.add_argument("--mode", default="manual", choices=("manual", "on-start"))
    args = parser.parse_args()
    (args.folder / "queue.jsonl").touch()
    daemon = Daemon(args.folder, args.mode)
    if args.socket:
        serve_socket(daemon, args.socket)
    if args.http:
        serve_http(daemon, args.http)
    (args.folder / "daemon.ready").write_text(str(os.getpid()))
    daemon.pump()


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    main()
