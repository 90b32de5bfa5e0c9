"""The poll cycle: read the cursor, fetch, store, then (and only then) advance the cursor.

One poll of one source:

1. take the source's run lock without waiting (held: log ``poll skipped``, exit 0);
2. read the source's cursor (a corrupt cursors file stops the poll, untouched);
3. fetch a bounded batch after the cursor, store each item create-only
   (duplicates counted, unparseable records quarantined), in order;
4. repeat until caught up, out of time (``max_seconds``) or asked to stop;
5. after every few batches (``COMMIT_ITEMS``, ``COMMIT_SECONDS``), after a
   batch shorter than asked for, and at the end, make the writes durable, then compare-and-swap the cursor to the last
   item that was stored: never past a failure, never backward unless the
   poller declared a reset;
6. write one summary line.

An idle poll never opens the object store, so it makes no network request
and never imports boto3. Items are stored by :class:`memex.uploader.Uploader`; where a ``start = "now"``
source begins and which cursor may be saved is :mod:`memex.live_cursor`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from memex.advance import Advance
from memex.capabilities import Capabilities, capabilities
from memex.config import Config
from memex.deadline import GRACE, Deadline, Interrupted
from memex.error_lines import debug_enabled, internal_error
from memex.errors import AlreadyRunning, AuthRequired, BadCursor, CursorConflict, LeaseLost, MemexError, StateError
from memex.live_cursor import refuse_bad_stored, start_now
from memex.observe import heartbeat, metrics
from memex.observe.logs import config_logger
from memex.registry import open_poller
from memex.search import has_pending
from memex.source import Batch, Cursor, Poller, describe, moved_backward
from memex.state.backend import claimed_section, cursor_store, run_lock
from memex.state.files import require_state_dir
from memex.uploader import Uploader

DEFAULT_MAX_SECONDS = 50.0
DEFAULT_BATCH = 500
# The cursor (and the store's sync before it) is committed after a batch once this many items or seconds have
# gone by since the last commit, and always when the poll ends: a fast source pays one flush per few batches,
# a slow one still saves its progress every few seconds. A crash costs at most that much re-reading (duplicates).
COMMIT_ITEMS = 5000
COMMIT_SECONDS = 1.0
# A first batch whose read ran past the time limit is not dropped: it gets this many seconds more to be stored,
# so a source slower than --max-seconds still moves on each poll (and says so) instead of showing idle for ever.
SLOW_GRACE = GRACE
# The index work of a poll stops this long after its time limit (or at once on SIGTERM): what is not yet in the index
# then stays in the journal for the next poll, so the poll ends within --max-seconds + GRACE however slow the index.
INDEX_GRACE = GRACE / 4


class TooSlow(MemexError):
    """The poll's first batch took longer to read than the time limit, and none of it could be stored after it."""


