"""Counting matches per sender, conversation or month (the ``counts`` tool), in one pass over the matching rows.

SQLite groups by sorting (a temporary B-tree over every row: 100,000 rows cost it several times the scan); here
the scan returns one short value per row, counted in a dict, and the few thousand distinct values are folded into
groups in Python: a sender is its ID (named by the name it used most), a conversation its source and ID, a month
``YYYY-MM`` (UTC) of its day. Once the index keeps an index of its own per group column, SQL can read that instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import date
from typing import Any

# One value per row: the group's key and its name, joined by U+001F (a control no ID or name is stored with).
COLUMN = {
    "sender": "m.sender_id || char(31) || m.sender_name || char(31) || m.is_me",
    "conversation": "m.source || char(31) || m.conv_id || char(31) || m.conv_name",
    "month": "CAST(m.ts / 86400 + 100000000 AS INTEGER) - 100000000",  # the UTC day (floor, also before 1970)
}
_EPOCH = date(1970, 1, 1).toordinal()


def tally(values: Iterable[tuple[Any]], by: str) -> list[dict[str, Any]]:
    """Every group of ``by`` with its count (senders and conversations most first, months newest first), from the
    rows' :data:`COLUMN` values."""
    seen = Counter(v for (v,) in values)
    if by == "month":
        months: Counter[str | None] = Counter()
        for day, n in seen.items():
            months[None if day is None else date.fromordinal(_EPOCH + int(day)).strftime("%Y-%m")] += n
        return [{"month": m, "count": n} for m, n in sorted(months.items(), key=lambda kv: (kv[0] is not None, kv[0] or ""), reverse=True)]
    totals: Counter[tuple[str, str]] = Counter()
    names: dict[tuple[str, str], Counter[str]] = {}
    for value, n in seen.items():
        first, second, third = [*str(value).split("\x1f", 2), "", ""][:3]
        key = (first, second) if by == "conversation" else (first or (f"\x1f{second}" if second else f"\x1fme{third}"), third)
        totals[key] += n
        names.setdefault(key, Counter())[third if by == "conversation" else second] += n
    out = []
    for key, n in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
        name = next((x for x, _ in names[key].most_common() if x), None)
        if by == "conversation":
            out.append({"source": key[0], "conversation": {"id": key[1] or None, "name": name}, "count": n})
        else:
            ident = None if key[0].startswith("\x1f") else key[0]
            out.append({"sender": {"id": ident, "name": name, "is_me": key[1] == "1"}, "count": n})
    return out
