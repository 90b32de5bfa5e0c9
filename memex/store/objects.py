"""Object stores: a local folder and S3, both create-only by default.

Keys are store-relative (``messages/<source>/<id>.json``); a store adds its
own prefix. :meth:`put_new` writes only if the key is absent and reports
whether it did, so a replayed upload is a counted duplicate, never an error
and never an overwrite. Neither store imports boto3 or touches the network
until the first request, so an idle poll pays for neither. :func:`memex.store.open_store` builds one from the
configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, Protocol

TMP_DIR = ".memex-tmp"
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

    def list_keys(self, prefix: str = "") -> Iterator[str]:
        """Every stored key under ``prefix`` (store-relative), streamed: never the whole list in memory."""
        ...

    def replace_damaged(self, key: str, body: bytes) -> None:
        """Replace an object found damaged (empty, not JSON, not the schema) atomically; never used on a sound one."""
        ...
