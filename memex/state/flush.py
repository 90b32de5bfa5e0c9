"""Making a batch of files durable: one ``syncfs(2)`` where the file system is known to flush on it, else an fsync per file.

``syncfs`` is one journal commit for a whole batch, but only some file systems honour it: on FUSE (sshfs, gocryptfs,
mergerfs, ntfs-3g, rclone mount) it returns 0 without flushing anything, and NFS, SMB and overlay make no promise a
power loss would keep. So the batch flush is chosen by the file system's type (``statfs(2)``'s ``f_type``): the fast
path only for the types in :data:`SYNCFS_PROVEN`, :func:`~memex.state.files.full_fsync` of every file everywhere
else, unknown types and other systems than Linux included (macOS: ``F_FULLFSYNC``). The choice is made once per
folder per process.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from memex.fs_errors import at_path
from memex.state.files import full_fsync

# statfs f_type of the file systems whose syncfs(2) writes back and flushes every dirty file of the file system.
SYNCFS_PROVEN: dict[int, str] = {
    0xEF53: "ext4",  # also ext2 and ext3 (one magic number): sync_filesystem + a journal commit with a cache flush
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x01021994: "tmpfs",  # memory only: nothing survives a power loss whatever is called, and fsync is a no-op too
}
# Named in the debug line only (everything not in SYNCFS_PROVEN gets the per-file path).
OTHER_NAMES: dict[int, str] = {
    0x65735546: "fuse",
    0x6969: "nfs",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x517B: "smb",
    0x794C7630: "overlay",
    0x2FC12FC1: "zfs",
    0xF2F52010: "f2fs",
}

FSYNC_THREADS = 8  # the per-file path's fsyncs in flight at once (for a batch of at least twice as many files)
SYNCFS = "syncfs"
PER_FILE = "fsync per file"

_plans: dict[str, tuple[str, str]] = {}  # folder -> (method, file system), this process's choices
_plans_lock = threading.Lock()


def fs_type(path: str | Path) -> int | None:
    """``statfs(2)``'s ``f_type`` of the file system holding ``path``; None off Linux or if the call fails."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # lazily: only a store sync needs it

    statfs = getattr(ctypes.CDLL(None, use_errno=True), "statfs", None)
    if statfs is None:
        return None
    buf = ctypes.create_string_buffer(512)  # struct statfs is 120 bytes on 64-bit Linux; f_type comes first
    if statfs(os.fsencode(str(path)), buf) != 0:
        return None
    return int(ctypes.c_long.from_buffer(buf).value) & 0xFFFFFFFF


def plan_for(kind: int | None) -> tuple[str, str]:
    """The flush for a file system of ``statfs`` type ``kind`` (None: unknown, or not Linux), and its name."""
    if kind is None:
        return PER_FILE, "unknown" if sys.platform.startswith("linux") else sys.platform
    if kind in SYNCFS_PROVEN:
        return SYNCFS, SYNCFS_PROVEN[kind]
    return PER_FILE, OTHER_NAMES.get(kind, f"0x{kind:x}")


def flush_plan(folder: str | Path, on_choice: Callable[[str, str], None] | None = None) -> tuple[str, str]:
    """How a batch of files in ``folder`` is made durable: ``(SYNCFS or PER_FILE, the file system's name)``.

    Decided once per folder per process; ``on_choice(method, fs)`` is called when the choice is first made (to log it).
    """
    key = str(folder)
    with _plans_lock:
        plan = _plans.get(key)
    if plan is not None:
        return plan
    plan = plan_for(fs_type(key))
    with _plans_lock:
        first = key not in _plans
        plan = _plans.setdefault(key, plan)
    if first and on_choice is not None:
        on_choice(*plan)
    return plan


def sync_files(files: list[str] | list[Path], method: str) -> None:
    """Make the data of ``files`` (all on one file system) durable: one ``syncfs`` if ``method`` is :data:`SYNCFS`
    (falling back to per-file if the call fails), else :func:`~memex.state.files.full_fsync` of each file.
    """
    if not files:
        return
    if method == SYNCFS and _syncfs(files[0]):
        return
    if len(files) < 2 * FSYNC_THREADS:
        _fsync_each(files)
        return
    # Several fsyncs in flight: a journalling file system commits them together, a network one overlaps round trips.
    slices = [files[i::FSYNC_THREADS] for i in range(FSYNC_THREADS)]
    errors: list[BaseException] = []

    def one(part: list[str] | list[Path]) -> None:
        try:
            _fsync_each(part)
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(part,), name="memex-fsync", daemon=True) for part in slices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _fsync_each(files: list[str] | list[Path]) -> None:
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            full_fsync(fd)
        except OSError as exc:
            at_path(exc, f)  # fsync names no file (memex.fs_errors)
            raise
        finally:
            os.close(fd)


def _syncfs(on: str | Path) -> bool:
    """``syncfs(2)`` the file system holding ``on``; False where there is none (not Linux) or it failed."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # lazily: only a store sync needs it

    fn = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    if fn is None:
        return False
    fd = os.open(on, os.O_RDONLY)
    try:
        return bool(fn(fd) == 0)
    finally:
        os.close(fd)
