"""Object stores: create-only semantics on the file store and on S3 over HTTP."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from memex.config import StoreConfig
from memex.store import open_store
from memex.store.files import FileStore
from memex.store.objects import TMP_DIR


def test_file_store_is_create_only(tmp_path: Path) -> None:
    """put_new creates once; a second put_new reports a duplicate and leaves the first bytes; put replaces."""
    store = FileStore(tmp_path)
    assert store.put_new("messages/s/a.json", b"one") is True
    assert store.put_new("messages/s/a.json", b"two") is False
    assert store.get("messages/s/a.json") == b"one"
    store.put("messages/s/a.json", b"three")
    assert store.get("messages/s/a.json") == b"three"
    assert store.get("messages/s/missing.json") is None
    store.sync()
    assert stat.S_IMODE(os.stat(tmp_path / "messages/s/a.json").st_mode) == 0o600
    assert list((tmp_path / TMP_DIR).iterdir()) == []


def test_file_store_refuses_unsafe_keys(tmp_path: Path) -> None:
    """A key that could escape the store root is refused, not written."""
    import pytest

    from memex.errors import StoreError

    store = FileStore(tmp_path / "root")
    with pytest.raises(StoreError):
        store.put_new("messages/../../escape.json", b"x")
    assert not (tmp_path / "escape.json").exists()


def test_s3_store_create_only_over_http(any_s3: tuple[str, str]) -> None:
    """Against a real S3 endpoint, the second create of a key is a duplicate (412), not an error or overwrite."""
    s3_endpoint, s3_bucket = any_s3  # moto, then SeaweedFS
    store = open_store(StoreConfig(url=f"s3://{s3_bucket}/pre/fix", endpoint_url=s3_endpoint))
    assert store.put_new("messages/s/a.json", b"one") is True
    assert store.put_new("messages/s/a.json", b"two") is False
    assert store.get("messages/s/a.json") == b"one"
    store.put("messages/s/a.json", b"three")
    assert store.get("messages/s/a.json") == b"three"
    assert store.get("messages/s/none.json") is None
    import boto3

    keys = [o["Key"] for o in boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert keys == ["pre/fix/messages/s/a.json"]


def test_opening_an_s3_store_imports_no_boto3() -> None:
    """Building a store from config is free: boto3 is imported on the first request only."""
    code = (
        "import sys\n"
        "from memex.config import StoreConfig\n"
        "from memex.store import open_store\n"
        "open_store(StoreConfig(url='s3://b/p', endpoint_url='http://127.0.0.1:9'))\n"
        "print('boto3' in sys.modules, 'botocore' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "False"]
