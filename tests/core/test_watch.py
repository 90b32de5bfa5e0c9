"""``memex watch`` as a real process on real folders: a Maildir, a chat.db written by another process, cron beside it."""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, Gate, file_objects, read_log, run_cli, wait_until, write_config
from tests.core.test_poll import HOLD_LOCK
from tests.email.test_maildir import deliver, mail, make_maildir

STOP_WITHIN = 15.0  # seconds a SIGTERMed watcher may take to exit (it takes well under 3 on an idle machine)
STORED_WITHIN = 60.0  # seconds a delivered message may take to be stored (the machine may be loaded)


@contextmanager
def watching(config: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``memex watch ARGS`` as a subprocess (``env``: its environment); killed (after the test's own checks) if still running."""
    env = env or {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    err = (config.parent / "watch.stderr").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), "watch", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        err.close()


def stop(proc: subprocess.Popen[bytes]) -> float:
    """SIGTERM the watcher; assert it exits 0 within :data:`STOP_WITHIN`; return how long it took."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(STOP_WITHIN) == 0
    return time.monotonic() - started


def polls(state: Path, source: str) -> list[dict[str, Any]]:
    """The source's poll lines, oldest first."""
    return [e for e in read_log(state, source) if e["event"] == "poll"]


def started(state: Path, source: str) -> dict[str, Any]:
    """Wait for the watcher's first poll of ``source`` (it watches the folders before it); return that line."""
    return wait_until(lambda: next((e for e in polls(state, source) if e.get("trigger") == "start"), None), STORED_WITHIN,
                      f"the watcher's first poll of {source}")  # fmt: skip


def stored_ids(state: Path) -> list[str]:
    """The native id of every record in the file store (one entry per object)."""
    return [json.loads(body)["native_id"] for key, body in file_objects(state / "store").items() if key.endswith(".json")]


def maildir_config(tmp_path: Path, **more: Any) -> tuple[Path, Path]:
    """A Maildir and a config with source ``md`` on it (interval an hour: only events start polls); returns (config, maildir)."""
    root = make_maildir(tmp_path / "Maildir")
    return write_config(tmp_path, {"md": {"type": "maildir", "path": str(root), "interval": 3600, **more}}), root


def with_backlog(tmp_path: Path, count: int) -> tuple[Path, Path, Path]:
    """A Maildir (settle 0) already holding ``count`` mails, and its config; returns (config, maildir, state folder)."""
    config, root = maildir_config(tmp_path, settle_seconds=0)
    for i in range(count):
        deliver(root, f"{i}.host", mail(i))
    return config, root, tmp_path / "state"


def test_a_mail_is_stored_once_it_settles_and_sigterm_exits_0(tmp_path: Path) -> None:
    """A mail delivered while the watcher runs is stored by an event-started poll, though the poll interval is an hour.

    The Maildir keeps its default settle_seconds (2 s) and --settle is 0.2 s: the watcher must wait past the
    Maildir's own settle window, or its poll leaves the new file for a later poll that nothing would start.
    """
    config, root = maildir_config(tmp_path)
    state = tmp_path / "state"
    with watching(config, "md", "--settle", "0.2") as proc:
        assert started(state, "md")["status"] == "idle"
        start_line = next(e for e in read_log(state, "md") if e["event"] == "watch.start")
        assert start_line["mode"] == "events" and start_line["settle_s"] == 2.5
        assert sorted(start_line["watched"]) == [str(root / "cur"), str(root / "new")]
        deliver(root, "1.host", mail(1))
        wait_until(lambda: stored_ids(state), STORED_WITHIN, "the delivered mail to be stored")
        took = stop(proc)
    assert stored_ids(state) == ["m1@example.com"]
    lines = polls(state, "md")
    assert [(e["trigger"], e["new"]) for e in lines] == [("start", 0), ("event", 1)]
    assert lines[1]["events"] >= 1
    assert took < STOP_WITHIN


WAL_WRITER = """
import sqlite3, sys
from datetime import UTC, datetime
from pollers.imessage import samples as s
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)  # kept open, like Messages.app: rows go to chat.db-wal
chats = s.existing_chats(conn)
for line in sys.stdin:
    n = s.insert(conn, chats, s.rows(int(line), seed=int(line) + 1000, start=datetime.now(UTC), step_seconds=5))
    print(n, flush=True)
conn.close()
"""


def test_rows_a_separate_process_writes_to_chat_db_are_stored(tmp_path: Path) -> None:
    """A writer that keeps chat.db open (its rows land in chat.db-wal only) wakes the watcher; each row is stored once.

    The polls' own reads of chat.db (which open and close chat.db-wal) start no poll: after each write's poll the
    source goes quiet until its interval poll (2 s), which a poll every --settle seconds would never let happen.
    """
    db = tmp_path / "Messages" / "chat.db"
    db.parent.mkdir()
    imessage_samples.build(db, 10, seed=5)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db), "interval": 2}})
    state = tmp_path / "state"
    writer = subprocess.Popen([sys.executable, "-c", WAL_WRITER, str(db)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        with watching(config, "imessage", "--settle", "0.3") as proc:
            assert started(state, "imessage")["new"] == 10
            assert writer.stdin is not None and writer.stdout is not None
            expected = 10
            for count in (3, 4):
                writer.stdin.write(f"{count}\n")
                writer.stdin.flush()
                assert writer.stdout.readline().strip() == str(count)
                expected += count
                wait_until(lambda n=expected: sum(e["new"] for e in polls(state, "imessage")) >= n, STORED_WITHIN,
                           f"{count} rows written by the other process to be stored")  # fmt: skip
                done = len(polls(state, "imessage"))
                wait_until(lambda d=done: any(e["trigger"] == "interval" for e in polls(state, "imessage")[d:]), STORED_WITHIN,
                           "the source to go quiet until its interval poll")  # fmt: skip
            assert (db.parent / "chat.db-wal").stat().st_size > 0  # the rows are in the WAL; chat.db itself may not have changed
            stop(proc)
    finally:
        writer.kill()
        writer.wait(10)
    conn = sqlite3.connect(db)
    guids = sorted(g for (g,) in conn.execute("SELECT guid FROM message"))
    conn.close()
    assert sorted(stored_ids(state)) == guids and len(guids) == 17
    lines = polls(state, "imessage")
    assert [(e["trigger"], e["new"]) for e in lines if e["new"]] == [("start", 10), ("event", 3), ("event", 4)]
    # A write wakes at most one poll that finds nothing yet: on a loaded machine the writer can be caught between its
    # first WAL frame and its commit for longer than --settle (seen in a busy flake-hunt round). The polls' own reads
    # wake none, or the source would never go quiet until its interval poll (the waits above).
    assert len([e for e in lines if e["trigger"] == "event" and not e["new"]]) <= 2


def test_a_cron_poll_beside_the_watcher_never_polls_the_source_at_the_same_time(tmp_path: Path) -> None:
    """cron-style ``memex poll`` runs beside the watcher while mail keeps arriving: the run lock keeps polls apart.

    The watcher's first poll is held at its 100th mail (a test hold), so a cron poll started then provably meets it and
    is skipped with the holder's pid; later ones run between the watcher's polls. Every mail is stored once and counted
    new once, and no poll overlaps another in time.
    """
    backlog = 300
    config, root, state = with_backlog(tmp_path, backlog)
    gate = Gate(tmp_path, 100)
    with watching(config, "md", "--settle", "0.2", env=gate.env()) as proc:
        assert gate.wait_held(proc) == proc.pid
        cron = [run_cli("poll", "md", config=config)]  # while the first poll is held
        gate.open()
        more = 60
        for i in range(backlog, backlog + more):
            deliver(root, f"{i}.host", mail(i))
            if i % 10 == 0:
                cron.append(run_cli("poll", "md", config=config))
        total = backlog + more
        wait_until(lambda: len(stored_ids(state)) >= total, STORED_WITHIN * 2, "every mail to be stored")
        cron.append(run_cli("poll", "md", config=config))
        stop(proc)
    assert all(c.returncode == 0 for c in cron)
    ids = stored_ids(state)
    assert len(ids) == len(set(ids)) == total
    lines = polls(state, "md")
    ran = [e for e in lines if e["status"] != "skipped"]
    assert sum(e["new"] for e in ran) == total and sum(e["dup"] for e in ran) == 0
    spans = sorted((datetime.fromisoformat(e["ts"]).timestamp() - e["duration_ms"] / 1000, datetime.fromisoformat(e["ts"]).timestamp())
                   for e in ran)  # fmt: skip
    # A poll's line is written just after it frees the lock, and its start is taken just before it tries the lock:
    # polls one after the other may seem to overlap by that much (milliseconds), polls side by side by seconds.
    overlaps = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1] - 0.5]
    assert not overlaps, f"{len(overlaps)} polls ran at the same time as another"
    skipped = [e for e in lines if e["status"] == "skipped"]
    assert skipped and skipped[0]["holder_pid"] == proc.pid  # the cron poll that met the held first poll
    assert all(e["holder_pid"] for e in skipped)


