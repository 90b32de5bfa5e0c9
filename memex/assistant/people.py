"""The people layer (:mod:`memex.people`) for ``memex mcp``, read-only: the ``people`` tool and ``with:`` terms.

:func:`memex.people.open_people` keeps ``people.sqlite`` (the handles of every indexed message) in step with the
index, writing it; the server must not write, so :func:`open_read_only` asks it for the same book from your people
file, the cards and that file as it is, opened with ``mode=ro``: the handles seen in messages are those of the last
``memex people`` (or search naming a person), and none when the file is missing or made from another index file
(a rebuild since: run ``memex people`` once). People from your cards and decisions are there either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memex.config import Config
from memex.people import People, handles_of, open_people, summary

PEOPLE_LIMIT, PEOPLE_MAX = 20, 100


def open_read_only(cfg: Config, index: Path) -> People:
    """Everyone, as :func:`memex.people.open_people` makes them, without writing the handles file."""
    return open_people(cfg, index=index, read_only=True)


def people_answer(people: People, name: str | None, limit: int) -> dict[str, Any]:
    """The people ``name`` names (an ID, a name or words of it, a handle), or everyone by name, ``limit`` of them:
    each with their handles, messages per source and where they come from."""
    if name:
        found, _ = handles_of(people, name)
    else:
        found = sorted(people.book.people.values(), key=lambda p: ((p.name or p.id).casefold(), p.id))
    shown = [summary(people, p) for p in found[:limit]]
    return {"name": name, "total": len(found), "people": shown, "handles_seen": people.conn is not None}
