"""Real public mails from other mail libraries' test suites, rendered: text, file names, encoded words, message parts.

Each mail is in ``tests/email/data/<project>/`` with a README naming its source, commit and licence.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pollers.email.mail.headers import decode_words
from pollers.email.mail.render import render

DATA = Path(__file__).parent / "data"


def _render(name: str) -> tuple[str, dict[str, object], list[dict[str, object]]]:
    record = render((DATA / name).read_bytes(), "mail")
    return record.text or "", record.extra, list(record.attachments)


def test_a_mail_that_is_one_inline_html_part_with_a_file_name_gives_its_text() -> None:
    """The shape of notmuch's ``html/attribute-text`` (GPL test data, so rebuilt here, not copied): the whole mail is
    ``text/html`` with ``Content-Disposition: inline; filename=test.html``, and its visible text is the record's text
    (not an empty text and an attachment)."""
    raw = (b"From: a@example.net\nTo: a@example.net\nSubject: html part\nDate: Tue, 17 Nov 2009 21:28:38 +0600\n"
           b"Message-ID: <one-html-part@example.net>\nMIME-Version: 1.0\nContent-Type: text/html\n"
           b"Content-Disposition: inline; filename=test.html\n\n"
           b'<html>\n  <body>\n    <input value="a>b">\n  </body>\n  visible\n</html>\n')  # fmt: skip
    record = render(raw, "mail")
    text, extra, attachments = record.text or "", record.extra, list(record.attachments)
    assert text == "visible" and attachments == []
    assert extra["text_from"] == "text/html" and extra["text_files"] == ["test.html"]


def test_an_html_file_inside_a_multipart_mail_stays_an_attachment() -> None:
    """Only a mail that is one HTML part turns a named HTML part into text: inside a multipart, a named HTML part
    beside the text is an attached file (the rule the single-part case must not widen)."""
    raw = (b"Message-ID: <m@x>\r\nFrom: a@x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nsee the page\r\n--b\r\nContent-Type: text/html\r\n"
           b"Content-Disposition: inline; filename=page.html\r\n\r\n<p>page</p>\r\n--b--\r\n")  # fmt: skip
    record = render(raw, "mail")
    assert record.text == "see the page"
    assert [(a["filename"], a["mime_type"]) for a in record.attachments] == [("page.html", "text/html")]


@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("cpython_email/msg_04.txt", ["msg.txt", "msg.txt"]),
        ("mail_parser/mail_test_3", ["message.txt"]),
        ("stalwart/030.eml", ["hareandtoroise.txt"]),
        ("stalwart/042.eml", ["farmerandstork.txt"]),
        ("stalwart/047.eml", ["HasenundFrösche.txt"]),  # the name is an RFC 2047 encoded word
    ],
)
def test_file_names_of_inline_text_parts_are_kept(name: str, files: list[str]) -> None:
    """An inline text part with a file name is text, and its file name is kept in ``extra.text_files`` (in order)."""
    text, extra, _ = _render(name)
    assert text and extra["text_files"] == files


def test_an_encoded_word_followed_by_plain_text_gains_no_space() -> None:
    """sisimai ``lhost-mailru-10``: ``=?UTF-8?B?...?=. Mail failure.``: the text after an encoded word is kept as sent
    (RFC 2047 6.2); no space appears before the full stop."""
    _, extra, _ = _render("sisimai/lhost-mailru-10.eml")
    assert extra["subject"] == "Ваше сообщение не доставлено. Mail failure."


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("=?UTF-8?Q?a?= =?UTF-8?Q?b?=", "ab"),  # whitespace between two encoded words is dropped
        ("=?UTF-8?Q?a?=\r\n =?ISO-8859-1?Q?=E9?=", "aé"),  # also across a fold and between charsets
        ("Re: =?UTF-8?Q?caf=C3=A9?= ok", "Re: café ok"),  # text beside a word keeps its own spaces
        ("=?UTF-8?Q?caf=C3=A9?=, and", "café, and"),
        ("=?UTF-8?B?w6k=?=x", "éx"),
        ("=?UTF-8?B?4oKs?= =?UTF-8?B?4oKs?=", "€€"),
        ("=?UTF-8?B?4oI=?= =?UTF-8?B?rA==?=", "€"),  # one character split over two words (joined before decoding)
        ("plain  text", "plain  text"),
    ],
)
def test_encoded_words_and_the_whitespace_between_them(value: str, want: str) -> None:
    """RFC 2047 6.2: only whitespace between two adjacent encoded words goes; everything else is kept as sent."""
    assert decode_words(value, [], "header Subject") == want


@pytest.mark.parametrize(
    ("name", "ctype", "subject", "words"),
    [
        ("flanker/enclosed-global.eml", "message/global", "Thanks!", "чтобы я без вас делал"),
        ("flanker/apache-message-news-mime.eml", "message/news", "Netscape Enterprise vs. Apache Secure", "evaluating secure web servers"),
    ],
)
def test_an_attached_mail_or_news_article_is_one_attachment_and_its_text_is_searchable(
    name: str, ctype: str, subject: str, words: str
) -> None:
    """``message/global`` (RFC 6532: a whole mail in UTF-8) and ``message/news`` are read as ``message/rfc822``: one
    attachment carrying its subject/from/date, and its readable text in the record's text behind a marked line."""
    text, _, attachments = _render(name)
    (attachment,) = attachments
    assert attachment["mime_type"] == ctype and attachment["message"]["subject"] == subject  # type: ignore[index]
    assert "-------------- attached message --------------\n" in text and words in text
    assert text.index("attached message") < text.index(words)


def test_an_external_body_part_is_a_note_in_the_text_not_an_attachment() -> None:
    """flanker ``message-external-body``: a ``message/external-body`` part holds no content (it names an FTP site or
    mail server): it is no attachment, and a note naming the reference is in the text."""
    text, _, attachments = _render("flanker/message-external-body.eml")
    assert attachments == []
    assert "[external body: access-type=mail-server server=mailserv@ds.internic.net]" in text
    assert text.startswith("I am amazed.")
