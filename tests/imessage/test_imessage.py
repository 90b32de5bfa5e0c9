"""The iMessage poller on real chat.db files in macOS's schema."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memex.config import SourceConfig
from pollers.imessage import samples as imessage_samples
from pollers.imessage.poller import IMessagePoller, make
from pollers.imessage.rows import apple_time
from pollers.imessage.typedstream import _decode_slow, decode_attributed_body, encode_attributed_body
from tests.conftest import assert_valid, file_objects, read_log, run_cli, stored_records, write_config

SECRET = "Meet me at the hidden lighthouse"  # fixture text that must never show up in logs or output


def hand_built_db(path: Path) -> None:
    """A chat.db with one row of every shape the poller must handle."""
    conn = imessage_samples.create(path)
    conn.executescript(
        """
        INSERT INTO handle(ROWID, id, service) VALUES (1, '+15550100', 'iMessage'), (2, 'sam@example.com', 'iMessage');
        INSERT INTO chat(ROWID, guid, style, chat_identifier, service_name, display_name)
            VALUES (1, 'iMessage;-;+15550100', 45, '+15550100', 'iMessage', NULL),
                   (2, 'iMessage;+;chat42', 43, 'chat42', 'iMessage', 'Climbing');
        INSERT INTO chat_handle_join VALUES (1, 1), (2, 1), (2, 2);
        """
    )
    ns = imessage_samples.apple_date(datetime(2023, 5, 1, 12, 0, 0, 250000, tzinfo=UTC))
    secs = imessage_samples.apple_date(datetime(2015, 6, 1, 8, 30, tzinfo=UTC), nanoseconds=False)
    rows: list[tuple[Any, ...]] = [
        # ROWID, guid, text, attributedBody, handle_id, date, is_from_me, assoc_guid, assoc_type, thread_originator, has_att, item_type, chat
        (1, "G-TEXT", "plain text", None, 1, secs, 0, None, 0, None, 0, 0, 1),
        (2, "G-BODY", None, encode_attributed_body(SECRET + " ✨"), 1, ns, 0, None, 0, None, 0, 0, 1),
        (3, "G-ME", "from me", None, 0, ns + 1, 1, None, 0, None, 0, 0, 2),
        (4, "G-TAPBACK", None, None, 2, ns + 2, 0, "p:0/G-ME", 2001, None, 0, 0, 2),
        (5, "G-REPLY", "a reply", None, 2, ns + 3, 0, None, 0, "G-ME", 1, 0, 2),
        (6, "G-BROKEN", None, b"\x04\x0bstreamtyped\x81\xe8\x03garbage", 1, ns + 4, 0, None, 0, None, 0, 0, 1),
        (7, "G-RENAME", None, None, 0, ns + 5, 1, None, 0, None, 0, 2, 2),
        (8, "G-UNTAP", None, None, 2, ns + 6, 0, "p:0/G-ME", 3001, None, 0, 0, 2),
    ]
    for rowid, guid, text, body, handle, date, me, assoc, atype, thread, att, item_type, chat in rows:
        conn.execute(
            "INSERT INTO message(ROWID, guid, text, attributedBody, handle_id, date, is_from_me, associated_message_guid,"
            " associated_message_type, thread_originator_guid, cache_has_attachments, item_type, service)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'iMessage')",
            (rowid, guid, text, body, handle, date, me, assoc, atype, thread, att, item_type),
        )
        conn.execute("INSERT INTO chat_message_join VALUES (?, ?, ?)", (chat, rowid, date))
    conn.execute(
        "INSERT INTO attachment(ROWID, guid, filename, mime_type, transfer_name, total_bytes)"
        " VALUES (1, 'A-1', '~/Library/Messages/Attachments/ab/IMG_1.HEIC', 'image/heic', 'IMG_1.HEIC', 2048)"
    )
    conn.execute("INSERT INTO message_attachment_join VALUES (5, 1)")
    conn.close()


def poller_for(db: Path) -> IMessagePoller:
    """Build the poller as the registry would, from a config section."""
    return make(SourceConfig(name="imessage", type="imessage", path=None, options={"db": str(db)}))


def records(db: Path) -> dict[str, dict[str, Any]]:
    """Every record the poller renders from ``db``, by guid."""
    poller = poller_for(db)
    try:
        batch = poller.fetch(None, 1000)
    finally:
        poller.close()
    return {item.message.native_id: item.message.to_dict() for item in batch.items if item.message}


def test_rows_render_to_the_shared_schema(tmp_path: Path) -> None:
    """Text, attributedBody-only text, both date units, sender, conversation and participants come out right."""
    db = tmp_path / "chat.db"
    hand_built_db(db)
    recs = records(db)
    assert set(recs) == {"G-TEXT", "G-BODY", "G-ME", "G-TAPBACK", "G-REPLY", "G-BROKEN", "G-RENAME", "G-UNTAP"}
    text = recs["G-TEXT"]
    assert text["text"] == "plain text"
    assert text["sent_at"] == "2015-06-01T08:30:00Z"  # seconds since 2001
    assert text["sender"] == {"id": "+15550100", "name": None, "is_me": False}
    assert text["conversation"] == {"id": "iMessage;-;+15550100", "name": "+15550100", "participants": ["+15550100"]}
    body = recs["G-BODY"]
    assert body["text"] == SECRET + " ✨"
    assert body["extra"]["text_from"] == "attributedBody"
    assert body["sent_at"] == "2023-05-01T12:00:00.250000Z"  # nanoseconds since 2001
    me = recs["G-ME"]
    assert me["sender"]["is_me"] is True
    assert me["conversation"]["name"] == "Climbing"
    assert me["conversation"]["participants"] == ["+15550100", "sam@example.com"]


def test_tapbacks_replies_and_attachments_keep_their_links(tmp_path: Path) -> None:
    """A tapback is a reaction record pointing at its target guid; a reply keeps its thread originator; attachments are listed."""
    db = tmp_path / "chat.db"
    hand_built_db(db)
    recs = records(db)
    tap = recs["G-TAPBACK"]
    assert tap["type"] == "reaction"
    assert tap["reply_to"] == "G-ME"
    assert tap["extra"]["reaction"] == {"kind": "like", "removed": False}
    assert recs["G-UNTAP"]["extra"]["reaction"] == {"kind": "like", "removed": True}
    reply = recs["G-REPLY"]
    assert reply["reply_to"] == "G-ME"
    assert reply["attachments"] == [{"id": "A-1", "filename": "IMG_1.HEIC", "mime_type": "image/heic", "size": 2048}]
    assert recs["G-RENAME"]["type"] == "event"


def test_every_stored_record_conforms_to_the_published_schema(tmp_path: Path) -> None:
    """A poll of the hand-built chat.db (text, attributedBody, a tapback and its removal, a reply with an attachment,
    a broken body, a group rename) stores records that all validate against memex.message/1, of all three types."""
    db = tmp_path / "chat.db"
    hand_built_db(db)
    out = run_cli("poll", "imessage", config=write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}))
    assert out.returncode == 0, out.stderr
    docs = assert_valid(stored_records(tmp_path / "state" / "store"))
    assert len(docs) == 8 and {d["type"] for d in docs} == {"message", "reaction", "event"}


def test_undecodable_attributed_body_is_stored_without_text(tmp_path: Path) -> None:
    """A broken typedstream does not stop the poll: the message is kept with text None and the reason in extra."""
    db = tmp_path / "chat.db"
    hand_built_db(db)
    broken = records(db)["G-BROKEN"]
    assert broken["text"] is None
    assert "typedstream" in broken["extra"]["text_error"]


def test_typedstream_round_trip_and_rejects_non_streams() -> None:
    """Our sample encoder produces blobs the real decoder (pytypedstream) reads, and memex's decoder (its fast path
    for this layout) agrees; other bytes are refused."""
    for text in ["", "hi", "x" * 300, "emoji 👋🏽 and \ufffc attachment", "ü" * 40000]:
        assert _decode_slow(encode_attributed_body(text)) == text
        assert decode_attributed_body(encode_attributed_body(text)) == text
    with pytest.raises(ValueError):
        decode_attributed_body(b"bplist00...")


def test_apple_dates_in_both_units() -> None:
    """Seconds (pre-10.13) and nanoseconds (10.13+) since 2001 both convert; 0 means no date."""
    assert apple_time(0) is None
    assert apple_time(1) == datetime(2001, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert apple_time(704_635_200_000_000_000) == datetime(2023, 5, 1, 12, 0, tzinfo=UTC)
    assert apple_time(704_635_200) == datetime(2023, 5, 1, 12, 0, tzinfo=UTC)


def test_missing_db_names_the_path_and_the_fix(tmp_path: Path) -> None:
    """A chat.db that is not there gives exit 1 and one line naming the path."""
    missing = tmp_path / "nope" / "chat.db"
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(missing)}})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 1
    assert f"{missing}: chat.db not found" in out.stderr
    assert "Traceback" not in out.stderr
    assert read_log(tmp_path / "state", "imessage")[-1]["status"] == "error"


def test_a_db_without_messages_table_is_refused(tmp_path: Path) -> None:
    """Pointing db at some other SQLite file gives a clear error, not a crash or an empty success."""
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t(x)").connection.close()
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(other)}})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 1
    assert "not a Messages database" in out.stderr


WRITER = """
import sys, time
from pathlib import Path
from pollers.imessage import samples as imessage_samples
db, stop = Path(sys.argv[1]), Path(sys.argv[2])
r = 0
while not stop.exists() or r < 10:
    imessage_samples.append(db, 25, seed=1000 + r)
    r += 1
    time.sleep(0.05)  # pace the producer like a live conversation, so polls interleave with writes
