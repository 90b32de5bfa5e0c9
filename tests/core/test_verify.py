"""``memex verify``: each kind of damage found on a file store and on S3 (moto), ``--repair``, exit codes, ``--json``."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.records import message_key, revision_key
from memex.runner import poll
from memex.verify import verify
from pollers.imessage import samples
from tests.conftest import run_cli, write_config

EDITED_ROWID = 3


@dataclass
class Index:
    """A polled iMessage source and raw access to its store (around memex, as damage would be done)."""

    cfg: memex_config.Config
    config_path: Path
    db: Path
    put: Callable[[str, bytes], None]
    get: Callable[[str], bytes | None]
    delete: Callable[[str], None]

    def guid(self, rowid: int) -> str:
        """The GUID of a chat.db row."""
        conn = sqlite3.connect(self.db)
        try:
            return str(conn.execute("SELECT guid FROM message WHERE ROWID = ?", (rowid,)).fetchone()[0])
        finally:
            conn.close()

    def key(self, rowid: int) -> str:
        """The record key of a chat.db row."""
        return message_key("im", self.guid(rowid))


def file_access(root: Path) -> tuple[Callable[[str, bytes], None], Callable[[str], bytes | None], Callable[[str], None]]:
    """put/get/delete straight on a file store's folder."""

    def put(key: str, body: bytes) -> None:
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(body)

    def get(key: str) -> bytes | None:
        return (root / key).read_bytes() if (root / key).exists() else None

    return put, get, lambda key: (root / key).unlink()


def s3_access(
    endpoint: str, bucket: str, prefix: str
) -> tuple[Callable[[str, bytes], None], Callable[[str], bytes | None], Callable[[str], None]]:
    """put/get/delete straight on the bucket with boto3."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)

    def get(key: str) -> bytes | None:
        try:
            return bytes(client.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read())
        except client.exceptions.NoSuchKey:
            return None

    return (
        (lambda key, body: client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=body)),
        get,
        (lambda key: client.delete_object(Bucket=bucket, Key=f"{prefix}/{key}")),
    )


@pytest.fixture(params=["file", "s3"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Index:
    """A chat.db of 40 messages (one edited) polled into a file store or a moto bucket."""
    db = tmp_path / "chat.db"
    samples.build(db, 40, seed=7)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE message SET date_edited = 700000000000000000 WHERE ROWID = ?", (EDITED_ROWID,))
    conn.commit()
    conn.close()
    sources = {"im": {"type": "imessage", "db": str(db), "attachments": False}}
    if request.param == "file":
        path = write_config(tmp_path, sources)
        access = file_access(tmp_path / "state" / "store")
    else:
        import boto3

        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"memex-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        path = write_config(tmp_path, sources, store={"url": f"s3://{bucket}/idx", "endpoint_url": endpoint})
        access = s3_access(endpoint, bucket, "idx")
    cfg = memex_config.load(path)
    assert poll(cfg, "im").new > 40
    return Index(cfg, path, db, *access)


def found(index: Index, **kw: Any) -> dict[str, Any]:
    """The JSON report of an in-process verify."""
    return verify(index.cfg, **kw).to_json()


def damage_of(report: dict[str, Any], source: str = "im") -> dict[str, int]:
    """The non-zero damage counts of one source."""
    return {k: n for k, n in report["sources"][source]["damage"].items() if n}


def test_a_sound_index_is_whole(index: Index) -> None:
    """Right after a poll nothing is damaged or missing: every row up to the cursor is listed and found."""
    report = found(index)
    assert report["whole"] is True
    im = report["sources"]["im"]
    assert im["inventory"] == "checked" and im["listed"] == 40 and im["records"] == 40 and im["revisions"] == 1
    assert damage_of(report) == {}


DAMAGES: list[tuple[str, str, Callable[[Index, str], None]]] = [
    ("empty", "empty", lambda ix, key: ix.put(key, b"")),
    ("not_json", "not_json", lambda ix, key: ix.put(key, b'{"source": "im", "native_id": ')),
    ("schema", "not_schema", lambda ix, key: ix.put(key, json.dumps({**json.loads(ix.get(key) or b""), "sender": None}).encode())),
    ("invented_type", "not_schema", lambda ix, key: ix.put(key, (ix.get(key) or b"").replace(b'"type":"message"', b'"type":"imessage"'))),
    ("key_mismatch", "key_mismatch", lambda ix, key: ix.put(key, ix.get(ix.key(5)) or b"")),
    ("missing", "missing_from_source", lambda ix, key: ix.delete(key)),
]


@pytest.mark.parametrize(("name", "kind", "harm"), DAMAGES, ids=[d[0] for d in DAMAGES])
def test_each_kind_of_damage_is_found_and_repaired(index: Index, name: str, kind: str, harm: Callable[[Index, str], None]) -> None:
    """A damaged or missing record is reported by kind (key named), and --repair restores the source's bytes."""
    key = index.key(9)
    sound = index.get(key)
    harm(index, key)
    report = found(index)
    assert report["whole"] is False
    assert damage_of(report) == {kind: 1}
    example = report["sources"]["im"]["examples"][kind][0]
    assert example.get("key") == key or example.get("native_id") == index.guid(9)
    repaired = found(index, repair=True)
    assert repaired["whole"] is True, repaired
    assert repaired["sources"]["im"]["found_before_repair"][kind] == 1
    assert index.get(key) == sound
    if name == "key_mismatch":  # the misplaced record was not lost: it is still at its own name
        assert index.get(index.key(5)) is not None


