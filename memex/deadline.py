"""One poll's time limit and stop request, carried to everything that waits on a network.

The runner builds one :class:`Deadline` per poll from ``--max-seconds`` and
the stop event that SIGTERM and Ctrl-C set, and hands it to the object store
client and to the poller (``use_deadline``). Whatever waits on a server then
bounds each wait by it:

- :meth:`Deadline.check` refuses to start a request once the poll must end;
- :meth:`Deadline.timeout` caps a socket timeout to the time left (plus the
  grace below);
- :meth:`Deadline.sleep` is a retry backoff that never sleeps past the end
  and wakes at once on a stop request;
- :meth:`Deadline.guard` runs a cancel callback (typically shutting the
  socket down) when a request is still in flight :data:`GRACE` seconds after
  the stop request or the end of the time, so a server that accepted the
  connection and never answers cannot hold the poll;
- :meth:`Deadline.call` runs a blocking call that offers no socket to shut
  (a library's client) in a helper thread and stops waiting for it at the
  same moment.

The grace lets a request that is merely slow finish and be counted: cutting
it at once would leave the server to complete a write that the poll never
counted (a duplicate on the next poll, never a loss). A poll therefore ends
within ``--max-seconds`` + :data:`GRACE` and within :data:`GRACE` of SIGTERM.

Each of them raises :class:`Interrupted` once the poll must end: with reason
``"signal"`` (asked to stop) or ``"deadline"`` (out of time). The runner
treats it as the end of the poll, not as a fault: what was stored before is
saved, and the next poll resumes.

Saving what the poll did (the cursor and the lease on S3 state) has its own deadline,
:meth:`Deadline.for_saving`: :data:`SAVE_SECONDS` past the poll's end and deaf to the stop request.
When that one runs out the cursor was not saved, which is not the normal end of a poll: it raises
:class:`SaveTimedOut`, an error of its own (exit 1, naming the object), never :class:`Interrupted`.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from memex.errors import MemexError

T = TypeVar("T")

SAVE_SECONDS = 10.0  # how long after the poll's end writing its results (cursor, lease) may still take
GRACE = 2.0  # seconds a request in flight may still take after the stop request or the end of the time
MIN_TIMEOUT = 0.05  # a socket timeout of 0 would mean non-blocking; the deadline check follows anyway
WATCH_SLICE = 0.25  # how often the watcher looks at whether the deadline is closed (a stop request wakes it at once)


class Interrupted(MemexError):
    """A wait was cut short because the poll was asked to stop (``reason="signal"``) or ran out of time (``"deadline"``)."""

    def __init__(self, reason: str, what: str) -> None:
        self.reason = reason
        self.what = what
        if reason == "signal":
            text = f"{what}: cut off by a stop request (SIGTERM or Ctrl-C); progress so far is saved"
        else:
            text = f"{what}: no answer before the poll's time limit (--max-seconds); progress so far is saved, the next poll resumes"
        super().__init__(text)


class SaveTimedOut(MemexError):
    """Saving a poll's results (its cursor, its lease) got no answer within :data:`SAVE_SECONDS` of the poll's end.

    Not an :class:`Interrupted`: the poll's progress is *not* recorded, so it must never pass for the normal stop.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(
            f"{what}: no answer from the state server {SAVE_SECONDS:g}s past the poll's time limit, so the cursor is not saved "
            "(what was stored stays; the next poll goes over it again and skips it as duplicates); check the state server"
        )


