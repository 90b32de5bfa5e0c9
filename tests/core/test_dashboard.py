"""The dashboard rendered headlessly to text, its start-up cost on a big log, incremental reads, and quitting the live view."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from memex import config as config_mod
from memex.observe.dashboard import Dashboard, render_text, screen_text, sparkline
from memex.observe.logs import source_logger
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, run_cli, write_config


def two_sources(tmp_path: Path) -> Path:
    """Two iMessage sources (30 and 12 messages), each polled once through the CLI; returns the config path."""
    sources = {}
    for name, count in (("phone", 30), ("laptop", 12)):
        db = tmp_path / f"{name}.db"
        imessage_samples.build(db, count, seed=count)
        sources[name] = {"type": "imessage", "db": str(db)}
    cfg = write_config(tmp_path, sources)
    assert run_cli("poll", "--all", config=cfg).returncode == 0
    return cfg


def test_render_rows_and_merged_tail(tmp_path: Path) -> None:
    """After real polls, the text screen has a row per source with state, cursor, counts, and the merged poll lines."""
    cfg_path = two_sources(tmp_path)
    assert run_cli("poll", "phone", config=cfg_path).returncode == 0  # an idle poll
    text = render_text(config_mod.load(cfg_path), width=200)
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")}
    assert set(rows) == {"phone", "laptop"}
    _source, state, cursor, _last, _ok, counts, hour, day, spark, error = rows["phone"]
    assert (state, cursor, counts, hour, day, error) == ("IDLE", "30", "0/0", "30", "30", "")
    assert spark.endswith("█") and len(spark) == 24
    assert rows["laptop"][1:3] == ["OK", "12"] and rows["laptop"][5] == "12/0"
    tail = text.split("latest polls")[1]
    assert "phone: poll ok: 30 new (cursor - -> 30)" in tail and "laptop: poll ok: 12 new (cursor - -> 12)" in tail
    assert tail.index("phone: poll ok") < tail.index("phone: poll idle")


def test_dashboard_once_cli_shows_failing_and_stuck_notes(tmp_path: Path) -> None:
    """memex dashboard --once prints the screen; a failing source shows its error and, after three failures, FAILING."""
    cfg_path = two_sources(tmp_path)
    (tmp_path / "laptop.db").unlink()
    for _ in range(3):
        assert run_cli("poll", "laptop", config=cfg_path).returncode == 1
    out = run_cli("dashboard", "--once", "--width", "220", config=cfg_path)
    assert out.returncode == 0, out.stderr
    laptop = next(line for line in out.stdout.splitlines() if line.startswith("│laptop"))
    assert "FAILING" in laptop and str(tmp_path)[:20] in laptop  # the last error's start, clipped to the column
    note = next(line for line in out.stdout.splitlines() if line.startswith("laptop: FAILING: the last 3 polls failed"))
    assert "laptop.db" in note


def fake_poll(t: float, n: int) -> str:
    """A poll line at Unix time ``t``."""
    ts = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({
        "event": "poll", "source": "big", "status": "ok", "new": 1, "dup": 0, "quarantined": 0, "cursor_before": str(n),
        "cursor_after": str(n + 1), "positions_before": {"rowid": n}, "positions_after": {"rowid": n + 1}, "duration_ms": 30,
        "level": "info", "ts": ts,
    }) + "\n"  # fmt: skip


def test_starts_from_the_end_of_a_big_log(tmp_path: Path) -> None:
    """On ~40 MB of logs (months of polls), the dashboard reads only the last day's lines: bytes read is a small fraction."""
    cfg = config_mod.load(write_config(tmp_path, {"big": {"type": "imessage", "db": "x.db"}}))
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)
    minutes = 120 * 24 * 60
    start = time.time() - 120 * 86400
    now = start + 60 * minutes - 30  # half a minute after the newest poll
    with open(logs / "big.jsonl", "w") as f:
        # ~170k one-minute polls over 120 days; the last 24 h are the last 1440 lines.
        f.writelines(fake_poll(start + 60 * i, i) for i in range(minutes))
    size = (logs / "big.jsonl").stat().st_size
    board = Dashboard(cfg, now=now)
    try:
        assert size > 40_000_000
        # A day and an hour of lines (the health horizon) plus one 64 KiB block of slack, not the whole file.
        assert board.bytes_read < 26 * 60 * 400 + 65536
        assert board.lines_parsed < 26 * 60 + 400
        row = board.row(board.views["big"], now)
        assert (row.state, row.hour, row.day) == ("OK", 60, 1440)
    finally:
        board.close()


