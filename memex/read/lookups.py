"""Small look-ups on an open, read-only connection to the index (:meth:`memex.read.archive.Archive.reading`), for
the front ends that page by row id and answer in their own shapes (``memex mcp``): native IDs, revisions, a
conversation's rows after a row, the thread a conversation ID names, per-group counts and the index's overview.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memex.search.schema import MONTH

GROUP_SELECT = {  # each group's column (an index holds it), and what else the index gives
    "sender": "m.sender_id AS g, max(m.sender_name) AS name, count(*) AS n",
    "conversation": "m.thread AS g, NULL AS name, count(*) AS n",
    "month": f"{MONTH} AS g, NULL AS name, count(*) AS n",
}


def native_keys(db: sqlite3.Connection, ref: str, limit: int) -> list[str]:
    """The keys of at most ``limit`` messages whose native ID is ``ref``, by key."""
    return [r[0] for r in db.execute("SELECT key FROM messages WHERE native_id = ? ORDER BY key LIMIT ?", (ref, limit))]


def revision_rows(db: sqlite3.Connection, key: str) -> list[Any]:
    """The index's revisions of the message at ``key`` (kind, at, text, deleted), by time then key."""
    return db.execute("SELECT kind, at, text, deleted FROM revisions WHERE message_key = ? ORDER BY at, key", (key,)).fetchall()


def row_id(db: sqlite3.Connection, key: str) -> int | None:
    """The row id of the message at ``key`` (None when not indexed)."""
    found = db.execute("SELECT id FROM messages WHERE key = ?", (key,)).fetchone()
    return int(found[0]) if found else None


def thread_of(db: sqlite3.Connection, key: str) -> int | None:
    """The thread of the message at ``key`` (None when not indexed)."""
    found = db.execute("SELECT thread FROM messages WHERE key = ?", (key,)).fetchone()
    return int(found[0]) if found else None


def thread_named(db: sqlite3.Connection, conv_id: str, source: str | None, q: Any | None) -> int | None:
    """The thread holding a message of the conversation ``conv_id`` (of ``source``, when given): its words found by
    ``q`` (an ``in:`` query; None for an ID with no word in it: every row is read), then its exact ID."""
    if q is not None:
        q.deleted = True  # a conversation of deleted messages is still one
        sql, params = q.matching("min(m.thread)")
    else:
        sql, params = "SELECT min(m.thread) FROM messages m WHERE 1", []
    sql += " AND m.conv_id = ?" if " WHERE " in sql else " WHERE m.conv_id = ?"
    params.append(conv_id)
    if source:
        sql += " AND m.source = ?"
        params.append(source)
    found = db.execute(sql, params).fetchone()
    return None if found is None or found[0] is None else int(found[0])


def thread_page(db: sqlite3.Connection, thread: int, after_id: int, limit: int) -> tuple[Any, int, list[Any]]:
    """A conversation's first row (source, conv_id, conv_name, subject), its number of rows, and its rows after the
    row id ``after_id`` in id order, at most ``limit``."""
    first = db.execute("SELECT source, conv_id, conv_name, subject FROM messages WHERE id = ?", (thread,)).fetchone()
    total = db.execute("SELECT count(*) FROM messages WHERE thread = ?", (thread,)).fetchone()[0]
    rows = db.execute("SELECT id, key, source, sent_at, sender_id, sender_name, is_me, subject, text, n_attachments, "
                      "edited, deleted FROM messages WHERE thread = ? AND id > ? ORDER BY id LIMIT ?",
                      (thread, after_id, limit)).fetchall()  # fmt: skip
    return first, int(total), rows


def group_order(by: str) -> str:
    """The groups' order: months newest first (none last), the others most first."""
    return "g IS NULL, g DESC" if by == "month" else "n DESC, g"


def group_rows(db: sqlite3.Connection, q: Any, by: str) -> list[Any]:
    """Every group of ``by`` (sender, conversation, month) of the rows ``q`` matches: ``(g, name, n)``, in order."""
    sql, params = q.matching(GROUP_SELECT[by])
    return db.execute(f"{sql} GROUP BY g ORDER BY {group_order(by)}", params).fetchall()


def named_groups(db: sqlite3.Connection, by: str, rows: list[Any]) -> list[dict[str, Any]]:
    """The groups ``rows`` (``g``, ``name``, ``n``) named from the index's rows: a sender by a name it used (and
    whether it is the user), a conversation by its first message (source, ID, name or subject, key), a month as
    ``YYYY-MM``."""
    out: list[dict[str, Any]] = []
    for g, name, n in rows:
        if by == "month":
            out.append({"month": g or None, "count": n})
        elif by == "sender":
            me = db.execute("SELECT is_me FROM messages WHERE sender_id = ? LIMIT 1", (g,)).fetchone()
            out.append({"sender": {"id": g or None, "name": name or None, "is_me": bool(me and me[0])}, "count": n})
        else:
            first = db.execute("SELECT key, source, conv_id, conv_name, subject FROM messages WHERE id = ?", (g,)).fetchone()
            key, source, conv_id, conv_name, subject = first if first else (None, None, None, None, None)
            out.append({"source": source, "conversation": {"id": conv_id or None, "name": conv_name or subject or None},
                        "first_key": key, "count": n})  # fmt: skip
    return out


def overview(db: sqlite3.Connection, *, detailed: bool) -> dict[str, dict[str, Any]]:
    """Per source: rows indexed, the oldest and newest ``ts``, when records were last added and rebuilt; with
    ``detailed``, how many are edited and deleted (a scan of the rows)."""
    per: dict[str, dict[str, Any]] = {}
    for source, n in db.execute("SELECT source, COUNT(*) FROM messages GROUP BY source").fetchall():  # one index
        ends = [db.execute(f"SELECT ts FROM messages WHERE source = ? AND ts IS NOT NULL ORDER BY ts {o} LIMIT 1",
                           (source,)).fetchone() for o in ("ASC", "DESC")]  # fmt: skip
        per[source] = {"source": source, "indexed": n, "oldest": ends[0], "newest": ends[1]}
    for source, added, rebuilt in db.execute("SELECT source, added_at, rebuilt_at FROM sources"):
        per.setdefault(source, {"source": source, "indexed": 0}).update(added_at=added, rebuilt_at=rebuilt)
    if detailed:
        for source, edited, deleted in db.execute("SELECT source, SUM(edited), SUM(deleted) FROM messages GROUP BY source"):
            per[source].update(edited=edited or 0, deleted=deleted or 0)
    return per
