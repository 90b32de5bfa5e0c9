"""Run leases on S3 (real moto over HTTP): a failed poll releases its lease, and a dead holder on this host is taken over.

A poll that failed while taking its lease (a corrupt cursor object) used to leave the lease held by its dead process,
so the next poll on the same host was ``skipped`` (exit 0) until the lease expired: the error vanished from cron mail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from memex.state.s3lease import boot_id
from memex.state.s3state import host_name
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, Gate, read_log, run_cli, write_config


def _setup(tmp_path: Path, endpoint: str, bucket: str) -> Path:
    """An imessage source with store and state on the moto bucket (lease TTL 60 s: nothing expires during a test)."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 5, seed=3)
    return write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}},
                        store={"url": f"s3://{bucket}/store", "endpoint_url": endpoint}, state_url=f"s3://{bucket}/state",
                        lease_seconds=60)  # fmt: skip


def _lease(endpoint: str, bucket: str) -> dict[str, Any]:
    body = boto3.client("s3", endpoint_url=endpoint).get_object(Bucket=bucket, Key="state/leases/imessage.json")["Body"].read()
    doc: dict[str, Any] = json.loads(body)
    return doc


def _hold(endpoint: str, bucket: str, **doc: Any) -> None:
    """Write the lease as a holder that never released it (60 s TTL: live)."""
    lease = {"host": host_name(), "pid": 1, "boot": boot_id(), "epoch": 7, "ttl": 60, "acquired_at": "2026-01-01T00:00:00Z", **doc}
    boto3.client("s3", endpoint_url=endpoint).put_object(Bucket=bucket, Key="state/leases/imessage.json", Body=json.dumps(lease).encode())


def _dead_pid() -> int:
    """The PID of a process of this host that has ended (and been reaped)."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_poll_failing_on_a_corrupt_cursor_releases_its_lease_and_the_next_poll_reports_the_error(
    s3_endpoint: str, s3_bucket: str, tmp_path: Path
) -> None:
    """poll --all fails on a corrupt cursor object: the lease is released, and the next poll fails the same way (not skipped)."""
    path = _setup(tmp_path, s3_endpoint, s3_bucket)
    assert run_cli("poll", "imessage", config=path).returncode == 0  # leaves the release remembered on this host
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket=s3_bucket, Key="state/cursors/imessage.json", Body=b"{not json")
    failed = run_cli("poll", "--all", config=path)
    assert failed.returncode == 1 and "corrupt cursor object" in failed.stderr, failed.stderr
    assert _lease(s3_endpoint, s3_bucket).get("released") is True
    again = run_cli("poll", "imessage", config=path)
    assert again.returncode == 1 and "corrupt cursor object" in again.stderr and "skipped" not in again.stderr + again.stdout
    assert "Traceback" not in failed.stderr + again.stderr


def test_a_lease_held_by_a_dead_process_of_this_host_is_taken_over_at_once_and_logged(
    s3_endpoint: str, s3_bucket: str, tmp_path: Path
) -> None:
    """A live lease whose holder is a PID of this host and boot that no longer runs is taken over by the next poll, with a warning."""
    path = _setup(tmp_path, s3_endpoint, s3_bucket)
    dead = _dead_pid()
    _hold(s3_endpoint, s3_bucket, pid=dead)
    done = run_cli("poll", "imessage", config=path)
    assert done.returncode == 0, done.stderr
    events = read_log(tmp_path / "state", "imessage")
    taken = [e for e in events if e["event"] == "lease.taken_over"]
    assert taken and taken[-1]["previous_pid"] == dead and taken[-1]["level"] == "warning"
    assert "no longer running" in taken[-1]["reason"]
    assert [e["status"] for e in events if e["event"] == "poll"] == ["ok"]
    assert _lease(s3_endpoint, s3_bucket)["epoch"] == 8 and _lease(s3_endpoint, s3_bucket)["released"] is True


@pytest.mark.parametrize("holder", ["alive", "other-boot", "other-host"])
def test_a_lease_held_by_a_live_process_or_on_another_machine_is_not_taken(
    s3_endpoint: str, s3_bucket: str, tmp_path: Path, holder: str
) -> None:
    """A running holder, or a dead PID of another boot or host (whose PIDs say nothing here): the poll is skipped as before."""
    path = _setup(tmp_path, s3_endpoint, s3_bucket)
    with subprocess.Popen(["sleep", "60"]) as alive:
        try:
            doc = {"alive": {"pid": alive.pid}, "other-boot": {"pid": _dead_pid(), "boot": "another-boot/1"},
                   "other-host": {"pid": _dead_pid(), "host": "another-host"}}[holder]  # fmt: skip
            _hold(s3_endpoint, s3_bucket, **doc)
            done = run_cli("poll", "imessage", config=path)
        finally:
            alive.kill()
    assert done.returncode == 0
    assert [e["status"] for e in read_log(tmp_path / "state", "imessage") if e["event"] == "poll"] == ["skipped"]
    assert _lease(s3_endpoint, s3_bucket)["epoch"] == 7


def test_a_poll_killed_mid_poll_leaves_a_lease_the_next_poll_on_this_host_takes_over_at_once(
    s3_endpoint: str, s3_bucket: str, tmp_path: Path
) -> None:
    """kill -9 of a poll holding its lease (60 s TTL): the next poll here takes it over at once and stores the rest."""
    path = _setup(tmp_path, s3_endpoint, s3_bucket)
    gate = Gate(tmp_path, at=2)
    env = {**gate.env(), "PYTHONPATH": str(ROOT)}
    held = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(path), "poll", "imessage"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        pid = gate.wait_held(held)
        assert _lease(s3_endpoint, s3_bucket)["pid"] == pid and not _lease(s3_endpoint, s3_bucket).get("released")
        os.kill(pid, signal.SIGKILL)
        held.wait(30)
    finally:
        if held.poll() is None:
            held.kill()
        held.communicate()
    done = run_cli("poll", "imessage", config=path)
    assert done.returncode == 0, done.stderr
    taken = [e for e in read_log(tmp_path / "state", "imessage") if e["event"] == "lease.taken_over"]
    assert taken[-1]["previous_pid"] == pid and taken[-1]["previous_released"] is False
    polls = [e for e in read_log(tmp_path / "state", "imessage") if e["event"] == "poll"]
    assert polls[-1]["status"] == "ok" and polls[-1]["positions_after"]
