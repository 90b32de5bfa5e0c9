"""Rendering RFC 822 bytes into records: IDs, threading, bodies, attachments, and bad mail."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from pollers.email.mail.parts import SEPARATOR
from pollers.email.mail.render import html_to_text, message_ids, render, to_item


def test_message_id_normalization() -> None:
    """Brackets and folding whitespace go; odd characters stay; a hash-like ID keeps its brackets."""
    assert message_ids(" <a/b+c=d@x>\r\n ") == ["a/b+c=d@x"]
    assert message_ids("<a@x> <b@x>\r\n\t<c@x>") == ["a@x", "b@x", "c@x"]
    assert message_ids("bare@x") == ["bare@x"]
    assert message_ids("<sha256:00@x>") == ["<sha256:00@x>"]
    assert message_ids("") == [] and message_ids("<>") == []


def test_missing_message_id_uses_the_hash_of_the_raw_bytes() -> None:
    """Without a Message-ID the native ID is sha256 of the exact bytes, so the same copy elsewhere is the same object."""
    raw = b"From: a@x\r\nSubject: s\r\n\r\nbody\r\n"
    assert render(raw, "s").native_id == "sha256:" + hashlib.sha256(raw).hexdigest()


def test_threading_headers_give_reply_to_and_conversation() -> None:
    """In-Reply-To is reply_to; the first References entry is the conversation; alone, a message is its own thread."""
    raw = b"Message-ID: <c@x>\r\nIn-Reply-To: <b@x>\r\nReferences: <a@x> <b@x>\r\nFrom: Bob <BOB@X>\r\nTo: a@x\r\n\r\nhi\r\n"
    msg = render(raw, "s", me=frozenset({"bob@x"}))
    assert (msg.reply_to, msg.conversation["id"]) == ("b@x", "a@x")
    assert msg.sender == {"id": "bob@x", "name": "Bob", "is_me": True}
    assert msg.conversation["participants"] == ["a@x", "bob@x"]
    alone = render(b"Message-ID: <z@x>\r\n\r\nhi\r\n", "s")
    assert (alone.reply_to, alone.conversation["id"]) == (None, "z@x")


def test_plain_text_is_preferred_and_html_is_turned_into_text() -> None:
    """multipart/alternative gives the text/plain part; HTML-only mail gives its visible text."""
    alt = (
        b'Message-ID: <a@x>\r\nContent-Type: multipart/alternative; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n--b\r\nContent-Type: text/plain\r\n\r\nplain\r\n--b--\r\n"
    )
    assert render(alt, "s").text == "plain"
    html = b"Message-ID: <a@x>\r\nContent-Type: text/html\r\n\r\n<style>x{}</style><p>One &amp; two</p><div>three</div>"
    msg = render(html, "s")
    assert msg.text == "One & two\n\nthree" and msg.extra["text_from"] == "text/html"
    assert html_to_text("<script>no</script>yes") == "yes"


def test_attachments_are_listed_not_inlined() -> None:
    """Attachments give filename, type and decoded size; their bytes stay out of the record."""
    raw = (
        b'Message-ID: <a@x>\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee\r\n'
        b'--b\r\nContent-Type: image/png\r\nContent-Disposition: attachment; filename="=?utf-8?q?p=C3=AF.png?="\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\nAAECAw==\r\n--b--\r\n"
    )
    msg = render(raw, "s")
    assert msg.text == "see"
    assert msg.attachments == [{"id": "part2", "filename": "pï.png", "mime_type": "image/png", "size": 4}]


def test_bad_mail_renders_with_problems_recorded() -> None:
    """Unknown charsets, 8-bit headers and bad dates render as far as they go and are listed in extra.problems."""
    raw = b"Message-ID: <a@x>\r\nSubject: caf\xe9\r\nDate: not a date\r\nContent-Type: text/plain; charset=nope\r\n\r\nb\xffody\r\n"
    msg = render(raw, "s")
    assert msg.sent_at is None and msg.extra["subject"] == "caf\xe9"
    assert msg.extra["date_header"] == "not a date"
    problems = msg.extra["problems"]
    assert "header Date: unparseable" in problems and "header Subject: raw 8-bit bytes" in problems
    assert any("unknown charset" in p for p in problems)
    assert msg.text is not None and msg.text.startswith("b")


def test_date_without_zone_is_utc_and_item_carries_the_eml() -> None:
    """A Date without a zone counts as UTC; the item carries the raw bytes as its .eml blob."""
    raw = b"Message-ID: <a@x>\r\nDate: Tue, 1 Nov 2022 10:00:00\r\n\r\nx\r\n"
    item = to_item(raw, "s", {"c": 1}, ref="UID 1")
    assert item.message is not None and item.message.sent_at == "2022-11-01T10:00:00Z"
    assert item.blobs == {".eml": raw} and item.failure is None


def test_rendering_is_deterministic() -> None:
    """The same bytes always render to the same record bytes (so a replay is a duplicate, not a rewrite)."""
    raw = b"Message-ID: <a@x>\r\nFrom: a@x\r\nTo: b@x, c@x\r\nSubject: =?utf-8?b?w6k=?=\r\n\r\nbody\r\n"
    assert render(raw, "s").to_json() == render(raw, "s").to_json()


def _mixed(*parts: bytes, headers: bytes = b"Message-ID: <m@x>\r\nFrom: a@x\r\n") -> bytes:
    body = b"".join(b"--b\r\n" + p + b"\r\n" for p in parts)
    return headers + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n' + body + b"--b--\r\n"


def test_raw_8bit_filename_is_an_attachment_not_a_quarantine() -> None:
    """A raw UTF-8 or Latin-1 filename (the parser returns a Header object) gives a listed attachment with the name."""
    russian = "\u0424\u041d\u0421_\u0420\u0424558.zip"  # the real name from the issue, spelled out for ruff
    raw = _mixed(
        b"Content-Type: text/plain\r\n\r\nsee attached",
        f'Content-Type: application/zip; name="{russian}"\r\nContent-Disposition: attachment; filename="{russian}"\r\n\r\nPK'.encode(),
        b"Content-Type: text/plain\r\nContent-Disposition: attachment; filename=ci\xeble.txt\r\n\r\nhello",
    )
    item = to_item(raw, "s", None, ref="x")
    assert item.failure is None and item.message is not None
    assert [(a["filename"], a["mime_type"]) for a in item.message.attachments] == [
        (russian, "application/zip"),
        ("ciële.txt", "text/plain"),
    ]
    assert item.message.text == "see attached"


FORWARD = (
    b"Message-ID: <outer@x>\r\nFrom: fwd@x\r\nSubject: Fwd: plans\r\n"
    b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
    b"--b\r\nContent-Type: message/rfc822\r\n\r\n"
    b"Message-ID: <inner@y>\r\nFrom: Orig <orig@y>\r\nSubject: plans\r\nDate: Tue, 1 Nov 2022 10:00:00 +0100\r\n\r\ninner secret body\r\n"
    b"--b--\r\n"
)


def test_attached_message_is_one_attachment_and_its_text_is_searchable() -> None:
    """A forwarded message/rfc822 part is one attachment with its own subject/from/date; its text is in the record's
    text behind an ``attached message`` line (a search over text finds a mail forwarded as an attachment)."""
    msg = render(FORWARD, "s")
    assert msg.text == "-------------- attached message --------------\ninner secret body"
    assert msg.extra["subject"] == "Fwd: plans" and msg.sender["id"] == "fwd@x"
    (att,) = msg.attachments
    assert att["mime_type"] == "message/rfc822" and att["id"] == "part1"
    assert att["message"] == {"subject": "plans", "from": "orig@y", "date": "2022-11-01T09:00:00Z", "message_id": "inner@y"}
    assert att["size"] is not None and att["size"] > 0


def test_bounce_report_parts_are_listed() -> None:
    """A bounce (multipart/report): the human text is the text, then the returned mail's; delivery-status and the
    returned mail are attachments."""
    raw = (
        b"Message-ID: <bounce@x>\r\nFrom: MAILER-DAEMON@x\r\n"
        b'Content-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\nDelivery failed.\r\n"
        b"--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; x\r\n\r\nFinal-Recipient: rfc822; nobody@y\r\nAction: failed\r\n"
        b"--b\r\nContent-Type: message/rfc822\r\n\r\nFrom: me@x\r\nSubject: hello\r\n\r\nreturned body\r\n"
        b"--b--\r\n"
    )
    msg = render(raw, "s")
    assert msg.text == "Delivery failed.\n\n-------------- attached message --------------\nreturned body"
    assert [a["mime_type"] for a in msg.attachments] == ["message/delivery-status", "message/rfc822"]
    assert msg.attachments[1]["message"]["subject"] == "hello"


def test_later_inline_text_parts_are_appended_with_a_separator() -> None:
    """Inline text parts after the first (a second msg.txt, a list footer) are appended to text, visibly separated."""
    raw = _mixed(
        b"Content-Type: text/plain\r\n\r\nfirst body",
        b"Content-Type: text/plain\r\nContent-Disposition: inline; filename=msg.txt\r\n\r\nsecond body",
        b"Content-Type: text/plain; charset=utf-8\r\n\r\n_______________\r\nlist footer",
    )
    msg = render(raw, "s")
    assert msg.text is not None
    assert msg.text.split(SEPARATOR) == ["first body", "second body", "_______________\r\nlist footer"]
    assert msg.attachments == [] and msg.extra["text_from"] == "text/plain"


def test_encoded_words_in_broken_charsets_are_decoded_best_effort() -> None:
    """A gb2312-labelled subject holding GBK bytes decodes via GB18030; charset NONE via UTF-8; both listed as problems."""
    name = "朱镕基"
    gbk = name.encode("gbk")
    try:
        gbk.decode("gb2312")
        raise AssertionError("fixture must not be valid GB2312")
    except UnicodeDecodeError:
        pass
    subject = b"=?gb2312?B?" + base64.b64encode(gbk) + b"?="
    msg = render(b"Message-ID: <g@x>\r\nSubject: " + subject + b"\r\n\r\nx\r\n", "s")
    assert msg.extra["subject"] == name
    assert any("gb2312" in p and "gb18030" in p for p in msg.extra["problems"])
    none = render(b"Message-ID: <n@x>\r\nSubject: =?NONE?B?VEVTVA=?=\r\n\r\nx\r\n", "s")
    assert none.extra["subject"] == "TEST"
    assert any("unknown charset none" in p.lower() for p in none.extra["problems"])
    mixed = render(b"Message-ID: <n@x>\r\nSubject: Re: =?x-unknown?Q?caf=E9?= ok\r\n\r\nx\r\n", "s")
    assert mixed.extra["subject"] == "Re: café ok"


def test_malformed_from_falls_back_to_the_first_address_in_it() -> None:
    """``From: tim@x.com concierge@x.com`` gives the sender tim@x.com, not ``@x.com``, and a listed problem."""
    msg = render(b"Message-ID: <f@x>\r\nFrom: tim@x.com concierge@x.com\r\n\r\nx\r\n", "s")
    assert msg.sender["id"] == "tim@x.com"
    assert "header From: malformed, took the first address in it" in msg.extra["problems"]
    good = render(b"Message-ID: <f@x>\r\nFrom: Tim <tim@x.com>\r\n\r\nx\r\n", "s")
    assert good.sender["id"] == "tim@x.com" and "problems" not in good.extra


def test_real_mail_with_a_body_in_the_wrong_charset_reads_cleanly() -> None:
    """mail-parser's mail_test_12 (body labelled GB2312, bytes UTF-8): text without U+FFFD, the problem listed."""
    raw = (Path(__file__).parent / "data" / "mail_parser" / "mail_test_12").read_bytes()
    msg = render(raw, "s")
    assert msg.text is not None and "\ufffd" not in msg.text and msg.text.startswith("你好\uff01我公司")
    assert msg.extra["subject"] == "代开各地增值税发票" and msg.sender["name"] == "张先生"
    assert "part 0: bytes not valid in charset gb2312, decoded as utf-8" in msg.extra["problems"]


