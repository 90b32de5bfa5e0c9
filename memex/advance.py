"""Make durable, then advance: the one step of a poll that turns what was stored into progress.

A poll stores items as it reads them (:class:`memex.uploader.Uploader`), and from time to time (a group commit: every
few batches, at a poller's own boundary, at the end) :class:`Advance` makes them durable and only then moves the
cursor: the order that guarantees nothing is lost, whatever the crash. Whatever else must happen around that step
registers with it as a :class:`Step` and is called in a fixed place:

- ``before_commit(keys)``: the keys stored since the last commit, before the store's sync makes them durable (the
  search index journals them here, so a crash after the sync is caught up from the journal);
- ``advanced(cursor, positions)``: right after the cursor is saved, when every record up to it is durable (a spooling
  poller lets go of what backs them; the poll's result shows where it stands);
- ``after_commit(keys, store)``: last (the search index takes the keys in).

A cursor the poller hands back that memex cannot trust (:func:`memex.live_cursor.trusted_positions`) is never saved:
the first refusal is logged and raised, and every later commit of the poll does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from memex.errors import BadCursor
from memex.live_cursor import trusted_positions
from memex.source import Cursor, Poller


class Step(Protocol):
    """What registers with :class:`Advance` (each method may do nothing)."""

    def before_commit(self, keys: list[str]) -> None:
        """``keys`` were stored and are about to be made durable."""
        ...

    def advanced(self, cursor: Cursor, positions: dict[str, int]) -> None:
        """The cursor was saved at ``cursor``: every record up to it is durable."""
        ...

    def after_commit(self, keys: list[str], store: Any) -> None:
        """The commit that made ``keys`` durable is over."""
        ...


class Advance:
    """A poll's group commit: sync what the uploader stored, then save the cursor; the registered steps around it."""

    def __init__(self, name: str, poller: Poller, uploader: Any, cursors: Any, committed: Cursor, log: Any, *,
                 declared_reset: Callable[[], bool]) -> None:  # fmt: skip
        self.name, self.poller, self.uploader, self.cursors, self.log = name, poller, uploader, cursors, log
        self.committed = committed  # the cursor saved last (where the next poll would start)
        self.declared_reset = declared_reset  # whether the poller declared a reset in this poll (a step back allowed)
        self.steps: list[Step] = []
        self.refused = False

    def register(self, step: Step) -> None:
        """Call ``step`` at each commit from now on, after the steps registered before it."""
        self.steps.append(step)

    def __call__(self, current: Cursor) -> None:
        """Make everything stored so far durable, then save ``current`` (if it moved) as the cursor."""
        if self.refused:
            return
        committed = self.committed
        moved = current != committed
        positions: dict[str, int] = {}
        if moved:
            try:
                positions = trusted_positions(self.poller, self.name, committed, current, declared_reset=self.declared_reset())
            except BadCursor as exc:
                self.refused = True
                self.log.error("poller.bad_cursor", reason=exc.reason)
                raise
        batch = self.uploader.take_stored()
        if not moved and not batch:
            return
        if batch:
            for step in self.steps:
                step.before_commit(batch)  # journaled before the store's commit makes them durable
        self.uploader.sync()
        if moved:
            self.cursors.advance(self.name, committed, current, positions=positions)
            self.committed = current
            for step in self.steps:
                step.advanced(current, positions)
        if batch:
            for step in self.steps:
                step.after_commit(batch, self.uploader.store)  # a crash before this: the next run catches up from the journal