def test_a_poll_skipped_because_cron_holds_the_lock_is_retried(tmp_path: Path) -> None:
    """A change seen while another process holds the source's lock is polled again once the lock is free, not an hour later."""
    config, root = maildir_config(tmp_path, settle_seconds=0)
    state = tmp_path / "state"
    with watching(config, "md", "--settle", "0.2") as proc:
        started(state, "md")
        lock = state / "locks" / "md.poll.lock"
        holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)  # fmt: skip
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            deliver(root, "1.host", mail(1))
            wait_until(lambda: any(e["status"] == "skipped" and e["trigger"] == "event" for e in polls(state, "md")), STORED_WITHIN,
                       "the event's poll to be skipped")  # fmt: skip
        finally:
            holder.kill()
            holder.wait(10)
        wait_until(lambda: stored_ids(state), STORED_WITHIN, "the mail to be stored after the lock was freed")
        stop(proc)
    assert [e["trigger"] for e in polls(state, "md") if e["new"]] == ["retry"]


def test_a_burst_of_200_mails_is_taken_in_a_few_polls(tmp_path: Path) -> None:
    """The debounce coalesces a burst: 200 mails arriving over about 2 s (in groups, as a fetcher delivers them) cause
    hundreds of events but only a few polls, not one per group."""
    config, root = maildir_config(tmp_path, settle_seconds=0)
    state = tmp_path / "state"
    with watching(config, "md", "--settle", "1.5") as proc:
        started(state, "md")
        for group in range(20):
            for i in range(10):
                deliver(root, f"{group}-{i}.host", mail(f"{group}-{i}"))
            time.sleep(0.1)  # the writer's pace (a fetcher's round trips), not a wait for an outcome
        wait_until(lambda: len(stored_ids(state)) >= 200, STORED_WITHIN, "the burst to be stored")
        stop(proc)
    event_polls = [e for e in polls(state, "md") if e["trigger"] == "event"]
    assert sum(e["events"] for e in event_polls) >= 200
    assert sum(e["new"] for e in event_polls) == 200
    assert len(event_polls) <= 4, f"{len(event_polls)} polls for one burst"


