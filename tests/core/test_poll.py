"""End to end through the CLI: polls into a file store and a real S3 endpoint, overlap, crashes, signals, bad state."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memex import config as config_mod
from memex import registry, runner
from pollers.imessage import samples as imessage_samples
from tests.conftest import FaultProxy, Gate, file_objects, put_fault, read_log, run_cli, s3_objects, write_config


def imessage_setup(tmp_path: Path, count: int, store: dict[str, str] | None = None, seed: int = 1) -> tuple[Path, Path]:
    """A sample chat.db with ``count`` messages and a config for it; returns (config, db)."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, count, seed=seed)
    return write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, store=store), db


def guids(db: Path) -> set[str]:
    """Every guid in a chat.db."""
    conn = sqlite3.connect(db)
    try:
        return {g for (g,) in conn.execute("SELECT guid FROM message")}
    finally:
        conn.close()


def test_poll_into_file_store_then_idle(tmp_path: Path) -> None:
    """First poll stores every message and advances the cursor; the next poll is idle and writes nothing."""
    cfg, db = imessage_setup(tmp_path, 1200)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""  # off a terminal, success is silent (cron mails only problems)
    state = tmp_path / "state"
    objects = file_objects(state / "store")
    assert {json.loads(b)["native_id"] for b in objects.values()} == guids(db)
    cursor_bytes = (state / "cursors.json").read_bytes()
    assert json.loads(cursor_bytes)["sources"]["imessage"]["cursor"]["rowid"] == 1200
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0
    assert (state / "cursors.json").read_bytes() == cursor_bytes
    last = read_log(state, "imessage")[-1]
    assert {k: last[k] for k in ("event", "status", "new", "dup", "cursor_before", "cursor_after")} == {
        "event": "poll", "status": "idle", "new": 0, "dup": 0, "cursor_before": "1200", "cursor_after": "1200"
    }  # fmt: skip


def test_poll_into_s3_over_http(tmp_path: Path, any_s3: tuple[str, str]) -> None:
    """Messages land as one object each under <prefix>/messages/<source>/ on a real S3 endpoint."""
    s3_endpoint, s3_bucket = any_s3  # moto, then SeaweedFS
    cfg, db = imessage_setup(tmp_path, 300, store={"url": f"s3://{s3_bucket}/me", "endpoint_url": s3_endpoint})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    objects = s3_objects(s3_endpoint, s3_bucket)
    assert all(k.startswith("me/messages/imessage/") and k.endswith(".json") for k in objects)
    assert {json.loads(b)["native_id"] for b in objects.values()} == guids(db)
    run_cli("cursor", "reset", "imessage", "--yes", config=cfg)
    out = run_cli("poll", "imessage", config=cfg)
    last = read_log(tmp_path / "state", "imessage")[-1]
    assert (last["new"], last["dup"]) == (0, 300)  # a full replay is absorbed by If-None-Match
    assert s3_objects(s3_endpoint, s3_bucket) == objects


def test_idle_poll_makes_no_s3_request_and_imports_no_boto3(tmp_path: Path) -> None:
    """With nothing new, a poll against an unreachable S3 endpoint still succeeds, and boto3 is never imported."""
    port_that_refuses = "http://127.0.0.1:9"
    cfg, _ = imessage_setup(tmp_path, 5)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    text = cfg.read_text().replace(
        "[sources.imessage]", f'[store]\nurl = "s3://nowhere/x"\nendpoint_url = "{port_that_refuses}"\n[sources.imessage]'
    )
    cfg.write_text(text)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memex", "--config", str(cfg), "poll", "imessage"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "boto3" not in imported and "botocore" not in imported
    assert read_log(tmp_path / "state", "imessage")[-1]["status"] == "idle"