@dataclass
class PollResult:
    """What one poll did; also the fields of its summary log line."""

    source: str
    status: str = "idle"  # ok | idle | skipped | error
    new: int = 0
    dup: int = 0
    dup_expected: int = 0  # of ``dup``: duplicates the poller said it expected (a renamed Maildir file, ...)
    repaired: int = 0  # of ``new``: objects that replaced a damaged one (empty, truncated) found at their name
    quarantined: int = 0
    cursor_before: str = "-"
    cursor_after: str = "-"
    positions_before: dict[str, int] = field(default_factory=dict)
    positions_after: dict[str, int] = field(default_factory=dict)
    duration_ms: int = 0
    error: str | None = None
    exit_code: int = 0
    reset: str | None = None
    stopped: str | None = None  # "deadline" or "signal" when the poll ended before catching up
    holder_pid: int | None = None
    holder_host: str | None = None  # with S3 state: the host holding the lease
    lease_epoch: int | None = None  # with S3 state: the fencing epoch this poll held
    auth_required: bool | None = None  # the source's login is gone: `memex auth SOURCE` (health state AUTH)
    slow_read_s: float | None = None  # the first batch arrived past the time limit, after this many seconds (SLOW_GRACE)
    needs_action: bool | None = None  # no poll can succeed until the user acts (a full disk, a hand-edited cursor): FAILING at once
    extra: dict[str, Any] = field(default_factory=dict)  # the poller's own fields (a spool's count and oldest age)
    unsaid: bool = False  # the error reached neither the log nor the console (the log itself failed): the CLI says it

    def log_fields(self) -> dict[str, Any]:
        """The summary line's fields (no message text, ever)."""
        fields: dict[str, Any] = {
            "status": self.status,
            "new": self.new,
            "dup": self.dup,
            "quarantined": self.quarantined,
            "cursor_before": self.cursor_before,
            "cursor_after": self.cursor_after,
            "positions_before": self.positions_before,
            "positions_after": self.positions_after,
            "duration_ms": self.duration_ms,
        }
        if self.dup_expected:
            fields["dup_expected"] = self.dup_expected
        if self.repaired:
            fields["repaired"] = self.repaired
        fields.update({k: v for k, v in self.extra.items() if k not in fields})
        for key in (
            "error",
            "reset",
            "stopped",
            "holder_pid",
            "holder_host",
            "lease_epoch",
            "auth_required",
            "slow_read_s",
            "needs_action",
        ):
            value = getattr(self, key)
            if value is not None:
                fields[key] = value
        return fields


def run_lock_path(state_dir: Path, source: str) -> Path:
    """The run lock of a source's live poll."""
    return state_dir / "locks" / f"{source}.poll.lock"


def poll(
    cfg: Config,
    name: str,
    *,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    stop: threading.Event | None = None,
    console: IO[str] | None = None,
    batch_size: int = DEFAULT_BATCH,
    note: dict[str, Any] | None = None,
) -> PollResult:
    """Poll one source once and log its summary line; never raises for a source's own faults.

    ``note`` adds fields to the summary line (``memex watch``: what started the poll); no message text.
    """
    started = time.monotonic()
    stop = stop or threading.Event()
    deadline = Deadline(started + max_seconds, stop)  # reaches the store client and the poller (memex.deadline)
    require_state_dir(cfg.state_dir)
    log = config_logger(cfg, name, console=console)
    try:
        lock = run_lock(cfg, name, run_lock_path(cfg.state_dir, name), fenced_source=name, deadline=deadline.for_saving(), log=log)
    except OSError as exc:
        from memex.fs_errors import explain

        raise (explain(exc) or StateError(f"cannot use its locks folder ({exc.strerror})", path=cfg.state_dir / "locks")) from None
    result = PollResult(source=name, extra=dict(note or {}))
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        result.status, result.holder_pid, result.holder_host = "skipped", exc.pid, exc.host
        result.duration_ms = int((time.monotonic() - started) * 1000)
        log.info("poll", **result.log_fields())
        metrics.after_poll(cfg, name, result.log_fields(), log)  # no heartbeat: the running poll reports
        return result
    except MemexError as exc:  # the run lock's home (S3 state) refused or did not answer in time
        result.status, result.error, result.exit_code = "error", str(exc), exc.exit_code
        result.duration_ms = int((time.monotonic() - started) * 1000)
        log.error("poll", **result.log_fields())
        metrics.after_poll(cfg, name, result.log_fields(), log)
        deadline.close()
        return result
    result.lease_epoch = lock.epoch
    beat = None
    try:  # from here the lock is released however the poll ends (its finally)
        beat = heartbeat.start(cfg, name, log)  # None unless the source has a heartbeat_url
        with open_poller(cfg.source(name)) as poller:
            can = capabilities(poller)
            try:
                _run(cfg, name, poller, can, result, log, deadline=deadline, stop=stop, batch_size=batch_size, epoch=lock.epoch,
                     claimed=claimed_section(lock))  # fmt: skip
            finally:
                if can.report is not None:  # memex.capabilities.Reporting
                    result.extra = {**result.extra, **can.report()}
    except Interrupted as exc:  # a request cut short by SIGTERM or --max-seconds; what was stored is saved
        result.stopped = exc.reason
        if exc.reason == "deadline" and not _progress(result):
            result.status, result.error, result.exit_code = "error", str(exc), 1  # no progress in the whole budget: a hang
        else:
            result.status = "ok" if (result.new or result.dup or result.quarantined) else "idle"
    except LeaseLost as exc:  # fenced: another host took the lease over while this poll was paused
        log.error("cursor.fenced", lease=str(lock.path), epoch=lock.epoch)
        result.status, result.error, result.exit_code = "error", str(exc), exc.exit_code
    except MemexError as exc:
        result.status, result.error, result.exit_code = "error", str(exc), exc.exit_code
        if isinstance(exc, AuthRequired):
            result.auth_required = True
        if exc.needs_action:
            result.needs_action = True
    except Exception as exc:  # the environment's fault (memex.fs_errors) or a bug: one line, the process lives on for --all
        result.status, result.error, result.exit_code = "error", internal_error(exc), 1
        if _environment(exc):
            result.needs_action = True
        if debug_enabled():
            import traceback

            log.error("internal.traceback", traceback="".join(traceback.format_exception(exc)))
    finally:
        deadline.close()
        lock.release()
    result.duration_ms = int((time.monotonic() - started) * 1000)
    if result.status == "error":
        log.error("poll", **result.log_fields())
    else:
        log.info("poll", **result.log_fields())
    if beat is not None:
        beat.finish(result.log_fields(), name)
    metrics.after_poll(cfg, name, result.log_fields(), log)
    return result