def test_a_revision_without_its_original_is_found_and_the_original_restored(index: Index) -> None:
    """Deleting an edited message's original leaves its revision orphaned; --repair stores the original again."""
    key = index.key(EDITED_ROWID)
    rev = revision_key("im", index.guid(EDITED_ROWID), "edit-700000000000000000")
    assert index.get(rev) is not None
    sound = index.get(key)
    index.delete(key)
    report = found(index)
    assert damage_of(report) == {"orphan_revision": 1, "missing_from_source": 1}
    assert report["sources"]["im"]["examples"]["orphan_revision"][0]["key"] == rev
    assert found(index, repair=True)["whole"] is True
    assert index.get(key) == sound


def test_a_deleted_revision_is_found_and_restored_where_the_source_lists_revisions(index: Index) -> None:
    """The edited message's revision deleted (its original kept): iMessage's inventory names each row's revisions, so
    verify reports it missing (native ID, ref and revision id) and --repair stores it again from chat.db."""
    rev = revision_key("im", index.guid(EDITED_ROWID), "edit-700000000000000000")
    sound = index.get(rev)
    assert sound is not None
    index.delete(rev)
    report = found(index)
    assert report["whole"] is False and damage_of(report) == {"missing_from_source": 1}
    example = report["sources"]["im"]["examples"]["missing_from_source"][0]
    assert example == {"native_id": index.guid(EDITED_ROWID), "ref": str(EDITED_ROWID), "revision": "edit-700000000000000000"}
    repaired = found(index, repair=True)
    assert repaired["whole"] is True and repaired["sources"]["im"]["repaired"] == {"restored": 1}, repaired
    assert index.get(rev) == sound


def test_a_tombstone_of_a_message_never_seen_is_counted_not_damage(index: Index) -> None:
    """A ``delete`` revision without an original (unsent before any poll read it) is counted apart: the index is whole.

    Messenger stores a message unsent before memex first read it as a tombstone only, and its text can never arrive
    (an older export read later still stores it); verify exited 1 on every such message, for ever. An ``edit``
    revision without its original is still damage (the test above).
    """
    doc = json.loads(index.get(revision_key("im", index.guid(EDITED_ROWID), "edit-700000000000000000")) or b"")
    doc["native_id"] = "never-seen"
    doc["revision"] = {**doc["revision"], "kind": "delete", "id": "delete-1"}
    index.put(revision_key("im", "never-seen", "delete-1"), json.dumps(doc).encode())
    report = found(index)
    assert report["whole"] is True, report
    assert report["sources"]["im"]["deleted_before_seen"] == 1 and damage_of(report) == {}


