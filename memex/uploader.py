"""Storing what a poller hands over: a record with its blobs and attachments (create-only), or a quarantine entry.

:class:`Uploader` is shared by the live poll (:mod:`memex.runner`) and the backfill (:mod:`memex.backfill`): the
same item is stored the same way whichever of them meets it first, so the overlap is absorbed as duplicates.
A record that cannot be turned into bytes is quarantined with its raw bytes; only the store's own failures
propagate (and stop the cursor before the item).
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

from memex.config import Config
from memex.deadline import Deadline
from memex.errors import describe_exc
from memex.hold import hold_from_env
from memex.records import Message, canonical_json, encode_id, message_key, repair_text
from memex.source import Failure, Item
from memex.state.cursors import utc_now
from memex.store import open_store
from memex.store.attachments import store_content
from memex.store.collisions import collision_key, same_record
from memex.store.objects import ObjectStore


def unrenderable(item: Item, exc: Exception) -> Item:
    """The item as a quarantine entry: a record that could not be turned into bytes, kept as raw bytes.

    The raw bytes are the item's first blob (the mail as received) or else the record rendered with every
    non-ASCII character escaped, which always encodes; the reason names the exception's type only.
    """
    message = item.message
    assert message is not None
    raw = next(iter(item.blobs.values()), None)
    if raw is None:
        raw = json.dumps(asdict(message), sort_keys=True, ensure_ascii=True, default=repr).encode()
    reason = f"cannot render the record ({describe_exc(exc)})"
    return Item(cursor=item.cursor, failure=Failure(native_id=message.native_id, reason=reason, raw=raw, ref=message.native_id))


class Uploader:
    """Stores items for one source: blobs, then the record (create-only), or quarantine."""

    def __init__(self, cfg: Config, source: str, log: Any, *, store: ObjectStore | None = None, deadline: Deadline | None = None) -> None:
        self.cfg = cfg
        self.source = source
        self.log = log
        self._store: ObjectStore | None = store  # given: shared by backfill's upload threads
        self.deadline = deadline  # a poll's: every request to the store is bounded by it
        self._hold = hold_from_env()  # None unless a test asked to hold an item (memex.hold)

    @property
    def store(self) -> ObjectStore:
        """The object store, opened on first use (an idle poll never opens it)."""
        if self._store is None:
            store = open_store(self.cfg.store)
            use_deadline = getattr(store, "use_deadline", None)
            if self.deadline is not None and use_deadline is not None:
                use_deadline(self.deadline)
            self._store = store
        return self._store

    @property
    def opened(self) -> bool:
        """Whether anything was sent to the store."""
        return self._store is not None

    def put(self, item: Item, *, rewrite: bool = False) -> str:
        """Store one item; return ``new``, ``dup``, ``rewritten`` or ``quarantined``.

        Whatever fails while the record is turned into bytes (key, JSON, encoding) quarantines that record
        with its raw bytes; only the store's own failures propagate (and stop the cursor before the item).
        """
        if self._hold is not None:
            self._hold.reached(self.deadline)
        message = item.message
        if message is not None:
            try:  # everything that turns the record into bytes, before anything is stored
                key = message.key()
                body = message.to_json()
                blobs = {key[: -len(".json")] + suffix: blob for suffix, blob in item.blobs.items()}
            except Exception as exc:
                item = unrenderable(item, exc)
            else:
                for content in item.contents:
                    store_content(self.store, content, message.attachments[content.index])
                if item.contents:  # the record names where the bytes went (sha256, size): render it again
                    body = message.to_json()
                if item.whole and message.revision is not None:
                    self._original_first(message)
                for blob_key, blob in blobs.items():
                    if rewrite:
                        self.store.put(blob_key, blob)
                    else:
                        self.store.put_new(blob_key, blob)
                if rewrite:
                    existing = self.store.get(key)
                    if existing == body:
                        return "dup"
                    self.store.put(key, body)
                    return "new" if existing is None else "rewritten"
                mine = message.extra.get("fingerprint")
                if isinstance(mine, str) and not self.store.put_new(key, body):
                    if self._stored_already(item, key, mine):
                        return "dup"  # the same record seen again
                    # Another record with the same ID (a reused Message-ID): kept beside the first (memex.store.collisions).
                    message.extra["collision_of"] = key
                    key = collision_key(key, mine)
                    body = message.to_json()
                    blobs = {key[: -len(".json")] + suffix: blob for suffix, blob in item.blobs.items()}
                    for blob_key, blob in blobs.items():
                        self.store.put_new(blob_key, blob)
                    return "new" if self.store.put_new(key, body) else "dup"
                elif isinstance(mine, str):
                    return "new"
                return "new" if self.store.put_new(key, body) else "dup"
        if item.failure is not None:
            failure = item.failure
            base = f"quarantine/{encode_id(self.source)}/{encode_id(failure.native_id)}"
            if failure.raw is not None:
                self.store.put_new(base + ".raw", failure.raw)
            meta = {
                "source": self.source,
                "native_id": failure.native_id,
                "reason": failure.reason,
                "ref": failure.ref,
                "quarantined_at": utc_now(),
            }
            self.store.put_new(base + ".json", canonical_json(meta))
            self.log.warning("record.quarantined", ref=failure.ref, native_id=repair_text(failure.native_id), reason=failure.reason)
            return "quarantined"
        return "skip"

    def _original_first(self, message: Message) -> None:
        """Never a revision without its original: a missing original is stored first, as this whole revision's record.

        One existence check per revision (a stat, or a HEAD on S3; revisions are rare). The original is written
        create-only before the revision, so no crash leaves the revision alone, and a replay finds both (duplicates).
        """
        key = message_key(message.source, message.native_id)
        if self.store.exists(key):
            return
        if self.store.put_new(key, replace(message, revision=None).to_json()):
            rid = message.revision["id"] if message.revision is not None else None
            self.log.info("revision.original_stored", native_id=repair_text(message.native_id), revision=rid)

    def _stored_already(self, item: Item, key: str, mine: str) -> bool:
        """Whether the record at ``key``, or a collision beside it stored under an earlier fingerprint rule, is ours."""
        suffix = next(iter(item.blobs), None)

        def ours(at: str) -> bool:
            found = same_record(
                self.store.get, at, mine, blob_suffix=suffix, refingerprint=item.refingerprint, earlier=item.earlier_fingerprints
            )
            return bool(found)

        if ours(key):
            return True
        here = collision_key(key, mine)
        return any(ours(collision_key(key, fp)) for fp in item.earlier_fingerprints if collision_key(key, fp) != here)

    def sync(self) -> None:
        """Make everything stored so far durable (before a cursor moves past it)."""
        if self._store is not None:
            self._store.sync()