def test_sigterm_during_a_poll_stops_it_with_progress_saved_and_exits_0(tmp_path: Path) -> None:
    """SIGTERM while the first poll is storing a backlog: exit 0 within seconds, the cursor saved where it stopped,
    and the next poll stores the rest (every mail exactly once).

    The poll is held at its 100th mail (a test hold) when the signal is sent, so it is in progress whatever the
    machine's speed; the hold lets go on the stop request, as the poll itself must.
    """
    backlog = 300
    config, _root, state = with_backlog(tmp_path, backlog)
    gate = Gate(tmp_path, 100)
    with watching(config, "md", env=gate.env()) as proc:
        gate.wait_held(proc)
        stop(proc)
    first = polls(state, "md")
    assert len(first) == 1 and first[0]["stopped"] == "signal" and first[0]["new"] == 100
    assert first[0]["positions_after"]
    assert run_cli("poll", "md", config=config).returncode == 0
    ids = stored_ids(state)
    assert len(ids) == len(set(ids)) == backlog
    assert sum(e["new"] for e in polls(state, "md")) == backlog


def test_a_poll_stopped_by_its_time_limit_is_followed_by_the_next_at_once(tmp_path: Path) -> None:
    """With --max-seconds-per-poll shorter than the backlog needs, polls follow each other (``trigger=more``) until it is
    all stored, without waiting for a change or the interval (an hour).

    The first poll is held at its 50th mail (a test hold) until its time limit passes, so it is cut short whatever the
    machine's speed (a loaded machine may not even reach the 50th in time: it stores fewer, still cut by the limit).
    """
    backlog = 300
    config, _root, state = with_backlog(tmp_path, backlog)
    gate = Gate(tmp_path, 50)
    with watching(config, "md", "--max-seconds-per-poll", "1", env=gate.env()) as proc:
        wait_until(lambda: len(stored_ids(state)) >= backlog, STORED_WITHIN * 2, "the backlog to be stored")
        stop(proc)
    lines = polls(state, "md")
    assert lines[0]["trigger"] == "start" and lines[0]["stopped"] == "deadline" and lines[0]["new"] <= 50
    assert len(lines) > 1 and {e["trigger"] for e in lines[1:]} == {"more"} and sum(e["new"] for e in lines) == backlog


