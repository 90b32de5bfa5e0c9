"""What the renderer keeps for search (issue 34): recipients' display names, the words of parts that are not the
text (a calendar invitation, a bounce's report, enriched text, the HTML alternative), attachments inside a forwarded
mail, and the headers of real mail with obsolete syntax or a stray line among them (read as gmime, notmuch's parser,
reads them), without changing what well-formed mail renders to."""

from __future__ import annotations

import random
from pathlib import Path

from pollers.email.mail import searchable
from pollers.email.mail.header_block import repair
from pollers.email.mail.render import render
from tests.email.render_cases import cases

DATA = Path(__file__).parent / "data"

INVITE = (b"From: Dana Organiser <dana@example.com>\r\nTo: \"Eli Guest\" <eli@example.com>\r\nSubject: test\r\n"
          b"Date: Mon, 27 May 2024 14:00:00 +0000\r\nMessage-ID: <invite-1@example.com>\r\nMIME-Version: 1.0\r\n"
          b"Content-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
          b"This meeting could have been an email\r\n\r\n--alt\r\nContent-Type: text/calendar; charset=\"utf-8\"; method=REQUEST\r\n\r\n"
          b"BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\nORGANIZER;CN=Dana Organiser:mailto:dana@example.com\r\n"
          b"DESCRIPTION;LANGUAGE=en-CA:This meeting could have been an email\\n\\n\r\nSUMMARY;LANGUAGE=en-CA:Quarterly pl\r\n"
          b" anning [In-person]\r\nLOCATION:Room 4\\, Harbour building\r\nDTSTART:20240527T140000Z\r\nEND:VEVENT\r\n"
          b"END:VCALENDAR\r\n--alt--\r\n")  # fmt: skip
"""An Outlook-shaped invitation (the shape of notmuch's ``attachment/text-calendar.eml``, rebuilt: notmuch's test
data is GPL): the plain text repeats the description; the summary (folded mid-word) and the place are only in the
calendar part."""

HTML_ALT = (b"From: a@example.com\r\nTo: b@example.com\r\nSubject: alt\r\nMessage-ID: <alt-1@example.com>\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/alternative; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n"
            b"Hello there,\r\nthe report is attached.\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>Hello   there,<br>the report "
            b"is attached.</p><p>Sent from <b>Zephyrmail</b> mobile</p>\r\n--b--\r\n")  # fmt: skip


def test_recipients_display_names_are_kept_beside_their_addresses() -> None:
    """``extra.to_names``/``cc_names`` hold each recipient's display name in the order of ``to``/``cc`` ("" where a
    recipient has none); a mail whose recipients have no names gets neither field (its record is as before)."""
    raw = (DATA / "mikel_mail" / "example03.eml").read_bytes()
    extra = render(raw, "s").extra
    assert len(extra["to_names"]) == len(extra["to"]) and len(extra["cc_names"]) == len(extra["cc"])
    assert extra["to_names"][0] == "Mary Smith" and extra["to"][0] == "mary@x.test"
    bare = render(b"From: a@x\r\nTo: b@x, c@x\r\nMessage-ID: <n@x>\r\n\r\nhi\r\n", "s").extra
    assert "to_names" not in bare and "cc_names" not in bare


def test_a_calendar_invitations_summary_and_place_are_searchable_but_not_its_repeated_description() -> None:
    """The calendar alternative's SUMMARY (unfolded) and LOCATION (unescaped) go to ``extra.search_text``; its
    DESCRIPTION, already the plain text, adds nothing; the text stays the plain alternative."""
    record = render(INVITE, "s")
    assert record.text is not None and record.text.startswith("This meeting could have been an email")
    assert record.extra["search_text"].splitlines() == ["Quarterly planning [In-person]", "Room 4, Harbour building"]


def test_only_the_html_alternatives_lines_the_plain_text_lacks_are_kept() -> None:
    """An HTML twin of the plain text adds nothing (its words are there, whatever the line breaks); a line only the
    HTML has (a signature) is kept, so a search finds it."""
    assert render(HTML_ALT, "s").extra["search_text"] == "Sent from Zephyrmail mobile"
    twin = HTML_ALT.replace(b"<p>Sent from <b>Zephyrmail</b> mobile</p>", b"")
    assert "search_text" not in render(twin, "s").extra


