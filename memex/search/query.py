"""The query language of ``memex search`` (notmuch's), parsed into FTS5 expressions and SQL conditions.

Terms are joined by ``AND``, ``OR``, ``XOR`` and ``NOT`` (in any case), ``-term``, parentheses, and juxtaposition
(an implicit AND); ``NOT`` binds tightest, then AND, XOR, OR. A bare word, ``prefix*`` or ``"a phrase"`` matches the
text, subject, sender, recipients, conversation or attachment names. ``from:``, ``to:``, ``subject:``, ``body:``,
``attachment:`` and ``in:`` (the conversation's name or id) match in one of those fields; ``source:``,
``has:attachment``, ``after:``/``before:`` (``YYYY-MM-DD``, UTC), ``date:SINCE..UNTIL`` (:mod:`memex.search.dates`),
``is:me``, ``is:edited``, ``is:deleted`` and ``id:`` (a native ID) filter rows. Juxtaposed ``source:`` or ``in:``
terms are ORed (a message has one of each). ``*`` matches every message. Unsent or deleted messages are left out
unless the query names ``is:deleted``.

Stemming (notmuch's habit): an unquoted word (bare, or after body: or to:) that does not start with a capital letter is matched by its stem
(``message`` finds ``messages``) in the stemmed table ``fts_stem`` when the index has one; phrases, ``prefix*`` and
capitalised words match as written in ``fts``. A query memex cannot read raises :class:`QueryError` with one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memex.errors import MemexError
from memex.search.parse import HIGHLIGHT, Filter, Node, QueryError, Term, tree

__all__ = ["FIELDS", "HIGHLIGHT", "Query", "QueryError", "parse", "phrase"]

RANK_WINDOW = 200  # a ranked search ranks this many best matches first (Query.run)
FIELDS = {
    "from": "sender",
    "to": "recipients",
    "subject": "subject",
    "body": "body",
    "attachment": "attachments",
    "in": "{conversation conv_id}",
    "with": "{sender recipients}",  # a value that names no person: from: OR to:
}  # a bare word: every column but the conversation's id (- conv_id)
EXACT, STEM = "fts", "fts_stem"  # the FTS5 tables: words as written, and their stems
STEMMED_FIELDS = (None, "body", "to")  # as notmuch: not from:, subject: or attachment:
_WORD = re.compile(r"\w+", re.UNICODE)
_NOT_WORD = re.compile(r"\W", re.UNICODE)
R = TypeVar("R")
assert issubclass(QueryError, MemexError)


@dataclass
class Query:
    """A compiled query: an FTS5 expression to match in ``table`` and ones to exclude, SQL conditions on the
    ``messages`` row ``m``, and (for ranking) an exact-form expression whose matches rank first."""

    match: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    deleted: bool = False  # is:deleted asked for the deleted ones
    table: str = EXACT
    exact: list[str] = field(default_factory=list)  # the stemmed words as written: their matches rank first
    also: list[tuple[str, str]] = field(default_factory=list)  # (table, expression): matched in the other FTS5 table too

    def run(self, select: Callable[[str, list[Any]], Iterable[R]], limit: int, *, rank: bool = False) -> list[R]:
        """The rows answering this query (:meth:`sql`), through ``select(sql, params)``.

        Ranked, the best :data:`RANK_WINDOW` matches (by FTS5 alone) are ranked first; they hold the answer when
        ``limit`` of them pass the query's conditions on the messages (any other match ranks below all of them).
        Otherwise (or with a date range, which FTS5 applies itself) every match is ranked: so a word found in many
        messages is not joined to each of its rows only to be ranked below the first ``limit``.
        """
        if rank and self.match and not any("{rowid}" in w for w in self.where):  # a date range narrows the matches itself
            size = max(RANK_WINDOW, limit * 4)
            rows = list(select(*self.sql(size, rank=True, window=size)))
            if len(rows) >= limit:
                return self.exact_first(rows)[:limit]
        rows = list(select(*self.sql(limit, rank=rank)))
        return self.exact_first(rows) if rank else rows

    def exact_first(self, rows: list[R]) -> list[R]:
        """``rows`` (ranked) with those holding a stemmed word as written (in the text, subject, sender or
        conversation's name) first, each group in its order: among the window's best matches, or among all of them
        when fewer than the limit match."""
        if not self.exact:
            return rows
        words = set(self.exact)

        def written(row: Any) -> bool:
            found = " ".join(str(row[i] or "") for i in (9, 10, 7, 6, 5)).casefold()  # subject, text, sender, conversation
            return not words.isdisjoint(_WORD.findall(found))

        return sorted(rows, key=lambda row: not written(row))

    def matching(self, select: str) -> tuple[str, list[Any]]:
        """``SELECT <select>`` over the rows ``m`` this query matches, unordered and unlimited (counts, group-by,
        threads: :mod:`memex.read.conversations` adds its GROUP BY and ORDER BY)."""
        return self.sql(0, select=select)

    def sql(self, limit: int, *, rank: bool = False, window: int | None = None, select: str | None = None) -> tuple[str, list[Any]]:
        """The SELECT answering this query, newest first (or best match first with ``rank`` and words to rank by);
        with ``window``, ranked among that many best matches only (:meth:`run`); with ``select``, those columns of
        every match, unordered (:meth:`matching`)."""
        cols = "m.key, m.source, m.native_id, m.sent_at, m.conv_id, m.conv_name, m.sender_id, m.sender_name, m.is_me, " \
               "m.subject, m.text, m.edited, m.deleted, m.n_attachments"  # fmt: skip
        t = self.table
        rowid = f"{t}.rowid" if self.match else "m.id"  # ids are in time order (memex.search.rows.time_id)
        where = [w.replace("{rowid}", rowid) for w in self.where]
        params: list[Any] = []
        also = [f"m.id IN (SELECT rowid FROM {a} WHERE {a} MATCH ?)" for a, _ in self.also]  # m.id: never FTS5's look-up per id
        where[0:0] = also
        if self.match:
            start, end = HIGHLIGHT
            shown = select or f"{cols}, snippet({t}, 0, '{start}', '{end}', '…', 12) AS snippet"
            sql = f"SELECT {shown} FROM {t} JOIN messages m ON m.id = {t}.rowid"
            where.insert(0, f"{t} MATCH ?")
            expr = " AND ".join(self.match)
            params.append("".join([f"({expr})", *(f" NOT ({term})" for term in self.exclude)]) if self.exclude else expr)
        else:
            sql = f"SELECT {select or cols + ', NULL AS snippet'} FROM messages m"
        params += [e for _, e in self.also]
        params += self.params
        if not self.match:
            for term in self.exclude:
                where.append(f"m.id NOT IN (SELECT rowid FROM {t} WHERE {t} MATCH ?)")
                params.append(term)
        if not self.deleted:
            where.append("m.deleted = 0")
        if where:
            sql += " WHERE " + " AND ".join(where)
        if select is not None:
            return sql, params
        order = f"bm25({t}), {rowid} DESC" if rank and self.match else f"{rowid} DESC"
        if window is not None and rank and self.match:  # the best matches of every FTS5 part, ranked by the main one
            inner = "".join(f" AND +rowid IN (SELECT rowid FROM {a} WHERE {a} MATCH ?)" for a, _ in self.also)
            top = f"SELECT rowid FROM (SELECT rowid, bm25({t}) AS r FROM {t} WHERE {t} MATCH ?{inner} ORDER BY r, rowid DESC LIMIT ?)"
            sql = sql.replace(f" WHERE {t} MATCH ?", f" WHERE {t} MATCH ? AND +{t}.rowid IN ({top})", 1)  # a filter, not a look-up
            params[1:1] = [params[0], *(e for _, e in self.also), window]
        sql += f" ORDER BY {order} LIMIT ?"
        params.append(limit)
        return sql, params


def phrase(text: str, *, prefix: bool = False) -> str:
    """``text`` as one FTS5 string (a word or a phrase), ``*`` after it for a prefix search."""
    return '"' + text.replace('"', '""') + '"' + (" *" if prefix else "")


class _Part:
    """What a subtree asks, in the shape the SELECT takes: positive FTS5 expressions per table (ANDed), ones to
    exclude (table, expression), SQL conditions with their parameters, and the stemmed words as written."""

    def __init__(self) -> None:
        self.pos: dict[str, list[str]] = {}
        self.neg: list[tuple[str, str]] = []
        self.sql: list[str] = []
        self.params: list[Any] = []
        self.exact: list[str] = []

    def pure(self) -> str | None:
        """The table when this is one positive FTS5 expression on one table and nothing else."""
        if len(self.pos) == 1 and not self.neg and not self.sql:
            return next(iter(self.pos))
        return None

    def condition(self) -> tuple[str, list[Any]]:
        """This part as one SQL condition on ``m`` (FTS5 expressions as row id look-ups)."""
        conds: list[str] = []
        params: list[Any] = []
        for table, exprs in self.pos.items():
            conds.append(f"m.id IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)")
            params.append(_and(exprs))
        for table, expr in self.neg:
            conds.append(f"m.id NOT IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)")
            params.append(expr)
        conds += self.sql
        params += self.params
        return ("(" + " AND ".join(conds) + ")" if conds else "1"), params


def _and(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else " AND ".join(f"({e})" for e in exprs)


def _sql(cond: str, params: list[Any] | None = None) -> _Part:
    part = _Part()
    part.sql.append(cond)
    part.params += params or []
    return part


def _conj(parts: list[_Part]) -> _Part:
    out = _Part()
    for p in parts:
        for table, exprs in p.pos.items():
            out.pos.setdefault(table, []).extend(exprs)
        out.neg += p.neg
        out.sql += p.sql
        out.params += p.params
        out.exact += p.exact
    return out


def _disj(parts: list[_Part]) -> _Part:
    tables = {p.pure() for p in parts}
    if len(tables) == 1 and None not in tables:
        table = tables.pop()
        assert table is not None
        out = _Part()
        out.pos[table] = [" OR ".join(f"({_and(p.pos[table])})" for p in parts)]
        out.exact = [e for p in parts for e in p.exact]
        return out
    conds = [p.condition() for p in parts]
    # "+m.source": no index for a column inside an OR (SQLite would read every row of each side through its index,
    # then sort them all, where walking the rows newest first stops at the limit)
    ored = " OR ".join(c.replace("m.source = ?", "+m.source = ?").replace("m.native_id = ?", "+m.native_id = ?") for c, _ in conds)
    out = _sql("(" + ored + ")", [x for _, ps in conds for x in ps])
    out.exact = [e for p in parts for e in p.exact]
    return out


def _parity(parts: list[_Part]) -> _Part:
    """``a XOR b XOR ...``: an odd number of the parts hold (as Xapian's XOR), each part written once: spelt out as
    ``(a AND NOT b) OR (NOT a AND b)``, each nested XOR would double the SQL."""
    conds = [p.condition() for p in parts]
    out = _sql("((" + ") + (".join(c for c, _ in conds) + ")) % 2 = 1", [x for _, ps in conds for x in ps])
    out.exact = [e for p in parts for e in p.exact]
    return out


def _negate(part: _Part) -> _Part:
    table = part.pure()
    if table is not None:
        out = _Part()
        out.neg.append((table, _and(part.pos[table])))
        return out
    cond, params = part.condition()
    return _sql(f"NOT {cond}", params)


# A person term's messages: (field, value) -> the IDs of the messages that person sent ("from"), received ("to") or
# either ("with"), or None when the value names no person (then it is matched as words). memex.search.persons makes it.
People = Callable[[str, str], "list[int] | None"]
PERSON_FIELDS = ("from", "to", "with")


class _Compiler:
    def __init__(self, stemmed: bool, people: People | None = None) -> None:
        self.stemmed = stemmed
        self.deleted = False
        self.people = people

    def part(self, node: Node) -> _Part:
        if isinstance(node, Term):
            return self.term(node)
        if isinstance(node, Filter):
            return self.filter(node)
        op, kids = node
        if op == "not":
            return _negate(self.part(kids[0]))
        if op == "xor":
            return _parity([self.part(k) for k in kids])
        if op == "or":
            return _disj([self.part(k) for k in kids])
        # and: juxtaposed source: and in: terms are ORed, as notmuch ORs terms of one boolean prefix
        groups: dict[str, list[Node]] = {}
        rest: list[Node] = []
        for k in kids:
            key = k.op if isinstance(k, Filter) and k.op == "source" else k.field if isinstance(k, Term) and k.field == "in" else ""
            if key:
                groups.setdefault(key, []).append(k)
            else:
                rest.append(k)
        parts = [self.part(k) for k in rest]
        parts += [_disj([self.part(k) for k in g]) if len(g) > 1 else self.part(g[0]) for g in groups.values()]
        return _conj(parts)

    def term(self, t: Term) -> _Part:
        if t.field in PERSON_FIELDS and self.people is not None and not t.prefix:
            ids = self.people(t.field, t.value)
            if ids is not None:
                import json

                return _sql("m.id IN (SELECT value FROM json_each(?))", [json.dumps(ids)])
        part = _Part()
        if t.value == "*" and not t.field and not t.quoted:
            return part  # every message
        words = _WORD.findall(t.value.removesuffix("*") if t.prefix else t.value)
        stem = (
            self.stemmed and t.field in STEMMED_FIELDS and not t.quoted and not t.prefix and len(words) == 1 and not t.value[:1].isupper()
        )
        expr = phrase(t.value[:-1] if t.prefix else t.value, prefix=t.prefix)
        expr = f"{FIELDS[t.field]} : {expr}" if t.field else f"- conv_id : {expr}"
        part.pos[STEM if stem else EXACT] = [expr]
        if stem:
            part.exact.append(t.value.casefold())
        return part

    def filter(self, f: Filter) -> _Part:
        from memex.search.rows import FIRST_TIMED, id_at

        if f.op == "source":
            return _sql("m.source = ?", [f.value])
        if f.op == "id":
            return _sql("m.native_id = ?", [f.value])
        if f.op == "has":
            return _sql("m.n_attachments > 0")
        if f.op == "is":
            if f.value == "deleted":
                self.deleted = True
                return _sql("m.deleted = 1")
            return _sql(f"m.{'is_me' if f.value == 'me' else 'edited'} = 1")
        start, end = f.span
        conds, params = [], []
        if start is not None:
            conds.append("{rowid} >= ?")
            params.append(id_at(start))
        else:
            conds.append("{rowid} >= ?")
            params.append(FIRST_TIMED)
        if end is not None:
            conds.append("{rowid} < ?")
            params.append(id_at(end))
        return _sql(" AND ".join(conds), params)


def parse(text: str, *, stemmed: bool = True, people: People | None = None) -> Query:
    """Parse a query (see the module docstring); :class:`QueryError` names what it cannot read. ``stemmed``: the
    index has the stemmed table (else every word matches as written); ``people``: ``from:``, ``to:`` and ``with:``
    take a person (:mod:`memex.people`)."""
    root = tree(text)
    compiler = _Compiler(stemmed, people)
    part = compiler.part(root) if root is not None else _Part()
    q = Query(deleted=compiler.deleted)
    if part.pos:
        q.table = STEM if STEM in part.pos else EXACT
        q.match.append(_and(part.pos.pop(q.table)))
        q.exclude = [expr for table, expr in part.neg if table == q.table]
        part.neg = [(table, expr) for table, expr in part.neg if table != q.table]
        q.also = [(table, _and(exprs)) for table, exprs in part.pos.items()]
        part.pos = {}
    elif part.neg and len({table for table, _ in part.neg}) == 1:
        q.table = part.neg[0][0]
        q.exclude = [expr for _, expr in part.neg]
        part.neg = []
    rest, params = _conj([part]).condition() if (part.pos or part.neg or part.sql) else ("", [])
    if rest:
        q.where.append(rest)
        q.params += params
    if q.table == STEM:
        q.exact = part.exact
    return q
