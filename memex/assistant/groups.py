"""Counting matches per sender, conversation or month (the ``counts`` tool): SQL groups the matching rows by a short
key, and Python folds the groups into the answer.

A sender is its ID (and whether it is the user: the user's own messages often carry no ID), named by a name it
used; a conversation its source and ID, named by its name; a month ``YYYY-MM`` (UTC), made from the rows' days
(SQLite groups by the day number, a cheap key; the few thousand days fold into months here). Grouping by the key
alone, not by its names too, and the most varied column first, halves SQLite's sort each. Over every message of a large archive this is a scan of the rows
plus a sort of their keys: the index has no index per group column yet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import date
from typing import Any

# What each group selects (its key and name columns, then the count) and groups by, over the matching rows ``m``.
SELECT = {
    "sender": ("m.sender_id, m.is_me, max(m.sender_name), count(*)", "m.sender_id, m.is_me"),
    "conversation": ("m.conv_id, m.source, max(m.conv_name), count(*)", "m.conv_id, m.source"),  # the ID first: sorts faster
    "month": ("CAST(m.ts / 86400 + 100000000 AS INTEGER) - 100000000 AS day, count(*)", "day"),  # the UTC day, floored
}
_EPOCH = date(1970, 1, 1).toordinal()


def tally(rows: Iterable[tuple[Any, ...]], by: str) -> list[dict[str, Any]]:
    """Every group of ``by`` with its count, from the rows :data:`SELECT` gives: senders and conversations most
    first, months newest first (messages with no time last)."""
    if by == "month":
        months: Counter[str | None] = Counter()
        for day, n in rows:
            months[None if day is None else date.fromordinal(_EPOCH + int(day)).strftime("%Y-%m")] += n
        return [{"month": m, "count": n} for m, n in sorted(months.items(), key=lambda kv: (kv[0] is not None, kv[0] or ""), reverse=True)]
    out = []
    for first, second, name, n in sorted(rows, key=lambda r: (-r[3], str(r[0]), str(r[1]))):
        if by == "conversation":
            out.append({"source": second, "conversation": {"id": first or None, "name": name or None}, "count": n})
        else:
            out.append({"sender": {"id": first or None, "name": name or None, "is_me": bool(second)}, "count": n})
    return out
