"""The search index's two locks: ``flock`` on two files in ``<state_dir>/search/`` (0600, made once, never removed).

- ``open.lock``: every connection to the index holds it shared while it is open; ``memex index rebuild`` holds it
  exclusively only for the moment it renames its new file over the old one. So no process has the replaced file,
  or its WAL, open then: SQLite's files must never be renamed or removed under an open connection (the last one to
  close would checkpoint into the file it had and delete the new file's WAL by name).
- ``rebuild.lock``: a rebuild holds it exclusively from before it lists the store until after its swap; a poll or a
  backfill adding records holds it shared, taken without waiting. While a rebuild runs they add nothing and keep
  their journal: what they stored may have been listed too late for the rebuild, and a row added to the old file
  would be lost at the swap. Their next run adds it to the new file (:meth:`memex.search.build.Follower.catch_up`).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from memex.errors import StateError
from memex.state.locks import wait_flock

OPEN_LOCK = "open.lock"
REBUILD_LOCK = "rebuild.lock"
OPEN_WAIT = 10.0  # a connection waits this long for a swap (a rename) to end
SWAP_WAIT = 120.0  # a rebuild waits this long for the connections open on the old file to close
REBUILD_WAIT = 60.0  # a rebuild waits this long for a poll's update (or another rebuild) to end


class RebuildRunning(StateError):
    """A rebuild holds the index: a poll's or backfill's records stay in its journal for its next run."""


def shared(folder: Path, name: str, wait: float) -> int | None:
    """A descriptor of ``folder/name`` holding it shared (``wait`` seconds at most; 0: no waiting), or None."""
    fd = os.open(folder / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if wait_flock(fd, fcntl.LOCK_SH, wait):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def reader_lock(folder: Path) -> int:
    """Hold ``open.lock`` shared for a connection's life (close the descriptor to let go)."""
    fd = shared(folder, OPEN_LOCK, OPEN_WAIT)
    if fd is None:
        raise StateError(f"`memex index rebuild` is replacing the index (waited {OPEN_WAIT:g}s); try again", path=folder)
    return fd


def writer_lock(folder: Path) -> int:
    """Hold ``rebuild.lock`` shared while adding records, or raise :class:`RebuildRunning` at once."""
    fd = shared(folder, REBUILD_LOCK, 0)
    if fd is None:
        raise RebuildRunning("a rebuild is running; the records stay in the journal for the next run", path=folder)
    return fd
