"""Your decisions about who is who: merge, split and name, as functions any front end calls (the CLI, a script).

Each takes the book as it stands and your decisions as read (:func:`memex.people.read_decisions`) and returns a
:class:`Change`: the whole new set of decisions and one line saying what changed. Nothing here writes; the caller
hands ``change.decisions`` to :func:`memex.people.write_decisions`, which holds every value to the rule the file is
read with. A reference that names nobody or several people, or a value memex could not read back (an ID that is not
lower-case letters, digits and ``-``; an empty name; a handle such as ``+++``), is a :class:`PersonError` (exit 2)
and nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memex.errors import MemexError
from memex.people.book import Book, Decision, Person, slug, valid_id
from memex.people.handles import Rules, normalize, shown


class PersonError(MemexError):
    """A person named that is not one person, or a decision memex could not keep (exit 2, one line)."""

    exit_code = 2
    retry_helps = False


@dataclass(frozen=True)
class Change:
    """What a decision changes: every decision the people file holds afterwards, who changed, and a line saying so."""

    decisions: tuple[Decision, ...]
    changed: tuple[str, ...]  # the IDs of the people whose decisions changed
    said: str


def one(book: Book, ref: str, rules: Rules) -> Person:
    """The one person ``ref`` (an ID, a name or a handle) names, or PersonError saying why not."""
    return only(book.find(ref, rules), ref)


def only(found: list[Person], ref: str) -> Person:
    """The one person of those ``ref`` names (``found``), or PersonError saying why not."""
    if not found:
        raise PersonError(f"no person matches {ref!r}; `memex people` lists everyone (an ID, a name or a handle)")
    if len(found) > 1:
        raise PersonError(f"{ref!r} names {len(found)} people ({', '.join(p.id for p in found[:5])}); use one of their IDs")
    return found[0]


def merge(book: Book, decisions: Iterable[Decision], into: str, other: str, rules: Rules) -> Change:
    """OTHER is INTO: every handle of OTHER becomes INTO's, and INTO keeps its name (else takes OTHER's)."""
    a, b = one(book, into, rules), one(book, other, rules)
    if a.id == b.id:
        raise PersonError(f"{into!r} and {other!r} are one person already ({a.id})")
    mine = {d.id: d for d in decisions}
    kept, theirs = mine.pop(a.id, None), mine.pop(b.id, None)
    mine[a.id] = _decision(a.id, (kept.name if kept else None) or a.name or b.name,
                           [*(kept.handles if kept else ()), *_shown(a.handles), *(theirs.handles if theirs else ()), *_shown(b.handles)],
                           [*(kept.never if kept else ()), *(theirs.never if theirs else ())])  # fmt: skip
    return Change(tuple(mine.values()), (a.id, b.id), f"{b.id} merged into {a.id}")


def split(book: Book, decisions: Iterable[Decision], ref: str, handles: Iterable[str], rules: Rules,
          new_id: str | None = None, name: str | None = None) -> Change:  # fmt: skip
    """HANDLES of REF are someone else's: a new person (``new_id``, else made of ``name`` or the first handle) with
    them, and never REF's again."""
    moving = list(handles)
    if not moving:
        raise PersonError("name at least one handle to split off")
    _check_name(name, "--name")
    person = one(book, ref, rules)
    missing = [h for h in moving if normalize(h, rules) not in person.handles]
    if missing:
        raise PersonError(f"{missing[0]!r} is not a handle of {person.id} (`memex people show {person.id}` lists them)")
    mine = {d.id: d for d in decisions}
    new = new_id if new_id is not None else slug(name or moving[0])
    if not valid_id(new):
        raise PersonError(f"{new!r} is not a person ID: use lower-case letters, digits and '-' (at most 40), such as {slug(new)!r}")
    if new in book.people or new in mine:
        raise PersonError(f"{new!r} is taken; choose another ID with --as")
    kept = mine.get(person.id)
    gone = {normalize(x, rules) for x in moving}
    keep = [h for h in (kept.handles if kept else _shown(person.handles)) if normalize(h, rules) not in gone]
    mine[person.id] = _decision(person.id, (kept.name if kept else None) or person.name, keep, [*(kept.never if kept else ()), *moving])
    mine[new] = _decision(new, name, moving, [])
    return Change(tuple(mine.values()), (person.id, new), f"{', '.join(moving)} split from {person.id} into {new}")


def rename(book: Book, decisions: Iterable[Decision], ref: str, name: str, rules: Rules) -> Change:
    """Call REF by NAME everywhere memex shows people."""
    _check_name(name, "the name")
    person = one(book, ref, rules)
    mine = {d.id: d for d in decisions}
    kept = mine.get(person.id)
    mine[person.id] = _decision(person.id, name, list(kept.handles) if kept else _shown(person.handles), list(kept.never) if kept else [])
    return Change(tuple(mine.values()), (person.id,), f"{person.id} is now called {name}")


def _check_name(name: str | None, what: str) -> None:
    if name is not None and not name.strip():
        raise PersonError(f"{what} is empty; give the person a name (or leave it out)")


def _shown(handles: set[str]) -> list[str]:
    return sorted(shown(h) for h in handles)


def _decision(pid: str, name: str | None, handles: list[str], never: list[str]) -> Decision:
    return Decision(pid, name, tuple(dict.fromkeys(handles)), tuple(dict.fromkeys(never)))
