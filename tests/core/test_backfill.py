"""memex backfill: resumable, concurrent history import beside cron, against real processes, SQLite and S3 over HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3

from memex.backfill.frontier import Frontier
from memex.state.locks import RunLock
from pollers.imessage import samples as imessage_samples
from pollers.imessage.rows import apple_nanoseconds, apple_time
from tests.conftest import CLI_TIMEOUT, ROOT, FaultProxy, Gate, file_objects, read_log, run_cli, s3_objects, wait_until, write_config

PREFIX = "idx"

# -- helpers -----------------------------------------------------------------------------------------------------------


def build_db(path: Path, count: int, start: datetime | None = None) -> Path:
    """A sample chat.db in the real schema."""
    imessage_samples.build(path, count, start=start)
    return path


def db_guids(db: Path) -> dict[int, str]:
    """ROWID -> guid of every message."""
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT ROWID, guid FROM message"))


def stored_ids(objects: dict[str, bytes]) -> list[str]:
    """The native IDs of stored message records (a list: a duplicate would show twice)."""
    return [json.loads(body)["native_id"] for key, body in objects.items() if key.endswith(".json") and "/messages/" in f"/{key}"]


def s3_config(tmp_path: Path, db: Path, bucket: str, endpoint: str, **source: Any) -> Path:
    """A config with one iMessage source and an S3 store at ``endpoint``."""
    return write_config(
        tmp_path,
        {"im": {"type": "imessage", "db": str(db), **source}},
        store={"url": f"s3://{bucket}/{PREFIX}", "endpoint_url": endpoint},
    )


def file_config(tmp_path: Path, db: Path, **source: Any) -> Path:
    """A config with one iMessage source and a file store."""
    return write_config(tmp_path, {"im": {"type": "imessage", "db": str(db), **source}}, store={"url": (tmp_path / "store").as_uri()})


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``--json`` summary of a backfill run."""
    assert proc.stdout.strip(), f"no summary; rc={proc.returncode} stderr={proc.stderr[-2000:]}"
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def section(state: Path) -> dict[str, Any]:
    """The ``im`` section of cursors.json."""
    doc = json.loads((state / "cursors.json").read_text())
    result: dict[str, Any] = doc["sources"].get("im", {})
    return result


