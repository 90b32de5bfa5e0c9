"""``memex tail``: the poll lines of one or more sources, like ``tail`` / ``tail -F``.

Without ``-f`` it prints the last N poll lines (and warnings and errors, such
as ``cursor.set`` or ``source.reset``) of the named sources, merged by time,
and exits. With ``-f`` it then follows the logs: a watchdog observer on the
logs folder wakes it when a file changes (plus a cheap re-check every few
seconds in case an event was missed), and :class:`memex.observe.follow.Follower`
reads what was appended, across log rotation, without losing or repeating a
line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memex.config import Config
from memex.observe.follow import Follower, RecentReader, parse_line
from memex.observe.logs import human_line, log_path, short_ts
from memex.state.files import ensure_private_dir

RECHECK_S = 2.0
COLOURS = {"ok": "green", "idle": "bright_black", "skipped": "yellow", "error": "red"}


def shown(event: dict[str, Any]) -> bool:
    """Whether ``memex tail`` shows an event: every poll line, and every warning or error."""
    return event.get("event") == "poll" or event.get("level") in ("warning", "error")


def format_line(event: dict[str, Any]) -> str:
    """``2026-11-22 07:08:03Z imessage: poll ok: 4 new (cursor 89632 -> 89636)``."""
    return f"{short_ts(event.get('ts'))} {human_line(event)}"


def colour(event: dict[str, Any]) -> str | None:
    """The colour of an event's line: by poll status, yellow for warnings, red for errors."""
    if event.get("event") == "poll":
        return COLOURS.get(str(event.get("status")))
    return "red" if event.get("level") == "error" else "yellow"


@dataclass
class Line:
    """One shown log line: the event, and its raw JSON text."""

    event: dict[str, Any]
    raw: bytes


def last_lines(cfg: Config, sources: list[str], count: int, followers: dict[str, Follower] | None = None) -> list[Line]:
    """The newest ``count`` shown lines of ``sources``, oldest first (read from the logs' ends).

    With ``followers``, each source's live file is read only up to where its
    follower starts, so following afterwards neither misses nor repeats a line.
    """
    found: list[Line] = []
    for name in sources:
        path = log_path(cfg.state_dir, name)
        reader = followers[name].history() if followers else RecentReader(path, cfg.log_backups)
        taken = 0
        for raw in reader.lines():
            if taken >= count:
                break
            event = parse_line(raw)
            if event is not None and shown(event):
                found.append(Line(event, raw))
                taken += 1
    found.sort(key=lambda line: str(line.event.get("ts", "")))
    return found[-count:] if count else []


def follow(cfg: Config, sources: list[str], emit: Callable[[Line], None], stop: threading.Event, *, initial: int = 10) -> None:
    """Emit the last ``initial`` lines, then every new shown line until ``stop`` is set."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    logs = ensure_private_dir(cfg.state_dir / "logs")
    wake = threading.Event()

    class Wake(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            wake.set()

    observer = Observer()
    observer.schedule(Wake(), str(logs), recursive=False)
    observer.start()
    followers = {n: Follower(log_path(cfg.state_dir, n), cfg.log_backups, from_end=True) for n in sources}
    try:
        for line in last_lines(cfg, sources, initial, followers):
            emit(line)
        checked = time.monotonic()
        while not stop.is_set():
            if not wake.wait(0.2) and time.monotonic() - checked < RECHECK_S:
                continue
            wake.clear()
            checked = time.monotonic()
            for name in sources:
                for raw in followers[name].read():
                    event = parse_line(raw)
                    if event is not None and shown(event):
                        emit(Line(event, raw))
    finally:
        observer.stop()
        observer.join(5)
        for f in followers.values():
            f.close()
