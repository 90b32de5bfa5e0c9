"""One backfill run's moving parts: a reader thread, a pool of upload threads, the checkpoint and the progress.

One reader thread fills a bounded queue from the history iterator; a pool of upload threads shares one object
store. Completions go to the :class:`~memex.backfill.frontier.Frontier`, which the main thread saves every few
seconds or thousands of items (:class:`~memex.backfill.checkpoint.Checkpoint`). See :mod:`memex.backfill`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Any

from memex.backfill.checkpoint import Checkpoint, backfill_args
from memex.backfill.frontier import Frontier
from memex.backfill.report import BackfillResult, Counts, Progress
from memex.capabilities import Capabilities
from memex.config import Config
from memex.deadline import Deadline, Interrupted
from memex.error_lines import internal_error
from memex.errors import MemexError, StoreError
from memex.search import has_pending
from memex.search.build import Follower
from memex.source import Item
from memex.store import open_store
from memex.uploader import Uploader

READ_AHEAD_PER_WORKER = 32
TTY_REFRESH_SECONDS = 0.25
EXIT_INTERRUPTED = 130


class BackfillRun:
    """One backfill run's moving parts (reader, uploaders, checkpoint, progress)."""

    def __init__(self, cfg: Config, source: str, poller: Any, can: Capabilities, log: Any, result: BackfillResult, *, since: datetime | None,
                 until: datetime | None, rewrite: bool, workers: int, stop: threading.Event, console: IO[str] | None,
                 retries: int, retry_delay: float, checkpoint_seconds: float, checkpoint_items: int, progress_seconds: float,
                 max_failures: int) -> None:  # fmt: skip
        self.cfg, self.source, self.poller, self.can, self.log, self.result = cfg, source, poller, can, log, result
        self.since, self.until, self.rewrite = since, until, rewrite
        self.workers = max(1, workers)
        self.stop = stop
        self.abort = threading.Event()  # internal stop: the source failed or too many uploads did
        self.retries, self.retry_delay = retries, retry_delay
        self.checkpoint_seconds, self.checkpoint_items = checkpoint_seconds, checkpoint_items
        self.progress_seconds = progress_seconds
        self.max_failures = max_failures
        self.checkpoint = Checkpoint(cfg, source, poller, can, log, result, backfill_args(since, until, rewrite))
        self.counts = Counts()
        self.progress = Progress(source, self.counts, result, log, console)
        self.reader_error: str | None = None
        self.reader_config_error = False  # the reader failed on the configuration (a wrong path, a bad key)
        self.reader_exit_code = 1  # 2 when that failure is a ConfigError (a key to set): the exit code docs/backfill.md gives

    def execute(self) -> None:
        """Read ahead, upload concurrently, checkpoint the frontier, report progress."""
        result = self.result
        total: int | None = None
        counter = self.can.history_count  # memex.capabilities.HistoryCounting
        if counter is not None:
            try:
                total = int(counter(self.since, self.until, self.checkpoint.start))
            except MemexError:
                total = None
        store = open_store(self.cfg.store, max_pool_connections=self.workers)
        # SIGTERM or Ctrl-C: requests in flight get the grace to finish, then a hung one is cut short (memex.deadline).
        on_stop = Deadline(None, self.stop)
        use_deadline = getattr(store, "use_deadline", None)  # the S3 store's (memex.store), not a poller's
        if use_deadline is not None:
            use_deadline(on_stop)
        if self.can.use_deadline is not None:  # memex.capabilities.Interruptible
            self.can.use_deadline(on_stop)
        getattr(store, "client", None)  # S3: create the one shared boto3 client here, before the threads
        uploader = Uploader(self.cfg, self.source, self.log, store=store, deadline=on_stop)  # the deadline only ends a test's hold
        if self.cfg.search_index:
            uploader.stored = []  # handed to the search index at each checkpoint (memex.search.build)
            self.checkpoint.follower = Follower(self.cfg, self.source, "backfill", self.log, background=True)
        if self.cfg.search_index and has_pending(self.cfg.state_dir, self.source, "backfill"):
            self.checkpoint.follower.catch_up(store)  # a journal left by a crash between a checkpoint's sync and the index
        frontier = Frontier(self.checkpoint.start)
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
                    self.checkpoint.save(frontier, uploader)
                    last_save, saved_behind = now, behind
                if now - last_log >= self.progress_seconds:
                    self.progress.log(now - began, total)
                    last_log = now
                if self.progress.tty and now - last_draw >= TTY_REFRESH_SECONDS:
                    self.progress.draw(now - began, total)
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
            if self.progress.tty:
                self.progress.draw(time.monotonic() - began, total, final=True)
            try:
                self.checkpoint.save(frontier, uploader, status=status)
            finally:
                if self.checkpoint.follower is not None:
                    self.checkpoint.follower.finish()  # the last index update (a thread) done before the summary
        c = self.counts
        result.new, result.dup, result.rewritten, result.quarantined, result.failed = c.new, c.dup, c.rewritten, c.quarantined, c.failed
        result.repaired = uploader.repaired
        result.status = status
        if status == "failed":
            result.exit_code = self.reader_exit_code if self.reader_error and not c.failed else 1
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
            history = self.can.history
            assert history is not None  # memex.backfill refuses a source without one before this runs
            walk = iter(history(self.since, self.until, self.checkpoint.start))
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
            self.reader_exit_code = exc.exit_code
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
                if exc.needs_action:  # a full disk, a read-only store: every other item would fail the same way
                    self.abort.set()
                return None, str(exc)
            except Exception as exc:
                from memex.fs_errors import explain

                if explain(exc) is not None:
                    self.abort.set()
                return None, internal_error(exc)
        return None, error


class _Either:
    """Set when either of two events is."""

    def __init__(self, a: threading.Event, b: threading.Event) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()
