"""IMAP's modified UTF-7 mailbox names (RFC 3501 section 5.1.3): ``Entw&APw-rfe`` is ``Entwürfe``.

Names go to the server encoded and are shown (records, logs, errors)
decoded; a name that is not valid modified UTF-7 is shown as sent.
"""

from __future__ import annotations

import base64
import binascii
import re

_SHIFTED = re.compile(r"&([^-]*)-")


def decode(name: str) -> str:
    """A mailbox name as the server sends it, decoded for display (unchanged when it is not valid modified UTF-7)."""
    if "&" not in name:
        return name

    def one(m: re.Match[str]) -> str:
        chunk = m.group(1)
        if not chunk:
            return "&"
        data = chunk.replace(",", "/")
        try:
            return base64.b64decode(data + "=" * (-len(data) % 4), validate=True).decode("utf-16-be")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise ValueError(name) from None

    try:
        return _SHIFTED.sub(one, name)
    except ValueError:
        return name


def encode(name: str) -> str:
    """A mailbox name as typed (``Entwürfe``) in modified UTF-7 for the server; ASCII names are unchanged but ``&``."""
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            data = base64.b64encode("".join(pending).encode("utf-16-be")).decode().rstrip("=").replace("/", ",")
            out.append(f"&{data}-")
            pending.clear()

    for ch in name:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            pending.append(ch)
    flush()
    return "".join(out)