def popen_cli(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m memex --config CONFIG ARGS`` without waiting (``env``: its environment)."""
    env = env or {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    return subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)  # fmt: skip


def interrupt_when(proc: subprocess.Popen[str], ready: Any, what: str) -> tuple[str, str]:
    """Wait (60 s at most) until ``ready()``, send ``proc`` SIGINT, and return its output once it ended (killed if not)."""
    try:
        wait_until(ready, 60, what)
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=CLI_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def object_count(endpoint: str, bucket: str) -> int:
    """How many objects the bucket holds (first page is enough to tell a run has started)."""
    resp = boto3.client("s3", endpoint_url=endpoint).list_objects_v2(Bucket=bucket, Prefix=f"{PREFIX}/messages/")
    return int(resp.get("KeyCount", 0))


def digest(data: bytes) -> str:
    """A short hash, so assertions never print message text."""
    return hashlib.sha256(data).hexdigest()[:16]


# -- the frontier ------------------------------------------------------------------------------------------------------


class NaiveFrontier:
    """The tempting wrong checkpoint: the highest position completed so far."""

    def __init__(self, start: Any) -> None:
        self.cursor, self.best = start, -1

    def complete(self, seq: int, cursor: Any) -> None:
        """Remember the highest completion."""
        if seq > self.best:
            self.best, self.cursor = seq, cursor

    def block(self, seq: int) -> None:
        """Ignored (that is the bug)."""

    def snapshot(self) -> tuple[Any, int]:
        """The highest completion."""
        return self.cursor, self.best + 1


def checkpoint_passes_unfinished(frontier: Any) -> bool:
    """Drive out-of-order completions with one failure; True if a checkpoint ever passed an unfinished item."""
    # 10 items; 8 workers finish in this order, item 3 fails for good, items 9 was never started (stop).
    order = [(1, "ok"), (0, "ok"), (4, "ok"), (2, "ok"), (3, "fail"), (6, "ok"), (5, "ok"), (7, "ok"), (8, "ok"), (9, "stop")]
    finished: set[int] = set()
    for seq, what in order:
        if what == "ok":
            frontier.complete(seq, {"rowid": seq + 1})
            finished.add(seq)
        else:
            frontier.block(seq)
        cursor, behind = frontier.snapshot()
        position = cursor["rowid"] if cursor else 0  # the checkpoint covers items 0 .. position-1
        if any(s not in finished for s in range(position)) or behind != position:
            return True
    return False


def test_frontier_never_passes_an_unfinished_item_and_catches_the_naive_max() -> None:
    """Out-of-order completions and a failure: the frontier stops before the failure; "max completed" would pass it."""
    frontier = Frontier(None)
    assert not checkpoint_passes_unfinished(frontier)
    assert frontier.snapshot() == ({"rowid": 3}, 3)  # items 0, 1, 2 done; 3 failed
    assert frontier.pending == 0  # completions after a failure are not kept: memory stays bounded
    assert checkpoint_passes_unfinished(NaiveFrontier(None))


def test_reader_waits_while_one_slow_item_holds_the_frontier() -> None:
    """While item 0 is still uploading, the reader may run at most ``window`` items ahead, so pending stays bounded."""
    frontier = Frontier(None)
    for seq in range(1, 8):
        frontier.complete(seq, {"rowid": seq + 1})
    assert frontier.wait_for_room(7, 8, 0)
    assert not frontier.wait_for_room(8, 8, 0.01)  # 8 ahead of a frontier still at 0: wait
    frontier.complete(0, {"rowid": 1})
    assert frontier.snapshot() == ({"rowid": 8}, 8) and frontier.pending == 0
    assert frontier.wait_for_room(15, 8, 0)
    frontier.block(8)  # failed for good: nothing above it is kept, so the reader never waits on it
    assert frontier.wait_for_room(10_000, 8, 0)


# -- start = "now" -----------------------------------------------------------------------------------------------------


def test_start_now_first_poll_takes_nothing_old_and_backfill_takes_the_history(tmp_path: Path) -> None:
    """A start="now" source: first poll stores nothing, the next only new messages; backfill then stores the history."""
    db = build_db(tmp_path / "chat.db", 300)
    config = file_config(tmp_path, db, start="now")
    state, store = tmp_path / "state", tmp_path / "store"
    assert run_cli("poll", "im", config=config).returncode == 0
    assert stored_ids(file_objects(store)) == []
    assert section(state)["positions"] == {"rowid": 300}
    assert [e for e in read_log(state, "im") if e["event"] == "cursor.start_now"]
    imessage_samples.append(db, 20, seed=7)
    assert run_cli("poll", "im", config=config).returncode == 0
    guids = db_guids(db)
    assert sorted(stored_ids(file_objects(store))) == sorted(g for r, g in guids.items() if r > 300)
    live = section(state)["cursor"]
    proc = run_cli("backfill", "im", "--json", config=config)
    assert proc.returncode == 0, proc.stderr
    result = summary(proc)
    assert (result["new"], result["dup"], result["failed"]) == (300, 20, 0)
    assert sorted(stored_ids(file_objects(store))) == sorted(guids.values())
    assert section(state)["cursor"] == live  # backfill never moves the live cursor
    events = [e["event"] for e in read_log(state, "im")]
    assert events.count("poll") == 2 and "backfill.finished" in events  # backfill never logs a "poll" (the dashboard's live polls)


# -- interrupt and resume ----------------------------------------------------------------------------------------------


def test_sigint_mid_run_then_rerun_stores_everything_exactly_once_from_the_checkpoint(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, proxy: FaultProxy
) -> None:
    """SIGINT stops a running backfill (exit 130, checkpoint saved); the same command continues from it, exactly once.

    The backfill is held at its 100th message (a test hold) when the signal is sent, so it is in progress whatever
    the machine's speed.
    """
    total = 800
    db = build_db(tmp_path / "chat.db", total)
    config = s3_config(tmp_path, db, s3_bucket, proxy.url)
    state = tmp_path / "state"
    gate = Gate(tmp_path, 100)
    proc = popen_cli(config, "backfill", "im", "--workers", "2", "--json", env=gate.env())
    out, err = interrupt_when(proc, lambda: gate.wait_held(proc), "the backfill to hold its 100th message")
    assert proc.returncode == 130, err
    first = json.loads(out)
    assert first["status"] == "stopped" and 0 < first["new"] < total
    stopped = section(state)["backfill"]
    assert stopped["status"] == "stopped"
    assert stopped["positions"] == first["checkpoint"]
    # Everything up to the checkpoint is stored (the checkpoint never passes a missing message).
    guids = db_guids(db)
    stored = set(stored_ids(s3_objects(s3_endpoint, s3_bucket, f"{PREFIX}/messages/")))
    assert all(guids[r] in stored for r in range(1, first["checkpoint"]["rowid"] + 1))
    assert "cursor" not in section(state)  # the live cursor was never written

    # Other options than the stopped run's are refused, clearly, until --restart.
    other = run_cli("backfill", "im", "--since", "2016-01-01", config=config)
    assert other.returncode == 2
    assert "run it again with the same options" in other.stderr and len(other.stderr.strip().splitlines()) == 1

    proxy.delay = 0.0
    again = run_cli("backfill", "im", "--workers", "2", "--json", config=config)
    assert again.returncode == 0, again.stderr
    second = summary(again)
    assert second["resumed_from"] == first["checkpoint"]
    assert first["new"] + second["new"] == total  # every message created exactly once over the two runs
    assert second["dup"] == first["new"] - first["checkpoint"]["rowid"]  # only what was stored past the checkpoint repeats
    assert second["dup"] <= 2  # no more than the uploads in flight; not a restart from zero
    ids = stored_ids(s3_objects(s3_endpoint, s3_bucket, f"{PREFIX}/messages/"))
    assert sorted(ids) == sorted(guids.values())


# -- beside cron -------------------------------------------------------------------------------------------------------


def test_backfill_beside_repeated_cron_polls_loses_nothing_and_keeps_the_live_cursor(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, proxy: FaultProxy
) -> None:
    """Polls of the same source run (real processes) during a backfill while messages arrive: all stored once, cursor monotonic.

    The backfill is held at its 200th message (a test hold) until two polls have run beside it, so they provably
    overlap it whatever the machine's speed; more polls follow while it finishes.
    """
    db = build_db(tmp_path / "chat.db", 600)
    config = s3_config(tmp_path, db, s3_bucket, proxy.url, start="now")  # cron takes what is new, backfill the history
    state = tmp_path / "state"
    gate = Gate(tmp_path, 200)
    proc = popen_cli(config, "backfill", "im", "--workers", "3", "--json", env=gate.env())
    cursors: list[int] = []
    polls = overlapped = 0
    try:
        gate.wait_held(proc)
        seed = 100
        while proc.poll() is None or polls < 4:
            if polls == 2:
                gate.open()
            imessage_samples.append(db, 10, seed=seed)
            seed += 1
            poll = run_cli("poll", "im", "--max-seconds", "120", config=config)
            assert poll.returncode == 0, poll.stderr
            polls += 1
            overlapped += proc.poll() is None
            cursors.append(section(state)["positions"]["rowid"])
        out, err = proc.communicate(timeout=CLI_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert run_cli("poll", "im", config=config).returncode == 0  # catch up with the last appended messages
    cursors.append(section(state)["positions"]["rowid"])
    assert overlapped >= 2  # at least the two polls during the hold ran whole while the backfill did
    assert cursors == sorted(cursors)  # the live cursor only ever moved forward
    guids = db_guids(db)
    assert cursors[-1] == max(guids)
    ids = stored_ids(s3_objects(s3_endpoint, s3_bucket, f"{PREFIX}/messages/"))
    assert sorted(ids) == sorted(guids.values())
    created = sum(e["new"] for e in read_log(state, "im") if e["event"] == "poll") + json.loads(out)["new"]
    assert created == len(guids)  # each message was created exactly once, by one of them
    sec = section(state)
    assert sec["backfill"]["status"] == "done" and sec["cursor"]["rowid"] == cursors[-1]


def test_second_backfill_refuses_and_backfill_ignores_the_poll_lock(tmp_path: Path) -> None:
    """A held backfill lock refuses a second backfill (exit 1, one line); a held poll lock does not stop a backfill."""
    db = build_db(tmp_path / "chat.db", 50)
    config = file_config(tmp_path, db)
    locks = tmp_path / "state" / "locks"
    locks.mkdir(parents=True)
    with RunLock(locks / "im.backfill.lock"):
        proc = run_cli("backfill", "im", config=config)
    assert proc.returncode == 1
    assert "another backfill of 'im' is running" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert stored_ids(file_objects(tmp_path / "store")) == []
    with RunLock(locks / "im.poll.lock"):
        proc = run_cli("backfill", "im", "--json", config=config)
    assert proc.returncode == 0, proc.stderr
    assert summary(proc)["new"] == 50


# -- ranges ------------------------------------------------------------------------------------------------------------


def test_since_until_bounds_are_exact_across_second_and_nanosecond_dates(tmp_path: Path) -> None:
    """--since is inclusive, --until exclusive, in a table mixing second (pre-2018 sample) and nanosecond dates."""
    db = build_db(tmp_path / "chat.db", 1500, start=datetime(2017, 12, 31, 6, tzinfo=UTC))
    since, until = datetime(2017, 12, 31, 18, tzinfo=UTC), datetime(2018, 1, 1, 6, tzinfo=UTC)
    edges = {
        "EDGE-AT-SINCE": int(apple_nanoseconds(since) // 1_000_000_000),  # seconds, exactly at since: in
        "EDGE-BEFORE-SINCE": int(apple_nanoseconds(since) // 1_000_000_000) - 1,  # out
        "EDGE-AT-UNTIL": apple_nanoseconds(until),  # nanoseconds, exactly at until: out
        "EDGE-NS-BEFORE-UNTIL": apple_nanoseconds(until) - 1,  # in
    }
    with sqlite3.connect(db) as conn:
        for guid, date in edges.items():
            conn.execute("INSERT INTO message(guid, text, date, service) VALUES (?, 'x', ?, 'iMessage')", (guid, date))
        rows = conn.execute("SELECT guid, date FROM message").fetchall()
    expected = sorted(g for g, d in rows if (t := apple_time(d)) is not None and since <= t < until)
    assert "EDGE-AT-SINCE" in expected and "EDGE-NS-BEFORE-UNTIL" in expected
    assert {"EDGE-AT-UNTIL", "EDGE-BEFORE-SINCE"}.isdisjoint(expected)
    assert 100 < len(expected) < len(rows) - 100
    config = file_config(tmp_path, db)
    proc = run_cli("backfill", "im", "--since", "2017-12-31T18:00:00Z", "--until", "2018-01-01T07:00:00+01:00", "--json", config=config)
    assert proc.returncode == 0, proc.stderr
    assert sorted(stored_ids(file_objects(tmp_path / "store"))) == expected
    assert summary(proc)["new"] == len(expected)


def test_bad_ranges_are_usage_errors(tmp_path: Path) -> None:
    """--since not before --until, or a date that is not one, exits 2 with one line and stores nothing."""
    config = file_config(tmp_path, build_db(tmp_path / "chat.db", 10))
    for args in (["--since", "2020-01-02", "--until", "2020-01-01"], ["--since", "2020-01-01", "--until", "2020-01-01"],
                 ["--since", "last tuesday"]):  # fmt: skip
        proc = run_cli("backfill", "im", *args, config=config)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr
    assert stored_ids(file_objects(tmp_path / "store")) == []


# -- rewrite -----------------------------------------------------------------------------------------------------------


def test_rewrite_replaces_a_changed_record_and_plain_backfill_does_not(tmp_path: Path) -> None:
    """After a record changes at the source, plain backfill skips it as a duplicate; --rewrite replaces just that one."""
    db = build_db(tmp_path / "chat.db", 200)
    config = file_config(tmp_path, db)
    store = tmp_path / "store"
    assert run_cli("backfill", "im", config=config).returncode == 0
    guids = db_guids(db)
    key = next(k for k in file_objects(store) if json.loads(file_objects(store)[k])["native_id"] == guids[7])
    before = file_objects(store)[key]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE message SET text = 'corrected words', attributedBody = NULL WHERE ROWID = 7")

    plain = run_cli("backfill", "im", "--restart", "--json", config=config)
    assert plain.returncode == 0, plain.stderr
    assert (summary(plain)["dup"], summary(plain)["rewritten"], summary(plain)["new"]) == (200, 0, 0)
    assert digest(file_objects(store)[key]) == digest(before)

    rewrite = run_cli("backfill", "im", "--rewrite", "--json", config=config)
    assert rewrite.returncode == 0, rewrite.stderr
    result = summary(rewrite)
    assert (result["rewritten"], result["dup"], result["new"]) == (1, 199, 0)
    after = file_objects(store)[key]
    assert digest(after) != digest(before)
    assert json.loads(after)["text"] == "corrected words"


# -- S3 failures -------------------------------------------------------------------------------------------------------


def test_failed_uploads_are_reported_and_the_checkpoint_stops_before_the_first(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, proxy: FaultProxy
) -> None:
    """PUTs refused for three messages: exit 1, three failures, checkpoint just before the first; a rerun stores them."""
    total = 400
    db = build_db(tmp_path / "chat.db", total)
    guids = db_guids(db)
    bad = {guids[100], guids[150], guids[333]}
    proxy.rule = lambda method, key: "403" if method == "PUT" and any(g in key for g in bad) else None
    config = s3_config(tmp_path, db, s3_bucket, proxy.url)
    state = tmp_path / "state"
    proc = run_cli("backfill", "im", "--workers", "4", "--retry-delay", "0.05", "--json", config=config)
    assert proc.returncode == 1, proc.stderr
    first = summary(proc)
    assert first["status"] == "failed" and first["failed"] == 3 and first["new"] == total - 3
    assert first["checkpoint"] == {"rowid": 99}  # every message before the first failure, and none after it
    assert section(state)["backfill"]["positions"] == {"rowid": 99}
    failures = [e for e in read_log(state, "im") if e["event"] == "backfill.item_failed"]
    assert sorted(e["native_id"] for e in failures) == sorted(bad)
    assert len([f for f in proxy.faults if f[0] == "403"]) == 3 * 4  # each tried 1 + 3 times by our retry layer
    assert "3 message(s) could not be stored" in first["error"]

    proxy.rule = lambda _m, _k: None
    again = run_cli("backfill", "im", "--workers", "4", "--json", config=config)
    assert again.returncode == 0, again.stderr
    second = summary(again)
    assert second["resumed_from"] == {"rowid": 99}
    assert (second["new"], second["dup"]) == (3, total - 99 - 3)
    assert sorted(stored_ids(s3_objects(s3_endpoint, s3_bucket, f"{PREFIX}/messages/"))) == sorted(guids.values())


def test_transient_s3_errors_and_dropped_connections_are_retried(
    tmp_path: Path, s3_endpoint: str, s3_bucket: str, proxy: FaultProxy
) -> None:
    """503s, dropped connections and a key refused twice are retried (botocore's and ours): all stored, nothing failed."""
    db = build_db(tmp_path / "chat.db", 300)
    guids = db_guids(db)
    flaky = {guids[r]: kind for r, kind in ((20, "503"), (60, "close"), (120, "500"), (240, "close"))}
    refused_twice = guids[200]
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def rule(method: str, key: str) -> str | None:
        if method != "PUT":
            return None
        for guid, kind in [*flaky.items(), (refused_twice, "403")]:
            if guid in key:
                with lock:
                    seen[guid] = seen.get(guid, 0) + 1
                    n = seen[guid]
                if guid == refused_twice:
                    return "403" if n <= 2 else None
                return kind if n == 1 else None
        return None

    proxy.rule = rule
    config = s3_config(tmp_path, db, s3_bucket, proxy.url)
    proc = run_cli("backfill", "im", "--workers", "4", "--json", config=config)
    assert proc.returncode == 0, proc.stderr
    result = summary(proc)
    assert (result["new"], result["failed"], result["checkpoint"]) == (300, 0, {"rowid": 300})
    assert sorted(f[0] for f in proxy.faults) == sorted(["403", "403", "503", "500", "close", "close"])
    assert sorted(stored_ids(s3_objects(s3_endpoint, s3_bucket, f"{PREFIX}/messages/"))) == sorted(guids.values())
