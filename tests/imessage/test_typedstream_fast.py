"""The fast attributedBody path gives pytypedstream's answer or steps aside.

pytypedstream (``_decode_slow``) is the oracle throughout: for every blob, the fast path returns exactly
what the full unarchiver returns, or None, and ``decode_attributed_body`` returns the same string or raises
the same ValueError as before the fast path existed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pollers.imessage.typedstream import (
    _MUTABLE_PREFIX,
    _MUTABLE_TAILS,
    _PLAIN_PREFIX,
    _PLAIN_TAILS,
    _RUN,
    STREAM_MAGIC,
    _decode_fast,
    _decode_slow,
    _length,
    decode_attributed_body,
    encode_attributed_body,
)

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = Path(__file__).parent / "data" / "imessage"

TEXTS = [
    "",
    "hi",
    "plain ASCII, with punctuation: ok?",
    "emoji 👋🏽 and \ufffc attachment",
    "NUL\x00inside",
    "bytes 0x86 inside: \u0146 \u0086 and the string tag \u0084\x01+ too",
    "x" * 127,
    "x" * 128,
    "y" * 255,
    "y" * 256,
    "z" * 32767,
    "z" * 32768,
    "ü" * 35000,  # 70000 bytes of UTF-8
    "w" * 70000,
]


def slow_outcome(blob: bytes) -> str | tuple[str, str]:
    """pytypedstream's string, or the ValueError text it raises."""
    try:
        return _decode_slow(blob)
    except ValueError as exc:
        return ("ValueError", str(exc))


def outcome(blob: bytes) -> str | tuple[str, str]:
    """decode_attributed_body's string, or the ValueError text it raises."""
    try:
        return decode_attributed_body(blob)
    except ValueError as exc:
        return ("ValueError", str(exc))


