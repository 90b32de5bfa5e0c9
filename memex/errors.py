"""The exception tree of memex.

Every error a user can meet is a :class:`MemexError`. Each carries the exit
code the CLI uses (1 runtime, 2 usage or configuration) and renders as one
line that names the file, key or message at fault and says what to do.
Messages never contain message text or credentials.
"""

from __future__ import annotations

from pathlib import Path


class MemexError(Exception):
    """Base of every error memex reports to a user; ``str()`` is one line."""

    exit_code = 1
    retry_helps = True  # False when running the same command again would fail the same way (the fix is elsewhere)
    needs_action = False  # True when polls cannot succeed until the user acts: `memex status` shows FAILING at once
    said = False  # True when its line is on stderr already (memex.observe.logs.LogUnwritable): not said twice


class ConfigError(MemexError, ValueError):
    """The configuration is missing, unreadable or invalid (exit 2)."""

    exit_code = 2
    retry_helps = False

    def __init__(self, message: str, *, path: Path | str | None = None, key: str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.key = key
        where = []
        if path is not None:
            where.append(str(path))
        if key:
            where.append(f"key {key!r}")
        prefix = ": ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class StateError(MemexError):
    """A state file (cursors.json) is unreadable or corrupt; it is left untouched."""

    def __init__(self, message: str, *, path: Path | str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class StoredCursorRefused(StateError):
    """The cursor read from the cursor store is not one its source writes (edited by hand); the poll does not start."""

    needs_action = True


class LockTimeout(MemexError, TimeoutError):
    """An exclusive lock could not be taken within its deadline."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        super().__init__(f"{path}: could not take the lock within {timeout:g}s; another memex process holds it (check for a hung poll)")


class AlreadyRunning(MemexError):
    """A non-blocking run lock is held by another process."""

    def __init__(self, path: Path | str, pid: int | None, *, host: str | None = None) -> None:
        self.path = path
        self.pid = pid
        self.host = host
        on = f" on {host}" if host else ""
        super().__init__(f"{path}: already running (pid {pid if pid is not None else 'unknown'}{on})")


class SourceError(MemexError):
    """A source cannot be read (missing file, no permission, bad server reply)."""


class SourceMissing(SourceError):
    """The configured source is not there or not what its type reads (a wrong path): fix the config, not a retry."""

    retry_helps = False


class StoreError(MemexError):
    """The object store refused or failed a write or read."""


class LeaseLost(MemexError):
    """A cursor write under a run lease whose epoch is older than the stored one: another host took over."""


class BadCursor(MemexError):
    """A poller handed back a cursor memex cannot trust (malformed, empty or backward); it is not saved."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(
            f"poller of {source!r} handed back a cursor memex cannot trust ({reason}); not saving it, the stored cursor stays "
            "(a bug in the poller: please report it)"
        )


class CursorConflict(MemexError):
    """The stored cursor changed under a running poll, or a poller tried to move it backward."""


def describe_exc(exc: BaseException) -> str:
    """An exception by its type and error code only, never its message.

    Library messages may quote the record they failed on (sqlite3 quotes the column's text, a codec the
    bytes it choked on), so memex never puts ``str(exc)`` of a library exception into a log line, an
    error, a heartbeat body or stderr: this is what it says instead. ``OSError`` keeps its ``strerror``
    (a system message such as "Permission denied"), sqlite3 errors their ``SQLITE_...`` code name.
    """
    name = type(exc).__name__
    code = getattr(exc, "sqlite_errorname", None)
    if isinstance(code, str) and code:
        return f"{name} {code}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{name}: {exc.strerror}"
    return name


class AuthRequired(SourceError):
    """A source's login is missing, expired or revoked: the user must run ``memex auth SOURCE`` again.

    The poll fails with this one line (exit 1) and its summary line carries ``auth_required``, so
    ``memex status`` and the dashboard show the state AUTH. It never quotes a token or the identity
    platform's answer.
    """

    def __init__(self, source: str, why: str) -> None:
        self.source = source
        super().__init__(f"{source}: {why}; run `memex auth {source}` to sign in again")
