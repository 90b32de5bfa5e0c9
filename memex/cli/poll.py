"""``memex poll`` without click: what cron runs every minute, kept to what a poll uses.

A cron poll with nothing new is mostly interpreter start-up and imports, so this module and
:mod:`memex.cli.entry` import neither click nor anything a poll does not need. The click command
(:mod:`memex.cli.main`) runs the same :func:`run_poll`; so do command lines the entry hands over.
Also here, for every command: the stop-on-signal event. Error lines are :mod:`memex.error_lines`'s.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memex.error_lines import fail, guarded, say_error, warn

__all__ = ["fail", "guarded", "run_poll", "stop_on_signals", "warn"]  # fail, guarded, warn: memex.error_lines's, for callers here

if TYPE_CHECKING:
    from memex.config import Config


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


def run_poll(cfg: Config, sources: tuple[str, ...], all_sources: bool, max_seconds: float) -> int:
    """Poll ``sources`` (or every enabled one) once; the exit code. The caller has checked that exactly one was asked."""
    from memex.runner import poll as poll_one
    from memex.runner import poll_many
    from memex.safe_text import visible

    names = [n for n, s in sorted(cfg.sources.items()) if s.enabled] if all_sources else list(sources)
    for name in list(names):
        if not cfg.source(name).enabled:
            print(f"memex: {visible(name)}: skipped: enabled = false in the config", file=sys.stderr, flush=True)
            names.remove(name)
    if sources and not names:
        return 0
    if not names:
        print("memex: no enabled sources in the config; nothing to poll", file=sys.stderr, flush=True)
        return 0
    if len(names) > 1:
        from memex.state.files import require_state_dir

        require_state_dir(cfg.state_dir)  # one line for all, not one per source
    with stop_on_signals() as stop:
        if len(names) == 1:
            results = [poll_one(cfg, names[0], max_seconds=max_seconds, stop=stop, console=sys.stderr)]
        else:
            results = poll_many(cfg, names, max_seconds=max_seconds, stop=stop, console=sys.stderr)
    for r in results:
        if r.unsaid:
            say_error(r.error or "", source=r.source)
    return max((r.exit_code for r in results), default=0)
