"""What an assistant can ask of the archive, answered read-only from the search index and the store.

Each method answers one tool of ``memex mcp`` (:mod:`memex.assistant.server`) with a JSON-able dict sized for an
assistant's context: search results are compact (key, time, source, conversation, sender, a snippet) and paged by an
opaque cursor; a message's text is cut to ``max_chars`` from an ``offset`` with where the rest begins; a conversation
is paged in order; attachments are listed (name, type, size), never inlined; counts and index status are small tables.

Read-only by construction: every call opens the index with SQLite's ``mode=ro`` (the file is opened read-only, so
no statement and no checkpoint can write it) and ``PRAGMA query_only``, holding ``open.lock`` shared as every reader
does (:mod:`memex.search.locks`) and only for the call, so a ``memex index rebuild`` can swap the file between
calls and the next call reads the new one. The store is read through ``get`` and ``list_keys`` only. Nothing here
imports what writes (runner, uploader, backfill, cursors, verify, the index's writer); ``tests/core/test_mcp.py``
pins it. Bad arguments raise :class:`ToolError`, one line saying what to give instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memex.assistant.record import SNIPPET, _cut, _person, message_answer
from memex.config import Config
from memex.errors import MemexError
from memex.read import lookups
from memex.read.archive import Archive as ReadArchive
from memex.records import encode_id, message_key
from memex.search import index_path, journal_path
from memex.search.rows import revision_parent
from memex.search.schema import SCHEMA_VERSION
from memex.store.objects import ObjectStore

LIMIT, LIMIT_MAX = 20, 100  # search results per page
THREAD_LIMIT, THREAD_MAX = 50, 100  # a conversation's messages per page
TEXT_CHARS, TEXT_MAX = 2000, 20000  # a message's text per page (show_message)
THREAD_TEXT = 500  # characters of each message's text in a conversation page
RANK_PAGES = 1000  # a ranked search pages this deep at most (offsets, not keys)
GROUPS = ("sender", "conversation", "month")
_KEY = re.compile(r"(?:messages/[^/]+/[^/]+|revisions/[^/]+/[^/]+/[^/]+)\.json")


class ToolError(MemexError):
    """A tool's arguments cannot be answered (a bad query, an unknown key, no index): one line, what to do."""


