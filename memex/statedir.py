"""The state directory: private (0700) folders and atomic, durable file writes."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import IO

DIR_MODE = 0o700
FILE_MODE = 0o600


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) if missing and make it 0700; return it."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if (path.stat().st_mode & 0o777) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or link inside it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_temp(directory: Path, stem: str, data: bytes, mode: int = FILE_MODE) -> Path:
    """Write ``data`` to a new, uniquely named, fsynced temp file in ``directory``.

    The name starts with ``.`` and ends with ``.tmp`` so that nothing reading
    the folder mistakes it for a finished file. The caller renames or links it.
    """
    tmp = directory / f".{stem}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def stream_temp(directory: Path, stem: str, open_body: Callable[[], IO[bytes]], mode: int = FILE_MODE) -> Path:
    """Like :func:`write_temp`, copying a stream in chunks instead of bytes held in memory."""
    tmp = directory / f".{stem}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with open_body() as src, os.fdopen(os.dup(fd), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.fsync(fd)
    except BaseException:
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
