"""Cursors and run leases on S3 (``state_url``), against moto and a real SeaweedFS: CAS, faults, leases, fencing."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from memex import config
from memex.errors import AlreadyRunning, CursorConflict
from memex.state.s3lease import S3Lease, read_lease
from memex.state.s3state import S3CursorStore, open_state
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, FaultProxy, Gate, read_log, run_cli, s3_objects, wait_until, write_config
from tests.core import race_worker


def _cfg(tmp_path: Path, endpoint: str, bucket: str, sources: dict[str, dict[str, Any]] | None = None, *, client: str = "lean",
         lease_seconds: int = 3, name: str = "config.toml") -> Path:  # fmt: skip
    """A config with objects and state on the same bucket (store under store/, state under state/)."""
    path = write_config(tmp_path, sources or {}, store={"url": f"s3://{bucket}/store", "endpoint_url": endpoint, "client": client},
                        state_url=f"s3://{bucket}/state", lease_seconds=lease_seconds)  # fmt: skip
    if name != "config.toml":
        path = path.rename(tmp_path / name)
    return path


def _state(cfg_path: Path) -> Any:
    return open_state(config.load(cfg_path))


@pytest.mark.parametrize("client", ["lean", "boto3"])
def test_cursor_sections_are_compare_and_swap_objects(any_s3: tuple[str, str], tmp_path: Path, client: str) -> None:
    """Each source is one object under state/cursors/; advance is a CAS on the cursor; load shows every configured source."""
    endpoint, bucket = any_s3
    cfg_path = _cfg(tmp_path, endpoint, bucket, {"a": {"type": "imessage", "db": "x"}, "b": {"type": "imessage", "db": "y"}}, client=client)
    store = S3CursorStore(_state(cfg_path), sources=["a", "b"])
    store.advance("a", None, {"rowid": 5}, positions={"rowid": 5})
    with pytest.raises(CursorConflict):
        store.advance("a", None, {"rowid": 9})  # the stored cursor is no longer None
    store.set_cursor("b", {"rowid": 2}, reason="set")
    assert {n: s["cursor"] for n, s in store.load().items()} == {"a": {"rowid": 5}, "b": {"rowid": 2}}
    keys = set(s3_objects(endpoint, bucket, "state/"))
    assert keys == {"state/cursors/a.json", "state/cursors/b.json"}


def _race(worker: Any, cfg_path: Path) -> None:
    """4 worker processes, 25 increments each of their own key in source "src", released together by a barrier."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=worker, args=(str(cfg_path), "src", f"w{i}", 25, barrier)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0


@pytest.mark.slow
def test_concurrent_writers_of_one_source_lose_no_update(any_s3: tuple[str, str], tmp_path: Path) -> None:
    """4 processes x 25 read-change-write updates of the same object, all at once: every update survives (If-Match)."""
    endpoint, bucket = any_s3
    cfg_path = _cfg(tmp_path, endpoint, bucket, {"src": {"type": "imessage", "db": "x"}})
    _race(race_worker.s3_cas_worker, cfg_path)
    section = S3CursorStore(_state(cfg_path)).section("src")
    assert [section.get(f"w{i}") for i in range(4)] == [25] * 4