def _bounded(name: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{name}: give a whole number from {low} to {high}")
    if value < low:
        raise ToolError(f"{name}: {value} is below {low}; give a number from {low} to {high}")
    return min(value, high)  # a larger page than allowed is cut to the largest, said in the answer


def _cursor(fields: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode().rstrip("=")


def _uncursor(cursor: str, expect: str) -> dict[str, Any]:
    """The fields of a cursor this server gave for the same question (``expect``: a digest of it)."""
    try:
        fields = json.loads(base64.urlsafe_b64decode(str(cursor) + "=" * (-len(str(cursor)) % 4)))
        numbers = [v for k, v in fields.items() if k != "q"] if isinstance(fields, dict) else [None]
        if isinstance(fields, dict) and fields.get("q") == expect and all(type(v) is int and abs(v) < 2**63 for v in numbers):
            return dict(fields)  # ids and offsets, all whole numbers
    except (ValueError, TypeError):
        pass
    raise ToolError("cursor: not one this server gave for this question; repeat the same arguments with the cursor "
                    "of the previous answer, or leave it out for the first page")  # fmt: skip


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


class Archive:
    """The index and store of one configuration, read-only; one method per tool."""

    def __init__(self, cfg: Config, store: ObjectStore | None = None) -> None:
        self.cfg = cfg
        self._store = store
        self._read: ReadArchive | None = None

    @property
    def store(self) -> ObjectStore:
        """The configured store: the read model's, so one store is opened (on first use; no I/O until read)."""
        return self.read.store

    @property
    def stemmed(self) -> bool:
        """Whether the open index has the stemmed table (the read model's, set when it opens the index)."""
        return self.read.stemmed

    @property
    def read(self) -> ReadArchive:
        """The read model over the same configuration and store (:mod:`memex.read`)."""
        if self._read is None:
            self._read = ReadArchive(self.cfg, self._store)
        return self._read

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection to the index for one call (:meth:`memex.read.archive.Archive.reading`), its faults
        said as a tool error."""
        from memex.read.errors import IndexMissing, IndexOtherVersion, IndexUnreadable

        path = index_path(self.cfg.state_dir)
        try:
            with self.read.reading() as db:
                yield db
        except IndexMissing:
            raise ToolError(f"{path}: no search index yet; run `memex index rebuild` (polls then keep it in step)") from None
        except IndexOtherVersion as exc:
            raise ToolError(f"{path}: made by another version of memex (format {exc.version}, this one reads "
                            f"{SCHEMA_VERSION}); run `memex index rebuild`") from None  # fmt: skip
        except IndexUnreadable as exc:
            raise ToolError(f"{path}: cannot read the search index ({exc.detail}); `memex index rebuild` makes a new one") from None

    # search

    def search(self, query: str, limit: int = LIMIT, cursor: str | None = None, rank: bool = False) -> dict[str, Any]:
        """The messages ``query`` matches (the ``memex search`` language), newest first (``rank``: best first),
        ``limit`` a page; ``cursor`` (from the previous page's answer) for the next page."""
        from memex.search.query import HIGHLIGHT, parse

        limit = _bounded("limit", limit, 1, LIMIT_MAX)
        if not isinstance(query, str):
            raise ToolError("query: give the query as text (the `memex search` language; * for every message)")
        parse(query)  # a query that cannot be read is refused before the index is opened
        question = _digest("search", query, bool(rank))
        at = _uncursor(cursor, question) if cursor else {}
        offset = min(max(0, at.get("offset", 0)), RANK_PAGES)  # a ranked page (keys for newest first: before_id)
        with self.reading():  # the index's faults as tool errors
            before = int(at["before_id"]) if "before_id" in at and not rank else None
            rows = self.read.search_rows(query, limit + 1, rank=rank, before_id=before, offset=offset if rank else 0)
            more = len(rows) > limit
            rows = rows[:limit]
            results = []
            for row in rows:
                snippet = row["snippet"] if row["snippet"] is not None else _cut(row["text"], SNIPPET)
                snippet = " ".join((snippet or row["subject"] or "").replace(HIGHLIGHT[0], "").replace(HIGHLIGHT[1], "").split())
                results.append({
                    "key": row["key"], "time": row["sent_at"], "source": row["source"],
                    "conversation": {"id": row["conv_id"] or None, "name": row["conv_name"] or None},
                    "sender": _person(row["sender_id"], row["sender_name"], row["is_me"]),
                    "subject": row["subject"] or None, "snippet": snippet, "attachments": row["n_attachments"],
                    **({"edited": True} if row["edited"] else {}), **({"deleted": True} if row["deleted"] else {}),
                })  # fmt: skip
            following = None
            if more and rank:
                following = _cursor({"q": question, "offset": offset + limit}) if offset + limit < RANK_PAGES else None
            elif more:
                following = _cursor({"q": question, "before_id": rows[-1]["id"]})
        return {"query": query, "order": "best match first" if rank else "newest first", "limit": limit,
                "results": results, "next_cursor": following}  # fmt: skip

    def _parse(self, query: str) -> Any:
        """``query`` compiled for the open index (:meth:`memex.read.archive.Archive.compile`): stemmed when it has
        the stemmed table, person terms through the people layer, read-only."""
        return self.read.compile(query)

    def people(self, name: str | None = None, limit: int = 20) -> dict[str, Any]:
        """The people ``name`` names (or everyone, by name): handles, messages per source, where they come from."""
        from memex.assistant.people import PEOPLE_MAX, open_read_only, people_answer

        limit = _bounded("limit", limit, 1, PEOPLE_MAX)
        if name is not None and not isinstance(name, str):
            raise ToolError("name: give a person's ID, name or handle as text, or leave it out for everyone")
        people = open_read_only(self.cfg, index_path(self.cfg.state_dir))
        try:
            return people_answer(people, name or None, limit)
        finally:
            people.close()

    # one message

    def resolve(self, db: sqlite3.Connection | None, ref: str) -> str:
        """The key of the message ``ref`` names: its key (a revision's names its message), or its native ID."""
        if not isinstance(ref, str) or not ref:
            raise ToolError("message: give a message's key (from a search result) or its native ID")
        if ref.startswith(("messages/", "revisions/")):
            if not _KEY.fullmatch(ref) or any(p in (".", "..") for p in ref.split("/")):
                raise ToolError(f"message: {_cut(ref, 80)!r} is not a message key (messages/SOURCE/ID.json); "
                                "give a key from a search result")  # fmt: skip
            return revision_parent(ref) or ref
        if db is not None:
            keys = lookups.native_keys(db, ref, 6)
        else:
            keys = [k for k in (message_key(s, ref) for s in sorted(self.cfg.sources)) if self.store.exists(k)]
        if not keys:
            raise ToolError(f"message: no message has the key or native ID {_cut(ref, 80)!r}; search for it first")
        if len(keys) > 1:
            raise ToolError(f"message: {len(keys)} messages have the native ID {_cut(ref, 80)!r} ({', '.join(keys[:5])}); give a key")
        return str(keys[0])

    def message(self, ref: str, offset: int = 0, max_chars: int = TEXT_CHARS) -> dict[str, Any]:
        """One message read from the store: its fields, attachments listed, its text from ``offset`` (at most
        ``max_chars``; ``more`` says where the rest begins) and a summary of its revisions from the index."""
        offset = _bounded("offset", offset, 0, 2**62)
        max_chars = _bounded("max_chars", max_chars, 1, TEXT_MAX)
        revisions: list[Any] = []
        if index_path(self.cfg.state_dir).is_file():
            with self.reading() as db:
                key = self.resolve(db, ref)
                revisions = lookups.revision_rows(db, key)
        else:
            key = self.resolve(None, ref)
        body = self.store.get(key)
        if body is None:
            raise ToolError(f"message: {key} is not in the store; search again (`memex index rebuild` brings the index in step)")
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise ToolError(f"message: {key} is not a readable record; `memex verify` checks the store")

        return message_answer(key, doc, revisions, offset, max_chars)

    # a conversation

    def conversation(self, ref: str, source: str | None = None, limit: int = THREAD_LIMIT, cursor: str | None = None) -> dict[str, Any]:
        """A conversation's messages in order (oldest first), ``limit`` a page, each text cut to :data:`THREAD_TEXT`
        characters; ``ref`` is its ID (a search result's ``conversation.id``; ``source`` tells apart two sources'
        conversations of one ID) or a message's key (that message's conversation)."""

        limit = _bounded("limit", limit, 1, THREAD_MAX)
        if not isinstance(ref, str) or not ref:
            raise ToolError("conversation: give a conversation ID (a search result's conversation.id) or a message's key")
        if source is not None and not isinstance(source, str):
            raise ToolError("source: give a source's name as text, or leave it out")
        at = _uncursor(cursor, _digest("conversation", ref, source)) if cursor else {}
        with self.reading() as db:
            thread = self._thread(db, ref, source)
            first, total, rows = lookups.thread_page(db, thread, int(at.get("after_id", -(2**63))), limit + 1)
        messages = [{
            "key": r["key"], "time": r["sent_at"], "sender": _person(r["sender_id"], r["sender_name"], r["is_me"]),
            **({"subject": r["subject"]} if r["subject"] else {}), "text": r["text"][:THREAD_TEXT],
            **({"text_length": len(r["text"])} if len(r["text"]) > THREAD_TEXT else {}),
            **({"attachments": r["n_attachments"]} if r["n_attachments"] else {}),
            **({"edited": True} if r["edited"] else {}), **({"deleted": True} if r["deleted"] else {}),
        } for r in rows[:limit]]  # fmt: skip
        following = _cursor({"q": _digest("conversation", ref, source), "after_id": rows[limit - 1]["id"],
                             "n": int(at.get("n", 0)) + limit}) if len(rows) > limit else None  # fmt: skip
        conv = (
            {"id": first["conv_id"] or None, "name": first["conv_name"] or first["subject"] or None, "source": first["source"]}
            if first
            else {"id": None, "name": None, "source": source}
        )
        return {"conversation": conv, "total": total,
                "first_position": int(at.get("n", 0)) + 1, "messages": messages, "next_cursor": following}  # fmt: skip

    def _thread(self, db: sqlite3.Connection, ref: str, source: str | None) -> int:
        """The thread (the index's conversation: a chat, or a mail thread joined by its references) that ``ref``
        names: a message's key, or a conversation ID (of ``source``, when given)."""
        if ref.startswith(("messages/", "revisions/")):
            key = self.resolve(db, ref)
            thread = lookups.thread_of(db, key)
            if thread is None:
                raise ToolError(f"conversation: {key} is not indexed; `memex index rebuild` brings the index in step")
            return thread
        from memex.search.query import QueryError, parse

        try:  # the conversation's words find its rows (no index holds conv_id), then its exact ID
            q = parse('in:"' + ref.replace('"', '""') + '"', stemmed=self.stemmed)
        except QueryError:  # an ID with no word in it: every row is read
            q = None
        found = lookups.thread_named(db, ref, source, q)
        if found is None:
            raise ToolError(f"conversation: no indexed message is in the conversation {_cut(ref, 80)!r}; "
                            "give a conversation.id or a key from a search result")  # fmt: skip
        return found

    # counts and status

    def counts(self, by: str, query: str = "*", limit: int = LIMIT) -> dict[str, Any]:
        """How many messages ``query`` matches per ``by`` (sender, conversation or month): most first (months:
        newest first), ``limit`` groups, and the total."""
        from memex.search.query import parse

        if by not in GROUPS:
            raise ToolError(f"by: {_cut(str(by), 40)!r} is not one of {', '.join(GROUPS)}")
        limit = _bounded("limit", limit, 1, LIMIT_MAX)
        if not isinstance(query, str):
            raise ToolError("query: give the query as text (* for every message)")
        parse(query)
        with self.reading() as db:
            rows = lookups.group_rows(db, self._parse(query), by)
            total = sum(r["n"] for r in rows)
            groups = lookups.named_groups(db, by, rows[:limit])
        return {"query": query, "by": by, "total": total, "groups_total": len(rows), "groups": groups}

    def index_status(self, detailed: bool = False) -> dict[str, Any]:
        """Per source: messages indexed, the oldest and newest message's time, when records were last added and the
        index rebuilt, records stored but not yet indexed (``pending``); ``detailed`` adds how many are edited and
        deleted (a scan of the rows), the records in the store and how many the index lacks (a listing)."""
        with self.reading() as db:
            per = lookups.overview(db, detailed=detailed)
            for row in per.values():
                if "oldest" in row:
                    row["oldest"], row["newest"] = _utc(row["oldest"]), _utc(row["newest"])
        rows = []
        for source in sorted(set(per) | set(self.cfg.sources)):
            row = per.get(source, {"source": source, "indexed": 0})
            row["pending"] = sum(_journaled(journal_path(self.cfg.state_dir, source, w)) for w in ("poll", "backfill"))
            if detailed:
                prefix = f"messages/{encode_id(source)}/"
                row["in_store"] = sum(1 for k in self.store.list_keys(prefix) if k.endswith(".json") and k.count("/") == 2)
                row["behind"] = max(0, row["in_store"] - row["indexed"])
            rows.append(row)
        return {"sources": rows, "total": sum(r["indexed"] for r in rows)}


def _utc(found: Any) -> str | None:
    """The RFC 3339 UTC time of a row's ``ts`` (None for none)."""
    if found is None or found[0] is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(found[0], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _journaled(path: os.PathLike[str]) -> int:
    """How many keys a journal names (0 when there is none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return len({line for line in fh.read().splitlines() if line})
    except FileNotFoundError:
        return 0
