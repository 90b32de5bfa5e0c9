"""The archive, read: every question a front end asks (search, a message, a conversation, counts, people, a
timeline, attachment bytes, the sources' health), answered from the search index and the store, read-only.

The index is read with SQLite's ``mode=ro`` and ``PRAGMA query_only`` (no statement and no checkpoint can write it),
each call in a read transaction of its own (one snapshot for the call's statements, ended when it ends) while it
holds ``open.lock`` shared (:mod:`memex.search.locks`), so ``memex index rebuild`` can swap the file between two
calls and the next one reads the new file. A call's connection is kept for the next call of this archive (a server's
next request) while the index is the same file (its device and inode): opening one and reading the schema cost a
server about 0.3 ms a request, a fifth of a thin client's search. The store is read through
``get`` and ``list_keys`` only. Nothing here imports what writes (the runner, the uploader, the index's writer, the
cursors): ``tests/core/test_read.py`` pins it, and ``tests/core/test_layers.py`` fails when a front end holds the
index's SQL itself.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from memex.config import Config
from memex.errors import MemexError
from memex.read.conversations import first_row
from memex.read.errors import IndexMissing, IndexOtherVersion, IndexUnreadable, ReadError
from memex.read.models import (
    AttachmentBlob,
    AttachmentMeta,
    ConversationPage,
    ConversationSummary,
    Count,
    Hit,
    MessageSummary,
    MessageView,
    PersonSummary,
    PersonView,
    Revision,
    SearchPage,
    SourceHealth,
)
from memex.search import index_path
from memex.search.schema import MONTH, SCHEMA_VERSION
from memex.store.objects import ObjectStore

ORDERS = ("newest", "oldest", "rank")
BY = ("source", "person", "sender", "month", "day", "conversation")
COLUMNS = ("m.id, m.key, m.source, m.native_id, m.sent_at, m.conv_id, m.conv_name, m.sender_id, m.sender_name, m.is_me, "
           "m.subject, m.text, m.edited, m.deleted, m.n_attachments, m.thread")  # fmt: skip
_GROUP = {"source": "m.source", "sender": "m.sender_id", "month": MONTH, "day": "substr(m.sent_at, 1, 10)",
          "conversation": "m.thread", "person": "m.sender_id"}  # fmt: skip
PEOPLE_FOLD = 1000  # counts by person fold this many of the busiest senders into people
IDLE_CONNECTIONS = 4  # read-only connections an archive keeps between calls (one per request answered at once)


class _Reading(sqlite3.Connection):
    """A read-only connection to the index that knows its cursors, so that the end of a call can close those still
    open: SQLite keeps a connection's read snapshot while any of its statements is mid-way, and the next call on a
    kept connection would read the rows of that snapshot, not what a poll added since."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursors: weakref.WeakSet[sqlite3.Cursor] = weakref.WeakSet()

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        """A cursor, tracked."""
        cur = super().cursor(*args, **kwargs)
        self.cursors.add(cur)
        return cur

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        """``Connection.execute`` through a tracked cursor (the C method makes its cursor out of reach)."""
        cur: sqlite3.Cursor = self.cursor()
        return cur.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        """``Connection.executemany`` through a tracked cursor."""
        cur: sqlite3.Cursor = self.cursor()
        return cur.executemany(sql, parameters)

    def end_call(self) -> None:
        """Close every cursor of the call that ended (a statement left mid-way is reset with it)."""
        for cur in list(self.cursors):
            cur.close()
        self.cursors.clear()