def _run(
    cfg: Config,
    name: str,
    poller: Poller,
    can: Capabilities,
    result: PollResult,
    log: Any,
    *,
    deadline: Deadline,
    stop: threading.Event,
    batch_size: int,
    epoch: int | None = None,
    claimed: Any = None,
) -> None:
    primed = (name, claimed) if claimed is not None else None  # what the lease's claim wrote: the first read needs no GET
    cursors = cursor_store(cfg, epoch=epoch, deadline=deadline.for_saving(), primed=primed)
    committed: Cursor = cursors.cursor(name)
    if committed is not None:
        refuse_bad_stored(poller, can, name, committed, cursors.where(name))
    if can.use_deadline is not None:  # memex.capabilities.Interruptible
        can.use_deadline(deadline)
    elif can.set_deadline is not None and deadline.at is not None:  # DeadlineAware: the time limit only
        can.set_deadline(deadline.at)
    if committed is None and cfg.source(name).start == "now":
        committed = start_now(cursors.section(name), name, poller, can, cursors, log)
    current: Cursor = committed
    result.positions_before = poller.positions(committed) if committed is not None else {}
    result.cursor_before = describe(result.positions_before)
    result.positions_after, result.cursor_after = result.positions_before, result.cursor_before
    uploader = Uploader(cfg, name, log, deadline=deadline)
    uploader.stored = [] if cfg.search_index else None  # handed to the search index after each commit (memex.search.build)
    index = _Index(cfg, name, log, deadline)
    if cfg.search_index and has_pending(cfg.state_dir, name, "poll"):  # a journal left by a crash: one stat; no SQLite when there is none
        index.follower = _follower(cfg, name, log, deadline)
        index.follower.catch_up(uploader.store)
    commit = Advance(name, poller, uploader, cursors, committed, log, declared_reset=lambda: result.reset is not None)
    commit.register(index)
    if can.stored is not None:
        commit.register(_Released(can.stored))
    commit.register(_Shown(result))

    since_commit, last_commit = 0, time.monotonic()
    try:
        while True:
            if stop.is_set():
                result.stopped = "signal"
                break
            if deadline.reason is not None:
                result.stopped = deadline.reason
                break
            began = time.monotonic()
            batch: Batch = poller.fetch(current, batch_size)
            if batch.items and result.slow_read_s is None and deadline.reason == "deadline" and not _progress(result):
                # Read past the time limit before anything was stored: what was read is stored in SLOW_GRACE more,
                # never dropped (dropped, the next poll would read the same batch and drop it again, for ever).
                result.slow_read_s = round(time.monotonic() - began, 1)
                deadline.extend(SLOW_GRACE)
            _check_direction(poller, name, current, batch, log, result)
            fetched_after = current
            finished = True
            handled = 0  # items of the batch stored (or quarantined) so far
            try:
                for item in batch.items:
                    if deadline.reason is not None:
                        result.stopped = deadline.reason
                        finished = False
                        break
                    outcome = uploader.put(item)
                    if outcome in ("new", "rewritten"):
                        result.new += 1
                    elif outcome == "dup":
                        result.dup += 1
                        result.dup_expected += item.expected_dup
                    elif outcome == "quarantined":
                        result.quarantined += 1
                    handled += 1
            finally:  # the whole batch stored: its cursor; stopped or failed inside it: the cursor right after the last stored
                current = batch.cursor if finished and handled == len(batch.items) else batch.after(handled, current)
            done = not finished or (not batch.items and current == fetched_after)
            if result.slow_read_s is not None and not done:  # its grace is for that batch only: no slow read after it
                result.stopped, done = "deadline", True
            since_commit += len(batch.items)
            short = len(batch.items) < batch_size  # the poller stopped at a boundary of its own (a page, a mailbox):
            # its next fetch may wait on a network, so what is stored becomes durable first
            if done or short or since_commit >= COMMIT_ITEMS or time.monotonic() - last_commit >= COMMIT_SECONDS:
                commit(current)  # one group commit for several fast batches: a sync and a cursor write each cost a flush
                since_commit, last_commit = 0, time.monotonic()
            if done:
                break
        commit(current)  # stopped between batches: what was fetched and stored so far
    except BaseException:
        # Whatever stopped the loop (an upload failure, a source error), keep
        # the progress that is durable; that failure stays the poll's error.
        try:
            commit(current)
        except BadCursor:
            pass  # logged as poller.bad_cursor by commit()
        raise
    finally:
        result.repaired = uploader.repaired
        if index.follower is not None:
            index.follower.finish()  # the last update of the index (a thread) done before the poll's line
    if result.slow_read_s is not None:
        _slow(name, result, log)
    result.status = "ok" if _progress(result) else "idle"
    moved = result.positions_before and result.positions_after != result.positions_before
    if moved and result.status == "idle" and not can.moves_when_idle:  # memex.capabilities.MovesWhenIdle
        result.extra["moved_idle"] = True  # the cursor moved and nothing was stored (memex.observe.health: N in a row)


