"""Text out of an iMessage ``attributedBody`` (an NSArchiver typedstream of an NSAttributedString)."""

from __future__ import annotations

import functools
import re

STREAM_MAGIC = b"\x04\x0bstreamtyped"

# The fast path reads only whole blobs in one of the layouts Messages.app writes for plain text, byte for byte:
# header, the class chain, the NSString, then the attribute runs and both end-of-object marks up to the last byte.
# pytypedstream parses the whole blob (a damaged tail makes it fail), so the fast path must see the whole blob too.
# Each layout is (prefix up to the NSString's "+", tails allowed after the string's own end-of-object mark).
# Object and shared-string references in the tails count from the prefix, so each prefix has its own tails.
_PLAIN_PREFIX = (  # NSAttributedString > NSObject, then NSString
    b"\x84\x84\x84\x12NSAttributedString\x00\x84\x84\x08NSObject\x00\x85\x92\x84\x84\x84\x08NSString\x01\x94\x84\x01+"
)
_MUTABLE_PREFIX = (  # NSMutableAttributedString > NSAttributedString > NSObject, then NSMutableString > NSString
    b"\x84\x84\x84\x19NSMutableAttributedString\x00\x84\x84\x12NSAttributedString\x00\x84\x84\x08NSObject\x00\x85"
    b"\x92\x84\x84\x84\x0fNSMutableString\x01\x84\x84\x08NSString\x01\x95\x84\x01+"
)
_RUN = b"\x84\x02iI\x01"  # one attribute run: typed values "iI", 1 run, then its length (any integer)
_DICT = b"\x92\x84\x84\x84\x0cNSDictionary\x00"
_NUMBER = b"\x92\x84\x84\x84\x08NSNumber\x00\x84\x84\x07NSValue\x00"
_PART = b"\x1d__kIMMessagePartAttributeName\x86"
_DIRECTION = b"&__kIMBaseWritingDirectionAttributeName\x86"
_PLAIN_TAILS = (  # after the run length; each ends the dictionary, the run list and the attributed string
    _DICT + b"\x94\x84\x01i\x00\x86\x86",  # {} (what encode_attributed_body writes)
    _DICT + b"\x94\x84\x01i\x01\x92\x84\x96\x96" + _PART + _NUMBER + b"\x94\x84\x01*\x84\x99\x99\x00\x86\x86\x86",  # {part: 0}
    _DICT  # {writing direction: -1, part: 0}
    + (b"\x94\x84\x01i\x02\x92\x84\x96\x96" + _DIRECTION + _NUMBER + b"\x94\x84\x01*\x84\x84\x01q\x9d\xff\x86")
    + (b"\x92\x84\x96\x96" + _PART + b"\x92\x84\x9b\x9c\x9d\x9d\x00\x86\x86\x86"),
)
_MUTABLE_TAILS = (  # the same dictionaries, with the references counted after the longer prefix
    _DICT + b"\x95\x84\x01i\x01\x92\x84\x98\x98" + _PART + _NUMBER + b"\x95\x84\x01*\x84\x9b\x9b\x00\x86\x86\x86",  # {part: 0}
    _DICT  # {writing direction: -1, part: 0}
    + (b"\x95\x84\x01i\x02\x92\x84\x98\x98" + _DIRECTION + _NUMBER + b"\x95\x84\x01*\x84\x84\x01q\x9f\xff\x86")
    + (b"\x92\x84\x98\x98" + _PART + b"\x92\x84\x9d\x9e\x9f\x9f\x00\x86\x86\x86"),
)
# An integer as pytypedstream reads it, restricted to the forms Apple writes: one byte 0..127, or the tag
# 0x81 and 2 bytes, or 0x82 and 4 bytes, little-endian (the "streamtyped" header). Other heads fall back.
_INT = rb"(?:[\x00-\x7f]|\x81[\x00-\xff]{2}|\x82[\x00-\xff]{4})"
_START = re.escape(STREAM_MAGIC + b"\x81\xe8\x03\x84\x01@")


@functools.cache
def _head() -> re.Pattern[bytes]:
    """The stream's head (compiled on first use: an idle cron poll decodes nothing and pays no regex compile)."""
    return re.compile(b"%b(?:(%b)|%b)(%b)" % (_START, re.escape(_PLAIN_PREFIX), re.escape(_MUTABLE_PREFIX), _INT), re.DOTALL)


