"""Every error and warning line a person reads, made here: what an exception becomes on stderr, in a poll's summary
and in the log, and the exit that goes with it.

Below everything that reports (the runner, backfill, watch, the CLI's commands and its fast path), above what it
words: :mod:`memex.errors` (memex's own errors, one line each already), :mod:`memex.fs_errors` (the machine refusing
a file, in words) and :mod:`memex.safe_text` (controls made visible). An exception that is neither memex's nor the
environment's is a bug: said by type and place only (its message might quote message data), with the traceback
only when ``--debug`` / ``MEMEX_DEBUG=1`` asked for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from memex.errors import MemexError
from memex.safe_text import visible


def debug_enabled() -> bool:
    """Whether ``--debug`` / ``MEMEX_DEBUG=1`` asked for tracebacks of internal errors."""
    return os.environ.get("MEMEX_DEBUG", "") not in ("", "0")


def internal_error(exc: BaseException) -> str:
    """The one line for an unexpected exception: the environment's fault in words (a full disk, a read-only mount:
    :mod:`memex.fs_errors`), else a bug described by type and place only (its message might quote message data)."""
    from memex.fs_errors import explain

    fault = explain(exc)
    if fault is not None:
        return str(fault)
    import traceback  # here, not at the top: only a bug needs it (start-up cost)

    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" at {Path(last.filename).name}:{last.lineno}"
    return f"internal error: {type(exc).__name__}{where}; please report it (run with the same data to reproduce)"


def error_line(message: str, source: str | None = None) -> str:
    """``memex: error: MESSAGE`` (``memex: SOURCE: error: ...`` for one source of several), controls shown visibly."""
    return f"memex: {visible(source)}: error: {visible(message)}" if source is not None else f"memex: error: {visible(message)}"


def say_error(message: str, source: str | None = None) -> None:
    """Print :func:`error_line` on stderr (the command goes on, or ends by its own exit)."""
    print(error_line(message, source), file=sys.stderr, flush=True)


def fail(message: str, code: int) -> NoReturn:
    """Print one error line and exit with ``code`` (controls in it, from a path or server text, shown visibly)."""
    say_error(message)
    sys.exit(code)


def warn(message: str) -> None:
    """Print one warning line on stderr (the command goes on)."""
    print(f"memex: warning: {message}", file=sys.stderr, flush=True)


def guarded(func: Callable[[], Any], passthrough: tuple[type[BaseException], ...] = ()) -> Any:
    """Run ``func``: a MemexError is one stderr line and its exit code; a bug one line, no traceback unless --debug.

    ``passthrough``: exceptions that carry their own exit (click's usage errors) and are re-raised as they are.
    """
    try:
        return func()
    except MemexError as exc:
        if exc.said:  # already on stderr as the poll's error line (memex.observe.logs.LogUnwritable)
            sys.exit(exc.exit_code)
        fail(str(exc), exc.exit_code)
    except passthrough:
        raise
    except BrokenPipeError as exc:
        if reader_gone(exc):
            raise  # the reader of stdout has gone (``| head``): memex.cli.entry.main ends quietly
        fail(unexpected(exc), 1)
    except Exception as exc:  # a full disk, a read-only mount, ... (memex.fs_errors) or a bug: one line, no traceback
        fail(unexpected(exc), 1)  # (it could quote message data) unless --debug


def unexpected(exc: BaseException) -> str:
    """The one line for an exception no layer below turned into a MemexError (its traceback first with --debug)."""
    if debug_enabled():
        import traceback

        traceback.print_exception(exc)
    return internal_error(exc)


def reader_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is the write to a closed pipe on stdout or stderr (``memex tail | head -1`` once ``head`` has
    read its line), as opposed to a broken socket to a server, which stays an error.

    The pipe's state is asked of the kernel: poll(2) reports POLLERR (Linux) or POLLHUP on a pipe whose reader is gone.
    """
    if not isinstance(exc, BrokenPipeError):
        return False
    import select

    poller = select.poll()
    for fd in (1, 2):
        poller.register(fd, select.POLLOUT)
    try:
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except OSError:
        return False
