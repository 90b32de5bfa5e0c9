"""A durable spool for what a source hands over only once: kept on disk until its records are stored.

Some sources forget what they hand over (``signal-cli receive`` acknowledges every message it prints,
and the server never delivers it again), so their bytes must be on disk before anything else happens
to them, and stay there until the objects made of them are durable in the store. Maildir-style, one
folder per source with ``tmp/``, ``new/`` and ``cur/``:

- **writing**: :meth:`Spool.writer` creates ``tmp/<name>`` (0600, create-exclusive) and holds an
  ``flock`` on it for as long as anyone writes to it (a child process that got it as its stdout
  inherits the lock, so it stays held while the child lives, even if memex was killed).
  :meth:`Spool.deliver` fsyncs the bytes, renames them into ``new/`` and fsyncs ``new/``: from then
  on the entry survives any crash. A long delivery is cut at record separators into entries of at
  most ``chunk`` records, so one claim is a bounded piece of work that a poll can finish;
- **claiming**: a claimant makes its own folder ``cur/<token>`` (locked while it lives) and renames
  entries from ``new/`` into it; a rename succeeds for exactly one claimant;
- **removing**: :meth:`Claim.remove` is called only once the entry's records are durable in the store;
- **recovering**: :meth:`Spool.recover` delivers ``tmp/`` files whose writer is gone (their lock is
  free) and renames the entries of claim folders whose claimant is gone back into ``new/``.

A crash at any moment therefore loses nothing: at worst an entry is processed again, and the store's
create-only writes (dedup by native ID) absorb the replay. Names start with the creation time in
nanoseconds, so sorting names is oldest first and the oldest age needs no ``stat``.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memex.state.files import FILE_MODE, ensure_private_dir, fsync_dir, full_fsync

DEFAULT_CHUNK = 256  # records per entry, at most
_counter = itertools.count()


def _new_name() -> str:
    return f"{time.time_ns():020d}.{os.getpid()}.{next(_counter)}.{secrets.token_hex(3)}"


def _born_ns(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@dataclass
class Entry:
    """One spooled entry, claimed: its records are read with :meth:`records`."""

    name: str
    path: Path

    def records(self) -> list[bytes]:
        """The entry's records (split at newlines; a last record without one is kept as it is)."""
        data = self.path.read_bytes()
        parts = data.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        return parts


