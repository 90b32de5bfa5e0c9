"""Filling the search index: ``memex index rebuild`` from the store alone, and the journal that keeps it in step.

**Rebuild** lists the store's records (``messages/`` and ``revisions/``, paginated on S3), reads them with
``workers`` GETs in flight (straight from the folder for a file store: :class:`memex.verify.walk.Reader`) and adds
them to a new file (no rollback journal, no fsync until it is whole) that replaces the live one by a rename, so
searches answer from the old file until then; memory stays a window of objects whatever the store's size. Nothing
but the store is read, so a second host, or someone with only the bucket, builds the same index. The locks that make
the swap safe beside polls and searches: :mod:`memex.search.locks`.

**In step** (:class:`Follower`): the runner and the backfill hand over what they stored (key and bytes). Before the
store's commit the keys are appended to the writer's journal (fsynced); after the commit they are added to the index
and the journal is emptied once the update is on disk (:meth:`SearchIndex.close`). A crash (or a failed index
update) in between leaves the journal, and the writer's next run reads those keys back from the store and adds them
(:meth:`Follower.catch_up`). On S3, where a PUT is durable
before any commit, a record stored just before a crash is not journaled; the next run stores it again, finds it a
duplicate, and duplicates are handed over too, so it is indexed then.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from memex.config import Config
from memex.errors import MemexError, StateError
from memex.hold import point_from_env
from memex.records import encode_id
from memex.search import index_path, journal_path
from memex.search.index import SIDE_FILES, SearchIndex
from memex.search.locks import OPEN_LOCK, REBUILD_LOCK, REBUILD_WAIT, SWAP_WAIT, RebuildRunning
from memex.search.rows import is_record_key, load_record
from memex.state.files import atomic_replace, ensure_private_dir, fsync_dir, fsync_file, make_dirs
from memex.state.locks import exclusive
from memex.store.objects import ObjectStore

T = TypeVar("T")
Stored = bytes | dict[str, Any]  # a stored record handed over (memex.uploader.Uploader.stored): its bytes, or its dict
FIRST, BATCH = 2000, 20000  # records inserted together (batch_sizes)


def journal_append(path: Path, keys: list[str]) -> int:
    """Append ``keys`` to the journal at ``path`` and make them durable (the folder too, when the file is new); the
    journal's size after them."""
    made = make_dirs(path.parent)
    new = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, ("\n".join(keys) + "\n").encode())
        os.fsync(fd)
        end = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if new or made:
        fsync_dir(path.parent)
    return end


def journal_drop(path: Path, upto: int) -> None:
    """Drop the journal's first ``upto`` bytes (keys now in the index), durably: the rest goes to a new file that
    replaces it (a crash leaves either file: the old one only names keys again, which a catch-up adds harmlessly)."""
    with open(path, "rb") as fh:
        fh.seek(upto)
        rest = fh.read()
    atomic_replace(path, rest)


