"""RFC 822 bytes to a memex record, shared by the IMAP and Maildir pollers.

Native ID: the first ``<...>`` of the Message-ID header with the brackets
and surrounding whitespace removed; when the header is missing or empty,
``sha256:<hex>`` of the raw bytes (a Message-ID that itself starts with
``sha256:`` keeps its brackets, so the two kinds never collide). The same
message in two mailboxes therefore renders to the same key, and the key
encoding in :mod:`memex.records` keeps odd IDs ('/', '+', '=', quotes,
very long) safe.

Bad mail never raises: broken MIME, unknown or wrong charsets, raw 8-bit
headers and unparseable dates are rendered as far as they go and the
problems are listed in ``extra["problems"]``. Only a message that cannot be
rendered at all becomes a :class:`~memex.source.Failure` carrying the raw
bytes (the runner quarantines it). The raw bytes always travel with the
record as its ``.eml`` blob.
"""

from __future__ import annotations

import email
import email.message
import hashlib
from datetime import datetime
from typing import Any

from memex.plugin import Conversation, Cursor, Failure, Item, Message, Sender
from pollers.email.mail.header_block import repair
from pollers.email.mail.headers import addresses, clean, header_text, message_ids, parse_date
from pollers.email.mail.headers import raw as raw_header
from pollers.email.mail.identity import Later, legacy_fingerprint, mail_fingerprint
from pollers.email.mail.mime import parse_bytes
from pollers.email.mail.parts import body_and_attachments, html_to_text

__all__ = ["EML", "html_to_text", "message_ids", "native_id_of", "raw_id", "render", "sent_or", "to_item"]

EML = ".eml"


