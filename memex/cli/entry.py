"""The ``memex`` program: a plain ``poll`` command line runs without click; everything else goes to click.

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


def main() -> None:
    """Run the ``memex`` command line."""
    args = poll_args(sys.argv[1:], os.environ)
    if args is None:
        from memex.cli.main import main as cli

        cli()
        return
    from memex.cli.poll import guarded, run_poll
    from memex.config import load

    code = guarded(lambda: run_poll(load(args.config_path), args.sources, args.all_sources, args.max_seconds))
    sys.exit(code)
