"""Signal Desktop: what a message row carries besides its text and files, as the live poller keeps it
(:mod:`pollers.signal.extras`): the sticker (and its image), mentions, the quote, link previews, shared contacts,
the disappearing-message timer, view-once, and the server and received times.

Desktop's message JSON (``MessageAttributesType``): ``sticker`` ``{packId, stickerId, emoji, data}`` (since schema
1360 the image is a ``message_attachments`` row of type ``sticker``), ``bodyRanges`` (a mention has ``mentionAci``,
older rows ``mentionUuid``, and ``replacementText``, the name shown), ``quote`` ``{id, authorAci, text}``,
``preview`` ``[{url, title, description}]``, ``contact`` ``[{name: {givenName, middleName, familyName, nickname},
number, email, organization}]``, ``expireTimer`` (s), ``isViewOnce``, ``serverTimestamp`` and ``received_at_ms``
(``received_at`` is a local counter, never a time).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memex.plugin import Attachment, Content, Message
from pollers.signal import extras
from pollers.signal.desktop_files import opener


def fill_extras(message: Message, version: dict[str, Any], doc: dict[str, Any], first: bool,
                listed: list[dict[str, Any]] | None, root: Path) -> list[Content]:  # fmt: skip
    """Add one version's extras to ``message`` (``doc``: the row's JSON, whose row-wide fields go on the first
    version only; ``listed``: the version's message_attachments rows, None in the older layout); returns the
    sticker image's content, if any."""
    extra = message.extra
    contents: list[Content] = []
    stuck = version.get("sticker") if isinstance(version.get("sticker"), dict) else None
    if stuck is not None and (found := extras.sticker(stuck.get("packId"), stuck.get("stickerId"), stuck.get("emoji"))):
        extra["sticker"] = found
        data = next((a for a in listed if a.get("attachmentType") == "sticker"), None) if listed is not None else stuck.get("data")
        data = data if isinstance(data, dict) else {}
        att = Attachment(id=extras.sticker_id(found["pack_id"], found["sticker_id"]), filename=None,
                         mime_type=data.get("contentType"), size=data.get("size"))  # fmt: skip
        message.attachments.append(att)
        open_it = opener(root, data)
        if open_it is None:
            att["missing"] = True
        else:
            contents.append(Content(index=len(message.attachments) - 1, open=open_it))
    mentions = [m for r in version.get("bodyRanges") or [] if isinstance(r, dict)
                if (m := extras.mention(r.get("mentionAci") or r.get("mentionUuid"), r.get("start"), r.get("length"),
                                        r.get("replacementText")))]  # fmt: skip
    if mentions:
        extra["mentions"] = mentions
        if isinstance(message.text, str):
            message.text = extras.with_names(message.text, mentions)
    q = version.get("quote")
    if isinstance(q, dict) and (found_q := extras.quote(q.get("id"), q.get("authorAci") or q.get("authorUuid"), q.get("text"))):
        extra["quote"] = found_q
    previews = [p for x in version.get("preview") or [] if isinstance(x, dict)
                if (p := extras.preview(x.get("url"), x.get("title"), x.get("description")))]  # fmt: skip
    contacts = [extras.contact(extras.display_name(c.get("name") or {}, "givenName", "middleName", "familyName", "nickname"),
                               c.get("number"), c.get("email"), c.get("organization"))
                for c in version.get("contact") or [] if isinstance(c, dict)]  # fmt: skip
    extra.update(extras.compact({"previews": previews, "contacts": contacts}))
    if first:
        row = {"expires_in_s": doc.get("expireTimer"), "view_once": bool(doc.get("isViewOnce"))}
        extra.update(extras.compact({**row, **extras.times(doc.get("serverTimestamp"), doc.get("received_at_ms"))}))
    return contents
