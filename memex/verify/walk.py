"""Walking the store for ``memex verify``: every key listed as a stream, objects read (in parallel on S3) and checked.

Memory stays flat whatever the store's size: keys come from the store's paginated listing
(:meth:`~memex.store.objects.ObjectStore.list_keys`), at most a window of objects is in flight, and only counts and
a few examples are kept (and, for ``--repair``, the damaged keys themselves).
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from memex.records import encode_id
from memex.store.attachments import CHUNK
from memex.store.objects import ObjectStore
from memex.verify.checks import EMPTY, KEY_MISMATCH, ORPHAN_REVISION, Place, attachment_problem, expected_key, place, record_problem
from memex.verify.report import ATTACHMENTS, Report

A = TypeVar("A")
R = TypeVar("R")


class Reader:
    """How the walk reads a store: the file store straight from its folder (no side effects), any other through its API."""

    def __init__(self, store: ObjectStore) -> None:
        from memex.store.files import FileStore

        self.store = store
        self.root = str(store.root) if isinstance(store, FileStore) else None

    def read(self, key: str) -> bytes | None:
        """The object's bytes, or None if it is gone."""
        if self.root is None:
            return self.store.get(key)
        try:
            fd = os.open(f"{self.root}/{key}", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            parts = []
            while chunk := os.read(fd, 1 << 16):
                parts.append(chunk)
            return b"".join(parts)
        finally:
            os.close(fd)

    def chunks(self, key: str) -> Iterable[bytes] | None:
        """The object's bytes in chunks (an attachment is never read whole from a folder), or None if it is gone."""
        if self.root is None:
            body = self.store.get(key)
            return None if body is None else [body]
        try:
            fh = open(f"{self.root}/{key}", "rb")  # noqa: SIM115 (closed by the generator)
        except FileNotFoundError:
            return None

        def gen() -> Iterator[bytes]:
            with fh:
                while chunk := fh.read(CHUNK):
                    yield chunk

        return gen()

    def has(self, key: str) -> bool:
        """Whether ``key`` is stored (a stat on a folder, a HEAD on S3; nothing recorded for a later sync)."""
        if self.root is None:
            return self.store.exists(key)
        return os.path.lexists(f"{self.root}/{key}")


@dataclass
class Seen:
    """One object looked at: where it belongs and what is wrong with it (``problem`` None: sound)."""

    key: str
    where: Place
    problem: tuple[str, str] | None = None
    expected: str | None = None  # a misplaced record's own key
    note: dict[str, str] | None = None  # a quarantine entry's native_id and reason
    deleted_unseen: bool = False  # a tombstone whose message was deleted before any poll saw it (no original to keep)


def ordered_map(fn: Callable[[A], R], args: Iterable[A], pool: ThreadPoolExecutor | None, window: int) -> Iterator[tuple[A, R]]:
    """``(arg, fn(arg))`` in the order of ``args``, with up to ``window`` calls in flight on ``pool`` (inline without one)."""
    if pool is None:
        for arg in args:
            yield arg, fn(arg)
        return
    pending: deque[tuple[A, Future[R]]] = deque()
    for arg in args:
        pending.append((arg, pool.submit(fn, arg)))
        if len(pending) >= window:
            done, fut = pending.popleft()
            yield done, fut.result()
    while pending:
        done, fut = pending.popleft()
        yield done, fut.result()


class Inspector:
    """Checks one object (safe to call from several threads)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self._local = threading.local()  # the last revision parent checked by this thread (revisions of one message are listed together)

    def __call__(self, key: str) -> Seen | None:
        """What ``key`` holds; None if it vanished between the listing and the read."""
        where = place(key)
        if where.kind == "attachment":
            chunks = self.reader.chunks(key)
            return None if chunks is None else Seen(key, where, attachment_problem(key, chunks))
        if where.kind == "other":
            return Seen(key, where)
        body = self.reader.read(key)
        if body is None:
            return None
        if where.kind == "blob":
            return Seen(key, where, (EMPTY, "0 bytes") if not body and not self._empty_at_source(key) else None)
        if where.kind == "quarantine":
            return self._quarantine(key, where, body)
        problem = record_problem(key, body)
        seen = Seen(key, where, problem)
        if problem is not None and problem[0] == KEY_MISMATCH:  # a sound record, at another's name
            seen.expected = expected_key(json.loads(body))
        if problem is None and where.kind == "revision" and where.parent is not None and not self._has_parent(where.parent):
            if json.loads(body)["revision"]["kind"] == "delete":
                seen.deleted_unseen = True  # unsent or deleted before it was first read: the source has no text to keep
            else:
                seen.problem = (ORPHAN_REVISION, f"no {where.parent}")
        return seen

    def _empty_at_source(self, key: str) -> bool:
        """Whether the record beside an empty blob says the bytes it was made from were empty (``extra.size`` 0).

        Then the blob is exactly what the source held, not damage (a 0-byte Maildir file stored before such files
        were quarantined as no mail): a repair could only write the same nothing again.
        """
        if not key.startswith(("messages/", "revisions/")):
            return False
        try:
            doc = json.loads(self.reader.read(key.rpartition(".")[0] + ".json") or b"")
        except ValueError:
            return False
        extra = doc.get("extra") if isinstance(doc, dict) else None
        return isinstance(extra, dict) and extra.get("size") == 0

    def _has_parent(self, parent: str) -> bool:
        last = getattr(self._local, "parent", None)
        if last is not None and last[0] == parent:
            return bool(last[1])
        found = self.reader.has(parent)
        self._local.parent = (parent, found)
        return found

    def _quarantine(self, key: str, where: Place, body: bytes) -> Seen:
        try:
            meta = json.loads(body)
            note = {"key": key, "native_id": str(meta.get("native_id")), "reason": str(meta.get("reason"))}
        except (ValueError, AttributeError):
            note = {"key": key, "native_id": "?", "reason": "quarantine entry unreadable"}
        return Seen(key, where, note=note)


STORE_TOPS = ("attachments/", "messages/", "quarantine/", "revisions/")  # every key memex writes starts with one


def prefixes(sources: list[str] | None) -> list[str]:
    """What to list: the whole store (its own four prefixes, never the rest of its folder or bucket: a store at ``/usr``
    walks none of ``/usr``'s files), or each named source's records, quarantine and revisions."""
    if not sources:
        return list(STORE_TOPS)
    return [f"{top}/{encode_id(s)}/" for s in sources for top in ("messages", "quarantine", "revisions")]


def walk(store: ObjectStore, report: Report, *, sources: list[str] | None = None, workers: int = 1,
         damaged: dict[str, dict[str, Seen]] | None = None, tick: Callable[[int], None] | None = None) -> None:  # fmt: skip
    """Read and check every object (of ``sources``, or all); count into ``report``; keep damaged keys in ``damaged``.

    ``workers`` > 1 reads that many objects at once (S3: one GET each); ``tick(n)`` is called after each object.
    """
    inspect = Inspector(Reader(store))
    keys = (key for prefix in prefixes(sources) for key in store.list_keys(prefix))
    pool = ThreadPoolExecutor(workers, thread_name_prefix="verify") if workers > 1 else None
    try:
        for n, (_key, seen) in enumerate(ordered_map(inspect, keys, pool, workers * 4), 1):
            if seen is not None:
                count(report, seen, damaged)
            if tick is not None:
                tick(n)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def count(report: Report, seen: Seen, damaged: dict[str, dict[str, Seen]] | None) -> None:
    """Add one object to the report (in the walk's own thread)."""
    where = seen.where
    if where.kind == "other":
        report.other += 1
        return
    part = report.source(ATTACHMENTS if where.kind == "attachment" else str(where.source))
    part.objects += 1
    if where.kind == "record":
        part.records += 1
    elif where.kind == "revision":
        part.revisions += 1
        part.deleted_unseen += seen.deleted_unseen
    elif where.kind == "quarantine" and seen.note is not None:
        part.quarantine(seen.note)
    if seen.problem is not None:
        kind, reason = seen.problem
        part.add(kind, {"key": seen.key, "reason": reason})
        if damaged is not None:
            damaged.setdefault(part.name, {})[seen.key] = seen
