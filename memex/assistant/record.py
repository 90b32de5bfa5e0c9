"""A stored record as ``show_message`` answers it: fields, attachments listed (never inlined), a page of its text
and a summary of its revisions (:meth:`memex.assistant.archive.Archive.message`)."""

from __future__ import annotations

from typing import Any

SNIPPET = 160  # characters of a result's snippet
REVISIONS_LISTED = 10  # a message's latest revisions listed (all are counted)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _person(sender_id: str | None, name: str | None, is_me: Any) -> dict[str, Any]:
    return {"id": sender_id or None, "name": name or None, "is_me": bool(is_me)}


def message_answer(key: str, doc: dict[str, Any], revisions: list[Any], offset: int, max_chars: int) -> dict[str, Any]:
    """The answer of ``show_message`` for the record ``doc`` stored at ``key`` (see :meth:`Archive.message`)."""
    conv = doc.get("conversation") if isinstance(doc.get("conversation"), dict) else {}
    sender = doc.get("sender") if isinstance(doc.get("sender"), dict) else {}
    extra = doc.get("extra") if isinstance(doc.get("extra"), dict) else {}
    assert isinstance(conv, dict) and isinstance(sender, dict) and isinstance(extra, dict)
    text = doc.get("text") if isinstance(doc.get("text"), str) else ""
    assert isinstance(text, str)
    end = min(len(text), offset + max_chars)
    attachments = []
    for att in doc.get("attachments") or []:
        if isinstance(att, dict):
            attachments.append({"name": att.get("filename") or att.get("id"), "type": att.get("mime_type"),
                                "size": att.get("size") if isinstance(att.get("size"), int) else None,
                                **({"missing": True} if att.get("missing") else {})})  # fmt: skip
    recipients = [r for r in (extra.get("to") or []) + (extra.get("cc") or []) if isinstance(r, str)] if isinstance(
        extra.get("to") or [], list) and isinstance(extra.get("cc") or [], list) else []  # fmt: skip
    listed = [{"at": r["at"], "kind": r["kind"], **({"text": _cut(r["text"], SNIPPET)} if r["text"] is not None else {}),
               **({"deleted": True} if r["deleted"] else {})} for r in revisions[-REVISIONS_LISTED:]]  # fmt: skip
    return {
        "key": key, "source": doc.get("source"), "native_id": doc.get("native_id"), "time": doc.get("sent_at"),
        "conversation": {"id": conv.get("id"), "name": conv.get("name")},
        "sender": _person(sender.get("id"), sender.get("name"), sender.get("is_me") is True),
        "recipients": recipients[:20], "subject": extra.get("subject") if isinstance(extra.get("subject"), str) else None,
        **({"deleted": True} if doc.get("deleted") is True else {}),
        "attachments": attachments[:50], "attachments_total": len(attachments),
        "text": text[offset:end], "text_offset": min(offset, len(text)), "text_length": len(text),
        "more": {"offset": end} if end < len(text) else None,
        "revisions": {"total": len(revisions), "latest": listed},
    }  # fmt: skip
