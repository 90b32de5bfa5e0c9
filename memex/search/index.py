"""The search index file: SQLite with an FTS5 table, in ``<state_dir>/search/index.sqlite`` (folder 0700, file 0600).

Its tables, the view FTS5 reads through and the format number: :mod:`memex.search.schema`.
Adding a record is idempotent (by key), so a journal replayed after a crash, or a record seen twice, is harmless.
A rebuild fills a fresh file (``fresh=True``, :meth:`SearchIndex.rebuild`) that :func:`memex.search.build.rebuild`
renames over the live one.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memex.errors import StateError
from memex.fs_errors import explain, in_the_way
from memex.search import index_path
from memex.search.locks import RebuildRunning, reader_lock, writer_lock
from memex.search.rows import (
    RevisionRow,
    Row,
    free_ids,
    is_record_key,
    latest_text,
    load_record,
    message_row,
    revision_parent,
    revision_row,
    time_id,
)
from memex.search.schema import COLUMNS, FTS_COLUMNS, SCHEMA_VERSION, SECONDARY, fts_tables, insert_fts, schema
from memex.state.files import ensure_private_dir, fsync_file

if TYPE_CHECKING:
    from memex.search.bulk import Staged

BUSY_SECONDS = 10.0  # a connection waits this long for another one's transaction (a poll's, a few ms)
REBUILD_HASH = 16 << 20  # a rebuild: bytes of terms FTS5 holds in memory before it writes a segment (merged at the end)
POLL_HASH = 1 << 20  # FTS5's default, put back for the polls' small transactions
REBUILD_SEGMENTS = 2000  # a rebuild leaves FTS5's segments unmerged (up to this many) until its end
SIDE_FILES = ("-journal", "-wal", "-shm")  # SQLite's files beside a database, named after it

_UPDATE = f"UPDATE messages SET {', '.join(c + ' = ?' for c in COLUMNS)} WHERE id = ?"
_INSERT_ID = f"INSERT INTO messages(id, {', '.join(COLUMNS)}, thread) VALUES ({', '.join('?' * (len(COLUMNS) + 2))})"
_SELECT_ROW = f"SELECT {', '.join(COLUMNS)} FROM messages WHERE id = ?"
_INSERT_LINK = "INSERT OR IGNORE INTO links(ref, id) VALUES (?, ?)"
_INSERT_FTS = " WHERE f.id = ?"  # after insert_fts(table): a row's words, read from the row just written
_INSERT_WORDS = f"INSERT INTO {{}}(rowid, {FTS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"  # new rows' words, given (_fts)


class SearchIndex:
    """One open index file (one connection; open one per thread)."""

    def __init__(self, path: Path, *, create: bool = True, writer: bool = False, fresh: bool = False,
                 stemming: str = "english") -> None:  # fmt: skip
        """Open (or with ``create`` make) the index at ``path``, holding ``open.lock`` shared while it is open, and with
        ``writer`` ``rebuild.lock`` too (:class:`RebuildRunning` while a rebuild runs): :mod:`memex.search.locks`.

        ``fresh``: a new file for a rebuild to fill (anything at ``path`` removed first), with no rollback journal and
        no fsync (a rebuild interrupted starts again from nothing) and no locks (the rebuild holds them).
        ``stemming``: whether a new file gets the stems' table (``search_stemming``); an existing file keeps its own.
        """
        self.path = path
        self._any_revisions = True
        self._wrote = False
        self._locks: list[int] = []
        self.tables: tuple[str, ...] = ()  # the FTS5 tables (memex.search.schema.fts_tables)
        if not create and not path.exists():
            fault = in_the_way(path)  # a state folder that is a file is not "no index yet"
            if fault is not None:
                raise fault
            raise StateError("no search index yet; build it with `memex index rebuild` (polls then keep it in step)", path=path)
        try:
            ensure_private_dir(path.parent)
            if fresh:
                for leftover in (path, *(Path(f"{path}{suffix}") for suffix in SIDE_FILES)):
                    leftover.unlink(missing_ok=True)
            else:
                self._locks.append(reader_lock(path.parent))
                if writer:
                    self._locks.append(writer_lock(path.parent))
            if not path.exists():
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # 0600 before SQLite writes a byte
            self.db = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
            # WAL with NORMAL: a commit is atomic and a power loss never corrupts the file; it is durable after close().
            self.db.execute(f"PRAGMA synchronous = {'OFF' if fresh else 'NORMAL'}")
            if fresh:
                self.db.execute("PRAGMA journal_mode = OFF")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise StateError(f"made by another version of memex (format {version}, this one reads {SCHEMA_VERSION}); "
                                 "run `memex index rebuild` to make it again from the store", path=path)  # fmt: skip
            if version == 0:  # a new file
                if not fresh:
                    self.db.execute("PRAGMA journal_mode = WAL")  # kept in the file
                self.db.executescript(schema(stemming))
                for stmt in SECONDARY.values():
                    self.db.execute(stmt)
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif writer and not fresh:
                self._add_missing_indexes()
            self.tables = fts_tables(self.db)
        except (RebuildRunning, StateError):
            self._unlock()
            raise
        except (OSError, sqlite3.Error) as exc:
            self._unlock()
            fault = explain(exc, None if isinstance(exc, OSError) else path)  # a full disk, a read-only mount, ...
            if fault is not None:
                raise fault from None
            raise StateError(f"cannot open the search index ({exc}); `memex index rebuild` makes a new one", path=path) from None
        except BaseException:
            self._unlock()
            raise

    @classmethod
    def open(cls, state_dir: Path, *, create: bool = True, writer: bool = False, stemming: str = "english") -> SearchIndex:
        """The index of ``state_dir`` (created when absent unless ``create`` is False, with ``stemming``)."""
        return cls(index_path(state_dir), create=create, writer=writer, stemming=stemming)

    def close(self) -> None:
        """Close the connection; what it added is durable when this returns.

        A commit in WAL mode with ``synchronous = NORMAL`` is not fsynced; the last connection to close checkpoints the
        WAL into the file, fsyncing both, and removes it. When another connection (a search) kept the file open, the
        WAL left behind is fsynced here, so a poll empties its journal only after its rows are on disk.
        """
        try:
            self.db.close()
            if self._wrote:
                fsync_file(Path(f"{self.path}-wal"), missing_ok=True)  # a WAL another connection kept
        finally:
            self._unlock()

    def _unlock(self) -> None:
        for fd in self._locks:
            os.close(fd)  # closing the descriptor lets go of its flock
        self._locks = []

    def _add_missing_indexes(self) -> None:
        """Make the :data:`SECONDARY` indexes a file of this format lacks (one made before an index was added to the
        list, e.g. ``messages_source_last``): once, by the first writer to open it; the format stays the same."""
        have = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        missing = [stmt for name, stmt in SECONDARY.items() if name not in have]
        if missing:
            self.db.execute("BEGIN IMMEDIATE")
            for stmt in missing:
                self.db.execute(stmt)
            self.db.execute("COMMIT")

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # adding

    def add(self, records: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Add or refresh records (originals and revisions, in any order) in one transaction; how many were records."""
        self._any_revisions = self.db.execute("SELECT 1 FROM revisions LIMIT 1").fetchone() is not None
        self.db.execute("BEGIN IMMEDIATE")
        try:
            n = self._add(records, fresh=False)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._wrote = True
        return n

    def rebuild(self, batches: Iterable[Staged], sources: list[str] | None,
                tick: Callable[[int], None] | None = None, *, keep: Path | None = None) -> int:  # fmt: skip
        """Fill this fresh file with ``batches`` of stored records (:func:`memex.search.bulk.staged`), of ``sources``
        (all when None); with ``keep`` (the live index), the rows of every other source are copied from it first.
        Then the file is switched to WAL.

        Original records become rows in SQLite (:mod:`memex.search.bulk`), a batch a transaction, in row id order,
        with FTS5 holding up to :data:`REBUILD_HASH` bytes of terms before it writes a segment; the secondary indexes
        are made at the end.
        """
        self.db.execute("PRAGMA cache_size = -32768")  # 32 MiB of pages (the rows are appended; the id index is what is random)
        for t in self.tables:
            self.db.execute(f"INSERT INTO {t}({t}, rank) VALUES('hashsize', ?)", (REBUILD_HASH,))
            self.db.execute(f"INSERT INTO {t}({t}, rank) VALUES('automerge', 0)")  # segments merged once, at the end
            self.db.execute(f"INSERT INTO {t}({t}, rank) VALUES('crisismerge', ?)", (REBUILD_SEGMENTS,))
        for name in SECONDARY:
            self.db.execute(f"DROP INDEX IF EXISTS {name}")
        if keep is not None and sources and keep.exists():
            from memex.search import bulk

            bulk.copy_others(self.db, keep, sources, self.tables)
        self._any_revisions = self.db.execute("SELECT 1 FROM revisions LIMIT 1").fetchone() is not None
        n = 0
        for batch in batches:
            n += self._add_staged(batch)
            if tick is not None:
                tick(n)
        from memex.search.join import join_all

        join_all(self.db)
        self.db.execute("PRAGMA cache_size = -8192")  # the indexes' sorts keep 8 MiB in memory, whatever the size
        self.db.execute("BEGIN")
        for stmt in SECONDARY.values():
            self.db.execute(stmt)
        self.rebuilt(sources or [r[0] for r in self.db.execute("SELECT DISTINCT source FROM messages")])
        self.db.execute("COMMIT")
        for t in self.tables:
            self.db.execute(f"INSERT INTO {t}({t}) VALUES('optimize')")  # one segment: merged in one pass, searched fastest
            self.db.execute(f"INSERT INTO {t}({t}, rank) VALUES('hashsize', ?)", (POLL_HASH,))
            self.db.execute(f"INSERT INTO {t}({t}, rank) VALUES('automerge', 4)")  # FTS5's defaults, for the polls
            self.db.execute(f"INSERT INTO {t}({t}, rank) VALUES('crisismerge', 16)")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("PRAGMA journal_mode = WAL")  # kept in the file, for its life as the live index
        return n

    def _add_staged(self, batch: Staged) -> int:
        """Add a rebuild's batch (keys new to the index): its staged originals in SQLite (:func:`memex.search.bulk.add_staged`),
        then what SQLite's JSON parser refused and the batch's other records through :meth:`_add`; how many were records."""
        from memex.search import bulk  # a poll never needs it

        n = 0
        parsed: list[tuple[str, dict[str, Any]]] = []
        if batch.path is not None:
            n, folders, refused = bulk.add_staged(
                self.db, batch.path, taken=self._taken, highest=self._highest,
                refresh=self._refresh if self._any_revisions else None, tables=self.tables)  # fmt: skip
            self._touch({_source_of(folder) for folder in folders})
            parsed = [(key, doc) for key, text in refused if (doc := load_record(text.encode())) is not None]
        parsed += [(key, doc) for key, body in batch.others if (doc := load_record(body)) is not None]
        if not parsed:
            return n
        self.db.execute("BEGIN")
        try:
            n += self._add(parsed, fresh=True)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return n

    def _add(self, records: Iterable[tuple[str, dict[str, Any]]], *, fresh: bool) -> int:
        n = 0
        touched: set[str] = set()
        pending: dict[str, Row] = {}  # messages, inserted together (a key handed twice: its last record)
        for key, doc in records:
            if not is_record_key(key) or not isinstance(doc, dict):
                continue
            n += 1
            parent = revision_parent(key)
            touched.add(_source_of(key))
            if parent is None:
                pending[key] = message_row(key, doc)
                continue
            if pending:
                self._put_many(list(pending.values()), fresh=fresh)
                pending = {}
            rev = revision_row(key, doc, parent)
            self.db.execute("INSERT OR REPLACE INTO revisions VALUES (?, ?, ?, ?, ?, ?)",
                            (rev.key, rev.message_key, rev.kind, rev.at, rev.text, int(rev.deleted)))  # fmt: skip
            self._any_revisions = True
            self._refresh(parent)
        if pending:
            self._put_many(list(pending.values()), fresh=fresh)
        self._touch(touched)
        return n

    def _touch(self, sources: set[str]) -> None:
        """Record that records of ``sources`` were added now."""
        from memex.state.cursors import utc_now  # here: a search never needs it

        now = utc_now()
        for source in sources:
            self.db.execute("INSERT INTO sources(source, added_at) VALUES (?, ?) "
                            "ON CONFLICT(source) DO UPDATE SET added_at = excluded.added_at", (source, now))  # fmt: skip

    def _put_many(self, rows: list[Row], *, fresh: bool) -> None:
        """Add messages: those already indexed are updated in place (unless ``fresh``: a rebuild's keys are all new),
        the new ones inserted many at a time, in row id order (FTS5 writes a new segment whenever a rowid goes down)."""
        if not fresh:
            found = dict(self._in("SELECT key, id FROM messages WHERE key IN ({})", [row.key for row in rows]))
            for row in rows:
                if row.key in found:
                    self._update(row, found[row.key])
            rows = [row for row in rows if row.key not in found]
        ids = free_ids([time_id(row.ts, row.key) for row in rows], self._taken, self._highest)
        pairs = sorted(zip(ids, rows, strict=True), key=lambda pair: pair[0])
        self.db.executemany(_INSERT_ID, [(i, *_values(row), i) for i, row in pairs])  # each its own thread, then joined
        if fresh:  # a rebuild joins every thread once, at its end (:func:`memex.search.join.join_all`)
            self.db.executemany(_INSERT_LINK, [(ref, i) for i, row in pairs for ref in row.links])
        words = [(i, *_fts(row)) for i, row in pairs]
        for t in self.tables:
            self.db.executemany(_INSERT_WORDS.format(t), words)  # given: read back, a fifth slower
        if self._any_revisions:  # a message whose revisions came first (a backfill's order): apply them now
            for (key,) in self._in("SELECT DISTINCT message_key FROM revisions WHERE message_key IN ({})", [r.key for r in rows]):
                self._refresh(key)
        if not fresh:  # each row's links, then it joins the threads they reach: a row later in the batch is not seen yet
            for i, row in pairs:
                self.db.executemany(_INSERT_LINK, [(ref, i) for ref in row.links])
                self._join_thread(i, row.links)

    def _join_thread(self, rowid: int, links: tuple[str, ...]) -> None:
        """Join row ``rowid`` to the threads its ``links`` reach: every row of them takes the lowest thread (the lowest
        row id of them all, so the labels do not depend on the order records came in). Rows that share a link are one
        thread already (each join relabels whole threads; a row's links are written just before it joins), so one row
        per link says which: a chat's 10,000 rows are not read for its next message."""
        if not links:
            return
        found = {self.db.execute("SELECT thread FROM messages WHERE id = ?", (rowid,)).fetchone()[0]}
        for ref in links:
            other = self.db.execute("SELECT m.thread FROM links l JOIN messages m ON m.id = l.id WHERE l.ref = ? AND l.id != ? LIMIT 1",
                                    (ref, rowid)).fetchone()  # fmt: skip
            if other is not None:
                found.add(other[0])
        lowest = min(found)
        for other in found - {lowest}:
            self.db.execute("UPDATE messages SET thread = ? WHERE thread = ?", (lowest, other))

    def _taken(self, ids: list[int]) -> set[int]:
        """Which of ``ids`` are indexed messages' row ids."""
        return {r[0] for r in self._in("SELECT id FROM messages WHERE id IN ({})", ids)}

    def _highest(self, lo: int, hi: int) -> int | None:
        """The highest indexed row id in ``lo <= id < hi``, or None."""
        found: int | None = self.db.execute("SELECT max(id) FROM messages WHERE id >= ? AND id < ?", (lo, hi)).fetchone()[0]
        return found

    def _in(self, sql: str, values: list[Any]) -> list[tuple[Any, ...]]:
        """The rows of ``sql`` (an ``IN ({})`` query) over ``values``, 500 at a time."""
        out: list[tuple[Any, ...]] = []
        for i in range(0, len(values), 500):
            chunk = values[i : i + 500]
            out += self.db.execute(sql.format(", ".join("?" * len(chunk))), chunk).fetchall()
        return out

    def _update(self, row: Row, rowid: int) -> None:
        """Refresh an indexed message from its record (stored again, or read back by a catch-up). Its words leave
        FTS5 before the row changes: FTS5 reads the words to remove from the row (``fts_source``). A row that already
        holds exactly this record is left as it is (:meth:`_unchanged`)."""
        if self._unchanged(row, rowid):
            return
        self._unindex(rowid)
        self.db.execute(_UPDATE, (*_values(row), rowid))
        self._reindex(rowid)
        self.db.execute("DELETE FROM links WHERE id = ?", (rowid,))
        self.db.executemany(_INSERT_LINK, [(ref, rowid) for ref in row.links])
        self._join_thread(rowid, row.links)  # a link lost is not split off (a rebuild does): links only grow in practice
        if self._any_revisions and self.db.execute("SELECT 1 FROM revisions WHERE message_key = ? LIMIT 1", (row.key,)).fetchone():
            self._refresh(row.key)

    def _unchanged(self, row: Row, rowid: int) -> bool:
        """Whether indexed row ``rowid`` already holds exactly ``row``, links included: a duplicate handed again (a
        backfill over what polls stored, every duplicate of which is handed in case a crash kept it out of the index)
        costs a read, not its words taken out of FTS5 and put back (a stopped backfill waited seconds for that). A row
        its revisions changed (``original`` kept, edited, deleted) never equals its record, so it is refreshed."""
        found = self.db.execute(_SELECT_ROW, (rowid,)).fetchone()
        if found is None or tuple(found) != _values(row):
            return False
        return {ref for (ref,) in self.db.execute("SELECT ref FROM links WHERE id = ?", (rowid,))} == set(row.links)

    def _refresh(self, message_key: str) -> None:
        """Apply a message's revisions to its row: the latest edit's text is the text searched; a delete marks it."""
        found = self.db.execute("SELECT id, coalesce(original, text), original_deleted FROM messages WHERE key = ?",
                                (message_key,)).fetchone()  # fmt: skip
        if found is None:
            return  # the revision came first: applied when its message is added
        rowid, original, original_deleted = found
        revs = [RevisionRow(*r) for r in self.db.execute(
            "SELECT key, message_key, kind, at, text, deleted FROM revisions WHERE message_key = ?", (message_key,))]  # fmt: skip
        latest = latest_text(revs)
        text = original if latest is None else latest
        deleted = bool(original_deleted) or any(r.deleted for r in revs)
        self._unindex(rowid)  # first: FTS5 reads the words to remove from the row
        self.db.execute("UPDATE messages SET original = ?, text = ?, edited = ?, deleted = ? WHERE id = ?",
                        (None if latest is None else original, text, int(latest is not None), int(deleted), rowid))  # fmt: skip
        self._reindex(rowid)

    def _unindex(self, rowid: int) -> None:
        """Take a row's words out of every FTS5 table (read from the row: before it changes)."""
        for t in self.tables:
            self.db.execute(f"DELETE FROM {t} WHERE rowid = ?", (rowid,))

    def _reindex(self, rowid: int) -> None:
        """Put a row's words (as it now reads) into every FTS5 table."""
        for t in self.tables:
            self.db.execute(insert_fts(t) + _INSERT_FTS, (rowid,))

    def rebuilt(self, sources: Iterable[str]) -> None:
        """Record that ``sources`` were rebuilt now."""
        from memex.state.cursors import utc_now

        now = utc_now()
        for source in sources:
            self.db.execute("INSERT INTO sources(source, rebuilt_at) VALUES (?, ?) "
                            "ON CONFLICT(source) DO UPDATE SET rebuilt_at = excluded.rebuilt_at", (source, now))  # fmt: skip

    def select(self, sql: str, params: list[Any]) -> Iterator[sqlite3.Row]:
        """Run a query built by :mod:`memex.search.query` (rows by column name): the tests' look at a file being
        written; every front end reads through :mod:`memex.read`."""
        self.db.row_factory = sqlite3.Row
        try:
            yield from self.db.execute(sql, params)
        finally:
            self.db.row_factory = None