def test_a_source_with_nothing_to_watch_is_polled_on_its_interval(tmp_path: Path) -> None:
    """IMAP has no files to watch: the watcher says so and polls it every `interval`; its failing polls stop nothing."""
    config, root = maildir_config(tmp_path, settle_seconds=0)
    text = config.read_text() + (
        '[sources.mail]\ntype = "imap"\nhost = "127.0.0.1"\nport = 9\nsecurity = "none"\nuser = "u"\npassword_env = "NOPE"\ninterval = 1\npush = "off"\n'
    )
    config.write_text(text)
    state = tmp_path / "state"
    with watching(config, "mail", "md", "--max-seconds-per-poll", "2") as proc:
        wait_until(lambda: [e for e in polls(state, "mail") if e["trigger"] == "interval"], STORED_WITHIN, "an interval poll of mail")
        deliver(root, "1.host", mail(1))
        wait_until(lambda: stored_ids(state), STORED_WITHIN, "the mail of the watched source")
        stop(proc)
    start_line = next(e for e in read_log(state, "mail") if e["event"] == "watch.start")
    assert start_line["mode"] == "interval" and start_line["watched"] == [] and "polled every interval" in start_line["reason"]
    lines = polls(state, "mail")
    assert lines[0]["trigger"] == "start" and all(e["status"] == "error" for e in lines)
    assert "Traceback" not in (tmp_path / "watch.stderr").read_text()


def test_unknown_source_is_a_usage_error_and_cron_polls_never_import_watchdog(tmp_path: Path) -> None:
    """``memex watch nosuch`` exits 2 with one line; an ordinary ``memex poll`` does not import watchdog."""
    config, _root = maildir_config(tmp_path, settle_seconds=0)
    out = run_cli("watch", "nosuch", config=config, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no source named 'nosuch'" in out.stderr
    out = run_cli("watch", config=config, timeout=60)
    assert out.returncode == 2
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "memex", "--config", str(config), "poll", "md"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    assert "memex.runner" in imported and not any(m.startswith("watchdog") for m in imported)


def test_targets_watch_folders_whole_and_files_through_their_folder(tmp_path: Path) -> None:
    """A folder is watched whole; files (existing or not yet) through their folder, by name, one watch per folder."""
    from memex.watch import Target, targets

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    db = tmp_path / "Messages" / "chat.db"
    got = targets([db, db.with_name("chat.db-wal"), inbox, inbox / "x.zip"])
    assert got == [Target(inbox, None), Target(db.parent, frozenset({"chat.db", "chat.db-wal"}))]
    wal = got[1]
    assert wal.matches(str(db.parent / "chat.db-wal")) and not wal.matches(str(db.parent / "chat.db-shm"))
    assert not wal.matches(str(tmp_path / "chat.db")) and got[0].matches(str(inbox / "a" / "message_1.json"))
