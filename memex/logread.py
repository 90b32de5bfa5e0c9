"""Reading JSON-lines logs from the end, so a state dir with months of logs opens instantly."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 64 * 1024


def lines_backward(path: Path, max_bytes: int = 4 * 1024 * 1024) -> Iterator[bytes]:
    """Yield a file's complete lines newest first, reading at most ``max_bytes`` from its end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        end = os.fstat(fd).st_size
        pos, read, tail = end, 0, b""
        while pos > 0 and read < max_bytes:
            size = min(BLOCK, pos)
            pos -= size
            read += size
            chunk = os.pread(fd, size, pos) + tail
            parts = chunk.split(b"\n")
            tail = parts[0]
            for line in reversed(parts[1:]):
                if line.strip():
                    yield line
        if pos == 0 and tail.strip():
            yield tail
    finally:
        os.close(fd)


def events_backward(path: Path, max_bytes: int = 4 * 1024 * 1024) -> Iterator[dict[str, Any]]:
    """Yield a JSON-lines log's events newest first; unparseable lines (a torn write) are skipped."""
    for line in lines_backward(path, max_bytes):
        try:
            event = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(event, dict):
            yield event


def last_polls(path: Path, count: int = 1, max_bytes: int = 4 * 1024 * 1024) -> list[dict[str, Any]]:
    """The newest ``count`` poll summary events, newest first."""
    found = []
    for event in events_backward(path, max_bytes):
        if event.get("event") == "poll":
            found.append(event)
            if len(found) >= count:
                break
    return found


def last_ok_poll(path: Path, max_bytes: int = 4 * 1024 * 1024) -> dict[str, Any] | None:
    """The newest successful (ok or idle) poll event, or None."""
    for event in events_backward(path, max_bytes):
        if event.get("event") == "poll" and event.get("status") in ("ok", "idle"):
            return event
    return None
