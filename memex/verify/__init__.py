"""``memex verify``: does the index hold, whole and sound, every message the sources have handed over?

One pass walks the store (:mod:`memex.verify.walk`: every object read and checked, :mod:`memex.verify.checks`), then
compares each source that can be listed cheaply with the index up to its cursor (:mod:`memex.verify.inventory`).
``repair`` re-reads from the source what is missing or damaged, then a second pass checks the result, so the
report (:mod:`memex.verify.report`) says what was found, what was done, and what is still wrong.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memex.config import Config
from memex.deadline import Deadline
from memex.store import open_store
from memex.store.objects import ObjectStore
from memex.verify.inventory import attachments_not_repairable, compare
from memex.verify.report import ATTACHMENTS, Report
from memex.verify.walk import Seen, walk

S3_WORKERS = 16


def default_workers(cfg: Config) -> int:
    """Objects read at once: many on S3 (each is a round trip), one on a local folder (the disk and one core do the rest)."""
    return S3_WORKERS if cfg.store.url.startswith("s3:") else 1


def verify(cfg: Config, sources: list[str] | None = None, *, repair: bool = False, workers: int | None = None,
           stop: threading.Event | None = None, tick: Callable[[int], None] | None = None) -> Report:  # fmt: skip
    """Verify the store of ``cfg`` (the named ``sources``, or everything); with ``repair``, fix and check again.

    ``tick(n)`` is called as objects are read (progress); ``stop`` (SIGTERM, Ctrl-C) ends the run at the next
    object and cuts an S3 request in flight short (:class:`~memex.deadline.Interrupted`).
    """
    workers = workers or default_workers(cfg)
    store = open_store(cfg.store, max_pool_connections=max(10, workers))
    use_deadline = getattr(store, "use_deadline", None)
    deadline = Deadline(None, stop)
    if use_deadline is not None:
        use_deadline(deadline)
    try:
        report = _once(cfg, store, sources, repair=repair, workers=workers, deadline=deadline, tick=tick)
        if not repair or report.whole:
            return report
        after = _once(cfg, store, sources, repair=False, workers=workers, deadline=deadline, tick=tick)
        after.repair = True
        after.temp = report.temp  # what the repair's pass found and removed
        for name, part in report.sources.items():
            later = after.source(name)
            later.before, later.repaired, later.not_repaired = dict(part.counts), part.repaired, part.not_repaired
        return after
    finally:
        deadline.close()


def _once(cfg: Config, store: ObjectStore, sources: list[str] | None, *, repair: bool, workers: int, deadline: Deadline,
          tick: Callable[[int], None] | None) -> Report:  # fmt: skip
    started = time.monotonic()
    report = Report(store=store.url, repair=repair)
    damaged: dict[str, dict[str, Seen]] | None = {} if repair else None

    def step(n: int) -> None:
        deadline.check("verify")
        if tick is not None:
            tick(n)

    walk(store, report, sources=sources, workers=workers, damaged=damaged, tick=step)
    root = getattr(store, "root", None)  # a local folder: its temp files, those a killed writer left counted (removed by --repair)
    if isinstance(root, Path):
        from memex.store.files import temp_files
        from memex.store.objects import TMP_DIR

        report.temp = temp_files(root / TMP_DIR, sweep=repair).to_json()
    from memex.state.backend import cursor_store

    sections = cursor_store(cfg).load()
    names = sources or sorted(set(cfg.sources) | {n for n in report.sources if n != ATTACHMENTS})
    pool = ThreadPoolExecutor(workers, thread_name_prefix="verify") if workers > 1 else None
    try:
        for name in names:
            if name not in cfg.sources:
                report.source(name).inventory = "not in the config"
                continue
            problem = cfg.sources[name].problem
            if problem is not None and not sources:  # a broken section: its objects are checked, its source is not read
                report.source(name).inventory = f"config error: {problem}"
                continue
            cursor = (sections.get(name) or {}).get("cursor")
            compare(cfg, store, report, name, cursor=cursor, repair=repair, damaged=(damaged or {}).get(name, {}), pool=pool,
                    window=workers * 4)  # fmt: skip
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    if repair:
        attachments_not_repairable(report)
    report.seconds = time.monotonic() - started
    return report
