"""Different records that share a native ID (a reused Message-ID) are both kept.

A poller whose IDs can be reused by different content (email: RFC 2822's own examples share
``<1234@local.machine.example>``, some mailers and list software reuse IDs) puts a ``fingerprint`` of what
identifies the record in ``extra`` (email: :mod:`pollers.email.mail.identity`). When a create-only write meets an
existing key, the uploader reads that record (:func:`same_record`): the same fingerprint is the same record seen
again (INBOX and Sent, two Gmail labels, a redelivery with other Received headers): a duplicate; another
fingerprint is a different record, stored beside the first under :func:`collision_key` with
``extra.collision_of`` naming the first's key. Listing ``messages/<source>/<id>`` finds both (the first at
``<id>.json``, others at ``<id>~c<fingerprint>.json``; ``~`` never appears in an encoded ID otherwise, and a long
ID's hashed form ends in 64 hex digits, not ``c`` + 16).

A fingerprint rule can change (email's once left out recipients and attachments). A record stored under an
earlier rule has a fingerprint that today's never equals, so it is not trusted: when the item can fingerprint a
stored record's raw bytes (``Item.refingerprint``), the stored ``.eml`` is fingerprinted again by today's rule and
that decides; an old index never turns every mail seen again into a "collision". A collision stored under an
earlier rule sits at the collision key of the item's earlier fingerprint (``Item.earlier_fingerprints``) and is
looked for there before a new one is made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any


def fingerprint(*parts: Any) -> str:
    """A stable fingerprint of the parts that identify a record (32 hex digits)."""
    import hashlib  # here, not at the top: an idle cron poll never hashes (start-up cost)

    return hashlib.sha256(json.dumps(parts, ensure_ascii=True, default=str).encode()).hexdigest()[:32]


def stored_fingerprint(existing: bytes) -> str | None:
    """The fingerprint a stored record carries, or None (none, or not a record)."""
    try:
        theirs = json.loads(existing).get("extra", {}).get("fingerprint")
    except (ValueError, AttributeError):
        return None
    return theirs if isinstance(theirs, str) else None


def differs(existing: bytes | None, mine: str) -> bool:
    """Whether the stored record is another one than ours (it has a fingerprint, and not ours)."""
    if existing is None:
        return False
    theirs = stored_fingerprint(existing)
    return theirs is not None and theirs != mine


def same_record(
    get: Callable[[str], bytes | None],
    key: str,
    mine: str,
    *,
    blob_suffix: str | None = None,
    refingerprint: Callable[[bytes], str] | None = None,
    earlier: Sequence[str] = (),
) -> bool | None:
    """Whether the record at ``key`` is ours (None: nothing there).

    The same fingerprint, or none stored, is the same record. Another fingerprint is decided by today's rule on
    the stored raw bytes (``<key>`` with ``blob_suffix``) when ``refingerprint`` is given and they are there;
    without them, a fingerprint equal to one of ours under an ``earlier`` rule counts as the same record.
    """
    existing = get(key)
    if existing is None:
        return None
    theirs = stored_fingerprint(existing)
    if theirs is None or theirs == mine:
        return True
    if refingerprint is not None and blob_suffix is not None:
        blob = get(key[: -len(".json")] + blob_suffix)
        if blob is not None:
            try:
                return refingerprint(blob) == mine
            except Exception:  # the stored bytes no longer parse: fall back on the stored fingerprint
                pass
    return theirs in earlier


def collision_key(key: str, mine: str) -> str:
    """Where a different record with the same native ID goes: ``<id>~c<16 hex>.json`` beside ``<id>.json``."""
    return f"{key[: -len('.json')]}~c{mine[:16]}.json"