print(r, flush=True)
"""


def test_polls_during_concurrent_wal_writes_miss_nothing(tmp_path: Path) -> None:
    """A writer process appends in WAL mode while polls run back to back: every row ends up stored exactly once."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 200, seed=3)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(stop)], stdout=subprocess.PIPE, text=True)
    polls = 0
    try:
        while polls < 5:  # the writer keeps writing until these polls are done
            out = run_cli("poll", "imessage", "--max-seconds", "1", config=cfg)
            assert out.returncode == 0, out.stderr
            polls += 1
        stop.touch()
        rounds_out, _ = writer.communicate(timeout=120)
        assert writer.returncode == 0
    finally:
        writer.kill()
    rounds = int(rounds_out)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    conn = sqlite3.connect(db)
    guids = {g for (g,) in conn.execute("SELECT guid FROM message")}
    (max_rowid,) = conn.execute("SELECT MAX(ROWID) FROM message").fetchone()
    conn.close()
    objects = file_objects(tmp_path / "state" / "store")
    stored = {json.loads(body)["native_id"] for body in objects.values()}
    assert len(guids) == 200 + rounds * 25
    assert stored == guids and len(objects) == len(guids)
    events = [e for e in read_log(tmp_path / "state", "imessage") if e["event"] == "poll"]
    assert sum(e["new"] for e in events) == len(guids)  # nothing counted new twice
    assert events[-1]["positions_after"] == {"rowid": max_rowid}


