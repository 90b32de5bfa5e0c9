"""memex tail and the log follower: every line exactly once, across rotation, with real writer processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from memex.observe.follow import Follower
from memex.observe.logs import SourceSink
from tests.conftest import ROOT, wait_until, write_config

WRITER = """
import sys
from pathlib import Path
from memex.observe.logs import source_logger
state, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
log = source_logger(state, "imessage", max_bytes=4096, backups=500)
for i in range(count):
    log.info("poll", status="ok", new=1, dup=0, quarantined=0, cursor_before=str(i), cursor_after=str(i + 1),
             positions_before={"rowid": i}, positions_after={"rowid": i + 1}, duration_ms=1, writer=tag, seq=i)
"""


def naive_follow(path: Path, state: dict[str, object]) -> list[bytes]:
    """A follower that reopens the path as soon as its inode changes (what tail -F does without care)."""
    out: list[bytes] = []
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return out
    if state.get("ino") != st.st_ino:
        state["ino"], state["off"] = st.st_ino, 0
    with open(path, "rb") as f:
        f.seek(int(state.get("off", 0)))  # type: ignore[call-overload]
        data = f.read()
    state["off"] = int(state.get("off", 0)) + len(data)  # type: ignore[call-overload]
    return [line for line in data.split(b"\n") if line]


def test_follower_finishes_the_old_file_before_switching(tmp_path: Path) -> None:
    """Lines appended just before a rotation are read from the old file; a naive reopen-on-rename follower loses them."""
    path = tmp_path / "logs" / "x.jsonl"
    sink = SourceSink(path, None, False, max_bytes=4096, backups=5)
    good = Follower(path, 5, from_end=False)
    naive_state: dict[str, object] = {}
    seen_good: list[bytes] = []
    seen_naive: list[bytes] = []
    n = 0
    for _round in range(40):
        for _ in range(7):
            sink.info(event="poll", seq=n, pad="x" * 100)
            n += 1
        seen_good += good.read()
        seen_naive += naive_follow(path, naive_state)
    seen_good += good.read()
    seen_naive += naive_follow(path, naive_state)
    assert [json.loads(x)["seq"] for x in seen_good] == list(range(n))
    assert len(list(path.parent.glob("x.jsonl.*"))) == 5  # it did rotate, and kept only 5 old files
    assert len(seen_naive) < n  # the naive follower misses the lines written between its read and the rename


def test_follower_handles_truncation(tmp_path: Path) -> None:
    """A log truncated in place (copytruncate) is read again from its start."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"seq": 1}\n{"seq": 2}\n')
    f = Follower(path, 5, from_end=False)
    assert len(f.read()) == 2
    with open(path, "r+b") as fh:
        fh.truncate(0)
    with open(path, "ab") as fh:
        fh.write(b'{"seq": 3}\n')
    assert [json.loads(x)["seq"] for x in f.read()] == [3]


