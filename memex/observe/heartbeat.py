"""Heartbeat pings in the healthchecks.io style, per source (``heartbeat_url`` in its config section).

* ``<url>/start`` when a poll begins (sent in the background, so it never
  delays the poll; the end ping waits for it so they arrive in order);
* ``<url>`` when the poll succeeded (``ok`` or ``idle``);
* ``<url>/fail`` when it failed (``error``).

Each ping is a POST whose body is the poll's terminal line (counts, cursor,
and for a failure the error, which never holds message text), with
``?rid=<uuid>`` so the service pairs a start with its end and measures the
run. A ping has 5 seconds in all (a slow server is abandoned, not waited
for). A ping that fails is logged as ``heartbeat.failed`` (a warning, without
the URL: it is a secret of sorts, anyone holding it can ping) and never fails
the poll.

A skipped poll (the previous one still running) sends nothing: it is not a
run of its own, and the running poll will report. A poll that hangs therefore
sends no success, and the service's grace time raises the alarm.
"""

from __future__ import annotations

import threading
from typing import Any

from memex.config import Config

TIMEOUT = 5.0


def ping_url(base: str, kind: str, rid: str) -> str:
    """The URL of one ping: ``kind`` is ``start``, ``success`` or ``fail``."""
    path, sep, query = base.partition("?")
    path = path.rstrip("/")
    if kind != "success":
        path += "/" + kind
    return f"{path}?{query + '&' if sep and query else ''}rid={rid}"


def send(url: str, body: bytes, timeout: float = TIMEOUT) -> str | None:
    """POST one ping with a deadline of ``timeout`` seconds in all; return None, or why it failed."""
    outcome: list[str | None] = []

    def run() -> None:
        from memex import http_client

        try:
            response = http_client.post(url, data=body, headers={"User-Agent": "memex-heartbeat"}, timeout=timeout)
        except http_client.request_errors() as exc:
            outcome.append(http_client.unreachable(exc))
        except ValueError as exc:  # not a URL requests can send (checked at config load; a last line of defence)
            outcome.append(type(exc).__name__)
        else:
            outcome.append(None if response.status_code < 400 else f"HTTP {response.status_code}")

    thread = threading.Thread(target=run, name="heartbeat", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive() or not outcome:
        return f"no answer within {timeout:g}s"
    return outcome[0]


class Heartbeat:
    """The pings of one poll."""

    def __init__(self, url: str, log: Any, timeout: float = TIMEOUT) -> None:
        self.url = url
        self.log = log
        self.timeout = timeout
        import uuid

        self.rid = str(uuid.uuid4())
        self._start: threading.Thread | None = None

    def _ping(self, kind: str, body: bytes) -> None:
        error = send(ping_url(self.url, kind, self.rid), body, self.timeout)
        if error is not None:
            self.log.warning("heartbeat.failed", ping=kind, error=error)

    def start(self) -> None:
        """Send the ``/start`` ping in the background."""
        self._start = threading.Thread(target=self._ping, args=("start", b""), name="heartbeat-start", daemon=True)
        self._start.start()

    def finish(self, fields: dict[str, Any], source: str) -> None:
        """Send the success or ``/fail`` ping for a finished poll's summary fields."""
        from memex.observe.logs import human_line

        if self._start is not None:
            self._start.join(self.timeout + 1)
        status = fields.get("status")
        if status == "skipped":
            return
        kind = "fail" if status == "error" else "success"
        self._ping(kind, human_line({"event": "poll", "source": source, **fields}).encode())


def start(cfg: Config, source: str, log: Any) -> Heartbeat | None:
    """Begin a poll's heartbeat (``/start`` sent) if the source has a ``heartbeat_url``; else None."""
    conf = cfg.sources.get(source)
    if conf is None or not conf.heartbeat_url:
        return None
    beat = Heartbeat(conf.heartbeat_url, log)
    beat.start()
    return beat