def renumbered_copy(src: Path, dst: Path, *, offset: int, extra_rows: int = 0, seed: int = 77) -> None:
    """Rebuild ``src`` into ``dst`` with every ROWID shifted (as a rebuilt chat.db renumbers), plus new rows."""
    conn = imessage_samples.create(dst)
    conn.execute("ATTACH ? AS old", (str(src),))
    for table in ("handle", "chat", "chat_handle_join", "attachment"):
        conn.execute(f"INSERT INTO {table} SELECT * FROM old.{table}")
    cols = [r[1] for r in conn.execute("PRAGMA old.table_info(message)")]
    rest = ", ".join(c for c in cols if c != "ROWID")
    conn.execute(f"INSERT INTO message(ROWID, {rest}) SELECT ROWID + ?, {rest} FROM old.message", (offset,))
    conn.execute("INSERT INTO chat_message_join SELECT chat_id, message_id + ?, message_date FROM old.chat_message_join", (offset,))
    conn.execute("INSERT INTO message_attachment_join SELECT message_id + ?, attachment_id FROM old.message_attachment_join", (offset,))
    conn.execute("DETACH old")
    conn.close()
    if extra_rows:
        imessage_samples.append(dst, extra_rows, seed=seed)


def stored_guids(tmp_path: Path) -> list[str]:
    """native_ids of every stored object (a list, so a duplicate object would show)."""
    return [json.loads(b)["native_id"] for b in file_objects(tmp_path / "state" / "store").values()]


