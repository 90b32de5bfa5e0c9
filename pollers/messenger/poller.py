"""Facebook Messenger (``type = "messenger"``): "Download Your Information" and encrypted-chat exports dropped in a folder.

Keys: ``inbox`` (the folder exports are dropped in: ``.zip`` files or unpacked folders; required),
``settle_seconds`` (default 10: an export is read once nothing in it changed for that long),
``attachments`` (default true: store media content-addressed) and ``me`` (your display name, to set
``sender.is_me``). What an export is and when it is complete: :mod:`pollers.messenger.exports`; how
threads become records (native ID, revisions, mojibake): :mod:`pollers.messenger.parse`.

Cursor: ``{"done": [[content hash, signature], ...], "exports": N, "items": N, "at": {"export": hash,
"unit": key, "n": count}}``. ``done`` lists the exports read to the end (the newest :data:`MAX_DONE`);
``at`` is where the poll stands inside the export it is reading: the thread unit (units are read in
sorted order) and how many items of it are stored. Each item's cursor (made only where the runner stops
inside a batch: ``Batch.cursor_at``) points just past it, so a poll
stopped anywhere (deadline, SIGTERM, kill -9) resumes inside a large export, re-reading only the
current thread; an export joins ``done`` only with the cursor of the batch that stored its last item.
Positions ``{"exports", "items"}`` only grow. ``floor_ms`` (set by ``start = "now"``) skips messages
sent before it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from datetime import datetime
from itertools import islice, repeat
from pathlib import Path
from typing import Any

from memex.plugin import Batch, Cursor, Item, SourceConfig, SourceError
from pollers.messenger.exports import Candidate, LayoutError, Opened, Reader, Unit, layout, scan, stray_files
from pollers.messenger.inventory import Inventory
from pollers.messenger.parse import Renderer

DEFAULT_SETTLE = 10
MAX_DONE = 1000  # finished exports remembered (oldest forgotten: dropped again, one is read again as duplicates)


def make(source: SourceConfig) -> MessengerPoller:
    """Validate ``[sources.NAME]`` of type messenger and build its poller (no I/O)."""
    keys = source.keys()
    inbox = keys.path("inbox")
    settle = keys.number("settle_seconds", default=DEFAULT_SETTLE, minimum=0, maximum=86400)
    attachments = keys.flag("attachments", default=True)
    me = keys.text("me", default=None)
    if me is not None and not me.strip():
        raise keys.error("me", "must be your display name as Messenger shows it, or left out")
    keys.finish()
    return MessengerPoller(source.name, Path(inbox).expanduser(), settle, attachments, me)


class MessengerPoller(Inventory):
    """Reads every complete export in the inbox once, remembering each by content hash (and lists them for ``memex verify``)."""

    def __init__(
        self, name: str, inbox: Path, settle_seconds: float = DEFAULT_SETTLE, attachments: bool = True, me: str | None = None
    ) -> None:
        self.name = name
        self.inbox = inbox
        self.settle_seconds = settle_seconds
        self.attachments = attachments
        self.me = me
        self._opened: dict[str, Opened] = {}  # by signature
        self._rejects: dict[str, str] = {}  # signature -> the error line
        self._pos: Any = None  # the "at" the live stream stands at
        self._stream: Iterator[tuple[str, tuple[int, Item]]] | None = None
        self._strays_said = False  # the thread files lying loose in the inbox were warned about (once per poll)
        self._settling = 0  # exports the last scan found still being written (read once unchanged for settle_seconds)

    def watch_paths(self) -> list[Path]:
        """What ``memex watch`` watches: the inbox folder."""
        return [self.inbox]

    def close(self) -> None:
        """Close every export opened."""
        for opened in self._opened.values():
            opened.reader.close()
        self._opened.clear()

    # -- cursor ----------------------------------------------------------------------------------------
    def positions(self, cursor: Cursor) -> dict[str, int]:
        """Exports read to the end and items handed over, both only growing."""
        cur = cursor or {}
        return {"exports": int(cur.get("exports", 0)), "items": int(cur.get("items", 0))}

    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand, or None."""
        shape = 'a Messenger cursor is {"done": [[HASH, SIGNATURE], ...], "exports": N, "items": N}'
        if not isinstance(cursor, dict) or not set(cursor) <= {"done", "exports", "items", "at", "floor_ms"}:
            return shape
        done = cursor.get("done", [])
        if not isinstance(done, list) or not all(isinstance(d, list) and len(d) == 2 and all(isinstance(x, str) for x in d) for d in done):
            return "done must be a list of [content hash, signature] pairs"
        for key in ("exports", "items", "floor_ms"):
            if key in cursor and (type(cursor[key]) is not int or cursor[key] < 0):
                return f"{key} must be a whole number, not negative"
        at = cursor.get("at")
        if at is not None and not (
            isinstance(at, dict) and isinstance(at.get("export"), str) and isinstance(at.get("unit"), str) and type(at.get("n")) is int
        ):
            return 'at must be {"export": HASH, "unit": PATH, "n": COUNT}'
        return None

    # -- exports ---------------------------------------------------------------------------------------
    def _candidates(self) -> list[Candidate]:
        ready, self._settling = scan(self.inbox, self.settle_seconds)
        return ready

    def report(self) -> dict[str, Any]:
        """The poll line's ``settling``: exports still being written, so an idle poll says it waits for them."""
        return {"settling": self._settling} if self._settling else {}

    def _open(self, cand: Candidate) -> Opened | None:
        """The export behind a candidate, or None (its error kept for the end of the poll)."""
        if cand.signature in self._opened:
            return self._opened[cand.signature]
        if cand.signature in self._rejects:
            return None
        reader: Reader | None = None
        try:
            reader = Reader(cand.path)
            found = layout(reader)
            opened = Opened(cand, reader, found, reader.content_hash())
        except LayoutError as exc:
            if reader is not None:
                reader.close()
            self._rejects[cand.signature] = str(exc)
            return None
        except OSError as exc:
            if reader is not None:
                reader.close()
            self._rejects[cand.signature] = f"{cand.path.name}: cannot read ({exc.strerror or type(exc).__name__})"
            return None
        self._opened[cand.signature] = opened
        return opened

    def _walk(self, opened: Opened, unit_from: str = "", skip: int = 0, floor_ms: int = 0) -> Iterator[tuple[str, tuple[int, Item]]]:
        """Every item of an export from a position: (unit key, (items of that unit so far, item))."""
        for unit in opened.layout.units:
            key = unit.key
            if key < unit_from:
                continue
            items = self._numbered(opened, unit, floor_ms)
            if key == unit_from:
                for _ in islice(items, skip):  # the items stored before
                    pass
            yield from zip(repeat(key), items)  # the pairs made in C, not a frame per item

    def _numbered(self, opened: Opened, unit: Unit, floor_ms: int = 0) -> Iterator[tuple[int, Item]]:
        """A unit's items numbered from 1, as the cursor's ``at.n`` counts them."""
        return enumerate(Renderer(self.name, opened.reader, unit, self.me, floor_ms).items(opened.hash, self.attachments), 1)

    def _raise_rejects(self) -> None:
        if self._rejects:  # one line naming every unusable export, each with what to do about it
            lines = sorted(self._rejects.values())
            if len(lines) == 1:
                raise SourceError(lines[0])
            listed = " ".join(f"({n}) {line}." for n, line in enumerate(lines, 1))
            raise SourceError(f"{len(lines)} exports in the inbox cannot be read: {listed}")

    # -- the Poller interface --------------------------------------------------------------------------
    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """Up to ``limit`` items of the export being read, or of the next complete export not read yet."""
        cur: dict[str, Any] = dict(cursor or {})
        cur.setdefault("done", [])
        cur.setdefault("exports", 0)
        cur.setdefault("items", 0)
        done_hashes = {h for h, _ in cur["done"]}
        known = {s for _, s in cur["done"]}
        at = cur.get("at")
        warnings: list[str] = []
        candidates = self._candidates()
        if not self._strays_said:  # once per poll (a poller lives for one poll)
            self._strays_said = True
            warnings = [f"{name}: a thread file lying directly in the inbox is not read; put the whole export in {self.inbox} "
                        "(its .zip, or the unpacked folder holding messages/inbox/<conversation>/message_1.json)"
                        for name in stray_files(self.inbox)]  # fmt: skip
        if at is None:
            for cand in candidates:
                if cand.signature in known:
                    continue
                opened = self._open(cand)
                if opened is None:
                    continue
                if opened.hash in done_hashes:  # moved, renamed or dropped again: recognised by content, nothing re-read
                    return Batch(items=[], cursor=_finish(cur, opened, count=False), warnings=warnings)
                at = {"export": opened.hash, "unit": "", "n": 0}
                break
            else:
                self._raise_rejects()
                return Batch(items=[], cursor=cursor if cursor else cur, warnings=warnings)
        opened = self._find([c for c in candidates if c.signature not in known], at["export"])
        if opened is None:
            self._pos = self._stream = None
            rest = {k: v for k, v in cur.items() if k != "at"}
            warnings.append("the export being read left the inbox before it was read to the end; the rest of it is not read")
            return Batch(items=[], cursor=rest, warnings=warnings)
        if self._stream is None or self._pos != at:
            self._stream = self._walk(opened, at["unit"], at["n"], int(cur.get("floor_ms", 0)))
        marks = list(islice(self._stream, max(limit, 1)))  # (unit, (n, item)) as walked: cursors made only if asked for
        items = [walked[1][1] for walked in marks]
        cursor_at = functools.partial(_item_cursor, cur, opened, marks)  # Batch.cursor_at: the runner stopped there
        if items and len(items) >= limit:
            last = cursor_at(len(items))
            self._pos = last["at"]
            return Batch(items=items, cursor=last, warnings=warnings, cursor_at=cursor_at)
        self._pos = self._stream = None
        done = _finish({**cur, "items": int(cur["items"]) + len(items)}, opened, count=True)
        return Batch(items=items, cursor=done, warnings=warnings, cursor_at=cursor_at)

    def _find(self, candidates: list[Candidate], export_hash: str) -> Opened | None:
        for cand in candidates:
            opened = self._open(cand)
            if opened is not None and opened.hash == export_hash:
                return opened
        return None

    def head(self) -> Cursor:
        """``start = "now"``: every complete export in the inbox now counts as read, and messages sent before now
        are skipped in exports dropped later (``memex backfill`` reads them all)."""
        cur: dict[str, Any] = {"done": [], "exports": 0, "items": 0, "floor_ms": int(time.time() * 1000)}
        for cand in self._candidates():
            opened = self._open(cand)
            if opened is not None:
                cur = _finish(cur, opened, count=False)
        return cur

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Every message of every complete export in ``[since, until)``, exports in content-hash order, then units.

        Checkpoint: ``{"export", "unit", "n"}`` of the last item yielded. Unreadable exports are reported
        (SourceError) once the others are read.
        """
        opened = sorted((o for c in self._candidates() if (o := self._open(c)) is not None), key=lambda o: o.hash)
        seen: set[str] = set()
        start = checkpoint or {}
        for export in opened:
            if export.hash in seen or export.hash < start.get("export", ""):
                continue
            seen.add(export.hash)
            mine = export.hash == start.get("export")
            for unit, (n, item) in self._walk(export, start["unit"] if mine else "", start["n"] if mine else 0):
                item.cursor = {"export": export.hash, "unit": unit, "n": n}
                sent = item.message.sent_at if item.message is not None else None
                when = datetime.fromisoformat(sent) if sent else None
                if when is not None and ((since is not None and when < since) or (until is not None and when >= until)):
                    continue
                yield item
        self._raise_rejects()


def _item_cursor(cur: dict[str, Any], opened: Opened, marks: list[tuple[str, tuple[int, Item]]], n: int) -> dict[str, Any]:
    """The cursor right after the ``n``-th item of a batch fetched after ``cur``: just past it inside the export."""
    unit, (k, _) = marks[n - 1]
    return {**cur, "at": {"export": opened.hash, "unit": unit, "n": k}, "items": int(cur["items"]) + n}


def _finish(cur: dict[str, Any], opened: Opened, *, count: bool) -> dict[str, Any]:
    """``cur`` with ``opened`` recorded as read to the end (under the signature it has now)."""
    pair = [opened.hash, opened.candidate.signature]  # a hash may have several signatures (copies of one export)
    done = [d for d in cur.get("done", []) if d != pair] + [pair]
    out = {k: v for k, v in cur.items() if k != "at"}
    out["done"] = done[-MAX_DONE:]
    out["exports"] = int(cur.get("exports", 0)) + (1 if count else 0)
    return out
