"""The search index's rebuild into a new file and the polls beside it, and when a poll's update is on disk.

A rebuild writes ``index.sqlite.new`` and renames it over the live file: a poll meanwhile keeps its journal (its
records are added to the new file by its next run), the rename waits for every open connection to close, a rebuild of
one source keeps the others' rows, and a poll empties its journal only after its rows are fsynced (strace)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memex.search.index import SearchIndex
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, Gate, need_strace, read_log, run_cli, wait_until, write_config
from tests.core.test_search import ids, records, sources


def _rebuild_held(tmp_path: Path, config: Path) -> tuple[subprocess.Popen[str], Gate]:
    """`memex index rebuild` started and held before its swap (its new file written, ``rebuild.lock`` held)."""
    gate = Gate(tmp_path, 1, name="swap")
    env = gate.env()
    env["MEMEX_TEST_HOLD"] = f"swap:{gate.path}"
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), "index", "rebuild"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    gate.wait_held(proc)
    return proc, gate


def test_a_poll_during_a_rebuild_keeps_its_journal_and_its_next_run_adds_it_to_the_new_index(tmp_path: Path) -> None:
    """While a rebuild holds the index (held just before its swap), a poll stores 5 messages, adds nothing to the old
    file and keeps its journal (``search.rebuild_running``), and a search answers from the old file; after the swap
    the next poll, with nothing new, adds the 5 to the new file. A poll writing into the old file would lose them."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 10, seed=31)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=config).returncode == 0
    state = tmp_path / "state"
    proc, gate = _rebuild_held(tmp_path, config)
    try:
        imessage_samples.append(db, 5, seed=32)
        assert run_cli("poll", "imessage", config=config).returncode == 0
        assert [e for e in read_log(state, "imessage") if e["event"] == "search.rebuild_running"]
        assert len(ids(config, "*")) == 10  # the old file still answers
    finally:
        gate.open()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out == "" and err == "", err
    journal = state / "search" / "pending" / "imessage.poll.keys"
    assert len(journal.read_text().splitlines()) == 5
    assert len(ids(config, "*")) == 10  # the rebuild listed the store before the poll stored the 5
    assert run_cli("poll", "imessage", config=config).returncode == 0
    assert read_log(state, "imessage")[-1]["status"] == "idle" and journal.stat().st_size == 0
    stored = {d["native_id"] for k, d in records(state / "store").items() if k.startswith("messages/")}
    assert len(stored) == 15 and set(ids(config, "*")) == stored


