"""The ``memex`` program: a plain ``poll``, ``search``, ``show`` or ``index status`` command line runs without click
(:func:`poll_args`; :func:`memex.cli.find.find_args`); everything else goes to click.

Cron starts ``memex poll SOURCE`` every minute, and with nothing new most of that run is start-up:
importing click (and its own imports) cost as much as starting Python. :func:`poll_args` takes only
command lines it understands completely (``[--config PATH] poll (NAME... | --all) [--max-seconds S]``,
valid values, no ``--debug``, ``--help`` or ``MEMEX_DEBUG``); any other, including every faulty one,
goes to the click command, which parses and reports it as before.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import NoReturn

from memex.error_lines import reader_gone  # a closed pipe on stdout or stderr (memex.error_lines.guarded asks it too)


class PollArgs:
    """A ``memex poll`` command line, understood and valid (a plain class: a dataclass costs ~1 ms to define)."""

    def __init__(self, config_path: Path | None, sources: tuple[str, ...], all_sources: bool, max_seconds: float) -> None:
        self.config_path = config_path
        self.sources = sources
        self.all_sources = all_sources
        self.max_seconds = max_seconds


def _option(args: list[str], i: int, name: str) -> tuple[str, int] | None:
    """The value of ``name`` at ``args[i]`` (``--name VALUE`` or ``--name=VALUE``) and the next index, or None."""
    if args[i] == name:
        return (args[i + 1], i + 2) if i + 1 < len(args) else None
    if args[i].startswith(name + "="):
        return args[i][len(name) + 1 :], i + 1
    return None


def poll_args(argv: list[str], environ: dict[str, str] | os._Environ[str]) -> PollArgs | None:
    """``argv`` (without the program) as a plain poll, or None when click must parse it."""
    if "MEMEX_DEBUG" in environ or environ.get("MEMEX_CONFIG") == "":
        return None
    config: str | None = None
    i = 0
    if i < len(argv) and (found := _option(argv, i, "--config")):
        config, i = found
    if i >= len(argv) or argv[i] != "poll":
        return None
    i += 1
    sources: list[str] = []
    all_sources, max_seconds = False, 50.0
    seen: set[str] = set()
    while i < len(argv):
        arg = argv[i]
        if arg == "--all" and arg not in seen:
            all_sources, i = True, i + 1
        elif (found := _option(argv, i, "--max-seconds")) and "--max-seconds" not in seen:
            try:
                max_seconds = float(found[0])
            except ValueError:
                return None
            i = found[1]
            arg = "--max-seconds"
        elif arg and not arg.startswith("-"):
            sources.append(arg)
            i += 1
        else:
            return None
        seen.add(arg)
    if all_sources == bool(sources) or not (math.isfinite(max_seconds) and max_seconds >= 0.1):
        return None
    for path in (config, None if config is not None else environ.get("MEMEX_CONFIG")):
        if path is not None and (path == "" or os.path.isdir(path)):
            return None  # click's message for a config path that is a folder
    return PollArgs(Path(config) if config is not None else None, tuple(sources), all_sources, max_seconds)


# The collector's first threshold for a one-shot ``poll`` or ``backfill`` process (Python's default is 700).
# A batch keeps hundreds of items (each a record with its dicts) alive until they are stored, so at 700 the
# collector runs every few messages and walks them again and again: about 15% of a Messenger export's CPU
# (issue 25). At 20,000 it runs 30 times less often; what it frees (only cyclic garbage: the rest is freed at once
# by reference counting) waits at most 20,000 allocations, a few MiB at worst.
ONE_SHOT_GEN0 = 20_000


def one_shot_collector() -> None:
    """Tune the cyclic garbage collector for a process that polls or backfills and exits.

    What start-up made (modules, classes, the config) is frozen: never walked again by a full collection. Called by
    :func:`main` before a ``poll`` or ``backfill`` runs (never at import, never in a library: a long-lived host process
    keeps Python's defaults), and by ``bench/messenger_export.py``, which measures the poll's path.
    """
    import gc

    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(ONE_SHOT_GEN0, gen1, gen2)


def _command(argv: list[str]) -> str | None:
    """The command word of a click command line (after ``--config PATH`` and ``--debug``), or None."""
    i = 0
    while i < len(argv):
        if argv[i] == "--config":
            i += 2
        elif argv[i].startswith("-"):
            i += 1
        else:
            return argv[i]
    return None


def end_quietly() -> NoReturn:
    """End a command whose reader has gone, as ``ls | head`` ends: no line, no traceback, nothing written after.

    stdout and stderr are pointed at /dev/null first, so that neither the interpreter's last flush of what is still
    buffered nor a cleanup on the way out can fail again and say so. Exit 1: the output was cut short (click, whose
    own ``--help`` output ends the same way, and Python itself use 1; ``ls`` dies of SIGPIPE).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    sys.exit(1)


def main() -> None:
    """Run the ``memex`` command line; a closed pipe on its output ends it quietly (:func:`end_quietly`)."""
    try:
        _main()
    except BrokenPipeError as exc:
        if not reader_gone(exc):
            raise
        end_quietly()


def _main() -> None:
    """Run the ``memex`` command line: a plain poll or query without click, anything else through click."""
    args = poll_args(sys.argv[1:], os.environ)
    if args is None and len(sys.argv) > 1 and sys.argv[-1] != "--help":
        from memex.cli.find import find_args

        found = find_args(sys.argv[1:], os.environ)
        if found is not None:
            from memex.cli.find import run
            from memex.cli.poll import guarded

            guarded(lambda: run(found))
            sys.exit(0)
    if args is None:
        from memex.cli.main import main as cli

        if _command(sys.argv[1:]) in ("poll", "backfill"):
            one_shot_collector()
        cli()
        return
    from memex.cli.poll import guarded, run_poll
    from memex.config import load

    one_shot_collector()
    code = guarded(lambda: run_poll(load(args.config_path), args.sources, args.all_sources, args.max_seconds))
    sys.exit(code)
