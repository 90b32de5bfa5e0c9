"""The mbox source under kill -9 and SIGTERM in the middle of a large file: nothing lost, nothing stored twice."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

from memex.runner import COMMIT_ITEMS
from tests.conftest import ROOT, Gate, file_objects, read_log, run_cli, write_config
from tests.email.test_mbox import mail, mbox_of


def setup(tmp_path: Path, n: int) -> Path:
    """An mbox of ``n`` mails (a few with a ``From `` line in the body) and a config reading it as source ``mb``."""
    box = tmp_path / "All mail Including Spam and Trash.mbox"
    box.write_bytes(mbox_of([mail(i, "From the archive\n" if i % 97 == 0 else "") for i in range(n)]))
    return write_config(tmp_path, {"mb": {"type": "mbox", "path": str(box), "settle_seconds": 0}})


def stored_ids(tmp_path: Path) -> list[str]:
    """The native IDs of every stored record, sorted, each once per record object."""
    docs = [json.loads(b) for k, b in file_objects(tmp_path / "state" / "store").items() if k.endswith(".json")]
    return sorted(d["native_id"] for d in docs)


def last_poll(tmp_path: Path) -> dict[str, object]:
    """The summary line of the last poll of ``mb``."""
    return [e for e in read_log(tmp_path / "state", "mb") if e.get("event") == "poll"][-1]


def test_kill_9_at_three_points_then_a_rerun_stores_every_mail_exactly_once(tmp_path: Path) -> None:
    """memex poll killed with SIGKILL three times, each held (a test hold) at a random mail of a 3,000-mail file, so
    it is provably mid-file when killed; the next poll resumes at the offset of the last committed mail (re-reading at
    most one group commit), and in the end every mail is one object with its body intact."""
    cfg = setup(tmp_path, 3000)
    rng = random.Random(33)
    argv = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "mb"]
    points = sorted(rng.sample(range(1, 900), 3))
    for round_, at in enumerate(points):
        gate = Gate(tmp_path, at, name=f"gate{round_}")
        proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL, cwd=ROOT, env=gate.env())
        gate.wait_held(proc)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    out = run_cli("poll", "mb", config=cfg)
    assert out.returncode == 0, out.stderr
    last = last_poll(tmp_path)
    assert isinstance(last["dup"], int) and last["dup"] <= COMMIT_ITEMS
    assert stored_ids(tmp_path) == sorted(f"mb{i}@example.com" for i in range(3000))
    body = json.loads(file_objects(tmp_path / "state" / "store")["messages/mb/mb97%40example.com.json"])["text"]
    assert "From the archive" in body
    assert run_cli("poll", "mb", config=cfg).returncode == 0
    assert last_poll(tmp_path)["status"] == "idle"


def test_sigterm_inside_a_batch_saves_the_offset_right_after_the_last_stored_mail(tmp_path: Path) -> None:
    """A poll stopped by SIGTERM at the 700th mail (inside the second batch of 500) saves the cursor just past the
    last mail it stored, so the next poll stores the other 500 and re-reads none."""
    cfg = setup(tmp_path, 1200)
    gate = Gate(tmp_path, 700)
    argv = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "mb"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=gate.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    gate.wait_held(proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    first = last_poll(tmp_path)
    assert first["stopped"] == "signal" and first["new"] == 700 and first["positions_after"] == {"mails": 700}
    out = run_cli("poll", "mb", config=cfg)
    assert out.returncode == 0, out.stderr
    second = last_poll(tmp_path)
    assert (second["new"], second["dup"]) == (500, 0)
    assert stored_ids(tmp_path) == sorted(f"mb{i}@example.com" for i in range(1200))
