"""Structured logs: one JSON-lines file per source, and a short line on a terminal.

Events have dotted names (``poll``, ``cursor.set``, ``source.reset``) and
key-value fields. Each source's events are appended to
``<state_dir>/logs/<source>.jsonl`` (one ``write`` per line, O_APPEND, file
0600); the dashboard and ``memex tail`` read these. On a terminal a human
line is printed (``poll ok: 4 new (cursor 89632 -> 89636)``); off a terminal
(cron) only warnings and errors reach stderr, as JSON, so cron mails only
problems. Fields that could carry message text or secrets are redacted
before anything is written.
"""

from __future__ import annotations

import fcntl
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from memex.errors import MemexError
from memex.fs_errors import at_path
from memex.safe_text import json_text, visible
from memex.state.files import ensure_private_dir
from memex.state.locks import wait_flock

REDACT = frozenset({"text", "body", "content", "password", "secret", "token", "subject"})
LOG_MAX_BYTES = 10 * 1024 * 1024  # the config's log_max_bytes / log_backups defaults
LOG_BACKUPS = 5
LOG_LOCK_SECONDS = 10.0  # how long an append waits for the rotation lock


def _append_line(path: Path, data: bytes) -> None:
    """One O_APPEND write of a whole line (file created 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
    except OSError as exc:
        at_path(exc, path)  # a full disk on write names no file (memex.fs_errors)
        raise
    finally:
        os.close(fd)


def log_path(state_dir: Path, source: str) -> Path:
    """Where a source's JSON-lines log lives."""
    return state_dir / "logs" / f"{source}.jsonl"


def short_ts(ts: Any) -> str:
    """An event's RFC 3339 time as ``2026-11-22 07:08:03Z`` (seconds), or ``-`` when it has none."""
    if not ts:
        return "-"
    return str(ts)[:19].replace("T", " ") + "Z"


def human_line(event: dict[str, Any]) -> str:
    """The terminal form of an event: ``poll ok: 4 new (cursor 89632 -> 89636)`` for polls.

    A poll cut short says so: ``poll stopped (time limit): 4 new ...`` or ``poll stopped (interrupted): ...``. The
    line is shown through :func:`memex.safe_text.visible`: an error quoting server text or a path, a
    mailbox's name in a cursor, cannot reach the terminal as a control.
    """
    return visible(_human_line(event))


STOPPED = {"deadline": "stopped (time limit)", "signal": "stopped (interrupted)"}


def _human_line(event: dict[str, Any]) -> str:
    name = event.get("event", "")
    source = event.get("source", "")
    if name == "poll":
        status = event.get("status", "?")
        if status == "skipped":
            return f"{source}: poll skipped: already running (pid {event.get('holder_pid', '?')})"
        if status == "error":
            return f"{source}: poll error: {event.get('error', '')}"
        parts = f"{event.get('new', 0)} new"
        if event.get("repaired"):
            parts += f" ({event['repaired']} repaired)"
        if event.get("dup"):
            parts += f", {event['dup']} dup"
        if event.get("quarantined"):
            parts += f", {event['quarantined']} quarantined"
        if event.get("settling"):  # an export still being written: the poll waits for it, it is not idle for good
            parts += f"; waiting for {event['settling']} still being written to settle"
        if event.get("stopped") and status in ("ok", "idle"):
            status = STOPPED.get(str(event["stopped"]), f"stopped ({event['stopped']})")
        return f"{source}: poll {status}: {parts} (cursor {event.get('cursor_before')} -> {event.get('cursor_after')})"
    if name == "backfill.finished":  # as the backfill's own summary line says it
        parts = ", ".join(f"{event.get(k, 0)} {k}" for k in ("new", "dup", "quarantined", "failed"))
        return f"{source}: backfill {event.get('status', '?')}: {parts} (checkpoint {_plain(event.get('checkpoint'))})"
    level = event.get("level", "info")
    fields = " ".join(f"{k}={_plain(v)}" for k, v in event.items() if k not in ("event", "level", "ts", "source"))
    return f"{source}: {level}: {name} {fields}".rstrip()


