"""The file store: a local folder holding the same keys as the S3 layout, create-only, durable by group commit."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from memex.errors import ConfigError, StoreError
from memex.fs_errors import explain
from memex.state.files import (
    ensure_private_dir,
    fsync_dir,
    fsync_file,
    make_dirs,
    stream_temp,
    write_new,
    write_temp,
    writer_gone,
    writer_tag,
)
from memex.state.flush import flush_plan, sync_files
from memex.store.objects import STALE_TMP_SECONDS, TMP_DIR


class FileStore:
    """A folder that mirrors the S3 layout (``aws s3 sync`` of it reproduces the bucket).

    Create-only writes are atomic: the body goes to a temp file in ``.memex-tmp/``
    and is hard-linked to its final name, which fails if the name exists.
    :meth:`put_new` is a group commit: it only writes the temp file, and
    :meth:`sync` (called before a cursor moves) makes every pending temp file's
    data durable (one ``syncfs`` where the file system is proven to flush on it,
    an fsync per file elsewhere: :mod:`memex.state.flush`), links each to its name,
    then fsyncs each folder touched once. A name therefore never appears before its
    bytes are durable, and a crash before :meth:`sync` leaves no name at all (the
    cursor did not move, so the next poll writes it again). A name found taken is
    a duplicate only if what is there is sound (:func:`_damage`); a damaged object
    is replaced at once and counted in :attr:`repaired`. Paths are kept as strings
    inside: a poll writes hundreds of thousands of objects and ``pathlib`` cost more CPU than the writes.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = root.as_uri()
        self._tmp: str | None = None
        self._dirty: set[str] = set()  # folders whose entries must be made durable
        self._dirty_files: set[str] = set()  # objects found already there (another process wrote them)
        self._pending: dict[str, str] = {}  # final name -> its written, not yet durable, temp file (put_new)
        self._checked: set[Path] = set()  # folders known to exist, private, and durable in their parent
        self._folders: dict[str, str] = {}  # key prefix ("messages/s") -> its checked folder
        self._dirty_lock = threading.Lock()  # backfill writes from several threads while sync() runs
        self._temp_names = itertools.count()  # temp file names: <pid>@<host>.<this store's token>.<n>
        self._token = secrets.token_hex(4)
        self.log: Any = None  # the source's logger (Uploader.store sets it): repairs and the flush method are logged
        self.repaired = 0  # objects found damaged at their name and replaced by put_new (of those it returned True for)

    def use_log(self, log: Any) -> None:
        """Log this store's events (``object.repaired``, ``store.flush``) through ``log``, the source's logger."""
        self.log = log

    def _tmp_dir(self) -> str:
        if self._tmp is None:
            self._folder(self.root)
            tmp = ensure_private_dir(self.root / TMP_DIR)
            swept = temp_files(tmp, sweep=True)
            if swept.removed and self.log is not None:
                self.log.info("store.temp_swept", files=swept.removed, bytes=swept.removed_bytes, folder=str(tmp))
            self._tmp = str(tmp)
        return self._tmp

    def _temp_file(self, body: bytes) -> str:
        """Write ``body`` to a new temp file (not fsynced: :meth:`sync` flushes them together); its path."""
        tmp = f"{self._tmp_dir()}/.obj.{writer_tag()}.{self._token}.{next(self._temp_names)}.tmp"
        write_new(tmp, body)
        return tmp

    def _folder(self, folder: Path) -> None:
        """Make ``folder`` exist (new folders 0700, their parents' entries made durable at the next sync).

        An existing folder inside the store that another user could write to is refused: they could plant
        an object for a future message, which memex would then count as already stored.
        """
        if folder in self._checked:
            return
        chain = [folder]
        while chain[-1] != self.root and chain[-1].parent != chain[-1]:
            chain.append(chain[-1].parent)
        for probe in reversed(chain):  # the root first; nothing is created inside a folder others can write to
            if probe in self._checked or not probe.exists():
                continue
            mode = probe.stat().st_mode
            if mode & 0o022:
                raise ConfigError(
                    f"store folder is writable by other users (mode {mode & 0o777:04o}): another user could plant objects "
                    f"memex would take for stored messages; run chmod 700 {probe}",
                    path=probe,
                )
        made = make_dirs(folder)
        with self._dirty_lock:
            self._dirty.update(str(m.parent) for m in made)
        self._checked.update(chain)

    def _path(self, key: str, *, make: bool = True) -> str:
        """The file of ``key``; an unsafe key is refused. ``make``: its folder is made and checked (once per folder)."""
        prefix, _, name = key.rpartition("/")
        folder = self._folders.get(prefix)
        if folder is None or name in ("", ".", ".."):
            parts = key.split("/")
            if any(p in ("", ".", "..") for p in parts):
                raise StoreError(f"{self.url}: refusing unsafe key {key!r}")
            where = self.root.joinpath(*parts[:-1])
            if not make:
                return str(where / name)
            self._tmp_dir()  # the root is checked before anything is made inside it
            self._folder(where)
            folder = self._folders[prefix] = str(where)
        return f"{folder}/{name}"

    def put_new(self, key: str, body: bytes) -> bool:
        """Create ``key`` unless present: write its temp file now, make it durable and link it at the next :meth:`sync`.

        True if it was absent (a name another process links before that sync counts as already there, then).
        """
        path = self._path(key)
        with self._dirty_lock:
            if path in self._pending:
                return False
        if os.path.lexists(path):
            reason = _damage(path, len(body), json_object=key.endswith(".json"))
            if reason is None:
                self._written_elsewhere(path)
                return False
            self._repair(key, body, reason)
            return True
        tmp = self._temp_file(body)
        with self._dirty_lock:
            if path in self._pending:  # another thread of a backfill got there first
                os.unlink(tmp)
                return False
            self._pending[path] = tmp
        return True

    def _link_new(self, key: str, make_temp: Callable[[Path], Path]) -> bool:
        """Write a fsynced temp file with ``make_temp`` and link it to ``key``'s name; False if the name exists."""
        path = self._path(key)
        if os.path.lexists(path):
            self._written_elsewhere(path)
            return False
        tmp = make_temp(Path(self._tmp_dir()))
        try:
            os.link(tmp, path)
        except FileExistsError:
            self._written_elsewhere(path)
            return False
        except OSError as exc:
            raise (explain(exc, path) or StoreError(f"{path}: cannot write ({exc.strerror})")) from None
        finally:
            tmp.unlink(missing_ok=True)
        with self._dirty_lock:
            self._dirty.add(os.path.dirname(path))
        return True

    def _repair(self, key: str, body: bytes, reason: str) -> None:
        """Replace the damaged object at ``key`` now (:meth:`replace_damaged`: temp file, fsync, rename, folder fsync); count and log it."""
        self.replace_damaged(key, body)
        with self._dirty_lock:
            self.repaired += 1
        if self.log is not None:
            self.log.warning("object.repaired", key=key, damage=reason)

    def _written_elsewhere(self, path: str) -> None:
        """``path`` was already there: whoever wrote it (a killed poll, a backfill), make it durable before the cursor passes it."""
        with self._dirty_lock:
            self._dirty_files.add(path)
            self._dirty.add(os.path.dirname(path))

    def put(self, key: str, body: bytes) -> None:
        """Atomically create or replace ``key``."""
        path = self._path(key)
        with self._dirty_lock:
            superseded = self._pending.pop(path, None)  # a put_new of this key not yet linked: the put replaces it
        if superseded is not None:
            os.unlink(superseded)
        tmp = write_temp(Path(self._tmp_dir()), "obj", body)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise (explain(exc, path) or StoreError(f"{path}: cannot write ({exc.strerror})")) from None
        with self._dirty_lock:
            self._dirty.add(os.path.dirname(path))

    def get(self, key: str) -> bytes | None:
        """Read ``key``'s bytes (one written since the last sync included), or None."""
        path = self._path(key, make=False)
        with self._dirty_lock:
            pending = self._pending.get(path)
        try:
            with open(pending or path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def exists(self, key: str) -> bool:
        """Whether ``key`` is there (its folder is then synced with the next :meth:`sync`, whoever wrote it)."""
        path = self._path(key, make=False)
        with self._dirty_lock:
            if path in self._pending:
                return True
        if not os.path.lexists(path):
            return False
        self._written_elsewhere(path)
        return True

    def put_new_stream(self, key: str, open_body: Callable[[], IO[bytes]], size: int) -> bool:
        """Create ``key`` by copying a stream into a fsynced temp file and linking it (never whole in memory)."""
        return self._link_new(key, lambda tmp_dir: stream_temp(tmp_dir, "obj", open_body))

    def sync(self) -> None:
        """Make durable what the cursor is about to pass: the pending objects' data, then their names, objects found already there, every folder entry.

        Pending temp files are flushed together (:func:`~memex.state.files.sync_files`), then linked to their names;
        folders are synced deepest first, so a new folder's own entries are durable before its entry in its parent.
        """
        with self._dirty_lock:
            pending, self._pending = self._pending, {}
        linked: set[str] = set()
        try:
            if pending:
                method, _ = flush_plan(self._tmp_dir(), self._log_flush)
                sync_files(list(pending.values()), method)
            for path, tmp in pending.items():  # only now, with their bytes durable, do the names appear
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    self._written_elsewhere(path)
                except OSError as exc:
                    raise (explain(exc, path) or StoreError(f"{path}: cannot write ({exc.strerror})")) from None
                linked.add(path.rpartition("/")[0])
        finally:
            for tmp in pending.values():
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
            with self._dirty_lock:
                self._dirty.update(linked)
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
            files, self._dirty_files = self._dirty_files, set()
        for f in sorted(files):
            fsync_file(f)
        for d in sorted(dirty, key=lambda p: p.count(os.sep), reverse=True):
            fsync_dir(d)

    def _log_flush(self, method: str, fs: str) -> None:
        """Log the flush chosen for this store's file system (once per process), a debug event: only with ``--debug``."""
        if self.log is not None and os.environ.get("MEMEX_DEBUG", "") not in ("", "0"):
            self.log.debug("store.flush", method=method, fs=fs, store=self.url)

    def replace_damaged(self, key: str, body: bytes) -> None:
        """Replace an object ``memex verify --repair`` found damaged: write a temp file, fsync it, rename it over, fsync the folder.

        Never used on a sound object: the caller has just read it and found it empty, not JSON or not the schema.
        """
        self.put(key, body)  # an fsynced temp file renamed over the name
        fsync_dir(os.path.dirname(self._path(key)))  # durable now, not at the next sync

    def list_keys(self, prefix: str = "") -> Iterator[str]:
        """Every stored key under ``prefix``, walked with :func:`os.scandir` one folder at a time (never the whole list in memory).

        The store's temp folder and anything hidden (no key segment starts with ``.``) are skipped; so are objects
        written since the last :meth:`sync` (their names do not exist yet).
        """
        folder, _, _ = prefix.rpartition("/")
        start = os.path.join(str(self.root), *folder.split("/")) if folder else str(self.root)
        for key in _walk(start, f"{folder}/" if folder else ""):
            if key.startswith(prefix):
                yield key


def _walk(path: str, rel: str) -> Iterator[str]:
    """Store-relative names of the files below ``path`` (``rel`` is its key prefix), depth first, hidden entries skipped."""
    try:
        it = os.scandir(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise (explain(exc) or StoreError(f"{path}: cannot list ({exc.strerror})")) from None
    with it:
        for entry in it:
            if entry.name.startswith("."):
                continue  # TMP_DIR, and nothing memex writes
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(entry.path, f"{rel}{entry.name}/")
            elif entry.is_file(follow_symlinks=False):
                yield rel + entry.name


def _damage(path: str, size: int, *, json_object: bool) -> str | None:
    """What is wrong with the object already at ``path`` that a ``size``-byte body was about to be written to; None if sound.

    Cheap: a stat. Empty (while the new body is not) is damage. A JSON object of another size than the new body is
    read and parsed (a truncated write, a foreign file); one of the same size is taken as sound unread. Other objects
    (raw blobs) are checked for emptiness only: a different blob at the same name can be another message's (a reused
    Message-ID), which the caller tells apart.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"  # gone since the caller saw the name (nothing memex runs deletes objects): written again
    if not stat.S_ISREG(st.st_mode):
        return None  # a folder or a link: nothing memex writes, left alone
    if st.st_size == 0:
        return "empty" if size > 0 else None
    if not json_object or st.st_size == size:
        return None
    try:
        with open(path, "rb") as fh:
            parsed = json.loads(fh.read())
    except PermissionError:
        return None  # not ours to judge (nor to overwrite): memex verify reports what it cannot read
    except (OSError, ValueError):
        return "not_json"
    return None if isinstance(parsed, dict) else "not_json"


class TempFiles:
    """What a look at ``.memex-tmp`` found: temp files in all, those stale (their writer gone), and those removed."""

    def __init__(self) -> None:
        self.files = self.bytes = self.stale = self.stale_bytes = self.removed = self.removed_bytes = 0

    def to_json(self) -> dict[str, int]:
        """The counts by name (``memex verify --json``)."""
        return {k: getattr(self, k) for k in ("files", "bytes", "stale", "stale_bytes", "removed", "removed_bytes")}


def is_stale(name: str, mtime: float, now: float) -> bool:
    """The age rule for a temp file in ``.memex-tmp`` (docs/records.md): stale once its writer is gone (its name says
    which process on which machine wrote it: gone from this machine means killed or crashed), or once older than
    :data:`STALE_TMP_SECONDS` (a writer on another machine sharing the folder, or a name without its writer)."""
    return name.endswith(".tmp") and (mtime < now - STALE_TMP_SECONDS or writer_gone(name))


def temp_files(tmp: Path, *, sweep: bool) -> TempFiles:
    """Count the temp files in ``tmp`` (a store's ``.memex-tmp``); with ``sweep``, remove the stale ones
    (:func:`is_stale`): a killed writer's, never a live one's."""
    found = TempFiles()
    now = time.time()
    try:
        with os.scandir(tmp) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    found.files += 1
                    found.bytes += st.st_size
                    if not is_stale(entry.name, st.st_mtime, now):
                        continue
                    found.stale += 1
                    found.stale_bytes += st.st_size
                    if sweep:
                        os.unlink(entry.path)
                        found.removed += 1
                        found.removed_bytes += st.st_size
                except OSError:
                    pass
    except OSError:
        pass
    return found
