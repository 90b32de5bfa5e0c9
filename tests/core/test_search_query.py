"""The query language over a small index, in process: notmuch's boolean operators and their precedence, dates (before
1970 too, relative ones), stemming (and where it does not apply), exact forms ranked first, and ``search_stemming =
"none"``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memex.search.dates import date_range
from memex.search.index import SearchIndex
from memex.search.parse import MAX_DEPTH, MAX_TERMS, QueryError
from memex.search.query import parse
from memex.search.schema import STEM

MESSAGES = {  # native id: (sender, subject, text, sent_at, source)
    "a": ("barry@example.com", "patch for the archive", "a message about stemming", "2010-03-01T10:00:00Z", "mail"),
    "b": ("lars@example.com", "archive run", "two messages here", "2011-06-01T10:00:00Z", "mail"),
    "c": ("keithp@keithp.com", "a patch", "Wibble", "2012-09-01T10:00:00Z", "mail"),
    "d": ("keithp@keithp.com", "lunch", "zendesk ticket", "2009-11-17T12:00:00Z", "chat"),
    "e": ("anna@example.com", "valentine", "sent in 1969", "1969-02-14T09:00:00Z", "mail"),
    "f": ("anna@example.com", "no date", "undated message", None, "mail"),
}


def _records() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for nid, (sender, subject, text, sent_at, source) in MESSAGES.items():
        doc: dict[str, Any] = {"source": source, "native_id": nid, "text": text, "sent_at": sent_at,
                               "sender": {"id": sender}, "extra": {"subject": subject}}  # fmt: skip
        out.append((f"messages/{source}/{nid}.json", doc))
    return out


@pytest.fixture
def index(tmp_path: Path) -> Any:
    """An index of :data:`MESSAGES` (stemmed: the default)."""
    with SearchIndex(tmp_path / "index.sqlite") as idx:
        idx.add(_records())
        yield idx


def found(index: SearchIndex, query: str, *, rank: bool = False) -> list[str]:
    """The native ids ``query`` finds (newest first, or ranked)."""
    q = parse(query, stemmed=STEM in index.tables)
    return [r["native_id"] for r in q.run(index.select, 100, rank=rank)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("from:barry OR from:lars", {"a", "b"}),
        ("from:barry or from:lars", {"a", "b"}),
        ("wibble or zendesk", {"c", "d"}),
        ("(subject:patch OR subject:archive) from:keithp.com", {"c"}),
        ("(subject:patch)", {"a", "c"}),
        ("subject:patch OR subject:archive from:keithp.com", {"a", "c"}),  # AND binds tighter than OR
        ("NOT from:anna AND archive", {"a", "b"}),  # NOT binds tighter than AND
        ("not (from:anna or from:keithp.com)", {"a", "b"}),
        ("archive -patch", {"b"}),
        ("archive and not patch", {"b"}),
        ("archive XOR patch", {"b", "c"}),
        ("archive XOR patch XOR lunch", {"b", "c", "d"}),  # a chain: an odd number of its sides hold (as Xapian)
        ("(archive XOR patch) XOR from:anna", {"b", "c", "e", "f"}),
        ("((archive OR lunch) AND (source:chat OR from:lars))", {"b", "d"}),
        ("source:chat OR wibble", {"c", "d"}),
        ("-source:mail", {"d"}),
        ("* AND archive", {"a", "b"}),
    ],
)
def test_boolean_operators_combine_as_notmuch_reads_them(index: SearchIndex, query: str, expected: set[str]) -> None:
    """AND, OR, XOR, NOT in any case, -term, parentheses and nesting, with NOT > AND > XOR > OR; filters (source:)
    combine with words inside an OR too."""
    assert set(found(index, query)) == expected


DEEPEST = {  # each shape nested to the parser's limit (MAX_DEPTH) or as wide as it lets a query be (MAX_TERMS)
    "nots": lambda: "NOT " * MAX_DEPTH + "lunch",
    "parentheses": lambda: "(" * MAX_DEPTH + "lunch" + ")" * MAX_DEPTH,
    "words-ored": lambda: "(archive OR " * MAX_DEPTH + "lunch" + ")" * MAX_DEPTH,
    "filters-ored": lambda: "(source:chat OR " * MAX_DEPTH + "source:x" + ")" * MAX_DEPTH,
    "not-of-filters": lambda: "NOT (source:chat OR " * (MAX_DEPTH // 2) + "lunch" + ")" * (MAX_DEPTH // 2),
    "xors": lambda: "(archive XOR " * MAX_DEPTH + "lunch" + ")" * MAX_DEPTH,
    "not-xor-dates": lambda: "NOT (date:2009.. XOR " * (MAX_DEPTH // 2) + "lunch" + ")" * (MAX_DEPTH // 2),
    "filters-flat": lambda: " OR ".join(["source:chat"] * MAX_TERMS),
    "dates-flat": lambda: " ".join(["date:2009..2025"] * MAX_TERMS),
    "xor-chain": lambda: " XOR ".join(["date:2009..2025", "lunch"] * (MAX_TERMS // 2)),
    "negations-flat": lambda: " OR ".join(["NOT date:2009..2025"] * MAX_TERMS),
    "deep-and-wide": lambda: "(" * (MAX_DEPTH - 1) + " OR ".join(["-source:x"] * (MAX_TERMS - 1)) + ")" * (MAX_DEPTH - 1) + " lunch",
}


@pytest.mark.parametrize("shape", DEEPEST)
def test_every_query_the_parser_takes_sqlite_runs(index: SearchIndex, shape: str) -> None:
    """The parser's limits lie inside SQLite's: a query at the deepest nesting or the most terms it accepts runs
    (past them SQLite's parser overflows its stack, or its expression tree passes 1,000 levels), and one nesting
    more is refused by the parser with its one line."""
    query = DEEPEST[shape]()
    found(index, query)
    deeper, wider = "(" + query + ")", query + " OR lunch"
    with pytest.raises(QueryError, match=f"at most {MAX_TERMS}" if "flat" in shape or "chain" in shape else "levels deep"):
        parse(wider if "flat" in shape or "chain" in shape else deeper)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("date:2010..2011", {"a", "b"}),
        ("date:2009-11-17..2009-11-18", {"d"}),
        ("date:2009-11-17", {"d"}),
        ("date:..2009", {"d", "e"}),
        ("date:2012..", {"c"}),
        ("after:1969-01-01 before:1970-01-01", {"e"}),
        ("date:1969", {"e"}),
        ("before:1970-01-01", {"e"}),  # the undated one is in no date range
    ],
)
def test_dates_and_ranges_find_what_they_name_before_1970_too(index: SearchIndex, query: str, expected: set[str]) -> None:
    """date:SINCE..UNTIL takes whole years, months and days, open sides; a record dated 1969 is found by its dates."""
    assert set(found(index, query)) == expected


def test_relative_dates_count_back_from_now() -> None:
    """date:2w.. starts two weeks before now; 1M a month (calendar) before; a unit cut short still reads."""
    now = 1_700_000_000.0
    assert date_range("2w..", lambda: now) == (now - 14 * 86400, None)
    assert date_range("3days..", lambda: now)[0] == now - 3 * 86400
    assert date_range("1M..", lambda: now)[0] == now - 31 * 86400  # 2023-11-14 back to 2023-10-14
    assert date_range("..1y", lambda: now)[1] == now - 365 * 86400 + 1


def test_words_match_by_their_stem_but_phrases_prefixes_fields_and_capitals_as_written(index: SearchIndex) -> None:
    """'message' finds 'messages'; a quoted word, a capitalised word, from:/subject: terms and prefix* do not stem."""
    assert set(found(index, "message")) == {"a", "b", "f"}
    assert set(found(index, "messages")) == {"a", "b", "f"}
    assert set(found(index, '"messages"')) == {"b"}
    assert set(found(index, "Messages")) == {"b"}
    assert set(found(index, "stem")) == {"a"}  # stemming -> stem
    assert set(found(index, "subject:archives")) == set()
    assert set(found(index, "messag*")) == {"a", "b", "f"}


def test_exact_forms_rank_before_their_stems(index: SearchIndex) -> None:
    """Ranked, a message holding the word as written comes before one holding only another form of it."""
    assert found(index, "messages", rank=True)[0] == "b"
    assert found(index, "message", rank=True)[-1] == "b"


def test_without_stemming_every_word_is_matched_as_written(tmp_path: Path) -> None:
    """``search_stemming = "none"``: no stems' table, and 'message' finds only 'message'."""
    with SearchIndex(tmp_path / "index.sqlite", stemming="none") as idx:
        idx.add(_records())
        assert STEM not in idx.tables
        assert set(found(idx, "message")) == {"a", "f"}


@pytest.mark.parametrize(
    ("query", "hit"),
    [("notmuch_message_file_get_header", True), ("get_header", True), ("notmuch_message", True), ("header", True),
     ("notmuch_mess*", True), ("header_get", False), ("get_file", False), ("foo.bar", True), ("bar", True),
     ("co-op", True), ("op", True), ("coop", False), ("e-mail", True), ("email", False)],
)  # fmt: skip
def test_a_word_ends_at_every_character_that_is_not_a_letter_or_digit(tmp_path: Path, query: str, hit: bool) -> None:
    """docs/searching.md's "What a word is", each example: ``_``, ``.`` and ``-`` split words (an identifier is a phrase
    of its parts, found by any part, in its order only), so ``coop`` never finds ``co-op``."""
    doc = {"source": "mail", "native_id": "w", "text": "call notmuch_message_file_get_header and foo.bar, e-mail the co-op",
           "sent_at": None, "sender": {"id": "a@example.com"}, "extra": {"subject": "s"}}  # fmt: skip
    with SearchIndex(tmp_path / "index.sqlite") as idx:
        idx.add([("messages/mail/w.json", doc)])
        assert (found(idx, query) == ["w"]) is hit
