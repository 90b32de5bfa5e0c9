"""Rendering RFC 822 bytes into records: IDs, threading, bodies, attachments, and bad mail."""

from __future__ import annotations

import hashlib

from pollers.email_render import html_to_text, message_ids, render, to_item


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
