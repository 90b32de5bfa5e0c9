"""The cursor store: no lost updates between processes, corrupt files never overwritten, private files."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memex.errors import CursorConflict, StateError
from memex.state.cursors import CursorStore
from tests.core import race_worker

WORKERS = 5
UPDATES = 1000


def race(state_dir: Path, worker: Callable[..., None], updates: int = UPDATES) -> dict[str, int]:
    """Start WORKERS processes on a barrier, each bumping its own section; return the final counts."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    procs = [ctx.Process(target=worker, args=(str(state_dir), f"source{i}", updates, barrier)) for i in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    doc = json.loads((state_dir / "cursors.json").read_text())
    return {name: section.get("count", 0) for name, section in doc["sources"].items()}


def test_five_processes_lose_no_update(tmp_path: Path) -> None:
    """5 processes x 1,000 read-modify-write updates of their own sections through the store: all 5,000 survive."""
    counts = race(tmp_path, race_worker.locked_worker)
    assert counts == {f"source{i}": UPDATES for i in range(WORKERS)}


def test_the_same_race_catches_the_naive_idiom(tmp_path: Path) -> None:
    """The harness above can fail: load-change-write-temp-rename without a lock loses updates in the same race."""
    lost = 0
    for attempt in range(3):  # a lost update is near certain in one round; three rounds make a miss vanishingly rare
        state = tmp_path / f"round{attempt}"
        state.mkdir()
        counts = race(state, race_worker.naive_worker)
        lost = WORKERS * UPDATES - sum(counts.values())
        if lost:
            break
    assert lost > 0, "the naive idiom lost nothing: the race test would not catch a regression"


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    """No cursors.json yet means no cursors, not an error."""
    assert CursorStore(tmp_path).load() == {}
    assert CursorStore(tmp_path).cursor("imessage") is None


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"\xff\xfe garbage", b"[]", b'{"format": 1}', b'{"format": 99, "sources": {}}', b'{"format": 1, "sources": {"a": 3}}'],
)
def test_corrupt_file_raises_and_is_never_overwritten(tmp_path: Path, content: bytes) -> None:
    """An unreadable cursors file is an error naming it; an update refuses and leaves it byte-for-byte unchanged."""
    path = tmp_path / "cursors.json"
    path.write_bytes(content)
    store = CursorStore(tmp_path)
    with pytest.raises(StateError) as info:
        store.load()
    assert str(path) in str(info.value)
    with pytest.raises(StateError):
        store.update("imessage", lambda s: {**s, "cursor": {"rowid": 1}})
    assert path.read_bytes() == content


def test_update_changes_only_its_own_section(tmp_path: Path) -> None:
    """Other sections are written back exactly as they were read inside the lock."""
    store = CursorStore(tmp_path)
    store.update("a", lambda s: {"cursor": {"rowid": 5}, "extra": [1, 2]})
    store.update("b", lambda s: {"cursor": {"rowid": 7}})
    store.update("b", lambda s: {**s, "cursor": {"rowid": 8}})
    assert store.load() == {"a": {"cursor": {"rowid": 5}, "extra": [1, 2]}, "b": {"cursor": {"rowid": 8}}}


def test_advance_is_compare_and_swap(tmp_path: Path) -> None:
    """A poll whose starting cursor was changed meanwhile (cursor set) cannot write its stale view back."""
    store = CursorStore(tmp_path)
    store.advance("imessage", None, {"rowid": 10})
    store.set_cursor("imessage", {"rowid": 3}, reason="set")
    with pytest.raises(CursorConflict):
        store.advance("imessage", {"rowid": 10}, {"rowid": 20})
    assert store.cursor("imessage") == {"rowid": 3}


def test_state_files_are_private_and_lock_file_is_never_replaced(tmp_path: Path) -> None:
    """cursors.json is 0600, the state dir 0700, and the lock file keeps its inode across updates."""
    state = tmp_path / "state"
    store = CursorStore(state)
    store.update("a", lambda s: {"n": 1})
    inode = os.stat(store.lock_path).st_ino
    for n in range(2, 5):
        store.update("a", lambda s, n=n: {"n": n})
    assert os.stat(store.lock_path).st_ino == inode
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.lock_path).st_mode) == 0o600
    leftovers = [p.name for p in state.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_an_existing_state_dir_keeps_its_mode(tmp_path: Path) -> None:
    """A state dir the user made 0755 stays 0755 (memex chmods only what it creates); what memex puts in it is private."""
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    store = CursorStore(state)
    store.update("a", lambda s: {"n": 1})
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.lock_path.parent).st_mode) == 0o700


def _noop(section: dict[str, Any]) -> dict[str, Any]:
    return section


def test_unchanged_update_writes_nothing(tmp_path: Path) -> None:
    """An update that changes nothing does not rewrite the file (idle polls stay cheap)."""
    store = CursorStore(tmp_path)
    store.update("a", lambda s: {"n": 1})
    before = os.stat(store.path).st_ino
    store.update("a", _noop)
    assert os.stat(store.path).st_ino == before


def test_cursor_set_and_reset_are_one_function_callable_without_the_cli(tmp_path: Path) -> None:
    """``memex.cursor_edit.change_cursor`` (what ``memex cursor set``/``reset`` call) checks, asks before a step back,
    writes and says what changed, with no click: a bad value is CursorNotSet (exit 2) and nothing is written."""
    from memex import config as memex_config
    from memex.cursor_edit import CursorNotSet, change_cursor
    from memex.state.backend import cursor_store
    from tests.conftest import write_config

    cfg = memex_config.load(write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}}))
    with pytest.raises(CursorNotSet, match="cursor of 'imessage' not set") as bad:
        change_cursor(cfg, "imessage", {"rowid": -1})
    assert bad.value.exit_code == 2 and not (tmp_path / "state" / "cursors.json").exists()
    assert change_cursor(cfg, "imessage", {"rowid": 50}).line() == "imessage: cursor - -> 50"
    asked: list[str] = []
    change = change_cursor(cfg, "imessage", {"rowid": 10}, confirm_back=asked.append)
    assert (change.before, change.after, change.reason) == ({"rowid": 50}, {"rowid": 10}, "set") and "back (50 -> 10)" in asked[0]
    assert change_cursor(cfg, "imessage", None).reason == "reset" and cursor_store(cfg).cursor("imessage") is None
