"""memex status reads each log from its end, across rotated files."""

from __future__ import annotations

import json
from pathlib import Path

from memex import config as config_mod
from memex.observe.status import collect
from tests.conftest import run_cli, write_config


def test_last_ok_poll_is_found_in_a_rotated_file(tmp_path: Path) -> None:
    """After a rotation, the newest poll (an error) is in the live file and the last success in .jsonl.1: both are shown."""
    cfg = config_mod.load(write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}}))
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)
    ok = {"event": "poll", "source": "imessage", "status": "ok", "new": 3, "dup": 0, "ts": "2026-11-22T07:00:00Z"}
    err = {"event": "poll", "source": "imessage", "status": "error", "error": "boom", "new": 0, "dup": 0, "ts": "2026-11-22T07:01:00Z"}
    (logs / "imessage.jsonl.1").write_text(json.dumps(ok) + "\n")
    (logs / "imessage.jsonl").write_text(json.dumps(err) + "\n")
    [row] = collect(cfg)
    assert (row["last_status"], row["last_error"], row["last_poll_at"]) == ("error", "boom", "2026-11-22T07:01:00Z")
    assert row["last_ok_at"] == "2026-11-22T07:00:00Z"


def test_a_broken_source_section_is_config_not_stale(tmp_path: Path) -> None:
    """A misspelt key in one source's section: status (JSON and table) shows CONFIG with the error and exits 2; the dashboard shows CONFIG too."""
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "dbb": "/x/chat.db"}, "ok": {"type": "maildir", "path": str(tmp_path)}})
    out = run_cli("status", "--json", config=cfg)
    assert out.returncode == 2
    rows = {r["source"]: r for r in json.loads(out.stdout)}
    assert rows["imessage"]["state"] == "CONFIG" and "sources.imessage.dbb" in rows["imessage"]["state_reason"]
    assert rows["ok"]["state"] != "CONFIG"
    table = run_cli("status", config=cfg)
    (line,) = [ln for ln in table.stdout.splitlines() if ln.startswith("imessage")]
    assert table.returncode == 2 and "CONFIG" in line and "sources.imessage.dbb" in line and "unknown key" in line
    board = run_cli("dashboard", "--once", "--width", "160", config=cfg)
    assert "CONFIG" in board.stdout
