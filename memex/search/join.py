"""Threads joined in one pass: a rebuild's last step labels every row with its conversation (:func:`join_all`).

A row's ``thread`` is the lowest row id of the rows its links join it to (:mod:`memex.search.rows`); a poll joins
each new row as it comes (:meth:`memex.search.index.SearchIndex._join_thread`). Reading conversations is the read
model's (:mod:`memex.read.conversations`).
"""

from __future__ import annotations

import json
import sqlite3


def join_all(db: sqlite3.Connection) -> None:
    """Label every row with its thread (the lowest row id of the rows its links join it to): a rebuild's last step,
    one pass over the links in ref order with a union-find whose roots are the lowest ids, then the rows whose label
    is not their own id written by one UPDATE, handed their labels as one JSON array (a third faster than a temporary
    table filled by ``executemany``, issue 45; a row is rewritten whole when its thread changes: only those are). A poll joins each new row as it
    comes (:meth:`memex.search.index.SearchIndex._put_many`)."""
    parent: dict[int, int] = {}

    def root(i: int) -> int:
        top = i
        while (up := parent.get(top, top)) != top:
            top = up
        while i != top:  # path compression
            parent[i], i = top, parent[i]
        return top

    last_ref, top = None, 0
    for ref, rowid in db.execute("SELECT ref, id FROM links ORDER BY ref"):
        here = root(rowid) if rowid in parent else rowid
        if ref != last_ref:
            last_ref, top = ref, here
        elif here < top:
            parent[top] = top = here
        elif here > top:
            parent[here] = top
    labels = json.dumps([(i, t) for i in parent if (t := root(i)) != i])
    db.execute("BEGIN")  # every other row is its own thread already (rows come in so; copied rows keep theirs)
    db.execute("UPDATE messages SET thread = j.value ->> 1 FROM json_each(?) j WHERE messages.id = j.value ->> 0", (labels,))
    db.execute("COMMIT")