def db_guids(db: Path) -> set[str]:
    """Every guid in a chat.db."""
    conn = sqlite3.connect(db)
    try:
        return {g for (g,) in conn.execute("SELECT guid FROM message")}
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("offset", "reason"),
    [(-60, "highest ROWID 55 is below the cursor 100"), (+500, "message ROWID 100 is now ROWID 600")],
)
def test_rebuilt_chat_db_costs_no_message(tmp_path: Path, offset: int, reason: str) -> None:
    """ROWIDs renumbered (down or up) with new rows added: the reset is logged and every message is stored once."""
    db = tmp_path / "chat.db"
    imessage_samples.build(tmp_path / "orig.db", 100, seed=5)
    conn = sqlite3.connect(tmp_path / "orig.db")
    conn.execute("DELETE FROM message WHERE ROWID <= 60")  # renumbering down needs room below
    conn.commit()
    conn.close()
    shutil.copy(tmp_path / "orig.db", db)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    db.unlink()
    renumbered_copy(tmp_path / "orig.db", db, offset=offset, extra_rows=15)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    events = read_log(tmp_path / "state", "imessage")
    resets = [e for e in events if e["event"] == "source.reset"]
    assert len(resets) == 1 and reason in resets[0]["reason"]
    last = events[-1]
    assert last["new"] == 15 and last["dup"] == 40 and last["reset"]
    stored = stored_guids(tmp_path)
    assert len(stored) == len(set(stored)) == 55
    assert set(stored) == db_guids(db)


def test_replaced_chat_db_with_lower_rowids_costs_no_message(tmp_path: Path) -> None:
    """A new chat.db whose highest ROWID is below the cursor is detected; a naive ROWID cursor would miss all of it."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 300, seed=6)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    db.unlink()
    imessage_samples.build(db, 40, seed=7)
    conn = sqlite3.connect(db)
    naive_would_see = conn.execute("SELECT COUNT(*) FROM message WHERE ROWID > 300").fetchone()[0]
    conn.close()
    assert naive_would_see == 0  # the trap: a plain "ROWID > cursor" poll would store none of the 40
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    assert read_log(tmp_path / "state", "imessage")[-1]["new"] == 40
    assert db_guids(db) <= set(stored_guids(tmp_path))


def test_replaced_chat_db_with_higher_rowids_costs_no_message(tmp_path: Path) -> None:
    """A replacement that already has more rows than the cursor (none of the anchors in it) is detected too."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 50, seed=8)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    db.unlink()
    imessage_samples.build(db, 120, seed=9)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    assert read_log(tmp_path / "state", "imessage")[-1]["new"] == 120
    assert db_guids(db) <= set(stored_guids(tmp_path))


def test_deleting_recent_messages_is_not_mistaken_for_a_rebuild(tmp_path: Path) -> None:
    """The user deleting the newest stored message (one anchor gone, others intact) does not trigger a re-read."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 50, seed=10)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM message WHERE ROWID = 50")
    conn.commit()
    conn.close()
    imessage_samples.append(db, 5, seed=11)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    events = read_log(tmp_path / "state", "imessage")
    assert not [e for e in events if e["event"] == "source.reset"]
    assert events[-1]["new"] == 5 and events[-1]["dup"] == 0


def test_head_is_the_newest_row(tmp_path: Path) -> None:
    """head() points at the newest message, so start = "now" skips history."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 30, seed=12)
    poller = poller_for(db)
    try:
        head = poller.head()
        assert poller.positions(head) == {"rowid": 30}
        assert poller.fetch(head, 10).items == []
    finally:
        poller.close()


def test_a_chat_created_while_polling_keeps_its_conversation(tmp_path: Path) -> None:
    """The poller caches chats; a chat created after the cache was filled is still found for its messages."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 10, seed=13)
    poller = poller_for(db)
    try:
        first = poller.fetch(None, 100)
        conn = sqlite3.connect(db)
        conn.execute(
            "INSERT INTO chat(ROWID, guid, chat_identifier, display_name) VALUES (99, 'iMessage;+;chat-new', 'chat-new', 'New group')"
        )
        conn.execute("INSERT INTO message(ROWID, guid, text, date, handle_id) VALUES (11, 'G-NEW', 'hello', 1, 1)")
        conn.execute("INSERT INTO chat_message_join VALUES (99, 11, 1)")
        conn.commit()
        conn.close()
        batch = poller.fetch(first.cursor, 100)
    finally:
        poller.close()
    assert [i.message.conversation["id"] for i in batch.items if i.message] == ["iMessage;+;chat-new"]
