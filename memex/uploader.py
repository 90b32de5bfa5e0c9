"""Storing what a poller hands over: a record with its blobs and attachments (create-only), or a quarantine entry.

:class:`Uploader` is shared by the live poll (:mod:`memex.runner`) and the backfill (:mod:`memex.backfill`): the
same item is stored the same way whichever of them meets it first, so the overlap is absorbed as duplicates.
Every record and revision is checked against the published schema (:mod:`memex.schema`) before anything of it is
stored; one that does not conform, or cannot be turned into bytes, is quarantined with its raw bytes and the reason,
never stored. Only the store's own failures propagate (and stop the cursor before the item).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, replace
from typing import Any

from memex.config import Config
from memex.deadline import Deadline
from memex.errors import describe_exc
from memex.hold import hold_from_env
from memex.records import SCHEMA, Message, canonical_json, encode_id, message_key, repair_text
from memex.schema import problem as schema_problem
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
    return quarantined(item, f"cannot render the record ({describe_exc(exc)})")


def nonconforming(item: Item, why: str) -> Item:
    """The item as a quarantine entry: a record that breaks the schema (``why``: the validator's message, no values)."""
    return quarantined(item, f"the record does not conform to the schema {SCHEMA}: {why}")


def quarantined(item: Item, reason: str) -> Item:
    """The item's record as a quarantine entry with ``reason``: its first blob, or else the record as escaped JSON.

    A revision gets an entry of its own beside its original's (``<id> revision <revision id>``), so two
    revisions of one message that both fail are two entries.
    """
    message = item.message
    assert message is not None
    raw = next(iter(item.blobs.values()), None)
    if raw is None:
        raw = json.dumps(asdict(message), sort_keys=True, ensure_ascii=True, default=repr).encode()
    nid = message.native_id if isinstance(message.native_id, str) else repr(message.native_id)
    rev = message.revision
    if isinstance(rev, dict):
        nid = f"{nid} revision {rev.get('id')}"
    return Item(cursor=item.cursor, failure=Failure(native_id=nid, reason=reason, raw=raw, ref=nid))


def conforms(message: Message) -> tuple[dict[str, object], str | None]:
    """The record as a dict and why it breaks the schema (None: it conforms); the one check before a record is stored."""
    doc = message.to_dict()
    return doc, schema_problem(doc)


def _use_log(store: ObjectStore, log: Any) -> None:
    """Let a store that logs (the file store: ``object.repaired``, ``store.flush``) log through the source's logger."""
    use_log = getattr(store, "use_log", None)
    if use_log is not None:
        use_log(log)


Stored = bytes | dict[str, Any]  # a record handed to the search index: its bytes, or the dict they were made from


def same_when_read(body: bytes) -> bool:
    """Whether ``json.loads(body)`` gives back the dict ``body`` was rendered from: not when rendering replaced a lone
    surrogate with U+FFFD (:func:`memex.records.canonical_json`), nor for a record holding U+FFFD at all (rare: the
    check is one search of the bytes). The dict's arrays may be tuples (a source's own), read as lists by the index."""
    return b"\xef\xbf\xbd" not in body


class Uploader:
    """Stores items for one source: blobs, then the record (create-only), or quarantine."""

    def __init__(self, cfg: Config, source: str, log: Any, *, store: ObjectStore | None = None, deadline: Deadline | None = None) -> None:
        self.cfg = cfg
        self.source = source
        self.log = log
        self._store: ObjectStore | None = store  # given: shared by backfill's upload threads
        self.deadline = deadline  # a poll's: every request to the store is bounded by it
        self._hold = hold_from_env()  # None unless a test asked to hold an item (memex.hold)
        # (key, record) of each record stored or found already stored, for the search index (memex.search.build): the
        # record as the dict its bytes were made from when they are exactly that dict (no json.loads of them again),
        # else the bytes. None: nobody asked. Appended from several threads in a backfill (list.append is atomic).
        self.stored: list[tuple[str, Stored]] | None = None
        self._stored_lock = threading.Lock()
        if store is not None:
            _use_log(store, log)

    @property
    def store(self) -> ObjectStore:
        """The object store, opened on first use (an idle poll never opens it)."""
        if self._store is None:
            store = open_store(self.cfg.store)
            use_deadline = getattr(store, "use_deadline", None)
            if self.deadline is not None and use_deadline is not None:
                use_deadline(self.deadline)
            _use_log(store, self.log)
            self._store = store
        return self._store

    @property
    def repaired(self) -> int:
        """Objects found damaged at their name (empty, truncated) and replaced by this uploader's store; 0 on S3."""
        return int(getattr(self._store, "repaired", 0))

    @property
    def opened(self) -> bool:
        """Whether anything was sent to the store."""
        return self._store is not None

    def put(self, item: Item, *, rewrite: bool = False) -> str:
        """Store one item; return ``new``, ``dup``, ``rewritten`` or ``quarantined``.

        A record that breaks the schema, or fails while it is turned into bytes (key, JSON, encoding), is
        quarantined with its raw bytes and nothing else of it is stored; only the store's own failures propagate
        (and stop the cursor before the item).
        """
        if self._hold is not None:
            self._hold.reached(self.deadline)
        message = item.message
        if message is not None:
            try:  # everything that checks the record and turns it into bytes, before anything is stored
                doc, why = conforms(message)
                if why is not None:
                    item = nonconforming(item, why)
                else:
                    key = message.key()
                    body = canonical_json(doc)
                    blobs = {key[: -len(".json")] + suffix: blob for suffix, blob in item.blobs.items()}
            except Exception as exc:
                item = unrenderable(item, exc)
            if item.message is not None:
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
                    self._handed(key, body)
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
                    if self.store.put_new(key, body):
                        self._handed(key, body)
                        return "new"
                    return "dup"
                elif isinstance(mine, str):
                    self._handed(key, body, None if item.contents else doc)
                    return "new"
                outcome = "new" if self.store.put_new(key, body) else "dup"
                self._handed(
                    key, body, None if item.contents else doc
                )  # a duplicate too: stored before a crash, it may not be in the index yet
                return outcome
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

    def _handed(self, key: str, body: bytes, doc: dict[str, Any] | None = None) -> None:
        """Hand a stored record to the index: ``doc`` (the dict ``body`` was rendered from, by :func:`canonical_json`,
        unchanged since) when reading ``body`` back gives the same, else ``body``."""
        if self.stored is not None:
            with self._stored_lock:
                self.stored.append((key, doc if doc is not None and same_when_read(body) else body))

    def take_stored(self) -> list[tuple[str, Stored]]:
        """What was handed over since the last call (each record once), and start a new list."""
        with self._stored_lock:
            if not self.stored:
                return []
            taken, self.stored = self.stored, []
            return taken

    def _original_first(self, message: Message) -> None:
        """Never a revision without its original: a missing original is stored first, as this whole revision's record.

        One existence check per revision (a stat, or a HEAD on S3; revisions are rare). The original is written
        create-only before the revision, so no crash leaves the revision alone, and a replay finds both (duplicates).
        """
        key = message_key(message.source, message.native_id)
        if self.store.exists(key):
            return
        original = replace(message, revision=None).to_json()
        if self.store.put_new(key, original):
            self._handed(key, original)
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
