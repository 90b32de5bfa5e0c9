"""iMessage faults seen in real databases: invalid UTF-8 in a row, and a deleted conversation."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

from pollers.imessage import samples as imessage_samples
from tests.conftest import file_objects, read_log, run_cli, write_config

CANARY = b"CANARY-b7e1 half emoji \xed\xa0\xbd here"


def test_invalid_utf8_in_one_row_affects_that_row_only_and_is_kept(tmp_path: Path) -> None:
    """9 rows, one with invalid UTF-8 text: all 9 stored, that one with U+FFFD and its raw bytes; the canary is in no output."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 9, seed=2)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE message SET text = CAST(? AS TEXT) WHERE ROWID = 4", (CANARY,))
    guid = conn.execute("SELECT guid FROM message WHERE ROWID = 4").fetchone()[0]
    conn.commit()
    conn.close()
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    records = {json.loads(b)["native_id"]: json.loads(b) for b in file_objects(tmp_path / "state" / "store").values()}
    assert len(records) == 9
    bad = records[guid]
    assert bad["text"] == CANARY.decode("utf-8", "replace") and "\ufffd" in bad["text"]
    assert base64.b64decode(bad["extra"]["raw_bytes_b64"]["text"]) == CANARY
    assert bad["extra"]["problems"] == ["text is not valid UTF-8; bad bytes shown as U+FFFD"]
    others = [r for g, r in records.items() if g != guid]
    assert all("raw_bytes_b64" not in r["extra"] for r in others)
    logs = (tmp_path / "state" / "logs" / "imessage.jsonl").read_text()
    assert "CANARY" not in out.stderr + out.stdout + logs


def test_deleting_the_conversation_of_the_newest_messages_is_not_a_rebuild(tmp_path: Path) -> None:
    """The chat holding the last stored messages is deleted, one message arrives: 1 new, 0 duplicates, no source.reset."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 300, seed=21)
    conn = sqlite3.connect(db)
    chat = conn.execute("SELECT chat_id FROM chat_message_join WHERE message_id = 300").fetchone()[0]
    conn.execute("UPDATE chat_message_join SET chat_id = ? WHERE message_id > 290", (chat,))  # the last 10 in one chat
    conn.commit()
    conn.close()
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    conn = sqlite3.connect(db)
    doomed = [m for (m,) in conn.execute("SELECT message_id FROM chat_message_join WHERE chat_id = ?", (chat,))]
    conn.execute(f"DELETE FROM message WHERE ROWID IN ({','.join('?' * len(doomed))})", doomed)
    conn.execute("DELETE FROM chat_message_join WHERE chat_id = ?", (chat,))
    conn.commit()
    conn.close()
    assert len(doomed) >= 10
    imessage_samples.append(db, 1, seed=22)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    events = read_log(tmp_path / "state", "imessage")
    assert not [e for e in events if e["event"] == "source.reset"]
    assert (events[-1]["new"], events[-1]["dup"]) == (1, 0)


def test_a_truncated_attributed_body_keeps_its_blob_and_the_readable_start(tmp_path: Path) -> None:
    """A real damaged typedstream (declares 157 bytes, holds 17): the record gets the readable start marked partial,
    and the whole blob is stored beside it as <id>.typedstream for a better parser later."""
    blob = (Path(__file__).parent / "data" / "imessage" / "ExtraData.typedstream").read_bytes()
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=7)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE message SET text = NULL, attributedBody = ? WHERE ROWID = 2", (blob,))
    guid = conn.execute("SELECT guid FROM message WHERE ROWID = 2").fetchone()[0]
    conn.commit()
    conn.close()
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    objects = file_objects(tmp_path / "state" / "store")
    record = json.loads(objects[f"messages/imessage/{guid}.json"])
    assert record["text"] == "This is parsing  " and record["extra"]["text_partial"] is True
    assert objects[f"messages/imessage/{guid}.typedstream"] == blob
