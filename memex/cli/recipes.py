"""Scheduler recipes generated from the config: crontab lines and launchd agents.

Nothing here runs a poll or touches state; it only turns the configured sources
into text a scheduler reads, with the executable and config path filled in, so
that nobody edits paths by hand. Each source runs at its own ``interval``.

No ``flock`` wrapper is needed in any recipe: every ``memex poll`` takes its
source's run lock itself, and a run that finds the previous one still going
logs ``poll skipped`` and exits 0.
"""

from __future__ import annotations

import os
import plistlib
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memex.config import Config, SourceConfig
from memex.errors import ConfigError

LAUNCHD_PREFIX = "com.memex.poll"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Program:
    """How a scheduler starts memex: the argument vector before the subcommand."""

    argv: tuple[str, ...]

    @property
    def bin_dir(self) -> str:
        """The folder of the first argument (put first on a scheduler's PATH)."""
        return str(Path(self.argv[0]).parent)


def current_program(argv0: str | None = None, executable: str | None = None) -> Program:
    """The running memex as an absolute argument vector.

    Run as the ``memex`` console script: that script's absolute path. Run as
    ``python -m memex``: the interpreter (absolute, symlinks kept, so a venv's
    ``bin/python`` stays the venv's) followed by ``-m memex``.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if Path(argv0).name == "memex" and os.access(argv0, os.X_OK):
        return Program((os.path.abspath(argv0),))
    return Program((os.path.abspath(executable), "-m", "memex"))


def max_seconds(interval: int) -> int:
    """The ``--max-seconds`` budget for a source polled every ``interval`` s: done 10 s before the next start."""
    return max(5, interval - 10)


# The intervals cron keeps exactly (every gap the same): minutes that divide an hour, hours that divide a day.
# `*/7` restarts at each full hour (a 4-minute gap), `*/90` is not a step cron has, `*/24` hours is once a day.
CRON_MINUTES = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
CRON_HOURS = (1, 2, 3, 4, 6, 8, 12, 24)
CRON_INTERVALS = tuple(m * 60 for m in CRON_MINUTES) + tuple(h * 3600 for h in CRON_HOURS)


def nearest_cron_intervals(interval: int) -> list[int]:
    """The intervals next to ``interval`` (below and above, those that exist) that cron keeps exactly."""
    below = [i for i in CRON_INTERVALS if i < interval]
    above = [i for i in CRON_INTERVALS if i > interval]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def cron_schedule(interval: int) -> str:
    """The crontab time fields that start a poll every ``interval`` seconds exactly.

    Raises ValueError for an interval cron cannot keep exactly (:data:`CRON_INTERVALS`): rounding it would poll
    at another rate, or with a longer gap once an hour or a day, than the config says.
    """
    if interval not in CRON_INTERVALS:
        raise ValueError(interval)
    if interval < 3600:
        minutes = interval // 60
        return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"
    hours = interval // 3600
    return {1: "0 * * * *", 24: "0 0 * * *"}.get(hours, f"0 */{hours} * * *")


def source_cron_schedule(cfg: Config, source: SourceConfig) -> str:
    """:func:`cron_schedule` of one source, or a ConfigError naming its ``interval`` and the nearest ones cron keeps."""
    try:
        return cron_schedule(source.interval)
    except ValueError:
        nearest = " or ".join(f"interval = {i}" for i in nearest_cron_intervals(source.interval))
        raise ConfigError(
            f"cron cannot start a poll every {source.interval} s exactly (it steps by minutes that divide an hour or hours that divide "
            f"a day); set {nearest}, or schedule this source with `memex launchd` or `memex watch`",
            path=cfg.path,
            key=f"sources.{source.name}.interval",
        ) from None


def _quote(arg: str) -> str:
    """Quote one argument for the shell cron runs a line with (only when needed)."""
    if arg and all(c.isalnum() or c in "/._-=+:@%," for c in arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"


def poll_argv(program: Program, config_path: Path, source: SourceConfig) -> list[str]:
    """The full command that polls one source once."""
    return [*program.argv, "--config", str(config_path), "poll", source.name, "--max-seconds", str(max_seconds(source.interval))]


def enabled_sources(cfg: Config) -> list[SourceConfig]:
    """The sources a scheduler should start, in name order."""
    return [s for _, s in sorted(cfg.sources.items()) if s.enabled]


def crontab(cfg: Config, config_path: Path, program: Program, *, mailto: str | None) -> str:
    """A complete crontab for every enabled source: environment, one line per source, and why no flock.

    ``mailto=None`` is the block ``memex cron --install`` keeps in the user's crontab: no ``PATH=`` or ``MAILTO=``
    line (they would apply to the user's own lines below it); each poll line sets its PATH itself.
    An enabled source whose ``interval`` cron cannot keep exactly is refused (ConfigError, exit 2), not rounded.
    """
    lines = [
        "# memex: one line per enabled source, each at its source's `interval` (generated by `memex cron`).",
        "# No flock wrapper: each poll takes its source's run lock itself; an overlapping run logs",
        "# `poll skipped` and exits 0. --max-seconds ends a run before the next one starts.",
        "# A successful poll prints nothing off a terminal, so cron mails only warnings and errors.",
        f"# Logs: {cfg.state_dir}/logs/<source>.jsonl",
    ]
    path = f"PATH={program.bin_dir}:{SYSTEM_PATH}"
    prefix = "" if mailto is not None else _quote(path) + " "
    if mailto is not None:  # printed: say how to install it without replacing the user's own lines
        lines += ["# Install: `memex cron --install` keeps these lines between marker lines in your crontab and leaves",
                  "# the rest of it alone (`memex cron | crontab -` would replace it all); `--uninstall` removes them.",
                  path, f"MAILTO={mailto}", ""]  # fmt: skip
    sources = enabled_sources(cfg)
    for source in sources:
        lines.append(f"{source_cron_schedule(cfg, source)} {prefix}{' '.join(_quote(a) for a in poll_argv(program, config_path, source))}")
    if not sources:
        lines.append("# (no enabled sources in the config)")
    return "\n".join(lines) + "\n"


def cron_warnings(cfg: Config) -> list[str]:
    """What a user installing these lines should know: broken sections (polled, failing until fixed), ``*_env`` keys."""
    out = []
    for source in enabled_sources(cfg):
        if source.problem is not None:
            out.append(f"{source.problem}; its cron line polls it anyway and fails (mailing this error) until the section is fixed")
        for key, value in sorted(source.options.items()):
            if key.endswith("_env") and isinstance(value, str):
                out.append(f"sources.{source.name}.{key}: cron starts polls with almost no environment, so ${value} will not be set "
                           f"there; use {key[:-4]}_cmd if the source offers it, or set {value} in the crontab yourself")  # fmt: skip
    return out


def launchd_label(source: str) -> str:
    """The LaunchAgent label of one source."""
    return f"{LAUNCHD_PREFIX}.{source}"


def launchd_plist(cfg: Config, config_path: Path, program: Program, source: SourceConfig, *, log_dir: Path) -> bytes:
    """A LaunchAgent property list that polls ``source`` every ``interval`` seconds."""
    doc = {
        "Label": launchd_label(source.name),
        "ProgramArguments": poll_argv(program, config_path, source),
        "StartInterval": source.interval,
        "RunAtLoad": True,
        "ProcessType": "Background",
        "LowPriorityIO": True,
        "EnvironmentVariables": {"PATH": f"{program.bin_dir}:{SYSTEM_PATH}"},
        "StandardOutPath": str(log_dir / f"{source.name}.out.log"),
        "StandardErrorPath": str(log_dir / f"{source.name}.err.log"),
    }
    return plistlib.dumps(doc, fmt=plistlib.FMT_XML, sort_keys=False)


def full_disk_access_binary(program: Program) -> str:
    """The file macOS's Full Disk Access must be granted to: the real interpreter behind the program."""
    first = program.argv[0]
    if len(program.argv) == 1:  # a console script: its shebang names the interpreter
        try:
            with open(first, "rb") as fh:
                line = fh.readline().decode("utf-8", "replace").strip()
        except OSError:
            line = ""
        if line.startswith("#!") and " " not in line[2:].strip():
            first = line[2:].strip()
    return os.path.realpath(first)


def names(sources: Iterable[SourceConfig]) -> str:
    """Comma-separated source names (for messages)."""
    return ", ".join(s.name for s in sources) or "none"
