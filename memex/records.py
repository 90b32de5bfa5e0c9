"""The one record schema every source renders to, and how a record becomes an object key.

A record is canonical JSON (sorted keys, no insignificant whitespace, UTF-8)
so the same message always renders to the same bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, TypedDict

SCHEMA = "memex.message/1"  # the published schema's $id: memex/schema/message-1.json (``memex schema``)
TYPES = ("message", "reaction", "event")  # a record's ``type``, whatever its source (the schema's enum)

# An encoded id longer than this is shortened and suffixed with a hash: S3
# keys are limited to 1024 bytes and file names to 255.
MAX_ENCODED_ID = 180
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
_ALL_SAFE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")  # an ID its own encoding (the common case, no per-byte loop)


class Conversation(TypedDict):
    """Where a message was said."""

    id: str | None
    name: str | None
    participants: list[str]


class Sender(TypedDict):
    """Who said it."""

    id: str | None
    name: str | None
    is_me: bool


class Attachment(TypedDict, total=False):
    """One attachment of a message: its metadata and, once stored, where its bytes are.

    ``sha256`` names the content-addressed object ``attachments/<sha256>``
    (see :mod:`memex.store.attachments`); ``missing`` is True when the source listed
    the attachment but its bytes were not there to store (e.g. iCloud
    "optimize storage" kept only the metadata). ``message`` describes an
    attached message (a forwarded mail, a bounce): its ``subject``, ``from``,
    ``date`` (RFC 3339) and ``message_id``, and ``filenames``, the file names of
    the attachments inside it.
    """

    id: str
    filename: str | None
    mime_type: str | None
    size: int | None
    sha256: str
    missing: bool
    message: dict[str, Any]


REVISION_KINDS = ("edit", "delete", "reactions", "update")


class Revision(TypedDict):
    """What makes a record a revision of an earlier message: an edit, an unsend, a change of reactions.

    A revision never replaces the original object: it is a record of its own,
    stored create-only at :func:`revision_key`, whose ``native_id`` is the
    original's. ``id`` is stable for the same change (e.g. the edit's
    timestamp), so a replayed revision is a duplicate, not a new one.
    """

    id: str
    kind: str  # one of REVISION_KINDS ("delete" is a tombstone: the message was unsent or deleted)
    at: str | None  # when the change happened (RFC 3339), if the source says


@dataclass(slots=True)  # slots: no per-message ``__dict__`` (a Messenger export makes one per message, issue 25)
class Message:
    """One normalized message, as stored at ``messages/<source>/<id>.json``."""

    source: str
    type: str  # one of TYPES: message, reaction, event (never the source's name)
    native_id: str
    sent_at: str | None
    conversation: Conversation = field(default_factory=lambda: Conversation(id=None, name=None, participants=[]))
    sender: Sender = field(default_factory=lambda: Sender(id=None, name=None, is_me=False))
    text: str | None = None
    attachments: list[Attachment] = field(default_factory=list)
    reply_to: str | None = None
    edited_at: str | None = None
    deleted: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    revision: Revision | None = None  # set on a revision of the message ``native_id``; None on the original

    def to_dict(self) -> dict[str, Any]:
        """The record as a plain dict, schema tag included (``revision`` only on revisions).

        A new top-level dict whose values are the message's own (not copies): read it or render it, do not
        change it in place.
        """
        doc = dict(zip(_FIELDS, _VALUES(self), strict=True))  # not asdict(): its deep copy was a third of a poll's CPU
        if doc["revision"] is None:
            del doc["revision"]  # originals keep the bytes they always had
        doc["schema"] = SCHEMA
        return doc

    def key(self) -> str:
        """Where this record is stored: :func:`message_key` for an original, :func:`revision_key` for a revision."""
        if self.revision is not None:
            return revision_key(self.source, self.native_id, self.revision["id"])
        return message_key(self.source, self.native_id)

    def to_json(self) -> bytes:
        """Canonical JSON bytes: sorted keys, compact, UTF-8, trailing newline."""
        return canonical_json(self.to_dict())


_FIELDS = tuple(f.name for f in fields(Message))
_VALUES = attrgetter(*_FIELDS)  # every field's value in one call, in _FIELDS order


def canonical_json(doc: Any) -> bytes:
    """Render ``doc`` the one way memex renders JSON objects (lone surrogates become U+FFFD, never a crash)."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return repair_text(text).encode() + b"\n"