class Writer:
    """An open, locked ``tmp/`` file: hand :attr:`fd` to a child process as its stdout, or :meth:`write` to it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd

    def write(self, data: bytes) -> None:
        """Append ``data`` (not yet durable: :meth:`Spool.deliver` makes it so)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        """Close without delivering (the entry stays in ``tmp/``; :meth:`Spool.recover` delivers it later)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass(frozen=True)
class Stats:
    """How much is waiting: entries in ``new/`` and claimed, and the age of the oldest (None if none)."""

    count: int
    oldest_age_s: float | None


class Spool:
    """The spool under ``root`` (created private on first use)."""

    def __init__(self, root: Path, *, chunk: int = DEFAULT_CHUNK) -> None:
        self.root = root
        self.tmp = root / "tmp"
        self.new = root / "new"
        self.cur = root / "cur"
        self.chunk = chunk

    def _ready(self) -> None:
        for folder in (self.tmp, self.new, self.cur):
            ensure_private_dir(folder)

    # -- writing ------------------------------------------------------------------------------------
    def writer(self) -> Writer:
        """A new locked ``tmp/`` file to write records into (one per line)."""
        self._ready()
        path = self.tmp / _new_name()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return Writer(path, fd)

    def add(self, data: bytes) -> None:
        """Spool ``data`` (one or more newline-separated records) durably, as :meth:`writer` and :meth:`deliver` do."""
        w = self.writer()
        w.write(data)
        self.deliver(w)

    def deliver(self, writer: Writer) -> int:
        """Make a finished ``tmp/`` file durable in ``new/`` (cut into entries of at most ``chunk`` records); return how many entries."""
        try:
            return self._deliver(writer.path, writer.fd)
        finally:
            writer.close()

    def _deliver(self, path: Path, fd: int) -> int:
        if os.fstat(fd).st_size == 0:
            path.unlink(missing_ok=True)
            return 0
        full_fsync(fd)
        count = 0
        with open(path, "rb") as f:
            lines = iter(f)
            first = list(itertools.islice(lines, self.chunk))
            rest = list(itertools.islice(lines, 1))
            if not rest:  # small: the file itself is the entry
                os.rename(path, self.new / path.name)
                fsync_dir(self.new)
                return 1
            pieces = itertools.chain(first, rest, lines)
            while batch := list(itertools.islice(pieces, self.chunk)):
                self._write_entry(f"{path.name}.{count:06d}", b"".join(batch))
                count += 1
        fsync_dir(self.new)
        path.unlink()  # every piece is durable in new/; a crash before this line delivers them again (a replay)
        fsync_dir(self.tmp)
        return count

    def _write_entry(self, name: str, data: bytes) -> None:
        piece = self.tmp / f".{name}"
        fd = os.open(piece, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            full_fsync(fd)
        finally:
            os.close(fd)
        os.rename(piece, self.new / name)

    # -- claiming -----------------------------------------------------------------------------------
    def claim(self) -> Claim:
        """A new claimant (its folder locked for as long as this process keeps it)."""
        self._ready()
        return Claim(self)

    # -- recovering ---------------------------------------------------------------------------------
    def recover(self) -> tuple[int, int]:
        """Deliver what dead writers left in ``tmp/`` and take back what dead claimants held; return (delivered, taken back)."""
        if not self.root.exists():
            return 0, 0
        self._ready()
        delivered = taken = 0
        for name in sorted(os.listdir(self.tmp)):
            path = self.tmp / name
            if name.startswith("."):
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except (FileNotFoundError, IsADirectoryError):
                continue
            try:
                if _try_lock(fd):
                    delivered += self._deliver(path, fd)
            finally:
                os.close(fd)
        for name in os.listdir(self.tmp):
            if name.startswith(".claim."):  # a claimant that died before its folder reached cur/ (it is empty)
                _drop_if_dead(self.tmp / name)
            elif name.startswith(".") and not (self.tmp / name[1:].rsplit(".", 1)[0]).exists():
                (self.tmp / name).unlink(missing_ok=True)  # a piece of a delivery cut short: its source is delivered again
        for token in sorted(os.listdir(self.cur)):
            folder = self.cur / token
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                continue
            try:
                if _try_lock(fd):
                    taken += _give_back(folder, self.new)
            finally:
                os.close(fd)
        return delivered, taken

    def stats(self, now_ns: int | None = None) -> Stats:
        """Entries waiting (in ``new/`` and claimed) and the oldest one's age."""
        if not self.root.exists():
            return Stats(0, None)
        names = _names(self.new)
        for token in _names(self.cur):
            names += _names(self.cur / token)
        born = [b for b in map(_born_ns, names) if b is not None]
        now = time.time_ns() if now_ns is None else now_ns
        return Stats(len(names), max(0.0, (now - min(born)) / 1e9) if born else None)


class Claim:
    """One claimant's folder ``cur/<token>``: entries renamed into it are this process's alone."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        token = f"{os.getpid()}.{secrets.token_hex(6)}"
        staging = spool.tmp / f".claim.{token}"
        staging.mkdir(mode=0o700)
        self.fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(self.fd, fcntl.LOCK_EX)  # locked before it is visible in cur/, so never mistaken for a dead one
        self.folder = spool.cur / token
        os.rename(staging, self.folder)
        self._queue: list[str] = []

    def next(self) -> Entry | None:
        """Claim the oldest entry in ``new/`` (None when there is none)."""
        while True:
            if not self._queue:
                self._queue = sorted(_names(self.spool.new), reverse=True)
                if not self._queue:
                    return None
            name = self._queue.pop()
            try:
                os.rename(self.spool.new / name, self.folder / name)
            except FileNotFoundError:
                continue  # another claimant had it first
            return Entry(name, self.folder / name)

    def remove(self, entries: list[Entry]) -> None:
        """Forget entries whose records are durable in the store (call only then)."""
        for entry in entries:
            entry.path.unlink(missing_ok=True)
        if entries:
            fsync_dir(self.folder)

    def release(self) -> int:
        """Give every entry still held back to ``new/`` and drop the claim folder; return how many went back."""
        if self.fd < 0:
            return 0
        try:
            return _give_back(self.folder, self.spool.new)
        finally:
            os.close(self.fd)
            self.fd = -1


def _give_back(folder: Path, new: Path) -> int:
    names = _names(folder)
    for name in names:
        os.rename(folder / name, new / name)
    if names:
        fsync_dir(new)
    try:
        folder.rmdir()
    except OSError:
        pass
    return len(names)


def _drop_if_dead(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if _try_lock(fd):
            folder.rmdir()
    except OSError:
        pass
    finally:
        os.close(fd)


def _names(folder: Path) -> list[str]:
    try:
        return [n for n in os.listdir(folder) if not n.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def iter_entries(spool: Spool) -> Iterator[Entry]:
    """Claim every entry in turn (oldest first), releasing the claim at the end; for tools and tests."""
    claim = spool.claim()
    try:
        while (entry := claim.next()) is not None:
            yield entry
    finally:
        claim.release()