# Imports an idle cron poll has no use for, each once a large part of its start-up (issue 25: ≤ 3x `python -c pass`):
# click (the entry parses a plain poll itself), structlog and the asyncio it pulls in (memex.observe.logs), inspect
# (memex.lean_import: dataclasses imports it for what memex never asks of it), and
# what only storing a message needs (hashing, file copies, tracebacks, random names, iMessage edit plists).
IDLE_POLL_NEVER_IMPORTS = frozenset(
    {
        "click",
        "structlog",
        "asyncio",
        "inspect",
        "hashlib",
        "shutil",
        "secrets",
        "traceback",
        "plistlib",
        "fastjsonschema",
        "memex.search.index",
        "memex.search.build",
        "mcp",  # the MCP SDK: only `memex mcp` imports it
        "memex.assistant.server",
        "memex.web",  # `memex serve` and its extra: only that command imports them
        "starlette",
        "uvicorn",
        "jinja2",
        "nh3",
        "memex.lake",  # the lake (memex lake, memex sql) and what it needs: only those commands import them
        "deltalake",
        "pyarrow",
        "duckdb",
    }
)


def test_an_idle_poll_imports_neither_click_nor_structlog_nor_what_storing_needs(tmp_path: Path) -> None:
    """An idle ``memex poll`` (the cron command line) imports none of IDLE_POLL_NEVER_IMPORTS, and still logs its line."""
    cfg, _ = imessage_setup(tmp_path, 5)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memex", "--config", str(cfg), "poll", "imessage", "--max-seconds", "50"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "memex.runner" in imported  # the poll did run
    assert not imported & IDLE_POLL_NEVER_IMPORTS
    last = read_log(tmp_path / "state", "imessage")[-1]
    assert (last["event"], last["status"], last["level"], last["source"]) == ("poll", "idle", "info", "imessage")


def test_unreachable_s3_fails_clearly_and_keeps_the_cursor(tmp_path: Path) -> None:
    """New messages and a dead S3 endpoint: exit 1, one line naming the bucket and key, cursor not moved."""
    cfg, _ = imessage_setup(tmp_path, 5, store={"url": "s3://nowhere/x", "endpoint_url": "http://127.0.0.1:9"})
    out = run_cli("poll", "imessage", config=cfg, env={"AWS_MAX_ATTEMPTS": "1"})
    assert out.returncode == 1
    assert "s3://nowhere/x/messages/imessage/" in out.stderr and "upload failed" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "state" / "cursors.json").exists()


def test_upload_failure_mid_batch_stops_the_cursor_before_it(tmp_path: Path, s3_endpoint: str, s3_bucket: str, proxy: FaultProxy) -> None:
    """S3 answers 500 from the 40th PUT on: the cursor covers exactly the stored prefix, and the rerun completes."""
    proxy.rule = put_fault(proxy, lambda n: n >= 40)
    cfg, db = imessage_setup(tmp_path, 100, store={"url": f"s3://{s3_bucket}/p", "endpoint_url": proxy.url})
    out = run_cli("poll", "imessage", config=cfg, env={"AWS_MAX_ATTEMPTS": "2"})
    assert out.returncode == 1
    assert "upload refused" in out.stderr
    cursor = json.loads((tmp_path / "state" / "cursors.json").read_text())["sources"]["imessage"]["cursor"]
    stored = {json.loads(b)["native_id"] for b in s3_objects(s3_endpoint, s3_bucket).values()}
    conn = sqlite3.connect(db)
    upto = {g for (g,) in conn.execute("SELECT guid FROM message WHERE ROWID <= ?", (cursor["rowid"],))}
    conn.close()
    assert cursor["rowid"] == 39 and upto <= stored  # never past a message that is not stored
    proxy.rule = lambda _m, _k: None
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert {json.loads(b)["native_id"] for b in s3_objects(s3_endpoint, s3_bucket).values()} == guids(db)


HOLD_LOCK = """
import sys
from pathlib import Path
from memex.state.locks import RunLock
RunLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
sys.stdin.readline()
"""


def test_overlapping_poll_is_skipped_with_the_holders_pid(tmp_path: Path) -> None:
    """While another process holds the source's run lock, a poll logs 'skipped' with that pid and exits 0."""
    cfg, _ = imessage_setup(tmp_path, 5)
    lock = tmp_path / "state" / "locks" / "imessage.poll.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        out = run_cli("poll", "imessage", config=cfg)
        assert out.returncode == 0
        last = read_log(tmp_path / "state", "imessage")[-1]
        assert last["status"] == "skipped" and last["holder_pid"] == holder.pid
        from memex.observe.logs import human_line

        assert human_line(last) == f"imessage: poll skipped: already running (pid {holder.pid})"
    finally:
        holder.kill()
        holder.wait(10)
    assert not (tmp_path / "state" / "store").exists()