class Archive:
    """The index and store of one configuration, read-only. Open one with :func:`open_archive`; close it when done."""

    def __init__(self, cfg: Config, store: ObjectStore | None = None, *, follow_people: bool = False) -> None:
        """Read ``cfg``'s archive (``store``: its store, opened on first use when not given). ``follow_people``: a
        person term brings the people layer's handles file up to date first, as ``memex search`` does (that file is
        the people layer's own, derived from the index; the index and the store are never written either way)."""
        self.cfg = cfg
        self._store = store
        self.follow_people = follow_people
        self.stemmed = True  # whether the index has the stemmed table (set by :meth:`reading`)
        self._idle: list[tuple[tuple[int, int], _Reading, bool]] = []  # (file, connection, stemmed) kept
        self._idle_lock = threading.Lock()
        self._closed = False  # closed: a call that ends now closes its connection instead of keeping it

    @property
    def store(self) -> ObjectStore:
        """The configured store (built on first use; no I/O until read)."""
        if self._store is None:
            from memex.store import open_store

            self._store = open_store(self.cfg.store)
        return self._store

    def close(self) -> None:
        """Let go of what this archive holds: the store, and the connections kept between calls."""
        self._store = None
        with self._idle_lock:
            idle, self._idle, self._closed = self._idle, [], True
        for _, db, _ in idle:
            db.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection to the index for one call (``open.lock`` held shared meanwhile), rows by name."""
        from memex.search.locks import reader_lock

        path = index_path(self.cfg.state_dir)
        if not path.is_file():
            from memex.fs_errors import in_the_way

            fault = in_the_way(path)  # a state folder that is a file is not "no index yet"
            if fault is not None:
                raise fault
            raise IndexMissing("no search index yet; build it with `memex index rebuild` (polls then keep it in step)", path=path)
        try:
            lock = reader_lock(path.parent)
        except OSError as exc:
            raise _unreadable(exc, path) from None
        kept = False
        try:
            file, db, stemmed = self._take(path)
        except BaseException:
            os.close(lock)
            raise
        try:
            db.execute("BEGIN")  # deferred: the call's first read takes the snapshot every later one reads
            yield db
            db.end_call()  # a statement left mid-way would keep the snapshot open past the ROLLBACK
            db.execute("ROLLBACK")  # nothing to undo: it ends the call's snapshot
            kept = self._keep(file, db, stemmed)
        except sqlite3.Error as exc:  # a statement's fault (a damaged page, a lost disk): the index, not the caller
            raise _unreadable(exc, path) from None
        finally:
            if not kept:
                db.close()
            os.close(lock)

    def _take(self, path: Path) -> tuple[tuple[int, int], _Reading, bool]:
        """A connection to the index at ``path``: one kept from an earlier call when the file is still that one, else
        a new one (:meth:`_connect`); with the file's (device, inode) and whether it has the stemmed table."""
        try:
            st = path.stat()
        except OSError as exc:
            raise _unreadable(exc, path) from None
        file = (st.st_dev, st.st_ino)
        with self._idle_lock:
            stale = [entry for entry in self._idle if entry[0] != file]
            self._idle = [entry for entry in self._idle if entry[0] == file]
            found = self._idle.pop() if self._idle else None
        for _, old, _ in stale:  # a rebuild swapped the file in: the old one's connections go
            old.close()
        if found is not None:
            self.stemmed = found[2]
            return found
        db = self._connect(path)
        return file, db, self.stemmed

    def _keep(self, file: tuple[int, int], db: _Reading, stemmed: bool) -> bool:
        """Keep ``db`` (its call ended, no transaction open) for the next call; False when enough are kept already."""
        if db.in_transaction:
            return False
        with self._idle_lock:
            if self._closed or len(self._idle) >= IDLE_CONNECTIONS:
                return False
            self._idle.append((file, db, stemmed))
        return True

    def _connect(self, path: Path) -> _Reading:
        """A read-only connection to the index at ``path`` of this version's format, rows by name."""
        try:
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=10.0, check_same_thread=False, factory=_Reading)
        except (sqlite3.Error, OSError) as exc:
            raise _unreadable(exc, path) from None
        try:
            db.execute("PRAGMA query_only = ON")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise IndexOtherVersion(f"made by another version of memex (format {version}, this one reads {SCHEMA_VERSION}); "
                                        "run `memex index rebuild` to make it again from the store", path=path, version=version)  # fmt: skip
            self.stemmed = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'fts_stem'").fetchone() is not None
        except (sqlite3.Error, OSError) as exc:
            db.close()
            raise _unreadable(exc, path) from None
        except BaseException:
            db.close()
            raise
        db.row_factory = sqlite3.Row
        return db

    def compile(self, query: str, *, people: bool = True, notes: list[str] | None = None) -> Any:
        """``query`` compiled for the open index (call inside :meth:`reading`): stemmed when it has the stemmed table,
        person terms (``with:``, ``from:``/``to:`` naming someone set up) through the people layer, read-only."""
        from memex.search.persons import Lookup
        from memex.search.query import parse

        if not people:
            return parse(query, stemmed=self.stemmed)
        lookup = Lookup(self.cfg, index_path(self.cfg.state_dir), read_only=not self.follow_people)
        try:
            return parse(query, stemmed=self.stemmed, people=lookup)
        finally:
            lookup.close()
            if notes is not None:
                notes += lookup.notes  # what to tell the user: a with: value naming nobody (matched as words)

    # search

    def search_rows(self, query: str, limit: int, *, rank: bool = False, before_id: int | None = None,
                    offset: int = 0, notes: list[str] | None = None) -> list[dict[str, Any]]:  # fmt: skip
        """The index's rows ``query`` matches (the ``memex search`` language), newest first (``rank``: best first),
        at most ``limit`` after ``offset``; ``before_id``: only rows below that row id (the next page, newest first).
        Each row a dict of the index's columns and ``snippet`` (matched words between
        :data:`memex.search.query.HIGHLIGHT`'s marks; None for a query without words). ``notes``: given a list,
        what the user should be told is added to it (a ``with:`` value naming nobody, matched as words)."""
        from memex.search.query import parse

        parse(query)  # a query that cannot be read is refused before the index is opened
        with self.reading() as db:
            q = self.compile(query, notes=notes)
            if before_id is not None:
                q.where.append("{rowid} < ?")
                q.params.append(int(before_id))
            rows = q.run(lambda sql, p: db.execute(sql, p), offset + limit, rank=rank)[offset:]
            return _with_ids(db, [dict(r) for r in rows])

    def search(self, query: str, *, limit: int = 50, offset: int = 0, order: str = "newest", total: bool = True,
               cap: int | None = None) -> SearchPage:  # fmt: skip
        """A page of the messages ``query`` matches: ``order`` newest, oldest or rank (best first); ``total``: count
        them all too (else ``SearchPage.total`` is None); ``cap``: count no further than that many (then
        ``total == cap`` and ``more`` says there are more: a common word's exact count is most of its page's time)."""
        if order not in ORDERS:
            raise ReadError(f"order: {order!r} is not one of {', '.join(ORDERS)}", path="search")
        if order == "oldest":
            rows = self._oldest(query, limit, offset)
        else:
            rows = self.search_rows(query, limit, rank=order == "rank", offset=offset)
        n = self.count(query, cap=cap) if total else None
        more = cap is not None and n is not None and n > cap
        return SearchPage(total=cap if more else n, hits=[_hit(r) for r in rows], more=more)

    def _oldest(self, query: str, limit: int, offset: int) -> list[dict[str, Any]]:
        """The matches oldest first (the SELECT newest first, turned around)."""
        from memex.search.query import parse

        parse(query)
        with self.reading() as db:
            q = self.compile(query)
            sql, params = q.sql(offset + limit)
            sql = sql.replace(" DESC LIMIT ?", " ASC LIMIT ?")
            rows = [dict(r) for r in db.execute(sql, params).fetchall()][offset:]
            return _with_ids(db, rows)

    def count(self, query: str, *, conversations: bool = False, people: bool = True, cap: int | None = None) -> int:
        """How many messages (or with ``conversations``, conversations) ``query`` matches (``people``: person terms
        through the people layer; else as words, as ``memex search --count`` reads them); ``cap``: messages counted
        no further than one past it (``cap + 1`` means "more than ``cap``")."""
        from memex.read.conversations import count
        from memex.search.query import parse

        parse(query)
        with self.reading() as db:
            q = self.compile(query, people=people)
            if cap is not None and not conversations:
                sql, params = q.matching("1")
                n: int = db.execute(f"SELECT count(*) FROM ({sql} LIMIT ?)", [*params, cap + 1]).fetchone()[0]
                return n
            return count(db, q, threads=conversations)

    def counts(self, query: str, by: str, limit: int = 50) -> list[Count]:
        """How many messages ``query`` matches per ``by`` (:data:`BY`): most first (months and days newest first),
        at most ``limit`` groups, each with a label to show and a key to ask with."""
        from memex.search.query import parse

        if by not in BY:
            raise ReadError(f"by: {by!r} is not one of {', '.join(BY)}", path="counts")
        parse(query)
        with self.reading() as db:
            sql, params = self.compile(query).matching(f"{_GROUP[by]} AS g, count(*) AS n")
            order = "g IS NULL, g DESC" if by in ("month", "day") else "n DESC, g"
            fetch = PEOPLE_FOLD if by == "person" else limit
            rows = db.execute(f"{sql} GROUP BY g ORDER BY {order} LIMIT ?", [*params, fetch]).fetchall()
            if by == "person":
                return self._by_person([(g, n) for g, n in rows], limit)
            out = []
            for g, n in rows:
                if by == "sender":
                    found = db.execute(
                        "SELECT sender_name FROM messages WHERE sender_id = ? AND sender_name != '' LIMIT 1", (g,)
                    ).fetchone()
                    out.append(Count(label=(found[0] if found else None) or g or "?", key=g or None, n=n))
                elif by == "conversation":
                    first = first_row(db, g)
                    out.append(Count(label=_title(first) if first else "?", key=str(g), n=n))
                else:
                    out.append(Count(label=g or "no time", key=g or None, n=n))
            return out

    def _by_person(self, senders: list[tuple[str, int]], limit: int) -> list[Count]:
        """Counts per sender folded into people (a sender no person holds counts on its own)."""
        from memex.people import open_people

        people = open_people(self.cfg, index=index_path(self.cfg.state_dir), read_only=True)
        try:
            totals: dict[str, list[Any]] = {}
            for sender, n in senders:
                found = people.book.find(sender, people.settings.rules) if sender else []
                who = found[0] if len(found) == 1 else None
                key = who.id if who else sender
                entry = totals.setdefault(key, [(who.name or who.id) if who else (sender or "?"), 0])
                entry[1] += n
        finally:
            people.close()
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return [Count(label=label, key=key or None, n=n) for key, (label, n) in ranked[:limit]]

    # one message

    def resolve(self, ref: str) -> list[str]:
        """The keys of the messages ``ref`` names: a stored key (a revision's names its message), or a native ID
        (in any source; several when sources share it). Empty when none."""
        from memex.search.rows import revision_parent

        if ref.startswith(("messages/", "revisions/")) and ref.endswith(".json"):
            return [revision_parent(ref) or ref]
        if index_path(self.cfg.state_dir).is_file():
            with self.reading() as db:
                return [r[0] for r in db.execute("SELECT key FROM messages WHERE key = ? OR native_id = ? ORDER BY key", (ref, ref))]
        from memex.fs_errors import in_the_way

        if (fault := in_the_way(index_path(self.cfg.state_dir))) is not None:
            raise fault  # a state folder that is a file: that, not "no stored message has the native ID"
        from memex.records import message_key

        return [k for k in (message_key(s, ref) for s in sorted(self.cfg.sources)) if self.store.exists(k)]

    def record(self, key: str) -> dict[str, Any] | None:
        """The record stored at ``key`` (None when absent or not a JSON object)."""
        body = self.store.get(key)
        if body is None:
            return None
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def revisions(self, key: str) -> list[Revision]:
        """The revisions stored for the message at ``key``, oldest first (by their time, then key)."""
        parts = key[: -len(".json")].split("/")
        out = []
        for rev_key in self.store.list_keys(f"revisions/{parts[1]}/{parts[2]}/"):
            doc = self.record(rev_key)
            if doc is not None:
                meta: dict[str, Any] = doc["revision"] if isinstance(doc.get("revision"), dict) else {}
                out.append(Revision(key=rev_key, kind=str(meta.get("kind") or ""), at=meta.get("at"), record=doc))
        return sorted(out, key=lambda r: (str(r.at or ""), r.key))

    def message(self, key: str) -> MessageView | None:
        """One message whole (``key``: its key, a revision's, or a native ID naming one message), or None."""
        keys = self.resolve(key)
        if len(keys) != 1:
            return None
        original = self.record(keys[0])
        if original is None:
            return None
        revs = self.revisions(keys[0])
        current = dict(original)
        texts = [r for r in revs if r.kind in ("edit", "update") and isinstance(r.record.get("text"), str)]
        if texts:
            current["text"] = texts[-1].record["text"]
        if any(r.kind == "delete" or r.record.get("deleted") is True for r in revs):
            current["deleted"] = True
        reactions = [r for r in revs if r.kind == "reactions"]
        thread, reply_to = None, None
        if index_path(self.cfg.state_dir).is_file():
            with self.reading() as db:
                found = db.execute("SELECT thread FROM messages WHERE key = ?", (keys[0],)).fetchone()
                thread = int(found[0]) if found else None
                reply_to = _reply_key(db, original)
        return MessageView(key=keys[0], record=current, original=original, revisions=revs, attachments=_attachments(original),
                           reactions=_reactions(reactions[-1].record if reactions else original), reply_to=reply_to,
                           conversation=thread)  # fmt: skip

    def attachment(self, message_key: str, index: int) -> AttachmentBlob | None:
        """The ``index``-th attachment of the message at ``message_key``, its bytes readable from the store (an
        object of its own, or a part of the stored mail: :mod:`memex.read.mail_parts`); None when the message, the
        attachment or its bytes are not there."""
        doc = self.record(message_key) if message_key.startswith("messages/") and message_key.endswith(".json") else None
        metas = _attachments(doc) if doc else []
        if not 0 <= index < len(metas) or metas[index].missing:
            return None
        meta, store = metas[index], self.store
        if meta.key is not None:
            blob_key = meta.key
            if not store.exists(blob_key):
                return None

            def opener() -> IO[bytes]:
                return io.BytesIO(_present(store.get(blob_key), blob_key))

            return AttachmentBlob(meta=meta, opener=opener)
        mail_key = message_key[: -len(".json")] + ".eml"
        if not store.exists(mail_key):
            return None
        listed = [a for a in (doc or {}).get("attachments") or [] if isinstance(a, dict)]

        def from_mail() -> IO[bytes]:
            from memex.read.mail_parts import part_bytes

            body = part_bytes(_present(store.get(mail_key), mail_key), listed, index)
            return io.BytesIO(_present(body, mail_key))

        return AttachmentBlob(meta=meta, opener=from_mail)

    # conversations

    def conversations(self, *, source: str | None = None, person: str | None = None, limit: int = 50,
                      before: str | None = None) -> list[ConversationSummary]:  # fmt: skip
        """Every conversation (of ``source``, with ``person``), the one with the latest message first; ``before``: the
        ``cursor`` of a list's last one, for the next page."""
        with self.reading() as db:
            if person is None:
                return self._latest(db, source, limit, before)
            where: list[str] = ["m.deleted = 0"]
            params: list[Any] = []
            if source is not None:
                where.append("m.source = ?")
                params.append(source)
            ids = self._person_ids(person)
            where.append("m.thread IN (SELECT thread FROM messages WHERE id IN (SELECT value FROM json_each(?)))")
            params.append(json.dumps(ids))
            having = ""
            if before is not None:
                having = " HAVING max(m.id) < ?"
                params.append(_int(before))
            rows = db.execute(f"SELECT m.thread, count(*) AS n, max(m.id) AS last FROM messages m WHERE {' AND '.join(where)} "
                              f"GROUP BY m.thread{having} ORDER BY last DESC LIMIT ?", [*params, limit]).fetchall()  # fmt: skip
            return [self._summary(db, thread, n, last) for thread, n, last in rows]

    def _latest(self, db: sqlite3.Connection, source: str | None, limit: int, before: str | None) -> list[ConversationSummary]:
        """The conversations (of ``source``) whose last message is the newest, below the cursor ``before``.

        Walks the messages newest first (the row id's index, or ``messages_source_last`` for one source) and keeps a
        row when no later one of its conversation follows (``messages_thread`` seeks it), stopping at
        ``limit``: a page reads about as many rows as it shows, not every message (docs/benchmarks.md, issue 42)."""
        later = "SELECT 1 FROM messages x WHERE x.thread = m.thread AND x.deleted = 0 AND x.id > m.id"
        where = ["m.deleted = 0", f"NOT EXISTS ({later})"]  # a conversation is one source's (links are per source)
        params: list[Any] = []
        if source is not None:
            where.append("m.source = ?")
            params.append(source)
        if before is not None:
            where.append("m.id < ?")
            params.append(_int(before))
        rows = db.execute(f"SELECT m.thread, m.id FROM messages m WHERE {' AND '.join(where)} ORDER BY m.id DESC LIMIT ?",
                          [*params, limit]).fetchall()  # fmt: skip
        return [self._summary(db, thread, None, last) for thread, last in rows]

    def _summary(self, db: sqlite3.Connection, thread: int, n: int | None = None, last: int | None = None) -> ConversationSummary:
        """A conversation's summary: named after its first row, its people, its last message."""
        first = first_row(db, thread)
        if n is None or last is None:
            n, last = db.execute("SELECT count(*), max(id) FROM messages WHERE thread = ? AND deleted = 0", (thread,)).fetchone()
        # each sender once, in order of their first message (among the first 500), grouped by SQLite: a long
        # conversation's rows never cross into Python one by one
        people = list(dict.fromkeys(_who(r["sender_name"], r["sender_id"], r["is_me"]) for r in db.execute(
            "SELECT sender_name, sender_id, is_me FROM (SELECT sender_name, sender_id, is_me, id FROM messages "
            "WHERE thread = ? AND deleted = 0 ORDER BY id LIMIT 500) GROUP BY sender_name, sender_id, is_me ORDER BY min(id)",
            (thread,))))  # fmt: skip
        last_row = db.execute(f"SELECT {COLUMNS} FROM messages m WHERE id = ?", (last,)).fetchone() if last is not None else None
        return ConversationSummary(key=int(thread), source=first["source"] if first else "", title=_title(first) if first else "",
                                   people=people, last=self._summaries(db, [last_row], records=False)[0] if last_row else None,
                                   count=int(n or 0), cursor=str(last))  # fmt: skip

    def conversation(self, key: str | int, *, around: str | None = None, before: str | None = None, after: str | None = None,
                     limit: int = 50) -> ConversationPage | None:  # fmt: skip
        """A page of the conversation ``key`` (:attr:`ConversationSummary.key`, or a message's key: its
        conversation), oldest to newest: the latest ``limit`` messages, or those ``before``/``after`` a page's cursor,
        or those ``around`` a message's key. Deleted messages are in it (shown as unsent). None when unknown."""
        with self.reading() as db:
            thread = self._thread(db, key)
            if thread is None:
                return None
            cols = f"SELECT {COLUMNS} FROM messages m WHERE m.thread = ?"
            if around is not None:
                found = db.execute("SELECT id FROM messages WHERE key = ? AND thread = ?", (around, thread)).fetchone()
                if found is None:
                    return None
                half = limit // 2
                older = db.execute(f"{cols} AND m.id < ? ORDER BY m.id DESC LIMIT ?", (thread, found[0], half)).fetchall()[::-1]
                newer = db.execute(f"{cols} AND m.id >= ? ORDER BY m.id LIMIT ?", (thread, found[0], limit - len(older))).fetchall()
                rows = older + newer
            elif after is not None:
                rows = db.execute(f"{cols} AND m.id > ? ORDER BY m.id LIMIT ?", (thread, _int(after), limit)).fetchall()
            else:
                below = _int(before) if before is not None else 2**63 - 1
                rows = db.execute(f"{cols} AND m.id < ? ORDER BY m.id DESC LIMIT ?", (thread, below, limit)).fetchall()[::-1]
            prev = next_ = None
            if rows:
                lo, hi = rows[0]["id"], rows[-1]["id"]
                if db.execute("SELECT 1 FROM messages WHERE thread = ? AND id < ? LIMIT 1", (thread, lo)).fetchone():
                    prev = str(lo)
                if db.execute("SELECT 1 FROM messages WHERE thread = ? AND id > ? LIMIT 1", (thread, hi)).fetchone():
                    next_ = str(hi)
            return ConversationPage(summary=self._summary(db, thread), messages=self._summaries(db, rows), prev_cursor=prev,
                                    next_cursor=next_)  # fmt: skip

    def _thread(self, db: sqlite3.Connection, key: str | int) -> int | None:
        """The thread ``key`` names: a thread key (a number), or a message's key."""
        if isinstance(key, int) or (isinstance(key, str) and key.lstrip("-").isdigit()):
            found = db.execute("SELECT thread FROM messages WHERE thread = ? LIMIT 1", (int(key),)).fetchone()
        else:
            from memex.search.rows import revision_parent

            found = db.execute("SELECT thread FROM messages WHERE key = ?", (revision_parent(key) or key,)).fetchone()
        return int(found[0]) if found else None

    def thread_keys(self, key: str) -> list[str]:
        """The keys of every message in the conversation of the message at ``key``, oldest first (messages with no
        time last); deleted ones too. Empty when ``key`` is not indexed."""
        from memex.read.conversations import thread_keys

        with self.reading() as db:
            return thread_keys(db, key)

    def group_counts(self, query: str, by: str, limit: int) -> list[dict[str, Any]]:
        """``memex search --group-by``: :func:`memex.read.conversations.group_counts` (person terms as words)."""
        from memex.read.conversations import group_counts

        with self.reading() as db:
            return group_counts(db, self.compile(query, people=False), by, limit)

    def threads(self, query: str, limit: int) -> list[dict[str, Any]]:
        """``memex search --output=threads``: :func:`memex.read.conversations.threads` (person terms as words)."""
        from memex.read.conversations import threads

        with self.reading() as db:
            return threads(db, self.compile(query, people=False), limit)

    def _summaries(self, db: sqlite3.Connection, rows: list[Any], *, records: bool = True) -> list[MessageSummary]:
        """Rows as message summaries; with ``records``, each completed from its stored record (attachments, the
        message it replies to, reactions)."""
        out = []
        for r in rows:
            doc = self.record(r["key"]) if records else None
            reactions: list[str] = []
            if records and doc is not None:
                rev = db.execute("SELECT key FROM revisions WHERE message_key = ? AND kind = 'reactions' ORDER BY at DESC, key DESC LIMIT 1",
                                 (r["key"],)).fetchone()  # fmt: skip
                latest = self.record(rev[0]) if rev else None
                reactions = _reactions(latest if latest is not None else doc)
            kind = "event" if doc is not None and doc.get("type") == "event" else "email" if r["subject"] else "message"
            out.append(MessageSummary(
                key=r["key"], source=r["source"], sender=_who(r["sender_name"], r["sender_id"], r["is_me"]),
                from_me=bool(r["is_me"]), sent=_utc(r["sent_at"]), text=r["text"], subject=r["subject"] or None, kind=kind,
                edited=bool(r["edited"]), unsent=bool(r["deleted"]), reactions=reactions,
                reply_to=_reply_key(db, doc) if doc is not None else None, attachments=_attachments(doc) if doc else [],
                conversation=int(r["thread"]), sender_id=r["sender_id"] or None))  # fmt: skip
        return out

    def timeline(self, start: date, end: date, *, limit: int = 500, source: str | None = None) -> list[MessageSummary]:
        """Every source's messages from the day ``start`` to the day ``end`` (both UTC, both in), in time order."""
        from memex.search.rows import id_at

        lo = id_at(datetime(start.year, start.month, start.day, tzinfo=UTC).timestamp())
        hi = id_at(datetime(end.year, end.month, end.day, tzinfo=UTC).timestamp() + 86400)
        with self.reading() as db:
            extra, params = ("", [lo, hi]) if source is None else (" AND m.source = ?", [lo, hi, source])
            rows = db.execute(f"SELECT {COLUMNS} FROM messages m WHERE m.id >= ? AND m.id < ?{extra} ORDER BY m.id LIMIT ?",
                              [*params, limit]).fetchall()  # fmt: skip
            return self._summaries(db, rows)

    # people

    def _person_ids(self, ref: str) -> list[int]:
        """The row ids of the messages the person ``ref`` sent or received (empty when ``ref`` names nobody)."""
        from memex.search.persons import Lookup

        lookup = Lookup(self.cfg, index_path(self.cfg.state_dir), read_only=True)
        try:
            return lookup("with", ref) or []
        finally:
            lookup.close()

    def people(self, *, query: str | None = None, limit: int = 50, offset: int = 0) -> list[PersonSummary]:
        """The people ``query`` names (an ID, a name or words of it, a handle), or everyone by name."""
        from memex.people import handles_of, open_people, summary

        people = open_people(self.cfg, index=index_path(self.cfg.state_dir), read_only=True)
        try:
            if query:
                found, _ = handles_of(people, query)
            else:
                found = sorted(people.book.people.values(), key=lambda p: ((p.name or p.id).casefold(), p.id))
            return [_person(summary(people, p)) for p in found[offset : offset + limit]]
        finally:
            people.close()

    def person(self, ref: str) -> PersonView | None:
        """The person ``ref`` names (their ID, or a name or handle naming one person): handles, messages per source,
        and their conversations, most recent first; None when it names nobody or several."""
        found = self.people(query=ref, limit=2)
        exact = [p for p in found if p.id == ref]
        if len(exact) != 1 and len(found) != 1:
            return None
        who = (exact or found)[0]
        ids = self._person_ids(who.id)
        conversations: list[int] = []
        if ids and index_path(self.cfg.state_dir).is_file():
            with self.reading() as db:
                conversations = [r[0] for r in db.execute(
                    "SELECT thread FROM messages WHERE id IN (SELECT value FROM json_each(?)) GROUP BY thread ORDER BY max(id) DESC",
                    (json.dumps(ids),))]  # fmt: skip
        return PersonView(summary=who, handles=who.handles, sources=who.messages, conversations=conversations)

    # what the index holds

    def index_counts(self) -> dict[str, dict[str, Any]]:
        """Per source: rows indexed, of them deleted and edited, when records were last added and rebuilt."""
        out: dict[str, dict[str, Any]] = {}
        with self.reading() as db:
            for source, n, deleted, edited in db.execute(
                "SELECT source, COUNT(*), SUM(deleted), SUM(edited) FROM messages GROUP BY source"
            ):
                out[source] = {"indexed": n, "deleted": deleted or 0, "edited": edited or 0, "added_at": None, "rebuilt_at": None}
            for source, added_at, rebuilt_at in db.execute("SELECT source, added_at, rebuilt_at FROM sources"):
                entry = out.setdefault(source, {"indexed": 0, "deleted": 0, "edited": 0})
                entry.update(added_at=added_at, rebuilt_at=rebuilt_at)
        return out

    def store_count(self, source: str) -> int:
        """How many message records the store holds for ``source`` (one listing of ``messages/<source>/``)."""
        from memex.records import encode_id
        from memex.search.rows import is_record_key

        return sum(1 for key in self.store.list_keys(f"messages/{encode_id(source)}/") if is_record_key(key))

    # the sources

    def sources(self) -> list[SourceHealth]:
        """Every configured source's health, as ``memex status`` shows it."""
        from memex.observe.status import collect

        return [SourceHealth(name=r["source"], type=r["type"], state=r["state"], state_reason=r["state_reason"], cursor=r["cursor"],
                             last_poll=r["last_poll_at"], last_ok=r["last_ok_at"], last_error=r["last_error"], enabled=r["enabled"])
                for r in collect(self.cfg)]  # fmt: skip


