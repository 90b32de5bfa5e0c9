"""``memex verify`` for iMessage (:class:`memex.capabilities.Inventoried`): chat.db's GUIDs up to the cursor, and rows read again.

Mixed into :class:`~pollers.imessage.poller.IMessagePoller`. Both read in short transactions of
:data:`CHUNK` rows, as backfill does, so Messages.app keeps writing meanwhile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memex.plugin import Cursor, Item, Listed, SourceError, describe_exc
from pollers.imessage.edits import revision_ids
from pollers.imessage.rows import read_all

CHUNK = 5000


class Inventory:
    """The rows a cursor has passed (``ROWID <= rowid``), listed by GUID, and rows re-rendered by ROWID."""

    if TYPE_CHECKING:  # what the poller provides
        db: Path
        _columns: tuple[str, ...] | None

        def _connect(self) -> sqlite3.Connection: ...

        def _render(self, conn: sqlite3.Connection, rows: list[Any], recent: list[list[Any]]) -> list[Item]: ...

    def inventory(self, cursor: Cursor) -> Iterator[Listed]:
        """``Listed(guid, str(ROWID), revisions)`` of every message row up to the cursor's ROWID, in ROWID order: with
        the ids of the revisions (edits, unsend) its row holds, so verify sees a revision missing from the store."""
        top = int(cursor.get("rowid", 0)) if cursor else 0
        after = 0
        if self._columns is None:
            self._connect()
        changes = [c for c in ("message_summary_info", "date_edited", "date_retracted") if c in (self._columns or ())]
        extra = "".join(f", {c}" for c in changes)
        while after < top:
            conn = self._connect()
            try:
                conn.execute("BEGIN")
                try:
                    rows = read_all(conn, f"SELECT ROWID, guid{extra} FROM message WHERE ROWID > ? AND ROWID <= ? ORDER BY ROWID "
                                          "LIMIT ?", (after, top, CHUNK))  # fmt: skip
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise SourceError(f"{self.db}: read failed ({describe_exc(exc)}); run memex verify again") from None
            if not rows:
                return
            for rowid, guid, *changed in rows:
                revised = dict(zip(changes, changed, strict=True))
                yield Listed(str(guid), str(rowid), revision_ids(revised) if any(changed) else ())
            after = int(rows[-1][0])

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items (original, revisions, attachments' bytes) of the rows at these ROWIDs, as a poll renders them."""
        rowids = sorted({int(r) for r in refs})
        for start in range(0, len(rowids), 500):
            part = rowids[start : start + 500]
            conn = self._connect()
            cols = ", ".join(f"m.{c}" for c in self._columns or ())
            try:
                conn.execute("BEGIN")
                try:
                    rows = read_all(conn, f"SELECT m.ROWID, {cols}, h.id FROM message m LEFT JOIN handle h ON h.ROWID = m.handle_id "
                                          f"WHERE m.ROWID IN ({','.join('?' * len(part))}) ORDER BY m.ROWID", part)  # fmt: skip
                    items = self._render(conn, rows, []) if rows else []
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise SourceError(f"{self.db}: read failed ({describe_exc(exc)}); run memex verify --repair again") from None
            yield from items