def journal_entries(path: Path) -> list[tuple[str, int]]:
    """The journal's keys (each once, in order), each with the byte offset just past its line: dropping the journal up
    to there leaves every key after it (a later line naming an earlier key only names it again)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    entries: list[tuple[str, int]] = []
    seen: set[str] = set()
    pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        key = line.decode().strip()
        if key and key not in seen:
            seen.add(key)
            entries.append((key, pos))
    return entries


def read_bodies(store: ObjectStore, keys: Iterator[str] | list[str], workers: int) -> Iterator[tuple[str, bytes]]:
    """``(key, bytes)`` of each key that holds a non-empty object (gone ones are left out), in ``keys``' order."""
    from concurrent.futures import ThreadPoolExecutor  # here: a poll that only adds what it stored never needs it

    from memex.verify.walk import Reader, ordered_map

    reader = Reader(store)
    pool = ThreadPoolExecutor(workers, thread_name_prefix="index") if workers > 1 else None
    try:
        for key, body in ordered_map(reader.read, keys, pool, workers * 4):
            if body:
                yield key, body
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def read_records(store: ObjectStore, keys: Iterator[str] | list[str], workers: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(key, record)`` of each key that holds a readable record (gone or unreadable ones are left out)."""
    for key, body in read_bodies(store, keys, workers):
        if (doc := load_record(body)) is not None:
            yield key, doc


def batch_sizes() -> Iterator[int]:
    """Records in each batch of a rebuild: :data:`FIRST`, doubling up to :data:`BATCH` (SQLite starts at once, and
    each batch is read while the one before, about as long, is inserted); never more, so the memory a batch's sort
    takes is the same whatever the store's size."""
    size = FIRST
    while True:
        yield size
        size = min(BATCH, size * 2)


def _ahead(batches: Iterator[T]) -> Generator[T, None, None]:
    """``batches`` made one ahead by a thread: the next batch is listed, read and staged while SQLite, which lets go of
    the GIL while it steps, inserts this one. An error in the thread is raised here; stopping early stops the thread."""
    import queue

    ready: queue.Queue[tuple[str, Any]] = queue.Queue(1)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for batch in batches:
                if not put(("batch", batch)):
                    return
            put(("end", None))
        except BaseException as exc:  # handed to the consumer, raised there
            put(("error", exc))

    thread = threading.Thread(target=produce, name="index-read", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = ready.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def rebuild(cfg: Config, store: ObjectStore, sources: list[str] | None, *, workers: int,
            tick: Callable[[int], None] | None = None) -> int:  # fmt: skip
    """Rebuild the index of ``sources`` (every source in the store when None) from the store alone; records read.

    The new index is written to ``index.sqlite.new`` (no rollback journal, no fsync until the end: an interrupted
    rebuild starts again from nothing), then fsynced and renamed over the live one; searches answer from the old file
    until then. ``rebuild.lock`` is held throughout, so polls keep their journals meanwhile (:mod:`memex.search.locks`).
    """
    from memex.search import bulk  # here: a poll never needs it

    tops = [f"{top}/" for top in ("messages", "revisions")] if not sources else [
        f"{top}/{encode_id(s)}/" for top in ("messages", "revisions") for s in sources]  # fmt: skip
    live = index_path(cfg.state_dir)
    new = live.with_name(live.name + ".new")
    folder = ensure_private_dir(live.parent)
    with exclusive(folder / REBUILD_LOCK, REBUILD_WAIT):
        keys = (key for prefix in tops for key in store.list_keys(prefix) if is_record_key(key))
        try:
            bulk.remove_stages(new)  # a rebuild that was killed
            index = SearchIndex(new, fresh=True, stemming=cfg.search_stemming)
            batches = _ahead(bulk.staged(read_bodies(store, keys, workers), new, batch_sizes()))
            try:
                n = index.rebuild(batches, sources, tick, keep=live)
            finally:
                batches.close()  # stops the reading thread
                index.close()
            fsync_file(new)  # the new file is whole on disk before its name replaces the old one
            hold = point_from_env("swap")
            if hold is not None:
                hold.reached(None)
            with exclusive(folder / OPEN_LOCK, SWAP_WAIT):  # no connection has the old file open now
                for suffix in SIDE_FILES:  # the old file's WAL must not be read as the new one's
                    Path(f"{live}{suffix}").unlink(missing_ok=True)
                os.replace(new, live)
                fsync_dir(folder)
        except (sqlite3.Error, OSError) as exc:  # a full disk, a file in the way: one line naming it, never "internal"
            new.unlink(missing_ok=True)
            raise _stopped(exc, new) from None
        except BaseException:
            new.unlink(missing_ok=True)
            raise
        finally:
            with contextlib.suppress(OSError):  # best effort: the next rebuild removes them first, or names what it cannot
                bulk.remove_stages(new)
    return n


def _stopped(exc: sqlite3.Error | OSError, new: Path) -> MemexError:
    """The one line for a rebuild stopped by the file system or SQLite: what, where, and what to do (SQLite's own
    message is left out: it may quote a record's text; its error name says enough)."""
    from memex.fs_errors import explain

    fault = explain(exc, None if isinstance(exc, OSError) else new)  # a full disk, a read-only mount, ... in words
    if fault is not None:
        return fault.then("run `memex index rebuild` again")
    fix = "free space or fix the permissions, then run `memex index rebuild` again"
    if isinstance(exc, OSError):
        return StateError(f"rebuild stopped: {exc.strerror or type(exc).__name__}; {fix}", path=exc.filename or new)
    return StateError(f"rebuild stopped: SQLite {getattr(exc, 'sqlite_errorname', type(exc).__name__)}; {fix}", path=new)


# With a cutoff, an update adds its records a chunk a transaction (SQLite does its work at the insert, so the cutoff is
# looked at between chunks), each sized by the last one's rate (seconds a record, kept across updates) to take at most a
# quarter of the time left (ADD_MIN to ADD_MAX): whole batches far from the cutoff, a few records at a time near it.
ADD_CHUNK, ADD_MIN, ADD_MAX = 1, 1, 5000
FAR = 30.0  # seconds before the cutoff beyond which an update with no rate known yet adds a whole batch at once


class IndexDeferred(Exception):
    """An index update reached its cutoff (the poll's time limit): rolled back, its keys left in the journal."""


class Follower:
    """Keeps the index in step with what one writer (``poll`` or ``backfill``) of one source stores.

    ``cutoff`` (the runner's: the poll's time limit plus a quarter of its grace) bounds the index work: an update still running
    then is rolled back and its keys stay in the journal, for the next run's catch-up (:meth:`catch_up`, which keeps
    what each chunk added), so a poll under load ends on time and the index is behind by at most one poll's records.
    """

    def __init__(self, cfg: Config, source: str, writer: str, log: Any, *, background: bool = False) -> None:
        self.cfg, self.source, self.log = cfg, source, log
        self.journal = journal_path(cfg.state_dir, source, writer)
        self.whole = True  # the journal holds only keys of records handed to index() since it was last emptied
        self.background = background  # each update made by a thread while the writer goes on (:meth:`after_commit`)
        self._lock = threading.Lock()  # a journal append never falls between an update's check and its emptying
        self._appended = 0  # journal appends so far: an update empties the journal only if none came after its own
        self._ends: dict[int, int] = {}  # the journal's size after each append still in it (by its number)
        self._update: threading.Thread | None = None
        self.cutoff: Callable[[], float | None] | None = None  # when index work stops (a monotonic time), or never
        self._rate: float | None = None  # seconds the last transaction took a record (sizes the next one near the cutoff)

    def _left(self) -> float:
        """Seconds until the cutoff (infinite without one; 0 or less once it has come: index work then stops)."""
        at = self.cutoff() if self.cutoff is not None else None
        return float("inf") if at is None else at - time.monotonic()

    def _add(self, index: SearchIndex, records: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Add ``records`` (how many were records); with a cutoff, :data:`ADD_CHUNK` a transaction, raising
        :class:`IndexDeferred` when the cutoff comes between two (the chunks before it stay in the index)."""
        if self.cutoff is None:
            return index.add(records)
        n = 0
        it = iter(records)
        while chunk := list(itertools.islice(it, self._chunk())):
            if self._left() <= 0:
                raise IndexDeferred
            began = time.monotonic()
            n += index.add(chunk)
            self._rate = max(time.monotonic() - began, 1e-4) / len(chunk)
        return n

    def _chunk(self) -> int:
        """Records for the next transaction: a quarter of the time left at the last rate (:data:`ADD_MIN` to
        :data:`ADD_MAX`); before any rate is known, whole batches while the cutoff is far (:data:`FAR`), else
        :data:`ADD_CHUNK`."""
        left = min(self._left(), 3600.0)
        if self._rate is None:
            return ADD_MAX if left > FAR else ADD_CHUNK
        return max(ADD_MIN, min(ADD_MAX, int(left / 4 / self._rate)))

    def _deferred(self, keys: int, added: int) -> None:
        """Note an update cut at the cutoff: the journal holds its keys for the next run."""
        self.whole = False
        self.log.info("search.deferred", keys=keys, records=added, reason="the poll's time limit; the next poll adds them")

    def catch_up(self, store: ObjectStore, seen: int | None = None) -> int:
        """Add the records the journal names (read back from the store), then empty it unless keys were journaled
        after the ``seen``-th append (by default: the last one so far); how many were records. With a cutoff, a
        transaction at a time (:meth:`_chunk`), each one's keys leaving the journal once they are in the index: cut at
        the cutoff, the next catch-up goes on from there, so every poll moves the index on, however slow."""
        seen = self._appended if seen is None else seen
        entries = journal_entries(self.journal)
        keys = [k for k, _ in entries]
        if not keys:
            self._empty(seen)
            return 0
        n = 0
        try:
            with SearchIndex.open(self.cfg.state_dir, writer=True, stemming=self.cfg.search_stemming) as index:
                if self.cutoff is None:
                    n = index.add(read_records(store, keys, 1))
                done = len(keys) if self.cutoff is None else 0
                dropped = 0
                while done < len(keys):
                    if self._left() <= 0:
                        raise IndexDeferred
                    step = entries[done : done + self._chunk()]
                    began = time.monotonic()
                    n += index.add(read_records(store, [k for k, _ in step], 1))
                    self._rate = max(time.monotonic() - began, 1e-4) / len(step)
                    done += len(step)
                    if done < len(keys):  # the last step's keys leave with the emptying below
                        self._drop(step[-1][1] - dropped)
                        dropped = step[-1][1]
        except IndexDeferred:
            self._deferred(len(keys), n)
            return n
        except RebuildRunning:
            self.log.info("search.rebuild_running", keys=len(keys))  # the journal is kept for the next run
            self.whole = False
            return 0
        except Exception as exc:
            self.log.warning(
                "search.catch_up_failed", keys=len(keys), error=type(exc).__name__, **_fix(exc, index_path(self.cfg.state_dir))
            )
            self.whole = False
            return 0
        self._empty(seen)
        self.whole = True
        self.log.info("search.caught_up", keys=len(keys), records=n)
        return n

    def before_commit(self, stored: list[tuple[str, Stored]]) -> None:
        """Journal the keys of ``stored`` (before the store's commit makes them durable); a failure is a warning only:
        the poll goes on, and only a crash before the index update would then leave those records to `memex index rebuild`."""
        with self._lock:
            self._appended += 1
            try:
                self._ends[self._appended] = journal_append(self.journal, [key for key, _ in stored])
            except OSError as exc:
                _journal_failed(self.log, self.journal, exc)

    def after_commit(self, stored: list[tuple[str, Stored]], store: ObjectStore) -> None:
        """Add ``stored`` (now durable) to the index, then empty the journal unless keys were journaled after them;
        a failure keeps it for the next run. In the background, a thread does it once the previous update is done
        (updates stay in order, one at a time), and :meth:`finish` waits for it."""
        self.finish()
        seen = self._appended
        if not self.background:
            self._update_index(stored, store, seen)
            return
        self._update = threading.Thread(target=self._in_background, args=(stored, store, seen), name=f"index-{self.source}")
        try:
            self._update.start()
        except RuntimeError:  # no thread to be had (the process's limit): the update here, as without the background
            self._update = None
            self._update_index(stored, store, seen)

    def finish(self) -> None:
        """Wait for the update in progress, if any: when this returns, everything handed over is in the index, or its
        keys are in the journal (an update that failed)."""
        if self._update is not None:
            self._update.join()
            self._update = None

    def _in_background(self, stored: list[tuple[str, Stored]], store: ObjectStore, seen: int) -> None:
        try:
            self._update_index(stored, store, seen)
        except Exception as exc:  # one the update does not turn into a warning itself: a warning too, never a traceback
            from memex.observe.logs import LogUnwritable

            self.whole = False
            if isinstance(exc, LogUnwritable):
                return  # the log is what failed (a full disk): the poll's own next line meets it and says it, once
            try:
                self.log.warning(
                    "search.index_failed", records=len(stored), error=type(exc).__name__, **_fix(exc, index_path(self.cfg.state_dir))
                )
            except LogUnwritable:
                pass  # the same: never a traceback from this thread

    def _update_index(self, stored: list[tuple[str, Stored]], store: ObjectStore, seen: int) -> None:
        hold = point_from_env("index")
        if hold is not None:
            hold.reached(None)
        if not self.whole:
            self.catch_up(store, seen)
            return
        try:
            with SearchIndex.open(self.cfg.state_dir, writer=True, stemming=self.cfg.search_stemming) as index:  # durable once closed
                self._add(index, ((key, record if isinstance(record, dict) else json.loads(record)) for key, record in stored))
        except IndexDeferred:
            self._deferred(len(stored), 0)
            return
        except RebuildRunning:
            self.log.info("search.rebuild_running", keys=len(stored))  # the journal is kept for the next run
            self.whole = False
            return
        except Exception as exc:
            self.log.warning(
                "search.index_failed", records=len(stored), error=type(exc).__name__, **_fix(exc, index_path(self.cfg.state_dir))
            )
            self.whole = False
            return
        self._empty(seen)

    def _empty(self, seen: int) -> None:
        """Empty the journal of what the ``seen`` first appends named (now in the index). Keys appended after (a later
        batch's, not yet added) stay: the journal keeps only them, so a crash in a long poll or backfill leaves the next
        run a batch or two to read back, not everything since the start."""
        with self._lock:
            if self._appended == seen:
                self._remove()
                self._ends.clear()
                return
            upto = self._ends.get(seen)
            if upto is None:  # that append failed (a warning said so): nothing to go by, all is kept
                return
            try:
                journal_drop(self.journal, upto)
            except OSError as exc:  # the journal is kept whole: a catch-up after a crash reads more back, nothing more
                _journal_failed(self.log, self.journal, exc)
                return
            self._ends = {n: end - upto for n, end in self._ends.items() if n > seen}

    def _drop(self, upto: int) -> None:
        """Drop the journal's first ``upto`` bytes (keys a catch-up chunk put in the index), no append falling between."""
        with self._lock:
            try:
                journal_drop(self.journal, upto)
            except OSError as exc:  # kept whole: the next catch-up adds those keys again, harmlessly
                _journal_failed(self.log, self.journal, exc)
                return
            self._ends = {n: end - upto for n, end in self._ends.items() if end > upto}

    def _remove(self) -> None:
        """Empty the journal (kept: the next append then needs no folder sync); lost in a crash, it replays harmlessly."""
        try:
            os.truncate(self.journal, 0)
        except FileNotFoundError:
            pass


def _fix(exc: Exception, index: Path | None = None) -> dict[str, str]:
    """``reason``: memex's own one line for an index it cannot use (it names the file and the fix; never a record's
    text), or the environment's fault in words (a full disk, a read-only mount: :mod:`memex.fs_errors`; ``index``
    names the file for SQLite, which does not); nothing for any other exception, whose text may quote a record."""
    from memex.fs_errors import explain

    fault = explain(exc, None if isinstance(exc, OSError) else index)
    if fault is not None:
        return {"reason": str(fault.then("the next poll catches up (or run `memex index rebuild`)"))}
    return {"reason": str(exc)} if isinstance(exc, StateError) else {}


def _journal_failed(log: Any, journal: Path, exc: OSError) -> None:
    """The warning for a journal that could not be written: its path, and the cause and fix where the machine's."""
    from memex.fs_errors import explain

    fault = explain(exc)
    extra = {"reason": str(fault.then("run `memex index rebuild` to bring the index in step"))} if fault is not None else {}
    log.warning("search.journal_failed", path=str(journal), error=exc.strerror or type(exc).__name__, **extra)
