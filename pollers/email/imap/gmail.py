"""Gmail's IMAP extension (``X-GM-EXT-1``): each mail's Gmail IDs and labels, kept in the record's ``extra.gmail``.

Where the server advertises ``X-GM-EXT-1`` (before or after login), each ``UID FETCH`` also asks for
``X-GM-MSGID`` (a 64-bit ID, the same for the mail in every folder and in Google Takeout's ``From`` lines),
``X-GM-THRID`` (the conversation's 64-bit ID) and ``X-GM-LABELS`` (a parenthesised list: system labels as
``\\Inbox``, ``\\Sent``, ``\\Important``, ``\\Starred``, ``\\Draft``, user labels as atoms or quoted strings in
IMAP's modified UTF-7, like mailbox names), as Google's "IMAP Extensions" page documents them. The IDs are kept as
decimal strings (they exceed JSON's safe integers) and as the hexadecimal form Gmail's web addresses use; the
labels decoded, in the server's order: ``{"msgid": "...", "msgid_hex": "...", "thrid": "...", "labels": [...]}``.
"""

from __future__ import annotations

import re
from typing import Any

from pollers.email.imap import utf7

CAPABILITY = "X-GM-EXT-1"
_ID = re.compile(rb"X-GM-(MSGID|THRID) (\d{1,20})")
_LABELS = re.compile(rb"X-GM-LABELS \(")
_CAPS = re.compile(rb"\[CAPABILITY ([^\]]*)\]", re.IGNORECASE)


def advertised(capabilities: tuple[str, ...] | list[str], login_answer: Any = None) -> bool:
    """Whether the server offers X-GM-EXT-1: in the capabilities read at connect, or in the login's ``[CAPABILITY ...]``."""
    if any(c.upper() == CAPABILITY for c in capabilities):
        return True
    for line in login_answer or []:
        if isinstance(line, bytes) and (m := _CAPS.search(line)) and CAPABILITY.encode() in m.group(1).upper().split():
            return True
    return False


def _labels_span(head: bytes) -> tuple[int, int, list[str]] | None:
    """Where ``X-GM-LABELS (...)`` is in ``head`` (start, end) and its labels, or None."""
    m = _LABELS.search(head)
    if m is None:
        return None
    i, labels = m.end(), list[str]()
    while i < len(head):
        ch = head[i : i + 1]
        if ch == b" ":
            i += 1
        elif ch == b")":
            return m.start(), i + 1, labels
        elif ch == b'"':
            j, raw = i + 1, bytearray()
            while j < len(head) and head[j : j + 1] != b'"':
                if head[j : j + 1] == b"\\" and j + 1 < len(head):
                    j += 1
                raw += head[j : j + 1]
                j += 1
            labels.append(_decode(bytes(raw)))
            i = j + 1
        else:
            j = i
            while j < len(head) and head[j : j + 1] not in (b" ", b")"):
                j += 1
            labels.append(_decode(head[i:j]))
            i = j
    return None  # cut short: no labels rather than half of them


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return utf7.decode(text) if "&" in text else text


def fields(head: bytes) -> dict[str, Any]:
    """The Gmail fields one FETCH response's text holds (empty when it holds none)."""
    out: dict[str, Any] = {}
    for kind, value in _ID.findall(head):
        key = kind.decode().lower()
        out.setdefault(key, value.decode())
        if key == "msgid":
            out.setdefault("msgid_hex", format(int(value), "x"))
    span = _labels_span(head)
    if span is not None:
        out["labels"] = span[2]
    return out


def without_labels(head: bytes) -> bytes:
    """``head`` with its ``X-GM-LABELS (...)`` removed (a label may read like another FETCH item)."""
    span = _labels_span(head)
    return head if span is None else head[: span[0]] + head[span[1] :]
