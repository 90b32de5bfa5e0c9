"""Push in ``memex watch``: what a source's listener (IMAP IDLE or NOTIFY) tells the watcher, and what it shows.

A poller that can hear of new messages from its server (:class:`memex.source.Pushing`) hands the watcher a
:class:`Listener`; the watcher runs its :meth:`Listener.listen` in a thread of its own with a :class:`Link`. The
listener only says *when* (:meth:`Link.wake`): each wake-up starts the ordinary poll (the runner, its lock or lease,
its cursor), so push never changes what is stored, only how soon. It also says which of its connections are up
(:meth:`Link.up`, :meth:`Link.down`): the watcher logs each change as a ``watch.push`` line, which ``memex status``
and the dashboard read to show the source's mode (``push``, or ``interval`` while every connection is down: the
interval poll goes on either way).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

BACKOFF_FIRST = 1.0  # seconds before the first reconnect of a connection that failed or died
BACKOFF_MAX = 300.0  # the wait between reconnects doubles up to this


class Listener(Protocol):
    """One source's push connections, opened and kept by :meth:`listen`."""

    def listen(self, link: Link) -> None:
        """Keep the connections up until ``link.stop`` is set, calling ``link.wake`` on news; reconnects on its own."""
        ...

    def close(self) -> None:
        """Cut every connection now (from another thread), so that :meth:`listen` returns soon after the stop event."""
        ...


class Link:
    """The watcher's side of a listener: the stop event, the wake-up, and the state of each connection."""

    def __init__(self, stop: threading.Event, wake: Callable[[str], None], log: Any) -> None:
        self.stop = stop
        self._wake = wake
        self.log = log  # the source's logger (memex.observe.logs)
        self._lock = threading.Lock()
        self.since: dict[str, float] = {}  # connection -> wall time it came up (only those up)

    def wake(self, reason: str) -> None:
        """Something may have arrived (``reason``: ``new`` or ``connected``): poll the source soon."""
        self._wake(reason)

    def up(self, key: str, **fields: Any) -> None:
        """Connection ``key`` is open and listening (``fields``: how, which mailboxes) — logged as ``watch.push``."""
        with self._lock:
            self.since[key] = time.time()
            count = len(self.since)
        self.log.info("watch.push", state="up", connection=key, up=count, **fields)

    def down(self, key: str, reason: str, retry_s: float) -> None:
        """Connection ``key`` failed or died (``reason``); it is tried again in ``retry_s`` seconds."""
        with self._lock:
            was = self.since.pop(key, None)
            count = len(self.since)
        fields: dict[str, Any] = {"age_s": round(time.time() - was, 1)} if was is not None else {}
        self.log.warning("watch.push", state="down", connection=key, up=count, reason=reason,
                         retry_s=round(retry_s, 1), **fields)  # fmt: skip

    def closed(self, key: str) -> None:
        """Connection ``key`` was closed on purpose (a stop, or reopened with a fresh login): no line, no longer up."""
        with self._lock:
            self.since.pop(key, None)

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` unless asked to stop first; True when asked to stop."""
        return self.stop.wait(seconds)


def backoff(attempt: int, first: float = BACKOFF_FIRST, most: float = BACKOFF_MAX, rand: Callable[[], float] | None = None) -> float:
    """Seconds to wait before reconnect ``attempt`` (0, 1, ...): doubling from ``first`` up to ``most``, with jitter.

    The jitter (between half and all of the doubled wait) keeps the watchers of many accounts, cut off by one network
    outage, from reconnecting all at the same moment.
    """
    import random

    base: float = min(most, first * (2 ** min(attempt, 30)))
    draw: float = (rand or random.random)()
    return base * (0.5 + 0.5 * draw)
