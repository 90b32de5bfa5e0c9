"""A backfill's frontier: its checkpoint as the contiguous prefix of completed items (:mod:`memex.backfill`).

Uploads finish out of order; the checkpoint may only name the cursor of an item behind which every item is
stored. Memory stays bounded by the items in flight.
"""

from __future__ import annotations

import threading

from memex.source import Cursor


class Frontier:
    """The checkpoint as the contiguous prefix of completed items, by sequence number.

    Items are numbered 0, 1, 2... in history order. :meth:`complete` records
    an item as durable-once-synced; the frontier is the cursor of the last
    item ``k`` such that every item ``0..k`` completed. :meth:`block` marks an
    item that will never complete in this run (failed, or dropped on stop):
    the frontier never passes it, and completions after it are not kept
    (so memory stays bounded by the items in flight).
    """

    def __init__(self, start: Cursor) -> None:
        self._lock = threading.Condition()
        self._next = 0  # lowest sequence number not yet in the contiguous prefix
        self._cursor: Cursor = start
        self._pending: dict[int, Cursor] = {}
        self._blocked: int | None = None

    def complete(self, seq: int, cursor: Cursor) -> None:
        """Item ``seq`` (whose cursor is ``cursor``) is stored."""
        with self._lock:
            if self._blocked is not None and seq > self._blocked:
                return
            self._pending[seq] = cursor
            while self._next in self._pending:
                self._cursor = self._pending.pop(self._next)
                self._next += 1
            self._lock.notify_all()

    def block(self, seq: int) -> None:
        """Item ``seq`` will not be stored in this run: the frontier stops before it."""
        with self._lock:
            if self._blocked is None or seq < self._blocked:
                self._blocked = seq
                for k in [k for k in self._pending if k > seq]:
                    del self._pending[k]
            self._lock.notify_all()

    def wait_for_room(self, seq: int, window: int, timeout: float) -> bool:
        """Wait until handing out ``seq`` keeps at most ``window`` items above the frontier; False on timeout.

        This bounds the completions kept above the frontier while one item is
        slow (retrying): the reader waits instead of racing ahead. Once an
        item is blocked nothing more is kept, so there is always room.
        """
        with self._lock:
            return self._lock.wait_for(lambda: self._blocked is not None or seq - self._next < window, timeout)

    def snapshot(self) -> tuple[Cursor, int]:
        """The frontier's cursor and how many items are behind it."""
        with self._lock:
            return self._cursor, self._next

    @property
    def pending(self) -> int:
        """Completions held above the frontier (bounded by the items in flight)."""
        with self._lock:
            return len(self._pending)
