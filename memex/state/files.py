"""The state directory: private (0700) folders and atomic, durable file writes."""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO

from memex.fs_errors import at_path

DIR_MODE = 0o700
FILE_MODE = 0o600


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and any missing parents, each 0700 whatever the umask) if missing; return it.

    A folder that already exists keeps its mode: memex sets modes only on folders it creates (a ``state_dir`` of the
    user's, or ``/``, is never chmod'ed). Privacy holds all the same: what memex puts inside is 0700 folders and 0600 files.
    """
    make_dirs(path)
    return path


def make_dirs(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents, each 0700 (``mkdir -p`` gives parents 0777 minus the umask).

    Returns the folders it created, outermost first (their parents' entries need an fsync to be durable).
    """
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    made = []
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(folder, DIR_MODE)  # the umask may have removed bits we want; never adds any
        made.append(folder)
    return made


def full_fsync(fd: int) -> None:
    """Flush a file's data to stable storage: ``F_FULLFSYNC`` on macOS (its fsync leaves the drive's cache), else fsync."""
    if hasattr(fcntl, "F_FULLFSYNC"):
        try:
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
            return
        except OSError:  # not supported by this file system: fall back
            pass
    os.fsync(fd)


def fsync_file(path: str | Path, *, missing_ok: bool = False) -> None:
    """fsync the file at ``path`` (with ``missing_ok``, nothing when there is none)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        full_fsync(fd)
    except OSError as exc:
        at_path(exc, path)
        raise
    finally:
        os.close(fd)


def fsync_dir(path: str | Path) -> None:
    """fsync a directory so a rename or link inside it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        full_fsync(fd)
    except OSError as exc:
        at_path(exc, path)
        raise
    finally:
        os.close(fd)


_HOST: list[str] = []  # this machine's name as temp file names carry it (computed once)


def writer_tag() -> str:
    """``PID@HOST``: who writes a temp file, as its name carries it (``.STEM.PID@HOST.RANDOM.tmp``), so that a sweep
    can tell a temp file of a writer that is gone (killed) on this machine from a live one's (:func:`temp_writer`)."""
    if not _HOST:
        name = "".join(c for c in os.uname().nodename if c.isascii() and (c.isalnum() or c == "-"))
        _HOST.append(name[:40] or "host")
    return f"{os.getpid()}@{_HOST[0]}"


def temp_writer(name: str) -> tuple[int, str] | None:
    """The (pid, host) a temp file's name says wrote it (:func:`writer_tag`), or None for a name without them."""
    parts = name.split(".")
    pid, _, host = parts[2].partition("@") if len(parts) > 3 else ("", "", "")
    return (int(pid), host) if pid.isdigit() and host else None


def writer_gone(name: str) -> bool:
    """Whether the temp file ``name`` was written on this machine by a process that no longer runs (killed, crashed).
    A pid reused since by another process reads as alive: that file then waits for the age rule, never the reverse."""
    writer = temp_writer(name)
    if writer is None or writer[1] != writer_tag().partition("@")[2] or writer[0] == os.getpid():
        return False
    try:
        os.kill(writer[0], 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it runs, as another user
        return False
    return False


def write_temp(directory: Path, stem: str, data: bytes, mode: int = FILE_MODE, *, sync: bool = True) -> Path:
    """Write ``data`` to a new, uniquely named, fsynced temp file in ``directory``.

    The name starts with ``.`` and ends with ``.tmp`` so that nothing reading
    the folder mistakes it for a finished file. The caller renames or links it.
    ``sync=False`` leaves the fsync to the caller (a group commit makes many temp files durable at once).
    """
    tmp = directory / f".{stem}.{writer_tag()}.{os.urandom(6).hex()}.tmp"
    write_new(str(tmp), data, mode, sync=sync)
    return tmp


def write_new(path: str, data: bytes, mode: int = FILE_MODE, *, sync: bool = False) -> None:
    """Create ``path`` (it must not exist) holding ``data``; fsynced only if ``sync``. A failed write leaves no file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            full_fsync(fd)
    except BaseException as exc:
        at_path(exc, path)  # os.write and fsync name no file: a full disk is said naming this one (memex.fs_errors)
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def stream_temp(directory: Path, stem: str, open_body: Callable[[], IO[bytes]], mode: int = FILE_MODE) -> Path:
    """Like :func:`write_temp`, copying a stream in chunks instead of bytes held in memory."""
    tmp = directory / f".{stem}.{writer_tag()}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with open_body() as src, os.fdopen(os.dup(fd), "wb") as dst:
            import shutil  # here, not at the top: shutil pulls in zlib, bz2 and lzma (start-up cost)

            shutil.copyfileobj(src, dst, 1 << 20)
        full_fsync(fd)
    except BaseException as exc:
        at_path(exc, tmp)
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def atomic_replace(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Durably replace ``path`` with ``data``: temp file, fsync, rename, fsync dir."""
    tmp = write_temp(path.parent, path.name, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def require_state_dir(path: Path) -> Path:
    """The state folder, created private if missing; a folder memex cannot use is one line naming it and the fix."""
    import errno

    from memex.errors import StateError
    from memex.fs_errors import EnvironmentFault, explain, not_memex_made, readonly

    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):  # never chmod a file that is in the way
            raise EnvironmentFault(str(path), errno.ENOTDIR, fix="move that file away, or set state_dir to a folder")
    except FileNotFoundError:
        pass  # made below
    except OSError as exc:
        raise (explain(exc) or StateError(f"cannot use the state folder ({exc.strerror}); set state_dir", path=path)) from None
    try:
        ensure_private_dir(path)
    except OSError as exc:
        raise (explain(exc) or StateError(f"cannot use the state folder ({exc.strerror}); set state_dir", path=path)) from None
    if not os.access(path, os.W_OK) and readonly(str(path)):
        raise EnvironmentFault(str(path), errno.EROFS)
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK) and (owner := not_memex_made(path)) is not None:
        raise StateError(f"cannot use the state folder: it is {owner}'s and not one memex made, and this user ({_owner(None)}) "
                         f"cannot write in it; set state_dir to a folder of your own", path=path)  # fmt: skip
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):  # a private folder of another user (the one cron runs memex as)
        raise StateError(f"cannot use the state folder: it is {_owner(path)}'s and this user ({_owner(None)}) cannot read it; run "
                         f"memex as {_owner(path)}, or set state_dir to a folder of this user's", path=path)  # fmt: skip
    return path


def _owner(path: Path | None) -> str:
    """The name of ``path``'s owner (None: of this process), or its uid when it has no name."""
    import pwd

    uid = os.geteuid() if path is None else path.stat().st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
