"""The runner never saves a cursor it cannot trust, and a poll stopped mid-batch in any way resumes exactly."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memex import config as config_mod
from memex import registry
from memex.runner import poll
from tests.conftest import ROOT, FaultProxy, Gate, put_fault, read_log, run_cli, s3_objects, write_config
from tests.email.test_maildir import deliver, mail, make_maildir

MAILS = 30


def _maildir_setup(tmp_path: Path, bucket: str, endpoint: str) -> Path:
    root = make_maildir(tmp_path / "Maildir")
    for n in range(MAILS):
        deliver(root, f"{1700000000 + n}.M{n}P1.host", mail(n))
    return write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0}},
                        store={"url": f"s3://{bucket}/p", "endpoint_url": endpoint})  # fmt: skip


def _finish_and_check(tmp_path: Path, cfg: Path, endpoint: str, bucket: str) -> None:
    """Poll to the end; every mail is stored once and no poll re-read a mail it had passed (no duplicates)."""
    out = run_cli("poll", "md", config=cfg)
    assert out.returncode == 0, out.stderr
    records = [k for k in s3_objects(endpoint, bucket, "p/messages/") if k.endswith(".json")]
    assert len(records) == MAILS
    polls = [e for e in read_log(tmp_path / "state", "md") if e.get("event") == "poll"]
    assert sum(e.get("new", 0) for e in polls) == MAILS and sum(e.get("dup", 0) for e in polls) == 0
    assert not [e for e in read_log(tmp_path / "state", "md") if e.get("event") == "poller.bad_cursor"]
    again = run_cli("poll", "md", config=cfg)
    assert again.returncode == 0 and read_log(tmp_path / "state", "md")[-1]["status"] == "idle"


def test_maildir_poll_stopped_by_its_deadline_mid_batch_resumes_exactly(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> None:
    """--max-seconds ends a Maildir poll inside its batch: the saved cursor is a batch-shaped cursor and the next poll goes on.

    The poll is held at its 3rd mail (a test hold) until its time limit passes, so the limit lands inside the batch
    whatever the machine's speed.
    """
    cfg = _maildir_setup(tmp_path, s3_bucket, s3_endpoint)
    gate = Gate(tmp_path, 3)
    out = run_cli("poll", "md", "--max-seconds", "8", config=cfg, env=gate.env())
    assert out.returncode == 0, out.stderr
    first = read_log(tmp_path / "state", "md")[-1]
    # The held mail's upload never starts after the limit; on a loaded machine the limit may come before the hold.
    assert first["stopped"] == "deadline" and first["new"] <= 2
    _finish_and_check(tmp_path, cfg, s3_endpoint, s3_bucket)


def test_maildir_poll_stopped_by_sigterm_mid_batch_resumes_exactly(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> None:
    """SIGTERM inside a Maildir batch: progress is saved in the right shape and the next poll stores the rest, once each.

    The poll is held at its 6th mail (a test hold) when the signal is sent, so it lands inside the batch.
    """
    cfg = _maildir_setup(tmp_path, s3_bucket, s3_endpoint)
    gate = Gate(tmp_path, 6)
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "md"], cwd=ROOT, env=gate.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    gate.wait_held(proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    first = read_log(tmp_path / "state", "md")[-1]
    assert first["stopped"] == "signal" and first["new"] == 5  # the held mail's upload never starts after the stop
    _finish_and_check(tmp_path, cfg, s3_endpoint, s3_bucket)


def test_maildir_poll_stopped_by_one_failed_upload_resumes_exactly(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> None:
    """One 403 on one upload mid-batch fails that poll; the cursor covers what was stored, and the next poll is not stuck."""
    with FaultProxy(s3_endpoint) as proxy:
        proxy.rule = put_fault(proxy, lambda n: n == 21, fault="403")
        cfg = _maildir_setup(tmp_path, s3_bucket, proxy.url)
        out = run_cli("poll", "md", config=cfg)
        assert out.returncode == 1 and "upload refused (AccessDenied)" in out.stderr
        proxy.rule = lambda _m, _k: None
        _finish_and_check(tmp_path, cfg, s3_endpoint, s3_bucket)


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: dict[str, str]) -> config_mod.Config:
    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"count": 5}))
    return config_mod.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(path)}}, store=store))


@pytest.mark.parametrize(("mode", "reason"), [("malformed", "cannot be computed"), ("empty", "has no positions"),
                                              ("item_backward", "goes back")])  # fmt: skip
def test_a_cursor_the_runner_cannot_trust_is_refused_loudly_and_never_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str,
                                                                           reason: str, s3_bucket: str, proxy: FaultProxy) -> None:  # fmt: skip
    """A poll stopped mid-batch (one failed upload) with a malformed, empty or backward item cursor: poller.bad_cursor, cursor kept.

    The upload failure stays the poll's error; the refusal is logged loudly, naming the source.
    """
    cfg = _fake(tmp_path, monkeypatch, {"url": f"s3://{s3_bucket}/p", "endpoint_url": proxy.url})
    assert poll(cfg, "f").status == "ok"  # cursor {"n": 5}
    before = json.loads((tmp_path / "state" / "cursors.json").read_text())
    (tmp_path / "spec.json").write_text(json.dumps({"count": 8, "mode": mode}))
    proxy.rule = put_fault(proxy, lambda n: n == 7, fault="403")  # the 2nd new message fails: stop after the 1st
    result = poll(cfg, "f")
    assert result.status == "error" and "upload refused" in (result.error or "")
    refused = [e for e in read_log(tmp_path / "state", "f") if e.get("event") == "poller.bad_cursor"]
    assert len(refused) == 1 and reason in refused[0]["reason"] and refused[0]["source"] == "f"
    assert json.loads((tmp_path / "state" / "cursors.json").read_text()) == before


def test_a_cursor_that_moves_while_nothing_is_stored_shows_as_stuck_after_five_polls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plug-in whose cursor moves on each poll while it stores nothing (two copies of one export, read as "new" each
    time) is ``STUCK`` in ``memex status`` after 5 such polls (``moved_idle`` in each poll line), never ``IDLE`` for
    ever; before the fifth it is still ``IDLE``."""
    from memex.observe.health import IDLE, STUCK, source_health

    cfg = _fake(tmp_path, monkeypatch, {})
    (tmp_path / "spec.json").write_text(json.dumps({"count": 5, "hollow": True}))
    assert poll(cfg, "f").new == 5
    states = []
    for _ in range(5):
        result = poll(cfg, "f")
        assert (result.status, result.extra.get("moved_idle")) == ("idle", True)
        states.append(source_health(cfg, "f").state)
    assert states == [IDLE, IDLE, IDLE, IDLE, STUCK]
    assert "nothing was stored" in source_health(cfg, "f").reason
