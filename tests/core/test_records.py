"""Record rendering and object keys: canonical bytes and safe, injective keys for any native ID."""

from __future__ import annotations

from pathlib import Path

import pytest

from memex.records import MAX_ENCODED_ID, Message, decode_id, encode_id, message_key

NASTY_IDS = [
    "plain-ID_1.2",
    "a/b/c",
    "..",
    ".",
    ".hidden",
    "../../etc/passwd",
    "100%",
    "%41",
    "A",
    "with space",
    "ünïcødé ✉",
    "<abc+def=ghi@example.com>",
    '"quoted"@x',
    "",
    "x" * 2000,
    "x" * 2000 + "y",
    "~tilde~",
    "p:0/ABC",
]


@pytest.mark.parametrize("native_id", NASTY_IDS)
def test_encoded_ids_are_single_safe_segments(native_id: str) -> None:
    """Every encoding is one path segment of safe characters, never '.', '..' or hidden, and short enough for S3 and file names."""
    enc = encode_id(native_id)
    assert "/" not in enc
    assert enc not in (".", "..") and not enc.startswith(".")
    assert len(enc.encode()) <= MAX_ENCODED_ID
    assert all(c.isascii() and (c.isalnum() or c in "-_.%~") for c in enc)


def test_encoding_is_injective_and_reversible() -> None:
    """Distinct IDs never share a key; unshortened keys decode back to the ID."""
    encoded = [encode_id(i) for i in NASTY_IDS]
    assert len(set(encoded)) == len(NASTY_IDS)
    for native_id, enc in zip(NASTY_IDS, encoded, strict=True):
        decoded = decode_id(enc)
        assert decoded is None or decoded == native_id
        if len(native_id) < 50:
            assert decoded == native_id


def test_message_key_layout() -> None:
    """Objects live at messages/<source>/<encoded id>.json."""
    assert message_key("imessage", "ABC-1") == "messages/imessage/ABC-1.json"
    assert message_key("work-mail", "<a/b@c>", ".eml") == "messages/work-mail/%3Ca%2Fb%40c%3E.eml"


def test_same_message_renders_to_same_bytes() -> None:
    """Canonical JSON: field order of construction does not matter, output is byte-identical and sorted."""
    a = Message(source="s", type="message", native_id="1", sent_at="2020-01-01T00:00:00Z", text="hi", extra={"b": 1, "a": 2})
    b = Message(source="s", type="message", native_id="1", sent_at="2020-01-01T00:00:00Z", text="hi", extra={"a": 2, "b": 1})
    assert a.to_json() == b.to_json()
    assert a.to_json().startswith(b'{"attachments":[]')
    assert b'"schema":"memex.message/1"' in a.to_json()


def test_ids_differing_only_in_case_get_distinct_keys(tmp_path: Path) -> None:
    """Keys keep case; (on a case-insensitive file system the file store would need more: see docs/records.md)."""
    assert encode_id("abc") != encode_id("ABC")
