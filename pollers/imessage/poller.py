"""iMessage: macOS ``~/Library/Messages/chat.db``.

Read through a read-only SQLite connection (``mode=ro``, never
``immutable=1``, which would ignore the WAL and miss recent messages), one
short transaction per batch, because Messages.app writes the file
concurrently in WAL mode.

Cursor: ``{"rowid": N, "anchors": [[rowid, guid], ...]}``. The native ID is
``message.guid``. ROWIDs are local: a rebuilt chat.db renumbers them and a
replaced one restarts them. Before reading on, the poller checks that the
anchor messages (the last few it stored) still sit at their ROWIDs and that
the table's AUTOINCREMENT sequence has not gone below the cursor; if not, it
declares a reset to ROWID 0, and the re-read is absorbed by create-only,
ID-keyed uploads. Deleting messages is not mistaken for a rebuild as long as
one anchor survives, and anchors are spread over the whole stored history
(:func:`spread_anchors`), so deleting a whole conversation leaves some.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memex.plugin import Attachment, Batch, Content, Cursor, Item, SourceConfig, SourceError, SourceMissing, describe_exc
from pollers.imessage.edits import change_time, original_and_revisions
from pollers.imessage.inventory import Inventory
from pollers.imessage.rows import (
    Chat,
    attachment_content,
    date_filter,
    iso_time,
    read_all,
    render_message,
)

DEFAULT_DB = "~/Library/Messages/chat.db"
# Edits (15 minutes) and unsends (2 minutes) only touch recent messages: each poll re-checks the rows stored since
# the last check (cursor "checked") plus this many before them for in-place changes, a bounded cost however long the
# history (a backfill re-reads every edit history).
EDIT_WINDOW_ROWS = 5000
TYPEDSTREAM = ".typedstream"  # an attributedBody we could not fully decode, kept beside the record for `backfill --rewrite`
ANCHORS = 3  # newest rows always kept as anchors (more are spread back, see spread_anchors)
MAX_ANCHOR_BAND = 40

# How long a read waits for a lock another writer holds (Messages.app's own writes take milliseconds): a poll gives up
# after this, not after its whole --max-seconds, and the next poll tries again.
BUSY_SECONDS = 2.0
# The tables and columns every read uses; the rest of MESSAGE_COLUMNS is read where there (older macOS lack some).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "message": ("guid", "date", "handle_id"),
    "handle": ("id",),
    "chat": ("guid", "display_name", "chat_identifier"),
    "chat_message_join": ("chat_id", "message_id"),
    "chat_handle_join": ("chat_id", "handle_id"),
    "message_attachment_join": ("message_id", "attachment_id"),
    "attachment": ("guid", "filename", "mime_type", "transfer_name", "total_bytes"),
}
MESSAGE_COLUMNS = (
    "guid", "text", "attributedBody", "handle_id", "service", "date", "date_read", "date_delivered",
    "is_from_me", "cache_has_attachments", "item_type", "group_title", "associated_message_guid",
    "associated_message_type", "balloon_bundle_id", "thread_originator_guid", "reply_to_guid",
    "date_retracted", "date_edited", "subject", "destination_caller_id", "message_summary_info",
)  # fmt: skip


def make(source: SourceConfig) -> IMessagePoller:
    """Validate ``[sources.NAME]`` of type imessage (keys: ``db``, ``attachments``) and build its poller."""
    keys = source.keys()
    db = keys.path("db", default=DEFAULT_DB)
    contents = keys.flag("attachments", default=True)
    keys.finish()
    return IMessagePoller(source.name, Path(db), attachment_contents=contents)


def spread_anchors(anchors: list[list[Any]]) -> list[list[Any]]:
    """The anchors to keep (newest first): the newest :data:`ANCHORS` rows, then one per power-of-two distance.

    Distance is counted in ROWIDs back from the newest; in each band ``[2^k, 2^(k+1))`` the oldest anchor is
    kept, so an anchor, once kept, stays until an older one shares its band: about log2(N) anchors spread
    over the whole stored history. Deleting a conversation (even the one holding the newest messages) leaves
    anchors in other conversations, so it is never mistaken for a rebuilt chat.db.
    """
    if not anchors:
        return []
    newest = int(anchors[0][0])
    kept = anchors[:ANCHORS]
    bands: dict[int, list[Any]] = {}
    for anchor in anchors[ANCHORS:]:
        band = (newest - int(anchor[0])).bit_length()
        if band not in bands or int(anchor[0]) < int(bands[band][0]):
            bands[band] = anchor
    return [*kept, *(bands[b] for b in sorted(bands) if b <= MAX_ANCHOR_BAND)]


def busy(path: Path) -> str:
    """The line for a chat.db another program holds locked past :data:`BUSY_SECONDS`."""
    return (f"{path}: chat.db is busy: another program holds it locked for writing (Messages.app, a backup or sync tool); "
            f"gave up after {BUSY_SECONDS:g}s, the next poll tries again")  # fmt: skip


class IMessagePoller(Inventory):
    """Reads new rows of ``message`` in ROWID order."""

    def __init__(self, name: str, db: Path, *, attachment_contents: bool = True) -> None:
        self.name = name
        self.db = db
        self.attachment_contents = attachment_contents  # store attachments' bytes (content-addressed), not only their metadata
        self._conn: sqlite3.Connection | None = None
        self._columns: tuple[str, ...] | None = None
        self._chats: dict[int, Chat] | None = None

    # -- connection --------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        path = self.db.expanduser()
        fda = f"grant Full Disk Access to {os.path.realpath(sys.executable)} (System Settings > Privacy & Security)"
        check = "check `db` in the source's config section"
        if not path.exists():
            raise SourceMissing(f"{path}: chat.db not found; {check}")
        if not path.is_file():
            raise SourceMissing(f"{path}: is a folder, not chat.db; {check}")
        if not os.access(path, os.R_OK):
            raise SourceError(f"{path}: permission denied; {fda if sys.platform == 'darwin' else 'fix its permissions'}")
        try:
            conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None, timeout=BUSY_SECONDS,
                                   check_same_thread=False)  # fmt: skip
            conn.execute("PRAGMA query_only = 1")
            tables = {t: {row[1] for row in conn.execute(f"PRAGMA table_info({t})")} for t in REQUIRED_COLUMNS}
        except sqlite3.DatabaseError as exc:
            code = getattr(exc, "sqlite_errorname", "")
            if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
                raise SourceError(busy(path)) from None
            if code.startswith(("SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):  # macOS refuses without Full Disk Access
                raise SourceError(
                    f"{path}: cannot open chat.db ({describe_exc(exc)}); {fda if sys.platform == 'darwin' else check}"
                ) from None
            raise SourceMissing(f"{path}: not a readable SQLite database ({describe_exc(exc)}); {check}") from None
        cols = tables["message"]
        if not cols:
            conn.close()
            raise SourceMissing(f"{path}: not a Messages database (no message table); {check}")
        missing: list[str] = []
        for table, need in REQUIRED_COLUMNS.items():
            have = tables[table]
            missing += [f"{table}.{c}" for c in need if c not in have] if have else [f"table {table}"]
        if missing:
            conn.close()
            raise SourceMissing(f"{path}: lacks {', '.join(missing)}: not a Messages database of a macOS version memex reads; "
                                f"{check}")  # fmt: skip
        self._columns = tuple(c for c in MESSAGE_COLUMNS if c in cols)
        self._conn = conn
        return conn

    def close(self) -> None:
        """Close the SQLite connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- memex watch (memex.capabilities.Watchable) -----------------------------
    def watch_paths(self) -> list[Path]:
        """chat.db and its write-ahead log: Messages.app appends new rows to ``chat.db-wal`` and checkpoints them into chat.db.

        Only these two files of the folder count (its ``-shm`` changes whenever anyone reads, this poller included).
        """
        path = self.db.expanduser()
        return [path, path.with_name(path.name + "-wal")]

    # -- the Poller interface ----------------------------------------------
    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand (``memex cursor set``), or None: ``{"rowid": N}``, anchors optional."""
        if not isinstance(cursor, dict) or set(cursor) - {"rowid", "anchors", "changed", "checked"} or "rowid" not in cursor:
            return 'an iMessage cursor is {"rowid": N} (anchors, changed and checked optional)'
        if any(type(cursor.get(k, 0)) is not int or cursor.get(k, 0) < 0 for k in ("rowid", "changed", "checked")):
            return "rowid, changed and checked must be whole numbers, not negative"
        anchors = cursor.get("anchors", [])
        if not isinstance(anchors, list) or not all(isinstance(a, list) and len(a) == 2 and type(a[0]) is int and isinstance(a[1], str)
                                                    for a in anchors):  # fmt: skip
            return "anchors must be a list of [rowid, guid] pairs"
        return None

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """``{"rowid": N}``."""
        return {"rowid": int(cursor.get("rowid", 0))} if cursor else {}

    def head(self) -> Cursor:
        """The cursor of the newest row now (for ``start = "now"``)."""
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            rows = conn.execute("SELECT ROWID, guid FROM message ORDER BY ROWID DESC LIMIT ?", (ANCHORS,)).fetchall()
            changed = 0
            if {"date_edited", "date_retracted"} <= set(self._columns or ()):
                changed = (
                    conn.execute("SELECT MAX(MAX(COALESCE(date_edited, 0), COALESCE(date_retracted, 0))) FROM message").fetchone()[0] or 0
                )
        finally:
            conn.execute("COMMIT")
        if not rows:
            return {"rowid": 0, "anchors": []}
        return {"rowid": rows[0][0], "anchors": [[r, g] for r, g in rows], **({"changed": changed} if changed else {})}

    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """Up to ``limit`` messages after the cursor's ROWID, in one short read transaction."""
        conn = self._connect()
        after = int(cursor.get("rowid", 0)) if cursor else 0
        try:
            conn.execute("BEGIN")
            try:
                if cursor:
                    reason = self._identity_changed(conn, cursor)
                    if reason:
                        return Batch(items=[], cursor={"rowid": 0, "anchors": []}, reset=reason)
                rows = self._rows_after(conn, after, limit)
                changed = int(cursor.get("changed", 0)) if cursor else 0
                if not rows:  # caught up: now the rows changed in place since the last look (edits, unsends)
                    return self._changes(conn, cursor, changed, limit) if cursor else Batch(items=[], cursor=cursor)
                checked = int(cursor.get("checked", after)) if cursor else None  # kept until the next change check
                items = self._render(conn, rows, list(cursor.get("anchors") or []) if cursor else [], changed=changed, checked=checked)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
                raise SourceError(busy(self.db)) from None
            raise SourceError(f"{self.db}: read failed ({describe_exc(exc)}); the next poll tries again") from None
        return Batch(items=items, cursor=items[-1].cursor)

    def _changes(self, conn: sqlite3.Connection, cursor: Cursor, changed: int, limit: int) -> Batch:
        """Revisions of stored rows edited or unsent after ``changed``, oldest change first; each item's cursor keeps its change.

        Every revision has a stable id, so one emitted before (with its row, or by an earlier look) is a
        duplicate the poller expects. The rows looked at reach from :data:`EDIT_WINDOW_ROWS` below where the
        previous look stood (``checked``) up to the cursor: a row edited just before memex stopped is still
        looked at after a backlog longer than the window; once looked at, ``checked`` moves up to the cursor.
        """
        if not {"date_edited", "date_retracted"} <= set(self._columns or ()):
            return Batch(items=[], cursor=cursor)
        stamp = "MAX(COALESCE(m.date_edited, 0), COALESCE(m.date_retracted, 0))"
        cols = ", ".join(f"m.{c}" for c in self._columns or ())
        top = int(cursor.get("rowid", 0))
        since = min(top, int(cursor.get("checked", top)))
        rows = read_all(conn, f"SELECT m.ROWID, {cols}, h.id FROM message m LEFT JOIN handle h ON h.ROWID = m.handle_id "
                              f"WHERE m.ROWID > ? AND m.ROWID <= ? AND {stamp} > ? ORDER BY {stamp}, m.ROWID LIMIT ?",
                        (max(0, since - EDIT_WINDOW_ROWS), top, changed, limit))  # fmt: skip
        # Every change in the range seen (the batch's end, not a single item's): the next look starts at the cursor.
        done = {"checked": top} if len(rows) < limit and "checked" in cursor else {}
        if not rows:
            return Batch(items=[], cursor={**cursor, **done})
        items = self._render(conn, rows, list(cursor.get("anchors") or []), changed=changed, only_revisions=True)
        for item in items:
            item.cursor = {**cursor, "changed": item.cursor["changed"]}
            item.expected_dup = True
        return Batch(items=items, cursor={**cursor, **done, "changed": max(changed, *(i.cursor["changed"] for i in items))}
                     if items else {**cursor, **done})  # fmt: skip

    def _rows_after(self, conn: sqlite3.Connection, after: int, limit: int, where: str = "", params: list[int] | None = None) -> list[Any]:
        """Up to ``limit`` message rows (known columns, then the sender's handle) after ROWID ``after``, in ROWID order.

        ``where`` is extra SQL starting with `` AND`` (with ``params``), e.g. backfill's date range.
        """
        cols = ", ".join(f"m.{c}" for c in self._columns or ())
        sql = (f"SELECT m.ROWID, {cols}, h.id FROM message m LEFT JOIN handle h ON h.ROWID = m.handle_id "
               f"WHERE m.ROWID > ?{where} ORDER BY m.ROWID LIMIT ?")  # fmt: skip
        return read_all(conn, sql, (after, *(params or []), limit))

    # -- rebuild detection -------------------------------------------------
    def _identity_changed(self, conn: sqlite3.Connection, cursor: Cursor) -> str | None:
        """Why the cursor no longer fits this chat.db (rebuilt or replaced), or None if it does."""
        rowid = int(cursor.get("rowid", 0))
        if rowid <= 0:
            return None
        seq_row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'message'").fetchone()
        max_row = conn.execute("SELECT MAX(ROWID) FROM message").fetchone()
        high = max(seq_row[0] if seq_row else 0, max_row[0] or 0)
        if high < rowid:
            return f"chat.db was replaced: its highest ROWID {high} is below the cursor {rowid}; re-reading from the start"
        anchors = cursor.get("anchors") or []
        if not anchors:
            return None
        for anchor_rowid, guid in anchors:
            found = conn.execute("SELECT ROWID FROM message WHERE guid = ?", (guid,)).fetchone()
            if found is None:
                continue  # deleted (a message or a whole conversation): other anchors decide
            if found[0] == anchor_rowid:
                return None
            return f"chat.db was rebuilt: message ROWID {anchor_rowid} is now ROWID {found[0]}; re-reading from the start"
        return (f"chat.db was replaced: none of the {len(anchors)} anchor messages (spread over the stored history) is in it "
                "any more; re-reading from the start")  # fmt: skip

    # -- rendering ---------------------------------------------------------
    def _load_chats(self, conn: sqlite3.Connection) -> dict[int, Chat]:
        if self._chats is None:
            members: dict[int, list[str]] = {}
            for chat_id, handle in read_all(
                conn, "SELECT chj.chat_id, h.id FROM chat_handle_join chj JOIN handle h ON h.ROWID = chj.handle_id ORDER BY h.id"
            ):
                members.setdefault(chat_id, []).append(handle)
            self._chats = {
                rowid: Chat(guid, display or ident or None, members.get(rowid, []))
                for rowid, guid, display, ident in read_all(conn, "SELECT ROWID, guid, display_name, chat_identifier FROM chat")
            }
        return self._chats

    def _render(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]], recent: list[list[Any]], *, changed: int = 0,
                checked: int | None = None, only_revisions: bool = False) -> list[Item]:  # fmt: skip
        cols = ("ROWID", *(self._columns or ()), "handle")
        records = [dict(zip(cols, row, strict=True)) for row in rows]
        lo, hi = records[0]["ROWID"], records[-1]["ROWID"]
        chat_of: dict[int, int] = {}
        for message_id, chat_id in conn.execute(
            "SELECT message_id, MIN(chat_id) FROM chat_message_join WHERE message_id BETWEEN ? AND ? GROUP BY message_id", (lo, hi)
        ):
            chat_of[message_id] = chat_id
        attachments: dict[int, list[Attachment]] = {}
        files: dict[int, list[Content]] = {}
        with_att = [r["ROWID"] for r in records if r.get("cache_has_attachments")]
        if with_att:
            marks = ",".join("?" * len(with_att))
            for mid, guid, filename, mime, transfer, size in read_all(
                conn,
                "SELECT maj.message_id, a.guid, a.filename, a.mime_type, a.transfer_name, a.total_bytes "
                f"FROM message_attachment_join maj JOIN attachment a ON a.ROWID = maj.attachment_id WHERE maj.message_id IN ({marks}) "
                "ORDER BY maj.message_id, a.ROWID",
                with_att,
            ):
                listed = attachments.setdefault(mid, [])
                listed.append(
                    Attachment(id=guid, filename=transfer or (Path(filename).name if filename else None), mime_type=mime, size=size)
                )
                if self.attachment_contents:
                    files.setdefault(mid, []).append(attachment_content(len(listed) - 1, filename))
        chats = self._load_chats(conn)
        if not set(chat_of.values()) <= chats.keys():
            self._chats = None  # a chat created since the cache was filled (a long poll or backfill)
            chats = self._load_chats(conn)
        items = []
        for r in records:
            message = render_message(self.name, r, chats.get(chat_of.get(r["ROWID"], -1)), attachments.get(r["ROWID"], []))
            original, revisions = original_and_revisions(message, r, iso_time)
            if only_revisions:  # a stored row changed in place: its revisions, at the row's change time
                items += [Item(cursor={"changed": change_time(r)}, message=rev) for rev in revisions]
                continue
            recent = spread_anchors([[r["ROWID"], r["guid"]], *recent])
            cursor = {"rowid": r["ROWID"], "anchors": recent, **({"changed": changed} if changed else {}),
                      **({"checked": checked} if checked is not None else {})}  # fmt: skip
            kept = {TYPEDSTREAM: bytes(r["attributedBody"])} if message.extra.get("text_error") and r.get("attributedBody") else {}
            items.append(Item(cursor=cursor, message=original, contents=files.get(r["ROWID"], []), blobs=kept))
            # Edits and an unsend seen with the row itself; the changes pass may emit them again (expected duplicates).
            items += [Item(cursor=cursor, message=rev, expected_dup=True) for rev in revisions]
        return items

    # -- history (memex backfill) ------------------------------------------
    HISTORY_CHUNK = 1000

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Every message with ``date`` in ``[since, until)`` after ``checkpoint``, in ROWID order.

        Reads in chunks of :attr:`HISTORY_CHUNK` rows, each in its own short
        read transaction (nothing is held open between chunks, so
        Messages.app and the live poll keep writing and reading). History
        cursors are ``{"rowid": N, "guid": G}``; on resume, a checkpoint whose
        ROWID now holds another message means chat.db was rebuilt, and the
        walk refuses rather than skip or repeat by the wrong numbering.
        """
        after = int(checkpoint.get("rowid", 0)) if checkpoint else 0
        where, params = date_filter(since, until)
        first = True
        while True:
            conn = self._connect()
            try:
                conn.execute("BEGIN")
                try:
                    if first and checkpoint and checkpoint.get("guid"):
                        self._check_history_checkpoint(conn, checkpoint)
                    first = False
                    rows = self._rows_after(conn, after, self.HISTORY_CHUNK, where, params)
                    items = self._render(conn, rows, []) if rows else []
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise SourceError(
                    f"{self.db}: read failed ({describe_exc(exc)}); rerun the backfill to continue from its checkpoint"
                ) from None
            if not rows:
                return
            for item in items:
                rowid, guid = item.cursor["anchors"][0]
                item.cursor = {"rowid": rowid, "guid": guid}
                yield item
            after = int(rows[-1][0])

    def history_count(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> int:
        """How many messages :meth:`history` would yield now (for progress and ETA)."""
        after = int(checkpoint.get("rowid", 0)) if checkpoint else 0
        where, params = date_filter(since, until)
        conn = self._connect()
        try:
            row = conn.execute(f"SELECT COUNT(*) FROM message m WHERE m.ROWID > ?{where}", (after, *params)).fetchone()
        except sqlite3.Error as exc:
            raise SourceError(f"{self.db}: read failed ({describe_exc(exc)})") from None
        return int(row[0])

    def _check_history_checkpoint(self, conn: sqlite3.Connection, checkpoint: Cursor) -> None:
        rowid, guid = int(checkpoint["rowid"]), checkpoint["guid"]
        found = conn.execute("SELECT ROWID FROM message WHERE guid = ?", (guid,)).fetchone()
        if found is not None and found[0] != rowid:
            raise SourceError(
                f"{self.db}: chat.db was rebuilt since the backfill checkpoint (message ROWID {rowid} is now ROWID {found[0]}); "
                "rerun with --restart (messages already stored are skipped as duplicates)"
            )
        if found is None:
            other = conn.execute("SELECT guid FROM message WHERE ROWID = ?", (rowid,)).fetchone()
            if other is not None:
                raise SourceError(
                    f"{self.db}: chat.db was replaced since the backfill checkpoint (ROWID {rowid} holds another message); "
                    "rerun with --restart (messages already stored are skipped as duplicates)"
                )
