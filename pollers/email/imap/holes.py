"""UIDs a server will not serve, kept in an IMAP mailbox's cursor so one such mail never wedges the mailbox.

A server can leave a UID out of a ``UID FETCH`` answer while a fresh ``UID SEARCH`` still lists it (Gmail answers
``NO Some messages could not be FETCHed`` or silently leaves a message out when it cannot serve it). Stopping right
before that UID would stop the mailbox on every poll, for good. Instead the UID is kept as a *hole* in the mailbox's
cursor and the cursor moves on past it:

``{"uidvalidity": V, "last_uid": U, "holes": [{"uid": N, "tries": T}, ...]}``

Each later poll asks for the holes again (once a poll); a hole the server serves is stored and leaves the list, one a
fresh search no longer lists (expunged) leaves it too, and one still refused counts a try. After :data:`HOLE_TRIES`
polls a hole is *given up*: logged as a warning, reported by ``memex status`` (``unserved`` in the poll line) and
``memex verify``, and no longer asked for by polls. At most :data:`MAX_HOLES` holes are kept per mailbox: a given-up
hole makes room for a new one (oldest first, with a warning); when every kept hole is still being retried the batch
stops before the next one (and moves on once those are given up), so the cursor never grows without bound.
A mailbox without holes has no ``holes`` key: cursors written before holes existed stay valid and unchanged.
"""

from __future__ import annotations

from typing import Any

HOLE_TRIES = 5  # polls that ask for a hole before it is given up (and reported)
MAX_HOLES = 100  # holes kept per mailbox


def holes_of(box: Any) -> dict[int, int]:
    """``{uid: tries}`` of a mailbox's cursor entry (empty when it has none)."""
    found = box.get("holes") if isinstance(box, dict) else None
    return {int(h["uid"]): int(h["tries"]) for h in found or []}


def box(validity: int, last_uid: int, holes: dict[int, int]) -> dict[str, Any]:
    """A mailbox's cursor entry; ``holes`` only when there are any (sorted by UID)."""
    entry: dict[str, Any] = {"uidvalidity": validity, "last_uid": last_uid}
    if holes:
        entry["holes"] = [{"uid": uid, "tries": holes[uid]} for uid in sorted(holes)]
    return entry


def live(holes: dict[int, int]) -> list[int]:
    """The holes still asked for (fewer than :data:`HOLE_TRIES` tries), by UID."""
    return sorted(uid for uid, tries in holes.items() if tries < HOLE_TRIES)


def given_up(holes: dict[int, int]) -> list[int]:
    """The holes no longer asked for, by UID."""
    return sorted(uid for uid, tries in holes.items() if tries >= HOLE_TRIES)


def make_room(holes: dict[int, int], wanted: int) -> tuple[int, list[int]]:
    """Room for up to ``wanted`` new holes: evicts given-up holes (oldest UID first) as needed.

    Returns how many new holes fit and the given-up UIDs evicted (``holes`` is changed in place).
    """
    evicted: list[int] = []
    for uid in given_up(holes):
        if len(holes) + wanted <= MAX_HOLES:
            break
        del holes[uid]
        evicted.append(uid)
    return max(0, min(wanted, MAX_HOLES - len(holes))), evicted


def problem(name: str, entry: dict[str, Any]) -> str | None:
    """What is wrong with a mailbox entry's ``holes`` (given by hand), or None."""
    found = entry.get("holes")
    shape = f'mailbox {name!r}: "holes" must be a list of {{"uid": U, "tries": T}} (U below or at last_uid, T from 1)'
    if not isinstance(found, list) or len(found) > MAX_HOLES:
        return shape + f", at most {MAX_HOLES}"
    seen: set[int] = set()
    for hole in found:
        if not isinstance(hole, dict) or set(hole) != {"uid", "tries"} or any(type(v) is not int for v in hole.values()):
            return shape
        if not 0 < hole["uid"] <= entry["last_uid"] or hole["tries"] < 1 or hole["uid"] in seen:
            return shape + ", each UID once"
        seen.add(hole["uid"])
    return None
