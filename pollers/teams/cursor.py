"""The cursor of a Teams source: per chat (and channel), how a walk moves it, and how an interrupted walk resumes.

Cursor: ``{"chats": {CHAT_ID: ENTRY}, "channels": {CHANNEL_ID: ENTRY}, "n": items passed}`` where
``ENTRY`` is ``{"t": µs, "seen": ["MSGID@µs", ...]}`` (the newest modification stored, and the
messages modified within the overlap before it), a channel's also ``"delta"`` (its deltaLink), and
an interrupted chat walk's also ``"top"``, ``"seen_top"`` and ``"below"`` (see :func:`partial`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memex.plugin import Batch, Conversation, Cursor, Item


@dataclass
class Walk:
    """One chat (or channel) being walked in this poll: where the next page is and what the walk has seen."""

    chat: Conversation
    next_url: str | None
    prev: dict[str, Any] | None  # the chat's cursor entry before the walk (None: never walked)
    kind: str = "chats"  # or "channels" (a delta walk)
    newest: int = 0
    seen: dict[str, int] = field(default_factory=dict)  # message id -> lastModified µs, of this walk
    delta: str | None = None  # a channel walk's final @odata.deltaLink
    resume: bool = False  # this walk reads what an interrupted walk left (below its oldest page)
    low: int | None = None  # the oldest position (modification; a resumed walk: creation) stored so far, and the messages at it
    low_ids: set[str] = field(default_factory=set)
    ordered: bool = True  # pages came newest first, as $orderby asks


def partial(cursor: Cursor, walk: Walk, overlap_us: int) -> Cursor:
    """The cursor after a page of a chat walk that goes on: the chat's own cursor stays, plus where to resume.

    ``below`` is the oldest position stored so far (and the messages at it): a modification time in a walk
    from the top, a creation time in a resumed walk. A poll stopped before the walk ends (deadline, kill)
    resumes with ``createdDateTime lt below`` (a message modified at or above ``below`` was created no
    later, so reading by creation below it is a superset of what is left, and it never misses a message
    whose modification moved up between the polls); ``top`` and
    ``seen_top`` are the newest end of the interrupted walk, which becomes the chat's cursor once the
    rest is read. Channel (delta) walks cannot resume: their cursor stays until the round completes.
    """
    if walk.kind != "chats" or walk.low is None or not walk.ordered:
        return cursor
    prev = dict(walk.prev or {"t": 0, "seen": []})
    if not walk.resume:
        prev["top"], prev["seen_top"] = walk.newest, []
    floor = int(prev["top"]) - overlap_us  # what the next walk from `top` re-reads must be known
    prev["seen_top"] = sorted({*prev["seen_top"], *(f"{sid}@{at}" for sid, at in walk.seen.items() if at > floor)})
    prev["below"] = [walk.low, sorted(walk.low_ids)]
    convs = dict(cursor.get("chats") or {})
    convs[walk.chat["id"] or ""] = prev
    return {**cursor, "chats": convs}


def advanced(cursor: Cursor, walk: Walk, overlap_us: int) -> Cursor:
    """The cursor with the walked chat moved to the newest modification seen (never backward)."""
    prev = walk.prev or {"t": 0, "seen": []}
    if walk.resume:  # the rest of an interrupted walk is read: its newest end becomes the cursor
        prev = {"t": max(int(prev.get("t", 0)), int(prev.get("top", 0))), "seen": [*prev.get("seen", ()), *prev.get("seen_top", ())]}
    t = max(int(prev.get("t", 0)), walk.newest)
    floor = t - overlap_us
    seen: dict[str, int] = {}
    for mark in prev.get("seen", ()):
        sid, _, at = mark.rpartition("@")
        if at.isdigit() and int(at) > floor:
            seen[sid] = max(seen.get(sid, 0), int(at))
    for sid, at in walk.seen.items():
        if at > floor:
            seen[sid] = max(seen.get(sid, 0), at)
    entry: dict[str, Any] = {"t": t, "seen": sorted(f"{sid}@{at}" for sid, at in seen.items())}
    if walk.kind == "channels":
        entry["delta"] = walk.delta or prev.get("delta")
    if walk.prev is not None and entry == walk.prev:
        return cursor
    convs = dict(cursor.get(walk.kind) or {})
    convs[walk.chat["id"] or ""] = entry
    return {**cursor, walk.kind: convs}


def numbered(cursor: Cursor, items: list[Item], final: Cursor) -> Batch:
    """The batch, each item's cursor (and the batch's) carrying ``n``: how many items all cursors so far have passed."""
    n = int(cursor.get("n", 0))
    for k, item in enumerate(items, 1):
        item.cursor = {**item.cursor, "n": n + k}
    return Batch(items=items, cursor={**final, "n": n + len(items)})