def test_tail_follows_two_writer_processes_through_rotations(tmp_path: Path) -> None:
    """memex tail -f --json sees every line of two concurrent writer processes exactly once while the log rotates ~100 times."""
    state = tmp_path / "state"
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": "x.db"}}, log_max_bytes=4096, log_backups=500)
    (state / "logs").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    count = 1500
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(state), tag, str(count)], cwd=ROOT, env=env) for tag in ("poll", "backfill")
    ]
    # Started while the writers write and rotate: what came before is printed as history, the rest followed; -n covers it all.
    tail = subprocess.Popen(
        [sys.executable, "-m", "memex", "--config", str(cfg), "tail", "-f", "-n", "100000", "--json", "imessage"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env,
    )  # fmt: skip
    lines: list[bytes] = []

    def reader() -> None:
        assert tail.stdout is not None
        for line in tail.stdout:
            lines.append(line)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        for w in writers:
            assert w.wait(timeout=120) == 0
        last = SourceSink(state / "logs" / "imessage.jsonl", None, False, max_bytes=4096, backups=500)
        last.info(event="poll", status="idle", writer="probe", seq=0)  # written after tail surely started following
        wait_until(lambda: any(b'"probe"' in x for x in lines), 60, "tail -f to print the last line")
        wait_until(lambda: len(lines) >= 1 + 2 * count, 10, "tail -f to print every line")
    finally:
        tail.terminate()
        tail.wait(timeout=30)
    events = [json.loads(x) for x in lines]
    seen = sorted((e["writer"], e["seq"]) for e in events)
    expected = sorted([("probe", 0)] + [(tag, i) for tag in ("poll", "backfill") for i in range(count)])
    assert seen == expected  # every line exactly once
    rotated = list((state / "logs").glob("imessage.jsonl.*"))
    assert len(rotated) > 50
    on_disk = sum(len(p.read_bytes().splitlines()) for p in (state / "logs").glob("imessage.jsonl*"))
    assert on_disk == 1 + 2 * count  # no double rotation dropped a file
    assert all(p.stat().st_size <= 4096 + 1024 for p in rotated)  # concurrent appends may each add a line past the limit


def test_tail_last_lines_merged_and_formatted(tmp_path: Path) -> None:
    """Without -f, tail prints the last N shown lines of the named sources merged by time, reaching into a rotated file."""
    cfg = write_config(tmp_path, {"a": {"type": "imessage", "db": "a.db"}, "b": {"type": "imessage", "db": "b.db"}})
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)

    def ev(source: str, minute: int, **kw: object) -> str:
        base = {"event": "poll", "source": source, "status": "ok", "new": minute, "dup": 0, "cursor_before": "1", "cursor_after": "2"}
        return json.dumps({**base, "level": "info", "ts": f"2026-11-01T12:{minute:02d}:00.000000Z", **kw}) + "\n"

    (logs / "a.jsonl.1").write_text(ev("a", 1) + ev("a", 3))
    (logs / "a.jsonl").write_text("")
    (logs / "b.jsonl").write_text(
        ev("b", 2) + json.dumps({"event": "debugish", "level": "info", "ts": "2026-11-01T12:05:00Z"}) + "\n" + ev("b", 4)
    )
    out = subprocess.run(
        [sys.executable, "-m", "memex", "--config", str(cfg), "tail", "-n", "3"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "2026-11-01 12:02:00Z b: poll ok: 2 new (cursor 1 -> 2)",
        "2026-11-01 12:03:00Z a: poll ok: 3 new (cursor 1 -> 2)",
        "2026-11-01 12:04:00Z b: poll ok: 4 new (cursor 1 -> 2)",
    ]
    out = subprocess.run(
        [sys.executable, "-m", "memex", "--config", str(cfg), "tail", "a", "-n", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert json.loads(out.stdout)["new"] == 3
    bad = subprocess.run(
        [sys.executable, "-m", "memex", "--config", str(cfg), "tail", "nope"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert bad.returncode == 2 and "no source named 'nope'" in bad.stderr


def test_follower_started_before_the_log_existed_reads_the_files_rotated_before_its_first_read(tmp_path: Path) -> None:
    """A follower started while there was no log yet reads every line on its first read, even after several rotations.

    This was the flaky loss of ``tail -f`` started beside busy writers: the first read opened the live file from 0 and
    never saw the files rotated away before it.
    """
    path = tmp_path / "logs" / "s.jsonl"
    follower = Follower(path, 50, from_end=True)
    assert list(follower.history().lines()) == []
    sink = SourceSink(path, None, False, max_bytes=400, backups=50)
    for seq in range(60):
        sink.info(event="poll", status="idle", seq=seq)
    assert len(list(path.parent.glob("s.jsonl.*"))) > 3
    seen = [json.loads(x)["seq"] for x in follower.read()]
    assert seen == list(range(60))
    follower.close()


def test_follower_started_right_after_a_rotation_splits_history_and_follow_exactly(tmp_path: Path) -> None:
    """Started between a rotation and the next append (no live file, ``.1`` there), history has the old lines and reads the new ones, once each."""
    path = tmp_path / "logs" / "s.jsonl"
    sink = SourceSink(path, None, False, max_bytes=400, backups=50)
    for seq in range(20):
        sink.info(event="poll", status="idle", seq=seq)
    os.replace(path, path.with_name("s.jsonl.tmp"))  # make room: shift by hand as a rotation does
    for index in range(50, 0, -1):
        older = path.with_name(f"s.jsonl.{index}")
        if older.exists():
            os.replace(older, path.with_name(f"s.jsonl.{index + 1}"))
    os.replace(path.with_name("s.jsonl.tmp"), path.with_name("s.jsonl.1"))
    follower = Follower(path, 50, from_end=True)
    history = [json.loads(x)["seq"] for x in follower.history().lines()]
    for seq in range(20, 30):
        sink.info(event="poll", status="idle", seq=seq)
    followed = [json.loads(x)["seq"] for x in follower.read()]
    assert sorted(history) == list(range(20)) and followed == list(range(20, 30))
    follower.close()


def test_history_reads_past_the_hole_a_rotation_in_progress_leaves(tmp_path: Path) -> None:
    """Mid-rotation ``.1`` is missing while ``.2`` and ``.3`` are there: reading history goes on past the hole (it stopped there)."""
    from memex.observe.follow import RecentReader

    logs = tmp_path / "logs"
    logs.mkdir()
    for name, seq in (("s.jsonl", 3), ("s.jsonl.2", 2), ("s.jsonl.3", 1)):
        (logs / name).write_text(json.dumps({"event": "poll", "seq": seq}) + "\n")
    assert [json.loads(x)["seq"] for x in RecentReader(logs / "s.jsonl", 5).lines()] == [3, 2, 1]


def test_history_read_while_two_rotations_happen_repeats_no_newer_file(tmp_path: Path) -> None:
    """Two rotations while history reads the follower's file move a newer file past it: history must not read it.

    History reads the live file (the follower's) from its end; a writer then rotates twice, so that file is at
    ``.2`` and the newer one at ``.1``. Going on at the next name printed ``.1``'s lines twice (history and follow,
    a busy flake-hunt round); the next file is the one after the file read last, wherever it is now.
    """
    path = tmp_path / "logs" / "s.jsonl"
    sink = SourceSink(path, None, False, max_bytes=400, backups=50)
    seq = 0

    def write_until_rotated(times: int) -> None:
        nonlocal seq
        for _ in range(times):
            first = os.stat(path).st_ino if path.exists() else None
            while not path.exists() or os.stat(path).st_ino == first:
                sink.info(event="poll", status="idle", seq=seq)
                seq += 1

    write_until_rotated(3)  # older files to read after the live one
    sink.info(event="poll", status="idle", seq=seq)
    seq += 1
    follower = Follower(path, 50, from_end=True)
    lines = follower.history().lines()
    history = [json.loads(next(lines))["seq"]]  # reading the follower's file now
    write_until_rotated(2)
    history += [json.loads(x)["seq"] for x in lines]
    followed = [json.loads(x)["seq"] for x in follower.read()]
    follower.close()
    assert sorted(history + followed) == list(range(seq))  # every line once
    assert max(history) < min(followed)
