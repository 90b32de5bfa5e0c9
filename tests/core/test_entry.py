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


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["search", "lease"], ("search", None, ("lease",), 20, False, False)),
        (
            ["--config", "c.toml", "search", "-n", "5", "--rank", "--json", "a", "OR", "b"],
            ("search", Path("c.toml"), ("a", "OR", "b"), 5, True, True),
        ),
        (["--config=c.toml", "search", "--limit=7", "(a", "-b)"], ("search", Path("c.toml"), ("(a", "-b)"), 7, False, False)),
        (["search", "lease", "--json"], ("search", None, ("lease", "--json"), 20, False, False)),  # refused by the query's check
        (["show", "KEY"], ("show", None, ("KEY",), 0, False, False)),
        (["show", "--json", "KEY"], ("show", None, ("KEY",), 0, False, True)),
        (["index", "status"], ("index status", None, (), 0, False, False)),
        (["index", "status", "--json"], ("index status", None, (), 0, False, True)),
    ],
)
def test_a_plain_search_show_or_index_status_line_is_understood(argv: list[str], expected: tuple[object, ...]) -> None:
    """The plain forms of search, show and index status are parsed as click would parse them."""
    from memex.cli.find import find_args

    args = find_args(argv, {})
    assert args is not None
    assert (args.command, args.config_path, args.words, args.limit, args.rank, args.as_json) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["search"], ["search", "--help"], ["search", "-h", "x"], ["search", "-x"],
        ["search", "-n", "0", "x"], ["search", "-n", "x", "y"], ["search", "-n"], ["search", "-n5", "x"],
        ["search", "--json", "--json", "x"], ["--debug", "search", "x"], ["show"], ["show", "a", "b"],
        ["show", "--help", "a"], ["index", "status", "x"], ["index", "rebuild"], ["status"],
    ],
)  # fmt: skip
def test_every_other_search_show_or_index_line_goes_to_click(argv: list[str]) -> None:
    """Help, --, a first word starting with -, a bad or repeated option, other commands: None (click decides)."""
    from memex.cli.find import find_args

    assert find_args(argv, {}) is None
    assert find_args(["search", "x"], {"MEMEX_DEBUG": "1"}) is None


def test_search_show_and_index_status_say_the_same_either_way_and_the_plain_path_imports_no_click(tmp_path: Path) -> None:
    """Results, JSON, a refused query, a message shown and the status table: the same bytes and exit code whether
    the entry runs them (plain) or click does (--debug); the plain search imports neither click nor rich."""
    from tests.core.test_search import sources

    cfg = write_config(tmp_path, {"md": sources(tmp_path)["md"]})
    assert run_cli("poll", "md", config=cfg).returncode == 0
    lines = [("search", "lease"), ("search", "-n", "1", "--json", "lease", "OR", "lunch"), ("search", "(lease"),
             ("search", "lease", "-n", "2"), ("show", "lunch@example.net"), ("show", "--json", "nosuch"),
             ("index", "status"), ("index", "status", "--json")]  # fmt: skip
    for line in lines:
        plain, via_click = run_cli(*line, config=cfg), run_cli("--debug", *line, config=cfg)
        assert (plain.returncode, plain.stdout, plain.stderr) == (via_click.returncode, via_click.stdout, via_click.stderr), line
        assert plain.stdout or plain.returncode, line
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "memex", "--config", str(cfg), "search", "lease"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and "lease" in out.stdout
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert not imported & {"click", "rich", "structlog", "boto3"}, imported & {"click", "rich", "structlog", "boto3"}
