"""The renderer's shortcuts give what the general code gives: plain addresses, clean header text, the fingerprint."""

from __future__ import annotations

import email
import email.utils
from pathlib import Path

import pytest

from pollers.email.headers import addresses, clean, raw_all, simple_addresses
from pollers.email.identity import mail_fingerprint
from pollers.email.render import parse

DATA = Path(__file__).parent / "data"
MAILS = sorted(p for p in DATA.rglob("*") if p.is_file() and not p.name.lower().startswith(("readme", "license", "copying")))
ADDRESS_HEADERS = ("From", "To", "Cc", "Bcc", "Reply-To", "Sender")
CRAFTED = [
    "Sender 5 <sender5@example.com>", "a@b.c", "  a@b.c  ", "<a@b.c>", "=?utf-8?q?J=C3=BCrgen?= <j1@example.org>",
    "Me\t <me@example.com>", "x  y <a.b@c-d.e>", "A B", "a@b", "a@b.", "a..b@c", ".a@b", "a@-b", "<a@b>x", "a@b, c@d",
    '"Q" <a@b>', "J. Smith <j@x>", "Tim <t@x> (c)", "<@r:a@b>", "a@[1.2.3.4]", "UPPER@EXAMPLE.COM", "n <a@b.c.>", "a@b\r\n",
    "a@b\r\n c@d", "group: a@b, c@d;", "undisclosed-recipients:;", "", " ", "<>", "Name <>", "x <a@b> <c@d>", "a b <c@d",
    "tim@x.com concierge@x.com", "a@b;c@d", "Ann\u00e9 <a@b>", "a\udce9@b", "a@b\udce9", "<a@b.c>  ", "x <a+tag@b.c>",
]  # fmt: skip


def _address_values() -> list[str]:
    values = list(CRAFTED)
    for path in MAILS:
        msg = parse(path.read_bytes())
        for part in msg.walk():
            for name in ADDRESS_HEADERS:
                values.extend(clean(v) for v in raw_all(part, name))
    return values


def test_plain_addresses_parse_as_the_general_parser_parses_them() -> None:
    """Every address header of the test mails and the crafted edge cases: the shortcut declines or agrees with getaddresses."""
    values = _address_values()
    taken = 0
    for value in values:
        fast = simple_addresses([value])
        if fast is not None:
            taken += 1
            assert fast == email.utils.getaddresses([value]), value
    assert taken >= 20, taken  # the shortcut is taken for the common forms
    assert simple_addresses(["a@b.c", "Bo <b@c.d>"]) == email.utils.getaddresses(["a@b.c", "Bo <b@c.d>"])
    assert simple_addresses(["a@b.c", "x, y"]) is None  # one value it cannot take: the general parser takes them all


def _clean_before(value: object) -> str:
    """``clean`` as it was before its ASCII shortcut."""
    text = str(value)
    if any("\udc80" <= c <= "\udcff" for c in text):
        data = text.encode("utf-8", "surrogateescape")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data.decode("latin-1")
    return text


@pytest.mark.parametrize("value", ["plain", "", "caf\u00e9", "\u4e2d\u6587", "a\udcc3\udca9b", "a\udce9b", "\udcff", "\udc80x\u00e9", 42])
def test_clean_reads_raw_bytes_as_before(value: object) -> None:
    """ASCII, Unicode, surrogate-escaped UTF-8 and Latin-1 bytes: the same text as the character-by-character check gave."""
    assert clean(value) == _clean_before(value)


@pytest.mark.parametrize("path", MAILS, ids=[str(p.relative_to(DATA)) for p in MAILS])
def test_the_fingerprint_is_the_same_with_the_renderers_addresses(path: Path) -> None:
    """The fingerprint from the renderer's From/To/Cc pairs equals the one that parses them itself (refingerprint's way)."""
    raw = path.read_bytes()
    msg = parse(raw)
    known = {name: addresses(msg, name, []) for name in ("From", "To", "Cc")}
    assert mail_fingerprint(msg, raw, known) == mail_fingerprint(msg, raw)


def test_a_parts_decoded_bytes_are_decoded_once_and_again_after_a_change() -> None:
    """The text, the attachment's size and the fingerprint share one decoding; a new payload or encoding is decoded anew."""
    raw = b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n"
    part = parse(raw)
    first = part.get_payload(decode=True)
    assert first == b"hello" and part.get_payload(decode=True) is first
    part.set_payload("d29ybGQ=\r\n")
    assert part.get_payload(decode=True) == b"world"
    part.replace_header("Content-Transfer-Encoding", "7bit")
    assert part.get_payload(decode=True) == b"d29ybGQ=\r\n"
    assert part.get_payload() == "d29ybGQ=\r\n"  # undecoded: as sent


@pytest.mark.parametrize("path", MAILS, ids=[str(p.relative_to(DATA)) for p in MAILS])
def test_every_part_decodes_as_the_standard_message_does(path: Path) -> None:
    """Each part of every test mail: the renderer's message class gives the bytes compat32's Message gives, twice."""
    raw = path.read_bytes()
    ours = [p for p in parse(raw).walk() if not p.is_multipart()]
    theirs = [p for p in email.message_from_bytes(raw).walk() if not p.is_multipart()]
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs, strict=True):
        expected = reference.get_payload(decode=True)
        assert mine.get_payload(decode=True) == expected
        assert mine.get_payload(decode=True) == expected