def _values(row: Row) -> tuple[Any, ...]:
    """The ``messages`` columns of ``row`` (:data:`COLUMNS`); ``original`` NULL: the text is the original until an edit."""
    return (
        row.key,
        row.source,
        row.native_id,
        row.sent_at,
        row.ts,
        row.conv_id,
        row.conv_name,
        row.sender_id,
        row.sender_name,
        int(row.is_me),
        row.recipients,
        row.subject,
        row.attachments,
        row.n_attachments,
        None,
        int(row.deleted),
        row.text,
        0,
        int(row.deleted),
        row.search_text,
    )  # fmt: skip  (original: NULL, the text is the original until an edit)


def _fts(row: Row) -> tuple[str, ...]:
    """A new row's words, as the view ``fts_source`` reads them from the row (FTS5's integrity check, run by the tests,
    fails if the two ever differ)."""
    sender = f"{row.sender_name}\n{row.sender_id}"
    body = f"{row.text}\n{row.search_text}" if row.search_text else row.text
    return (body, row.subject, sender, row.recipients, row.conv_name, row.attachments, row.conv_id)


@functools.lru_cache(maxsize=64)
def _segment_source(segment: str) -> str:
    from memex.records import decode_id  # here: a search never needs it

    return decode_id(segment) or segment


def _source_of(key: str) -> str:
    return _segment_source(key.split("/", 2)[1])
