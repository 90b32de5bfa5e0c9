"""The poller: the complete lines of every ``*.jsonl`` file in a folder, in file-name order, from a byte offset per file.

The cursor is ``{"files": {"a.jsonl": 120, "b.jsonl": 0}}``: for each file, the offset just past the last line
handed to memex. Offsets only grow, so they are the cursor's positions (memex refuses a cursor that moves back
unless the poller declares a reset). A line still being written (no newline yet) waits for a later poll.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO, Any

from memex.plugin import (
    Attachment,
    Batch,
    Content,
    Conversation,
    Cursor,
    Failure,
    Item,
    Listed,
    Message,
    Sender,
    SourceMissing,
    Unchecked,
    rfc3339,
)


def _files(cursor: Cursor) -> dict[str, int]:
    """The per-file offsets of a cursor (None: nothing read yet)."""
    return dict(cursor["files"]) if cursor else {}


class JsonlPoller:
    """One ``type = "jsonl"`` source: a folder of ``.jsonl`` files that grow by appended lines."""

    def __init__(self, name: str, folder: Path, *, settle_seconds: int = 0) -> None:
        self.name = name
        self.folder = folder
        self.settle_seconds = float(settle_seconds)  # memex.plugin.Settling: `memex watch` waits this long after a change

    # --- the Poller protocol: fetch, positions, close -------------------------------------------------------------

    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """Up to ``limit`` new lines after ``cursor``, file by file; an empty batch means caught up."""
        offsets = _files(cursor)
        items: list[Item] = []
        warnings: list[str] = []
        for path in self._listing():
            start = offsets.get(path.name, 0)
            size = path.stat().st_size
            if size < start:  # rewritten shorter: read it again from the start, and say so (the only way back)
                offsets[path.name] = 0
                return Batch(items=[], cursor={"files": offsets}, reset=f"{path.name} is shorter than the cursor's offset")
            if time.time() - path.stat().st_mtime < self.settle_seconds:
                continue  # still being written: a later poll takes it
            for offset, end, line in self._lines(path, start):
                offsets[path.name] = end
                items.append(self._item(path, offset, line, {"files": dict(offsets)}))
                if len(items) >= limit:
                    return Batch(items=items, cursor={"files": offsets}, warnings=warnings)
            offsets.setdefault(path.name, start)
        return Batch(items=items, cursor={"files": offsets} if offsets or cursor else cursor, warnings=warnings)

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """The offset of every file: monotonic counters, for logs and the backward check."""
        return _files(cursor)

    def close(self) -> None:
        """Nothing is held open between calls."""

    # --- optional capabilities -------------------------------------------------------------------------------------

    def validate_cursor(self, cursor: Cursor) -> str | None:
        """Why a cursor given by hand (``memex cursor set``) is not one of ours, or None."""
        ok = isinstance(cursor, dict) and set(cursor) == {"files"} and isinstance(cursor["files"], dict)
        if not ok or not all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in cursor["files"].items()):
            return 'a jsonl cursor is {"files": {"NAME.jsonl": OFFSET, ...}} with whole, non-negative offsets'
        return None

    def watch_paths(self) -> list[Path]:
        """``memex watch`` polls when anything in the folder changes."""
        return [self.folder]

    def head(self) -> Cursor:
        """Every file's end (its last complete line): ``start = "now"`` begins here."""
        return {"files": {path.name: max((end for _o, end, _l in self._lines(path, 0)), default=0) for path in self._listing()}}

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Every message sent in ``[since, until)``, in file then line order, resuming after ``checkpoint``.

        The history cursor is ``{"file": NAME, "offset": END}``, the end of the last line yielded.
        """
        after = (checkpoint["file"], checkpoint["offset"]) if checkpoint else ("", -1)
        for path in self._listing():
            for offset, end, line in self._lines(path, 0):
                if (path.name, end) <= after:
                    continue
                item = self._item(path, offset, line, {"file": path.name, "offset": end})
                sent = item.message.sent_at if item.message else None
                if sent is not None and not _within(sent, since, until):
                    continue
                yield item

    def inventory(self, cursor: Cursor) -> Iterator[Listed | Unchecked]:
        """``memex verify``: every message up to the cursor, with where it is (``NAME:OFFSET``)."""
        for name, upto in _files(cursor).items():
            path = self.folder / name
            if not path.exists():
                yield Unchecked(f"{name} is gone from the folder")
                continue
            for offset, end, line in self._lines(path, 0):
                if end > upto:
                    break
                item = self._item(path, offset, line, None)
                native_id = item.message.native_id if item.message else item.failure.native_id if item.failure else ""
                yield Listed(native_id=native_id, ref=f"{name}:{offset}")

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items at ``refs`` from :meth:`inventory`, read again for ``memex verify --repair``."""
        for ref in refs:
            name, _, at = ref.rpartition(":")
            path = self.folder / name
            for offset, _end, line in self._lines(path, int(at)) if path.exists() else ():
                if offset == int(at):
                    yield self._item(path, offset, line, None)
                break

    # --- reading and rendering -------------------------------------------------------------------------------------

    def _listing(self) -> list[Path]:
        """The folder's ``.jsonl`` files in name order; a missing folder is a config problem, not a retry."""
        try:
            names = sorted(e.name for e in os.scandir(self.folder) if e.name.endswith(".jsonl") and e.is_file())
        except FileNotFoundError:
            raise SourceMissing(f"{self.folder}: no such folder; check `path` in this source's section") from None
        except NotADirectoryError:
            raise SourceMissing(f"{self.folder}: not a folder; `path` names the folder that holds the .jsonl files") from None
        return [self.folder / n for n in names]

    def _lines(self, path: Path, start: int) -> Iterator[tuple[int, int, bytes]]:
        """(offset, end, bytes) of each complete line from ``start``; a last line without its newline is left."""
        with path.open("rb") as f:
            f.seek(start)
            offset = start
            for line in f:
                if not line.endswith(b"\n"):
                    return
                end = offset + len(line)
                if line.strip():
                    yield offset, end, line
                offset = end

    def _item(self, path: Path, offset: int, line: bytes, cursor: Cursor) -> Item:
        """One line as an item: a message, or a failure the runner quarantines with the line's bytes."""
        ref = f"{path.name}:{offset}"
        try:
            doc = json.loads(line)
        except ValueError:
            return Item(cursor=cursor, failure=Failure(native_id=f"line-{ref}", reason="not a JSON object", raw=line, ref=ref))
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), str) or not doc["id"]:
            return Item(cursor=cursor, failure=Failure(native_id=f"line-{ref}", reason="no string `id`", raw=line, ref=ref))
        return _render(self.name, self.folder, doc, cursor)


