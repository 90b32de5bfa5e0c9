"""Reading a query's text into a tree: terms, filters and the boolean operators between them (notmuch's grammar).

::

    query   := or
    or      := xor (OR xor)*
    xor     := and (XOR and)*
    and     := unary ((AND)? unary)*        juxtaposed terms are ANDed
    unary   := (NOT | -) unary | "(" query ")" | term

AND, OR, XOR and NOT are operators in any case, unless quoted. A query is at most :data:`MAX_LENGTH` characters and
:data:`MAX_TERMS` terms, nested at most :data:`MAX_DEPTH` levels (each parenthesis and each NOT or ``-`` is one), and
holds no NUL: past these SQLite's own parser runs out of stack (an OR of 1,000 filters, 20 nested parentheses of
filters, 42 stacked NOTs) and Python's recursion ends, so they are refused here, each with one line. Anything else that cannot be read (an unbalanced
parenthesis, an operator with nothing on one side, ``from:`` with no value, an unknown operator, a bad date) raises
:class:`QueryError` with one line naming the problem: a bad query never silently matches everything or nothing.
"""

from __future__ import annotations

import re
from typing import TypeAlias

from memex.errors import MemexError

FIELD_OPS = ("from", "to", "with", "subject", "body", "attachment", "in")  # with: either side (a person, memex.people)
FILTER_OPS = ("source", "has", "after", "before", "date", "is", "id")
OPERATORS = ("and", "or", "xor", "not")
HIGHLIGHT = ("\x02", "\x03")  # snippet() marks around a matched word (memex.search.query); renderers split on them
_TOKEN = re.compile(r'\s*(?:([()])|(-)(?=[^\s)])|(?:([A-Za-z]+):)?("(?:[^"]|"")*"?|[^\s"()]*))')
_WORD = re.compile(r"\w", re.UNICODE)
MAX_LENGTH = 10_000  # characters
MAX_TERMS = 256  # terms and filters (each a condition SQLite nests: it stops at 1,000 levels)
MAX_DEPTH = 16  # parentheses and NOT/- around a term (at twice this SQLite's parser overflows)


class QueryError(MemexError):
    """A query memex cannot read (exit 2)."""

    exit_code = 2


class Term:
    """A word, ``prefix*`` or ``"phrase"`` to find, in one field (``field``) or any."""

    __slots__ = ("field", "prefix", "quoted", "value")

    def __init__(self, field: str | None, value: str, quoted: bool, prefix: bool) -> None:
        self.field, self.value, self.quoted, self.prefix = field, value, quoted, prefix


class Filter:
    """A condition on the row: ``source:``, ``id:``, ``has:``, ``is:`` (value lower-cased) or a time span
    (``after:``, ``before:``, ``date:``: ``span`` is ``(start, end)`` in seconds, None where open)."""

    __slots__ = ("op", "span", "value")

    def __init__(self, op: str, value: str, span: tuple[float | None, float | None] = (None, None)) -> None:
        self.op, self.value, self.span = op, value, span


Node: TypeAlias = "Term | Filter | tuple[str, list[Node]]"


class _Tok:
    __slots__ = ("field", "kind", "quoted", "text")

    def __init__(self, kind: str, text: str, field: str | None = None, quoted: bool = False) -> None:
        self.kind, self.text, self.field, self.quoted = kind, text, field, quoted


def tokens(text: str) -> list[_Tok]:
    """The query's tokens: ``(``, ``)``, ``-``, operators (``op``) and terms (``term``, with their field)."""
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise QueryError(f"cannot read the query from {text[pos : pos + 20]!r}")
        pos = m.end()
        paren, minus, field, value = m.group(1), m.group(2), m.group(3), m.group(4)
        if paren:
            out.append(_Tok(paren, paren))
            continue
        if minus:
            out.append(_Tok("-", "-"))
            continue
        quoted = value.startswith('"')
        if quoted:
            if len(value) == 1 or not value.endswith('"'):
                raise QueryError(f'unclosed quote in {value!r}; close the phrase with "')
            value = value[1:-1].replace('""', '"')
        if field is not None:
            if not value and not quoted:
                raise QueryError(f"{field}: has no value; write {field}:SOMETHING (quote a value with spaces)")
            out.append(_Tok("term", value, field.lower(), quoted))
        elif not quoted and value.lower() in OPERATORS:
            out.append(_Tok("op", value.lower()))
        elif not value and not quoted:
            raise QueryError(f"cannot read the query from {text[m.start() : m.start() + 20].strip()!r}")
        else:
            out.append(_Tok("term", value, None, quoted))
    return out


