"""iMessage attachments' bytes are stored content-addressed: once for many messages, missing files recorded, optional."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from pollers.imessage import samples as imessage_samples
from tests.conftest import file_objects, run_cli, write_config


def _attach(db: Path, links: dict[int, str | None]) -> None:
    """Give message ROWID -> an attachment row whose filename is the given path (None: no file name)."""
    conn = sqlite3.connect(db)
    for rowid, filename in links.items():
        cur = conn.execute("INSERT INTO attachment (guid, filename, mime_type, transfer_name, total_bytes) VALUES (?, ?, ?, ?, ?)",
                           (f"att-{rowid}", filename, "image/jpeg", f"IMG_{rowid}.jpg", 0))  # fmt: skip
        conn.execute("INSERT INTO message_attachment_join (message_id, attachment_id) VALUES (?, ?)", (rowid, cur.lastrowid))
        conn.execute("UPDATE message SET cache_has_attachments = 1 WHERE ROWID = ?", (rowid,))
    conn.commit()
    conn.close()


def test_the_same_photo_in_two_messages_is_stored_once_and_a_missing_file_is_recorded(tmp_path: Path) -> None:
    """Two messages sending the same file: one attachments/<sha256> object referenced by both; a file iCloud kept only
    as metadata is `missing`, and the message is stored anyway."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 6, seed=41)
    photo = tmp_path / "Attachments" / "ab" / "IMG.jpg"
    photo.parent.mkdir(parents=True)
    photo.write_bytes(b"\xff\xd8 jpeg bytes " * 1000)
    _attach(db, {2: str(photo), 3: str(photo), 4: str(tmp_path / "Attachments" / "gone.jpg")})
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    sha = hashlib.sha256(photo.read_bytes()).hexdigest()
    stored = file_objects(tmp_path / "state" / "store", prefix="attachments/")
    assert stored == {f"attachments/{sha}": photo.read_bytes()}
    records = [json.loads(b) for b in file_objects(tmp_path / "state" / "store").values()]
    atts = {a["id"]: a for r in records for a in r["attachments"]}
    assert atts["att-2"]["sha256"] == atts["att-3"]["sha256"] == sha and atts["att-2"]["size"] == photo.stat().st_size
    assert atts["att-4"]["missing"] is True and "sha256" not in atts["att-4"]


def test_attachment_contents_can_be_switched_off(tmp_path: Path) -> None:
    """`attachments = false`: metadata only, no attachments/ objects."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=42)
    photo = tmp_path / "IMG.jpg"
    photo.write_bytes(b"bytes")
    _attach(db, {2: str(photo)})
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db), "attachments": False}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert file_objects(tmp_path / "state" / "store", prefix="attachments/") == {}


def _peak_kib(cfg: Path) -> int:
    """Run `memex poll imessage` in a subprocess and return its own peak resident memory (VmHWM, KiB)."""
    import subprocess
    import sys

    probe = ("import atexit, runpy, sys\n"
             "atexit.register(lambda: sys.stderr.write(next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))))\n"
             f"sys.argv = ['memex', '--config', {str(cfg)!r}, 'poll', 'imessage']\n"
             "runpy.run_module('memex', run_name='__main__', alter_sys=True)\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stderr.rsplit("VmHWM:", 1)[1].split()[0])


def test_a_huge_attachment_is_streamed_without_raising_peak_memory(tmp_path: Path) -> None:
    """A 256 MiB video (a sparse file: the 2 GB case scaled down) is hashed and stored in chunks: the poll's peak
    memory stays within 32 MiB of the same poll storing a 1 KiB photo (reading it whole would add 256 MiB)."""
    import pytest

    if not Path("/proc/self/status").exists():
        pytest.skip("peak memory is read from /proc/self/status (Linux)")
    peaks = {}
    for label, size in (("small", 1024), ("huge", 256 << 20)):
        d = tmp_path / label
        d.mkdir()
        db = d / "chat.db"
        imessage_samples.build(db, 3, seed=43)
        video = d / "IMG_0001.MOV"
        with video.open("wb") as f:
            f.truncate(size)
        _attach(db, {2: str(video)})
        peaks[label] = _peak_kib(write_config(d, {"imessage": {"type": "imessage", "db": str(db)}}))
        stored = file_objects(d / "state" / "store", prefix="attachments/")
        assert [len(v) for v in stored.values()] == [size]
    assert peaks["huge"] - peaks["small"] < 32 * 1024, peaks