class Deadline:
    """When a poll must end (``at``, a :func:`time.monotonic` value, None for never) and its stop request."""

    def __init__(self, at: float | None = None, stop: threading.Event | None = None, *, grace: float = GRACE, saving: bool = False) -> None:
        self.at = at
        self.saving = saving  # the deadline of saving the results: its end raises SaveTimedOut
        self.grace = grace
        self.unbounded = at is None and stop is None  # nothing can ever interrupt it: guards and calls cost nothing
        self.stop = stop if stop is not None else threading.Event()
        self._lock = threading.Lock()
        self._cancels: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._fired = False
        self._closed = False
        self._watcher: threading.Thread | None = None
        self._saving: Deadline | None = None
        self._generation = 0  # bumped by extend(): a watcher of an earlier end leaves the guards alone

    @classmethod
    def after(cls, seconds: float | None, stop: threading.Event | None = None) -> Deadline:
        """A deadline ``seconds`` from now (None: none, only the stop request)."""
        return cls(None if seconds is None else time.monotonic() + seconds, stop)

    def for_saving(self) -> Deadline:
        """The deadline of the writes that record what the poll did (cursor and lease on S3 state).

        :data:`SAVE_SECONDS` after this one and deaf to the stop request, so progress is saved after
        SIGTERM or at the end of the time, yet a hung state server cannot hold the poll forever.
        """
        if self._saving is None:
            self._saving = Deadline(None if self.at is None else self.at + SAVE_SECONDS, None, grace=self.grace, saving=True)
        return self._saving

    # -- asking ------------------------------------------------------------------------------------
    def remaining(self) -> float:
        """Seconds left (``inf`` without a time limit; 0 once passed)."""
        if self.at is None:
            return float("inf")
        return max(0.0, self.at - time.monotonic())

    @property
    def reason(self) -> str | None:
        """``"signal"`` once a stop was requested, ``"deadline"`` once the time is up, else None."""
        if self.stop.is_set():
            return "signal"
        if self.at is not None and time.monotonic() >= self.at:
            return "deadline"
        return None

    def _ended(self, reason: str, what: str) -> MemexError:
        """The error for a wait cut short: :class:`Interrupted`, or :class:`SaveTimedOut` for the saving deadline."""
        return SaveTimedOut(what) if self.saving else Interrupted(reason, what)

    def check(self, what: str) -> None:
        """Raise :class:`Interrupted` (naming ``what``) if the poll must end now (:class:`SaveTimedOut` when saving)."""
        reason = self.reason
        if reason is not None:
            raise self._ended(reason, what)

    def timeout(self, cap: float, what: str) -> float:
        """A socket timeout: ``cap`` or the time left plus the grace, whichever is shorter; raises if no time is left."""
        self.check(what)
        return max(MIN_TIMEOUT, min(cap, self.remaining() + self.grace))

    def sleep(self, seconds: float, what: str) -> None:
        """Back off ``seconds`` before a retry; raise instead if the retry could not start before the end.

        A stop request ends the sleep at once.
        """
        self.check(what)
        if seconds >= self.remaining():
            raise self._ended("deadline", what)
        if self.stop.wait(seconds):
            raise self._ended("signal", what)

    # -- cutting a request short -------------------------------------------------------------------
    @contextmanager
    def guard(self, cancel: Callable[[], None]) -> Iterator[None]:
        """While the block runs, call ``cancel`` (once) if it is still running :attr:`grace` seconds after the poll's end.

        ``cancel`` must make the blocked call return soon (``socket.shutdown`` does, from any
        thread); the caller then sees a connection error and calls :meth:`check`.
        """
        if self.unbounded:
            yield
            return
        key = next(self._ids)
        with self._lock:
            fired = self._fired
            if not fired:
                self._cancels[key] = cancel
                self._start_watcher()
        if fired:
            _quietly(cancel)
        try:
            yield
        finally:
            with self._lock:
                self._cancels.pop(key, None)

    def call(self, fn: Callable[[], T], what: str, *, abandon: Callable[[], None] | None = None) -> T:
        """Run ``fn`` in a helper thread and return its result, or raise :class:`Interrupted` when the poll must end.

        For blocking calls that expose no socket to shut down (a library client's request, a connect
        that waits for a greeting). On interruption ``abandon`` is called to make the helper thread
        finish soon (closing its connection); the thread is left to end on its own.
        """
        self.check(what)
        if self.unbounded:
            return fn()
        box: list[T] = []
        failure: list[BaseException] = []
        done = threading.Event()

        def run() -> None:
            try:
                box.append(fn())
            except BaseException as exc:
                failure.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name="memex-deadline-call", daemon=True).start()
        ended: float | None = None
        while not done.wait(max(0.01, min(WATCH_SLICE, self.remaining()) if ended is None else WATCH_SLICE)):
            reason = self.reason
            if reason is None:
                continue
            now = time.monotonic()
            ended = now if ended is None else ended
            if now - ended >= self.grace:
                if abandon is not None:
                    _quietly(abandon)
                raise self._ended(reason, what)
        if failure:
            raise failure[0]
        return box[0]

    def extend(self, seconds: float) -> None:
        """End the poll ``seconds`` from now instead (once its time ran out with work in hand); saving moves along.

        For the runner's one exception to the time limit: a first batch read past the end, stored in the
        :data:`GRACE` after it (:mod:`memex.runner`). Guards entered from now on are watched against the new end.
        """
        with self._lock:
            self.at = time.monotonic() + seconds
            self._generation += 1
            self._fired = False
            self._watcher = None  # the next guard starts a watcher of the new end
        if self._saving is not None:
            self._saving.extend(seconds + SAVE_SECONDS)

    def close(self) -> None:
        """Stop the watcher thread (the poll is over); guards entered later still honour a stop."""
        with self._lock:
            self._closed = True
        if self._saving is not None:
            self._saving.close()

    # -- the watcher -------------------------------------------------------------------------------
    def _start_watcher(self) -> None:
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, args=(self._generation,), name="memex-deadline", daemon=True)
            self._watcher.start()

    def _watch(self, generation: int) -> None:
        while True:
            if self.stop.wait(min(WATCH_SLICE, self.remaining())) or self.reason is not None:
                break
            with self._lock:
                if self._closed or generation != self._generation:
                    if generation == self._generation:
                        self._watcher = None
                    return
        cut = time.monotonic() + self.grace  # a request still in flight then is cut short
        while (left := cut - time.monotonic()) > 0:
            time.sleep(min(WATCH_SLICE, left))
            with self._lock:
                if self._closed or generation != self._generation:
                    if generation == self._generation:
                        self._watcher = None
                    return
        with self._lock:
            if generation != self._generation:  # extended meanwhile: a watcher of the new end takes over
                return
            self._fired = True
            cancels = list(self._cancels.values())
            self._cancels.clear()
        for cancel in cancels:
            _quietly(cancel)


def _quietly(cancel: Callable[[], None]) -> None:
    try:
        cancel()
    except Exception:
        pass  # the connection may be closed already; the caller's check() reports the interruption


NEVER = Deadline()
"""No time limit and no stop request: for callers outside a poll (backfill, status, tests)."""
