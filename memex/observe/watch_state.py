"""How ``memex watch`` serves a source now, read from its log: the mode, its push connections, the last delay.

The watcher writes ``watch.start`` (its ``mode``: ``push``, ``events`` or ``interval``) when it starts, a
``watch.push`` line each time a push connection comes up or goes down (:mod:`memex.push`), ``poll`` lines with
``trigger = "push"`` and ``waited_s`` (from the server's word to the poll's start), and ``watch.stop`` when it
ends. ``memex status`` and the dashboard show from them: the mode (``push``; ``interval`` while every push
connection is down, the interval poll then being what brings mail in; ``files``; ``interval``), the age of the
newest push connection, and the last arrival-to-stored delay (``waited_s`` plus the poll's duration).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memex.observe.health import age, parse_ts

KEEP = 200  # lines kept after the watcher's start line (the newest; enough for each connection's latest state)

MODES = {"push": "push", "events": "files", "interval": "interval"}


@dataclass(frozen=True)
class Watching:
    """One source as its watcher serves it."""

    mode: str  # push, interval (with push down), files, interval
    push_down: str | None = None  # why, when the source has push but no connection is up
    connected_s: float | None = None  # age of the newest push connection that is up
    delay_s: float | None = None  # the last pushed mail's arrival-to-stored delay

    def cell(self) -> str:
        """The short form for a table: ``push 14m``, ``interval (push down)``, ``files``."""
        if self.push_down is not None:
            return "interval (push down)"
        if self.mode == "push" and self.connected_s is not None:
            return f"push {age(self.connected_s)}"
        return self.mode

    def detail(self) -> str:
        """A sentence for the status line: the push connection's age and the last delay, or why push is down."""
        if self.push_down is not None:
            return f"push down ({self.push_down}); polled every interval"
        parts = []
        if self.connected_s is not None:
            parts.append(f"push connected {age(self.connected_s)}")
        if self.delay_s is not None:
            parts.append(f"last mail stored {self.delay_s:.1f}s after it arrived")
        return ", ".join(parts)


def watching(events: Sequence[dict[str, Any]], now: float) -> Watching | None:
    """How the watcher serves the source, from its log ``events`` (oldest first); None when no watcher runs it."""
    start = next((i for i in range(len(events) - 1, -1, -1) if events[i].get("event") in ("watch.start", "watch.stop")), None)
    if start is None or events[start].get("event") == "watch.stop":
        return None
    mode = MODES.get(str(events[start].get("mode")), "interval")
    if mode != "push":
        return Watching(mode)
    latest: dict[str, dict[str, Any]] = {}
    delay: float | None = None
    for event in events[start + 1 :]:
        if event.get("event") == "watch.push" and event.get("connection") != "plan":
            latest[str(event.get("connection"))] = event
        elif event.get("event") == "poll" and event.get("trigger") == "push" and event.get("new"):
            waited, took = event.get("waited_s"), event.get("duration_ms")
            if isinstance(waited, int | float) and isinstance(took, int | float):
                delay = float(waited) + float(took) / 1000
    plan = next((e for e in events[start + 1 :] if e.get("event") == "watch.push" and e.get("connection") == "plan"), None)
    ups = [parse_ts(e.get("ts")) for e in latest.values() if e.get("state") == "up"]
    ups_known = [t for t in ups if t is not None]
    if ups:
        return Watching("push", connected_s=max(0.0, now - max(ups_known)) if ups_known else None, delay_s=delay)
    downs = [e for e in latest.values() if e.get("state") == "down"]
    if downs or plan is not None:
        why = str((downs[-1] if downs else plan or {}).get("reason", "not connected"))
        return Watching("push", push_down=why, delay_s=delay)
    return Watching("push", delay_s=delay)  # connecting


@dataclass
class WatchLog:
    """The lines since the watcher's last start or stop, kept as a log is followed (the dashboard)."""

    lines: list[dict[str, Any]] = field(default_factory=list)

    def add(self, event: dict[str, Any]) -> None:
        """Take one newly logged event (only the watcher's lines and its push polls are kept)."""
        kind = event.get("event")
        if kind in ("watch.start", "watch.stop"):
            self.lines = [event]
        elif self.lines and (kind == "watch.push" or (kind == "poll" and event.get("trigger") == "push")):
            self.lines.append(event)
            if len(self.lines) > KEEP + 1:
                del self.lines[1:-KEEP]

    def state(self, now: float) -> Watching | None:
        """How the watcher serves the source at ``now`` (None: no watcher)."""
        return watching(self.lines, now)


def from_log(path: Path, backups: int) -> WatchLog:
    """The watcher's lines in a source's log, back to its last start or stop (read from the end, 4 MiB at most)."""
    from memex.observe.follow import RecentReader

    newest_first: list[dict[str, Any]] = []
    for event in RecentReader(path, backups=backups, max_bytes=4 * 1024 * 1024).events():
        kind = event.get("event")
        if kind in ("watch.push", "watch.start", "watch.stop") or (kind == "poll" and event.get("trigger") == "push"):
            newest_first.append(event)
        if kind in ("watch.start", "watch.stop"):
            break
    log = WatchLog()
    for event in reversed(newest_first):
        log.add(event)
    return log
