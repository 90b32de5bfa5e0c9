"""The renderer's shortcuts give what the general code gives: plain addresses, clean header text, the fingerprint."""

from __future__ import annotations

import email
import email.utils
from pathlib import Path

import pytest

from pollers.email.mail.header_block import repair
from pollers.email.mail.headers import addresses, clean, raw, raw_all, simple_addresses
from pollers.email.mail.identity import _payload, legacy_fingerprint, mail_fingerprint
from pollers.email.mail.render import parse, to_item

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
    """Each part of every test mail: the renderer's message class gives the bytes compat32's Message gives, twice
    (both reading the header block as the renderer reads it: :mod:`pollers.email.mail.header_block`)."""
    raw = path.read_bytes()
    ours = [p for p in parse(raw).walk() if not p.is_multipart()]
    theirs = [p for p in email.message_from_bytes(repair(raw)[0]).walk() if not p.is_multipart()]
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs, strict=True):
        expected = reference.get_payload(decode=True)
        assert mine.get_payload(decode=True) == expected
        assert mine.get_payload(decode=True) == expected


def _payload_before(part: email.message.Message) -> bytes:
    """The fingerprint's bytes of a part as the rule computed them before the one-byte shortcut: CRLF to LF, then CR to LF."""
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    if clean(raw(part, "Content-Transfer-Encoding") or "").strip().lower() != "base64":
        payload = payload.replace(b"\r\n", b"\n")
        if b"\r" in payload:
            payload = payload.replace(b"\r", b"\n")
    return payload


BODIES = [b"a\r\nb\r\n", b"a\nb\n", b"a\rb", b"a\r", b"\r", b"\r\r\n", b"a\r\r\nb", b"a\n\rb", b"\r\n\r", b"", b"x",
          b"a\r\nb\rc\nd\r\n", b"\r\n" * 3 + b"\r"]  # fmt: skip


@pytest.mark.parametrize("body", BODIES, ids=[repr(b) for b in BODIES])
@pytest.mark.parametrize("cte", ["7bit", "8bit", "quoted-printable", "base64"])
def test_the_fingerprints_line_ends_are_made_lf_as_before(body: bytes, cte: str) -> None:
    """A body of CRLFs only loses its CRs in one pass; with a bare CR anywhere (alone, last, before CRLF) the two passes run:
    either way the bytes hashed equal the rule's two passes (CRLF to LF, then CR to LF), and base64's are left as carried."""
    import base64
    import quopri

    encoded = {"base64": base64.encodebytes(body), "quoted-printable": quopri.encodestring(body)}.get(cte, body)
    part = parse(b"Content-Type: text/plain\r\nContent-Transfer-Encoding: " + cte.encode() + b"\r\n\r\n" + encoded)
    part.set_payload(encoded.decode("ascii", "surrogateescape"))  # exactly these bytes (the parser trims the last line end)
    assert _payload(part) == _payload_before(part)


@pytest.mark.parametrize("path", MAILS, ids=[str(p.relative_to(DATA)) for p in MAILS])
def test_every_parts_fingerprint_bytes_are_as_before(path: Path) -> None:
    """Each leaf part of every test mail: the fingerprint's bytes equal the two-pass rule's."""
    for part in parse(path.read_bytes()).walk():
        if not part.is_multipart() and isinstance(part.get_payload(decode=True), bytes):
            assert _payload(part) == _payload_before(part)


def test_the_earlier_fingerprint_is_computed_only_when_read_and_then_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendering computes no earlier-rule fingerprint (a JSON and a hash of the whole text); reading it gives the rule's
    value, computed once however often it is read."""
    import pollers.email.mail.render as render_module

    calls: list[int] = []

    def counting(*args: object) -> str:
        calls.append(1)
        return legacy_fingerprint(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(render_module, "legacy_fingerprint", counting)
    raw = b"From: A <a@example.com>\r\nDate: Tue, 01 Nov 2022 10:00:00 +0000\r\nSubject: hi\r\nMessage-ID: <x@y>\r\n\r\nbody\r\n"
    item = to_item(raw, "mail", None, ref="x")
    assert calls == []
    assert item.message is not None
    expected = legacy_fingerprint("a@example.com", "Tue, 01 Nov 2022 10:00:00 +0000", "hi", item.message.text)
    assert list(item.earlier_fingerprints) == [expected] and item.earlier_fingerprints[0] == expected
    assert len(item.earlier_fingerprints) == 1 and item.earlier_fingerprints[-1:] == (expected,)
    assert calls == [1]


def test_a_headers_first_value_is_the_first_of_all_its_values() -> None:
    """``raw`` (the first value, by the index of headers by name) agrees with ``raw_all`` and with the headers as sent,
    also after a header is added or removed."""
    msg = parse(b"X-A: 1\r\nx-a: 2\r\nSubject: s\r\n\r\nbody\r\n")
    assert raw(msg, "X-A") == raw_all(msg, "x-a")[0] == "1" and raw(msg, "Missing") is None
    del msg["X-A"]
    assert raw(msg, "x-a") is None
    msg["X-A"] = "3"
    assert raw(msg, "X-A") == "3" and raw(msg, "subject") == "s"