def _blocked_flock(pid: int, inode: int) -> bool:
    """Whether ``pid`` waits for a ``flock`` on the file with that inode (``/proc/locks`` lists waiters after ``->``)."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and "FLOCK" in fields:
            at = fields.index("FLOCK")
            if int(fields[at + 3]) == pid and int(fields[at + 4].split(":")[2]) == inode:
                return True
    return False


def test_the_new_file_replaces_the_old_only_once_no_connection_has_it_open(tmp_path: Path) -> None:
    """A connection open on the index (a search, here held in this process) keeps the rebuild from renaming its new
    file over the old one: the rebuild waits in ``flock`` on ``open.lock`` and swaps once the connection closes (SQLite's
    files must not be renamed or removed under an open connection: its close would delete the new file's WAL)."""
    if not Path("/proc/locks").exists():
        pytest.skip("no /proc/locks to see the rebuild wait in")
    config = write_config(tmp_path, sources(tmp_path, 20))
    assert run_cli("poll", "imessage", config=config).returncode == 0
    state = tmp_path / "state"
    live = state / "search" / "index.sqlite"
    before = live.stat().st_ino
    reader = SearchIndex.open(state, create=False)
    try:
        proc, gate = _rebuild_held(tmp_path, config)
        gate.open()
        lock = (state / "search" / "open.lock").stat().st_ino
        wait_until(lambda: proc.poll() is not None or _blocked_flock(proc.pid, lock), 60, "the rebuild to wait for open.lock")
        assert proc.poll() is None, "the rebuild swapped the file under an open connection"
        assert live.stat().st_ino == before
        assert len(list(reader.select("SELECT key FROM messages", []))) == 20
    finally:
        reader.close()
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert live.stat().st_ino != before and len(ids(config, "*")) == 20
    assert not Path(f"{live}.new").exists()


def test_rebuilding_one_source_keeps_the_other_sources_rows(tmp_path: Path) -> None:
    """`memex index rebuild md` rebuilds the Maildir source from the store and copies the iMessage rows (and their
    edits) from the old file: every query answers as before."""
    config = write_config(tmp_path, sources(tmp_path, 30))
    for source in ("md", "imessage"):
        assert run_cli("poll", source, config=config).returncode == 0
    queries = (["*"], ["lease"], ["source:imessage"], ["from:anna"], ["has:attachment"], ["movie", "-park"])
    answers = [ids(config, *q) for q in queries]
    out = run_cli("index", "rebuild", "md", config=config)
    assert out.returncode == 0, out.stderr
    assert [ids(config, *q) for q in queries] == answers
    status = {r["source"]: (r["indexed"], r["behind"]) for r in json.loads(run_cli("index", "status", "--json", config=config).stdout)}
    assert status == {"imessage": (30, 0), "md": (4, 0)}


# the journal emptied: truncated, or a shorter one renamed over it
_EMPTIED = re.compile(r'\b(?:truncate\("[^"]*\.poll\.keys", 0\)|rename(?:at2?)?\(.*"[^"]*\.poll\.keys"(?:, \d+)?\)) += 0$')


def _journal_emptied_before_the_index_is_durable(trace: list[str]) -> list[str]:
    """Read an ``strace -f -y`` trace of a poll: each emptying of the journal (``truncate``, or a shorter journal renamed
    over it) must come after an fsync of the index's WAL that followed the last write into it (or after its checkpoint
    into the file: WAL and file fsynced)."""
    problems = []
    unsynced = False
    for line in trace:
        if re.search(r"\bpwrite64\(\d+<[^>]*/index\.sqlite-wal>", line):
            unsynced = True
        elif re.search(r"\bf(?:data)?sync\(\d+<[^>]*/index\.sqlite-wal>\) += 0$", line):
            unsynced = False
        elif _EMPTIED.search(line) and unsynced:
            problems.append("the journal was emptied while the index's update was not on disk")
    return problems


def test_a_poll_empties_its_journal_only_after_its_index_update_is_on_disk(tmp_path: Path) -> None:
    """A poll's index commit is not fsynced (WAL, ``synchronous = NORMAL``: atomic, never corrupt after a power loss);
    it is durable when the connection closes: the last one checkpoints (fsyncs), and with a search keeping the file
    open (no checkpoint then) the poll fsyncs the WAL itself. Traced with strace: the journal is emptied only after
    the WAL holding the poll's rows was fsynced; a power loss can therefore never leave rows missing with no journal."""
    from tests.core.test_filestore_safety import joined

    need_strace()
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 10, seed=33)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=config).returncode == 0
    imessage_samples.append(db, 20, seed=34)
    trace_file = tmp_path / "trace"
    reader = SearchIndex.open(tmp_path / "state", create=False)  # keeps the poll's close from checkpointing
    try:
        cmd = ["strace", "-f", "-y", "-qq", "-s", "0", "-e", "trace=pwrite64,fsync,fdatasync,truncate,ftruncate,unlink,rename,renameat,renameat2",
               "-o", str(trace_file), sys.executable, "-m", "memex", "--config", str(config), "poll", "imessage"]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert out.returncode == 0, out.stderr
    finally:
        reader.close()
    trace = joined(trace_file.read_text().splitlines())
    assert any(re.search(r"\bpwrite64\(\d+<[^>]*/index\.sqlite-wal>", ln) for ln in trace), "no write into the index's WAL traced"
    assert any(re.search(r'\btruncate\("[^"]*\.poll\.keys", 0\) += 0$', ln) for ln in trace), "no emptying of the journal traced"
    assert _journal_emptied_before_the_index_is_durable(trace) == []
    assert len(ids(config, "*")) == 30


def test_an_index_of_this_format_lacking_a_newer_secondary_index_gets_it_from_its_next_writer(tmp_path: Path) -> None:
    """An index file made before ``messages_source_last`` was added (same format number) gets it when a writer (a
    poll) next opens it; a reader leaves the file as it is and still answers."""
    import sqlite3

    path = tmp_path / "index.sqlite"
    SearchIndex(path, writer=True).close()
    db = sqlite3.connect(path)
    db.execute("DROP INDEX messages_source_last")
    db.close()

    def names() -> set[str]:
        db = sqlite3.connect(path)
        try:
            return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        finally:
            db.close()

    SearchIndex(path).close()
    assert "messages_source_last" not in names()
    SearchIndex(path, writer=True).close()
    assert "messages_source_last" in names()
