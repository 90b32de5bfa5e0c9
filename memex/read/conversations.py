"""Whole conversations and counts from the index: ``memex show --thread``, ``memex search --output=threads``,
``--count`` and ``--group-by`` (each function reads one open connection, :meth:`memex.read.archive.Archive.reading`).

A row's ``thread`` is the lowest row id of the rows its links join it to (:mod:`memex.search.rows`): a mail thread
by References and In-Reply-To, joined across missing parents; a chat by its conversation. Counts are SQL
``GROUP BY`` over the index's columns, each with an index of its own (``messages_thread``, ``messages_sender``,
``messages_month``: :data:`memex.search.schema.SECONDARY`), so a count over every message reads one index, not the
rows.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memex.search.query import Query
from memex.search.schema import MONTH

GROUPS = ("sender", "conversation", "month")
_GROUP_SQL = {"sender": "m.sender_id", "conversation": "m.thread", "month": MONTH}


def thread_keys(db: sqlite3.Connection, key: str) -> list[str]:
    """The keys of every message in the conversation of the message at ``key``, oldest first (messages with no time
    last); deleted ones too (``memex show`` marks them). Empty when ``key`` is not indexed."""
    found = db.execute("SELECT thread FROM messages WHERE key = ?", (key,)).fetchone()
    if found is None:
        return []
    rows = db.execute("SELECT key FROM messages WHERE thread = ? ORDER BY id < 0, id", (found[0],)).fetchall()
    return [r[0] for r in rows]


def count(db: sqlite3.Connection, q: Query, *, threads: bool = False) -> int:
    """How many messages (or with ``threads``, conversations) ``q`` matches."""
    sql, params = q.matching("count(DISTINCT m.thread)" if threads else "count(*)")
    n: int = db.execute(sql, params).fetchone()[0]
    return n


def group_counts(db: sqlite3.Connection, q: Query, by: str, limit: int) -> list[dict[str, Any]]:
    """The messages ``q`` matches counted by ``by`` (:data:`GROUPS`): senders and conversations most first, months
    newest first; at most ``limit`` groups. Each ``{"group", "count", "name"}``: the sender's ID and a name it
    used, the conversation's first message's key and its name or subject, the month (``YYYY-MM``, None for no time)."""
    sql, params = q.matching(f"{_GROUP_SQL[by]} AS g, count(*) AS n")  # the group's column alone: an index holds it
    order = "g DESC" if by == "month" else "n DESC, g"
    rows = db.execute(f"{sql} GROUP BY g ORDER BY {order} LIMIT ?", [*params, limit]).fetchall()
    out: list[dict[str, Any]] = [{"group": g, "count": n, "name": None} for g, n in rows]
    if by == "sender":
        for entry in out:
            found = db.execute("SELECT sender_name FROM messages WHERE sender_id = ? AND sender_name != '' LIMIT 1",
                                     (entry["group"],)).fetchone()  # fmt: skip
            entry["name"] = found[0] if found else None
    if by == "conversation":
        for entry in out:
            first = first_row(db, entry["group"])
            entry["group"] = first["key"] if first else None
            entry["name"] = (first["conv_name"] or first["subject"] or first["conv_id"]) if first else None
    return out


def threads(db: sqlite3.Connection, q: Query, limit: int) -> list[dict[str, Any]]:
    """The conversations holding a message ``q`` matches, the latest match first, at most ``limit``: each with its
    first message's key, source, name or subject, first and last time, messages matched and in all, and participants
    (senders' names, in order of their first message)."""
    sql, params = q.matching("m.thread AS t, count(*) AS n, max(m.id) AS last")
    found = db.execute(f"{sql} GROUP BY t ORDER BY last DESC LIMIT ?", [*params, limit]).fetchall()
    out = []
    for thread, matched, _last in found:
        first = first_row(db, thread)
        rows = db.execute(
            "SELECT sent_at, sender_name, sender_id, is_me FROM messages WHERE thread = ? AND deleted = 0 ORDER BY id < 0, id",
            (thread,),
        ).fetchall()
        times = [r[0] for r in rows if r[0]]
        people = list(dict.fromkeys(("me" if is_me else (name or sender)) for _, name, sender, is_me in rows if name or sender or is_me))
        out.append({
            "key": first["key"] if first else None, "source": first["source"] if first else None,
            "conversation": (first["conv_name"] or first["conv_id"] or None) if first else None,
            "subject": (first["subject"] or None) if first else None, "first": min(times) if times else None,
            "last": max(times) if times else None, "matched": matched, "total": len(rows), "participants": people,
        })  # fmt: skip
    return out


def first_row(db: sqlite3.Connection, thread: int) -> dict[str, Any] | None:
    """The row a conversation is named after: its lowest row id (its first message, or one with no time)."""
    row = db.execute("SELECT key, source, conv_id, conv_name, subject FROM messages WHERE id = ?", (thread,)).fetchone()
    return dict(zip(("key", "source", "conv_id", "conv_name", "subject"), row, strict=True)) if row else None
