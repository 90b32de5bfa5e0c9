"""Never a revision without its original: the core's guard when a whole revision is stored, on the file store and on S3."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import pytest

from memex.records import Message, Revision, message_key, revision_key
from memex.source import Item
from memex.store.files import FileStore
from memex.store.objects import ObjectStore
from memex.store.s3 import S3Store
from memex.uploader import Uploader
from tests.conftest import Log


@pytest.fixture(params=["file", "s3"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> ObjectStore:
    """A file store, and an S3 store on moto over HTTP."""
    if request.param == "file":
        return FileStore(tmp_path / "store")
    endpoint, bucket = request.getfixturevalue("s3_endpoint"), request.getfixturevalue("s3_bucket")
    return S3Store(bucket, "pfx", endpoint_url=endpoint, region="us-east-1", retry_base_delay=0.01)


def _revision(text: str, rid: str = "edit-1") -> Message:
    return Message(source="src", type="message", native_id="chat/42", sent_at="2026-01-05T09:00:00Z", text=text,
                   edited_at="2026-01-05T10:00:00Z", revision=Revision(id=rid, kind="edit", at="2026-01-05T10:00:00Z"))  # fmt: skip


def _uploader(store: ObjectStore) -> tuple[Uploader, Log]:
    log = Log()
    return Uploader(cast(Any, None), "src", log, store=store), log


def test_a_whole_revision_whose_original_is_missing_stores_the_original_first(store: ObjectStore) -> None:
    """The original is stored as the revision's record without ``revision``, then the revision; a replay is a duplicate
    of both (one existence check, nothing written twice), and the stand-in is logged once, without the text."""
    up, log = _uploader(store)
    rev = _revision("edited text")
    assert up.put(Item(cursor=None, message=rev, whole=True)) == "new"
    up.sync()
    original = store.get(message_key("src", "chat/42"))
    assert original is not None and b'"revision"' not in original and b"edited text" in original
    assert original == Message(**{**asdict(rev), "revision": None}).to_json()
    assert store.get(revision_key("src", "chat/42", "edit-1")) == rev.to_json()
    assert up.put(Item(cursor=None, message=_revision("edited text"), whole=True)) == "dup"
    up.sync()
    assert [e for e, _ in log.events] == ["revision.original_stored"]
    assert "edited text" not in repr(log.events)
    assert sorted(store.list_keys()) == sorted([message_key("src", "chat/42"), revision_key("src", "chat/42", "edit-1")])


def test_an_original_already_stored_is_never_touched(store: ObjectStore) -> None:
    """A whole revision of a stored message adds only the revision: the original keeps its first bytes."""
    up, log = _uploader(store)
    first = Message(source="src", type="message", native_id="chat/42", sent_at="2026-01-05T09:00:00Z", text="first text")
    assert up.put(Item(cursor=None, message=first)) == "new"
    up.sync()
    assert up.put(Item(cursor=None, message=_revision("second text"), whole=True)) == "new"
    up.sync()
    assert store.get(message_key("src", "chat/42")) == first.to_json() and log.events == []


def test_a_partial_revision_never_stands_in_for_its_original(store: ObjectStore) -> None:
    """A revision not marked whole (a reaction, a tombstone, or a source that can still bring the true original) is stored
    alone: a stand-in original would block the true one forever, since originals are create-only."""
    up, log = _uploader(store)
    assert up.put(Item(cursor=None, message=_revision("a reaction's record"))) == "new"
    up.sync()
    assert list(store.list_keys("messages/")) == [] and log.events == []
