"""The ``memex`` entry: a plain ``poll`` command line is run without click, every other one goes to click."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memex.cli.entry import ONE_SHOT_GEN0, poll_args
from tests.conftest import run_cli, write_config


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["poll", "a"], (None, ("a",), False, 50.0)),
        (["--config", "c.toml", "poll", "a", "b"], (Path("c.toml"), ("a", "b"), False, 50.0)),
        (["--config=c.toml", "poll", "--all", "--max-seconds", "290"], (Path("c.toml"), (), True, 290.0)),
        (["poll", "a", "--max-seconds=0.5"], (None, ("a",), False, 0.5)),
    ],
)
def test_a_plain_poll_command_line_is_understood(argv: list[str], expected: tuple[object, ...]) -> None:
    """The cron forms (config, names or --all, a time limit) are parsed as click would parse them."""
    args = poll_args(argv, {})
    assert args is not None
    assert (args.config_path, args.sources, args.all_sources, args.max_seconds) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["status"],
        ["--debug", "poll", "a"],
        ["poll"],
        ["poll", "--all", "a"],
        ["poll", "a", "--help"],
        ["poll", "-h"],
        ["poll", "a", "--max-seconds", "0"],
        ["poll", "a", "--max-seconds", "nan"],
        ["poll", "a", "--max-seconds", "x"],
        ["poll", "a", "--max-seconds"],
        ["poll", "a", "--max-seconds", "5", "--max-seconds", "6"],
        ["poll", "--all", "--all"],
        ["poll", "a", "--"],
        ["--config", "poll"],
        ["--config", "", "poll", "a"],
        ["--version"],
    ],
)
def test_every_other_command_line_goes_to_click(argv: list[str]) -> None:
    """Help, other commands, --debug, faulty or unusual poll lines: None, so click parses and reports them."""
    assert poll_args(argv, {}) is None


def test_environment_that_click_would_read_sends_the_line_to_click(tmp_path: Path) -> None:
    """MEMEX_DEBUG (a click flag's variable), an empty MEMEX_CONFIG or a config path that is a folder go to click."""
    assert poll_args(["poll", "a"], {"MEMEX_DEBUG": "1"}) is None
    assert poll_args(["poll", "a"], {"MEMEX_CONFIG": ""}) is None
    assert poll_args(["poll", "a"], {"MEMEX_CONFIG": str(tmp_path)}) is None
    assert poll_args(["--config", str(tmp_path), "poll", "a"], {}) is None
    assert poll_args(["poll", "a"], {"MEMEX_CONFIG": str(tmp_path / "c.toml")}) is not None


def test_both_paths_report_an_unknown_source_alike(tmp_path: Path) -> None:
    """An unknown source: one error line and exit 2, whether the entry (plain poll) or click (--debug) runs it."""
    cfg = write_config(tmp_path, {"other": {"type": "maildir", "path": str(tmp_path)}})
    plain = run_cli("poll", "nope", config=cfg)
    via_click = run_cli("--debug", "poll", "nope", config=cfg)
    assert plain.returncode == via_click.returncode == 2
    assert plain.stderr == via_click.stderr and len(plain.stderr.strip().splitlines()) == 1


PROBE = """
import gc, sys
sys.argv = ["memex", *sys.argv[1:]]
from memex.cli.entry import main
try:
    main()
except SystemExit:
    pass
print(gc.get_threshold()[0], gc.get_freeze_count() > 0, file=sys.__stdout__)
"""


@pytest.mark.parametrize(
    ("argv", "tuned"),
    [
        (["poll", "nope"], True),  # the entry's own poll
        (["--debug", "poll", "nope"], True),  # poll through click
        (["backfill", "nope"], True),
        (["status"], False),
        (["--config", "poll", "status"], False),  # "poll" as the config path's value is no command
    ],
)
def test_the_collector_is_tuned_for_a_one_shot_poll_or_backfill_only(tmp_path: Path, argv: list[str], tuned: bool) -> None:
    """``memex poll`` and ``memex backfill`` raise the collector's first threshold (start-up objects frozen) before
    they run, whichever path parses them (issue 25: the collector was about 15% of a Messenger export's CPU); every
    other command, and any process that merely imports memex, keeps Python's defaults."""
    cfg = write_config(tmp_path, {"other": {"type": "maildir", "path": str(tmp_path)}})
    args = argv if argv[0] == "--config" else ["--config", str(cfg), *argv]
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    threshold, frozen = out.stdout.splitlines()[-1].split()  # after what the command itself printed
    assert (int(threshold) == ONE_SHOT_GEN0, frozen == "True") == (tuned, tuned)