@pytest.mark.parametrize("content", [b"{not json", b'{"format": 1, "sources": []}', b""])
def test_corrupt_cursors_file_stops_the_poll_and_is_untouched(tmp_path: Path, content: bytes) -> None:
    """A corrupt cursors.json gives exit 1 and a line naming it; the file is byte-for-byte unchanged and nothing is uploaded."""
    cfg, _ = imessage_setup(tmp_path, 5)
    state = tmp_path / "state"
    state.mkdir()
    (state / "cursors.json").write_bytes(content)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 1
    assert str(state / "cursors.json") in out.stderr
    assert "will not overwrite it" in out.stderr
    assert (state / "cursors.json").read_bytes() == content
    assert file_objects(state / "store") == {}


def test_kill_9_at_random_moments_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    """Polls killed with SIGKILL at random points, then a clean rerun: every message stored once, cursors.json always valid.

    Six polls are held (a test hold) at a random message of what is left, so each is provably mid-poll when it is killed,
    whatever the machine's speed; two more are let go and killed a random moment later (inside a batch, a group commit,
    or not at all if they finished), so kills land at other points too.
    """
    total = 5000
    cfg, db = imessage_setup(tmp_path, total)
    state = tmp_path / "state"
    rng = random.Random(1234)
    kills = 0

    def saved() -> int:
        if not (state / "cursors.json").exists():
            return 0
        doc = json.loads((state / "cursors.json").read_text())  # always whole and valid
        assert doc["format"] == 1
        return int(doc["sources"].get("imessage", {}).get("cursor", {}).get("rowid", 0))

    for round_ in range(8):
        left = total - saved()  # rows after the cursor; a few are not messages, so hold within the first half of them
        if left < 4:
            break
        gate = Gate(tmp_path, rng.randint(1, left // 2), name=f"gate{round_}")
        proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage"], stderr=subprocess.DEVNULL,
                                env=gate.env())  # fmt: skip
        gate.wait_held(proc)
        if round_ >= 6:
            gate.open()
            try:
                proc.wait(timeout=rng.uniform(0.0, 0.3))
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(30)
        saved()
    assert kills >= 6
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    objects = file_objects(state / "store")
    ids = [json.loads(b)["native_id"] for b in objects.values()]
    assert len(ids) == len(set(ids)) and set(ids) == guids(db)
    assert saved() == total


def test_sigterm_stops_after_the_current_message_with_progress_saved(tmp_path: Path) -> None:
    """SIGTERM mid-poll: exit 0, the summary says stopped by signal, the saved cursor covers only stored messages.

    The poll is held at its 150th message (a test hold) when the signal is sent, so it is in progress whatever the
    machine's speed; the message in hand is stored, then the poll stops.
    """
    cfg, db = imessage_setup(tmp_path, 1000)
    state = tmp_path / "state"
    gate = Gate(tmp_path, 150)
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage"], stderr=subprocess.PIPE, text=True,
                            env=gate.env())  # fmt: skip
    gate.wait_held(proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    last = read_log(state, "imessage")[-1]
    assert last["stopped"] == "signal" and last["new"] == 150
    cursor = json.loads((state / "cursors.json").read_text())["sources"]["imessage"]["cursor"]["rowid"]
    assert cursor == last["positions_after"]["rowid"] == last["new"]
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert {json.loads(b)["native_id"] for b in file_objects(state / "store").values()} == guids(db)


def test_max_seconds_bounds_a_run_and_the_next_run_continues(tmp_path: Path) -> None:
    """--max-seconds stops taking new messages; the cursor matches what was stored and the next poll carries on.

    The first poll is held at its 100th message (a test hold) until its time limit passes, so it is cut short
    whatever the machine's speed (a very loaded machine may store fewer before the limit: still cut short).
    """
    cfg, _ = imessage_setup(tmp_path, 1000)
    gate = Gate(tmp_path, 100)
    out = run_cli("poll", "imessage", "--max-seconds", "5", config=cfg, env=gate.env())
    assert out.returncode == 0
    first = read_log(tmp_path / "state", "imessage")[-1]
    assert first["stopped"] == "deadline" and first["new"] <= 100
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    second = read_log(tmp_path / "state", "imessage")[-1]
    assert first["new"] + second["new"] == 1000 and second["dup"] == 0


def test_cursor_set_and_reset_are_explicit_and_logged(tmp_path: Path) -> None:
    """cursor set --yes moves a cursor backward on purpose (it asks otherwise), logged as cursor.set; the re-read shows up as duplicates."""
    cfg, _ = imessage_setup(tmp_path, 50)
    run_cli("poll", "imessage", config=cfg)
    out = run_cli("cursor", "set", "imessage", '{"rowid": 40}', "--yes", config=cfg)
    assert out.returncode == 0 and out.stdout.strip() == "imessage: cursor 50 -> 40"
    out = run_cli("cursor", "show", "imessage", "--json", config=cfg)
    assert json.loads(out.stdout) == {"rowid": 40}
    run_cli("poll", "imessage", config=cfg)
    events = read_log(tmp_path / "state", "imessage")
    assert [e["event"] for e in events] == ["poll", "cursor.set", "poll"]
    assert (events[-1]["new"], events[-1]["dup"]) == (0, 10)
    out = run_cli("cursor", "set", "imessage", "not json", config=cfg)
    assert out.returncode == 2 and "must be JSON" in out.stderr
    out = run_cli("cursor", "reset", "imessage", config=cfg, input="n\n")  # no terminal to ask on: refused, saying to pass --yes
    assert (
        out.returncode == 2
        and "pass --yes" in out.stderr
        and json.loads(run_cli("cursor", "show", "imessage", "--json", config=cfg).stdout)["rowid"] == 50
    )


def test_status_table_and_json(tmp_path: Path) -> None:
    """status shows a row per source; --json gives the same data with stable field names."""
    cfg, _ = imessage_setup(tmp_path, 7)
    run_cli("poll", "imessage", config=cfg)
    out = run_cli("status", config=cfg)
    assert out.returncode == 0
    header, row = out.stdout.splitlines()[:2]
    assert header.split()[:3] == ["SOURCE", "TYPE", "CURSOR"]
    assert row.split()[:3] == ["imessage", "imessage", "7"] and row.endswith("ok: 7 new")
    rows = json.loads(run_cli("status", "--json", config=cfg).stdout)
    assert rows[0]["source"] == "imessage" and rows[0]["cursor"] == "7" and rows[0]["last_status"] == "ok"


def test_no_message_text_in_logs_or_output(tmp_path: Path) -> None:
    """After polls, cursor commands and a status, no fixture message text appears in any log, stdout or stderr."""
    cfg, db = imessage_setup(tmp_path, 300)
    outputs = [run_cli("poll", "imessage", config=cfg), run_cli("status", config=cfg), run_cli("cursor", "show", config=cfg)]
    conn = sqlite3.connect(db)
    texts = [t for (t,) in conn.execute("SELECT text FROM message WHERE text IS NOT NULL AND length(text) > 12")]
    conn.close()
    assert len(texts) > 50
    haystack = "".join(o.stdout + o.stderr for o in outputs)
    haystack += "".join(p.read_text() for p in (tmp_path / "state" / "logs").iterdir())
    haystack += (tmp_path / "state" / "cursors.json").read_text()
    leaked = [t for t in texts if t in haystack]
    assert leaked == [], f"{len(leaked)} message texts leaked"


def test_a_poller_moving_its_cursor_backward_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin that tries to move its cursor back without declaring a reset gets an error; the cursor stays."""
    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"count": 30}))
    cfg = config_mod.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(spec)}}))
    assert runner.poll(cfg, "f").new == 30
    spec.write_text(json.dumps({"count": 30, "backward": True}))
    result = runner.poll(cfg, "f", max_seconds=5)  # bounded: a runner without the check would walk down until its deadline
    assert result.status == "error" and "backward" in (result.error or "")
    assert json.loads((tmp_path / "state" / "cursors.json").read_text())["sources"]["f"]["cursor"] == {"n": 30}


def test_start_now_skips_history(tmp_path: Path) -> None:
    """A source with start = "now" begins at the newest message: history is left for backfill."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 40, seed=2)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db), "start": "now"}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert read_log(tmp_path / "state", "imessage")[-1]["new"] == 0
    imessage_samples.append(db, 3, seed=9)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert read_log(tmp_path / "state", "imessage")[-1]["new"] == 3
