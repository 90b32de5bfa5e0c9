"""What ``memex verify`` checks in one stored object: the record schema, the key a record belongs at, an attachment's hash.

Each check is a pure function of a key and its bytes, so the walk can run it in any thread. :func:`schema_problem`
is the published schema's validator (:mod:`memex.schema`), the same check every record passes before it is stored.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from memex.records import decode_id, message_key, revision_key
from memex.schema import problem
from memex.store.collisions import collision_key

# Kinds of damage, in the order the summary shows them.
EMPTY = "empty"
NOT_JSON = "not_json"
NOT_SCHEMA = "not_schema"
KEY_MISMATCH = "key_mismatch"
ORPHAN_REVISION = "orphan_revision"
HASH_MISMATCH = "hash_mismatch"
MISSING = "missing_from_source"
DAMAGE = (EMPTY, NOT_JSON, NOT_SCHEMA, KEY_MISMATCH, ORPHAN_REVISION, HASH_MISMATCH, MISSING)
DESCRIBE = {
    EMPTY: "empty",
    NOT_JSON: "not JSON",
    NOT_SCHEMA: "not the record schema",
    KEY_MISMATCH: "key does not match its native_id",
    ORPHAN_REVISION: "revision without its original",
    HASH_MISMATCH: "attachment bytes do not hash to their name",
    MISSING: "in the source, not in the index",
}


@dataclass(frozen=True)
class Place:
    """What a key is, from its shape: ``kind`` (record, revision, blob, quarantine, attachment, other) and its source."""

    kind: str
    source: str | None = None
    native_id: str | None = None  # decoded from the key (None for a hashed, shortened ID)
    parent: str | None = None  # a revision's original: ``messages/<source>/<id>.json``


def place(key: str) -> Place:
    """Classify a store-relative key by the layout memex writes."""
    parts = key.split("/")
    top = parts[0]
    if top == "attachments" and len(parts) == 2:
        return Place("attachment")
    if len(parts) < 3 or top not in ("messages", "revisions", "quarantine"):
        return Place("other")
    source = decode_id(parts[1]) or parts[1]
    if top == "revisions" and len(parts) == 4 and parts[3].endswith(".json"):
        return Place("revision", source, decode_id(parts[2]), f"messages/{parts[1]}/{parts[2]}.json")
    if len(parts) != 3:
        return Place("other", source)
    name = parts[2]
    if top == "quarantine":
        return Place("quarantine" if name.endswith(".json") else "blob", source)
    if name.endswith(".json"):
        stem = name[: -len(".json")]
        return Place("record", source, None if "~" in stem else decode_id(stem))
    stem = name.rpartition(".")[0]  # a blob beside its record: <id>.eml, <id>.typedstream
    return Place("blob", source, None if "~" in stem or not stem else decode_id(stem))


def schema_problem(doc: Any) -> str | None:
    """Why ``doc`` is not a record of the published schema (:mod:`memex.schema`, the check the uploader makes), or None.

    The reason is the validator's: it names the field and the rule, never the value (it may be message text).
    """
    return problem(doc)


def expected_key(doc: dict[str, Any]) -> str:
    """Where a (schema-valid) record belongs: its message key, or its revision key."""
    rev = doc.get("revision")
    if rev is not None:
        return revision_key(doc["source"], doc["native_id"], rev["id"])
    return message_key(doc["source"], doc["native_id"])


def key_fits(key: str, doc: dict[str, Any]) -> bool:
    """Whether ``key`` is where ``doc`` belongs (a reused Message-ID's second record sits at its collision key)."""
    want = expected_key(doc)
    if key == want:
        return True
    extra = doc["extra"]
    fp = extra.get("fingerprint")
    return extra.get("collision_of") == want and isinstance(fp, str) and key == collision_key(want, fp)


def record_problem(key: str, body: bytes) -> tuple[str, str] | None:
    """The damage of a record or revision object: (kind, reason) or None when it is sound."""
    if not body.strip():
        return EMPTY, f"{len(body)} bytes"
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return NOT_JSON, type(exc).__name__
    problem = schema_problem(doc)
    if problem is not None:
        return NOT_SCHEMA, problem
    if key.startswith("revisions/") != (doc.get("revision") is not None):
        return KEY_MISMATCH, "a revision outside revisions/ or an original inside it"
    if not key_fits(key, doc):
        return KEY_MISMATCH, f"its native_id belongs at {expected_key(doc)}"
    return None


def attachment_problem(key: str, chunks: Any) -> tuple[str, str] | None:
    """The damage of ``attachments/<sha256>`` whose bytes come as an iterable of chunks, or None."""
    h = hashlib.sha256()
    size = 0
    for chunk in chunks:
        h.update(chunk)
        size += len(chunk)
    if h.hexdigest() == key.rpartition("/")[2]:
        return None  # an empty file sent as an attachment is sound too: its name is the hash of no bytes
    if size == 0:
        return EMPTY, "0 bytes"
    return HASH_MISMATCH, f"{size} bytes hash to {h.hexdigest()[:16]}..."
