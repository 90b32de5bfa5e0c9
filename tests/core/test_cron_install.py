"""``memex cron --install`` / ``--uninstall``: only memex's block of the user's crontab changes, idempotently.

Runs the real CLI against ``tests/core/fake_crontab.py``, a ``crontab`` stand-in on PATH that behaves like the real one
("no crontab for USER" exit 1, refusing a file without its last newline or with a short job line).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from memex.cli import cron_install
from memex.errors import MemexError
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, read_log, run_cli, write_config

USER_LINES = "MAILTO=me@example.com\nSHELL=/bin/bash\n# my backups\n0 3 * * * /usr/local/bin/backup --all\n@reboot /bin/true\n"


def install_fake_crontab(tmp: Path) -> dict[str, str]:
    """Put a ``crontab`` stand-in at ``tmp/bin/crontab`` storing into ``tmp/crontab.txt``; the env that uses it."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "crontab"
    exe.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(ROOT / "tests/core/fake_crontab.py"))} "$@"\n')
    exe.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_CRONTAB": str(tmp / "crontab.txt")}


def setup(tmp_path: Path, **sources: dict[str, object]) -> tuple[Path, dict[str, str]]:
    """A config with an iMessage source over a sample chat.db (plus ``sources``), and the fake crontab's env."""
    imessage_samples.build(tmp_path / "chat.db", 5, seed=2)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}, **sources})
    env = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    return config, {**env, **install_fake_crontab(tmp_path)}


def calls(tmp_path: Path) -> list[str]:
    """The fake crontab's calls so far (its arguments, one per call)."""
    path = tmp_path / "crontab.txt.calls"
    return path.read_text().splitlines() if path.exists() else []


def test_install_into_no_crontab_adds_the_block_and_its_lines_run(tmp_path: Path) -> None:
    """A user with no crontab gets memex's block alone; it sets no PATH/MAILTO line, and each line runs a poll as is."""
    config, env = setup(tmp_path)
    out = run_cli("cron", "--install", config=config, env=env)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stderr
    text = (tmp_path / "crontab.txt").read_text()
    lines = text.splitlines()
    assert lines[0] == cron_install.BEGIN and lines[-1] == cron_install.END
    assert not any(line.startswith(("PATH=", "MAILTO=")) for line in lines)
    job = next(line for line in lines if line.startswith("* * * * *"))
    command = job.split(None, 5)[5]
    assert command.startswith("PATH=") and f"--config {config}" in command and "poll imessage" in command
    ran = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=120, env={"HOME": str(tmp_path)})
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    assert read_log(tmp_path / "state", "imessage")[-1]["new"] == 5


def test_install_keeps_every_user_line_and_is_idempotent(tmp_path: Path) -> None:
    """The user's own lines stay byte for byte; a second install writes nothing; a changed config replaces the block in place."""
    config, env = setup(tmp_path)
    (tmp_path / "crontab.txt").write_text(USER_LINES)
    assert run_cli("cron", "--install", config=config, env=env).returncode == 0
    first = (tmp_path / "crontab.txt").read_text()
    assert first.startswith(USER_LINES) and first.count(cron_install.BEGIN) == 1
    assert calls(tmp_path) == ["-l", "-"]
    assert run_cli("cron", "--install", config=config, env=env).returncode == 0
    assert calls(tmp_path) == ["-l", "-", "-l"] and (tmp_path / "crontab.txt").read_text() == first
    (tmp_path / "crontab.txt").write_text(first + "30 4 * * * /usr/bin/later\n")
    config.write_text(config.read_text() + '[sources.old]\ntype = "imessage"\ndb = "chat.db"\ninterval = 300\n')
    assert run_cli("cron", "--install", config=config, env=env).returncode == 0
    text = (tmp_path / "crontab.txt").read_text()
    assert text.startswith(USER_LINES) and text.endswith(f"{cron_install.END}\n30 4 * * * /usr/bin/later\n")
    assert text.count(cron_install.BEGIN) == 1 and "*/5 * * * *" in text and "poll old" in text


def test_uninstall_removes_only_the_block(tmp_path: Path) -> None:
    """--uninstall leaves the user's lines as they were; with no block it writes nothing."""
    config, env = setup(tmp_path)
    (tmp_path / "crontab.txt").write_text(USER_LINES)
    assert run_cli("cron", "--install", config=config, env=env).returncode == 0
    out = run_cli("cron", "--uninstall", config=config, env=env)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == ""
    assert (tmp_path / "crontab.txt").read_text().rstrip("\n") == USER_LINES.rstrip("\n")
    before = len(calls(tmp_path))
    assert run_cli("cron", "--uninstall", config=config, env=env).returncode == 0
    assert calls(tmp_path)[before:] == ["-l"]


def test_a_crontab_that_refuses_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    """``crontab -`` failing (cron.deny) is exit 1 with one line quoting it; the installed crontab is as before."""
    config, env = setup(tmp_path)
    (tmp_path / "crontab.txt").write_text(USER_LINES)
    out = run_cli("cron", "--install", config=config, env={**env, "FAKE_CRONTAB_REFUSE": "1"})
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "permission denied (cron.deny)" in out.stderr, out.stderr
    assert (tmp_path / "crontab.txt").read_text() == USER_LINES


def test_printing_warns_about_password_env_and_still_prints(tmp_path: Path) -> None:
    """A source reading its password from the environment: a warning (cron will not have it), the lines still printed."""
    config, env = setup(tmp_path, mail={"type": "imap", "host": "127.0.0.1", "user": "u", "password_env": "MAIL_PW"})
    out = run_cli("cron", config=config, env=env)
    assert out.returncode == 0 and "poll mail" in out.stdout and "MAILTO=" in out.stdout
    assert out.stderr.count("\n") == 1 and "$MAIL_PW will not be set there; use password_cmd" in out.stderr


@pytest.mark.parametrize(
    "text",
    [f"{cron_install.BEGIN}\n* * * * * x\n", f"{cron_install.END}\n{cron_install.BEGIN}\n",
     f"{cron_install.BEGIN}\n{cron_install.END}\n{cron_install.BEGIN}\n{cron_install.END}\n"],
    ids=["no-end", "end-first", "two-blocks"],
)  # fmt: skip
def test_a_broken_block_is_refused_not_guessed(text: str) -> None:
    """Marker lines that do not pair up are an error naming the fix (crontab -e), never a guess at what to replace."""
    with pytest.raises(MemexError, match="broken memex block"):
        cron_install.with_block(text, "x\n")


def test_with_block_appends_after_a_line_without_newline_and_removes_cleanly() -> None:
    """A crontab missing its last newline gets one before the block; removing the block restores the lines."""
    added = cron_install.with_block("0 3 * * * a", "* * * * * b\n")
    assert added == f"0 3 * * * a\n\n{cron_install.BEGIN}\n* * * * * b\n{cron_install.END}\n"
    assert cron_install.with_block(added, None) == "0 3 * * * a\n\n"
    assert cron_install.with_block("", None) == ""
