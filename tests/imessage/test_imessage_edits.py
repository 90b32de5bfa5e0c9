"""iMessage edits and unsends become revisions; the original object is never touched.

The edit histories are real ``message_summary_info`` plists from ReagentX/imessage-exporter's test data
(tests/imessage/data/imessage/); the expected texts and times are what that project's own parser asserts for them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from pollers.imessage import samples as imessage_samples
from pollers.imessage.edits import edit_history
from tests.conftest import assert_valid, file_objects, read_log, run_cli, write_config

DATA = Path(__file__).parent / "data" / "imessage"
EDITED = (DATA / "Edited.plist").read_bytes()
NS = 1_000_000_000


def test_real_edit_histories_decode_as_the_reference_parser_says() -> None:
    """Edited.plist: 4 versions; EditedToLinkAndBack.plist: 3; Deleted.plist: none (texts and seconds as imessage-exporter asserts)."""
    assert [(v.ns // NS, v.text) for v in edit_history(EDITED)] == [
        (690513474, "First message  "), (690513480, "Edit 1"), (690513485, "Edit 2"), (690513494, "Edited message")]  # fmt: skip
    assert [v.text for v in edit_history((DATA / "EditedToLinkAndBack.plist").read_bytes())] == [
        "This is a normal message", "Edit to a url https://github.com/ReagentX/imessage-exporter/issues/10",
        "And edit it back to a normal message..."]  # fmt: skip
    assert edit_history((DATA / "Deleted.plist").read_bytes()) == []
    assert edit_history(b"not a plist") == []


def _objects(tmp_path: Path) -> dict[str, dict[str, Any]]:
    return {k: json.loads(v) for k, v in file_objects(tmp_path / "state" / "store", prefix="").items() if k.endswith(".json")}


def _edit(db: Path, rowid: int, **cols: Any) -> str:
    conn = sqlite3.connect(db)
    sets = ", ".join(f"{k} = ?" for k in cols)
    conn.execute(f"UPDATE message SET {sets} WHERE ROWID = ?", (*cols.values(), rowid))
    guid = conn.execute("SELECT guid FROM message WHERE ROWID = ?", (rowid,)).fetchone()[0]
    conn.commit()
    conn.close()
    return str(guid)


def test_an_edit_and_an_unsend_on_a_live_database_become_revisions_of_untouched_originals(tmp_path: Path) -> None:
    """Between polls a stored message is edited (3 later versions) and another unsent: 3 edit revisions and 1 tombstone,
    create-only under revisions/<source>/<id>/; the originals are byte for byte as first stored; a replay stores nothing."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 5, seed=31)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    before = {k: v for k, v in file_objects(tmp_path / "state" / "store", prefix="").items() if k.startswith("messages/")}
    edited = _edit(db, 3, text="Edited message", date_edited=690513494 * NS, message_summary_info=EDITED)
    unsent = _edit(db, 4, text=None, attributedBody=None, date_retracted=690513600 * NS)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    objects = _objects(tmp_path)
    revs = {k: v for k, v in objects.items() if k.startswith("revisions/")}
    mine = sorted((v["revision"]["id"], v["revision"]["kind"], v["text"]) for v in revs.values() if v["native_id"] == edited)
    assert mine == [(f"edit-{690513480 * NS}", "edit", "Edit 1"), (f"edit-{690513485 * NS}", "edit", "Edit 2"),
                    (f"edit-{690513494 * NS}", "edit", "Edited message")]  # fmt: skip
    (tomb,) = [v for v in revs.values() if v["native_id"] == unsent]
    assert tomb["deleted"] is True and tomb["text"] is None and tomb["revision"]["kind"] == "delete"
    assert all(k.startswith(f"revisions/imessage/{v['native_id']}/") for k, v in revs.items())
    assert_valid(objects)  # originals, edits and the tombstone: memex.message/1
    after = {k: v for k, v in file_objects(tmp_path / "state" / "store", prefix="").items() if k.startswith("messages/")}
    assert after == before  # nothing overwritten
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert read_log(tmp_path / "state", "imessage")[-1]["status"] == "idle" and len(_objects(tmp_path)) == len(objects)


def test_an_edit_made_while_memex_was_off_keeps_the_first_version_as_the_original(tmp_path: Path) -> None:
    """First seen already edited: the original object holds the first version, each later version is a revision."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=32)
    guid = _edit(db, 2, text="Edited message", date_edited=690513494 * NS, message_summary_info=EDITED)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    objects = _objects(tmp_path)
    assert objects[f"messages/imessage/{guid}.json"]["text"] == "First message  "
    texts = sorted(v["text"] for k, v in objects.items() if k.startswith(f"revisions/imessage/{guid}/"))
    assert texts == ["Edit 1", "Edit 2", "Edited message"]


def test_an_edit_followed_by_a_backlog_longer_than_the_window_is_not_lost(tmp_path: Path) -> None:
    """A stored message is edited, then memex is off while more than EDIT_WINDOW_ROWS messages arrive: the edit is
    still stored (the window reaches back to where the last change check stood, not only to the newest rows)."""
    from pollers.imessage import poller as imessage

    db = tmp_path / "chat.db"
    imessage_samples.build(db, 20, seed=33)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    edited = _edit(db, 20, text="Edited message", date_edited=690513494 * NS, message_summary_info=EDITED)
    imessage_samples.append(db, imessage.EDIT_WINDOW_ROWS + 50, seed=34)
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    revs = [v for k, v in _objects(tmp_path).items() if k.startswith(f"revisions/imessage/{edited}/")]
    assert sorted(v["text"] for v in revs) == ["Edit 1", "Edit 2", "Edited message"]
