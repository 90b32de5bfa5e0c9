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
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK = 64 * 1024


def rotated(path: Path, index: int) -> Path:
    """The ``index``-th rotated file of a log (0 is the live file)."""
    return path if index == 0 else path.with_name(f"{path.name}.{index}")


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
    start: tuple[tuple[int, int], int] | None = None
    nothing: bool = False
    _inodes: set[tuple[int, int]] = field(default_factory=set)

    def lines(self) -> Iterator[bytes]:
        """Complete lines newest first, live file then ``.1``, ``.2``, ..., within ``max_bytes``."""
        if self.nothing:
            return
        waiting = self.start is not None
        for index in range(self.backups + 1):
            if self.bytes_read >= self.max_bytes:
                return
            try:
                fd = os.open(rotated(self.path, index), os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                if index == 0 or rotated(self.path, index + 1).exists():
                    continue  # no live file yet, or a hole left by a rotation shifting the files up: the file is further on
                return
            try:
                st = os.fstat(fd)
                ident = (st.st_dev, st.st_ino)
                if ident in self._inodes:  # rotated under us: already read under its previous name
                    continue
                self._inodes.add(ident)
                end = st.st_size
                if waiting and self.start is not None:
                    if ident != self.start[0]:
                        continue  # newer than where the follower starts: the follower reads it
                    waiting, end = False, min(end, self.start[1])
                yield from self._backward(fd, end)
            finally:
                os.close(fd)

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
            try:
                fd = os.open(rotated(self.path, found[0]), os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == found[1]:
                self._fd, self._ident, self._offset, self._partial = fd, found[1], 0, b""
                return
            os.close(fd)

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
            try:
                fd = os.open(names[where - 1], os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == wanted:
                return fd, wanted
            os.close(fd)
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
