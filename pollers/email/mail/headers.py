"""Header decoding for the email pollers: whatever the parser hands back, never an exception.

Python's compat32 parser returns a header with raw 8-bit bytes as an
:class:`email.header.Header` (not a ``str``), so every value here is read
from :meth:`~email.message.Message.raw_items` (8-bit bytes surrogate-escaped)
and turned into text by :func:`clean`. RFC 2047 encoded words in a wrong or
unknown charset are decoded best effort (:func:`decode_bytes`: the labelled
charset, a superset of it, UTF-8, then Latin-1) and the problem is listed.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import email.errors
import email.message
import email.utils
import functools
import re
from datetime import UTC

from memex.plugin import rfc3339
from pollers.email.mail.mime import Mail

_ID_RE = re.compile(r"<([^<>]*)>")
_ADDR_RE = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_GOOD_ADDR_RE = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")
_ESCAPED = re.compile("[\udc80-\udcff]")  # an 8-bit byte as the parser surrogate-escapes it

# Labels Python does not know (or knows too narrowly) -> the codec real mailers meant.
_ALIASES = {
    "x-gbk": "gb18030",
    "x-gb2312": "gb18030",
    "iso-8859-8-i": "iso8859-8",
    "iso-8859-6-i": "iso8859-6",
    "unicode-1-1-utf-7": "utf-7",
    "x-unicode-2-0-utf-7": "utf-7",
    "x-mac-roman": "mac-roman",
    "windows-31j": "cp932",
    "x-sjis": "cp932",
    "x-euc-jp": "euc_jp",
    "ks_c_5601": "cp949",
    "x-windows-949": "cp949",
    "ansi_x3.4-1968": "ascii",
    "x-user-defined": "latin-1",
}
# A codec -> a superset that decodes what mailers really send under its label.
_SUPERSETS = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "euc_kr": "cp949",
    "shift_jis": "cp932",
    "big5": "big5hkscs",
    "iso8859-1": "cp1252",
    "latin-1": "cp1252",
    "tis-620": "cp874",
    "iso8859-11": "cp874",
    "iso8859-9": "cp1254",
}


def clean(value: object) -> str:
    """Any header value as text: surrogate-escaped 8-bit bytes become UTF-8 if they are, else Latin-1 (never fails)."""
    text = str(value)
    if text.isascii() or _ESCAPED.search(text) is None:  # the common case, at C speed
        return text
    data = text.encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def raw_all(msg: email.message.Message, name: str) -> list[str]:
    """Every value of header ``name`` as sent (8-bit bytes surrogate-escaped, not yet decoded)."""
    lname = name.lower()
    if isinstance(msg, Mail):
        return msg.header_values(lname)
    return [str(v) for k, v in msg.raw_items() if k.lower() == lname]


def raw(msg: email.message.Message, name: str) -> str | None:
    """The first value of header ``name`` as sent, or None."""
    if isinstance(msg, Mail):
        return msg.header_value(name.lower())
    values = raw_all(msg, name)
    return values[0] if values else None


@functools.lru_cache(maxsize=256)
def codec_for(label: str | None) -> str | None:
    """The Python codec name for a MIME charset label (common aliases included), or None when unknown (remembered:
    a mail's few labels are looked up for every encoded word and part)."""
    if not label:
        return None
    name = label.strip().strip('"').lower()
    name = _ALIASES.get(name, name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_bytes(data: bytes, label: str | None, *, last: str = "latin-1") -> tuple[str, str | None]:
    """Decode ``data`` labelled ``label`` best effort; return the text and a problem (None when the label was right).

    Order: the labelled codec, a superset of it (GB18030 for GB2312, CP949
    for EUC-KR, ...), UTF-8, then ``last``: ``"latin-1"`` (never fails) or
    ``"replace"`` (the labelled codec, else UTF-8, with replacement characters).
    """
    codec = codec_for(label) if label else "ascii"
    if codec is not None:
        try:
            return data.decode(codec), None
        except UnicodeDecodeError:
            pass
    shown = (label or "none")[:40]
    tried = [c for c in (_SUPERSETS.get(codec or ""), "utf-8") if c]
    for candidate in tried:
        try:
            text = data.decode(candidate)
        except UnicodeDecodeError:
            continue
        if codec == "ascii" and candidate == "utf-8":
            return text, None  # unlabelled 8-bit UTF-8 is the norm, not a problem
        why = "unknown charset" if codec is None else "bytes not valid in charset"
        return text, f"{why} {shown}, decoded as {codecs.lookup(candidate).name}"
    if last == "latin-1":
        why = "unknown charset" if codec is None else "bytes not valid in charset"
        return data.decode("latin-1"), f"{why} {shown}, decoded as Latin-1"
    if codec is None:
        return data.decode("utf-8", "replace"), f"unknown charset {shown}, decoded as UTF-8 with replacements"
    return data.decode(codec, "replace"), f"bytes not valid in charset {shown}, decoded with replacements"


_ENCODED_WORD = re.compile(r"=\?([^?]*)\?([bBqQ])\?(.*?)\?=")


def _word_bytes(encoding: str, text: str) -> bytes:
    """The bytes of one encoded word's text (B: base64, padding forgiven; Q: ``_`` is a space, ``=XX`` a byte)."""
    try:  # as Python's own decoder: a raw 8-bit byte inside a word (read as Latin-1 by clean) is that byte again
        data = text.encode("latin-1")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogateescape")
    if encoding in "bB":
        data = re.sub(rb"[^A-Za-z0-9+/]", b"", data)
        data = data[: len(data) - 1] if len(data) % 4 == 1 else data  # a lone last character holds no byte
        return base64.b64decode(data + b"=" * (-len(data) % 4))
    return re.sub(rb"=([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), data.replace(b"_", b" "))


def decode_words(value: str, problems: list[str], label: str) -> str:
    """RFC 2047 encoded words in ``value`` decoded to text; broken charsets best effort (problem listed).

    Whitespace between two encoded words is dropped; text between an encoded word and plain text is kept as
    sent (RFC 2047 §6.2). Adjacent words in one charset are joined before decoding, so a character split across
    two words survives.
    """
    pieces: list[str | tuple[str, bytes]] = []  # plain text, or an encoded word's (charset, bytes)
    pos = 0
    for found in _ENCODED_WORD.finditer(value):
        between = value[pos : found.start()]
        pos = found.end()
        charset = found.group(1).split("*", 1)[0]  # RFC 2231 language tag dropped
        try:
            data = _word_bytes(found.group(2), found.group(3))
        except (ValueError, binascii.Error):
            problems.append(f"{label}: undecodable encoded words, kept as sent")
            pieces.append(between + found.group(0))
            continue
        last = pieces[-1] if pieces else None
        if between and not (between.isspace() and isinstance(last, tuple)):
            pieces.append(between)
            last = None
        if isinstance(last, tuple) and last[0].lower() == charset.lower():
            pieces[-1] = (charset, last[1] + data)
        else:
            pieces.append((charset, data))
    if pos < len(value):
        pieces.append(value[pos:])
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, str):
            out.append(piece)
            continue
        text, problem = decode_bytes(piece[1], piece[0] or None)
        if problem:
            problems.append(f"{label}: encoded words in {problem}")
        out.append(text)
    return "".join(out)


def header_text(msg: email.message.Message, name: str, problems: list[str]) -> str | None:
    """A header decoded from RFC 2047 words (and raw 8-bit bytes) to text, or None when absent."""
    value = raw(msg, name)
    if value is None:
        return None
    if clean(value) != value:
        problems.append(f"header {name}: raw 8-bit bytes")
        value = clean(value)
    decoded = decode_words(value, problems, f"header {name}")
    return re.sub(r"\s*\r?\n\s*", " ", decoded).strip()


_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_SIMPLE_ADDR = rf"{_ATEXT}(?:\.{_ATEXT})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
# ``addr@host``, or ``Display Name <addr@host>`` whose name is plain words (atext: no quotes, dots, commas, comments).
_SIMPLE_VALUE = re.compile(
    rf"[ \t]*(?:(?P<bare>{_SIMPLE_ADDR})|(?P<name>{_ATEXT}(?:[ \t]+{_ATEXT})*)?[ \t]*<(?P<addr>{_SIMPLE_ADDR})>)[ \t]*"
)


def simple_addresses(values: list[str]) -> list[tuple[str, str]] | None:
    """What :func:`email.utils.getaddresses` gives for values that are each one plain address, or None for any other.

    Most From/To/Cc values are ``Name <addr@host>`` or ``addr@host``; the general parser costs a tenth of a
    millisecond each. Anything else (quotes, comments, groups, several addresses, folding) returns None and goes
    to the general parser; ``tests/email/test_headers_fast.py`` pins that both agree.
    """
    out: list[tuple[str, str]] = []
    for value in values:
        found = _SIMPLE_VALUE.fullmatch(value)
        if found is None:
            return None
        bare = found.group("bare")
        if bare is not None:
            out.append(("", bare))
        else:
            display = found.group("name")
            out.append((" ".join(display.split()) if display else "", found.group("addr")))
    return out


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # in a header value: an escape sequence (its '[' opens a domain literal)
_ANGLED = re.compile(rf"(?P<name>[^<>]*)<(?P<addr>{_SIMPLE_ADDR})>[ \t]*")


def _controlled(values: list[str]) -> list[tuple[str, str]] | None:
    """``Name <addr>`` values whose name holds control characters (``\\x1b[31mEvil``), read as such: the general
    parser takes an escape sequence's ``[`` for a domain literal and loses the address. None for any other shape."""
    out: list[tuple[str, str]] = []
    for value in values:
        found = _ANGLED.fullmatch(value.strip())
        if found is None:
            return None
        out.append((found.group("name").strip().strip('"').strip(), found.group("addr")))
    return out


def addresses(msg: email.message.Message, name: str, problems: list[str]) -> list[tuple[str, str]]:
    """``(display name, address)`` pairs of an address header; empty when absent or unparseable.

    When the parser makes no address of a value (``tim@x.com concierge@x.com``
    gives ``@x.com``), the first thing that looks like an address in the raw
    value is used instead, and the problem is listed.
    """
    values = [clean(v) for v in raw_all(msg, name)]
    if not values:
        return []
    pairs = simple_addresses(values)
    if pairs is None and any(_CONTROL.search(v) for v in values):
        pairs = _controlled(values)
    if pairs is None:
        try:
            pairs = email.utils.getaddresses(values)
        except Exception:
            problems.append(f"header {name}: unparseable addresses")
            pairs = []
    out = []
    for display, addr in pairs:
        if not addr and not display:
            continue
        display = decode_words(display, problems, f"header {name} display name") if display else ""
        out.append((clean(display), clean(addr).strip()))
    if not any(_GOOD_ADDR_RE.match(addr) for _, addr in out):
        found = _ADDR_RE.search(" ".join(values))
        if found is not None:
            problems.append(f"header {name}: malformed, took the first address in it")
            return [("", found.group(0))] + [(d, a) for d, a in out if _GOOD_ADDR_RE.match(a)]
    return out


def message_ids(value: str | None) -> list[str]:
    """Every ``<id>`` in a Message-ID / In-Reply-To / References value, normalized, in order."""
    if not value:
        return []
    text = clean(re.sub(r"\s+", " ", str(value)))
    found = [m.strip() for m in _ID_RE.findall(text)]
    ids = [i for i in found if i]
    if not ids and not found:
        bare = text.strip().strip("<>").strip()
        if bare and " " not in bare:
            ids = [bare]
    return [f"<{i}>" if i.startswith("sha256:") else i for i in ids]


def parse_date(value: str | None, problems: list[str]) -> str | None:
    """A Date header as RFC 3339 UTC; a missing zone counts as UTC; unparseable gives None and a problem."""
    if not value:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(clean(value))
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
