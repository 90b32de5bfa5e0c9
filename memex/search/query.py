"""The query language of ``memex search`` (notmuch's habits), parsed into an FTS5 expression and SQL conditions.

Terms are ANDed. A bare word, ``prefix*`` or ``"a phrase"`` matches the text, subject, sender, recipients,
conversation or attachment names. ``from:``, ``to:``, ``subject:``, ``body:``, ``attachment:`` and ``in:`` (the
conversation's name or id) match in one of those fields; ``source:``, ``has:attachment``, ``after:``/``before:``
(``YYYY-MM-DD``, UTC), ``is:me``, ``is:edited``, ``is:deleted`` and ``id:`` (a native ID) filter rows. ``-term``
(or ``not term``) excludes. Several ``source:`` or ``in:`` terms are ORed (a message has one of each). ``*`` alone
matches every message. Unsent or deleted messages are left out unless the query has ``is:deleted``.
A query memex cannot read raises :class:`QueryError` with one line saying why.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from memex.errors import MemexError

RANK_WINDOW = 200  # a ranked search ranks this many best matches first (Query.run)
HIGHLIGHT = ("\x02", "\x03")  # snippet() marks around a matched word; the CLI renders them
FIELDS = {"from": "sender", "to": "recipients", "subject": "subject", "body": "body", "attachment": "attachments", "in": "conversation"}
FILTERS = ("source", "has", "after", "before", "is", "id")
_TOKEN = re.compile(r'\s*(-?)(?:([A-Za-z]+):)?("(?:[^"]|"")*"?|[^\s"]+)')
_WORD = re.compile(r"\w", re.UNICODE)
R = TypeVar("R")


class QueryError(MemexError):
    """A query memex cannot read (exit 2)."""

    exit_code = 2


@dataclass
class Query:
    """A parsed query: FTS5 terms to match and to exclude, and SQL conditions on the ``messages`` row ``m``."""

    match: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)
    deleted: bool = False  # is:deleted asked for the deleted ones

    def run(self, select: Callable[[str, list[Any]], Iterable[R]], limit: int, *, rank: bool = False) -> list[R]:
        """The rows answering this query (:meth:`sql`), through ``select(sql, params)``.

        Ranked, the best :data:`RANK_WINDOW` matches (by FTS5 alone) are ranked first; they hold the answer when
        ``limit`` of them pass the query's conditions on the messages (any other match ranks below all of them).
        Otherwise (or with a date range, which FTS5 applies itself) every match is ranked: so a word found in many
        messages is not joined to each of its rows only to be ranked below the first ``limit``.
        """
        if rank and self.match and not any("{rowid}" in w for w in self.where):  # a date range narrows the matches itself
            rows = list(select(*self.sql(limit, rank=True, window=max(RANK_WINDOW, limit * 4))))
            if len(rows) >= limit:
                return rows
        return list(select(*self.sql(limit, rank=rank)))

    def matching(self, select: str) -> tuple[str, list[Any]]:
        """``SELECT <select>`` over the rows ``m`` this query matches, unordered and unlimited (counts, group-by,
        threads: :mod:`memex.search.threads` adds its GROUP BY and ORDER BY)."""
        return self.sql(0, select=select)

    def sql(self, limit: int, *, rank: bool = False, window: int | None = None, select: str | None = None) -> tuple[str, list[Any]]:
        """The SELECT answering this query, newest first (or best match first with ``rank`` and words to rank by);
        with ``window``, ranked among that many best matches only (:meth:`run`); with ``select``, those columns of
        every match, unordered (:meth:`matching`)."""
        cols = "m.key, m.source, m.native_id, m.sent_at, m.conv_id, m.conv_name, m.sender_id, m.sender_name, m.is_me, " \
               "m.subject, m.text, m.edited, m.deleted, m.n_attachments"  # fmt: skip
        rowid = "fts.rowid" if self.match else "m.id"  # ids are in time order (memex.search.rows.time_id)
        where = [w.replace("{rowid}", rowid) for w in self.where]
        params: list[Any] = []
        if self.match:
            start, end = HIGHLIGHT
            shown = select or f"{cols}, snippet(fts, 0, '{start}', '{end}', '…', 12) AS snippet"
            sql = f"SELECT {shown} FROM fts JOIN messages m ON m.id = fts.rowid"
            where.insert(0, "fts MATCH ?")
            expr = " AND ".join(self.match)
            params.append("".join([f"({expr})", *(f" NOT {term}" for term in self.exclude)]) if self.exclude else expr)
        else:
            sql = f"SELECT {select or cols + ', NULL AS snippet'} FROM messages m"
        params += self.params
        if not self.match:
            for term in self.exclude:
                where.append("m.id NOT IN (SELECT rowid FROM fts WHERE fts MATCH ?)")
                params.append(term)
        if not self.deleted:
            where.append("m.deleted = 0")
        if where:
            sql += " WHERE " + " AND ".join(where)
        if select is not None:
            return sql, params
        order = f"bm25(fts), {rowid} DESC" if rank and self.match else f"{rowid} DESC"
        if window is not None and rank and self.match:
            top = "SELECT rowid FROM (SELECT rowid, bm25(fts) AS r FROM fts WHERE fts MATCH ? ORDER BY r, rowid DESC LIMIT ?)"
            sql = sql.replace(" WHERE fts MATCH ?", f" WHERE fts MATCH ? AND +fts.rowid IN ({top})", 1)  # a filter, not a look-up
            params[1:1] = [params[0], window]
        sql += f" ORDER BY {order} LIMIT ?"
        params.append(limit)
        return sql, params


def phrase(text: str, *, prefix: bool = False) -> str:
    """``text`` as one FTS5 string (a word or a phrase), ``*`` after it for a prefix search."""
    return '"' + text.replace('"', '""') + '"' + (" *" if prefix else "")


def _date(value: str, op: str) -> float:
    try:
        return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise QueryError(f"{op}:{value}: not a date; write it as YYYY-MM-DD (e.g. {op}:2025-03-01)") from None


def parse(text: str) -> Query:
    """Parse a query (see the module docstring); :class:`QueryError` names the first term it cannot read."""
    q = Query()
    ors: dict[str, list[str]] = {}  # source: and in: terms, ORed
    sql_ors: dict[str, list[str]] = {}
    negate_next = False
    pos = 0
    text = text.strip()
    if text == "*":
        return q
    if not text:
        raise QueryError("empty query; give words or operators (`memex search --help`), or * for every message")
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise QueryError(f"cannot read the query from {text[pos : pos + 20]!r}")
        pos = m.end()
        minus, op, value = m.group(1), (m.group(2) or "").lower(), m.group(3)
        quoted = value.startswith('"')
        if quoted:
            if len(value) == 1 or not value.endswith('"'):
                raise QueryError(f'unclosed quote in {value!r}; close the phrase with "')
            value = value[1:-1].replace('""', '"')
        negate = bool(minus) or negate_next
        negate_next = False
        if not op and not quoted and value.lower() == "not":
            negate_next = True
            continue
        if not op and not quoted and value in ("OR", "AND", "(", ")"):
            if value == "AND":
                continue
            raise QueryError(f"{value!r} is not supported; terms are ANDed, -term excludes (see docs/searching.md)")
        if op and op not in FIELDS and op not in FILTERS:
            known = " ".join(f"{k}:" for k in (*FIELDS, *FILTERS))
            raise QueryError(f"unknown operator {op}: (known: {known}); quote the term to search for it as text")
        if op in FILTERS:
            if negate:
                raise QueryError(f"-{op}: is not supported; only words, phrases and field terms can be excluded")
            _filter(q, op, value, sql_ors)
            continue
        prefix = not quoted and value.endswith("*") and len(value) > 1
        word = value[:-1] if prefix else value
        if not _WORD.search(word):
            raise QueryError(f"{value!r} has no letter or digit to search for")
        term = phrase(word, prefix=prefix)
        if op:
            term = f"{FIELDS[op]} : {term}"
        if op == "in" and not negate:
            ors.setdefault(op, []).append(term)
        elif negate:
            q.exclude.append(term)
        else:
            q.match.append(term)
    if negate_next:
        raise QueryError("`not` must be followed by a term")
    for terms in ors.values():
        q.match.append("(" + " OR ".join(terms) + ")" if len(terms) > 1 else terms[0])
    for column, values in sql_ors.items():
        q.where.append("(" + " OR ".join(f"{column} = ?" for _ in values) + ")")
        q.params.extend(values)
    return q


def _filter(q: Query, op: str, value: str, sql_ors: dict[str, list[str]]) -> None:
    if op == "source":
        sql_ors.setdefault("m.source", []).append(value)
    elif op == "id":
        q.where.append("m.native_id = ?")
        q.params.append(value)
    elif op == "has":
        if value.lower() not in ("attachment", "attachments"):
            raise QueryError(f"has:{value}: unknown; has:attachment is the one there is")
        q.where.append("m.n_attachments > 0")
    elif op in ("after", "before"):
        from memex.search.rows import id_at

        q.where.append("{rowid} >= ?" if op == "after" else "{rowid} >= 0 AND {rowid} < ?")
        q.params.append(id_at(_date(value, op)))
    elif op == "is":
        what = value.lower()
        if what == "me":
            q.where.append("m.is_me = 1")
        elif what == "edited":
            q.where.append("m.edited = 1")
        elif what == "deleted":
            q.deleted = True
            q.where.append("m.deleted = 1")
        else:
            raise QueryError(f"is:{value}: unknown; is:me, is:edited and is:deleted are the ones there are")
