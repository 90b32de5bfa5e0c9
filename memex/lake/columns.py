"""A stored record as one row of the lake's table: every field of the record schema, typed for analytical engines.

One row per stored record version (an original at ``messages/...`` or a revision at ``revisions/...``), with:

- the record's own fields: ``schema``, ``source``, ``type``, ``native_id``, ``conversation`` and ``sender`` as
  structs, ``sent_at`` and ``edited_at`` as UTC timestamps (microseconds), ``text``, ``attachments`` as a list of
  structs (an attached message's description as JSON text), ``reply_to``, ``deleted``, ``extra`` as JSON text (the
  one open object: its keys differ per source, so a struct would change the table's schema with every new key);
- ``revision`` as a struct (null on an original);
- what the table adds: ``key`` (the object's key in the store, unique in the table), ``message_key`` (the key of the
  original this version belongs to: its own key for an original), ``is_current`` (this version is its message's
  latest: the latest revision by time, then key, as the search index orders them; the original when it has none),
  and the partition columns ``month`` (``YYYY-MM`` of ``sent_at`` in UTC, else of the revision's time, else
  ``unknown``) beside ``source``.

Imported only by the lake (pyarrow is an optional extra, ``memex[lake]``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from memex.search.rows import revision_parent, timestamp

PARTITIONS = ["source", "month"]
UNKNOWN_MONTH = "unknown"

_TS = pa.timestamp("us", tz="UTC")
ATTACHMENT = pa.struct(
    [
        ("id", pa.string()),
        ("filename", pa.string()),
        ("mime_type", pa.string()),
        ("size", pa.int64()),
        ("sha256", pa.string()),
        ("missing", pa.bool_()),
        ("message", pa.string()),
    ]
)
SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("message_key", pa.string()),
        ("is_current", pa.bool_()),
        ("source", pa.string()),
        ("month", pa.string()),
        ("schema", pa.string()),
        ("type", pa.string()),
        ("native_id", pa.string()),
        ("conversation", pa.struct([("id", pa.string()), ("name", pa.string()), ("participants", pa.list_(pa.string()))])),
        ("sender", pa.struct([("id", pa.string()), ("name", pa.string()), ("is_me", pa.bool_())])),
        ("sent_at", _TS),
        ("edited_at", _TS),
        ("text", pa.string()),
        ("attachments", pa.list_(ATTACHMENT)),
        ("reply_to", pa.string()),
        ("deleted", pa.bool_()),
        ("extra", pa.string()),
        ("revision", pa.struct([("id", pa.string()), ("kind", pa.string()), ("at", _TS)])),
    ]
)


def when(value: Any) -> datetime | None:
    """An RFC 3339 time as an aware UTC datetime, or None (absent, unreadable, or out of a timestamp's range)."""
    ts = timestamp(value)
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts, UTC)
    except (OverflowError, ValueError, OSError):
        return None


def month_of(*times: datetime | None) -> str:
    """The partition month: ``YYYY-MM`` of the first time given that is not None, else ``unknown``."""
    for t in times:
        if t is not None:
            return f"{t.year:04d}-{t.month:02d}"
    return UNKNOWN_MONTH


def _s(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _attachment(item: Any) -> dict[str, Any]:
    a = item if isinstance(item, dict) else {}
    size = a.get("size")
    message = a.get("message")
    return {
        "id": _s(a.get("id")),
        "filename": _s(a.get("filename")),
        "mime_type": _s(a.get("mime_type")),
        "size": size if isinstance(size, int) and not isinstance(size, bool) else None,
        "sha256": _s(a.get("sha256")),
        "missing": a.get("missing") if isinstance(a.get("missing"), bool) else None,
        "message": json.dumps(message, sort_keys=True, ensure_ascii=False) if isinstance(message, dict) else None,
    }


def message_key_of(key: str) -> str:
    """The key of the original a stored record version belongs to (itself for an original)."""
    return revision_parent(key) or key


def row(key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The table's row of the record ``doc`` stored at ``key`` (``is_current`` set later, knowing its siblings)."""
    conv: dict[str, Any] = doc["conversation"] if isinstance(doc.get("conversation"), dict) else {}
    sender: dict[str, Any] = doc["sender"] if isinstance(doc.get("sender"), dict) else {}
    rev: dict[str, Any] | None = doc["revision"] if isinstance(doc.get("revision"), dict) else None
    sent, edited = when(doc.get("sent_at")), when(doc.get("edited_at"))
    rev_at = when(rev.get("at")) if rev is not None else None
    participants = conv.get("participants")
    attachments = doc.get("attachments")
    return {
        "key": key,
        "message_key": message_key_of(key),
        "is_current": True,
        "source": _s(doc.get("source")) or key.split("/")[1],
        "month": month_of(sent, rev_at, edited),
        "schema": _s(doc.get("schema")),
        "type": _s(doc.get("type")),
        "native_id": _s(doc.get("native_id")),
        "conversation": {
            "id": _s(conv.get("id")),
            "name": _s(conv.get("name")),
            "participants": [p for p in participants if isinstance(p, str)] if isinstance(participants, list) else [],
        },
        "sender": {"id": _s(sender.get("id")), "name": _s(sender.get("name")), "is_me": sender.get("is_me") is True},
        "sent_at": sent,
        "edited_at": edited,
        "text": _s(doc.get("text")),
        "attachments": [_attachment(a) for a in attachments] if isinstance(attachments, list) else [],
        "reply_to": _s(doc.get("reply_to")),
        "deleted": doc.get("deleted") is True,
        "extra": json.dumps(doc.get("extra") if isinstance(doc.get("extra"), dict) else {}, sort_keys=True, ensure_ascii=False),
        "revision": None if rev is None else {"id": _s(rev.get("id")), "kind": _s(rev.get("kind")), "at": rev_at},
    }


def order(key: str, revision_at: datetime | None) -> tuple[int, float, str]:
    """How versions of one message sort, latest last: the original first, then revisions by time (none first), then key."""
    if revision_parent(key) is None:
        return (0, 0.0, key)
    return (1, revision_at.timestamp() if revision_at is not None else float("-inf"), key)


def table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows as an Arrow table of :data:`SCHEMA`."""
    return pa.Table.from_pylist(rows, schema=SCHEMA)