def _progress(result: PollResult) -> bool:
    """Whether the poll has stored (or counted) anything yet."""
    return bool(result.new or result.dup or result.quarantined)


def _slow(name: str, result: PollResult, log: Any) -> None:
    """Say that the first batch took longer to read than the time limit: a warning if some of it was stored, else TooSlow."""
    took = f"its first batch took {result.slow_read_s:g}s to read, longer than the poll's time limit (--max-seconds)"
    if not _progress(result):
        raise TooSlow(f"source {name!r}: {took}, and none of it could be stored in the {SLOW_GRACE:g}s after it; raise "
                      "--max-seconds (and the cron or timer interval with it)")  # fmt: skip
    count = result.new + result.dup + result.quarantined
    log.warning("poll.slow", reason=f"source {name!r}: {took}; {count} messages stored in the {SLOW_GRACE:g}s after it, the "
                "rest by the next polls; raise --max-seconds to take more a poll", slow_read_s=result.slow_read_s)  # fmt: skip


def _environment(exc: BaseException) -> bool:
    """Whether ``exc`` is the machine refusing a file (a full disk, a read-only mount, ...), not a bug."""
    from memex.fs_errors import explain

    return explain(exc) is not None


class _Index:
    """The search index's step of each commit (:class:`memex.advance.Step`): its follower, made at the first keys."""

    def __init__(self, cfg: Config, name: str, log: Any, deadline: Deadline) -> None:
        self.cfg, self.name, self.log, self.deadline = cfg, name, log, deadline
        self.follower: Any = None

    def before_commit(self, keys: list[str]) -> None:
        self.follower = self.follower or _follower(self.cfg, self.name, self.log, self.deadline)
        self.follower.before_commit(keys)

    def advanced(self, cursor: Cursor, positions: dict[str, int]) -> None:
        pass

    def after_commit(self, keys: list[str], store: Any) -> None:
        self.follower.after_commit(keys, store)


