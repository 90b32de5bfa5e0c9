"""What a Signal message carries besides its text and files, in one shape for both paths (live signal-cli and the
Signal Desktop backfill), so a message read either way becomes the same record.

Each function takes plain values, already picked out of signal-cli's JSON (``JsonSticker``, ``JsonMention``,
``JsonQuote``, ``JsonPreview``, ``JsonSharedContact``) or Desktop's message JSON (``sticker``, ``bodyRanges``,
``quote``, ``preview``, ``contact``), and returns the value kept under ``extra``:

- ``sticker``: ``{"pack_id": hex, "sticker_id": n, "emoji": e}`` (emoji where known); its image is an attachment
  with the ID ``sticker:<pack_id>:<sticker_id>``;
- ``mentions``: ``[{"aci", "start", "length", "name"?}]`` (offsets into the text as sent, one U+FFFC per mention, in
  UTF-16 code units as Signal counts them);
- ``quote``: ``{"id": sent ms, "author": ACI, "text": ...}`` (the quoted message is also ``reply_to``);
- ``server_at`` / ``received_at``: when Signal's server received it, when this device received it (RFC 3339);
- ``previews``: ``[{"url", "title", "description"}]``; ``contacts``: ``[{"name", "phones", "emails", "organization"}]``;
- ``expires_in_s`` (the disappearing-message timer) and ``view_once``.
"""

from __future__ import annotations

from typing import Any

from pollers.signal.records import sent_time

PLACEHOLDER = "\ufffc"  # where a mention sits in a Signal message's text


def sticker_id(pack_id: str, number: int) -> str:
    """The attachment ID of a sticker's image (the same on both paths)."""
    return f"sticker:{pack_id.lower()}:{int(number)}"


def sticker(pack_id: Any, number: Any, emoji: Any = None) -> dict[str, Any] | None:
    """``extra.sticker``; None when the pack or sticker ID is missing."""
    if not isinstance(pack_id, str) or not pack_id or number is None:
        return None
    out: dict[str, Any] = {"pack_id": pack_id.lower(), "sticker_id": int(number)}
    if isinstance(emoji, str) and emoji:
        out["emoji"] = emoji
    return out


def mention(aci: Any, start: Any, length: Any, name: Any = None) -> dict[str, Any] | None:
    """One entry of ``extra.mentions``; None when it names nobody (a style range, not a mention)."""
    if not isinstance(aci, str) or not aci:
        return None
    out: dict[str, Any] = {"aci": aci, "start": int(start or 0), "length": int(length or 0)}
    if isinstance(name, str) and name:
        out["name"] = name
    return out


def with_names(text: str, mentions: list[dict[str, Any]]) -> str:
    """``text`` with each mention's placeholder replaced by ``@name`` where the name is known. Offsets count UTF-16
    code units, as Signal's clients (JavaScript, Java) do: an emoji before a mention counts two."""
    units = text.encode("utf-16-le")
    for m in sorted(mentions, key=lambda m: m["start"], reverse=True):
        start, end = 2 * m["start"], 2 * (m["start"] + max(m["length"], 1))
        if m.get("name") and units[start:end] == PLACEHOLDER.encode("utf-16-le") * ((end - start) // 2):
            units = units[:start] + ("@" + m["name"]).encode("utf-16-le") + units[end:]
    return units.decode("utf-16-le", "replace")


def quote(quoted_id: Any, author: Any, text: Any) -> dict[str, Any] | None:
    """``extra.quote``; None without the quoted message's time."""
    if not quoted_id:
        return None
    return {"id": int(quoted_id), "author": author if isinstance(author, str) and author else None,
            "text": text if isinstance(text, str) else None}  # fmt: skip


def times(server_ms: Any, received_ms: Any) -> dict[str, str]:
    """``extra.server_at`` and ``extra.received_at`` (each only when known)."""
    out: dict[str, str] = {}
    for key, ms in (("server_at", server_ms), ("received_at", received_ms)):
        if isinstance(ms, int | float) and ms > 0:
            out[key] = sent_time(int(ms))
    return out


def preview(url: Any, title: Any, description: Any) -> dict[str, Any] | None:
    """One entry of ``extra.previews``; None without a URL."""
    if not isinstance(url, str) or not url:
        return None
    return {"url": url, "title": title or None, "description": description or None}


def contact(name: Any, phones: Any, emails: Any, organization: Any) -> dict[str, Any]:
    """One entry of ``extra.contacts``: ``name`` is the display name (given, middle and family name, or the nickname)."""
    return {
        "name": name or None,
        "phones": [str(p["value"]) for p in phones or [] if isinstance(p, dict) and p.get("value")],
        "emails": [str(e["value"]) for e in emails or [] if isinstance(e, dict) and e.get("value")],
        "organization": organization or None,
    }


def display_name(parts: dict[str, Any], given: str, middle: str, family: str, nickname: str) -> str | None:
    """A shared contact's display name from its name fields (keys differ between signal-cli and Desktop)."""
    full = " ".join(str(parts[k]) for k in (given, middle, family) if parts.get(k))
    return full or (str(parts[nickname]) if parts.get(nickname) else None)


def compact(extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` without empty values."""
    return {k: v for k, v in extra.items() if v not in (None, [], {}, False, 0, "")}
