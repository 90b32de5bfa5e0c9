"""File locks: an exclusive lock with a deadline, and a non-blocking run lock.

Both use ``flock(2)`` on a dedicated lock file that is created once (0600) and
never deleted, truncated away or replaced: deleting or replacing a lock file
lets two processes hold "the" lock on two different inodes at once. The lock
belongs to the open file description, so two opens in one process (threads)
exclude each other as well as two processes do. The kernel drops the lock
when its holder dies, even under ``kill -9``.

Waiting is fair and prompt: :func:`exclusive` blocks in ``flock`` itself (the
kernel wakes a waiter the moment the holder lets go) instead of polling with
``LOCK_NB`` and sleeping, which under contention let a newcomer win again and
again while an old waiter slept. The deadline is kept by a helper thread.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memex.errors import AlreadyRunning, LockTimeout
from memex.fs_errors import at_path

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


class _Waiter:
    """A thread blocked in ``flock(LOCK_EX)`` on its own descriptor of a lock file, for a caller that waits with a deadline.

    The thread opens the file itself, so its lock is on an open file description nobody else uses: if the caller
    gives up, the thread closes it as soon as the lock is granted, which releases it without touching any other lock.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._state = threading.Lock()
        self._done = threading.Event()
        self._fd: int | None = None
        self._error: OSError | None = None
        self._abandoned = False
        threading.Thread(target=self._run, name="memex-flock-wait", daemon=True).start()

    def _run(self) -> None:
        try:
            fd = _open_lock_file(self._path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:
            with self._state:
                self._error = exc
            self._done.set()
            return
        with self._state:
            if self._abandoned:
                os.close(fd)  # the caller gave up: closing our own descriptor drops the lock we were granted
                return
            self._fd = fd
        self._done.set()

    def take(self, timeout: float) -> int | None:
        """The descriptor holding the lock, or None once ``timeout`` seconds passed (the thread then lets go for us)."""
        try:
            self._done.wait(timeout)
        except BaseException:  # a signal handler raised (SIGTERM, Ctrl-C): give up, never leave the lock held
            with self._state:
                self._abandoned = True
                if self._fd is not None:
                    os.close(self._fd)
            raise
        with self._state:
            if self._error is not None:
                raise self._error
            if self._fd is None:
                self._abandoned = True
            return self._fd


def lock_exclusive(path: Path, timeout: float) -> int | None:
    """Open ``path`` and take ``flock(LOCK_EX)`` on it within ``timeout`` seconds; the holding descriptor, or None.

    Uncontended it costs one non-blocking ``flock``; contended it blocks in the kernel (prompt, in the order the
    kernel wakes waiters) rather than polling. Close the descriptor (or ``LOCK_UN``) to release.
    """
    fd = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        os.close(fd)
    except BaseException:
        os.close(fd)
        raise
    if timeout <= 0:
        return None
    return _Waiter(path).take(timeout)


@contextmanager
def exclusive(path: Path, timeout: float = 10.0) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the ``with`` block.

    Waits at most ``timeout`` seconds, blocked in the kernel (see :func:`lock_exclusive`), then raises
    :class:`LockTimeout` naming the path.
    """
    fd = lock_exclusive(path, timeout)
    if fd is None:
        raise LockTimeout(path, timeout)
    try:
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
            for _ in range(10):  # the holder writes its pid just after taking the lock: give it that moment
                if pid is not None:
                    break
                time.sleep(0.005)
                pid = _read_pid(fd)
            os.close(fd)
            raise AlreadyRunning(self.path, pid) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            os.close(fd)
            at_path(exc, self.path)  # a full disk on write names no file (memex.fs_errors)
            raise
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
