"""What a poller can do beyond the three methods every one has: one ``Protocol`` per optional capability, and the
one place that finds them.

A poller (:class:`memex.source.Poller`) must ``fetch``, ``positions`` and ``close``. Everything else is optional and
declared here, each capability a runtime-checkable ``Protocol`` that mypy checks a poller against and that
:func:`capabilities` tests it with. :func:`capabilities` resolves a poller's capabilities once, where it is opened
(the poll, ``memex watch``, ``verify``, ``backfill``, ``auth``, ``cursor set``, the conformance kit), into a
:class:`Capabilities` record of bound methods (None: the poller lacks it); every caller reads that record and none
looks a capability up by name. A name that is almost one of these (``validate_cursr``) would silently be a poller
without it: :func:`misspelt` finds such names, and the conformance kit (:mod:`memex.conformance`) reports them.

The published names are re-exported by :mod:`memex.plugin`; docs/plugins.md's table "Optional capabilities" says what
memex does with each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memex.deadline import Deadline
from memex.source import Cursor, Item, Listed, Poller, Unchecked

if TYPE_CHECKING:
    from memex.push import Listener


@runtime_checkable
class Headed(Protocol):
    """Optional: a poller that can say where its source stands now (``start = "now"``, a backfill's meeting point)."""

    def head(self) -> Cursor:
        """A live cursor positioned at the newest message now: polling from it yields only later messages."""
        ...


@runtime_checkable
class Historied(Protocol):
    """Optional: a poller that can walk its history (``memex backfill``)."""

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Every message sent in ``[since, until)`` (None: unbounded), after ``checkpoint``, in a fixed order.

        ``checkpoint`` is None (from the start) or the ``cursor`` of an item
        this method yielded before; each item's ``cursor`` must resume the walk
        right after that item. History cursors belong to backfill and may have
        another shape than live cursors.
        """
        ...


class HistoryPoller(Poller, Headed, Historied, Protocol):
    """A poller that can also report its head (``start = "now"``) and walk its history (``memex backfill``)."""


@runtime_checkable
class HistoryCounting(Protocol):
    """Optional: a history walker that can count what a walk will read, so the backfill shows a total and an ETA."""

    def history_count(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> int:
        """How many items :meth:`Historied.history` would yield for the same arguments (an estimate is fine)."""
        ...


@runtime_checkable
class CursorValidating(Protocol):
    """Optional: a poller that checks a cursor's shape, typed by hand (``memex cursor set``) or edited in ``cursors.json``."""

    def validate_cursor(self, cursor: Cursor) -> str | None:
        """What is wrong with ``cursor`` in one line (no message text), or None if it is one this poller writes."""
        ...


@runtime_checkable
class Reporting(Protocol):
    """Optional: a poller with fields of its own for the poll line (``memex status``, the dashboard, the metrics)."""

    def report(self) -> dict[str, Any]:
        """Extra fields for the poll line (no message text), asked once at the end of each poll."""
        ...


@runtime_checkable
class Spooling(Reporting, Protocol):
    """Optional: a poller that reads from a spool (:mod:`memex.state.spool`) of what its source handed over once.

    The runner calls ``stored`` right after a cursor is saved, when every record up to it is durable in
    the store, so the poller may then (and only then) remove the spool entries behind them; and ``report``
    once at the end of the poll for fields of the poll line (``spool_count``, ``spool_oldest_age_s``, which
    ``memex status``, the dashboard and the metrics show).
    """

    def stored(self, cursor: Cursor) -> None:
        """Every record up to ``cursor`` is durable in the store."""
        ...


@runtime_checkable
class DeadlineAware(Protocol):
    """Optional: a poller that waits on a network (retries, backoff) is told when the poll must end.

    The runner calls ``set_deadline`` with a :func:`time.monotonic` value before the first ``fetch``,
    so retries stop in time for the cron minute instead of running past ``--max-seconds``.
    """

    def set_deadline(self, deadline: float) -> None:
        """Stop retrying (raise) rather than sleep past ``deadline``."""
        ...


@runtime_checkable
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


@runtime_checkable
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


@runtime_checkable
class Pushing(Protocol):
    """Optional: a poller whose server can say when something arrives (IMAP IDLE), so ``memex watch`` polls on that.

    ``listener`` builds the push connections (:class:`memex.push.Listener`), or None when this source has push off;
    the watcher runs them beside its polls (:mod:`memex.push`), and each wake-up starts the ordinary poll.
    """

    def listener(self) -> Listener | None:
        """This source's push connections, not opened yet (None: no push for it)."""
        ...


@runtime_checkable
class Paced(Protocol):
    """Optional: a poller that tells ``memex watch`` how often to poll it when no event comes (``watch_interval_seconds``,
    instead of the section's ``interval``): a source whose push covers new mail but not every change."""

    watch_interval_seconds: float


@runtime_checkable
class Settling(Protocol):
    """Optional: a poller that leaves files changed less than ``settle_seconds`` ago for a later poll.

    ``memex watch`` waits at least that long after the last change before it polls, or the poll it runs
    would leave the new file behind with no further event to bring it in.
    """

    settle_seconds: float


@runtime_checkable
class Inventoried(Protocol):
    """Optional: a poller whose source can be listed cheaply, so ``memex verify`` finds what the index lacks.

    ``inventory`` lists every message the source has up to ``cursor`` (what the polls have passed, so each should
    be stored), streamed, and an :class:`~memex.source.Unchecked` for each part it cannot list; ``reread`` renders
    the messages at some of those ``ref`` s again (with their revisions, blobs and attachments), for
    ``memex verify --repair`` to store through the same create-only path as a poll.
    """

    def inventory(self, cursor: Cursor) -> Iterator[Listed | Unchecked]:
        """Every message of the source up to ``cursor``, in the source's own order (and what cannot be listed)."""
        ...

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items of the messages at ``refs`` (from :meth:`inventory`), read again; refs gone since are skipped."""
        ...


@runtime_checkable
class MovesWhenIdle(Protocol):
    """Optional: a poller whose cursor moves past things that are not messages, poll after poll (signal-cli's receipts
    and typing notices). Without it, a cursor that moved in each of :attr:`memex.observe.health.Rules.hollow_after`
    polls in a row while nothing was stored is shown as ``STUCK`` (a plug-in that skips what it should store)."""

    moves_when_idle: bool


@runtime_checkable
class WholeRevisions(Protocol):
    """Optional: a poller whose revisions are each the whole message as it is now (``whole_revisions = True``), so
    ``memex verify --repair`` may store a missing original from one (see :attr:`memex.source.Item.whole`)."""

    whole_revisions: bool


@runtime_checkable
class Authenticating(Protocol):
    """Optional: a source that needs an interactive sign-in once (``memex auth NAME``); a poll never prompts."""

    def authenticate(
        self, say: Callable[[str], None], ask: Callable[[str], str] | None = None, open_browser: Callable[[str], Any] | None = None
    ) -> str:
        """Sign in (``say(line)`` prints to the user; ``ask(prompt)`` reads a pasted line; ``open_browser(url)``
        opens a page); return who signed in. Raise :class:`~memex.errors.AuthRequired` or ``SourceError`` on failure."""
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one poller can do beyond ``fetch``/``positions``/``close``: its bound methods, None where it lacks one.

    Made by :func:`capabilities` (the only place that looks a capability up); every caller reads this record.
    """

    head: Callable[[], Cursor] | None = None
    history: Callable[[datetime | None, datetime | None, Cursor], Iterator[Item]] | None = None
    history_count: Callable[[datetime | None, datetime | None, Cursor], int] | None = None
    validate_cursor: Callable[[Cursor], str | None] | None = None
    report: Callable[[], dict[str, Any]] | None = None
    stored: Callable[[Cursor], None] | None = None
    set_deadline: Callable[[float], None] | None = None
    use_deadline: Callable[[Deadline], None] | None = None
    watch_paths: Callable[[], list[Path]] | None = None
    settle_seconds: float = 0.0  # 0: changes need not settle
    listener: Callable[[], Listener | None] | None = None
    watch_interval_seconds: float = 0.0  # 0: the section's interval
    inventory: Callable[[Cursor], Iterator[Listed | Unchecked]] | None = None
    reread: Callable[[list[str]], Iterator[Item]] | None = None
    whole_revisions: bool = False
    moves_when_idle: bool = False
    authenticate: Callable[..., str] | None = None


# Each capability's Protocol, by the attribute names it declares (the names misspelt() compares against).
PROTOCOLS: tuple[type, ...] = (Headed, Historied, HistoryCounting, CursorValidating, Reporting, Spooling, DeadlineAware,
                               Interruptible, Watchable, Pushing, Paced, Settling, Inventoried, WholeRevisions,
                               MovesWhenIdle, Authenticating)  # fmt: skip
NAMES: frozenset[str] = frozenset(f.name for f in fields(Capabilities))
REQUIRED: frozenset[str] = frozenset({"name", "fetch", "positions", "close"})  # memex.source.Poller


def capabilities(poller: Any) -> Capabilities:
    """Resolve ``poller``'s optional capabilities into one record: the only place memex looks a capability up.

    A capability counts only when its whole ``Protocol`` is there (``inventory`` with ``reread``, ``stored`` with
    ``report``) and its methods are callable; a ``settle_seconds`` that is not a positive number counts as 0.
    """
    settle = poller.settle_seconds if isinstance(poller, Settling) else 0.0
    paced = poller.watch_interval_seconds if isinstance(poller, Paced) else 0.0
    spool = poller if isinstance(poller, Spooling) and callable(poller.stored) else None
    listed = poller if isinstance(poller, Inventoried) and callable(poller.inventory) and callable(poller.reread) else None
    return Capabilities(
        head=_method(poller, Headed, "head"),
        history=_method(poller, Historied, "history"),
        history_count=_method(poller, HistoryCounting, "history_count"),
        validate_cursor=_method(poller, CursorValidating, "validate_cursor"),
        report=_method(poller, Reporting, "report"),
        stored=spool.stored if spool is not None else None,
        set_deadline=_method(poller, DeadlineAware, "set_deadline"),
        use_deadline=_method(poller, Interruptible, "use_deadline"),
        watch_paths=_method(poller, Watchable, "watch_paths"),
        settle_seconds=_positive(settle),
        listener=_method(poller, Pushing, "listener"),
        watch_interval_seconds=_positive(paced),
        inventory=listed.inventory if listed is not None else None,
        reread=listed.reread if listed is not None else None,
        whole_revisions=isinstance(poller, WholeRevisions) and poller.whole_revisions is True,
        moves_when_idle=isinstance(poller, MovesWhenIdle) and poller.moves_when_idle is True,
        authenticate=_method(poller, Authenticating, "authenticate"),
    )


def _positive(value: Any) -> float:
    """A number of seconds a poller declares, or 0.0 where it is not a positive number."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0.0


def _method(poller: Any, protocol: type, name: str) -> Any:
    """``poller``'s bound method ``name`` if it follows ``protocol`` and the method is callable, else None."""
    if not isinstance(poller, protocol):
        return None
    method = getattr(poller, name)  # the one lookup by name: the Protocol above says the attribute is there
    return method if callable(method) else None


def misspelt(poller: Any) -> list[str]:
    """One line for each public attribute of ``poller`` that looks like a capability it does not have (a misspelt
    name, ``validate_cursr``), for each capability present but not usable (not callable, half a Protocol), []: none.

    A misspelt capability is never called: memex sees a poller without it (``memex cursor set`` then checks no shape,
    ``memex verify`` lists nothing). The conformance kit raises on any line here.
    """
    import difflib

    known = NAMES | REQUIRED
    problems: list[str] = []
    for attr in sorted(set(dir(poller))):
        if attr.startswith("_") or attr in known:
            continue
        close = [n for n in difflib.get_close_matches(attr, sorted(known), n=1, cutoff=0.85) if abs(len(n) - len(attr)) <= 2]
        if close:  # a letter or two off (validate_cursr, histroy), never a name of its own that shares a word (deadline)
            problems.append(f"{attr!r} looks like the capability {close[0]!r} misspelt: memex never calls {attr!r}")
    found = capabilities(poller)
    for protocol in PROTOCOLS:
        everything = _members(protocol)
        own = [m for m in everything if m in vars(protocol) or m in vars(protocol).get("__annotations__", {})]
        present = [m for m in own if hasattr(poller, m)]
        if not present:
            continue
        missing = [m for m in everything if not hasattr(poller, m)]
        if missing:
            problems.append(f"{protocol.__name__}: {', '.join(present)} without {', '.join(missing)}: memex does not use it")
        elif protocol not in (Settling, Paced, WholeRevisions, MovesWhenIdle) and not _resolved(found, everything):
            problems.append(f"{protocol.__name__}: {', '.join(everything)} not callable: memex does not use it")
    return problems


def _members(protocol: type) -> list[str]:
    """The attribute names a capability's Protocol declares (its own and its bases')."""
    return sorted(n for n in NAMES if n in dir(protocol) or n in getattr(protocol, "__annotations__", {}))


def _resolved(found: Capabilities, members: list[str]) -> bool:
    """Whether every member named made it into the record (a method callable, a value usable)."""
    return all(getattr(found, m) not in (None, False, 0.0) for m in members)
