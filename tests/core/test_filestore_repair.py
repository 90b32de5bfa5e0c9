"""A taken name on the file store is a duplicate only if what is there is sound; an empty or truncated object is replaced.

A power cut on a file system that did not flush (or a copy that stopped halfway) can leave an object empty or cut
short. A create-only write that meets such a name replaces it atomically (``object.repaired``) instead of counting
a duplicate, so the next poll or backfill that reads the message again mends the index.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memex.store.files import FileStore
from pollers.imessage import samples as imessage_samples
from tests.conftest import read_log, run_cli, write_config


@pytest.mark.parametrize("again", ["poll", "backfill"])
def test_an_empty_and_a_truncated_object_are_repaired_by_the_next_read_not_counted_as_duplicates(tmp_path: Path, again: str) -> None:
    """After a poll, one message's object is emptied and another's cut in half; the next full read (a poll from a lost
    cursor, or a backfill) writes both again (2 new, of which 2 repaired, the rest dup), byte for byte as before, and
    logs ``object.repaired`` for each with its key and damage (as memex verify --repair does), no message text.
    """
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 40, seed=4)
    store = tmp_path / "store"
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, store={"url": store.as_uri()})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    objects = sorted((store / "messages" / "imessage").iterdir())
    assert len(objects) == 40
    empty, cut = objects[3], objects[17]
    before = {p: p.read_bytes() for p in (empty, cut)}
    empty.write_bytes(b"")
    cut.write_bytes(before[cut][: len(before[cut]) // 2])
    if again == "poll":
        (tmp_path / "state" / "cursors.json").unlink()  # the cursor is lost: the poll reads every message again
        assert run_cli("poll", "imessage", config=cfg).returncode == 0
        counts = [e for e in read_log(tmp_path / "state", "imessage") if e["event"] == "poll"][-1]
    else:
        proc = run_cli("backfill", "imessage", "--json", config=cfg)
        assert proc.returncode == 0, proc.stderr
        counts = json.loads(proc.stdout)
    assert (counts["new"], counts.get("repaired"), counts["dup"]) == (2, 2, 38)
    assert {p: p.read_bytes() for p in (empty, cut)} == before
    repaired = [e for e in read_log(tmp_path / "state", "imessage") if e["event"] == "object.repaired"]
    assert sorted((e["key"], e["damage"]) for e in repaired) == sorted(
        [(f"messages/imessage/{empty.name}", "empty"), (f"messages/imessage/{cut.name}", "not_json")]
    )
    assert all(e["level"] == "warning" and set(e) == {"event", "level", "ts", "source", "key", "damage"} for e in repaired)


def test_a_sound_object_at_a_taken_name_is_left_as_it_is(tmp_path: Path) -> None:
    """What the check leaves alone: a record of another size that parses (another version, or another message with a
    reused ID that the uploader keeps beside it), a non-empty raw blob of another size, and an empty blob when the new
    body is empty too. Each is a duplicate (put_new False) and nothing is rewritten or counted repaired.
    """
    fs = FileStore(tmp_path / "store")
    sound = {"messages/s/a.json": b'{"native_id": "a", "text": "an older, longer version"}', "messages/s/b.eml": b"From: x\r\n\r\nhi",
             "messages/s/c.eml": b""}  # fmt: skip
    for key, body in sound.items():
        assert fs.put_new(key, body)
    fs.sync()
    assert not fs.put_new("messages/s/a.json", b'{"native_id": "a"}')
    assert not fs.put_new("messages/s/b.eml", b"From: x\r\n\r\nhi, but longer")
    assert not fs.put_new("messages/s/c.eml", b"")
    fs.sync()
    assert {k: fs.get(k) for k in sound} == sound
    assert fs.repaired == 0


def test_a_damaged_object_is_replaced_at_once_and_durably(tmp_path: Path) -> None:
    """put_new on an empty object or one that is not JSON replaces it before it returns (no sync needed), and says True."""
    fs = FileStore(tmp_path / "store")
    (tmp_path / "store" / "messages" / "s").mkdir(parents=True, mode=0o700)
    (tmp_path / "store" / "messages" / "s" / "a.json").write_bytes(b"")
    (tmp_path / "store" / "messages" / "s" / "b.json").write_bytes(b'{"native_id": "b", "te')
    assert fs.put_new("messages/s/a.json", b'{"native_id": "a"}')
    assert fs.put_new("messages/s/b.json", b'{"native_id": "b"}')
    assert (tmp_path / "store" / "messages" / "s" / "a.json").read_bytes() == b'{"native_id": "a"}'
    assert (tmp_path / "store" / "messages" / "s" / "b.json").read_bytes() == b'{"native_id": "b"}'
    assert fs.repaired == 2
    assert not list((tmp_path / "store" / ".memex-tmp").iterdir())
