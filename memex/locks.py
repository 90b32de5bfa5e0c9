"""File locks: an exclusive lock with a deadline, and a non-blocking run lock.

Both use ``flock(2)`` on a dedicated lock file that is created once (0600) and
never deleted, truncated away or replaced: deleting or replacing a lock file
lets two processes hold "the" lock on two different inodes at once. The lock
belongs to the open file description, so two opens in one process (threads)
exclude each other as well as two processes do. The kernel drops the lock
when its holder dies, even under ``kill -9``.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memex.errors import AlreadyRunning, LockTimeout

_POLL_START = 0.001
_POLL_MAX = 0.05


def _open_lock_file(path: Path) -> int:
    """Open (creating 0600 if needed) a lock file and return its descriptor."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def wait_flock(fd: int, mode: int, timeout: float) -> bool:
    """Take ``flock`` ``mode`` (LOCK_EX or LOCK_SH) on ``fd``, waiting at most ``timeout`` seconds.

    Retries with a short capped backoff on the monotonic clock; returns False
    if the lock could not be had in time (the caller decides what that means).
    """
    deadline = time.monotonic() + timeout
    delay = _POLL_START
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, _POLL_MAX)


@contextmanager
def exclusive(path: Path, timeout: float = 10.0) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the ``with`` block.

    Waits at most ``timeout`` seconds (see :func:`wait_flock`), then raises
    :class:`LockTimeout` naming the path.
    """
    fd = _open_lock_file(path)
    try:
        if not wait_flock(fd, fcntl.LOCK_EX, timeout):
            raise LockTimeout(path, timeout)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class RunLock:
    """A non-blocking lock saying "this source is being polled", with the holder's pid.

    ``acquire`` either takes the lock at once or raises :class:`AlreadyRunning`
    carrying the pid written by the holder. The pid is written into the lock
    file in place (the file itself is never replaced).
    """

    epoch: int | None = None  # no fencing token: a flock cannot be taken over while its holder lives

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock now or raise :class:`AlreadyRunning`."""
        fd = _open_lock_file(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise AlreadyRunning(self.path, pid) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock; the file stays in place for the next holder."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    """Read the holder's pid from a lock file, or None if it is not there yet."""
    try:
        raw = os.pread(fd, 32, 0).strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None
