"""Signal Desktop history (pollers/signal/desktop.py): `memex backfill` of a signal source with desktop_dir, on an
encrypted database the test builds in Signal Desktop's schema, into the same records as the live signal-cli poller."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from memex.records import encode_id, message_key, revision_key
from tests.conftest import Gate, file_objects, run_cli, write_config
from tests.core.test_backfill import interrupt_when, popen_cli
from tests.signal import signal_standin as sc
from tests.signal.signal_desktop_db import Desktop, key_cmd_script, wrap_key

T0 = 1744235749734
PHOTO = b"\xff\xd8\xff\xe0 a jpeg, plain on disk" * 50
PNG = b"\x89PNG\r\n\x1a\n encrypted at rest" * 300
PASSWORD = b"Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA=="


def build(root: Path) -> Desktop:
    """A Desktop folder with a 1:1 chat with Alice and a group: plain, edited, quoted, reacted, deleted and attachment messages."""
    d = Desktop(root, me=sc.ME)
    alice = d.conversation("private", service_id=sc.ALICE, profile="Alice", e164="+491700000001")
    d.conversation("private", service_id=sc.ME, profile="Me")
    group = d.conversation("group", group_id=sc.GROUP, name="Climbing")
    d.message(alice, "incoming", T0, "hi there", author=sc.ALICE, source="+491700000001",
              reactions=[{"emoji": "👍", "fromId": d.conversations[1]["doc"]["id"], "targetTimestamp": T0, "timestamp": T0 + 4}])  # fmt: skip
    d.message(alice, "outgoing", T0 + 2, "from my phone", sendStateByConversationId={alice: {"status": "Delivered"}})
    history = [
        {"body": "v3", "timestamp": T0 + 9, "received_at": 9},
        {"body": "v2", "timestamp": T0 + 8, "received_at": 8},
        {"body": "v1", "timestamp": T0 + 5, "received_at": 5},
    ]
    d.message(group, "incoming", T0 + 5, "v3", author=sc.ALICE, editHistory=history, editMessageTimestamp=T0 + 9)
    d.message(group, "incoming", T0 + 6, "quoting", author=sc.ALICE,
              quote={"id": T0 + 5, "authorAci": sc.ALICE, "text": "v1", "attachments": [], "isViewOnce": False,
                     "referencedMessageNotFound": False})  # fmt: skip
    d.message(group, "incoming", T0 + 7, None, author=sc.ALICE, deletedForEveryone=True, deletedForEveryoneTimestamp=T0 + 10,
              isErased=True)  # fmt: skip
    d.message(alice, "incoming", T0 + 11, "old layout", author=sc.ALICE, attachments=[d.plain_file(PHOTO)])
    new = d.message(alice, "incoming", T0 + 12, "new layout", author=sc.ALICE)
    d.attach_row(new, d.encrypted_file(PNG))
    d.message(alice, "keychange", T0 + 13, None, key_changed=alice)  # a notice, not a message
    return d


def config(tmp_path: Path, desktop: Path, **keys: Any) -> Path:
    """A signal source (stand-in signal-cli for live polls) whose history is the Desktop folder."""
    exe = sc.install(tmp_path / "sc")
    table = {"type": "signal", "account": sc.ACCOUNT, "executable": str(exe), "config_dir": str(tmp_path / "scdata"),
             "receive_timeout": 1, "desktop_dir": str(desktop), **keys}  # fmt: skip
    return write_config(tmp_path, {"sig": table})


def objects(tmp_path: Path, prefix: str) -> dict[str, dict[str, Any]]:
    """The store's JSON objects under ``prefix``."""
    return {k: json.loads(v) for k, v in file_objects(tmp_path / "state" / "store", prefix).items() if k.endswith(".json")}


