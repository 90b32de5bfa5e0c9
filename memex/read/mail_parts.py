"""An attachment's bytes inside a stored mail (``messages/S/ID.eml`` beside its record): a mail's attachments are
listed in its record (name, type, size) but their bytes stay in the mail as the server sent it, so they are read
back from it with the standard library's MIME parser.

The record lists a mail's attachments in the order of its MIME leaves; a leaf is taken for the record's n-th
attachment when it is the n-th leaf with the same file name (or, nameless, the same type and size).
"""

from __future__ import annotations

from typing import Any


def part_bytes(raw: bytes, attachments: list[dict[str, Any]], index: int) -> bytes | None:
    """The decoded bytes of the ``index``-th of a mail's listed ``attachments`` in the mail ``raw``, or None."""
    import email
    import email.policy

    want = attachments[index]
    same = [a for a in attachments[:index] if _match_key(a) == _match_key(want)]
    msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    found = 0
    for part in msg.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        body = payload if isinstance(payload, bytes) else b""
        name = part.get_filename()
        key = (name, None, None) if name else (None, part.get_content_type(), len(body))
        if key == _match_key(want):
            if found == len(same):
                return body
            found += 1
    return None


def _match_key(att: dict[str, Any]) -> tuple[str | None, str | None, int | None]:
    """What identifies an attachment among a mail's leaves: its file name, else its type and size."""
    name = att.get("filename")
    if isinstance(name, str) and name:
        return (name, None, None)
    return (None, att.get("mime_type"), att.get("size") if isinstance(att.get("size"), int) else None)
