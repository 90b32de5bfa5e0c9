"""What every click ``memex`` command shares: one-line errors with their exit codes, ``--json``, signals, the config.

The error and signal handling live in :mod:`memex.cli.poll` (click-free, for cron's poll) and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from memex.cli.poll import stop_on_signals
from memex.error_lines import fail, guarded

__all__ = ["fail", "json_option", "load_config", "reports_errors", "stop_on_signals"]

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(func: F) -> F:
    """Turn MemexError into one stderr line and its exit code; never a traceback (click's own exits pass)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        passthrough = (click.exceptions.Exit, click.ClickException, click.Abort)
        return guarded(lambda: func(*args, **kwargs), passthrough)

    return wrapper  # type: ignore[return-value]


def json_option(func: F) -> F:
    """The shared ``--json`` output option."""
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of a table.")(func)


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
