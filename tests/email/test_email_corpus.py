"""Regression corpus: the mails of CPython's own email test suite, each checked against Python's parser (policy=default).

For every file the record must have the sender, subject and date that
``email.message_from_bytes(raw, policy=email.policy.default)`` finds, and
every leaf part must be accounted for: an inline text/plain part's text is
in the record's text, an unchosen alternative is skipped, anything else
(an attached message counts as one part, its inline text is in the text too)
is an attachment of the same type.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import re
from datetime import UTC
from pathlib import Path

import pytest

from pollers.email.mail.render import to_item
from tests.conftest import assert_valid

CORPUS = Path(__file__).parent / "data" / "cpython_email"
FILES = sorted(CORPUS.glob("msg_*.txt"))


def _norm(text: str | None) -> str | None:
    return None if text is None else " ".join(text.split())


def _expected(part: email.message.Message) -> tuple[list[str], list[str]]:
    """(inline text/plain contents, attachment content types) of ``part`` by an independent walk of the reference tree."""
    ctype = part.get_content_type()
    if ctype == "message/external-body":
        return ["<external>"], []  # no content: a note naming the reference, no attachment
    if part.get_content_maintype() == "message" and part.is_multipart():
        inner = part.get_payload()[0]
        if ctype in ("message/rfc822", "message/global", "message/news") and isinstance(inner, email.message.Message):
            return _expected(inner)[0], [ctype]  # one attachment; the attached mail's text is in the text too
        return [], [ctype]
    if part.is_multipart():
        children = [p for p in part.get_payload() if isinstance(p, email.message.Message)]
        results = [_expected(c) for c in children]
        if ctype == "multipart/alternative" and len(children) > 1:
            with_text = [r for r in results if r[0]]
            chosen = with_text[0] if with_text else next((r for r in results if r != ([], [])), ([], []))
            return chosen[0], [t for r in results for t in r[1]]
        return [t for r in results for t in r[0]], [t for r in results for t in r[1]]
    inline = (part.get_content_disposition() or "inline") != "attachment"
    if inline and ctype == "text/plain":
        content = part.get_content()
        return [content], []
    if inline and ctype == "text/html" and part.get_filename() is None:
        return ["<html>"], []
    return [], [ctype]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_record_matches_pythons_parser(path: Path) -> None:
    """Sender, subject, date and every part of the record agree with Python's parser under policy=default."""
    raw = path.read_bytes()
    item = to_item(raw, "corpus", None, ref=path.name)
    assert item.failure is None and item.message is not None, path.name
    record = item.message
    ref = email.message_from_bytes(raw, policy=email.policy.default)

    from_header = ref["from"]
    addrs = [a.addr_spec for a in from_header.addresses] if from_header is not None else []
    want_sender = next((a.lower() for a in addrs if a and a != "<>"), None)
    assert record.sender["id"] == want_sender

    subject = ref["subject"]
    assert _norm(record.extra["subject"]) == _norm(None if subject is None else str(subject))

    date = ref["date"]
    want_date = None
    if date is not None and getattr(date, "datetime", None) is not None:
        dt = date.datetime if date.datetime.tzinfo else date.datetime.replace(tzinfo=UTC)
        want_date = dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert record.sent_at == want_date

    texts, attachment_types = _expected(ref)
    assert [a["mime_type"] for a in record.attachments] == attachment_types
    body = _norm(record.text) or ""
    for text in texts:
        if text not in ("<html>", "<external>"):
            assert (_norm(text) or "") in body
    if not texts:
        assert record.text is None
    assert_valid([record.to_dict()])  # every real mail renders to memex.message/1


def test_corpus_is_the_whole_cpython_set() -> None:
    """All 48 mails of Lib/test/test_email/data are here (a lost fixture would silently shrink the check)."""
    assert len(FILES) == 48
    assert all(re.fullmatch(r"msg_\d+a?\.txt", p.name) for p in FILES)