def repair_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a surrogate pair becomes its character).

    Lone surrogates come from decoders that let bad input through (utf-7 ``+2AA-``, ``surrogateescape``
    file names) and cannot be written as UTF-8.
    """
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def rfc3339(dt: datetime) -> str:
    """Format an aware datetime as RFC 3339 UTC with a ``Z`` suffix (a four-digit year, also before 1000)."""
    dt = dt.astimezone(UTC)
    # The year by hand: strftime's %Y does not pad on glibc, and "5-01-01" is not RFC 3339.
    return f"{dt.year:04d}" + dt.strftime("-%m-%dT%H:%M:%S.%fZ" if dt.microsecond else "-%m-%dT%H:%M:%SZ")


def encode_id(native_id: str) -> str:
    """Encode a native ID into one safe key segment.

    Bytes outside ``[A-Za-z0-9._-]`` become ``%XX`` (so '/', '..', '%',
    spaces and unicode are all safe) and a leading '.' is escaped, so the
    result is never '.', '..' or hidden. This is injective and reversible by
    :func:`decode_id`. An encoding longer than :data:`MAX_ENCODED_ID` is cut
    and suffixed with ``~`` and the SHA-256 of the ID ('~' never appears
    otherwise, so a hashed key cannot equal an unhashed one); the full ID is
    always kept inside the object as ``native_id``.
    """
    if len(native_id) <= MAX_ENCODED_ID and _ALL_SAFE.fullmatch(native_id):
        return native_id
    raw = native_id.encode("utf-8", "surrogatepass")
    out = []
    for i, byte in enumerate(raw):
        if byte in _SAFE and not (i == 0 and byte == 0x2E):
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    encoded = "".join(out)
    if not encoded:
        encoded = "%"  # the empty ID; '%' alone is not a valid escape, so it is unique
    if len(encoded) > MAX_ENCODED_ID:
        import hashlib  # here, not at the top: an idle cron poll never hashes (start-up cost)

        digest = hashlib.sha256(raw).hexdigest()
        head = encoded[: MAX_ENCODED_ID - 65]
        cut = head.rfind("%", len(head) - 2)
        if cut != -1:
            head = head[:cut]
        encoded = f"{head}~{digest}"
    return encoded


def decode_id(encoded: str) -> str | None:
    """Invert :func:`encode_id`; None for a hashed (shortened) key, whose ID is in the object."""
    if "~" in encoded:
        return None
    if encoded == "%":
        return ""
    from urllib.parse import unquote_to_bytes

    return unquote_to_bytes(encoded).decode("utf-8", "surrogatepass")


def message_key(source: str, native_id: str, suffix: str = ".json") -> str:
    """The store-relative key of a message: ``messages/<source>/<encoded id><suffix>``."""
    return f"messages/{encode_id(source)}/{encode_id(native_id)}{suffix}"


def revision_key(source: str, native_id: str, revision_id: str) -> str:
    """The key of one revision of a message: ``revisions/<source>/<encoded id>/<encoded revision id>.json``.

    Derived from the original's key, so the revisions of ``messages/S/X.json``
    are listed under the prefix ``revisions/S/X/``, and a revision's original
    is ``messages/S/X.json`` (its ``native_id`` is the original's).
    """
    return f"revisions/{encode_id(source)}/{encode_id(native_id)}/{encode_id(revision_id)}.json"