def _plain(value: Any) -> str:
    """A field's value for a person: positions as ``rowid:16000`` (``INBOX:12,Sent:3``; ``-`` for none), a list
    comma-separated, never Python's repr (``{'rowid': 16000}``)."""
    if isinstance(value, dict):
        return ",".join(f"{k}:{_plain(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ",".join(_plain(v) for v in value) or "-"
    return str(value)


class SourceSink:
    """Where a source's events go: appends JSON lines, echoes to the console."""

    def __init__(
        self, path: Path, console: IO[str] | None, console_is_tty: bool, *, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS
    ) -> None:
        self.path = path
        self.console = console
        self.console_is_tty = console_is_tty
        self.max_bytes = max_bytes  # 0: never rotate
        self.backups = max(1, backups)
        self.lock_path = path.parent.parent / "locks" / f"{path.stem}.log.lock"

    def _append(self, data: bytes) -> None:
        """Append one line; rotate first if it would pass ``max_bytes``.

        Every append holds a shared lock on ``locks/<source>.log.lock`` and
        rotation holds it exclusively, so two writers (a poll and a backfill)
        never both rotate, and no line is written to a file after it was
        renamed away: a follower that finishes the old file after seeing the
        rename has every line. ``<source>.jsonl`` becomes ``.jsonl.1``, ``.1``
        becomes ``.2``, ..., and ``.<backups>`` is dropped. Writers append
        side by side, so a file can pass ``max_bytes`` by a line per
        concurrent writer.
        """
        ensure_private_dir(self.path.parent)
        if self.max_bytes <= 0:
            _append_line(self.path, data)
            return
        ensure_private_dir(self.lock_path.parent)
        lock = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            wait_flock(lock, fcntl.LOCK_SH, LOG_LOCK_SECONDS)  # past that, append unlocked: never drop a log line
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                size = 0
            if size > 0 and size + len(data) > self.max_bytes:
                fcntl.flock(lock, fcntl.LOCK_UN)
                wait_flock(lock, fcntl.LOCK_EX, LOG_LOCK_SECONDS)
                self._rotate(len(data))
                fcntl.flock(lock, fcntl.LOCK_UN)
                wait_flock(lock, fcntl.LOCK_SH, LOG_LOCK_SECONDS)
            _append_line(self.path, data)
        finally:
            os.close(lock)  # drops the lock

    def _rotate(self, incoming: int) -> None:
        """Shift the rotated files up by one (under the exclusive lock), unless another writer just did."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size == 0 or size + incoming <= self.max_bytes:
            return
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))

    def _emit(self, **event: Any) -> None:
        line = json_text(event, sort_keys=True, default=str) + "\n"  # exact, and inert on a terminal (stderr, tail --json)
        try:
            self._append(line.encode())
        except OSError as exc:
            self._unwritable(exc, event, line)
        self._echo(event, line)

    def _unwritable(self, exc: OSError, event: dict[str, Any], line: str) -> None:
        """The log cannot be written (a full disk, a read-only or foreign logs folder): the event still reaches the
        console if it is a warning or an error, then the fault is raised as one line naming the path
        (:class:`LogUnwritable`: the command fails, exit 1, and says it once)."""
        from memex.fs_errors import explain

        fault = explain(exc)
        if fault is None:
            raise exc
        echoed = event.get("level") in ("warning", "error") and self.console is not None
        if echoed:
            self._echo(event, line)
        # the poll's own error line, just echoed, is this very fault: the command says it once
        raise LogUnwritable(str(fault), said=echoed and event.get("error") == str(fault)) from None

    def _echo(self, event: dict[str, Any], line: str) -> None:
        if self.console is None:
            return
        level = event.get("level", "info")
        if self.console_is_tty:
            if event.get("event") == "poll" or level in ("warning", "error"):
                print(human_line(event), file=self.console, flush=True)
        elif level in ("warning", "error"):
            self.console.write(line)
            self.console.flush()

    info = warning = error = debug = msg = _emit


class LogUnwritable(MemexError):
    """A source's log could not be written; ``said``: the console already showed this line (as the poll's error)."""

    def __init__(self, message: str, *, said: bool) -> None:
        super().__init__(message)
        self.said = said


def _redact(event: dict[str, Any]) -> dict[str, Any]:
    for key in REDACT & event.keys():
        event[key] = "[redacted]"
    return event


class SourceLogger:
    """A source's bound logger: ``log.info("poll", new=4)`` adds level, time and context, redacts, then writes.

    The pipeline structlog ran here (``add_log_level``, ``TimeStamper(fmt="iso", utc=True, key="ts")``, the
    redaction) in a dozen lines: importing structlog (and the asyncio it pulls in) was half of an idle
    cron poll's start-up. Same event dicts, same lines.
    """

    def __init__(self, sink: SourceSink, context: dict[str, Any]) -> None:
        self._sink = sink
        self._context = context

    def bind(self, **fields: Any) -> SourceLogger:
        """A logger whose events also carry ``fields``."""
        return SourceLogger(self._sink, {**self._context, **fields})

    def _log(self, level: str, event: str, fields: dict[str, Any]) -> None:
        record = {**self._context, **fields, "event": event, "level": level}
        record["ts"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        self._sink._emit(**_redact(record))

    def debug(self, event: str, **fields: Any) -> None:
        """Log a debug event."""
        self._log("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log an info event."""
        self._log("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log a warning (also on stderr off a terminal)."""
        self._log("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log an error (also on stderr off a terminal)."""
        self._log("error", event, fields)


def config_logger(cfg: Any, source: str, *, console: IO[str] | None = None) -> SourceLogger:
    """:func:`source_logger` for a loaded :class:`memex.config.Config`, with its rotation limits."""
    return source_logger(cfg.state_dir, source, console=console, max_bytes=cfg.log_max_bytes, backups=cfg.log_backups)


def source_logger(
    state_dir: Path, source: str, *, console: IO[str] | None = None, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS
) -> SourceLogger:
    """A logger bound to ``source`` that writes its JSON-lines log (and the console, if given).

    The log is rotated at ``max_bytes`` keeping ``backups`` old files (pass
    the config's ``log_max_bytes`` / ``log_backups``).
    """
    is_tty = bool(console is not None and console.isatty())
    sink = SourceSink(log_path(state_dir, source), console, is_tty, max_bytes=max_bytes, backups=backups)
    return SourceLogger(sink, {"source": source})
