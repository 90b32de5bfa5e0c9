"""Different records that share a native ID (a reused Message-ID) are both kept.

A poller whose IDs can be reused by different content (email: RFC 2822's own examples share
``<1234@local.machine.example>``, some mailers and list software reuse IDs) puts a ``fingerprint`` of what
identifies the record in ``extra`` (email: From, Date, Subject, body). When a create-only write meets an existing
key, the runner reads that record: the same fingerprint is the same record seen again (INBOX and Sent, two Gmail
labels, a redelivery with other Received headers): a duplicate; another fingerprint is a different record, stored
beside the first under :func:`collision_key` with ``extra.collision_of`` naming the first's key. Listing
``messages/<source>/<id>`` finds both (the first at ``<id>.json``, others at ``<id>~c<fingerprint>.json``; ``~``
never appears in an encoded ID otherwise, and a long ID's hashed form ends in 64 hex digits, not ``c`` + 16).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def fingerprint(*parts: Any) -> str:
    """A stable fingerprint of the parts that identify a record (32 hex digits)."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=True, default=str).encode()).hexdigest()[:32]


def differs(existing: bytes | None, mine: str) -> bool:
    """Whether the stored record is another one than ours (it has a fingerprint, and not ours)."""
    if existing is None:
        return False
    try:
        theirs = json.loads(existing).get("extra", {}).get("fingerprint")
    except (ValueError, AttributeError):
        return False
    return isinstance(theirs, str) and theirs != mine


def collision_key(key: str, mine: str) -> str:
    """Where a different record with the same native ID goes: ``<id>~c<16 hex>.json`` beside ``<id>.json``."""
    return f"{key[: -len('.json')]}~c{mine[:16]}.json"