def test_an_attachment_that_does_not_hash_to_its_name_is_found_and_kept(index: Index) -> None:
    """Bytes under ``attachments/<sha256>`` that hash to something else are damage; --repair reports, never replaces them."""
    name = hashlib.sha256(b"the photo").hexdigest()
    index.put(f"attachments/{name}", b"something else")
    index.put(f"attachments/{hashlib.sha256(b'fine').hexdigest()}", b"fine")
    report = found(index)
    att = report["sources"]["(attachments)"]
    assert att["objects"] == 2 and att["damage"]["hash_mismatch"] == 1 and report["whole"] is False
    repaired = found(index, repair=True)
    assert repaired["whole"] is False
    assert "not repairable" in repaired["sources"]["(attachments)"]["not_repaired"][0]
    assert index.get(f"attachments/{name}") == b"something else"


def test_quarantined_records_are_reported_not_counted_as_damage(index: Index) -> None:
    """A quarantine entry is listed with its reason; the index is still whole (the record is accounted for)."""
    meta = {"source": "im", "native_id": "Q-1", "reason": "cannot render the record (ValueError)", "ref": "Q-1", "quarantined_at": "x"}
    index.put("quarantine/im/Q-1.json", json.dumps(meta).encode())
    index.put("quarantine/im/Q-1.raw", b"raw bytes")
    report = found(index)
    im = report["sources"]["im"]
    assert im["quarantined"] == 1 and im["quarantine_examples"][0]["reason"] == meta["reason"]
    assert report["whole"] is True


def test_cli_exit_codes_json_and_quiet(index: Index) -> None:
    """Exit 0 whole (-q: silent), 1 with a summary naming the key, --json for scripts, 2 for an unknown source."""
    whole = run_cli("verify", "-q", config=index.config_path)
    assert (whole.returncode, whole.stdout) == (0, "")
    key = index.key(4)
    index.put(key, b"")
    broken = run_cli("verify", config=index.config_path)
    assert broken.returncode == 1, broken.stderr
    assert "NOT whole" in broken.stdout and key in broken.stdout and "--repair" in broken.stdout
    assert len(broken.stdout.splitlines()) <= 24 and broken.stderr == ""
    as_json = run_cli("verify", "--json", "im", config=index.config_path)
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert set(doc) == {"store", "whole", "objects", "other_objects", "seconds", "repair", "sources", "temp_files"}
    assert doc["sources"]["im"]["damage"]["empty"] == 1 and doc["sources"]["im"]["examples"]["empty"][0]["key"] == key
    unknown = run_cli("verify", "nosuch", config=index.config_path)
    assert unknown.returncode == 2 and "nosuch" in unknown.stderr
    fixed = run_cli("verify", "--repair", config=index.config_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "replaced" in fixed.stdout


@pytest.mark.parametrize("client", ["lean", "boto3"])
def test_s3_listing_pages_through_every_key_under_the_prefix(s3_endpoint: str, s3_bucket: str, client: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """list_keys follows continuation tokens (pages of 2 here), strips the store prefix, and keeps other prefixes out."""
    from memex.s3 import listing
    from memex.store.s3 import S3Store

    store = S3Store(s3_bucket, "idx", endpoint_url=s3_endpoint, client=client)
    keys = [f"messages/s/{n}%2F{n}.json" for n in range(7)] + ["attachments/ab"]
    for key in keys:
        store.put_new(key, b"{}")
    S3Store(s3_bucket, "other", endpoint_url=s3_endpoint).put_new("messages/s/x.json", b"{}")
    monkeypatch.setattr(listing, "PAGE_KEYS", 2)
    assert sorted(store.list_keys("messages/")) == sorted(keys[:-1])
    assert sorted(store.list_keys()) == sorted(keys)