@functools.cache
def _tail_pattern(tails: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """After the string: its end-of-object mark, then either the end of the attributed string (no runs)
    or one run over one of the known attribute dictionaries, and nothing after."""
    known = b"|".join(re.escape(tail) for tail in tails)
    return re.compile(b"\x86(?:\x86|" + re.escape(_RUN) + _INT + b"(?:" + known + b"))", re.DOTALL)


def _int_value(raw: bytes) -> int:
    if raw[0] == 0x81 or raw[0] == 0x82:
        return int.from_bytes(raw[1:], "little")
    return raw[0]


def _decode_fast(blob: bytes) -> str | None:
    """The string of a blob in one of the exact common layouts, or None for anything else (never a guess).

    None for any other class chain, reference byte, integer form or attribute dictionary, for a length
    past the end, for bytes that are not strict UTF-8 (pytypedstream decodes them strictly too), and for
    a tail that is cut, changed or followed by more bytes: those go to pytypedstream unchanged.
    """
    head = _head().match(blob)
    if head is None:
        return None
    start = head.end()
    end = start + _int_value(head.group(2))
    tail = _tail_pattern(_PLAIN_TAILS if head.group(1) is not None else _MUTABLE_TAILS)
    if tail.fullmatch(blob, end) is None:  # also when the length runs past the end (no end mark there)
        return None
    try:
        return blob[start:end].decode("utf-8")
    except UnicodeDecodeError:
        return None


def decode_attributed_body(blob: bytes) -> str:
    """Return the plain string inside an ``attributedBody`` blob.

    Raises ValueError (with no message content in its text) when the blob is
    not a typedstream or holds no string. Blobs in the common plain-text layouts
    are read directly; every other blob goes through pytypedstream, with the same
    result either way.
    """
    text = _decode_fast(blob)
    if text is not None:
        return text
    return _decode_slow(blob)


def _decode_slow(blob: bytes) -> str:
    """What :func:`decode_attributed_body` returns or raises, by pytypedstream's full unarchiver."""
    if not blob.startswith(STREAM_MAGIC):
        raise ValueError("not a typedstream (no streamtyped header)")
    import typedstream  # imported only when a row needs it

    try:
        archived = typedstream.unarchive_from_data(blob)
    except Exception as exc:
        raise ValueError(f"typedstream could not be parsed ({type(exc).__name__})") from None
    for item in getattr(archived, "contents", []):
        value = getattr(item, "value", None)
        inner = getattr(value, "value", None)
        if isinstance(inner, str):
            return inner
    raise ValueError("typedstream holds no string")


def salvage_text(blob: bytes) -> str | None:
    """The readable start of the string in a blob :func:`decode_attributed_body` could not parse, or None.

    A truncated or damaged typedstream (real ones exist: a string that declares 157 bytes and holds 17) still
    has the NSString's length and first bytes in place: take what is there, up to the first byte that is not
    valid UTF-8. The caller marks the text partial and keeps the blob for a better parser later.
    """
    at = blob.find(b"NSString")
    mark = blob.find(b"\x84\x01+", at) if at >= 0 else -1
    if mark < 0 or mark + 3 >= len(blob):
        return None
    pos = mark + 3
    tag = blob[pos]
    if tag == 0x81:
        declared, start = int.from_bytes(blob[pos + 1 : pos + 3], "little"), pos + 3
    elif tag == 0x82:
        declared, start = int.from_bytes(blob[pos + 1 : pos + 5], "little"), pos + 5
    else:
        declared, start = tag, pos + 1
    data = blob[start : start + declared]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data[: exc.start].decode("utf-8")
    return text or None


def _length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    if n < 0x8000:
        return b"\x81" + n.to_bytes(2, "little")
    return b"\x82" + n.to_bytes(4, "little")


def encode_attributed_body(text: str) -> bytes:
    """Archive ``text`` the way Messages.app stores ``attributedBody`` (for samples and tests).

    The layout follows real blobs: header, NSAttributedString > NSObject,
    an NSString with the UTF-8 bytes, then one attribute run over the whole
    string (length in UTF-16 units) with an empty NSDictionary.
    """
    utf8 = text.encode("utf-8")
    utf16_units = len(text.encode("utf-16-le")) // 2
    return (
        STREAM_MAGIC
        + b"\x81\xe8\x03\x84\x01@"
        + b"\x84\x84\x84\x12NSAttributedString\x00\x84\x84\x08NSObject\x00\x85\x92"
        + b"\x84\x84\x84\x08NSString\x01\x94\x84\x01+"
        + _length(len(utf8))
        + utf8
        + b"\x86\x84\x02iI\x01"
        + _length(utf16_units)
        + b"\x92\x84\x84\x84\x0cNSDictionary\x00\x94\x84\x01i\x00\x86\x86"
    )
