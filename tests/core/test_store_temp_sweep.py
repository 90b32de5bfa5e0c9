"""Temp files a killed poll leaves in the store's ``.memex-tmp`` (issue 40 §5): the next poll removes them, verify says.

A poll writes each object to a temp file first and links it to its name at the group commit; ``kill -9`` between the
two leaves the temp files behind. Their names carry the writer's pid and host (``.obj.PID@HOST...tmp``): a file
whose writer is gone from this machine is stale at once, any other after an hour (docs/records.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from pollers.imessage import samples as imessage_samples
from tests.conftest import Gate, file_objects, run_cli, write_config


def _temps(store: Path) -> list[Path]:
    """The temp files in the store's ``.memex-tmp``."""
    folder = store / ".memex-tmp"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_poll_after_kill_9_removes_the_dead_writers_temp_files_and_verify_reports_them(tmp_path: Path) -> None:
    """A poll held at its 150th message is killed with SIGKILL: its 149 temp files stay. ``memex verify`` names them
    as left by a stopped writer (and changes nothing); the next poll, minutes rather than an hour later, removes
    them, stores every message once, and logs ``store.temp_swept``. A live writer's temp file (this test's own pid,
    fresh) is left alone."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 200, seed=3)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    store = tmp_path / "state" / "store"
    gate = Gate(tmp_path, 150)
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage"], stderr=subprocess.DEVNULL,
                            env=gate.env())  # fmt: skip
    pid = gate.wait_held(proc)
    os.kill(pid, signal.SIGKILL)
    proc.wait(30)
    left = _temps(store)
    assert len(left) >= 50 and all(f".{pid}@" in p.name for p in left), [p.name for p in left[:3]]
    mine = store / ".memex-tmp" / f".obj.{os.getpid()}@{os.uname().nodename}.live.0.tmp"  # a writer still at work
    mine.write_bytes(b"in progress")

    report = run_cli("verify", "--json", config=cfg)
    temp = json.loads(report.stdout)["temp_files"]
    assert temp["files"] == len(left) + 1 and temp["stale"] == len(left) and temp["removed"] == 0, temp
    assert len(_temps(store)) == len(left) + 1, "verify without --repair removed something"
    said = run_cli("verify", config=cfg)
    assert f"{len(left)} left by a stopped writer" in said.stdout, said.stdout

    for p in left:
        os.utime(p)  # fresh, far inside the age rule's hour: they go because their writer is gone
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    assert _temps(store) == [mine]
    swept = [json.loads(ln) for ln in (tmp_path / "state" / "logs" / "imessage.jsonl").read_text().splitlines()]
    assert [e["files"] for e in swept if e.get("event") == "store.temp_swept"] == [len(left)]
    assert len([k for k in file_objects(store) if k.startswith("messages/")]) >= 150
    again = json.loads(run_cli("verify", "--json", config=cfg).stdout)["temp_files"]
    assert again["files"] == 1 and again["stale"] == 0, again