@pytest.mark.slow
def test_the_naive_plain_put_loses_updates(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """The same race with GET + plain PUT (no If-Match) loses updates: the CAS above is what prevents it."""
    cfg_path = _cfg(tmp_path, s3_endpoint, s3_bucket, {"src": {"type": "imessage", "db": "x"}})
    _race(race_worker.s3_naive_worker, cfg_path)
    section = json.loads(s3_objects(s3_endpoint, s3_bucket, "state/")["state/cursors/src.json"])["section"]
    assert sum(section.get(f"w{i}", 0) for i in range(4)) < 100


def test_a_lost_response_to_a_landed_write_is_recognised_not_reapplied(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """The write lands, its answer is lost, the retry meets 412: the re-read finds our write_id, so it is applied once, without error."""
    with FaultProxy(s3_endpoint) as proxy:
        cfg_path = _cfg(tmp_path, proxy.url, s3_bucket)
        store = S3CursorStore(_state(cfg_path))
        store.update("src", lambda s: {**s, "n": s.get("n", 0) + 1})
        lost = {"done": False}

        def rule(method: str, key: str) -> str | None:
            if method == "PUT" and key.endswith("cursors/src.json") and not lost["done"]:
                lost["done"] = True
                return "lost"
            return None

        proxy.rule = rule
        store.update("src", lambda s: {**s, "n": s.get("n", 0) + 1})
        assert [f for f, _ in proxy.faults] == ["lost"]
        assert store.section("src")["n"] == 2


def test_server_errors_and_dropped_connections_are_retried(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """503, 500 and a dropped connection on cursor writes are retried; the update lands exactly once."""
    faults = ["503", "500", "close"]
    with FaultProxy(s3_endpoint) as proxy:
        proxy.rule = lambda method, key: faults.pop(0) if method == "PUT" and key.endswith("cursors/src.json") and faults else None
        store = S3CursorStore(_state(_cfg(tmp_path, proxy.url, s3_bucket)), retry_delay=0.01)
        store.state.lean.retry_base_delay = 0.01
        store.update("src", lambda s: {**s, "n": s.get("n", 0) + 1})
        assert [f for f, _ in proxy.faults] == ["503", "500", "close"]
        assert store.section("src")["n"] == 1


def test_a_corrupt_cursor_object_stops_the_poll_and_is_never_overwritten(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """Garbage at state/cursors/<source>.json: the poll fails with one line naming the object; the object is left as it was."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 5, seed=1)
    cfg_path = _cfg(tmp_path, s3_endpoint, s3_bucket, {"imessage": {"type": "imessage", "db": str(db)}})
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.put_object(Bucket=s3_bucket, Key="state/cursors/imessage.json", Body=b"{not json")
    out = run_cli("poll", "imessage", config=cfg_path)
    assert out.returncode == 1 and "state/cursors/imessage.json: corrupt cursor object" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert s3.get_object(Bucket=s3_bucket, Key="state/cursors/imessage.json")["Body"].read() == b"{not json"


def test_poll_status_and_cursor_commands_work_on_s3_state(any_s3: tuple[str, str], tmp_path: Path) -> None:
    """A poll stores everything and saves its cursor on S3; status names the host; cursor show/set/reset work the same way."""
    endpoint, bucket = any_s3
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 12, seed=2)
    cfg_path = _cfg(tmp_path, endpoint, bucket, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg_path).returncode == 0
    assert len(s3_objects(endpoint, bucket, "store/messages/")) == 12
    shown = json.loads(run_cli("cursor", "show", "imessage", "--json", config=cfg_path).stdout)
    assert shown is not None and not (tmp_path / "state" / "cursors.json").exists()  # nothing local
    status = json.loads(run_cli("status", "--json", config=cfg_path).stdout)[0]
    assert status["polled_by"].startswith(os.uname().nodename) and status["lease"] == "free"
    assert "HOST" in run_cli("status", config=cfg_path).stdout
    assert run_cli("cursor", "reset", "imessage", "--yes", config=cfg_path).returncode == 0
    assert json.loads(run_cli("cursor", "show", "imessage", "--json", config=cfg_path).stdout) is None


def test_a_lease_excludes_others_until_released_or_expired_by_the_server_clock(any_s3: tuple[str, str], tmp_path: Path) -> None:
    """A held lease refuses a second holder (naming host and pid); release lets it in at once; a dead holder's lease expires after its TTL."""
    endpoint, bucket = any_s3  # moto, then SeaweedFS (its Last-Modified and Date decide expiry)
    state = _state(_cfg(tmp_path, endpoint, bucket))
    first = S3Lease(state, "src", ttl=3, fenced_source="src")
    first.acquire()
    with pytest.raises(AlreadyRunning, match=r"already running \(pid \d+ on "):
        S3Lease(state, "src", ttl=3, fenced_source="src").acquire()
    first.release()
    second = S3Lease(state, "src", ttl=3, fenced_source="src")
    second.acquire()
    assert (first.epoch, second.epoch) == (1, 2)
    second._stop.set()  # the holder dies: no more renewals, no release
    assert second._renewer is not None
    second._renewer.join(10)
    third = S3Lease(state, "src", ttl=3, fenced_source="src")
    wait_until(lambda: _try(third), 15, "the dead holder's lease to expire")
    assert third.epoch == 3 and S3CursorStore(state).section("src")["epoch"] == 3
    third.release()


def _try(lease: S3Lease) -> bool:
    try:
        lease.acquire()
    except AlreadyRunning:
        return False
    return True


def _poll(
    cfg_path: Path, source: str, *extra: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    env = {k: v for k, v in (env or os.environ).items() if k != "MEMEX_CONFIG"}
    return subprocess.Popen([*prefix, sys.executable, "-m", "memex", "--config", str(cfg_path), "poll", source, "--max-seconds", "120", *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _holder(endpoint: str, bucket: str, source: str) -> int | None:
    try:
        body = boto3.client("s3", endpoint_url=endpoint).get_object(Bucket=bucket, Key=f"state/leases/{source}.json")["Body"].read()
    except Exception:
        return None
    doc = json.loads(body)
    return None if doc.get("released") else int(doc["pid"])


@pytest.mark.slow
def test_a_holder_paused_past_its_ttl_is_fenced_and_the_new_holder_wins(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """SIGSTOP a polling holder past its TTL; another host takes over; the old one resumes: its cursor write is refused, nothing is lost.

    A naive lease (no epoch in the cursor write) lets the resumed holder save first and the new holder fail.
    """
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 150, seed=4)
    src = {"imessage": {"type": "imessage", "db": str(db)}}
    with FaultProxy(s3_endpoint) as slow_a, FaultProxy(s3_endpoint) as slow_b:
        slow_a.delay, slow_b.delay = 0.05, 0.1
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        cfg_a = _cfg(tmp_path / "a", slow_a.url, s3_bucket, src)
        cfg_b = _cfg(tmp_path / "b", slow_b.url, s3_bucket, src)
        a = _poll(cfg_a, "imessage")
        wait_until(lambda: _holder(s3_endpoint, s3_bucket, "imessage") == a.pid, 30, "host A to hold the lease")
        os.kill(a.pid, signal.SIGSTOP)
        try:
            lease = S3Lease(open_state(config.load(cfg_b)), "imessage", ttl=3)
            wait_until(lambda: not read_lease(lease.state, lease.key)[0].live, 20, "A's lease to expire")  # type: ignore[index]
            b = _poll(cfg_b, "imessage")
            wait_until(lambda: _holder(s3_endpoint, s3_bucket, "imessage") == b.pid, 30, "host B to take the lease over")
            slow_a.delay = 0.0  # A now finishes first, while B is still uploading
        finally:
            os.kill(a.pid, signal.SIGCONT)
        _, a_err = a.communicate(timeout=120)
        _, b_err = b.communicate(timeout=180)
    assert a.returncode == 1 and "lease (epoch 1) was taken over" in a_err, a_err
    assert b.returncode == 0, b_err
    assert any(e.get("event") == "cursor.fenced" for e in read_log(tmp_path / "a" / "state", "imessage"))
    assert len(s3_objects(s3_endpoint, s3_bucket, "store/messages/")) == 150
    (tmp_path / "c").mkdir()
    section = S3CursorStore(_state(_cfg(tmp_path / "c", s3_endpoint, s3_bucket))).section("imessage")
    assert section["epoch"] == 2 and section["positions"] == {"rowid": 150}


@pytest.mark.slow
def test_a_host_whose_clock_is_far_ahead_does_not_steal_a_live_lease(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """Host B's clock runs 10 minutes ahead (TTL 3 s): a lease that A keeps renewing is still live for B (the server's clock decides)."""
    faketime = subprocess.run(["which", "faketime"], capture_output=True, text=True).stdout.strip()
    if not faketime:
        if os.environ.get("CI"):
            raise AssertionError("faketime is missing on CI")
        pytest.skip("faketime is not installed")
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 120, seed=6)
    src = {"imessage": {"type": "imessage", "db": str(db)}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cfg_a = _cfg(tmp_path / "a", s3_endpoint, s3_bucket, src)
    cfg_b = _cfg(tmp_path / "b", s3_endpoint, s3_bucket, src)
    gate = Gate(tmp_path, 60)  # A's poll pauses at its 60th message, renewing its lease, until B has tried three times
    a = _poll(cfg_a, "imessage", env=gate.env())
    gate.wait_held(a)
    assert _holder(s3_endpoint, s3_bucket, "imessage") == a.pid
    skew = subprocess.run([faketime, "-f", "+10m", sys.executable, "-c", "import time; print(time.time())"], capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    import time

    assert float(skew.stdout) - time.time() > 500  # faketime really moves the clock
    for _ in range(3):  # across more than a TTL, while A renews
        b = _poll(cfg_b, "imessage", prefix=(faketime, "-f", "+10m"))
        _, b_err = b.communicate(timeout=60)
        assert b.returncode == 0, b_err
        assert read_log(tmp_path / "b" / "state", "imessage")[-1]["status"] == "skipped"
        time.sleep(1.5)  # spacing the attempts across the TTL, not waiting for a result
    gate.open()
    _, a_err = a.communicate(timeout=120)
    assert a.returncode == 0, a_err
    assert len(s3_objects(s3_endpoint, s3_bucket, "store/messages/")) == 120


@pytest.mark.slow
def test_hosts_contending_for_the_same_sources_never_overlap_lose_or_repeat(any_s3: tuple[str, str], tmp_path: Path) -> None:
    """3 hosts (own state dirs, one S3 state) poll 2 sources for 8 rounds while messages arrive.

    Never two polls of a source at once (every running poll has its own epoch, and no poll met a changed
    cursor or re-read a message), no cursor update lost (the last cursor is the newest row), every message
    stored exactly once.
    """
    endpoint, bucket = any_s3
    dbs = {name: tmp_path / f"{name}.db" for name in ("a", "b")}
    for i, db in enumerate(dbs.values()):
        imessage_samples.build(db, 40, seed=10 + i)
    src = {name: {"type": "imessage", "db": str(db)} for name, db in dbs.items()}
    hosts = []
    for h in range(3):
        (tmp_path / f"h{h}").mkdir()
        hosts.append(_cfg(tmp_path / f"h{h}", endpoint, bucket, src, lease_seconds=30))
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=race_worker.host_worker, args=(str(cfg), ["a", "b"], 8, barrier)) for cfg in hosts]
    for p in procs:
        p.start()
    barrier.wait(timeout=60)
    for i in range(6):  # messages keep arriving while the hosts poll
        for j, db in enumerate(dbs.values()):
            imessage_samples.append(db, 5, seed=100 + i * 2 + j)
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    (tmp_path / "final").mkdir()
    final = _cfg(tmp_path / "final", endpoint, bucket, src, lease_seconds=30)
    for name in dbs:
        assert run_cli("poll", name, config=final).returncode == 0  # whatever arrived after the last round
    polls = [e for h in range(3) for name in dbs for e in read_log(tmp_path / f"h{h}" / "state", name) if e.get("event") == "poll"]
    ran = [e for e in polls if e["status"] != "skipped"]
    assert [e for e in ran if e["status"] == "error"] == []
    assert sum(e.get("dup", 0) for e in ran) == 0
    for name in dbs:
        epochs = [e["lease_epoch"] for e in ran if e["source"] == name]
        assert len(epochs) == len(set(epochs)) >= 3
    stored = s3_objects(endpoint, bucket, "store/messages/")
    assert len(stored) == 2 * (40 + 30)
    sections = S3CursorStore(_state(final), sources=list(dbs)).load()
    assert {n: s["positions"]["rowid"] for n, s in sections.items()} == {"a": 70, "b": 70}


def test_a_source_polled_only_on_another_host_is_remote_not_stale(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """Status on the server for the laptop's source: REMOTE naming the laptop, not STALE (its logs are on the laptop)."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=8)
    for h in ("laptop", "server"):
        (tmp_path / h).mkdir()
    src = {"imessage": {"type": "imessage", "db": str(db)}}
    laptop, server = (_cfg(tmp_path / h, s3_endpoint, s3_bucket, src) for h in ("laptop", "server"))
    assert run_cli("poll", "imessage", config=laptop, env={"MEMEX_HOST": "laptop"}).returncode == 0
    row = json.loads(run_cli("status", "--json", config=server, env={"MEMEX_HOST": "server"}).stdout)[0]
    assert (row["state"], row["polled_by"].split()[0]) == ("REMOTE", "laptop") and "polled on laptop" in row["state_reason"]
    here = json.loads(run_cli("status", "--json", config=laptop, env={"MEMEX_HOST": "laptop"}).stdout)[0]
    assert here["state"] == "OK"


def test_the_dashboard_says_which_host_polls_each_source(s3_endpoint: str, s3_bucket: str, tmp_path: Path) -> None:
    """With S3 state, `dashboard --once` names the host that last polled each source."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=9)
    cfg = _cfg(tmp_path, s3_endpoint, s3_bucket, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg, env={"MEMEX_HOST": "laptop"}).returncode == 0
    out = run_cli("dashboard", "--once", "--width", "160", config=cfg)
    assert out.returncode == 0 and "hosts: imessage last polled on laptop" in out.stdout