def _search_text_by_lines(text: str | None, extras: list[str]) -> str | None:
    """The rule of :func:`search_text` without its exact-twin shortcut: every part compared case-folded."""
    have = searchable._flat(text or "")
    extras = [e for e in extras if (flat := searchable._flat(e)) and flat not in have]
    known = set(searchable._WORDS.findall(have))
    extras = [e for e in extras if not set(searchable._WORDS.findall(e.casefold())) <= known]
    seen: set[str] = set()
    kept: list[str] = []
    for line in (line for e in extras for line in e.splitlines()):
        if (flat := searchable._flat(line)) and flat not in seen and flat not in have:
            seen.add(flat)
            kept.append(" ".join(line.split()))
    return "\n".join(kept) or None


def test_the_exact_twin_shortcut_keeps_what_the_rule_keeps() -> None:
    """Issue 45: a part whose words are the text's, as written, is a twin before anything is case-folded; on 3,000
    random texts and parts (twins with other line breaks and cases, parts with a word more or less, blank parts, the
    text absent) :func:`search_text` keeps exactly what the rule compared case-folded keeps."""
    rng = random.Random(45)
    vocabulary = ["Lease", "lease", "report", "Zephyr", "ÉTÉ", "été", "attached", "mobile", "the", "a"]
    for _ in range(3000):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 12))]
        text = None if rng.random() < 0.05 else "".join(w + rng.choice([" ", "\n", "\r\n", "  ", "\t"]) for w in words)
        extras = []
        for _ in range(rng.randint(1, 3)):
            part = list(words)
            change = rng.random()
            if change < 0.2:
                part = [w.swapcase() for w in part]
            elif change < 0.4 and part:
                part.insert(rng.randrange(len(part) + 1), rng.choice([*vocabulary, "signature"]))
            elif change < 0.5 and part:
                part.pop(rng.randrange(len(part)))
            elif change < 0.55:
                part = []
            extras.append("".join(w + rng.choice([" ", "\n", "   "]) for w in part))
        assert searchable.search_text(text, extras) == _search_text_by_lines(text, extras), (text, extras)


def test_a_bounces_report_and_returned_headers_are_searchable() -> None:
    """mikel/mail's real bounce: the ``message/delivery-status`` fields (the diagnostic, the failed recipient) and the
    returned ``text/rfc822-headers`` are in the search text; both parts stay attachments."""
    record = render((DATA / "mikel_mail" / "report_530.eml").read_bytes(), "s")
    words = record.extra["search_text"]
    assert "Diagnostic-Code: SMTP; 553 5.3.0 <edwin@zzzzzzz.com>... Unknown E-Mail Address" in words
    assert "Final-Recipient: RFC822; edwin@zzzzzzz.com" in words
    assert [a["mime_type"] for a in record.attachments] == ["message/delivery-status", "text/rfc822-headers"]


def test_enriched_text_words_are_searchable_without_its_commands() -> None:
    """A text/enriched part (RFC 1896) gives its words, its formatting commands and their parameters dropped."""
    raw = (b"From: a@x\r\nMessage-ID: <e@x>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nsee below\r\n--b\r\nContent-Type: text/enriched\r\n\r\n<color><param>0000,0000,FFFF"
           b"</param>This is blue.</color>\r\n<bold>Bold &lt;<<tag</bold>\r\n--b--\r\n")  # fmt: skip
    assert render(raw, "s").extra["search_text"] == "This is blue. Bold &lt;<tag"


def test_attachments_inside_a_forwarded_mail_are_named_on_its_attachment() -> None:
    """mikel/mail's forwarded mail holds ``broken.pdf``: the attached message's ``message.filenames`` names it (the
    index searches it as ``attachment:``); the inner part is still not an outer attachment."""
    record = render((DATA / "mikel_mail" / "attachment_message_rfc822.eml").read_bytes(), "s")
    assert [a["mime_type"] for a in record.attachments] == ["message/rfc822"]
    assert record.attachments[0]["message"]["filenames"] == ["broken.pdf"]


