"""What a person sees: the human poll line on a terminal, JSON lines (problems only) off it."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, run_cli, write_config


def run_on_tty(*args: str) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; return (exit code, what the terminal showed)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "memex", *args], stderr=follower, stdout=subprocess.DEVNULL, cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode().replace("\r\n", "\n")


def test_terminal_shows_the_human_poll_line(tmp_path: Path) -> None:
    """On a terminal, each poll prints `<source>: poll ok: N new (cursor A -> B)`."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 4, seed=1)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    code, shown = run_on_tty("--config", str(cfg), "poll", "imessage")
    assert code == 0
    assert shown.strip() == "imessage: poll ok: 4 new (cursor - -> 4)"
    imessage_samples.append(db, 2, seed=5)
    code, shown = run_on_tty("--config", str(cfg), "poll", "imessage")
    assert shown.strip() == "imessage: poll ok: 2 new (cursor 4 -> 6)"
    code, shown = run_on_tty("--config", str(cfg), "poll", "imessage")
    assert shown.strip() == "imessage: poll idle: 0 new (cursor 6 -> 6)"


def test_off_a_terminal_errors_are_json_lines(tmp_path: Path) -> None:
    """Under cron (no terminal) a failing poll writes one JSON line to stderr with event, status and error."""
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "missing.db")}})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 1
    event = json.loads(out.stderr)
    assert event["event"] == "poll" and event["status"] == "error" and event["level"] == "error"
    assert "missing.db: chat.db not found" in event["error"]
