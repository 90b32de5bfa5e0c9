"""What the index keeps of a stored record: one row per message, whatever its source.

A row holds the message's searchable fields (latest text, sender, recipients, conversation, subject, attachment
file names) and the fields queries filter on (source, time, is_me, attachments, deleted). A revision record is not a
row of its own: it changes its message's row (an edit's text replaces the text searched; an unsend or delete marks
the row deleted, which searches leave out unless asked). Only generic record fields are read; the one
source-specific name is ``extra.subject`` (mail) and the mail's ``extra.to``/``extra.cc`` for recipients.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

TEXT_KINDS = ("edit", "update")  # revision kinds whose text replaces the message's


@dataclass
class Row:
    """One message's row (see the module docstring)."""

    key: str
    source: str
    native_id: str
    sent_at: str | None
    ts: float | None
    conv_id: str
    conv_name: str
    sender_id: str
    sender_name: str
    is_me: bool
    recipients: str
    subject: str
    attachments: str
    n_attachments: int
    text: str
    deleted: bool


@dataclass
class RevisionRow:
    """One revision of a message: which message, when, what kind, and its text."""

    key: str
    message_key: str
    kind: str
    at: str
    text: str | None
    deleted: bool


def timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time, or None (absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _names(values: Any) -> list[str]:
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []


def message_row(key: str, doc: dict[str, Any]) -> Row:
    """The row of an original record stored at ``key``."""
    conv = doc.get("conversation") if isinstance(doc.get("conversation"), dict) else {}
    sender = doc.get("sender") if isinstance(doc.get("sender"), dict) else {}
    extra = doc.get("extra") if isinstance(doc.get("extra"), dict) else {}
    assert isinstance(conv, dict) and isinstance(sender, dict) and isinstance(extra, dict)
    sender_id = _s(sender.get("id"))
    recipients = _names(extra.get("to")) + _names(extra.get("cc"))
    if not recipients:
        recipients = [p for p in _names(conv.get("participants")) if p != sender_id]
    attachments = [a for a in doc.get("attachments") or [] if isinstance(a, dict)]
    names = [_s(a.get("filename")) for a in attachments]
    return Row(
        key=key,
        source=_s(doc.get("source")),
        native_id=_s(doc.get("native_id")),
        sent_at=doc.get("sent_at") if isinstance(doc.get("sent_at"), str) else None,
        ts=timestamp(doc.get("sent_at")),
        conv_id=_s(conv.get("id")),
        conv_name=_s(conv.get("name")),
        sender_id=sender_id,
        sender_name=_s(sender.get("name")),
        is_me=sender.get("is_me") is True,
        recipients="\n".join(recipients),
        subject=_s(extra.get("subject")),
        attachments="\n".join(n for n in names if n),
        n_attachments=len(attachments),
        text=_s(doc.get("text")),
        deleted=doc.get("deleted") is True,
    )


def revision_row(key: str, doc: dict[str, Any], message_key: str) -> RevisionRow:
    """The row of a revision record stored at ``key``, of the message stored at ``message_key``."""
    rev = doc.get("revision") if isinstance(doc.get("revision"), dict) else {}
    assert isinstance(rev, dict)
    kind = _s(rev.get("kind"))
    at = _s(rev.get("at")) or _s(doc.get("edited_at")) or _s(doc.get("sent_at"))
    text = doc.get("text") if kind in TEXT_KINDS and isinstance(doc.get("text"), str) else None
    return RevisionRow(key=key, message_key=message_key, kind=kind, at=at, text=text,
                       deleted=kind == "delete" or doc.get("deleted") is True)  # fmt: skip


def revision_parent(key: str) -> str | None:
    """The key of the original a revision key belongs to (``revisions/S/X/R.json`` -> ``messages/S/X.json``)."""
    parts = key.split("/")
    if len(parts) != 4 or parts[0] != "revisions":
        return None
    return f"messages/{parts[1]}/{parts[2]}.json"


def is_record_key(key: str) -> bool:
    """Whether ``key`` holds a record the index reads (an original or a revision; not a blob or quarantine)."""
    if not key.endswith(".json"):
        return False
    parts = key.split("/")
    return (parts[0] == "messages" and len(parts) == 3) or (parts[0] == "revisions" and len(parts) == 4)


def latest_text(revisions: list[RevisionRow]) -> str | None:
    """The text of the latest text-bearing revision (by time, then key), or None when none changed the text."""
    texts = [r for r in revisions if r.text is not None]
    if not texts:
        return None
    return max(texts, key=lambda r: (timestamp(r.at) or 0.0, r.key)).text
