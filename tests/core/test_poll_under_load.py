"""The time limit under load (issue 40 §5): polls beside a CPU hog end within ``--max-seconds`` + the grace.

A plug-in whose fetches are quick stores messages with long texts, so that indexing them is most of a poll's work:
on a loaded machine the index update after the last batch once ran seconds past the limit (up to 7 s with
``--max-seconds 1``). The index work is now cut at the limit plus a quarter of the grace, what it did not add left in the
journal for the next poll, so the poll ends on time and the index misses nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from memex import config as config_mod
from memex import registry, runner
from memex.deadline import GRACE
from memex.search import index_path
from tests.conftest import write_config


def need_stress_ng() -> None:
    """Skip without stress-ng locally; on CI its absence is a failure (the test would prove nothing idle)."""
    if shutil.which("stress-ng") is None:
        if os.environ.get("CI"):
            raise AssertionError("stress-ng is missing on CI")
        pytest.skip("stress-ng is not installed")


@pytest.mark.slow
@pytest.mark.alone  # beside the parallel suite's workers the load is not the one this test sets (Makefile)
def test_polls_beside_a_cpu_hog_end_within_the_time_limit_and_the_index_misses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three polls with ``max_seconds=1`` beside ``stress-ng --cpu 1`` (one core kept busy, so the poll shares the other with the test's own process; stopped
    after them; 60 s at most: beside ``--cpu 2`` one run in about four had a poll at 5 s, see docs/running.md) each end
    within 1 s + GRACE (their own ``duration_ms``: process start-up is not the poll's); batches of 100, so a fetch
    stays well inside the limit, as the issue's plug-in's did (a first batch read past the limit has its own grace).
    Then, the source read to its end and the hog gone, one more poll catches the index up: it holds every stored
    message."""
    need_stress_ng()
    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"count": 1_000_000, "words": 1500}))
    cfg = config_mod.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(spec)}}))
    hog = subprocess.Popen(["stress-ng", "--cpu", "1", "--timeout", "60", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        results = [runner.poll(cfg, "f", max_seconds=1, batch_size=100) for _ in range(3)]
    finally:
        hog.terminate()
        hog.wait(30)
    took = [r.duration_ms for r in results]
    assert all(r.status in ("ok", "idle") for r in results), [r.error for r in results]
    assert max(took) <= (1 + GRACE) * 1000, f"polls took {took} ms with max_seconds=1"
    stored = results[-1].positions_after["n"]
    assert stored > 0
    spec.write_text(json.dumps({"count": stored, "words": 1500}))  # nothing new: the next poll only catches the index up
    assert runner.poll(cfg, "f", max_seconds=60).status == "idle"
    with sqlite3.connect(index_path(cfg.state_dir)) as db:
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == stored


def test_a_catch_up_cut_at_its_cutoff_keeps_what_each_transaction_added(tmp_path: Path) -> None:
    """A catch-up whose cutoff comes after its first transaction: that record is in the index and its key out of the
    journal, the rest still in it (``search.deferred``); the next catch-up adds the rest and empties the journal. So
    every poll moves the index on, however slow its transactions are."""
    from memex.search.build import Follower, journal_append, journal_entries
    from memex.search.index import SearchIndex
    from memex.store.files import FileStore

    cfg = config_mod.load(write_config(tmp_path, {}))
    store = FileStore(tmp_path / "store")
    keys = [f"messages/mail/m{i}.json" for i in range(4)]
    for i, key in enumerate(keys):
        doc = {"source": "mail", "native_id": f"m{i}", "text": f"word{i}", "sent_at": None, "sender": {"id": "a@example.com"}}
        store.put_new(key, json.dumps(doc).encode())
    store.sync()
    events: list[str] = []

    class Log:
        def info(self, event: str, **_: object) -> None:
            events.append(event)

        warning = info

    follower = Follower(cfg, "mail", "poll", Log())
    journal_append(follower.journal, keys)
    calls = iter([1.0, 1.0])  # seconds left: before the first transaction and for its size; then the cutoff has come
    follower.cutoff = lambda: time.monotonic() + next(calls, -1.0)
    assert follower.catch_up(store) == 1
    assert [k for k, _ in journal_entries(follower.journal)] == keys[1:] and "search.deferred" in events
    follower.cutoff = None
    assert follower.catch_up(store) == 3
    assert journal_entries(follower.journal) == []
    with SearchIndex(index_path(cfg.state_dir)) as index:
        assert index.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 4