def raw_id(raw: bytes) -> str:
    """The native ID of a message without a Message-ID: ``sha256:`` and the hex digest of its bytes."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


BOM = b"\xef\xbb\xbf"


def parse(raw: bytes, problems: list[str] | None = None) -> email.message.Message:
    """Parse raw mail: past a leading UTF-8 byte order mark (a .eml saved by a Windows tool), boundaries unfolded,
    the header block read past obsolete syntax and a stray line as gmime reads it (:mod:`pollers.email.mail.header_block`)."""
    if raw.startswith(BOM):
        raw = raw[len(BOM) :]
        if problems is not None:
            problems.append("starts with a byte order mark, read past it")
    raw, repaired = repair(raw)
    if problems is not None:
        problems.extend(repaired)
    return parse_bytes(raw)


def native_id_of(msg: email.message.Message, raw: bytes) -> str:
    """The record key of a parsed message: its normalized Message-ID, else the hash of ``raw``."""
    ids = message_ids(raw_header(msg, "Message-ID"))
    return ids[0] if ids else raw_id(raw)


def render(raw: bytes, source: str, *, me: frozenset[str] = frozenset(), extra: dict[str, Any] | None = None) -> Message:
    """Render raw RFC 822 bytes as a record; tolerant of bad mail (problems go to ``extra["problems"]``).

    ``me`` holds the owner's addresses (lower case) to set ``sender.is_me``;
    ``extra`` adds source facts (mailbox, UID, maildir key). Raises only on
    mail that cannot be rendered at all.
    """
    return _render(raw, source, me, extra)[0]


def refingerprint(raw: bytes) -> str:
    """The fingerprint of a stored mail's raw bytes under today's rule (:mod:`pollers.email.mail.identity`)."""
    return mail_fingerprint(parse(raw), raw)


def _render(raw: bytes, source: str, me: frozenset[str], extra: dict[str, Any] | None) -> tuple[Message, Later]:
    """The record, and its fingerprint under the rule before (where a collision stored by it sits; computed when read)."""
    problems: list[str] = []
    msg = parse(raw, problems)
    native_id = native_id_of(msg, raw)
    senders = addresses(msg, "From", problems)
    to = addresses(msg, "To", problems)
    cc = addresses(msg, "Cc", problems)
    subject = header_text(msg, "Subject", problems)
    date_header = raw_header(msg, "Date")
    sent_at = parse_date(date_header, problems)
    in_reply_to = message_ids(raw_header(msg, "In-Reply-To"))
    references = message_ids(raw_header(msg, "References"))
    body = body_and_attachments(msg, problems)
    text, attachments, text_from, text_files = body.text, body.attachments, body.text_from, body.text_files
    for defect in getattr(msg, "defects", []):
        problems.append(f"mime: {type(defect).__name__}")
    for part in msg.walk():
        if part is not msg:
            problems.extend(f"mime: {type(d).__name__}" for d in getattr(part, "defects", []))

    participants = sorted({addr.lower() for _, addr in senders + to + cc if addr})
    reply_to = in_reply_to[0] if in_reply_to else (references[-1] if references else None)
    thread = references[0] if references else reply_to or native_id
    sender_name, sender_addr = senders[0] if senders else ("", "")
    doc: dict[str, Any] = {
        "subject": subject,
        "to": [addr for _, addr in to],
        "cc": [addr for _, addr in cc],
        "size": len(raw),
    }
    if any(name for name, _ in to + cc):  # display names, beside the addresses in the same order ("" for none)
        doc["to_names"] = [name for name, _ in to]
        doc["cc_names"] = [name for name, _ in cc]
    if body.search_text:
        doc["search_text"] = body.search_text
    if in_reply_to:
        doc["in_reply_to"] = in_reply_to
    if references:
        doc["references"] = references
    if text_from:
        doc["text_from"] = text_from
    if text_files:
        doc["text_files"] = text_files
    if sent_at is None and date_header is not None:
        doc["date_header"] = clean(date_header)
    if native_id.startswith("sha256:"):
        doc["id_from"] = "raw_sha256"
    if problems:
        doc["problems"] = sorted(set(problems))
    # What tells two mails apart when they share a Message-ID (memex.store.collisions): not the Received headers.
    doc["fingerprint"] = mail_fingerprint(msg, raw, {"From": senders, "To": to, "Cc": cc})
    legacy = Later(lambda: (legacy_fingerprint(sender_addr.lower(), date_header, subject, text),))
    doc.update(extra or {})
    message = Message(
        source=source,
        type="message",
        native_id=native_id,
        sent_at=sent_at,
        conversation=Conversation(id=thread, name=None, participants=participants),
        sender=Sender(id=sender_addr.lower() or None, name=sender_name or None, is_me=sender_addr.lower() in me),
        text=text,
        attachments=attachments,
        reply_to=reply_to,
        extra=doc,
    )
    return message, legacy


def to_item(
    raw: bytes, source: str, cursor: Cursor, *, ref: str, me: frozenset[str] = frozenset(), extra: dict[str, Any] | None = None
) -> Item:
    """An :class:`Item` for one raw message: the record plus its ``.eml`` blob, or a Failure holding the raw bytes.

    Empty bytes (a 0-byte file in a Maildir, blank lines only) are no mail: quarantined with that reason, so the
    poll's ``record.quarantined`` warning names the file, instead of a record with an empty ``.eml`` beside it.
    """
    if not raw or raw.isspace():  # not raw.strip(): that copied every mail to find its first byte
        return Item(
            cursor=cursor, failure=Failure(native_id=raw_id(raw), reason=f"empty ({len(raw)} bytes): not a mail", raw=raw or None, ref=ref)
        )
    try:
        message, legacy = _render(raw, source, me, extra)
    except Exception as exc:  # truly unparseable: quarantine the bytes, say why by type only
        try:
            native_id = native_id_of(parse(raw), raw)
        except Exception:
            native_id = raw_id(raw)
        return Item(
            cursor=cursor, failure=Failure(native_id=native_id, reason=f"unparseable mail ({type(exc).__name__})", raw=raw, ref=ref)
        )
    return Item(cursor=cursor, message=message, blobs={EML: raw}, refingerprint=refingerprint, earlier_fingerprints=legacy)


def sent_or(message: Message | None, fallback: datetime | None) -> datetime | None:
    """A record's ``sent_at`` as a datetime, else ``fallback`` (e.g. the server's arrival time)."""
    if message is not None and message.sent_at:
        try:
            return datetime.fromisoformat(message.sent_at.replace("Z", "+00:00"))
        except ValueError:
            pass
    return fallback
