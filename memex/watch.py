"""``memex watch``: poll sources as soon as their files change, beside cron or instead of it.

Each source gets one thread that polls it through :func:`memex.runner.poll`, the path cron uses: the same
run lock or lease (a cron poll and the watcher never poll one source at once; whichever finds it taken
logs ``poll skipped``), the same cursor, the same summary line. That line's ``trigger`` says why it ran:

- ``start``: once when the watcher starts;
- ``event``: after changes to the source's :meth:`~memex.capabilities.Watchable.watch_paths` (``events``: how
  many were coalesced), once they have been quiet for ``settle`` seconds (never less than the poller's own
  ``settle_seconds`` plus :data:`MARGIN`, see :class:`~memex.capabilities.Settling`: a poll any sooner would
  leave the new file for a later poll that no event would start), or at the latest :data:`BURST_FACTOR`
  settle periods after the first change of a burst that never quiets;
- ``more``: at once after a poll that stopped at ``--max-seconds-per-poll`` before catching up;
- ``retry``: after a poll that was skipped because another process held the lock (its poll may have
  listed the folder before the change), with backoff from :data:`RETRY_FIRST` up to the interval;
- ``push``: at once after the source's server said something arrived (``pushes``: how many times since the last
  poll; ``waited_s``: from the first of them to this poll's start), for a poller that is
  :class:`~memex.source.Pushing` (IMAP IDLE or NOTIFY, a signal-cli daemon): its listener runs in a thread of its own
  (:mod:`memex.push`) and is cut when the watcher stops;
- ``interval``: when the source's ``interval`` passed with no poll, in case an event was missed (an
  overflowed event queue, a network file system, a folder created after the watcher started, a push
  connection that is down).

A source whose poller is neither Watchable nor Pushing (Teams, Signal without a daemon) is polled every ``interval`` only, and the
``watch.start`` line says so (``mode=interval``): one ``memex watch`` service can stand in for cron.

SIGTERM or Ctrl-C sets the stop event: a poll in progress stops through its Deadline with its progress
saved, every thread ends, the observer stops. watchdog is imported only here, when watching starts.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memex.capabilities import capabilities
from memex.config import Config
from memex.error_lines import internal_error
from memex.errors import ConfigError, MemexError, describe_exc
from memex.observe.logs import config_logger
from memex.push import Link, Listener
from memex.registry import make_poller
from memex.runner import DEFAULT_MAX_SECONDS, PollResult, poll

if TYPE_CHECKING:
    from memex.read.socket import Render

DEFAULT_SETTLE = 1.0  # seconds of quiet after the last change before a poll
MARGIN = 0.5  # added to a poller's own settle_seconds (clock granularity, the poll's own start-up)
BURST_FACTOR = 10  # a burst that never quiets is polled this many settle periods after its first change
RETRY_FIRST = 1.0  # first wait after a skipped poll (doubling up to the source's interval)
# Changes that may be new data. Not opened / closed_no_write (reads), nor attrib, nor closed: a poll's own read of
# chat.db opens chat.db-wal for writing and closes it (IN_CLOSE_WRITE, written or not), which would start the next poll.
WRITE_EVENTS = frozenset({"created", "modified", "moved", "deleted"})


@dataclass(frozen=True)
class Target:
    """One watched folder: any change below it (``names`` None, recursive) or changes to the named files in it."""

    folder: Path
    names: frozenset[str] | None

    def matches(self, path: str) -> bool:
        """Whether a changed ``path`` is one this target stands for."""
        if not path:
            return False
        if self.names is None:
            return True
        return os.path.basename(path) in self.names and Path(os.path.dirname(path)) == self.folder


def targets(paths: list[Path]) -> list[Target]:
    """The folders to watch for ``paths``: a folder that exists as itself, anything else through its parent, by name."""
    whole: set[Path] = set()
    files: dict[Path, set[str]] = {}
    for path in paths:
        path = Path(os.path.abspath(path.expanduser()))
        if path.is_dir():
            whole.add(path)
        else:
            files.setdefault(path.parent, set()).add(path.name)
    out = [Target(folder, None) for folder in sorted(whole)]
    out += [Target(folder, frozenset(names)) for folder, names in sorted(files.items()) if folder not in whole]
    return out


@dataclass
class Plan:
    """How one source is watched: its folders (none: polled on its interval only) and its timings."""

    name: str
    targets: list[Target]
    watchable: bool
    settle: float
    interval: float
    listener: Listener | None = None  # its push connections (memex.capabilities.Pushing), opened when watching starts


def plan(cfg: Config, name: str, settle: float) -> Plan:
    """Validate ``name`` (ConfigError naming the key) and find what to watch for it."""
    conf = cfg.source(name)
    poller = make_poller(conf)
    try:
        can = capabilities(poller)
        paths: list[Path] | None = None
        if can.watch_paths is not None:  # memex.capabilities.Watchable
            try:
                paths = can.watch_paths()
            except MemexError as exc:  # its folders cannot be found now: polled on its interval, which reports why
                config_logger(cfg, name).warning("watch.unavailable", reason=str(exc))
                paths = []
        listener = can.listener() if can.listener is not None else None  # memex.capabilities.Pushing
    finally:
        try:
            poller.close()
        except Exception:
            pass
    if can.settle_seconds > 0:  # memex.capabilities.Settling
        settle = max(settle, can.settle_seconds + MARGIN)
    interval = can.watch_interval_seconds if can.watch_interval_seconds > 0 else float(conf.interval)  # Paced
    return Plan(name, targets(paths or []), paths is not None, settle, interval, listener)


@dataclass
class SourceWatch:
    """One source's changes, coalesced, and the loop that polls it."""

    cfg: Config
    plan: Plan
    max_seconds: float
    stop: threading.Event
    console: IO[str] | None
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _first: float | None = None  # monotonic time of the first change not yet polled for
    _last: float = 0.0
    _events: int = 0
    _pushed: float | None = None  # monotonic time of the first push wake-up not yet polled for
    _pushes: int = 0

    def notify(self) -> None:
        """A change that may mean new messages (called from the observer's thread)."""
        with self._cond:
            now = time.monotonic()
            if self._first is None:
                self._first = now
            self._last = now
            self._events += 1
            self._cond.notify_all()

    def pushed(self, reason: str) -> None:
        """The source's server said something may have arrived (a push listener's thread): poll at once."""
        with self._cond:
            if self._pushed is None:
                self._pushed = time.monotonic()
            self._pushes += 1
            self._cond.notify_all()

    def wake(self) -> None:
        """Make a waiting loop look at the stop event now."""
        with self._cond:
            self._cond.notify_all()

    def _next(self, next_interval: float, retry_at: float) -> dict[str, Any] | None:
        """Wait for the next reason to poll (the poll line's fields), or None once asked to stop."""
        settle = self.plan.settle
        with self._cond:
            while not self.stop.is_set():
                now = time.monotonic()
                if self._pushed is not None:
                    note = {"trigger": "push", "pushes": self._pushes, "waited_s": round(now - self._pushed, 3)}
                    self._pushed, self._pushes = None, 0
                    return note
                due = math.inf
                if self._first is not None:
                    due = min(self._last + settle, self._first + settle * BURST_FACTOR)
                    if now >= due:
                        note = {"trigger": "event", "events": self._events}
                        self._first, self._events = None, 0
                        return note
                if now >= retry_at:
                    return {"trigger": "retry"}
                if now >= next_interval:
                    return {"trigger": "interval"}
                wait = min(due, retry_at, next_interval) - now
                self._cond.wait(None if math.isinf(wait) else wait)
        return None

    def _poll(self, note: dict[str, Any]) -> PollResult | None:
        """One poll through the runner (its lock, cursor and line); None if it could not even start."""
        try:
            return poll(self.cfg, self.plan.name, max_seconds=self.max_seconds, stop=self.stop, console=self.console, note=note)
        except MemexError as exc:  # the state folder cannot be used: said once per attempt, the next one may work
            config_logger(self.cfg, self.plan.name, console=self.console).error("watch.error", error=str(exc), **note)
        except Exception as exc:  # a bug: one line, the watcher goes on
            config_logger(self.cfg, self.plan.name, console=self.console).error("watch.error", error=internal_error(exc), **note)
        return None

    def run(self) -> None:
        """Poll at start, then on changes, retries and the interval, until the stop event is set."""
        interval = self.plan.interval
        note: dict[str, Any] | None = {"trigger": "start"}
        backoff = 0.0
        while note is not None and not self.stop.is_set():
            result = self._poll(note)
            now = time.monotonic()
            next_interval, retry_at, note = now + interval, math.inf, None
            if result is not None and result.status == "skipped":
                backoff = min(max(RETRY_FIRST, backoff * 2), interval)
                retry_at = now + backoff
            else:
                backoff = 0.0
                if result is not None and result.stopped == "deadline" and result.status != "error":
                    note = {"trigger": "more"}
                wait = result.extra.get("retry_after_s") if result is not None else None
                if isinstance(wait, int | float) and wait > 0:  # memex.source.Paced: the server asked for a pause
                    next_interval, note = max(next_interval, now + float(wait)), None
            if note is None:
                note = self._next(next_interval, retry_at)