def real_layout(text: str, prefix: bytes, tail: bytes | None) -> bytes:
    """A blob in one of the layouts Messages.app writes (one run over the whole string, or none)."""
    utf8 = text.encode("utf-8")
    runs = b"\x86" if tail is None else _RUN + _length(len(text.encode("utf-16-le")) // 2) + tail
    return STREAM_MAGIC + b"\x81\xe8\x03\x84\x01@" + prefix + _length(len(utf8)) + utf8 + b"\x86" + runs


LAYOUTS = [
    *[(_PLAIN_PREFIX, tail) for tail in (None, *_PLAIN_TAILS)],
    *[(_MUTABLE_PREFIX, tail) for tail in (None, *_MUTABLE_TAILS)],
]


def sample_blobs() -> list[bytes]:
    """Small blobs of every accepted layout, with texts holding the bytes the format uses as marks."""
    texts = ["", "ok", "bytes 0x86 inside: \u0146 \u0086 and \u0084\x01+", "x" * 130]
    return [encode_attributed_body(t) for t in texts] + [real_layout(t, p, tail) for t in texts for p, tail in LAYOUTS]


def assert_same_as_before(blob: bytes) -> None:
    """The fast path agrees with pytypedstream or steps aside, and the public function behaves as before."""
    fast = _decode_fast(blob)
    before = slow_outcome(blob)
    assert fast is None or fast == before
    assert outcome(blob) == before


@pytest.mark.parametrize("text", TEXTS, ids=lambda t: f"{len(t)}-chars")
def test_encoder_blobs_take_the_fast_path_with_pytypedstreams_answer(text: str) -> None:
    """Every blob our sample encoder writes (all length forms, emoji, NUL, format bytes in the text)
    is read by the fast path, and the string is the one pytypedstream reads."""
    blob = encode_attributed_body(text)
    assert _decode_slow(blob) == text
    assert _decode_fast(blob) == text
    assert decode_attributed_body(blob) == text


@pytest.mark.parametrize(("prefix", "tail"), LAYOUTS)
def test_real_layouts_take_the_fast_path_with_pytypedstreams_answer(prefix: bytes, tail: bytes | None) -> None:
    """The layouts real chat.db blobs use for plain text (NSAttributedString or NSMutableAttributedString,
    no run, or one run with the message-part and writing-direction attributes) take the fast path, and
    pytypedstream reads the same string from each."""
    for text in TEXTS:
        blob = real_layout(text, prefix, tail)
        assert _decode_slow(blob) == text
        assert _decode_fast(blob) == text


def test_real_damaged_blob_falls_back_to_the_same_error() -> None:
    """The real damaged blob (its string declares more bytes than the blob holds) is not the fast path's:
    decode_attributed_body raises the ValueError pytypedstream's path raised."""
    blob = (DATA / "ExtraData.typedstream").read_bytes()
    assert _decode_fast(blob) is None
    with pytest.raises(ValueError, match="could not be parsed"):
        decode_attributed_body(blob)
    assert_same_as_before(blob)


def test_a_blob_cut_at_any_offset_reads_as_before() -> None:
    """Cut anywhere (in the header, the string, the attribute runs or before the last end mark), a blob
    is either not the fast path's or gives pytypedstream's answer: a cut tail never passes for a whole blob."""
    for blob in sample_blobs():
        for cut in range(len(blob)):
            assert_same_as_before(blob[:cut])


def test_flipped_bytes_read_as_before() -> None:
    """Any one byte changed (in the class chain, a reference, a length, the text or the tail) gives
    pytypedstream's string or error, whichever path reads it."""
    for blob in sample_blobs()[:6]:
        for at in range(len(blob)):
            for mask in (0x01, 0x10, 0x80, 0xFF):
                changed = bytearray(blob)
                changed[at] ^= mask
                assert_same_as_before(bytes(changed))


def test_bytes_after_the_end_fall_back() -> None:
    """A blob with anything after its last end-of-object mark is not the fast path's (pytypedstream refuses it)."""
    for blob in sample_blobs():
        for extra in (b"\x00", b"\x86", b"\x84\x01@"):
            assert _decode_fast(blob + extra) is None
            assert_same_as_before(blob + extra)


@pytest.mark.parametrize(
    "raw",
    [b"\xff", b"ok\xc3", b"\xed\xa0\x80", b"\xc0\x80", b"caf\xe9", b"\xf4\x90\x80\x80"],
    ids=["ff", "cut-sequence", "surrogate", "overlong-nul", "latin-1", "past-u10ffff"],
)
def test_invalid_utf8_falls_back_to_pytypedstreams_error(raw: bytes) -> None:
    """Bytes that are not strict UTF-8 are never turned into text by the fast path: pytypedstream refuses
    them, so decode_attributed_body raises the same ValueError as before (the caller salvages)."""
    for prefix, tail in LAYOUTS:
        blob = real_layout("ab", prefix, tail).replace(b"\x02ab\x86", _length(len(raw)) + raw + b"\x86", 1)
        assert _decode_fast(blob) is None
        with pytest.raises(ValueError):
            decode_attributed_body(blob)
        assert_same_as_before(blob)


def test_every_integer_form_pytypedstream_reads_gives_its_answer() -> None:
    """The string length and run length in each tagged form (a small value in 2 or 4 bytes) read the same
    as pytypedstream; a one-byte length of 0x92 and up (which Apple does not write) is left to pytypedstream."""
    text = "tag forms"
    utf8 = text.encode()
    plain = encode_attributed_body(text)
    for form in (b"\x81" + len(utf8).to_bytes(2, "little"), b"\x82" + len(utf8).to_bytes(4, "little")):
        blob = plain.replace(b"+" + bytes([len(utf8)]) + utf8, b"+" + form + utf8, 1)
        assert _decode_fast(blob) == _decode_slow(blob) == text
    for value in (0x92, 0xC8, 0xFF):
        text = "v" * value
        blob = plain.replace(b"+" + bytes([len(utf8)]) + utf8, b"+" + bytes([value]) + text.encode(), 1)
        assert _decode_fast(blob) is None
        assert_same_as_before(blob)


def test_the_fast_path_does_not_import_pytypedstream() -> None:
    """A poll whose blobs are all in the common layouts never loads pytypedstream (the point of the path)."""
    code = (
        "import sys\n"
        "from pollers.imessage.typedstream import decode_attributed_body, encode_attributed_body\n"
        "assert decode_attributed_body(encode_attributed_body('hello')) == 'hello'\n"
        "print('typedstream' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"
