"""A plugin poller used by runner tests: numbered messages from a JSON file, with a misbehaving mode.

It is a real poller registered like any third-party one; nothing of memex is patched.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from memex.config import SourceConfig
from memex.records import Message
from memex.source import Batch, Item


def _item_cursor(mode: str | None, i: int, after: int) -> Any:
    """An item's cursor; the modes hand back ones the runner must refuse (malformed, empty, backward)."""
    if mode == "malformed":
        return {"INBOX": i}  # another shape than {"n": N}: positions() cannot read it
    if mode == "empty":
        return {}
    if mode == "item_backward":
        return {"n": max(0, after - 1)}
    return {"n": i}


def _extra(spec: dict[str, Any], i: int) -> dict[str, Any]:
    """Message i's extra; listed in ``unserialisable``, it holds a value JSON cannot encode (a set)."""
    return {"odd": {i}} if i in spec.get("unserialisable", []) else {}


_WORDS = [f"w{n:x}q{n % 7}" for n in range(4096)] * 2  # twice over: a text starting near the end wraps round


def _message(name: str, spec: dict[str, Any], i: int) -> Message:
    """Message i; the spec's ``fields`` (``{"i": {field: value}}``) set fields as a careless poller would (a made-up
    ``type``, a date that is not RFC 3339, a revision of an unknown kind)."""
    text = f"body {i}"
    if spec.get("words"):  # a longer text of distinct words (the index's work grows with it), made cheaply
        start = i * 37 % 4096
        text += " " + " ".join(_WORDS[start : start + int(spec["words"])])
    message = Message(source=name, type="message", native_id=f"m{i}", sent_at=None, text=text, extra=_extra(spec, i))
    for field, value in spec.get("fields", {}).get(str(i), {}).items():
        setattr(message, field, value)
    return message


class FakePoller:
    """Messages 1..N from ``{"count": N, "backward": bool, "mode": ...}`` in a JSON file (see ``_item_cursor`` for modes).

    ``words`` adds that many words to each message's text. ``read_seconds`` makes each fetch take that long (a plug-in reading a whole export before it returns a batch).
    Mode ``crash`` raises a KeyError in fetch; ``library_quotes_the_record`` has ``float()`` parse the spec's ``text``,
    whose ValueError quotes it (as sqlite3 and many parsers quote the value they choke on).
    """

    def __init__(self, name: str, spec: Path) -> None:
        self.name = name
        self.spec = spec
        self._moved = False

    def _load(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.spec.read_text())
        return data

    def positions(self, cursor: Any) -> dict[str, int]:
        """``{"n": N}``."""
        return {"n": int(cursor["n"])} if cursor else {}

    def head(self) -> Any:
        """The newest message number."""
        return {"n": self._load()["count"]}

    def fetch(self, cursor: Any, limit: int) -> Batch:
        """Messages after ``cursor``; in backward mode, claims a cursor below the current one."""
        spec = self._load()
        if spec.get("read_seconds"):  # a slow read that knows nothing of the poll's time limit (one whole export parsed)
            time.sleep(float(spec["read_seconds"]))
        if spec.get("mode") == "crash":
            raise KeyError("a bug in the poller")
        if spec.get("mode") == "library_quotes_the_record":  # a library parsing a record's text quotes it in its exception
            float(spec["text"])
        after = int(cursor["n"]) if cursor else 0
        if spec.get("hollow") and after >= spec["count"] and not self._moved:  # a plug-in bug: each poll passes one more
            self._moved = True  # "thing" at the end (a second copy of an export) and stores nothing
            return Batch(items=[], cursor={"n": after + 1})
        if spec.get("backward") and after:
            return Batch(items=[], cursor={"n": after - 1})
        last = min(spec["count"], after + limit)
        mode = spec.get("mode")
        items = [Item(cursor=_item_cursor(mode, i, after), message=_message(self.name, spec, i)) for i in range(after + 1, last + 1)]
        return Batch(items=items, cursor={"n": last} if items else cursor)

    def close(self) -> None:
        """Nothing to release."""


def make(source: SourceConfig) -> FakePoller:
    """Build from ``spec = "path.json"``."""
    keys = source.keys()
    spec = keys.path("spec")
    keys.finish()
    return FakePoller(source.name, Path(spec))
