"""Object stores: a local folder and S3, both create-only by default.

Keys are store-relative (``messages/<source>/<id>.json``); a store adds its
own prefix. :meth:`put_new` writes only if the key is absent and reports
whether it did, so a replayed upload is a counted duplicate, never an error
and never an overwrite. Neither store imports boto3 or touches the network
until the first request, so an idle poll pays for neither.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol
from urllib.parse import unquote, urlsplit

from memex.errors import ConfigError

if TYPE_CHECKING:
    from memex.config import StoreConfig

TMP_DIR = ".memex-tmp"
CLIENTS = ("lean", "boto3")  # the S3 request paths [store] client may name
STALE_TMP_SECONDS = 3600.0


class ObjectStore(Protocol):
    """What the runner needs of a place to keep objects."""

    url: str

    def put_new(self, key: str, body: bytes) -> bool:
        """Create ``key`` with ``body`` unless it exists; True if created, False if it was there."""
        ...

    def put(self, key: str, body: bytes) -> None:
        """Create or replace ``key`` (used only by an explicit rewrite)."""
        ...

    def get(self, key: str) -> bytes | None:
        """Return the object's bytes, or None if it does not exist."""
        ...

    def sync(self) -> None:
        """Make every write so far durable; the runner calls it before saving a cursor."""
        ...

    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored."""
        ...

    def put_new_stream(self, key: str, open_body: Callable[[], IO[bytes]], size: int) -> bool:
        """Create ``key`` from a stream of ``size`` bytes unless it exists; True if created (content-addressed attachments)."""
        ...


def content_type(key: str) -> str:
    """The MIME type an object gets from its key's suffix."""
    if key.endswith(".json"):
        return "application/json"
    if key.endswith(".eml"):
        return "message/rfc822"
    return "application/octet-stream"


def open_store(cfg: StoreConfig, *, max_pool_connections: int = 10) -> ObjectStore:
    """Build the store a configuration names (no I/O, no boto3 import)."""
    parts = urlsplit(cfg.url)
    if parts.scheme == "file":
        from memex.store.files import FileStore

        return FileStore(Path(unquote(parts.path)))
    if parts.scheme == "s3":
        from memex.store.s3 import S3Store

        return S3Store(
            parts.netloc,
            parts.path,
            endpoint_url=cfg.endpoint_url,
            region=cfg.region,
            profile=cfg.profile,
            max_pool_connections=max_pool_connections,
            client=cfg.client,
        )
    raise ConfigError(f"unsupported store URL {cfg.url!r}; use file:///path or s3://bucket/prefix", key="store.url")
