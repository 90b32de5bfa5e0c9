"""Person terms of a search: ``with:PERSON``, and ``from:``/``to:`` naming someone you set up.

:class:`Lookup` is handed to the query compiler (:func:`memex.search.query.parse`) and imports and opens the people
layer (:mod:`memex.people`) only when a query has such a term, so a search without one costs nothing more: this
module imports nothing of it at its top. What a term takes:

- ``with:VALUE``: the person VALUE names (an ID, a name or words of it, a handle) and every message they sent or
  received; a value that names nobody is matched as words in the sender and recipients (``from:`` OR ``to:``), and
  :attr:`Lookup.notes` says so (the CLI prints it on stderr); a value that names several people is a
  ``PersonError`` (exit 2) naming them, as ``memex people show`` says it;
- ``from:VALUE`` and ``to:VALUE``: the same, but only for people you set up (a contact card or your people file):
  for anyone else ``from:`` and ``to:`` stay notmuch's word match on the sender and the recipients, so a search
  without ``[people]`` answers exactly as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memex.config import PEOPLE_FILE, Config


class Lookup:
    """``(field, value) -> message IDs | None`` over the people of ``cfg`` and the search index at ``index``."""

    def __init__(self, cfg: Config, index: Path, *, read_only: bool = False) -> None:
        """Look people up in ``cfg``'s people and the index at ``index``; ``read_only``: the handles file is read as
        it is, never brought up to date (``memex mcp``, the read model: :func:`memex.people.open_people`)."""
        self.cfg = cfg
        self.index = index
        self.read_only = read_only
        self._people: Any = None
        self.notes: list[str] = []  # what the caller should tell the user (a with: value that names nobody)

    def _setup(self) -> bool:
        """Whether the user set people up (a [people] table or a people file): ``from:``/``to:`` take persons then."""
        if self.cfg.people:
            return True
        folder = self.cfg.path.parent if self.cfg.path is not None else Path.cwd()
        return (folder / PEOPLE_FILE).exists()

    def __call__(self, field: str, value: str) -> list[int] | None:
        """The IDs of the messages the person ``value`` names sent, received or either (``field``), or None."""
        if field != "with" and not self._setup():
            return None
        if self._people is None:
            from memex.people import open_people
            from memex.search.schema import PEOPLE_ROWS

            self._people = open_people(self.cfg, index=self.index, read_only=self.read_only, index_rows=PEOPLE_ROWS)
        people = self._people
        found = people.find(value)
        if field != "with":
            found = [p for p in found if any(o != "messages" for o in p.origins)]
        if len(found) > 1:  # as `memex people show` says it: never one of them silently
            from memex.people.decide import PersonError

            ids = ", ".join(p.id for p in found[:5]) + (", ..." if len(found) > 5 else "")
            raise PersonError(f"{field}:{value} names {len(found)} people ({ids}); use one of their IDs")
        if not found and field == "with":
            self.notes.append(
                f"with:{value} names no person (`memex people` lists everyone); it is matched as words in senders and recipients"
            )
        if not found or people.conn is None:
            return None if not found else []
        handles = sorted({h for p in found for h in p.handles})
        if not handles:
            return []
        marks = ",".join("?" * len(handles))
        sent = f"SELECT msg_id FROM handles WHERE role = 0 AND handle IN ({marks})"
        received = f"SELECT msg_id FROM handles WHERE role = 1 AND handle IN ({marks})"
        sql, params = {"from": (sent, handles), "with": (f"{sent} UNION {received}", handles * 2),
                       # to: what they received and did not send (a chat lists its sender among its members too)
                       "to": (f"{received} EXCEPT {sent}", handles * 2)}[field]  # fmt: skip
        return [msg_id for (msg_id,) in people.conn.execute(sql, params)]

    def close(self) -> None:
        """Close the people layer if a term opened it."""
        if self._people is not None:
            self._people.close()