def test_a_mail_saved_with_a_byte_order_mark_keeps_its_headers_and_parts() -> None:
    """A .eml saved by a Windows tool starts with a UTF-8 BOM (a real one in MimeKit's test data): Python's parser then
    sees no headers at all; the mail is read past the BOM (sender, subject, date, parts), the problem listed."""
    raw = (b"\xef\xbb\xbfFrom: <abuse@example.com>\r\nDate: Thu, 8 Mar 2005 17:40:36 -0500\r\nSubject: FW: report\r\n"
           b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n"
           b"--b1\r\nContent-Type: text/plain\r\n\r\nthe report\r\n"
           b"--b1\r\nContent-Type: message/rfc822\r\n\r\nFrom: <x@example.net>\r\nSubject: inner\r\n\r\nspam\r\n--b1--\r\n")  # fmt: skip
    item = to_item(raw, "s", None, ref="bom")
    msg = item.message
    assert msg is not None and item.blobs[".eml"] == raw  # the stored .eml keeps every byte
    assert (msg.sender["id"], msg.extra["subject"], msg.sent_at) == ("abuse@example.com", "FW: report", "2005-03-08T22:40:36Z")
    assert msg.text is not None and msg.text.startswith("the report\n\n-------------- attached message")
    assert [a["mime_type"] for a in msg.attachments] == ["message/rfc822"]
    assert "starts with a byte order mark, read past it" in msg.extra["problems"]


