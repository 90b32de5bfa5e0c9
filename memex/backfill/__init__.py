"""Manual backfill: a source's whole history, or a date range of it, into the store.

``memex backfill SOURCE`` walks the poller's :meth:`~memex.capabilities.Historied.history`
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

The parts: :mod:`memex.backfill.run` (the reader and upload threads), :mod:`memex.backfill.frontier`,
:mod:`memex.backfill.checkpoint` (resume, refuse, save) and :mod:`memex.backfill.report` (the result, progress).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import IO

from memex.backfill.checkpoint import BackfillConflict
from memex.backfill.report import BackfillResult
from memex.backfill.run import BackfillRun
from memex.capabilities import capabilities
from memex.config import Config
from memex.error_lines import internal_error
from memex.errors import AlreadyRunning, ConfigError, MemexError
from memex.observe.logs import source_logger
from memex.registry import open_poller
from memex.state.backend import run_lock
from memex.state.files import require_state_dir

DEFAULT_WORKERS = 8
CHECKPOINT_SECONDS = 5.0
CHECKPOINT_ITEMS = 5000
PROGRESS_SECONDS = 5.0
RETRIES = 3
RETRY_DELAY = 0.5
MAX_FAILURES = 100


def lock_path(state_dir: Path, source: str) -> Path:
    """The run lock of a source's backfill (never the live poll's lock)."""
    return state_dir / "locks" / f"{source}.backfill.lock"


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
    lock = run_lock(cfg, f"{source}.backfill", lock_path(cfg.state_dir, source), log=log)
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
            can = capabilities(poller)
            if can.history is None:
                raise ConfigError(f"source type {src.type!r} cannot walk its history yet; backfill is not available for it",
                                  path=cfg.path, key=f"sources.{source}.type")  # fmt: skip
            run = BackfillRun(cfg, source, poller, can, log, result, since=since, until=until, rewrite=rewrite, workers=workers,
                       stop=stop_event, console=console, retries=retries, retry_delay=retry_delay,
                       checkpoint_seconds=checkpoint_seconds, checkpoint_items=checkpoint_items,
                       progress_seconds=progress_seconds, max_failures=max_failures)  # fmt: skip
            run.checkpoint.prepare(restart, run.workers)
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
    elif result.exit_code:  # stopped (130): said on stderr off a terminal, where the summary line is not printed
        log.warning("backfill.finished", **fields)
    else:
        log.info("backfill.finished", **fields)
    return result
