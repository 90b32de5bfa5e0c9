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

import codecs
import email
import email.errors
import email.header
import email.message
import email.utils
import hashlib
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

from memex.records import Attachment, Conversation, Message, Sender, rfc3339
from memex.source import Cursor, Failure, Item

EML = ".eml"
_ID_RE = re.compile(r"<([^<>]*)>")
_BLOCK_TAGS = frozenset(
    ["p", "div", "br", "li", "ul", "ol", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "hr", "section", "article", "header", "footer", "title"]
)  # fmt: skip


def raw_id(raw: bytes) -> str:
    """The native ID of a message without a Message-ID: ``sha256:`` and the hex digest of its bytes."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _clean(value: str) -> str:
    """Turn surrogate-escaped 8-bit header bytes into text: UTF-8 if they are, else Latin-1 (never fails)."""
    if any("\udc80" <= c <= "\udcff" for c in value):
        data = value.encode("utf-8", "surrogateescape")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data.decode("latin-1")
    return value


def _raw_all(msg: email.message.Message, name: str) -> list[str]:
    """Every value of header ``name`` as sent (8-bit bytes surrogate-escaped, not yet decoded)."""
    lname = name.lower()
    return [str(v) for k, v in msg.raw_items() if k.lower() == lname]


def _raw(msg: email.message.Message, name: str) -> str | None:
    values = _raw_all(msg, name)
    return values[0] if values else None


def message_ids(value: str | None) -> list[str]:
    """Every ``<id>`` in a Message-ID / In-Reply-To / References value, normalized, in order."""
    if not value:
        return []
    text = _clean(re.sub(r"\s+", " ", str(value)))
    found = [m.strip() for m in _ID_RE.findall(text)]
    ids = [i for i in found if i]
    if not ids and not found:
        bare = text.strip().strip("<>").strip()
        if bare and " " not in bare:
            ids = [bare]
    return [f"<{i}>" if i.startswith("sha256:") else i for i in ids]


def native_id_of(msg: email.message.Message, raw: bytes) -> str:
    """The record key of a parsed message: its normalized Message-ID, else the hash of ``raw``."""
    ids = message_ids(_raw(msg, "Message-ID"))
    return ids[0] if ids else raw_id(raw)


def header_text(msg: email.message.Message, name: str, problems: list[str]) -> str | None:
    """A header decoded from RFC 2047 words (and raw 8-bit bytes) to text, or None when absent."""
    value = _raw(msg, name)
    if value is None:
        return None
    if _clean(value) != value:
        problems.append(f"header {name}: raw 8-bit bytes")
        value = _clean(value)
    try:
        decoded = str(email.header.make_header(email.header.decode_header(value)))
    except (LookupError, UnicodeError, ValueError, email.errors.HeaderParseError):
        problems.append(f"header {name}: undecodable encoded words, kept as sent")
        decoded = value
    return re.sub(r"\s*\r?\n\s*", " ", decoded).strip()


def addresses(msg: email.message.Message, name: str, problems: list[str]) -> list[tuple[str, str]]:
    """``(display name, address)`` pairs of an address header; empty when absent or unparseable."""
    values = [_clean(v) for v in _raw_all(msg, name)]
    if not values:
        return []
    try:
        pairs = email.utils.getaddresses(values)
    except Exception:
        problems.append(f"header {name}: unparseable addresses")
        return []
    out = []
    for display, addr in pairs:
        if not addr and not display:
            continue
        try:
            display = str(email.header.make_header(email.header.decode_header(display))) if display else ""
        except (LookupError, UnicodeError, ValueError, email.errors.HeaderParseError):
            problems.append(f"header {name}: undecodable display name")
        out.append((_clean(display), _clean(addr).strip()))
    return out


def parse_date(value: str | None, problems: list[str]) -> str | None:
    """A Date header as RFC 3339 UTC; a missing zone counts as UTC; unparseable gives None and a problem."""
    if not value:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(_clean(str(value)))
    except (TypeError, ValueError, IndexError, OverflowError):
        problems.append("header Date: unparseable")
        return None
    if dt is None:
        problems.append("header Date: unparseable")
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        return rfc3339(dt)
    except (ValueError, OverflowError):
        problems.append("header Date: out of range")
        return None


class _HTMLText(HTMLParser):
    """Collects the visible text of an HTML document, a line per block."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Open a block (new line) or a skipped element (script, style, head)."""
        if tag in ("script", "style", "head"):
            self._skip += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        """Close a skipped element or a block."""
        if tag in ("script", "style", "head"):
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        """Keep visible text."""
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The visible text of an HTML body: tags dropped, entities decoded, whitespace collapsed per line."""
    parser = _HTMLText()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser is lenient; this is a last resort
        return re.sub(r"<[^>]*>", " ", html)
    lines = (re.sub(r"[ \t\r\f\v\xa0]+", " ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _decode_part(part: email.message.Message, problems: list[str], label: str) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        payload = str(part.get_payload()).encode("utf-8", "surrogateescape")
    charset = part.get_content_charset() or "us-ascii"
    try:
        codec = codecs.lookup(charset).name
    except LookupError:
        problems.append(f"{label}: unknown charset, decoded as UTF-8 with replacements")
        return payload.decode("utf-8", "replace")
    try:
        return payload.decode(codec)
    except UnicodeDecodeError:
        if codec == "ascii":
            try:
                return payload.decode("utf-8")
            except UnicodeDecodeError:
                pass
        problems.append(f"{label}: bytes not valid in its charset, decoded with replacements")
        return payload.decode(codec, "replace")


def _is_attachment(part: email.message.Message) -> bool:
    disposition = (part.get("Content-Disposition") or "").split(";")[0].strip().lower()
    return disposition == "attachment" or (part.get_filename() is not None and not part.get_content_type().startswith("text/"))


def body_and_attachments(msg: email.message.Message, problems: list[str]) -> tuple[str | None, list[Attachment], str | None]:
    """The text body (text/plain preferred, else HTML as text), attachment metadata, and where the text came from."""
    plain: str | None = None
    html: str | None = None
    attachments: list[Attachment] = []
    for index, part in enumerate(msg.walk()):
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        if _is_attachment(part) or not (ctype.startswith("text/") or ctype == "message/rfc822"):
            if ctype == "message/rfc822" and not _is_attachment(part):
                continue
            filename = None
            try:
                raw_name = part.get_filename()
                filename = _clean(str(email.header.make_header(email.header.decode_header(raw_name)))) if raw_name else None
            except (LookupError, UnicodeError, ValueError, email.errors.HeaderParseError):
                problems.append(f"part {index}: undecodable filename")
            payload = part.get_payload(decode=True)
            size = len(payload) if isinstance(payload, bytes) else None
            cid = part.get("Content-ID")
            ids = message_ids(str(cid)) if cid else []
            attachments.append(Attachment(id=ids[0] if ids else f"part{index}", filename=filename, mime_type=ctype, size=size))
            continue
        if ctype == "text/plain" and plain is None:
            plain = _decode_part(part, problems, f"part {index}")
        elif ctype == "text/html" and html is None:
            html = _decode_part(part, problems, f"part {index}")
    if plain is not None:
        return plain, attachments, "text/plain"
    if html is not None:
        return html_to_text(html), attachments, "text/html"
    return None, attachments, None


def render(raw: bytes, source: str, *, me: frozenset[str] = frozenset(), extra: dict[str, Any] | None = None) -> Message:
    """Render raw RFC 822 bytes as a record; tolerant of bad mail (problems go to ``extra["problems"]``).

    ``me`` holds the owner's addresses (lower case) to set ``sender.is_me``;
    ``extra`` adds source facts (mailbox, UID, maildir key). Raises only on
    mail that cannot be rendered at all.
    """
    msg = email.message_from_bytes(raw)
    problems: list[str] = []
    native_id = native_id_of(msg, raw)
    senders = addresses(msg, "From", problems)
    to = addresses(msg, "To", problems)
    cc = addresses(msg, "Cc", problems)
    subject = header_text(msg, "Subject", problems)
    date_header = _raw(msg, "Date")
    sent_at = parse_date(date_header, problems)
    in_reply_to = message_ids(_raw(msg, "In-Reply-To"))
    references = message_ids(_raw(msg, "References"))
    text, attachments, text_from = body_and_attachments(msg, problems)
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
    if in_reply_to:
        doc["in_reply_to"] = in_reply_to
    if references:
        doc["references"] = references
    if text_from:
        doc["text_from"] = text_from
    if sent_at is None and date_header is not None:
        doc["date_header"] = _clean(str(date_header))
    if native_id.startswith("sha256:"):
        doc["id_from"] = "raw_sha256"
    if problems:
        doc["problems"] = sorted(set(problems))
    doc.update(extra or {})
    return Message(
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


def to_item(
    raw: bytes, source: str, cursor: Cursor, *, ref: str, me: frozenset[str] = frozenset(), extra: dict[str, Any] | None = None
) -> Item:
    """An :class:`Item` for one raw message: the record plus its ``.eml`` blob, or a Failure holding the raw bytes."""
    try:
        message = render(raw, source, me=me, extra=extra)
    except Exception as exc:  # truly unparseable: quarantine the bytes, say why by type only
        try:
            native_id = native_id_of(email.message_from_bytes(raw), raw)
        except Exception:
            native_id = raw_id(raw)
        return Item(
            cursor=cursor, failure=Failure(native_id=native_id, reason=f"unparseable mail ({type(exc).__name__})", raw=raw, ref=ref)
        )
    return Item(cursor=cursor, message=message, blobs={EML: raw})


def sent_or(message: Message | None, fallback: datetime | None) -> datetime | None:
    """A record's ``sent_at`` as a datetime, else ``fallback`` (e.g. the server's arrival time)."""
    if message is not None and message.sent_at:
        try:
            return datetime.fromisoformat(message.sent_at.replace("Z", "+00:00"))
        except ValueError:
            pass
    return fallback