def open_archive(cfg: Config, store: ObjectStore | None = None) -> Archive:
    """The archive of ``cfg``, read-only (nothing is opened until a call asks)."""
    return Archive(cfg, store)


def _unreadable(exc: BaseException, path: Any) -> MemexError:
    """What stopped the index from being read, said as the CLI says it (a full disk, a permission, ...)."""
    from memex.fs_errors import explain

    fault = explain(exc, None if isinstance(exc, OSError) else path) if isinstance(exc, OSError | sqlite3.Error) else None
    if fault is not None:
        return fault
    return IndexUnreadable(f"cannot open the search index ({exc}); `memex index rebuild` makes a new one", path=path, detail=str(exc))


def _present(body: bytes | None, key: str) -> bytes:
    """``body``, read from the store at ``key``; a ReadError when it has gone since it was listed."""
    if body is None:
        raise ReadError("the attachment's bytes are no longer in the store; `memex verify` checks it", path=key)
    return body


def _with_ids(db: sqlite3.Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each one's row id and thread (a search's SELECT names neither)."""
    for r in rows:
        found = db.execute("SELECT id, thread FROM messages WHERE key = ?", (r["key"],)).fetchone()
        r["id"], r["thread"] = (found[0], found[1]) if found else (None, None)
    return rows


def _title(first: Any) -> str:
    return str(first["conv_name"] or first["subject"] or first["conv_id"] or "")


def _who(name: str | None, sender_id: str | None, is_me: Any) -> str:
    return "me" if is_me else str(name or sender_id or "?")


def _int(cursor: str | int) -> int:
    try:
        return int(cursor)
    except (TypeError, ValueError):
        raise ReadError(
            f"cursor: {str(cursor)[:40]!r} is not one this archive gave; leave it out for the first page", path="cursor"
        ) from None


def _utc(value: str | None) -> datetime | None:
    """A record's time as an aware UTC datetime (a time without a zone is taken as UTC), or None."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _hit(r: dict[str, Any]) -> Hit:
    from memex.read.snippets import highlighted

    raw = r["snippet"] if r["snippet"] is not None else " ".join((r["text"] or "")[:200].split())
    return Hit(key=r["key"], source=r["source"], conversation=int(r["thread"] or 0), conversation_name=r["conv_name"] or r["conv_id"] or None,
               sender=_who(r["sender_name"], r["sender_id"], r["is_me"]), from_me=bool(r["is_me"]), sent=_utc(r["sent_at"]),
               subject=r["subject"] or None, snippet=highlighted(raw or r["subject"] or ""), native_id=r["native_id"],
               edited=bool(r["edited"]), deleted=bool(r["deleted"]), attachments=int(r["n_attachments"]))  # fmt: skip


