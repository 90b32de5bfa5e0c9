"""Reading a source's rotated JSON-lines log: recent events from the end, and following new lines.

``<source>.jsonl`` is rotated by :class:`memex.observe.logs.SourceSink` to
``<source>.jsonl.1``, ``.2``, ... (see there). Two readers live here:

* :class:`RecentReader` reads events newest first, from the end of the live
  file and then into the rotated ones, and stops when the caller has enough
  (a time horizon or a byte budget). It counts the bytes it read, so a test
  can show that a state dir with months of logs is not read from the start.
* :class:`Follower` follows a log by offset, like ``tail -F``: it reads what
  was appended since last time; when the file was rotated it first finishes
  the old file through its open descriptor (every writer appends under a
  shared lock, and rotation takes it exclusively, so nothing is written to the
  old file after the rename), then continues with the next one; when the file
  was truncated it starts again at 0.

The history reader walks the files by name while writers may rotate them. Going on at the next index after a
file was read is wrong once two rotations happened while it was read: a file *newer* than it has moved up past it,
and ``memex tail -f`` printed that file's lines twice (once as history, once followed; seen in a busy flake-hunt
round). The next file is therefore the one after the file read last, found where it is now by a *stable* scan
(:func:`scan`: the live file's identity is the same before and after it, so no rotation completed meanwhile and
the first sighting of each file is in newest-to-oldest order).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 64 * 1024
SCAN_TRIES = 200  # stable scans wanted in a row of rotations; each failed try waits a little longer

Ident = tuple[int, int]


def rotated(path: Path, index: int) -> Path:
    """The ``index``-th rotated file of a log (0 is the live file)."""
    return path if index == 0 else path.with_name(f"{path.name}.{index}")


def _ident(path: Path) -> Ident | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def scan(path: Path, backups: int) -> list[Ident | None] | None:
    """The identity of the file at each name (live, ``.1``, ...), from a scan no rotation completed during.

    A rotation always renames the live file away, so the live name's identity, read before and after the scan,
    changes with every rotation that completes meanwhile; such a scan is thrown away and taken again (with a short
    pause that grows, so a busy writer lets one through). A rotation still in progress may show one file at two
    neighbouring names, or a hole: the first sighting of each file is still in order, newest first. None if no
    stable scan was had in :data:`SCAN_TRIES` tries.
    """
    names = [rotated(path, i) for i in range(backups + 1)]
    for attempt in range(SCAN_TRIES):
        before = _ident(names[0])
        idents = [before, *(_ident(name) for name in names[1:])]
        if _ident(names[0]) == before:
            return idents
        time.sleep(min(0.05, 0.0005 * (attempt + 1)))
    return None


def _open_as(path: Path, wanted: Ident) -> int | None:
    """A descriptor of ``path`` if it is still the file ``wanted``, else None (it moved: scan again)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) == wanted:
        return fd
    os.close(fd)
    return None


def parse_line(line: bytes) -> dict[str, Any] | None:
    """One JSON-lines event, or None for a torn or foreign line."""
    try:
        event = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return event if isinstance(event, dict) else None


@dataclass
class RecentReader:
    """Reads a log's events newest first across its rotated files, counting bytes read."""

    path: Path
    backups: int = 5
    max_bytes: int = 8 * 1024 * 1024
    bytes_read: int = 0
    lines_parsed: int = 0
    # Set by Follower.history(): skip files newer than this (dev, inode), read it only up to this offset.
    start: tuple[Ident, int] | None = None
    nothing: bool = False
    _inodes: set[Ident] = field(default_factory=set)

    def lines(self) -> Iterator[bytes]:
        """Complete lines newest first, live file then ``.1``, ``.2``, ..., within ``max_bytes``.

        Each next file is the first one after the file read last, found at its current name by a stable
        :func:`scan`: a rotation while a file is read neither brings back a newer file nor skips an older one.
        """
        if self.nothing:
            return
        last: Ident | None = None
        misses = 0
        while self.bytes_read < self.max_bytes and misses < SCAN_TRIES:
            idents = scan(self.path, self.backups)
            if idents is None:
                return
            nxt = self._after(idents, last)
            if nxt is None:
                return
            fd = _open_as(rotated(self.path, nxt[0]), nxt[1])
            if fd is None:
                misses += 1
                continue  # it moved since the scan: scan again
            try:
                end = os.fstat(fd).st_size
                if last is None and self.start is not None:
                    end = min(end, self.start[1])  # the follower reads on from there
                self._inodes.add(nxt[1])
                last = nxt[1]
                yield from self._backward(fd, end)
            finally:
                os.close(fd)

    def _after(self, idents: list[Ident | None], last: Ident | None) -> tuple[int, Ident] | None:
        """Where the file to read next is: the first file (or the follower's), else the next older than ``last``."""
        if last is None:
            first = self.start[0] if self.start is not None else next((i for i in idents if i is not None), None)
            if first is None or first not in idents:
                return None  # no log, or the follower's file was rotated out: nothing before it is left
            return idents.index(first), first
        if last not in idents:
            return None  # rotated out while it was read: so were the older ones
        for index in range(idents.index(last) + 1, len(idents)):
            ident = idents[index]
            if ident is not None and ident != last and ident not in self._inodes:
                return index, ident
        return None

    def _backward(self, fd: int, end: int) -> Iterator[bytes]:
        pos, tail = end, b""
        while pos > 0 and self.bytes_read < self.max_bytes:
            size = min(BLOCK, pos)
            pos -= size
            self.bytes_read += size
            parts = (os.pread(fd, size, pos) + tail).split(b"\n")
            tail = parts[0]
            for line in reversed(parts[1:]):
                if line.strip():
                    yield line
        if pos == 0 and tail.strip():
            yield tail

    def events(self) -> Iterator[dict[str, Any]]:
        """Parsed events newest first (torn lines skipped)."""
        for line in self.lines():
            self.lines_parsed += 1
            event = parse_line(line)
            if event is not None:
                yield event


