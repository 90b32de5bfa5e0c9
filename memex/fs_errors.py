"""The machine refusing a file: one line naming the path, the cause in words and what to do.

A full disk (``ENOSPC``, ``EDQUOT``), a read-only mount (``EROFS``), a permission (``EACCES``, ``EPERM``), a file
where a folder belongs or the reverse (``ENOTDIR``, ``EISDIR``), a symbolic link loop (``ELOOP``), a name too long
(``ENAMETOOLONG``) or a failing disk (``EIO``) is the user's environment, not a bug in memex. Wherever such an
``OSError`` (or SQLite's word for one: ``SQLITE_FULL``, ``SQLITE_READONLY``, ...) ends a command or a poll, it is
said by :func:`explain` as one line, exit 1: the CLI's top-level handler (:func:`memex.error_lines.guarded`) and the
runner's failure path both go through :func:`memex.error_lines.internal_error`, which asks here first.

The path named is the one at fault: the file the operation was on, or for ``ENOTDIR`` and ``ELOOP`` the component
of it that is a file or a looping link. Operations on a descriptor (``write``, ``fsync``) carry no path, so the
places that make them attach it with :func:`at_path`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from memex.errors import MemexError

_RETRY = "then run the command again"
_ACCESS = "run memex as the user that owns it, or give this user access to it (chmod/chown)"

# errno -> (the cause in words, what to do)
CAUSES: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on the disk holding it", f"free space on that disk (or move it to a larger one), {_RETRY}"),
    errno.EDQUOT: ("disk quota exceeded", f"free space within your quota or ask for a larger one, {_RETRY}"),
    errno.EROFS: ("its file system is mounted read-only", "remount it read-write, or point the config at a writable folder"),
    errno.EACCES: ("permission denied", _ACCESS),
    errno.EPERM: ("operation not permitted", _ACCESS),
    errno.ENOTDIR: ("is a file where memex needs a folder", "move that file away, or point the config at a folder"),
    errno.EISDIR: ("is a folder where memex needs a file", "move that folder away (memex makes the file itself)"),
    errno.ELOOP: ("is a symbolic link that loops", "fix or remove that symbolic link"),
    errno.ENAMETOOLONG: ("the path is too long for its file system", "use a shorter path in the config"),
    errno.EIO: ("input/output error: the disk failed to read or write", f"check the disk (dmesg, fsck), {_RETRY}"),
}

# SQLite's error names for the same causes (the search index)
_SQLITE: dict[str, int] = {
    "SQLITE_FULL": errno.ENOSPC,
    "SQLITE_PERM": errno.EACCES,
    "SQLITE_IOERR": errno.EIO,
    "SQLITE_READONLY": errno.EACCES,  # or EROFS: told apart by the file system (readonly)
    "SQLITE_CANTOPEN": errno.EACCES,
}


class EnvironmentFault(MemexError):
    """A file memex needs was refused by the machine (full disk, read-only mount, permissions, ...): exit 1."""

    needs_action = True

    def __init__(self, path: str, code: int, *, fix: str | None = None) -> None:
        self.path = path
        self.errno = code
        cause, default_fix = CAUSES[code]
        self.fix = fix or default_fix
        super().__init__(f"{path}: {cause}; {self.fix}")

    def then(self, step: str) -> EnvironmentFault:
        """The same fault whose remedy ends with ``step`` (what to run once the cause is fixed)."""
        fix = self.fix.removesuffix(f", {_RETRY}")
        return EnvironmentFault(self.path, self.errno, fix=f"{fix}, then {step}")


def at_path(exc: BaseException, path: str | os.PathLike[str]) -> None:
    """Name ``path`` on an ``OSError`` that carries none (``os.write``, ``os.fsync`` act on a descriptor)."""
    if isinstance(exc, OSError) and exc.filename is None:
        exc.filename = os.fspath(path)


def explain(exc: BaseException, path: str | os.PathLike[str] | None = None) -> EnvironmentFault | None:
    """``exc`` as an :class:`EnvironmentFault` when it is the environment's doing, else None.

    ``path``: where it happened, when that is not the file ``exc`` names (a link's new name) or ``exc`` names none
    (a SQLite error never does).
    """
    if isinstance(exc, EnvironmentFault):
        return exc
    code: int | None = None
    where: str | None = None
    if isinstance(exc, OSError):
        code = exc.errno
        where = os.fspath(path) if path is not None else _name(exc.filename) or _name(exc.filename2)
    else:
        name = getattr(exc, "sqlite_errorname", None)
        if isinstance(name, str) and path is not None:
            code = next((c for prefix, c in _SQLITE.items() if name.startswith(prefix)), None)
            where = os.fspath(path)
            if code == errno.EACCES and readonly(where):
                code = errno.EROFS
    if code not in CAUSES or where is None:
        return None
    assert code is not None
    if code == errno.EACCES and readonly(where):
        code = errno.EROFS  # a read-only mount says EACCES to some calls (access, SQLite): say what it is
    if code in (errno.ENOTDIR, errno.ELOOP):
        where = _culprit(where, code)
    elif code in (errno.EACCES, errno.EPERM) and not os.path.lexists(where):
        where = _nearest(where)  # a file that could not be made: the folder that refused it
    if code in (errno.EACCES, errno.EPERM) and (owner := not_memex_made(where)) is not None:
        return EnvironmentFault(where, code, fix=f"it is {owner}'s and not one memex made; {OWN_FOLDER}")
    elif code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO):
        base = os.path.basename(where)
        if base.startswith(".") and base.endswith(".tmp"):  # a temp file of memex's own: the folder says more
            where = os.path.dirname(where)
    return EnvironmentFault(where, code)


OWN_FOLDER = "choose a folder of your own (state_dir, the store's url, demo's --dir)"


def not_memex_made(path: str | os.PathLike[str]) -> str | None:
    """The owner's name when ``path`` belongs to another user and is not private (``/``, ``/usr``, a shared folder):
    not one memex made (memex makes 0700 folders and 0600 files), so the advice is to choose a folder of one's own,
    never to change its permissions or to run as its owner. None for a path of this user's or a private one (then
    it is a state folder or store of another user's memex: run memex as that user)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_uid == os.geteuid() or not st.st_mode & 0o077:
        return None
    import pwd

    try:
        return pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        return f"uid {st.st_uid}"


def in_the_way(path: str | os.PathLike[str]) -> EnvironmentFault | None:
    """A file (or a looping link) standing where a folder above ``path`` must be, or None: for the places that
    test whether ``path`` exists before they would open it (a missing file there means something else)."""
    parts = Path(path).parts
    for i in range(1, len(parts)):
        probe = Path(*parts[:i])
        try:
            if not probe.is_dir() and os.path.lexists(probe):
                os.stat(probe)
                return EnvironmentFault(str(probe), errno.ENOTDIR)
        except OSError as exc:
            fault = explain(exc, probe)
            if fault is not None:
                return fault
            return None
    return None


def _name(filename: object) -> str | None:
    if isinstance(filename, (str, bytes, os.PathLike)):
        name = os.fsdecode(filename)
        return name or None
    return None


def _culprit(path: str, code: int) -> str:
    """The component of ``path`` that is a file (ENOTDIR) or a looping link (ELOOP); ``path`` itself when none is."""
    parts = Path(path).parts
    for i in range(1, len(parts) + 1):
        probe = Path(*parts[:i])
        try:
            if code == errno.ENOTDIR:
                if probe.exists() and not probe.is_dir():
                    return str(probe)
            elif probe.is_symlink():
                os.stat(probe)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return str(probe)
            break
    return path


def _nearest(path: str) -> str:
    """The nearest folder above ``path`` that this user can see exists (one it cannot search hides what is below)."""
    probe = Path(path).parent
    while not os.path.lexists(probe) and probe.parent != probe:
        probe = probe.parent
    return str(probe)


def readonly(path: str) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing folder) is mounted read-only."""
    probe = Path(path)
    for _ in range(64):
        try:
            return bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        except OSError:
            if probe.parent == probe:
                return False
            probe = probe.parent
    return False
