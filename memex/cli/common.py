"""What every ``memex`` command shares: one-line errors with their exit codes, ``--json``, signals, the config."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click

from memex.errors import MemexError

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int) -> None:
    """Print one error line and exit with ``code``."""
    click.echo(f"memex: error: {message}", err=True)
    sys.exit(code)


def reports_errors(func: F) -> F:
    """Turn MemexError into one stderr line and its exit code; never a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MemexError as exc:
            fail(str(exc), exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug: one line, no traceback (it could quote message data) unless --debug
            from memex.runner import debug_enabled, internal_error

            if debug_enabled():
                import traceback

                traceback.print_exc()
            fail(internal_error(exc), 1)

    return wrapper  # type: ignore[return-value]


def json_option(func: F) -> F:
    """The shared ``--json`` output option."""
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of a table.")(func)


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """SIGTERM and SIGINT set an event the runner checks between messages and memex.deadline watches mid-request."""
    stop = threading.Event()
    previous = {}

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now; state stays consistent (data first, cursor last)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def load_config(ctx: click.Context, *, state: bool = False) -> Any:
    """Load the config named by ``--config`` / ``$MEMEX_CONFIG`` / the default path.

    ``state``: the command reads or writes the state folder; one it cannot use is one line naming it (exit 1).
    """
    from memex import config

    cfg = config.load(ctx.obj.get("config_path"))
    if state:
        from memex.state.files import require_state_dir

        require_state_dir(cfg.state_dir)
    return cfg