def test_a_folded_boundary_parameter_still_splits_the_parts() -> None:
    """``boundary="foo<CRLF> bar"`` (folded inside the quotes, as in stalwart mail-parser's test data): unfolded the
    boundary is ``foo bar``, so the parts are found (Python's default policy agrees), not one opaque multipart blob."""
    raw = (b"From: user@example.org\r\nDate: Sat, 24 Mar 2007 23:00:00 +0200\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: multipart/mixed; boundary=\"foo\r\n bar\"\r\n\r\nprologue\r\n"
           b"--foo bar\r\nContent-Type: text/plain\r\n\r\nhello\r\n"
           b"--foo bar\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n"
           b"--foo bar--\r\n")  # fmt: skip
    msg = render(raw, "s")
    assert msg.text == "hello"
    assert [(a["mime_type"], a["size"]) for a in msg.attachments] == [("application/pdf", 5)]


def test_a_content_type_missing_its_semicolon_is_only_the_type() -> None:
    """``Content-Type: image/png<CRLF> name=a.png`` (no ``;``, as in stalwart mail-parser's malformed test mails): the
    attachment's ``mime_type`` is ``image/png``, not the folded line with its break and parameters; the same missing
    ``;`` on a multipart still finds its parts through the boundary."""
    raw = (b"From: user@example.org\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed\r\n boundary=\"b\"\r\n\r\n"
           b"--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n"
           b"--b\r\nContent-Type: image/png\r\n name=a.png\r\nContent-Transfer-Encoding: base64\r\n\r\naGVsbG8=\r\n--b--\r\n")  # fmt: skip
    msg = render(raw, "s")
    assert msg.text == "hello"
    assert [a["mime_type"] for a in msg.attachments] == ["image/png"]
