"""The one-pass MIME parser builds the tree Python's feed parser builds: headers, payloads, preambles, epilogues,
defects and default types, part by part, for every case of ``render_cases`` (real mails, damaged variants of them,
hand-made mails for each branch of the grammar)."""

from __future__ import annotations

import email
from typing import Any

import pytest

from pollers.email.mail import mime
from pollers.email.mail.mime import Mail, parse_bytes
from tests.email.render_cases import CRAFTED, cases

CASES = cases()


def tree(msg: Any) -> Any:
    """Everything the feed parser sets on a message and its parts, as plain values."""
    payload = vars(msg).get("_payload")
    return {
        "class": type(msg).__name__,
        "unixfrom": msg.get_unixfrom(),
        "headers": list(msg._headers),
        "default_type": msg.get_default_type(),
        "preamble": msg.preamble,
        "epilogue": msg.epilogue,
        "defects": [(type(d).__name__, d.args) for d in msg.defects],
        "payload": [tree(p) for p in payload] if isinstance(payload, list) else payload,
    }


def _standard(raw: bytes) -> Any:
    try:
        return tree(email.message_from_bytes(raw, _class=Mail))
    except Exception as exc:  # the standard parser's own failure (an assertion on a broken mail)
        return ("raises", type(exc).__name__)


def _one_pass(raw: bytes) -> Any:
    """The one-pass parser alone (no fall-back): its tree, or "declined" for a shape it leaves to the standard one."""
    try:
        return tree(mime._Parser(raw.decode("ascii", "surrogateescape")).parse())
    except mime._Fallback:
        return "declined"


def test_the_one_pass_parser_builds_the_standard_tree() -> None:
    """Every case: the tree equals the feed parser's, or the shape is declined (then the feed parser builds it)."""
    wrong, declined = [], []
    for name, raw in sorted(CASES.items()):
        mine = _one_pass(raw)
        if mine == "declined":
            declined.append(name)
        elif mine != _standard(raw):
            wrong.append(name)
    assert wrong == []
    assert len(CASES) > 800
    assert len(declined) < len(CASES) // 5, declined  # bare-CR variants, delivery-status parts: the rest is taken


def test_parse_bytes_gives_the_standard_tree_for_every_case() -> None:
    """What the renderer calls: the one-pass tree where taken, else the feed parser's; the same tree either way."""
    wrong = [name for name, raw in sorted(CASES.items()) if tree(parse_bytes(raw)) != _standard(raw)]
    assert wrong == []


@pytest.mark.parametrize("name", ["delivery-status", "lone-cr", "crlf-cr"])
def test_shapes_left_to_the_standard_parser(name: str) -> None:
    """A delivery-status part and bare CR line ends are declined by the one-pass parser, and still parse right."""
    raw = CRAFTED[name]
    assert _one_pass(raw) == "declined"
    assert tree(parse_bytes(raw)) == _standard(raw)


@pytest.mark.parametrize("name", ["nested", "digest", "attached-multipart", "multipart-lookalikes", "unix-from", "from-last-header"])
def test_the_grammar_branches_are_taken_in_one_pass(name: str) -> None:
    """Nested multiparts, digests, attached mails, boundary look-alikes and unix From lines are not declined."""
    raw = CRAFTED[name]
    assert _one_pass(raw) != "declined"
    assert _one_pass(raw) == _standard(raw)


def test_the_content_type_and_the_headers_are_remembered_until_the_headers_change() -> None:
    """A part's content type and its headers by name are read once, and read again after a header is replaced,
    deleted or added, or the default type changes."""
    msg = parse_bytes(b"Content-Type: text/html\nSubject: a\nsubject: b\n\nx\n")
    assert msg.get_content_type() == "text/html"
    assert msg.header_values("subject") == ["a", "b"]
    msg.replace_header("Content-Type", "image/png")
    msg.replace_header("Subject", "c")
    assert msg.get_content_type() == "image/png"
    assert msg.header_values("subject") == ["c", "b"]
    del msg["Content-Type"]
    assert msg.get_content_type() == "text/plain"
    assert msg.header_values("content-type") == []
    msg.set_default_type("message/rfc822")
    assert msg.get_content_type() == "message/rfc822"
    msg["Content-Type"] = "application/pdf"
    assert msg.get_content_type() == "application/pdf"
    msg.set_type("text/calendar")
    assert msg.get_content_type() == "text/calendar"
    assert msg.header_values("content-type") == ["text/calendar"]
    msg.add_header("Subject", "d")
    assert msg.header_values("subject") == ["c", "b", "d"]