def test_a_stray_line_among_the_headers_does_not_end_them() -> None:
    """mikel/mail's ``quite Delivered-To:`` mail: Date, From, Subject and Message-ID stay headers (not the body's first
    lines); the problem is listed; the raw bytes are unchanged."""
    raw = (DATA / "mikel_mail" / "raw_email_incorrect_header.eml").read_bytes()
    record = render(raw, "s")
    assert record.native_id == "4D6AA7EB.6490534@xxx.xxx"
    assert record.sender["id"] == "xxx@xxx.xxx" and record.sent_at == "2005-02-23T22:20:17Z"
    assert record.extra["subject"] == "Stop adware/spyware once and for all."
    assert record.text is not None and record.text.startswith("You are infected with:") and "Message-ID" not in record.text
    assert "header: a malformed line among the headers, left out" in record.extra["problems"]


def test_obsolete_whitespace_before_a_colon_is_read_as_a_header() -> None:
    """RFC 5322 §4.5's obsolete syntax (``From  : ...``, ``Subject : ...``) gives the sender, subject, date and
    Message-ID (``From  :`` is not taken for a unix From line)."""
    raw = (b"From  : Joe Blow <joe@example.com>\r\nTo : ann@example.com\r\nSubject  : obsolete syntax\r\n"
           b"Date : Tue, 1 Nov 2022 10:00:00 +0100\r\nMessage-ID\t: <obs@example.com>\r\n\r\nbody\r\n")  # fmt: skip
    record = render(raw, "s")
    assert (record.native_id, record.sender["id"], record.sender["name"]) == ("obs@example.com", "joe@example.com", "Joe Blow")
    assert (record.extra["subject"], record.sent_at, record.extra["to"]) == ("obsolete syntax", "2022-11-01T09:00:00Z", ["ann@example.com"])
    assert record.text == "body\r\n"


def test_text_with_no_empty_line_before_it_stays_the_body() -> None:
    """A line among the headers is left out only when it looks like a header gone wrong (a colon) and headers follow
    it: a body with no empty line before it, or a boundary line, stays the body, parsed as before."""
    for raw in (b"Subject: x\nthis is body\nmore\n\nmore: y\nz: q\n",
                b'Content-Type: multipart/mixed; boundary="o"\n--o\nContent-Type: text/plain\n\nx\n--o--\n',
                b"Subject: x\nNote: fine\nreally: yes\nWords without colon\nA: b\nC: d\n\nbody\n"):  # fmt: skip
        assert repair(raw) == (raw, [])


def test_mail_that_parsed_before_is_read_from_the_same_bytes() -> None:
    """Every render case (the real test mails, their damaged variants, the crafted ones) whose header block Python
    read whole is handed to the parser unchanged, so its record's identity (native ID, fingerprint) cannot move; the
    cases that change are the two shapes repaired."""
    changed = sorted(name for name, raw in cases().items() if repair(raw)[0] is not raw)
    assert all("raw_email_incorrect_header" in name for name in changed), changed


def test_a_utf8_file_name_cut_mid_character_by_rfc2231_continuations_is_whole() -> None:
    """RFC 2231 continuations split inside a UTF-8 character (``%E6`` | ``%A1%88``) are joined as bytes before they
    are decoded (the shape of a real Japanese mail reported to a mail library)."""
    cd = (b"attachment;\r\n filename*0*=utf-8''%E8%AC%9B%E6%BC%94%E4%BC%9A%E6;\r\n"
          b" filename*1*=%A1%88%E5%86%85%E6%9B%B8%EF%BC%86%E7%94%B3%E8%BE%BC%E6%9B%B8;\r\n filename*2*=%E6%94%B9%2Etxt")  # fmt: skip
    raw = (b"Message-ID: <j@x>\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n"
           b"--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: " + cd + b"\r\n\r\nx\r\n--b--\r\n")  # fmt: skip
    record = render(raw, "s")
    assert [a["filename"] for a in record.attachments] == ["講演会案内書＆申込書改.txt"]  # noqa: RUF001 (the name as sent)
    assert "problems" not in record.extra