def backfill(cfg: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run ``memex backfill sig --json``; returns (exit code, summary, stderr)."""
    proc = run_cli("backfill", "sig", "--json", *args, config=cfg)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


def test_desktop_rows_become_the_live_pollers_records(tmp_path: Path) -> None:
    """Plain key: every message row becomes its record under <ACI>:<sent ms> (outgoing: the account's own ACI, never the
    phone number), the group's id is its base64 groupId, edits are edit:<ms> revisions of the first version, a delete for
    everyone a delete:<ms> tombstone, reactions reaction:<reactor>:<ms> revisions; notices are skipped; attachments of both
    layouts (plain, and encrypted at rest with a localKey) are stored content-addressed by their plaintext."""
    cfg = config(tmp_path, build(tmp_path / "Signal").write())
    code, summary, err = backfill(cfg)
    assert code == 0, err
    msgs = objects(tmp_path, "messages/")
    by_id = {m["native_id"]: m for m in msgs.values()}
    expected = {f"{sc.ALICE}:{T0}", f"{sc.ME}:{T0 + 2}", *(f"{sc.ALICE}:{T0 + k}" for k in (5, 6, 7, 11, 12))}
    assert set(by_id) == expected
    assert all(key == message_key("sig", m["native_id"]) for key, m in msgs.items())
    out = by_id[f"{sc.ME}:{T0 + 2}"]
    assert out["sender"] == {"id": sc.ME, "name": "Me", "is_me": True} and out["conversation"]["id"] == sc.ALICE
    edited = by_id[f"{sc.ALICE}:{T0 + 5}"]
    assert edited["conversation"]["id"] == sc.GROUP and edited["text"] == "v1" and edited.get("revision") is None
    assert by_id[f"{sc.ALICE}:{T0 + 6}"]["reply_to"] == f"{sc.ALICE}:{T0 + 5}"
    revs = objects(tmp_path, "revisions/")
    edits = {revision_key("sig", f"{sc.ALICE}:{T0 + 5}", f"edit:{T0 + k}"): text for k, text in ((8, "v2"), (9, "v3"))}
    assert {k: revs[k]["text"] for k in edits} == edits
    assert revs[revision_key("sig", f"{sc.ALICE}:{T0 + 7}", f"delete:{T0 + 10}")]["deleted"] is True
    reaction = revs[revision_key("sig", f"{sc.ALICE}:{T0}", f"reaction:{sc.ME}:{T0 + 4}")]
    assert reaction["extra"]["reaction"] == {"emoji": "👍", "by": sc.ME, "remove": False}
    assert len(revs) == 4
    for nid, data in ((f"{sc.ALICE}:{T0 + 11}", PHOTO), (f"{sc.ALICE}:{T0 + 12}", PNG)):
        (att,) = by_id[nid]["attachments"]
        sha = hashlib.sha256(data).hexdigest()
        assert att["sha256"] == sha and att["size"] == len(data) and "missing" not in att
        assert (tmp_path / "state" / "store" / "attachments" / sha).read_bytes() == data
    assert summary["new"] == 11 and summary["quarantined"] == 0


@pytest.mark.parametrize("scheme", ["v11", "v10"])
def test_encrypted_key_is_unwrapped_with_the_password_key_cmd_prints(tmp_path: Path, scheme: str) -> None:
    """encryptedKey (v11 Linux: 1 PBKDF2 iteration; v10 macOS: 1003) is unwrapped with what key_cmd prints."""
    d = build(tmp_path / "Signal")
    desktop = d.write(config={"encryptedKey": wrap_key(d.key_hex, PASSWORD, scheme), "safeStorageBackend": "gnome_libsecret"})
    cfg = config(tmp_path, desktop, key_cmd=[str(key_cmd_script(tmp_path, PASSWORD))])
    code, summary, err = backfill(cfg)
    assert code == 0, err
    assert summary["new"] == 11


def test_a_wrong_key_or_password_is_one_clear_line_and_nothing_is_written(tmp_path: Path) -> None:
    """A key that does not open the database, a password that does not unwrap encryptedKey, and an encryptedKey with no
    key_cmd: exit 1, one line saying what to check (and SQLCipher's own log lines silenced), no secret in it, nothing
    stored."""
    d = build(tmp_path / "Signal")
    desktop = d.write()
    (desktop / "config.json").write_text(json.dumps({"key": "ab" * 32}))
    cfg = config(tmp_path, desktop)
    code, summary, err = backfill(cfg)
    assert code == 1 and "did not open it; check key_cmd" in summary["error"], err
    assert "ab" * 32 not in err + json.dumps(summary)
    (line,) = err.splitlines()  # memex's one line; SQLCipher's own ("ERROR CORE sqlcipher_page_cipher: hmac check
    assert "did not open it" in line and "sqlcipher_" not in err  # failed for pgno=1", ...) never reach stderr

    (desktop / "config.json").write_text(json.dumps({"encryptedKey": wrap_key(d.key_hex, PASSWORD, "v11")}))
    cfg = config(tmp_path, desktop, key_cmd=[str(key_cmd_script(tmp_path, b"not the password"))])
    code, summary, err = backfill(cfg, "--restart")
    assert code == 1 and 'did not unwrap "encryptedKey"; check key_cmd' in summary["error"], err
    assert "not the password" not in err + json.dumps(summary)

    cfg = config(tmp_path, desktop)
    code, summary, err = backfill(cfg, "--restart")
    assert code == 1 and "set key_cmd" in summary["error"], err
    assert not [p for p in (tmp_path / "state" / "store").rglob("*") if p.is_file()]


def test_a_live_message_and_the_same_message_from_desktop_are_one_object(tmp_path: Path) -> None:
    """signal-cli hands over Alice's message, her edit of a group message and her delete of another; Desktop holds the same:
    each is one object (the backfill finds them stored, as duplicates), the store holds Desktop's 11 records and no more."""
    cfg = config(tmp_path, build(tmp_path / "Signal").write())
    sc.queue(tmp_path / "sc", sc.message(sc.ALICE, T0, "hi there"),
             sc.envelope(sc.ALICE, T0 + 8, editMessage={"targetSentTimestamp": T0 + 5, "dataMessage": sc.data(T0 + 8, "v2")}),
             sc.envelope(sc.ALICE, T0 + 7, dataMessage=sc.data(T0 + 10, None, remoteDelete={"timestamp": T0 + 7})))  # fmt: skip
    poll = run_cli("poll", "sig", config=cfg)
    assert poll.returncode == 0, poll.stderr
    live = set(file_objects(tmp_path / "state" / "store", "messages/")) | set(file_objects(tmp_path / "state" / "store", "revisions/"))
    assert message_key("sig", f"{sc.ALICE}:{T0}") in live
    code, summary, err = backfill(cfg)
    assert code == 0, err
    assert summary["dup"] == 3  # the message, the edit revision and the tombstone were there already
    every = set(file_objects(tmp_path / "state" / "store", "messages/")) | set(file_objects(tmp_path / "state" / "store", "revisions/"))
    assert len(live) == 3 and live <= every and len(every) == 11  # Desktop's 11 records, the live three among them
    assert len([k for k in every if k.startswith("messages/") and encode_id(f"{sc.ALICE}:{T0}") in k]) == 1


def test_sigint_mid_backfill_then_the_same_command_finishes_exactly_once(tmp_path: Path) -> None:
    """SIGINT stops the Desktop walk (exit 130, checkpoint saved); the rerun resumes there and stores every record once."""
    d = Desktop(tmp_path / "Signal", me=sc.ME)
    alice = d.conversation("private", service_id=sc.ALICE, profile="Alice")
    total = 1000
    for i in range(total):
        d.message(alice, "incoming", T0 + i, f"message {i}", author=sc.ALICE)
    cfg = config(tmp_path, d.write())
    gate = Gate(tmp_path, 300)  # a test hold: the walk is provably in progress when the signal lands
    proc = popen_cli(cfg, "backfill", "sig", "--workers", "2", "--json", env=gate.env())
    out, err = interrupt_when(proc, lambda: gate.wait_held(proc), "the backfill to hold its 300th record")
    assert proc.returncode == 130, err
    first = json.loads(out)
    assert first["status"] == "stopped" and 0 < first["new"] < total
    code, second, err = backfill(cfg, "--workers", "2")
    assert code == 0, err
    assert second["resumed_from"] == first["checkpoint"]
    assert first["new"] + second["new"] == total and second["dup"] <= 4
    assert {m["native_id"] for m in objects(tmp_path, "messages/").values()} == {f"{sc.ALICE}:{T0 + i}" for i in range(total)}
