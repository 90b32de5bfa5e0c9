"""The one-shot loopback listener an installed-app sign-in redirects the browser to (RFC 8252 §7.3).

It listens on ``127.0.0.1`` and a free port, answers every request with a short page, and hands back the first
request whose address carries ``code`` or ``error`` (a browser's other requests, such as ``/favicon.ico``, are
answered and ignored). The address is passed on whole; checking it is the caller's.
"""

from __future__ import annotations

import queue
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

PAGE = b"<!doctype html><title>memex</title><p>Done: you may close this tab and go back to the terminal.</p>"


def free_port() -> int:
    """A loopback port nothing listens on now (for a redirect address nothing will answer)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Listener:
    """An HTTP server on 127.0.0.1 that waits, in its own thread, for the browser to come back."""

    def __init__(self) -> None:
        answers: queue.Queue[str] = queue.Queue()
        self._answers = answers

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)
                if "code=" in self.path or "error=" in self.path:
                    answers.put(self.path)

            def log_message(self, format: str, *args: Any) -> None:  # the address holds the code: never printed
                return

        self._server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> str | None:
        """The redirected address, or None when the browser did not come back within ``timeout`` seconds."""
        try:
            return f"http://127.0.0.1:{self.port}{self._answers.get(timeout=timeout)}"
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop listening."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