class _Parser:
    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.i = 0
        self.depth = 0  # parentheses and NOTs open around the token being read

    def deeper(self) -> None:
        """Enter one more parenthesis or NOT; :class:`QueryError` past :data:`MAX_DEPTH`."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise QueryError(f"the query nests more than {MAX_DEPTH} levels deep (parentheses and NOTs together); "
                             "write it flatter or as several searches")  # fmt: skip

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def kind(self) -> str | None:
        """The next token's kind, None at the end."""
        tok = self.peek()
        return None if tok is None else tok.kind

    def peek_text(self) -> str | None:
        """The next token's text, None at the end."""
        tok = self.peek()
        return None if tok is None else tok.text

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def binary(self, op: str, sub: str) -> Node:
        first = getattr(self, sub)()
        kids = [first]
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text == op:
            self.take()
            if self.kind() in (None, ")") or (self.kind() == "op" and self.peek_text() != "not"):
                raise QueryError(f"{op.upper()} needs a term after it")
            kids.append(getattr(self, sub)())
        return kids[0] if len(kids) == 1 else (op, kids)

    def or_(self) -> Node:
        return self.binary("or", "xor")

    def xor(self) -> Node:
        return self.binary("xor", "and_")

    def and_(self) -> Node:
        kids = [self.unary()]
        while (tok := self.peek()) is not None and tok.kind != ")" and not (tok.kind == "op" and tok.text in ("or", "xor")):
            if tok.kind == "op" and tok.text == "and":
                self.take()
                nxt = self.peek()
                if nxt is None or nxt.kind == ")" or (nxt.kind == "op" and nxt.text != "not"):
                    raise QueryError("AND needs a term after it")
            kids.append(self.unary())
        return kids[0] if len(kids) == 1 else ("and", kids)

    def unary(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise QueryError("the query ends where a term was expected")
        if tok.kind == "op":
            if tok.text != "not":
                raise QueryError(f"{tok.text.upper()} needs a term before it")
            self.take()
            if self.kind() in (None, ")"):
                raise QueryError("NOT needs a term after it")
            return self.negated()
        if tok.kind == "-":
            self.take()
            nxt = self.peek()
            if nxt is None or nxt.kind in (")", "op", "-"):
                raise QueryError("- must be followed by a term (-word, -from:name)")
            return self.negated()
        if tok.kind == "(":
            self.take()
            if self.kind() == ")":
                raise QueryError("empty parentheses: put terms between ( and )")
            self.deeper()
            node = self.or_()
            if self.peek() is None:
                raise QueryError("unclosed parenthesis: a ( has no matching )")
            self.take()
            self.depth -= 1
            return node
        if tok.kind == ")":
            raise QueryError("unmatched ): a ) has no ( before it")
        self.take()
        return _leaf(tok)

    def negated(self) -> Node:
        """The term after a NOT or ``-`` (already taken), negated."""
        self.deeper()
        node = self.unary()
        self.depth -= 1
        return ("not", [node])


def _leaf(tok: _Tok) -> Term | Filter:
    """The term or filter a term token names; :class:`QueryError` for an unknown operator or a bad value."""
    field, value = tok.field, tok.text
    if field is None or field in FIELD_OPS:
        if value == "*" and field is None and not tok.quoted:
            return Term(None, "*", False, False)
        prefix = not tok.quoted and value.endswith("*") and len(value) > 1
        if not _WORD.search(value[:-1] if prefix else value):
            raise QueryError(f"{value!r} has no letter or digit to search for")
        return Term(field, value, tok.quoted, prefix)
    if field not in FILTER_OPS:
        known = " ".join(f"{k}:" for k in (*FIELD_OPS, *FILTER_OPS))
        raise QueryError(f"unknown operator {field}: (known: {known}); quote the term to search for it as text")
    if field == "has":
        if value.lower() not in ("attachment", "attachments"):
            raise QueryError(f"has:{value}: unknown; has:attachment is the one there is")
        return Filter("has", "attachment")
    if field == "is":
        if value.lower() not in ("me", "edited", "deleted"):
            raise QueryError(f"is:{value}: unknown; is:me, is:edited and is:deleted are the ones there are")
        return Filter("is", value.lower())
    from memex.search.dates import DateError, date_range, day  # here: a query with no date never imports it

    if field in ("after", "before"):
        try:
            at = day(value)
        except DateError:
            raise QueryError(f"{field}:{value}: not a date; write it as YYYY-MM-DD (e.g. {field}:2025-03-01)") from None
        return Filter(field, value, (at, None) if field == "after" else (None, at))
    if field == "date":
        try:
            return Filter("date", value, date_range(value))
        except DateError as exc:
            raise QueryError(f"date:{value}: {exc} (e.g. date:2024, date:2024-01..2024-06-30, date:2w..)") from None
    return Filter(field, value)


def tree(text: str) -> Node | None:
    """The tree of ``text`` (None for ``*``: every message); :class:`QueryError` when it cannot be read."""
    if not text.strip():
        raise QueryError("empty query; give words or operators (`memex search --help`), or * for every message")
    if len(text) > MAX_LENGTH:
        raise QueryError(f"the query is {len(text):,} characters long; memex reads at most {MAX_LENGTH:,}: split it into several searches")
    if "\x00" in text:
        raise QueryError("the query holds a NUL character (\\x00); remove it")
    toks = tokens(text)
    terms = sum(tok.kind == "term" for tok in toks)
    if terms > MAX_TERMS:
        raise QueryError(f"the query has {terms} terms; memex reads at most {MAX_TERMS}: split it into several searches")
    if len(toks) == 1 and toks[0].kind == "term" and toks[0].text == "*" and toks[0].field is None:
        return None
    parser = _Parser(toks)
    node = parser.or_()
    if parser.peek() is not None:
        tok = parser.take()
        if tok.kind == ")":
            raise QueryError("unmatched ): a ) has no ( before it")
        raise QueryError(f"cannot read the query from {tok.text!r}")
    return node
