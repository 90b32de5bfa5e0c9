"""memex status reads each log from its end, across rotated files."""

from __future__ import annotations

import json
from pathlib import Path

from memex import config as config_mod
from memex.status import collect
from tests.conftest import write_config


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
