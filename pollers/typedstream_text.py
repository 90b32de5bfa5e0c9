"""Text out of an iMessage ``attributedBody`` (an NSArchiver typedstream of an NSAttributedString)."""

from __future__ import annotations

STREAM_MAGIC = b"\x04\x0bstreamtyped"


def decode_attributed_body(blob: bytes) -> str:
    """Return the plain string inside an ``attributedBody`` blob.

    Raises ValueError (with no message content in its text) when the blob is
    not a typedstream or holds no string.
    """
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
