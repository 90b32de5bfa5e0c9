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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memex.config import SourceConfig
from memex.deadline import Deadline
from memex.records import Message
from memex.store.attachments import Content

if TYPE_CHECKING:
    from memex.push import Listener

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


class Spooling(Protocol):
    """Optional: a poller that reads from a spool (:mod:`memex.state.spool`) of what its source handed over once.

    The runner calls ``stored`` right after a cursor is saved, when every record up to it is durable in
    the store, so the poller may then (and only then) remove the spool entries behind them; and ``report``
    once at the end of the poll for fields of the poll line (``spool_count``, ``spool_oldest_age_s``, which
    ``memex status``, the dashboard and the metrics show).
    """

    def stored(self, cursor: Cursor) -> None:
        """Every record up to ``cursor`` is durable in the store."""
        ...

    def report(self) -> dict[str, Any]:
        """Extra fields for the poll line (no message text)."""
        ...


class MovesWhenIdle(Protocol):
    """Optional: a poller whose cursor moves past things that are not messages, poll after poll (signal-cli's receipts
    and typing notices). Without it, a cursor that moved in each of :attr:`memex.observe.health.Rules.hollow_after`
    polls in a row while nothing was stored is shown as ``STUCK`` (a plug-in that skips what it should store)."""

    moves_when_idle: bool


class DeadlineAware(Protocol):
    """Optional: a poller that waits on a network (retries, backoff) is told when the poll must end.

    The runner calls ``set_deadline`` with a :func:`time.monotonic` value before the first ``fetch``,
    so retries stop in time for the cron minute instead of running past ``--max-seconds``.
    """

    def set_deadline(self, deadline: float) -> None:
        """Stop retrying (raise) rather than sleep past ``deadline``."""
        ...


class Interruptible(Protocol):
    """Optional, preferred over :class:`DeadlineAware`: a poller that waits on a network gets the poll's
    :class:`~memex.deadline.Deadline` (time limit and stop request) before its first request.

    It bounds every socket timeout, retry and backoff by it and, for each exchange with the server,
    uses ``deadline.guard`` (shut the socket down) or ``deadline.call`` (stop waiting), so a hung server
    cannot hold the poll past ``--max-seconds`` or SIGTERM; it raises :class:`~memex.deadline.Interrupted`,
    which the runner takes as the end of the poll (progress saved).
    """

    def use_deadline(self, deadline: Deadline) -> None:
        """Keep ``deadline`` for every later exchange with the server."""
        ...


class Watchable(Protocol):
    """Optional: a poller whose new messages show up as file changes, so ``memex watch`` can poll on events.

    ``memex watch`` (:mod:`memex.watch`) watches each path returned: a folder for any change inside it
    (recursively), a file (which need not exist yet) for changes of that file only, through its parent
    folder. After a burst of changes has been quiet for a moment it runs one ordinary poll (the runner,
    its run lock and cursor), so whatever the poll does not see yet (a file still settling) must be
    found by a later poll: the watcher also polls every ``interval`` in case an event was missed.
    """

    def watch_paths(self) -> list[Path]:
        """Folders or files whose changes may mean new messages."""
        ...


class Pushing(Protocol):
    """Optional: a poller whose server can say when new messages arrive (IMAP IDLE or NOTIFY, a signal-cli daemon).

    The watcher runs the listener's connections beside its polls (:mod:`memex.push`); each wake-up starts the
    ordinary poll, so what is stored and the cursor stay the poll's alone. The interval poll goes on too, and
    stands in while the push connections are down.
    """

    def listener(self) -> Listener | None:
        """The source's push listener (no connection opened yet), or None when its config turns push off."""
        ...


class Paced(Protocol):
    """Optional: a poller that ``memex watch`` polls at its own pace (Teams: delta polling within Graph's throttling).

    The watcher polls it every ``watch_interval_seconds`` instead of the source's ``interval`` (which stays cron's),
    and after a poll whose line carries ``retry_after_s`` (the server's Retry-After it had no time to wait out) not
    before that many seconds.
    """

    watch_interval_seconds: float