def _handler(watches: list[tuple[Target, SourceWatch]]) -> Any:
    """A watchdog event handler telling each source whose target matches a write event."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if event.event_type not in WRITE_EVENTS:
                return
            paths = (os.fsdecode(event.src_path), os.fsdecode(getattr(event, "dest_path", "") or ""))
            for target, source in watches:
                if any(target.matches(p) for p in paths):
                    source.notify()

    return Handler()


def watch(
    cfg: Config,
    names: list[str],
    *,
    stop: threading.Event,
    settle: float = DEFAULT_SETTLE,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    console: IO[str] | None = None,
    render: Render | None = None,
) -> None:
    """Watch and poll ``names`` until ``stop`` is set; every source is validated before anything starts.

    A source whose section is broken is reported (``watch.config_error``, on the console and in its log) and left out;
    the others are watched. Only when every named source is broken is that a ConfigError (exit 2). A watcher thread
    that dies on a bug stops the whole process with :class:`WatcherDied` (exit 1), never a silent gap (see there).
    """
    plans: list[Plan] = []
    broken: list[ConfigError] = []
    for name in names:
        cfg.source(name)  # an unknown name is a usage error: it stops everything
        try:
            plans.append(plan(cfg, name, settle))
        except ConfigError as exc:
            config_logger(cfg, name, console=console).error("watch.config_error", error=str(exc))
            broken.append(exc)
    if not plans:
        raise broken[0]
    from watchdog.observers import Observer

    sources = [SourceWatch(cfg, p, max_seconds, stop, console) for p in plans]
    by_folder: dict[tuple[Path, bool], list[tuple[Target, SourceWatch]]] = {}
    for source in sources:
        for target in source.plan.targets:
            by_folder.setdefault((target.folder, target.names is None), []).append((target, source))
    observer = Observer()
    observer.start()  # first, so that scheduling a folder that cannot be watched fails here, for that folder
    watched: dict[str, list[str]] = {s.plan.name: [] for s in sources}
    died: list[str] = []  # the line of each watcher thread that died (memex.watch._run_or_stop)
    reads = _read_socket(cfg, render)
    try:
        for (folder, recursive), pairs in by_folder.items():
            try:
                observer.schedule(_handler(pairs), str(folder), recursive=recursive)
            except OSError as exc:  # gone, unreadable, or out of inotify watches: the interval poll still runs
                for _target, source in pairs:
                    log = config_logger(cfg, source.plan.name, console=console)
                    log.warning("watch.unavailable", path=str(folder), reason=describe_exc(exc))
                continue
            for _target, source in pairs:
                watched[source.plan.name].append(str(folder))
        for source in sources:
            p = source.plan
            if p.listener is not None:
                mode, why = "push", {"reason": "its server says when mail arrives; polled every interval too"}
            elif watched[p.name]:
                mode, why = "events", {}
            else:
                mode, why = "interval", {} if p.watchable else {"reason": "its type has no files to watch; polled every interval"}
            config_logger(cfg, p.name, console=console).info(
                "watch.start", mode=mode, watched=watched[p.name], settle_s=p.settle if p.watchable else None, interval_s=p.interval, **why
            )
        threads = [threading.Thread(target=_run_or_stop, args=(s, died, console), name=f"watch-{s.plan.name}", daemon=True)
                   for s in sources]  # fmt: skip
        threads += [threading.Thread(target=_listen_or_stop, args=(s, died, console), name=f"push-{s.plan.name}", daemon=True)
                    for s in sources if s.plan.listener is not None]  # fmt: skip
        for thread in threads:
            thread.start()
        while not stop.wait(1.0):
            pass
        for source in sources:
            source.wake()
            if source.plan.listener is not None:
                source.plan.listener.close()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    finally:
        if reads is not None:
            reads.close()
        observer.stop()
        observer.join(5)
        for source in sources:  # memex status: no watcher serves these any more
            config_logger(cfg, source.plan.name).info("watch.stop")
    if died:
        raise WatcherDied(died[0])


def _read_socket(cfg: Config, render: Render | None) -> Any:
    """The read socket (:func:`memex.read.socket.serve_socket`; ``render``: how it renders a thin client's command
    line, :data:`memex.read.socket.Render`): while this watch runs, ``memex search`` and ``memex show`` ask it instead
    of opening the archive themselves. None when it cannot be made (the commands then answer in-process, as without a
    server): a watch never stops for it."""
    from memex.read.archive import Archive
    from memex.read.socket import serve_socket

    try:
        return serve_socket(Archive(cfg, follow_people=True), cfg.state_dir, render)
    except OSError:
        return None


class WatcherDied(MemexError):
    """A source's watcher thread died on a bug: ``memex watch`` stops (exit 1) rather than go on without that source.

    Restarting the thread in-process could spin on the same bug, and a process that keeps running with one source
    unwatched is the silent gap this prevents; exiting non-zero lets the service manager (systemd ``Restart=``,
    launchd ``KeepAlive``) restart the whole watcher, and its error shows in the log and the manager's status.
    """


def _listen_or_stop(source: SourceWatch, died: list[str], console: IO[str] | None) -> None:
    """Run one source's push listener (:mod:`memex.push`) until the stop; a bug in it stops the watcher, as in a poll loop."""
    listener = source.plan.listener
    assert listener is not None
    log = config_logger(source.cfg, source.plan.name, console=console)
    _run_or_stop(source, died, console, lambda: listener.listen(Link(source.stop, source.pushed, log)))


def _run_or_stop(source: SourceWatch, died: list[str], console: IO[str] | None, body: Callable[[], None] | None = None) -> None:
    """Run one source's watch loop (or ``body``); if it dies on an exception, log it and stop every watcher (saved progress is kept)."""
    try:
        (body or source.run)()
    except BaseException as exc:
        reason = internal_error(exc) if isinstance(exc, Exception) else type(exc).__name__
        line = (f"{source.plan.name}: its watcher stopped ({reason}); memex watch exits so that its service manager "
                "restarts it (the cursor keeps what was stored)")  # fmt: skip
        died.append(line)
        try:
            config_logger(source.cfg, source.plan.name, console=console).error("watch.died", error=line)
        finally:
            source.stop.set()
