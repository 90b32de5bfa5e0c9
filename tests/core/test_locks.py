"""Locks: a deadline on every wait, and a run lock that names its holder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memex.errors import AlreadyRunning, LockTimeout
from memex.state.locks import RunLock, exclusive
from tests.conftest import wait_until

HOLD = """
import sys, time
from pathlib import Path
from memex.state.locks import RunLock
lock = RunLock(Path(sys.argv[1])); lock.acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def test_exclusive_times_out_with_a_timeout_error_naming_the_path(tmp_path: Path) -> None:
    """A held lock makes a second taker fail after its deadline with LockTimeout, a TimeoutError carrying the path."""
    path = tmp_path / "x.lock"
    with exclusive(path), pytest.raises(TimeoutError) as info, exclusive(path, timeout=0.2):
        pass
    assert isinstance(info.value, LockTimeout)
    assert info.value.path == path
    assert str(path) in str(info.value)


def test_run_lock_held_by_another_process_reports_its_pid(tmp_path: Path) -> None:
    """A second poller gets AlreadyRunning with the holder's pid; once the holder dies the lock is free again."""
    path = tmp_path / "poll.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(AlreadyRunning) as info:
            RunLock(path).acquire()
        assert info.value.pid == holder.pid
    finally:
        holder.kill()
        holder.wait(10)

    def free() -> bool:
        try:
            RunLock(path).acquire()
            return True
        except AlreadyRunning:
            return False

    wait_until(free, 10, "the dead holder's lock to be released")


def test_run_lock_excludes_within_one_process(tmp_path: Path) -> None:
    """Two RunLocks on one file in one process exclude each other (threads of poll --all rely on it)."""
    path = tmp_path / "poll.lock"
    with RunLock(path), pytest.raises(AlreadyRunning):
        RunLock(path).acquire()
    with RunLock(path):
        pass


def test_a_waiter_that_timed_out_leaves_no_lock_behind(tmp_path: Path) -> None:
    """A waiter that gave up (LockTimeout) while blocked in flock never keeps the lock once the holder lets go."""
    path = tmp_path / "x.lock"
    with exclusive(path), pytest.raises(LockTimeout), exclusive(path, timeout=0.1):
        pass

    def free() -> bool:
        try:
            with exclusive(path, timeout=0):
                return True
        except LockTimeout:
            return False

    wait_until(free, 10, "the abandoned waiter to release the lock it was granted")


def test_a_blocked_waiter_gets_the_lock_when_the_holder_releases(tmp_path: Path) -> None:
    """A waiter blocked in another process takes the lock once the holder lets go, well within its deadline."""
    path = tmp_path / "x.lock"
    code = "import sys; from pathlib import Path; from memex.state.locks import exclusive\nwith exclusive(Path(sys.argv[1]), 30):\n    print('got', flush=True)\n"
    with exclusive(path):
        waiter = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    assert out.strip() == "got"
