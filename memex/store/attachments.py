"""Content-addressed attachments: the bytes of a file stored once, however many messages send it.

A poller that can reach an attachment's bytes hands the runner a
:class:`Content` next to the message; before the record is written, the
runner hashes the bytes, stores them create-only at
``attachments/<sha256>`` (so the same photo sent to five chats is stored
once, and a replay is a duplicate) and fills ``sha256`` and ``size`` into the
record's :class:`~memex.records.Attachment`. Bytes that are not there
(``FileNotFoundError``) mark the attachment ``missing``; they never fail the
message. The bytes are streamed, never read whole into memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Protocol

from memex.records import Attachment

CHUNK = 1 << 20


@dataclass
class Content:
    """The bytes of one attachment of a message.

    ``index`` is the position in ``message.attachments`` this fills in.
    ``open`` returns a fresh binary stream from the start each time it is
    called (it is read twice: once to hash, once to upload); it raises
    ``FileNotFoundError`` when the bytes are gone.
    """

    index: int
    open: Callable[[], IO[bytes]]


class StreamStore(Protocol):
    """What storing content needs of an object store."""

    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored (and, for a local store, durable once :meth:`sync` runs)."""
        ...

    def put_new_stream(self, key: str, open_body: Callable[[], IO[bytes]], size: int) -> bool:
        """Create ``key`` from a stream of ``size`` bytes unless it exists; True if created."""
        ...


def content_key(sha256: str) -> str:
    """The key of a stored attachment's bytes: ``attachments/<sha256 hex>``."""
    return f"attachments/{sha256}"


def digest(open_body: Callable[[], IO[bytes]]) -> tuple[str, int]:
    """SHA-256 (hex) and size of a stream, read in chunks."""
    import hashlib  # here, not at the top: an idle cron poll never hashes (start-up cost)

    h = hashlib.sha256()
    size = 0
    with open_body() as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def store_content(store: StreamStore, content: Content, attachment: Attachment) -> str:
    """Store one attachment's bytes content-addressed and record where in ``attachment``.

    Returns ``new``, ``dup`` (the same bytes were stored before) or
    ``missing`` (the bytes are gone; ``attachment["missing"]`` is set).
    """
    try:
        sha, size = digest(content.open)
    except FileNotFoundError:
        attachment["missing"] = True
        return "missing"
    attachment["sha256"] = sha
    attachment["size"] = size
    attachment.pop("missing", None)
    key = content_key(sha)
    if store.exists(key):
        return "dup"
    try:
        created = store.put_new_stream(key, content.open, size)
    except FileNotFoundError:  # removed between hashing and upload
        del attachment["sha256"]
        attachment["missing"] = True
        return "missing"
    return "new" if created else "dup"