def _render(source: str, folder: Path, doc: dict[str, Any], cursor: Cursor) -> Item:
    """A line's object as memex's record: the same bytes whichever copy of the folder it is read from."""
    sent = _rfc3339(doc.get("at"))
    sender = doc.get("from") if isinstance(doc.get("from"), str) else None
    chat = doc.get("chat") if isinstance(doc.get("chat"), str) else None
    files = [f for f in doc.get("files", []) if isinstance(f, str)] if isinstance(doc.get("files"), list) else []
    attachments: list[Attachment] = [Attachment(id=str(i), filename=Path(f).name, mime_type=None, size=None) for i, f in enumerate(files)]
    message = Message(
        source=source,
        type="message",
        native_id=doc["id"],  # the line's own ID: never the file name or offset, which differ between copies
        sent_at=sent,
        conversation=Conversation(id=chat, name=chat, participants=[]),
        sender=Sender(id=sender, name=sender, is_me=sender == "me"),
        text=doc.get("text") if isinstance(doc.get("text"), str) else None,
        attachments=attachments,
    )
    contents = [Content(index=i, open=partial(_open, folder / f)) for i, f in enumerate(files)]  # read twice: hash, upload
    return Item(cursor=cursor, message=message, contents=contents)


def _open(path: Path) -> IO[bytes]:
    """An attachment's bytes from the start (``FileNotFoundError`` when gone: memex marks the attachment missing)."""
    return path.open("rb")


def _rfc3339(value: Any) -> str | None:
    """``at`` as RFC 3339 in UTC, or None when it is missing or not a time."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return rfc3339(when) if when.tzinfo is not None else None


def _within(sent: str, since: datetime | None, until: datetime | None) -> bool:
    """Whether an RFC 3339 time lies in ``[since, until)`` (None: unbounded)."""
    when = datetime.fromisoformat(sent.replace("Z", "+00:00"))
    return (since is None or when >= since) and (until is None or when < until)