def _attachments(doc: dict[str, Any] | None) -> list[AttachmentMeta]:
    """A record's attachments listed, in its order."""
    from memex.store.attachments import content_key

    out = []
    for i, att in enumerate(doc.get("attachments") or [] if doc else []):
        if not isinstance(att, dict):
            continue
        sha = att.get("sha256") if isinstance(att.get("sha256"), str) and not att.get("missing") else None
        out.append(AttachmentMeta(index=i, name=att.get("filename") or att.get("id"), mime=att.get("mime_type"),
                                  size=att.get("size") if isinstance(att.get("size"), int) else None, sha256=sha,
                                  key=content_key(sha) if sha else None, missing=bool(att.get("missing")),
                                  in_mail=not sha and not att.get("missing")))  # fmt: skip
    return out


def _reactions(doc: dict[str, Any]) -> list[str]:
    """The reactions a record lists (``extra.reactions``: each ``{"reaction": ...}`` or text), as text."""
    extra = doc.get("extra") if isinstance(doc.get("extra"), dict) else {}
    found = extra.get("reactions") if isinstance(extra, dict) else None
    out = []
    for r in found if isinstance(found, list) else []:
        value = r.get("reaction") or r.get("emoji") or r.get("reactionType") if isinstance(r, dict) else r
        if isinstance(value, str) and value:
            out.append(value)
    return out


def _reply_key(db: sqlite3.Connection, doc: dict[str, Any] | None) -> str | None:
    """The key of the message ``doc`` replies to, when the index has it."""
    if doc is None or not isinstance(doc.get("reply_to"), str) or not doc["reply_to"]:
        return None
    found = db.execute(
        "SELECT key FROM messages WHERE native_id = ? AND source = ? LIMIT 1", (doc["reply_to"], doc.get("source"))
    ).fetchone()
    return str(found[0]) if found else None


def _person(entry: dict[str, Any]) -> PersonSummary:
    return PersonSummary(id=entry["id"], name=entry["name"], handles=list(entry["handles"]), messages=dict(entry["messages"]),
                         origins=list(entry["from"]))  # fmt: skip


def day_span(day: date, days: int = 1) -> tuple[date, date]:
    """The first and last day of ``days`` days from ``day`` (a timeline's week: ``day_span(monday, 7)``)."""
    return day, day + timedelta(days=days - 1)
