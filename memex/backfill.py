"""Manual backfill: a source's whole history, or a date range of it, into the store.

``memex backfill SOURCE`` walks the poller's :meth:`~memex.source.HistoryPoller.history`
and stores every item the way a poll does (create-only, or get-compare-put
with ``rewrite``), but:

- It has its own run lock (``locks/<source>.backfill.lock``) and never takes
  the live poll's, so cron keeps polling the same source meanwhile; the
  overlap is absorbed by create-only uploads keyed by native ID.
- It never touches the live cursor. Its checkpoint lives in the same source
  section of ``cursors.json`` under the key ``"backfill"``, changed under the
  cursors lock by a function that only ever rewrites that key. The
  checkpoint is stored with the arguments (``since``, ``until``,
  ``rewrite``): the same command resumes, other arguments are refused
  until ``--restart`` (a finished backfill is simply replaced).
- One reader thread fills a bounded queue from the history iterator; a pool
  of upload threads shares one object store (one boto3 client, its
  connection pool sized to the threads). Memory stays flat: at most the
  queue, the items in flight and the completions above the frontier.
- Completions are tracked by sequence number. The checkpoint is the cursor
  of the last item of the contiguous prefix of completed items (the
  *frontier*): it never passes an item that is in flight, was not started,
  or failed. The store is synced before each save, and saves happen every
  few seconds or thousands of items, not per item.
- A failed upload is retried with backoff; if it still fails it is counted,
  logged (``backfill.item_failed``) and the frontier stops before it for
  good; the other items go on, and the run exits 1.
- SIGINT or SIGTERM stop reading, let the uploads in flight finish, save
  the checkpoint and exit 130 (interrupted; the same command continues).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from memex.config import Config
from memex.deadline import Deadline, Interrupted
from memex.errors import AlreadyRunning, ConfigError, MemexError, StoreError
from memex.live_cursor import BACKFILL_KEY
from memex.observe.logs import source_logger
from memex.records import rfc3339
from memex.registry import open_poller
from memex.runner import internal_error
from memex.source import Cursor, Item
from memex.state.backend import cursor_store, run_lock
from memex.state.cursors import Section, utc_now
from memex.state.files import require_state_dir
from memex.store.objects import open_store
from memex.uploader import Uploader

DEFAULT_WORKERS = 8
READ_AHEAD_PER_WORKER = 32
CHECKPOINT_SECONDS = 5.0
CHECKPOINT_ITEMS = 5000
PROGRESS_SECONDS = 5.0
TTY_REFRESH_SECONDS = 0.25
RETRIES = 3
RETRY_DELAY = 0.5
MAX_FAILURES = 100
SECTION_KEY = BACKFILL_KEY  # "backfill"

EXIT_INTERRUPTED = 130


class BackfillConflict(MemexError):
    """A stopped backfill of the source was started with other arguments (exit 2: rerun them or --restart)."""

    exit_code = 2


def lock_path(state_dir: Path, source: str) -> Path:
    """The run lock of a source's backfill (never the live poll's lock)."""
    return state_dir / "locks" / f"{source}.backfill.lock"


@dataclass
class BackfillResult:
    """What one backfill run did; also the fields of its ``backfill.finished`` line."""

    source: str
    status: str = "done"  # done | stopped | failed | error | refused
    new: int = 0
    dup: int = 0
    rewritten: int = 0
    quarantined: int = 0
    failed: int = 0
    elapsed_s: float = 0.0
    rate: float = 0.0
    resumed_from: dict[str, int] = field(default_factory=dict)
    checkpoint: dict[str, int] = field(default_factory=dict)
    done_total: int = 0  # items behind the checkpoint, over every run of this backfill
    error: str | None = None
    holder_pid: int | None = None
    exit_code: int = 0

    @property
    def processed(self) -> int:
        """Items stored (in any way) by this run."""
        return self.new + self.dup + self.rewritten + self.quarantined

    def summary(self) -> dict[str, Any]:
        """The summary's fields (counts and positions only, never message text)."""
        fields: dict[str, Any] = {
            "source": self.source,
            "status": self.status,
            "new": self.new,
            "dup": self.dup,
            "rewritten": self.rewritten,
            "quarantined": self.quarantined,
            "failed": self.failed,
            "elapsed_s": round(self.elapsed_s, 3),
            "rate": round(self.rate, 1),
            "resumed_from": self.resumed_from,
            "checkpoint": self.checkpoint,
            "done_total": self.done_total,
            "exit_code": self.exit_code,
        }
        for key in ("error", "holder_pid"):
            value = getattr(self, key)
            if value is not None:
                fields[key] = value
        return fields

    def human(self) -> str:
        """One line for a person: ``imessage: backfill done: 120 new, 3 dup ... in 4.2s (28.6/s)``."""
        if self.status == "refused":
            return f"{self.source}: backfill refused: {self.error}"
        parts = [f"{self.new} new", f"{self.dup} dup"]
        if self.rewritten:
            parts.append(f"{self.rewritten} rewritten")
        parts += [f"{self.quarantined} quarantined", f"{self.failed} failed"]
        line = f"{self.source}: backfill {self.status}: {', '.join(parts)} in {self.elapsed_s:.1f}s ({self.rate:.0f}/s)"
        if self.status == "stopped":
            line += "; progress saved, run the same command again to continue"
        if self.error:
            line += f"; {self.error}"
        return line


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