def test_incremental_reads_follow_rotation(tmp_path: Path) -> None:
    """After start-up only appended bytes are read; events written across several rotations all arrive, once."""
    cfg = config_mod.load(write_config(tmp_path, {"s": {"type": "imessage", "db": "x.db"}}, log_max_bytes=4096, log_backups=3))
    log = source_logger(cfg.state_dir, "s", max_bytes=cfg.log_max_bytes, backups=cfg.log_backups)
    log.info("poll", status="ok", new=1, dup=0, cursor_before="0", cursor_after="1", positions_before={}, positions_after={"rowid": 1})
    board = Dashboard(cfg)
    try:
        before = board.bytes_read
        total = 0
        for i in range(1, 121):
            log.info("poll", status="ok", new=1, dup=0, cursor_before=str(i), cursor_after=str(i + 1),
                     positions_before={"rowid": i}, positions_after={"rowid": i + 1})  # fmt: skip
            if i % 10 == 0:
                total += board.read_new()
        assert total == 120
        assert len(list((tmp_path / "state" / "logs").glob("s.jsonl.*"))) == 3
        appended = board.bytes_read - before
        assert appended < 120 * 400  # only the new lines, never the whole log again
        assert [e["cursor_after"] for e in board.views["s"].events][-3:] == ["119", "120", "121"]
        screen = screen_text(board, width=200)
        assert "s: poll ok: 1 new (cursor 120 -> 121)" in screen
    finally:
        board.close()


def test_sparkline_scales_to_the_busiest_hour() -> None:
    """Zero hours are the lowest bar, any activity at least the second, the busiest hour the full bar."""
    assert sparkline([0, 1, 8]) == "▁▂█"  # a quiet hour still shows above zero
    assert sparkline([0, 0]) == "▁▁"


def _live(cfg: Path) -> tuple[int, int]:
    """Start `memex dashboard` on a pseudo-terminal; return (pid, master fd)."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.chdir(ROOT)
        os.environ["PYTHONFAULTHANDLER"] = "1"  # SIGABRT dumps every thread's stack: what a hung dashboard was doing
        # As in a user's terminal, Ctrl-C must reach it: a test run started in the background (``&``, nohup, CI
        # runners) inherits SIGINT ignored, and Python then never installs KeyboardInterrupt: the flake hunt's hang.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execv(sys.executable, [sys.executable, "-m", "memex", "--config", str(cfg), "dashboard"])
    return pid, fd


def _read_until(fd: int, marker: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, "dashboard did not draw its screen in time"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


def test_live_dashboard_quits_on_q_and_on_ctrl_c(tmp_path: Path) -> None:
    """In a terminal, q quits with exit 0, and so does Ctrl-C (SIGINT), after drawing the screen."""
    cfg = two_sources(tmp_path)
    for action in ("q", "sigint"):
        pid, fd = _live(cfg)
        try:
            _read_until(fd, b"latest polls", 30)
            if action == "q":
                os.write(fd, b"q")
            else:
                os.kill(pid, signal.SIGINT)
            code = _exit_code_safe(pid, fd)
            assert code == 0, action
        finally:
            os.close(fd)


def _exit_code_safe(pid: int, fd: int) -> int:
    """Wait (with a deadline) for the child, draining its terminal output so it never blocks on a full pty."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                pass
    os.kill(pid, signal.SIGABRT)
    dump = b""
    end = time.monotonic() + 5
    while time.monotonic() < end and not os.waitpid(pid, os.WNOHANG)[0]:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                dump += os.read(fd, 65536)
            except OSError:
                break
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    stacks = dump.decode(errors="replace")
    raise AssertionError("dashboard did not exit within 30 s; its threads:\n" + stacks[stacks.find("Fatal Python") :][-4000:])
