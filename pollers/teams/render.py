"""Rendering Graph ``chatMessage`` objects as memex records: text from HTML, system messages, revisions.

Field names follow Microsoft Graph's chatMessage resource (v1.0): ``id``,
``chatId``, ``messageType``, ``createdDateTime``, ``lastModifiedDateTime``,
``lastEditedDateTime``, ``deletedDateTime``, ``from.user``, ``body``
(``contentType`` text or html), ``attachments`` (``reference`` files,
``messageReference`` replies, cards), ``mentions``, ``reactions``,
``eventDetail`` (system messages) and ``messageHistory``.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

from memex.plugin import Attachment, Conversation, Failure, Message, Revision, Sender, rfc3339

_BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol"})
_HOSTED = re.compile(r"/hostedContents/([^/\"'?#]+)/\$value")
_TS = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")


def parse_ts(value: Any) -> int | None:
    """A Graph timestamp (``2021-03-28T20:48:29.832Z``, up to 7 fraction digits) as microseconds since the epoch."""
    if not isinstance(value, str):
        return None
    m = _TS.match(value.strip())
    if not m:
        return None
    frac = (m.group(3) or "").ljust(6, "0")[:6]
    zone = "+00:00" if m.group(4) == "Z" else m.group(4)
    try:
        dt = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}.{frac}{zone}")
    except ValueError:
        return None
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


def format_ts(micros: int) -> str:
    """Microseconds since the epoch as the RFC 3339 form Graph's ``$filter`` takes (millisecond precision, rounded down)."""
    dt = datetime.fromtimestamp(micros // 1_000_000, tz=UTC).replace(microsecond=(micros % 1_000_000) // 1000 * 1000)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _iso(value: Any) -> str | None:
    micros = parse_ts(value)
    if micros is None:
        return None
    return rfc3339(datetime.fromtimestamp(micros // 1_000_000, tz=UTC).replace(microsecond=micros % 1_000_000))


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self.parts.append("\n")
        elif tag == "img":
            alt = dict(attrs).get("alt")
            self.parts.append(f"[{alt}]" if alt else "[image]")

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_to_text(html: str) -> str:
    """The readable text of a Teams HTML body: blocks become lines, images ``[image]``, entities decoded."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts).replace("\xa0", " ")
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def hosted_content_ids(html: str) -> list[str]:
    """The hostedContents IDs an HTML body shows inline (``.../hostedContents/{id}/$value``), in order, once each."""
    seen: dict[str, None] = {}
    for m in _HOSTED.finditer(html):
        seen.setdefault(m.group(1), None)
    return list(seen)


def hosted_content_urls(html: str) -> dict[str, str]:
    """The URL each inline image's ``src`` gives, by hostedContents ID (chat, channel and reply URLs differ)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"""src=["']([^"']*/hostedContents/([^/"'?#]+)/\$value)["']""", html):
        out.setdefault(m.group(2), m.group(1).replace("&amp;", "&"))
    return out


def native_id(chat_id: str, message_id: str) -> str:
    """A message's native ID: its chat's ID and its own (message IDs are unique only within a chat)."""
    return f"{chat_id}/{message_id}"


def malformed(conv_id: str, msg: Any, time_field: str) -> Failure | None:
    """A chatMessage without an ``id`` or a valid ``time_field``, as a record to quarantine; None if it has both.

    The reason names what is missing (never the message's text); ``raw`` is the message's JSON. Its
    native ID is the conversation's and its own, or, without an ``id``, a digest of that JSON (stable
    across re-reads, and two such messages of one chat stay two quarantine entries).
    """
    if not isinstance(msg, dict):
        problem = "is not a JSON object"
    elif not isinstance(msg.get("id"), str) or not msg["id"]:
        problem = "has no id"
    elif msg.get(time_field) is None:
        problem = f"has no {time_field}"
    elif parse_ts(msg[time_field]) is None:
        problem = f"has a {time_field} that is not a timestamp"
    else:
        return None
    raw = json.dumps(msg, sort_keys=True).encode()
    mid = msg.get("id") if isinstance(msg, dict) else None
    ref = native_id(conv_id, mid) if isinstance(mid, str) and mid else f"{conv_id}/no-id-{hashlib.sha256(raw).hexdigest()[:16]}"
    return Failure(native_id=ref, reason=f"chatMessage {problem}; quarantined, the rest of the conversation is read", raw=raw, ref=ref)


def reactions_digest(reactions: Any) -> str:
    """A stable short digest of a message's reactions (order and display fields ignored)."""
    norm = sorted(
        json.dumps(
            [r.get("reactionType"), r.get("reactionContentUrl"), ((r.get("user") or {}).get("user") or {}).get("id")], sort_keys=True
        )
        for r in (reactions if isinstance(reactions, list) else [])
        if isinstance(r, dict)
    )
    return hashlib.sha256("\n".join(norm).encode()).hexdigest()[:16]


def _sender(msg: dict[str, Any], me: str | None) -> Sender:
    frm = msg.get("from") or {}
    ident = frm.get("user") or frm.get("application") or frm.get("device") or {}
    uid = ident.get("id") if isinstance(ident, dict) else None
    return Sender(
        id=uid if isinstance(uid, str) else None,
        name=ident.get("displayName") if isinstance(ident, dict) else None,
        is_me=bool(me and uid == me),
    )


def is_system(msg: dict[str, Any]) -> bool:
    """Whether a chatMessage is a system event (members added, chat renamed, a call...), not something a person wrote."""
    return msg.get("messageType") != "message" or not msg.get("from")


def render(source: str, chat: Conversation, msg: dict[str, Any], me: str | None) -> Message:
    """The record of one chatMessage as it is now (text, reactions, attachments as metadata; bytes come separately)."""
    chat_id = chat["id"] or ""
    body = msg.get("body") or {}
    content = body.get("content") if isinstance(body.get("content"), str) else None
    html = content if body.get("contentType") == "html" else None
    text = html_to_text(html) if html is not None else content
    extra: dict[str, Any] = {"message_type": msg.get("messageType")}
    if html is not None:
        extra["html"] = html
    if is_system(msg):
        extra["system"] = True
        if text in ("", None) or (html is not None and "<systemEventMessage" in html):
            text = None
    for src, dst in (("eventDetail", "event_detail"), ("mentions", "mentions"), ("reactions", "reactions"),
                     ("messageHistory", "message_history"), ("subject", "subject"), ("importance", "importance"),
                     ("lastModifiedDateTime", "last_modified"), ("webUrl", "web_url")):  # fmt: skip
        value = msg.get(src)
        if value not in (None, [], ""):
            extra[dst] = value
    attachments: list[Attachment] = []
    refs: list[dict[str, Any]] = []
    reply_to = msg.get("replyToId") if isinstance(msg.get("replyToId"), str) else None
    for att in msg.get("attachments") or []:
        if not isinstance(att, dict):
            continue
        kind = att.get("contentType")
        if kind == "messageReference" and isinstance(att.get("id"), str):
            reply_to = reply_to or att["id"]
        elif kind == "reference":
            attachments.append(Attachment(id=str(att.get("id")), filename=att.get("name"), mime_type=None, size=None))
        refs.append(
            {k: att.get(k) for k in ("id", "contentType", "contentUrl", "name", "thumbnailUrl", "teamsAppId", "content") if att.get(k)}
        )
    if refs:
        extra["attachments"] = refs
    for hosted in hosted_content_ids(html or ""):
        attachments.append(Attachment(id=f"hostedContents/{hosted}", filename=None, mime_type=None, size=None))
    return Message(
        source=source,
        type="event" if extra.get("system") else "message",  # memex.message/1: a system message is an event
        native_id=native_id(chat_id, str(msg.get("id"))),
        sent_at=_iso(msg.get("createdDateTime")),
        conversation=chat,
        sender=_sender(msg, me),
        text=text,
        attachments=attachments,
        reply_to=native_id(chat_id, reply_to) if reply_to else None,
        edited_at=_iso(msg.get("lastEditedDateTime")),
        deleted=bool(msg.get("deletedDateTime")),
        extra=extra,
    )


def as_revision(message: Message, kind: str, rid: str, at: str | None) -> Message:
    """The same rendering, stored as a revision of the original (``revision`` set; the original is never rewritten)."""
    message.revision = Revision(id=rid, kind=kind, at=at)
    return message


def revision_plan(msg: dict[str, Any], since: int) -> list[tuple[str, str, str | None]]:
    """The revisions a re-seen, already stored message brings: ``(kind, revision id, at)``.

    ``since`` is the time (µs) after which a change is new to us. An edit or
    a deletion is named by its own timestamp; any other change of
    ``lastModifiedDateTime`` (a reaction added or removed) by the digest of
    the reactions, so an unchanged set is a duplicate, never a new revision.
    """
    plan: list[tuple[str, str, str | None]] = []
    modified = parse_ts(msg.get("lastModifiedDateTime"))
    explained = False
    for field_name, kind in (("lastEditedDateTime", "edit"), ("deletedDateTime", "delete")):
        at = parse_ts(msg.get(field_name))
        if at is not None and at > since:
            plan.append((kind, f"{kind}-{at}", _iso(msg.get(field_name))))
            explained = explained or at == modified
    if not explained:
        plan.append(("reactions", f"reactions-{reactions_digest(msg.get('reactions'))}", _iso(msg.get("lastModifiedDateTime"))))
    return plan