class _Shown:
    """The poll's result follows the saved cursor (what its summary line and ``memex status`` show)."""

    def __init__(self, result: PollResult) -> None:
        self.result = result

    def before_commit(self, keys: list[str]) -> None:
        pass

    def advanced(self, cursor: Cursor, positions: dict[str, int]) -> None:
        self.result.positions_after = positions
        self.result.cursor_after = describe(positions)

    def after_commit(self, keys: list[str], store: Any) -> None:
        pass


class _Released:
    """A spooling poller's step (:class:`memex.capabilities.Spooling`): what backs the records now durable may go."""

    def __init__(self, stored: Callable[[Cursor], None]) -> None:
        self.stored = stored

    def before_commit(self, keys: list[str]) -> None:
        pass

    def advanced(self, cursor: Cursor, positions: dict[str, int]) -> None:
        self.stored(cursor)

    def after_commit(self, keys: list[str], store: Any) -> None:
        pass


def _follower(cfg: Config, name: str, log: Any, deadline: Deadline) -> Any:
    """The search index's follower of this source's polls (imported only when there is something to index), its work
    cut :data:`INDEX_GRACE` after the time limit, or at once when the poll is asked to stop."""
    from memex.search.build import Follower

    def cutoff() -> float | None:
        if deadline.stop.is_set():
            return 0.0
        return None if deadline.at is None else deadline.at + INDEX_GRACE

    follower = Follower(cfg, name, "poll", log, background=True)
    follower.cutoff = cutoff
    return follower


def _check_direction(poller: Poller, name: str, current: Cursor, batch: Batch, log: Any, result: PollResult) -> None:
    """Refuse a backward cursor unless the poller declared a reset, and log every reset (and the batch's warnings)."""
    for warning in batch.warnings:
        log.warning("source.warning", reason=warning)
    if current is None:
        return
    before, after = poller.positions(current), poller.positions(batch.cursor)
    back = moved_backward(before, after)
    if batch.reset:
        result.reset = batch.reset
        log.warning("source.reset", reason=batch.reset, positions_before=before, positions_after=after)
    elif back:
        raise CursorConflict(
            f"poller of {name!r} tried to move its cursor backward ({describe(before)} -> {describe(after)}) "
            "without declaring a reset; not saving (this is a bug in the poller)"
        )


def poll_many(
    cfg: Config,
    names: list[str],
    *,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    stop: threading.Event | None = None,
    console: IO[str] | None = None,
) -> list[PollResult]:
    """Poll several sources at once, one thread each; one source's failure never stops another."""
    stop = stop or threading.Event()
    results: dict[str, PollResult] = {}

    def one(n: str) -> None:
        try:
            results[n] = poll(cfg, n, max_seconds=max_seconds, stop=stop, console=console)
        except MemexError as exc:  # its state folder or log unusable (memex.fs_errors): this source only, said by the CLI
            results[n] = PollResult(source=n, status="error", error=str(exc), exit_code=exc.exit_code, unsaid=not exc.said)
        except Exception as exc:  # poll() reports its own faults; this is a last line of defence
            results[n] = PollResult(source=n, status="error", error=internal_error(exc), exit_code=1)

    threads = [threading.Thread(target=one, args=(n,), name=f"poll-{n}", daemon=True) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    return [results.get(n) or PollResult(source=n, status="error", error="poll thread did not finish", exit_code=1) for n in names]