class Settling(Protocol):
    """Optional: a poller that leaves files changed less than ``settle_seconds`` ago for a later poll.

    ``memex watch`` waits at least that long after the last change before it polls, or the poll it runs
    would leave the new file behind with no further event to bring it in.
    """

    settle_seconds: float


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


class Inventoried(Protocol):
    """Optional: a poller whose source can be listed cheaply, so ``memex verify`` finds what the index lacks.

    ``inventory`` lists every message the source has up to ``cursor`` (what the polls have passed, so each should
    be stored), streamed, and an :class:`Unchecked` for each part it cannot list; ``reread`` renders the messages
    at some of those ``ref`` s again (with their revisions, blobs and attachments), for ``memex verify --repair``
    to store through the same create-only path as a poll.
    """

    def inventory(self, cursor: Cursor) -> Iterator[Listed | Unchecked]:
        """Every message of the source up to ``cursor``, in the source's own order (and what cannot be listed)."""
        ...

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items of the messages at ``refs`` (from :meth:`inventory`), read again; refs gone since are skipped."""
        ...


class HistoryPoller(Poller, Protocol):
    """A poller that can also report its head (``start = "now"``) and walk its history (``memex backfill``)."""

    def head(self) -> Cursor:
        """A live cursor positioned at the newest message now: polling from it yields only later messages."""
        ...

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Every message sent in ``[since, until)`` (None: unbounded), after ``checkpoint``, in a fixed order.

        ``checkpoint`` is None (from the start) or the ``cursor`` of an item
        this method yielded before; each item's ``cursor`` must resume the walk
        right after that item. History cursors belong to backfill and may have
        another shape than live cursors.
        """
        ...


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


def check_cursor(poller: Any, cursor: Any) -> dict[str, int]:
    """The positions of a cursor given by hand, or ValueError saying what is wrong with it.

    The poller's own ``validate_cursor(cursor) -> str | None`` (if it has one) checks the shape and types;
    then its positions must be computable, non-empty, and integers that are not negative.
    """
    positions = stored_cursor_positions(poller, cursor)
    if not positions:
        raise ValueError("not a cursor of this source (it has no positions)")
    return positions


def refuse_bad_stored(poller: Any, name: str, cursor: Any, where: str) -> None:
    """Refuse a stored cursor its poller would not have written (``cursors.json`` edited by hand): one line naming the
    source, what is wrong and the commands that set it right (:class:`~memex.errors.StoredCursorRefused`), before
    anything reads it (a poll, ``memex verify``) and fails on it in a way no one can read."""
    from memex.errors import StoredCursorRefused

    try:
        stored_cursor_positions(poller, cursor)
    except ValueError as exc:
        raise StoredCursorRefused(f"the stored cursor of source {name!r} is not one this source writes ({exc}); set a good one with "
                                  f"`memex cursor set {name} VALUE`, or read everything again with `memex cursor reset {name}` "
                                  "(duplicates are skipped)", path=where) from None  # fmt: skip


def stored_cursor_positions(poller: Any, cursor: Any) -> dict[str, int]:
    """The positions of a cursor read from the cursor store, or ValueError saying what is wrong with it.

    A hand-edited ``cursors.json`` can hold anything; each poll checks its cursor here (the poller's own
    ``validate_cursor``, then computable, whole, not negative positions) before the poller reads it.
    """
    validate = getattr(poller, "validate_cursor", None)
    problem = validate(cursor) if callable(validate) else None
    if problem:
        raise ValueError(problem)
    try:
        positions = poller.positions(cursor)
    except Exception as exc:
        raise ValueError(f"not a cursor of this source ({exc.__class__.__name__})") from None
    if not isinstance(positions, dict):
        raise ValueError("not a cursor of this source (its positions are not a map)")
    bad = [str(k) for k, v in positions.items() if type(v) is not int or v < 0]
    if bad:
        raise ValueError(f"position {', '.join(bad)} must be a whole number, not negative")
    return positions
