"""Where messages go: the file and S3 object stores, content-addressed attachments, create-only writes.

:func:`open_store` builds the store a configuration names; the stores themselves are imported only then.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from memex.errors import ConfigError

if TYPE_CHECKING:
    from memex.config import StoreConfig
    from memex.store.objects import ObjectStore


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
