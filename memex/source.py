"""The small interface every poller implements, and what it hands the runner.

A poller reads its source from a cursor and returns :class:`Batch` es of
:class:`Item` s in cursor order. An item carries either a rendered
:class:`~memex.records.Message` or a :class:`Failure` (a record that could not
be parsed: an error as a value, which the runner quarantines and counts) and
the cursor *after* it. The runner uploads items in order and only ever saves
the cursor of the last item that is durably stored.

A poller type is a callable ``make(source: SourceConfig) -> Poller``
registered in the ``memex.pollers`` entry-point group under its type name.
``make`` validates the source's keys (raising ConfigError) and does no I/O.

What a poller may do beyond ``fetch``/``positions``/``close`` (a head, a history walk, an inventory, ...) is declared
in :mod:`memex.capabilities`, one ``Protocol`` each, and found once per poller by
:func:`memex.capabilities.capabilities`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memex.config import SourceConfig
from memex.records import Message
from memex.store.attachments import Content

Cursor = Any  # JSON-serialisable; its shape belongs to the poller


@dataclass(slots=True)
class Failure:
    """A record the poller could not render. ``raw`` is kept in quarantine; ``reason`` never holds message text."""

    native_id: str
    reason: str
    raw: bytes | None = None
    ref: str | None = None  # where it is in the source (a UID, a ROWID), for the log


@dataclass(slots=True)  # slots: one per message, so no ``__dict__`` each (issue 25)
class Item:
    """One unit of progress: a message (or a failure) and the cursor once it is stored."""

    cursor: Cursor  # None where the batch makes item cursors on demand (Batch.cursor_at)
    message: Message | None = None
    failure: Failure | None = None
    blobs: dict[str, bytes] = field(default_factory=dict)  # suffix -> bytes stored beside the record (".eml")
    contents: list[Content] = field(default_factory=list)  # attachments' bytes, stored content-addressed first
    expected_dup: bool = False  # if it turns out stored already, the poller expected that (not a sign of a replay)
    # A reused native ID (memex.store.collisions): today's fingerprint of a stored record's first blob (its raw
    # bytes), so a record stored under an earlier fingerprint rule is compared by today's; and this item's
    # fingerprints under earlier rules, where a collision stored by them sits (a sequence that may compute them only when
    # read: only a name found taken reads them).
    refingerprint: Callable[[bytes], str] | None = None
    earlier_fingerprints: Sequence[str] = ()
    # A revision whose record is the whole message as it is now, from a source that never gives an earlier version
    # of it (Teams: Graph shows only the current state). If its original is missing when it is stored, the record
    # stands in: stored as the original first (memex.uploader). Never set where the source can still bring the true
    # original (an edit history, a later backfill) or where the revision is partial (a reaction, a tombstone): a
    # stand-in there would block the true original forever (create-only). A poller whose revisions are all whole says
    # so with a ``whole_revisions = True`` attribute: ``memex verify --repair`` then stores a missing original the same way.
    whole: bool = False


@dataclass
class Batch:
    """What one ``fetch`` returns.

    ``cursor`` is where the source stands after the whole batch (it may move
    with no items, e.g. past rows that are not messages). ``reset`` is set,
    with a reason, when the source's numbering changed (a rebuilt database, a
    new UIDVALIDITY) and the cursor must go back: the only way a poll may move
    a cursor backward, and always logged. ``warnings`` are facts the owner
    should see without the poll failing (a gap the server left, a skipped
    mailbox); the runner logs each as ``source.warning``.
    """

    items: list[Item]
    cursor: Cursor
    reset: str | None = None
    warnings: list[str] = field(default_factory=list)  # one line each, logged as source.warning (never message text)
    # Optional, for a poller whose item cursors are costly to make one by one (a Messenger export: two dicts an item):
    # ``cursor_at(n)`` is the cursor right after the batch's first ``n`` items (1 <= n <= len(items)), made only where
    # the runner stops inside the batch (a deadline, SIGTERM, a failed upload); the items' own ``cursor`` is then None.
    cursor_at: Callable[[int], Cursor] | None = None

    def after(self, n: int, before: Cursor) -> Cursor:
        """The cursor right after the first ``n`` items of the batch (``before``, the cursor it was fetched after, if 0)."""
        if n == 0:
            return before
        if self.cursor_at is not None:
            return self.cursor_at(n)
        return self.items[n - 1].cursor


class Poller(Protocol):
    """One configured source, ready to read."""

    name: str

    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """Return up to ``limit`` items after ``cursor`` (None: from the beginning); a batch with no items whose cursor
        did not move means caught up (no items with a moved cursor: read on, the source skipped things)."""
        ...

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """Monotonic counters of a cursor (e.g. ``{"rowid": 89636}``), for logs and the backward check."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


@dataclass(frozen=True)
class Listed:
    """One message the source has, as ``memex verify`` lists it: its native ID and where it is (``ref``: a ROWID, a file)."""

    native_id: str
    ref: str
    revisions: tuple[str, ...] | None = None  # the ids of the revisions the source has of it (None: it cannot list them)


@dataclass(frozen=True)
class Unchecked:
    """A part of the source up to the cursor that ``memex verify`` cannot list, and why (one line, no message text).

    E.g. a mailbox renumbered since the cursor (a new UIDVALIDITY: its UIDs now name other mails), an export
    gone from the folder. The report says so; it is not damage, and nothing is "repaired" from it.
    """

    why: str


PollerFactory = Callable[[SourceConfig], Poller]


def describe(positions: dict[str, int]) -> str:
    """Human form of a cursor's positions: ``89636`` or ``INBOX:12,Sent:3``; ``-`` when empty."""
    if not positions:
        return "-"
    if len(positions) == 1:
        return str(next(iter(positions.values())))
    return ",".join(f"{k}:{v}" for k, v in sorted(positions.items()))


def moved_backward(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """The position names that went down (or vanished) from ``before`` to ``after``."""
    return [k for k, v in before.items() if after.get(k, -1) < v]