@dataclass
class _Counts:
    new: int = 0
    dup: int = 0
    rewritten: int = 0
    quarantined: int = 0
    failed: int = 0
    first_error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, outcome: str) -> None:
        with self.lock:
            if outcome == "new":
                self.new += 1
            elif outcome == "dup":
                self.dup += 1
            elif outcome == "rewritten":
                self.rewritten += 1
            elif outcome == "quarantined":
                self.quarantined += 1

    def fail(self, error: str) -> int:
        with self.lock:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error
            return self.failed

    @property
    def processed(self) -> int:
        return self.new + self.dup + self.rewritten + self.quarantined


def backfill_args(since: datetime | None, until: datetime | None, rewrite: bool) -> dict[str, Any]:
    """The arguments a checkpoint belongs to, as stored beside it."""
    return {
        "since": rfc3339(since) if since else None,
        "until": rfc3339(until) if until else None,
        "rewrite": rewrite,
    }


def _describe_args(args: dict[str, Any]) -> str:
    parts = [f"--since {args['since']}" if args.get("since") else "", f"--until {args['until']}" if args.get("until") else ""]
    parts.append("--rewrite" if args.get("rewrite") else "")
    return " ".join(p for p in parts if p) or "(no options)"


def backfill(
    cfg: Config,
    source: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    rewrite: bool = False,
    workers: int = DEFAULT_WORKERS,
    restart: bool = False,
    stop_event: threading.Event | None = None,
    console: IO[str] | None = None,
    retries: int = RETRIES,
    retry_delay: float = RETRY_DELAY,
    checkpoint_seconds: float = CHECKPOINT_SECONDS,
    checkpoint_items: int = CHECKPOINT_ITEMS,
    progress_seconds: float = PROGRESS_SECONDS,
    max_failures: int = MAX_FAILURES,
) -> BackfillResult:
    """Backfill ``source`` (all history, or ``[since, until)``) and log ``backfill.finished``.

    Raises :class:`~memex.errors.ConfigError` for an unknown source or one
    whose type cannot walk its history, and :class:`BackfillConflict` when a
    stopped backfill with other arguments is on record (unless ``restart``).
    Everything else (a second backfill running, upload failures, a source
    that cannot be read) is reported in the result's ``status`` and
    ``exit_code``: 0 done, 1 failed or refused, 130 stopped by a signal.
    """
    started = time.monotonic()
    stop_event = stop_event or threading.Event()
    src = cfg.source(source)
    require_state_dir(cfg.state_dir)
    log = source_logger(cfg.state_dir, source, console=console)
    result = BackfillResult(source=source)
    lock = run_lock(cfg, f"{source}.backfill", lock_path(cfg.state_dir, source))
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        result.status, result.holder_pid, result.exit_code = "refused", exc.pid, 1
        result.error = (
            f"another backfill of {source!r} is running (pid {exc.pid if exc.pid is not None else 'unknown'}); wait for it or stop it"
        )
        log.info("backfill.refused", holder_pid=exc.pid)
        return result
    try:
        with open_poller(src) as poller:
            if not callable(getattr(poller, "history", None)):
                raise ConfigError(f"source type {src.type!r} cannot walk its history yet; backfill is not available for it",
                                  path=cfg.path, key=f"sources.{source}.type")  # fmt: skip
            run = _Run(cfg, source, poller, log, result, since=since, until=until, rewrite=rewrite, workers=workers,
                       stop=stop_event, console=console, retries=retries, retry_delay=retry_delay,
                       checkpoint_seconds=checkpoint_seconds, checkpoint_items=checkpoint_items,
                       progress_seconds=progress_seconds, max_failures=max_failures)  # fmt: skip
            run.prepare(restart)
            run.execute()
    except (ConfigError, BackfillConflict):
        raise
    except MemexError as exc:
        result.status, result.error, result.exit_code = "error", str(exc), exc.exit_code
    except Exception as exc:
        result.status, result.error, result.exit_code = "error", internal_error(exc), 1
    finally:
        lock.release()
    result.elapsed_s = time.monotonic() - started
    result.rate = result.processed / result.elapsed_s if result.elapsed_s > 0 else 0.0
    fields = {k: v for k, v in result.summary().items() if k != "source"}
    if result.exit_code == 1 or result.status == "error":
        log.error("backfill.finished", **fields)
    else:
        log.info("backfill.finished", **fields)
    return result


