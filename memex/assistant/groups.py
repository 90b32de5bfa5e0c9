"""Counting matches per sender, conversation or month (the ``counts`` tool) on the index's group-by indexes.

SQLite groups the matching rows by one column that an index holds with ``deleted`` (``messages_sender``,
``messages_thread``, ``messages_month``: :data:`memex.search.schema.SECONDARY`), so a count over every message reads
one index, not the rows; the few groups shown are then named from the rows: a sender by a name it used (and whether
it is the user), a conversation by its first message (source, ID, name or subject, key), a month is ``YYYY-MM`` as
the message's time was written.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memex.search.schema import MONTH

SELECT = {  # each group's column (an index holds it), and what else the index gives
    "sender": "m.sender_id AS g, max(m.sender_name) AS name, count(*) AS n",
    "conversation": "m.thread AS g, NULL AS name, count(*) AS n",
    "month": f"{MONTH} AS g, NULL AS name, count(*) AS n",
}


def order(by: str) -> str:
    """The groups' order: months newest first (none last), the others most first."""
    return "g IS NULL, g DESC" if by == "month" else "n DESC, g"


def named(db: sqlite3.Connection, by: str, rows: list[Any]) -> list[dict[str, Any]]:
    """The groups ``rows`` (``g``, ``name``, ``n``) as the answer shows them, named from the index's rows."""
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
