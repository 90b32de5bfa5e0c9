"""The core's revision model and content-addressed attachments, on the file store and on S3 over HTTP."""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any

import pytest

from memex.records import Attachment, Message, Revision, message_key, revision_key
from memex.store.attachments import Content, content_key, store_content
from memex.store.files import FileStore
from memex.store.objects import ObjectStore
from memex.store.s3 import S3Store
from tests.conftest import s3_objects


def _message(**kw: object) -> Message:
    return Message(source="src", type="message", native_id="id/1", sent_at=None, text="hello", **kw)  # type: ignore[arg-type]


def test_original_bytes_unchanged_and_revision_keyed_under_original() -> None:
    """An original has no ``revision`` field (old records keep their bytes); a revision lives under the original's key."""
    original = _message()
    assert "revision" not in original.to_dict()
    assert original.key() == message_key("src", "id/1") == "messages/src/id%2F1.json"
    rev = _message(revision=Revision(id="2026-01-01T00:00:00Z", kind="edit", at="2026-01-01T00:00:00Z"))
    assert rev.key() == revision_key("src", "id/1", "2026-01-01T00:00:00Z")
    assert rev.key().startswith("revisions/src/id%2F1/")
    assert rev.to_dict()["revision"]["kind"] == "edit"
    assert rev.to_dict()["native_id"] == "id/1"  # the original is found from the revision


def _stores(tmp_path: Path, request: pytest.FixtureRequest) -> ObjectStore:
    if request.param == "file":
        return FileStore(tmp_path / "store")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    return S3Store(bucket, "pfx", endpoint_url=endpoint, region="us-east-1", retry_base_delay=0.01)


@pytest.fixture(params=["file", "s3"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> ObjectStore:
    """A file store and an S3 store on moto."""
    return _stores(tmp_path, request)


def test_same_bytes_stored_once(store: ObjectStore, tmp_path: Path) -> None:
    """The same attachment sent with two messages is one object, filled into both records by hash and size."""
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"\xff\xd8" + b"x" * 100_000)
    first, second = Attachment(id="a1", filename="photo.jpg"), Attachment(id="a2", filename="copy.jpg")
    assert store_content(store, Content(0, lambda: photo.open("rb")), first) == "new"
    assert store_content(store, Content(0, lambda: photo.open("rb")), second) == "dup"
    assert first["sha256"] == second["sha256"] and first["size"] == second["size"] == 100_002
    assert store.get(content_key(first["sha256"])) == photo.read_bytes()


def test_missing_bytes_are_recorded_not_raised(store: ObjectStore, tmp_path: Path) -> None:
    """An attachment whose file is gone is marked missing; nothing is stored and nothing raises."""
    gone = tmp_path / "gone.heic"
    att = Attachment(id="a", filename="gone.heic")

    def opener() -> IO[bytes]:
        return gone.open("rb")

    assert store_content(store, Content(0, opener), att) == "missing"
    assert att["missing"] is True and "sha256" not in att


def test_stream_is_read_in_chunks(tmp_path: Path) -> None:
    """The file store copies a stream without one read of the whole body (bounded memory for big files)."""
    sizes: list[int] = []

    class Counting(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            sizes.append(-1 if n is None else n)
            return super().read(n)

    data = b"y" * (3 << 20)
    store = FileStore(tmp_path / "s")
    att = Attachment(id="big")
    store_content(store, Content(0, lambda: Counting(data)), att)
    assert sizes and all(0 < n <= 1 << 20 for n in sizes)
    assert store.get(content_key(att["sha256"])) == data


def test_a_large_attachment_goes_up_in_parts_create_only(any_s3: tuple[str, str], tmp_path: Path) -> None:
    """Past the multipart threshold the bytes go in parts (read one part at a time) and the completion is create-only
    (If-None-Match: * on CompleteMultipartUpload, on moto and on SeaweedFS): the same content again is a duplicate,
    and the object is byte-identical."""
    s3_endpoint, s3_bucket = any_s3
    from memex.config import StoreConfig
    from memex.s3 import multipart as s3multipart
    from memex.store import open_store

    big = tmp_path / "video.mov"
    with big.open("wb") as f:
        for i in range(12):
            f.write(bytes([i]) * (1024 * 1024))
    store = open_store(StoreConfig(url=f"s3://{s3_bucket}/p", endpoint_url=s3_endpoint))
    reads: list[int] = []

    def opener() -> Any:
        fh = big.open("rb")
        real = fh.read

        def read(n: int = -1) -> bytes:
            data = real(n)
            reads.append(len(data))
            return data

        fh.read = read  # type: ignore[method-assign]
        return fh

    original = s3multipart.MULTIPART_THRESHOLD, s3multipart.PART_SIZE
    s3multipart.MULTIPART_THRESHOLD, s3multipart.PART_SIZE = 8 * 1024 * 1024, 5 * 1024 * 1024
    try:
        first, second = Attachment(id="a"), Attachment(id="b")
        assert store_content(store, Content(0, opener), first) == "new"
        assert store_content(store, Content(0, opener), second) == "dup"
        assert store.put_new_stream(f"attachments/{first['sha256']}", opener, 12 * 1024 * 1024) is False  # completion refused: 412
        assert max(reads) <= 5 * 1024 * 1024  # one part at a time, never the whole file
    finally:
        s3multipart.MULTIPART_THRESHOLD, s3multipart.PART_SIZE = original
    assert s3_objects(s3_endpoint, s3_bucket, "p/attachments/") == {f"p/attachments/{first['sha256']}": big.read_bytes()}
