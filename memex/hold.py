"""A test hook: hold a poll or a backfill at a known item, so a test can signal or kill it there.

A test that races SIGTERM, SIGKILL or a time limit against work in progress must know the work is in
progress when the signal lands, whatever the machine's speed. With ``MEMEX_TEST_HOLD=N:GATE`` in the
environment, the N-th item this process hands to the store (counted from 1 across every poll and backfill
thread of the process) and every item after it are held before they are stored, so the whole process pauses
there, however many threads it runs: it writes ``GATE.held`` (holding its pid) and each held item waits until
the file ``GATE`` exists, the poll is asked to stop or runs out of time, or :data:`HOLD_LIMIT` seconds pass,
whichever comes first; then it goes on as if nothing happened. The process pauses once: after that no item is held
(a ``memex watch`` process runs its next polls freely).

Only tests set the variable. Unset (always, in real use), :func:`hold_from_env` returns None and the uploader
pays one ``is None`` check per item. A malformed value is ignored, never a failure of the poll.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memex.deadline import Deadline

HOLD_ENV = "MEMEX_TEST_HOLD"
HOLD_LIMIT = 300.0  # a test that never opens the gate still ends: the hold lets go after this many seconds
HOLD_SLICE = 0.01  # how often a hold looks for the gate


class Hold:
    """Hold the ``at``-th item and every later one until ``gate`` exists (or the poll must end).

    A plain class, not a dataclass: every poll imports this module, and defining a dataclass costs about a millisecond.
    """

    def __init__(self, at: int, gate: str) -> None:
        self.at = at
        self.gate = gate
        self._count = itertools.count(1)
        self._give_up = 0.0  # when every hold lets go (set by the first), so later items never wait the limit again
        self._over = False  # the pause ended (gate, stop, time limit or HOLD_LIMIT): later items, later polls go on

    def reached(self, deadline: Deadline | None) -> None:
        """Count one item; from the ``at``-th on, announce ``GATE.held`` and wait for the gate, the deadline or the limit."""
        if next(self._count) < self.at or self._over:
            return
        held = self.gate + ".held"
        tmp = f"{held}.{threading.get_ident()}.tmp"  # one per thread: threads may arrive together
        with open(tmp, "w") as fh:  # renamed into place, so a test never reads it half written
            fh.write(str(os.getpid()))
        os.replace(tmp, held)
        if not self._give_up:
            self._give_up = time.monotonic() + HOLD_LIMIT
        while not os.path.exists(self.gate) and time.monotonic() < self._give_up:
            if deadline is None:
                time.sleep(HOLD_SLICE)
            elif deadline.reason is not None or deadline.stop.wait(HOLD_SLICE):
                break
        self._over = True


@functools.cache
def hold_from_env() -> Hold | None:
    """The hold ``MEMEX_TEST_HOLD`` asks for in this process, or None (the variable unset or malformed)."""
    at, sep, gate = os.environ.get(HOLD_ENV, "").partition(":")
    if not sep or not gate or not at.isdigit() or int(at) < 1:
        return None
    return Hold(int(at), gate)


@functools.cache
def point_from_env(point: str) -> Hold | None:
    """The hold ``MEMEX_TEST_HOLD=POINT:GATE`` asks for at the named ``point`` (e.g. ``index``: after the store's commit,
    before the search index is updated), or None. The process pauses there once, as for a held item."""
    at, sep, gate = os.environ.get(HOLD_ENV, "").partition(":")
    if not sep or not gate or at != point:
        return None
    return Hold(1, gate)