class _Run:
    """One backfill run's moving parts (reader, uploaders, checkpoint, progress)."""

    def __init__(self, cfg: Config, source: str, poller: Any, log: Any, result: BackfillResult, *, since: datetime | None,
                 until: datetime | None, rewrite: bool, workers: int, stop: threading.Event, console: IO[str] | None,
                 retries: int, retry_delay: float, checkpoint_seconds: float, checkpoint_items: int, progress_seconds: float,
                 max_failures: int) -> None:  # fmt: skip
        self.cfg, self.source, self.poller, self.log, self.result = cfg, source, poller, log, result
        self.since, self.until, self.rewrite = since, until, rewrite
        self.workers = max(1, workers)
        self.stop = stop
        self.abort = threading.Event()  # internal stop: the source failed or too many uploads did
        self.console = console
        self.tty = bool(console is not None and console.isatty())
        self.retries, self.retry_delay = retries, retry_delay
        self.checkpoint_seconds, self.checkpoint_items = checkpoint_seconds, checkpoint_items
        self.progress_seconds = progress_seconds
        self.max_failures = max_failures
        self.cursors = cursor_store(cfg)
        self.args = backfill_args(since, until, rewrite)
        self.start: Cursor = None
        self.done_before = 0
        self.counts = _Counts()
        self.reader_error: str | None = None
        self.reader_config_error = False  # the reader failed on the configuration (a wrong path, a bad key)
        self._saved: tuple[Cursor, int] | None = None

    # -- the checkpoint ------------------------------------------------------
    def prepare(self, restart: bool) -> None:
        """Decide where to start (resume, restart, or refuse) and record the run as running."""
        state = self.cursors.section(self.source).get(SECTION_KEY)
        if isinstance(state, dict) and not restart:
            if state.get("args") == self.args:
                self.start = state.get("checkpoint")
                self.done_before = int(state.get("done", 0))
            elif state.get("status") != "done":
                where = self.poller.positions(state.get("checkpoint")) if state.get("checkpoint") else {}
                raise BackfillConflict(
                    f"{self.cursors.path}: a backfill of {self.source!r} with {_describe_args(state.get('args') or {})} "
                    f"stopped at {where or 'the start'}; run it again with the same options to continue, "
                    "or add --restart to start over with the new ones"
                )
        self.result.resumed_from = self.poller.positions(self.start) if self.start else {}
        self.result.checkpoint = self.result.resumed_from
        self.result.done_total = self.done_before
        live_start = self._live_start(state)
        now = utc_now()

        def change(section: Section) -> Section:
            section[SECTION_KEY] = {
                "args": self.args,
                "checkpoint": self.start,
                "positions": self.result.resumed_from,
                "done": self.done_before,
                "status": "running",
                "started_at": now,
                "updated_at": now,
            }
            if live_start is not None:
                section[SECTION_KEY]["live_start"] = live_start
            return section

        self.cursors.update(self.source, change)
        self.log.info("backfill.started", args=self.args, resumed_from=self.result.resumed_from, done_before=self.done_before,
                      workers=self.workers, restart=restart)  # fmt: skip

    def _live_start(self, state: Any) -> Cursor:
        """Where the first live poll of a ``start = "now"`` source begins once this backfill ran (see memex.live_cursor.start_now).

        The source's head before the walk begins (the walk covers everything up to it), recorded only while
        the source has no live cursor. An earlier backfill's record is kept: it is the earlier point, so
        nothing between the two is skipped.
        """
        if isinstance(state, dict) and state.get("live_start") is not None:
            return state["live_start"]
        if self.cursors.cursor(self.source) is not None or self.cfg.source(self.source).start != "now":
            return None
        head = getattr(self.poller, "head", None)
        return head() if callable(head) else None

    def save(self, frontier: Frontier, uploader: Uploader, status: str = "running") -> None:
        """Sync the store, then record the frontier (only the ``backfill`` key of the section changes)."""
        cursor, behind = frontier.snapshot()  # first the frontier, then sync: everything behind it completed before
        if status == "running" and (cursor, behind) == self._saved:
            return
        self._saved = (cursor, behind)
        uploader.sync()
        positions = self.poller.positions(cursor) if cursor else {}
        done = self.done_before + behind
        now = utc_now()

        def change(section: Section) -> Section:
            state = dict(section.get(SECTION_KEY) or {})
            state.update(args=self.args, checkpoint=cursor, positions=positions, done=done, status=status, updated_at=now)
            section[SECTION_KEY] = state
            return section

        self.cursors.update(self.source, change)
        self.result.checkpoint, self.result.done_total = positions, done

    # -- the run -------------------------------------------------------------
    def execute(self) -> None:
        """Read ahead, upload concurrently, checkpoint the frontier, report progress."""
        result = self.result
        total: int | None = None
        counter = getattr(self.poller, "history_count", None)
        if callable(counter):
            try:
                total = int(counter(self.since, self.until, self.start))
            except MemexError:
                total = None
        store = open_store(self.cfg.store, max_pool_connections=self.workers)
        # SIGTERM or Ctrl-C: requests in flight get the grace to finish, then a hung one is cut short (memex.deadline).
        on_stop = Deadline(None, self.stop)
        for part in (store, self.poller):
            use_deadline = getattr(part, "use_deadline", None)
            if use_deadline is not None:
                use_deadline(on_stop)
        getattr(store, "client", None)  # S3: create the one shared boto3 client here, before the threads
        uploader = Uploader(self.cfg, self.source, self.log, store=store)
        frontier = Frontier(self.start)
        items: queue.Queue[tuple[int, Item] | None] = queue.Queue(maxsize=self.workers * READ_AHEAD_PER_WORKER)
        halt = _Either(self.stop, self.abort)

        reader = threading.Thread(target=self._read, args=(items, frontier, halt), name=f"backfill-read-{self.source}", daemon=True)
        pool = [
            threading.Thread(target=self._upload, args=(items, frontier, uploader, halt), name=f"backfill-put-{i}", daemon=True)
            for i in range(self.workers)
        ]
        began = time.monotonic()
        reader.start()
        for t in pool:
            t.start()
        last_save = last_log = last_draw = began
        saved_behind = 0
        try:
            while True:
                alive = [t for t in pool if t.is_alive()]
                if not alive:
                    break
                alive[0].join(0.1)
                now = time.monotonic()
                _, behind = frontier.snapshot()
                if now - last_save >= self.checkpoint_seconds or behind - saved_behind >= self.checkpoint_items:
                    self.save(frontier, uploader)
                    last_save, saved_behind = now, behind
                if now - last_log >= self.progress_seconds:
                    self._log_progress(now - began, total)
                    last_log = now
                if self.tty and now - last_draw >= TTY_REFRESH_SECONDS:
                    self._draw(now - began, total)
                    last_draw = now
            reader.join()
        except BaseException:
            self.abort.set()  # a second Ctrl-C or a failed save: stop the threads, keep what is durable
            for t in [reader, *pool]:
                t.join(30)
            raise
        finally:
            on_stop.close()
            status = "done"
            if self.stop.is_set():
                status = "stopped"
            if self.counts.failed or self.reader_error or self.abort.is_set():
                status = "failed"
            if self.tty:
                self._draw(time.monotonic() - began, total, final=True)
            self.save(frontier, uploader, status=status)
        c = self.counts
        result.new, result.dup, result.rewritten, result.quarantined, result.failed = c.new, c.dup, c.rewritten, c.quarantined, c.failed
        result.status = status
        if status == "failed":
            result.exit_code = 1
            reasons = []
            if c.failed:
                reasons.append(f"{c.failed} message(s) could not be stored (first: {c.first_error}); the checkpoint stops before the first")
            if self.reader_error:
                reasons.append(f"reading the source failed: {self.reader_error}")
            if not self.reader_config_error:  # the same command would fail the same way: the fix is in the config
                reasons.append("run the same command again to retry")
            result.error = "; ".join(reasons)
        elif status == "stopped":
            result.exit_code = EXIT_INTERRUPTED

    def _read(self, items: queue.Queue[tuple[int, Item] | None], frontier: Frontier, halt: _Either) -> None:
        """The reader thread: history items, numbered, into the bounded queue; then one end mark per uploader."""
        walk: Iterator[Item] | None = None
        try:
            walk = iter(self.poller.history(self.since, self.until, self.start))
            window = self.workers * READ_AHEAD_PER_WORKER * 4
            for seq, item in enumerate(walk):
                while not halt.is_set() and not frontier.wait_for_room(seq, window, 0.1):
                    pass
                while not halt.is_set():
                    try:
                        items.put((seq, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if halt.is_set():
                    break
        except Interrupted:
            pass  # stopped while the source was answering: the run ends as stopped, the checkpoint before it
        except MemexError as exc:
            self.reader_error = str(exc)
            self.reader_config_error = not exc.retry_helps
            self.abort.set()
        except Exception as exc:
            self.reader_error = internal_error(exc)
            self.abort.set()
        finally:
            close = getattr(walk, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    pass
            for _ in range(self.workers):
                items.put(None)  # uploaders keep taking until they see it, so this never blocks for long

    def _upload(self, items: queue.Queue[tuple[int, Item] | None], frontier: Frontier, uploader: Uploader, halt: _Either) -> None:
        """An upload thread: store items (with retries) and report each to the frontier."""
        while True:
            entry = items.get()
            if entry is None:
                return
            seq, item = entry
            try:
                self._one(seq, item, frontier, uploader, halt)
            except Exception as exc:  # never lose an upload thread (the reader waits for each to take its end mark)
                frontier.block(seq)
                self.counts.fail(internal_error(exc))

    def _one(self, seq: int, item: Item, frontier: Frontier, uploader: Uploader, halt: _Either) -> None:
        if halt.is_set():
            frontier.block(seq)  # not started: the next run takes it
            return
        outcome, error = self._put(uploader, item)
        if outcome == "abandoned":
            frontier.block(seq)  # stopped between retries: the next run takes it
            return
        if outcome is None:
            frontier.block(seq)
            failed = self.counts.fail(error or "unknown error")
            ref = item.message.native_id if item.message else (item.failure.native_id if item.failure else None)
            self.log.warning("backfill.item_failed", native_id=ref, positions=self.poller.positions(item.cursor), error=error)
            if failed >= self.max_failures:
                self.abort.set()
            return
        self.counts.add(outcome)
        frontier.complete(seq, item.cursor)

    def _put(self, uploader: Uploader, item: Item) -> tuple[str | None, str | None]:
        error = None
        for attempt in range(self.retries + 1):
            if attempt:
                if self.stop.is_set():
                    return "abandoned", error
                time.sleep(self.retry_delay * 2 ** (attempt - 1))
            try:
                return uploader.put(item, rewrite=self.rewrite), None
            except Interrupted:
                return "abandoned", error  # cut short by the stop request: the next run takes it
            except StoreError as exc:
                error = str(exc)
            except MemexError as exc:
                return None, str(exc)
            except Exception as exc:
                return None, internal_error(exc)
        return None, error

    # -- progress ------------------------------------------------------------
    def _log_progress(self, elapsed: float, total: int | None) -> None:
        c = self.counts
        rate = c.processed / elapsed if elapsed > 0 else 0.0
        fields: dict[str, Any] = {"processed": c.processed, "new": c.new, "dup": c.dup, "rewritten": c.rewritten,
                                  "quarantined": c.quarantined, "failed": c.failed, "rate": round(rate, 1),
                                  "checkpoint": self.result.checkpoint}  # fmt: skip
        if total is not None:
            fields["total"] = total
            if rate > 0:
                fields["eta_s"] = round(max(total - c.processed - c.failed, 0) / rate, 1)
        self.log.info("backfill.progress", **fields)

    def _draw(self, elapsed: float, total: int | None, *, final: bool = False) -> None:
        if self.console is None:
            return
        c = self.counts
        done = c.processed + c.failed
        rate = done / elapsed if elapsed > 0 else 0.0
        if total:
            width = 24
            filled = min(width, int(width * done / total))
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} {100 * done / total:3.0f}%"
            eta = _duration(max(total - done, 0) / rate) if rate > 0 else "?"
            line = f"{self.source}: {bar} {rate:,.0f} msg/s ETA {eta}"
        else:
            line = f"{self.source}: {done:,} messages {rate:,.0f} msg/s"
        if c.failed:
            line += f" ({c.failed} failed)"
        self.console.write("\r\x1b[2K" + line + ("\n" if final else ""))
        self.console.flush()


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class _Either:
    """Set when either of two events is."""

    def __init__(self, a: threading.Event, b: threading.Event) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()
