"""The search index kept in step by a thread (:class:`memex.search.build.Follower` with ``background``): a poll goes on
storing while the previous batch is added; updates stay in order, and an update drops from the journal its own
batch's keys and those before them only: a later batch's, appended meanwhile, stay (they are not in the index yet)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memex import config as memex_config
from memex.hold import point_from_env
from memex.search.build import Follower
from memex.search.index import SearchIndex
from memex.store import open_store
from pollers.imessage import samples as imessage_samples
from tests.conftest import Log, run_cli, wait_until, write_config


def _stored_records(tmp_path: Path, n: int) -> tuple[memex_config.Config, list[tuple[str, bytes]]]:
    """A config (state in ``tmp_path``) and ``n`` records a real poll stored, as (key, bytes); no index made yet."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, n, seed=31)
    path = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, search_index=False)
    assert run_cli("poll", "imessage", config=path).returncode == 0
    cfg = memex_config.load(path)
    store = open_store(cfg.store)
    keys = sorted(k for k in store.list_keys("messages/"))
    assert len(keys) == n
    return cfg, [(k, store.get(k) or b"") for k in keys]


def _indexed(cfg: memex_config.Config) -> set[str]:
    with SearchIndex.open(cfg.state_dir) as index:
        return {row[0] for row in index.db.execute("SELECT key FROM messages")}


def test_updates_in_the_background_add_every_batch_in_order_and_empty_the_journal(tmp_path: Path) -> None:
    """Three batches handed over one after another, each added by a thread while the next is journaled: once the
    follower is finished, every record is in the index and the journal is empty."""
    cfg, records = _stored_records(tmp_path, 30)
    store = open_store(cfg.store)
    follower = Follower(cfg, "imessage", "poll", Log(), background=True)
    for start in range(0, 30, 10):
        batch = records[start : start + 10]
        follower.before_commit(batch)
        follower.after_commit(batch, store)
    follower.finish()
    assert _indexed(cfg) == {key for key, _ in records}
    assert follower.journal.stat().st_size == 0


@pytest.fixture
def index_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A gate the next search index update of this process waits at (:mod:`memex.hold`, point ``index``)."""
    gate = tmp_path / "gate"
    monkeypatch.setenv("MEMEX_TEST_HOLD", f"index:{gate}")
    point_from_env.cache_clear()  # the hold is read once per process: this test's process asks for one now
    yield gate
    monkeypatch.delenv("MEMEX_TEST_HOLD")
    point_from_env.cache_clear()


def test_an_update_never_empties_a_journal_a_later_batch_was_appended_to(tmp_path: Path, index_gate: Path) -> None:
    """The first batch's update is held (:mod:`memex.hold`, point ``index``) while the second batch is journaled; let
    go, it adds the first batch and leaves the journal naming the second only (a crash now, before the second's
    update, leaves it to the next run's catch-up, which adds it; the first is not read back: in a long poll the
    journal holds a batch or two, not everything since the start)."""
    cfg, records = _stored_records(tmp_path, 20)
    store = open_store(cfg.store)
    gate = index_gate
    follower = Follower(cfg, "imessage", "poll", Log(), background=True)
    first, second = records[:10], records[10:]
    follower.before_commit(first)
    follower.after_commit(first, store)
    wait_until(lambda: Path(f"{gate}.held").exists(), 60, "the first update to be held")
    follower.before_commit(second)  # journaled while the first batch is being added
    gate.touch()
    follower.finish()  # the first update is done; the second is never handed over (the writer "crashed")
    assert _indexed(cfg) == {key for key, _ in first}
    assert follower.journal.read_text().splitlines() == [key for key, _ in second]
    log = Log()
    assert Follower(cfg, "imessage", "poll", log).catch_up(store) == 10  # the next run
    assert _indexed(cfg) == {key for key, _ in records}
    assert follower.journal.stat().st_size == 0
    assert [kw["keys"] for event, kw in log.events if event == "search.caught_up"] == [10]


def test_a_failed_update_in_the_background_keeps_the_journal_and_the_next_one_catches_up(tmp_path: Path) -> None:
    """An index of another format: the update (in its thread) warns ``search.index_failed`` with the fix and keeps the
    journal; the next batch's update goes through the catch-up and fails the same way; nothing is emptied."""
    cfg, records = _stored_records(tmp_path, 20)
    store = open_store(cfg.store)
    first = Follower(cfg, "imessage", "poll", Log())
    first.before_commit(records[:1])
    first.after_commit(records[:1], store)  # makes the index
    with SearchIndex.open(cfg.state_dir, writer=True) as index:
        index.db.execute("PRAGMA user_version = 99")
    log = Log()
    follower = Follower(cfg, "imessage", "poll", log, background=True)
    for batch in (records[1:10], records[10:]):
        follower.before_commit(batch)
        follower.after_commit(batch, store)
    follower.finish()
    warned = [kw for event, kw in log.events if event in ("search.index_failed", "search.catch_up_failed")]
    assert len(warned) == 2 and all("memex index rebuild" in str(kw.get("reason")) for kw in warned)
    assert set(follower.journal.read_text().splitlines()) == {key for key, _ in records[1:]}
    assert json.dumps([kw for _, kw in log.events]).count("Message") == 0  # no record's text in a warning


def test_a_record_handed_over_as_its_dict_gives_the_row_its_stored_bytes_give(tmp_path: Path) -> None:
    """The uploader hands the index a stored record's dict instead of its bytes (no ``json.loads`` of them again) only
    when reading the bytes back gives the same row: a source's tuples are read as the lists its JSON holds, and a text
    whose lone surrogate rendering replaced (U+FFFD in the bytes) is handed over as its bytes."""
    from memex.records import Message
    from memex.search.rows import message_row
    from memex.source import Item
    from memex.uploader import Uploader

    path = write_config(tmp_path, {"chat": {"type": "imessage", "db": str(tmp_path / "chat.db")}})
    uploader = Uploader(memex_config.load(path), "chat", Log())
    uploader.stored = []
    extra = {"fingerprint": "f1", "to": ("a@example.com", "b@example.com"), "to_names": ("A",), "subject": "s"}
    plain = Message(source="chat", type="message", native_id="m1", sent_at="2024-01-02T03:04:05Z", text="hello", extra=extra,
                    attachments=({"id": "0", "filename": "x.pdf"},))  # type: ignore[arg-type]  # fmt: skip
    broken = Message(source="chat", type="message", native_id="m2", sent_at=None, text="half \ud800 pair", extra={"fingerprint": "f2"})
    for message in (plain, broken):
        assert uploader.put(Item(cursor=None, message=message)) == "new"
    handed = dict(uploader.take_stored())
    uploader.sync()
    assert isinstance(handed[plain.key()], dict) and isinstance(handed[broken.key()], bytes)
    store = open_store(memex_config.load(path).store)
    for key, record in handed.items():
        doc = record if isinstance(record, dict) else json.loads(record)
        assert message_row(key, doc) == message_row(key, json.loads(store.get(key) or b""))
    assert message_row(plain.key(), handed[plain.key()]).recipients == "a@example.com\nb@example.com\nA"  # type: ignore[arg-type]