class Follower:
    """Follows one log by offset across rotation and truncation; :meth:`read` returns new complete lines."""

    def __init__(self, path: Path, backups: int = 5, *, from_end: bool = True) -> None:
        self.path = path
        self.backups = backups
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        self.bytes_read = 0
        self._open_live(from_end=from_end)

    def _open_live(self, *, from_end: bool) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not from_end:
                return
            try:  # just rotated (the next append creates the live file): start at the end of the newest rotated file
                fd = os.open(rotated(self.path, 1), os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return  # no log yet: the first read starts from the oldest file that appeared since
        st = os.fstat(fd)
        self._fd, self._ident = fd, (st.st_dev, st.st_ino)
        self._offset = st.st_size if from_end else 0
        self._partial = b""

    def history(self, max_bytes: int = 8 * 1024 * 1024) -> RecentReader:
        """A reader of the lines before the point this follower started from (so together: every line once)."""
        if self._ident is None:
            return RecentReader(self.path, self.backups, max_bytes, nothing=True)  # the follower will read the whole log
        return RecentReader(self.path, self.backups, max_bytes, start=(self._ident, self._offset))

    @property
    def offset(self) -> int:
        """Where the next read starts in the current file."""
        return self._offset

    @property
    def fd(self) -> int | None:
        """The open descriptor of the file being followed (None before the log exists)."""
        return self._fd

    def close(self) -> None:
        """Close the open file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _drain(self) -> list[bytes]:
        """Read the current file from the offset to its end; complete lines only."""
        assert self._fd is not None
        out: list[bytes] = []
        size = os.fstat(self._fd).st_size
        if size < self._offset:  # truncated in place: start again
            self._offset, self._partial = 0, b""
        while self._offset < size:
            chunk = os.pread(self._fd, min(BLOCK, size - self._offset), self._offset)
            if not chunk:
                break
            self._offset += len(chunk)
            self.bytes_read += len(chunk)
            parts = (self._partial + chunk).split(b"\n")
            self._partial = parts[-1]
            out.extend(p for p in parts[:-1] if p.strip())
        return out

    def _open_oldest(self) -> None:
        """Start from the beginning of the oldest log file (all of them appeared after this follower started).

        The log may have been created and rotated several times before the first read: starting from the live
        file would skip the rotated ones. Names are scanned upward, the way rotation moves files, so the oldest
        file is seen at its current name; if it moved again before it was opened, look again.
        """
        for _ in range(5):
            found: tuple[int, tuple[int, int]] | None = None
            for index in range(self.backups + 1):
                try:
                    st = os.stat(rotated(self.path, index))
                except FileNotFoundError:
                    continue
                found = index, (st.st_dev, st.st_ino)
            if found is None:
                return
            fd = _open_as(rotated(self.path, found[0]), found[1])
            if fd is not None:
                self._fd, self._ident, self._offset, self._partial = fd, found[1], 0, b""
                return

    def _successor(self) -> tuple[int, tuple[int, int]] | None:
        """Open the file that came after the current one (the next newer rotated file, or the live one)."""
        names = [rotated(self.path, i) for i in range(self.backups + 1)]
        for _ in range(5):  # names shift if another rotation happens meanwhile: look again
            idents: list[tuple[int, int] | None] = []
            for name in names:
                try:
                    st = os.stat(name)
                    idents.append((st.st_dev, st.st_ino))
                except FileNotFoundError:
                    idents.append(None)
            if idents[0] == self._ident:
                return None
            try:
                where = idents.index(self._ident)
            except ValueError:
                where = 1  # gone from every name (rotated out, or deleted): the live file comes next
            wanted = idents[where - 1]
            if wanted is None:
                return None
            fd = _open_as(names[where - 1], wanted)
            if fd is not None:
                return fd, wanted
        return None

    def read(self) -> list[bytes]:
        """Every complete line appended since the last call, in order, across rotations."""
        if self._fd is None:
            self._open_oldest()
            if self._fd is None:
                return []
        out = self._drain()
        while True:
            nxt = self._successor()
            if nxt is None:
                break
            out.extend(self._drain())  # the old file is final once it was renamed: finish it
            if self._partial.strip():
                out.append(self._partial)
            self.close()
            self._fd, self._ident = nxt
            self._offset, self._partial = 0, b""
            out.extend(self._drain())
        return out
