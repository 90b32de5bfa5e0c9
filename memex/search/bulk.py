"""A rebuild's rows made by SQLite from the records' raw JSON, on two cores: no ``json.loads``, no row built in Python.

A rebuild reads every record of the store; parsing each with ``json.loads`` and turning it into a
:class:`memex.search.rows.Row` cost more CPU than SQLite's inserts. Here the thread that reads the store writes each
batch of original records into a staging file of its own (:func:`staged`: one SQLite file per batch beside the new
index, no journal, never fsynced, removed once used) as the columns of their rows, read from the JSON text there
(each record's kind, time and row id are worked out by the same Python functions as an added record's:
:func:`memex.search.rows.timestamp`, :func:`~memex.search.rows.time_id`), and their links; only a record SQLite's
JSON parser refuses keeps its text. The index's connection then attaches that file and copies the rows with one
``INSERT ... SELECT`` per table (:func:`add_staged`), no JSON read there: the two threads' shares are about even (issue
45: the JSON's fields read by the index's thread made it the longer one). SQLite lets go of Python's lock while it
works, so the next batch is read and staged while this one is inserted.

Together they read exactly what :func:`memex.search.rows.message_row` reads: a field of the wrong type reads as
empty, recipients are the mail's ``extra.to`` and ``extra.cc`` (else the conversation's participants but the
sender), then the non-empty ``extra.to_names`` and ``extra.cc_names``; attachment names are the non-empty ``filename``
strings of the attachment objects, then those of ``message.filenames``; links as :func:`memex.search.rows.links`. A record SQLite's JSON
parser refuses (JSON only Python reads), and one that is not UTF-8, is handed to the Python path, which decides.
``tests/core/test_search_bulk.py`` pins the rows equal to the Python path's.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memex.errors import StateError
from memex.records import encode_id
from memex.search.rows import free_ids, is_record_key, time_id, timestamp
from memex.search.schema import SCHEMA_VERSION, insert_fts


def _s(path: str) -> str:
    """A string field, or '' when it is absent or not a string (``rows._s``)."""
    return f"CASE json_type(body, '{path}') WHEN 'text' THEN json_extract(body, '{path}') ELSE '' END"


def _strings(path: str, where: str = "") -> str:
    """The rows ``(value, i)`` of the strings in the array at ``path`` (none when it is not an array), in array order."""
    return (f"SELECT value, key AS i FROM json_each(CASE json_type(body, '{path}') WHEN 'array' THEN json_extract(body, '{path}') "
            f"END) WHERE type = 'text'{where}")  # fmt: skip


def _joined(rows: str) -> str:
    """The strings of ``rows`` (``(value, i)``) in ``i`` order, joined by newlines ('' when none)."""
    return f"coalesce((SELECT group_concat(value, char(10)) FROM ({rows} ORDER BY i)), '')"


_SENDER = _s("$.sender.id")
_MAIL = f"{_strings('$.extra.to')} UNION ALL SELECT value, i + 1e9 FROM ({_strings('$.extra.cc')})"
_PEOPLE = _strings("$.conversation.participants", f" AND value != {_SENDER}")
_ADDRESSES = (f"CASE WHEN (json_type(body, '$.extra.to') = 'array' OR json_type(body, '$.extra.cc') = 'array') AND "
              f"EXISTS({_MAIL}) THEN {_joined(_MAIL)} ELSE {_joined(_PEOPLE)} END")  # fmt: skip
_NONEMPTY = " AND value != ''"
_NAMED = f"{_strings('$.extra.to_names', _NONEMPTY)} UNION ALL SELECT value, i + 1e9 FROM ({_strings('$.extra.cc_names', _NONEMPTY)})"
_ARRAY_NAMES = "(json_type(body, '$.extra.to_names') = 'array' OR json_type(body, '$.extra.cc_names') = 'array')"  # else none
_RECIPIENTS = (f"(SELECT CASE WHEN a = '' THEN n WHEN n = '' THEN a ELSE a || char(10) || n END FROM "
               f"(SELECT {_ADDRESSES} AS a, CASE WHEN {_ARRAY_NAMES} THEN {_joined(_NAMED)} ELSE '' END AS n))")  # fmt: skip
_OBJECTS = "json_each(json_extract(body, '$.attachments')) WHERE type = 'object'"
_ATTACHMENTS = "json_array_length(body, '$.attachments') > 0"  # an array, not empty (NULL when not an array)
_INNER = ("SELECT j.value AS f, 1e12 + a.key * 1e6 + j.key AS o FROM json_each(json_extract(body, '$.attachments')) a, "
          "json_each(CASE json_type(a.value, '$.message.filenames') WHEN 'array' THEN json_extract(a.value, '$.message.filenames') "
          "END) j WHERE a.type = 'object' AND j.type = 'text' AND j.value != ''")  # fmt: skip
_NAMES = (f"CASE WHEN {_ATTACHMENTS} THEN coalesce((SELECT group_concat(f, char(10)) FROM (SELECT json_extract(value, '$.filename') "
          f"AS f, key AS o FROM {_OBJECTS} AND json_type(value, '$.filename') = 'text' AND f != '' UNION ALL {_INNER} "
          f"ORDER BY o)), '') ELSE '' END")  # fmt: skip
_COUNT = f"CASE WHEN {_ATTACHMENTS} THEN (SELECT count(*) FROM {_OBJECTS}) ELSE 0 END"
_DELETED = "json_type(body, '$.deleted') IS 'true'"
_TEXT = _s("$.text")

CHUNK = 2000  # records staged at a time (a batch may be made of several)
STAGE = ("CREATE TABLE stage(n INTEGER PRIMARY KEY, key TEXT NOT NULL, body TEXT, kind INTEGER NOT NULL, ts REAL, id INTEGER, "
         "source TEXT, native_id TEXT, sent_at TEXT, conv_id TEXT, conv_name TEXT, sender_id TEXT, sender_name TEXT, is_me INTEGER, "
         "recipients TEXT, subject TEXT, attachments TEXT, n_attachments INTEGER, text TEXT, deleted INTEGER, search_text TEXT, "
         "refs TEXT, replies TEXT)")  # fmt: skip
STAGE_LINKS = "CREATE TABLE stage_links(n INTEGER NOT NULL, ref TEXT NOT NULL)"  # a staged record's links (rows.links)
_RAW = "CREATE TEMP TABLE raw(n INTEGER PRIMARY KEY, key TEXT NOT NULL, body TEXT NOT NULL)"
# kind: 1 a JSON object, 2 other JSON (left out), 0 JSON SQLite refuses (handed back: the only kind whose body is kept);
# ts and id as an added record's; every column of its row. All of a row's JSON is read here, by the reading thread (one
# parse a record: SQLite keeps a record's parse for the statement), so the index's connection copies plain columns.
_OBJECT = {
    "source": _s("$.source"), "native_id": _s("$.native_id"),
    "sent_at": "CASE json_type(body, '$.sent_at') WHEN 'text' THEN json_extract(body, '$.sent_at') END",
    "conv_id": _s("$.conversation.id"), "conv_name": _s("$.conversation.name"), "sender_id": _SENDER,
    "sender_name": _s("$.sender.name"), "is_me": "json_type(body, '$.sender.is_me') IS 'true'", "recipients": _RECIPIENTS,
    "subject": _s("$.extra.subject"), "attachments": _NAMES, "n_attachments": _COUNT, "text": _TEXT, "deleted": _DELETED,
    "search_text": _s("$.extra.search_text"),
    **{column: f"CASE json_type(body, '{path}') WHEN 'array' THEN json_extract(body, '{path}') END"
       for column, path in (("refs", "$.extra.references"), ("replies", "$.extra.in_reply_to"))},  # for the links
}  # fmt: skip
_STAGE_INSERT = f"""
INSERT INTO stage(n, key, body, kind, ts, id, {", ".join(_OBJECT)})
SELECT n, key, CASE kind WHEN 0 THEN body END, kind, memex_ts(t), memex_time_id(t, key),
  {", ".join(f"CASE kind WHEN 1 THEN {sql} END" for sql in _OBJECT.values())}
FROM (SELECT n, key, body, CASE WHEN NOT json_valid(body) THEN 0 WHEN json_type(body) = 'object' THEN 1 ELSE 2 END AS kind,
  CASE WHEN json_valid(body) AND json_type(body, '$.sent_at') = 'text' THEN json_extract(body, '$.sent_at') END AS t FROM raw)
ORDER BY n
"""  # fmt: skip
_LINKED = " UNION ALL ".join(
    [f"SELECT n, source AS src, {column} AS v FROM stage WHERE kind = 1 AND n >= :first" for column in ("native_id", "conv_id")]
    + [
        f"SELECT s.n AS n, s.source AS src, j.value AS v FROM stage s, json_each(s.{column}) j "
        f"WHERE s.kind = 1 AND s.n >= :first AND s.{column} IS NOT NULL AND j.type = 'text'"
        for column in ("refs", "replies")
    ]
)
_STAGE_LINKS = f"INSERT INTO stage_links(n, ref) SELECT n, src || char(31) || v FROM ({_LINKED}) WHERE v != ''"

INSERT_MESSAGES = """
INSERT INTO messages(id, key, source, native_id, sent_at, ts, conv_id, conv_name, sender_id, sender_name, is_me, recipients,
  subject, attachments, n_attachments, original, original_deleted, text, edited, deleted, search_text, thread)
SELECT id, key, source, native_id, sent_at, ts, conv_id, conv_name, sender_id, sender_name, is_me, recipients, subject,
  attachments, n_attachments, NULL, deleted, text, 0, deleted, search_text, id
FROM stg.stage ORDER BY id
"""  # fmt: skip
INSERT_LINKS = "INSERT OR IGNORE INTO links(ref, id) SELECT l.ref, s.id FROM stg.stage_links l JOIN stg.stage s ON s.n = l.n ORDER BY 1, 2"
STAGED_FTS = " JOIN stg.stage s ON s.id = f.id ORDER BY s.id"  # after insert_fts(table): the batch's words, in row id order


@dataclass(frozen=True)
class Staged:
    """One batch of a rebuild: its original records in a staging file (None when it had none), and the records for
    the Python path (revisions, and originals that are not UTF-8), in their order."""

    path: Path | None
    others: list[tuple[str, bytes]]


def staged(records: Iterable[tuple[str, bytes]], base: Path, sizes: Iterator[int], chunk_size: int = CHUNK) -> Iterator[Staged]:
    """The stored records ``(key, bytes)`` in batches of the next of ``sizes`` records as :class:`Staged`, each staging
    file named after ``base`` (the new index); run by the reading thread. The originals go to the file as they are
    read, ``chunk_size`` at a time, so memory holds a chunk whatever the batch's size. A staging file not handed over
    is removed by :func:`remove_stages`."""
    n = 0
    limit = next(sizes)
    stager: _Stager | None = None
    chunk: list[tuple[str, str]] = []
    others: list[tuple[str, bytes]] = []
    count = 0
    for key, body in records:
        count += 1
        if key.startswith("messages/") and is_record_key(key):
            try:
                chunk.append((key, body.decode()))
            except UnicodeDecodeError:
                others.append((key, body))
            else:
                if len(chunk) >= chunk_size:
                    stager = stager or _Stager(base.with_name(f"{base.name}.stage-{n}"))
                    stager.add(chunk)
                    chunk = []
        else:
            others.append((key, body))
        if count >= limit:
            yield _done(stager, chunk, others, base.with_name(f"{base.name}.stage-{n}"))
            n, count, limit, stager, chunk, others = n + 1, 0, next(sizes), None, [], []
    if count:
        yield _done(stager, chunk, others, base.with_name(f"{base.name}.stage-{n}"))


def _done(stager: _Stager | None, chunk: list[tuple[str, str]], others: list[tuple[str, bytes]], path: Path) -> Staged:
    """A batch's :class:`Staged`, its last chunk written and its staging file closed (none when it had no originals)."""
    if chunk:
        stager = stager or _Stager(path)
        stager.add(chunk)
    if stager is None:
        return Staged(None, others)
    stager.close()
    return Staged(stager.path, others)


class _Stager:
    """A new staging file at ``path`` (0600) being written: each record with its kind, time, row id, recipients and
    attachment names."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.staged = 0  # records staged so far (the next one's n is this plus one)
        path.unlink(missing_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            self.db.execute("PRAGMA journal_mode = OFF")
            self.db.execute("PRAGMA synchronous = OFF")
            self.db.create_function("memex_ts", 1, timestamp, deterministic=True)
            self.db.create_function("memex_time_id", 2, _time_id, deterministic=True)
            self.db.execute(STAGE)
            self.db.execute(STAGE_LINKS)
            self.db.execute(_RAW)
            self.db.execute("BEGIN")
        except BaseException:
            self.db.close()
            raise

    def add(self, records: list[tuple[str, str]]) -> None:
        """Stage ``records`` (key, JSON text), after those already staged."""
        first = self.staged + 1
        self.db.executemany("INSERT INTO raw(n, key, body) VALUES (?, ?, ?)", [(first + i, *r) for i, r in enumerate(records)])
        self.db.execute(_STAGE_INSERT)
        self.db.execute(_STAGE_LINKS, {"first": first})
        self.db.execute("DELETE FROM raw")
        self.staged += len(records)

    def close(self) -> None:
        """Commit and close the file (the index's connection then attaches it)."""
        try:
            self.db.execute("COMMIT")
        finally:
            self.db.close()


def _time_id(sent_at: str | None, key: str) -> int:
    """The row id an added record with this ``sent_at`` (as its JSON holds it) gets first (``time_id`` of its
    ``timestamp``), in one call from SQLite: a Python function called by SQLite costs about a microsecond a call."""
    return time_id(timestamp(sent_at), key)


def remove_stages(base: Path) -> None:
    """Remove every staging file of the new index ``base`` (left by a rebuild that stopped, or not handed over)."""
    for path in base.parent.glob(f"{base.name}.stage-*"):
        path.unlink(missing_ok=True)


def add_staged(db: sqlite3.Connection, path: Path, *, taken: Callable[[list[int]], set[int]],
               highest: Callable[[int, int], int | None],
               refresh: Callable[[str], None] | None,
               tables: tuple[str, ...] = ("fts",)) -> tuple[int, list[str], list[tuple[str, str]]]:  # fmt: skip
    """Insert the staged original records in the file at ``path`` (keys new to the index, each once) as rows, in one
    transaction of ``db`` (which must have none open); the file is removed after.

    Returns how many were inserted, the folders (``messages/<source>/``) they were in, and ``(key, text)`` of those
    SQLite's JSON parser refused (for the Python path); a record that is JSON but not an object is left out, as the
    Python path leaves it. ``taken`` and ``highest`` say which row ids are in use (:func:`memex.search.rows.free_ids`);
    ``refresh`` (when revisions may be waiting) applies a message's revisions to its new row; ``tables`` are the
    index's FTS5 tables, each given the rows' words.
    """
    db.execute("ATTACH DATABASE ? AS stg", (str(path),))
    try:
        db.execute("BEGIN")
        refused = db.execute("SELECT key, body FROM stg.stage WHERE kind = 0 ORDER BY n").fetchall()
        db.execute("DELETE FROM stg.stage WHERE kind != 1")
        clash = db.execute("SELECT EXISTS(SELECT 1 FROM stg.stage s JOIN messages m ON m.id = s.id) "
                           "OR EXISTS(SELECT 1 FROM stg.stage GROUP BY id HAVING count(*) > 1)").fetchone()[0]  # fmt: skip
        if clash:
            _spread(db, taken, highest)
        n = db.execute(INSERT_MESSAGES).rowcount
        db.execute(INSERT_LINKS)
        for table in tables:
            db.execute(insert_fts(table) + STAGED_FTS)
        folders = [r[0] for r in db.execute("SELECT DISTINCT substr(key, 1, 9 + instr(substr(key, 10), '/')) FROM stg.stage")]
        if refresh is not None:
            for (key,) in db.execute(
                "SELECT DISTINCT message_key FROM revisions WHERE message_key IN (SELECT key FROM stg.stage)"
            ).fetchall():
                refresh(key)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    finally:
        db.execute("DETACH DATABASE stg")
        path.unlink(missing_ok=True)
    return n, folders, refused


def _spread(db: sqlite3.Connection, taken: Callable[[list[int]], set[int]], highest: Callable[[int, int], int | None]) -> None:
    """Give each staged record a free row id the way the Python path does (:func:`memex.search.rows.free_ids`, in the
    records' order)."""
    wanted = db.execute("SELECT n, id FROM stg.stage ORDER BY n").fetchall()
    ids = free_ids([want for _, want in wanted], taken, highest)
    moved = [(got, n) for (n, want), got in zip(wanted, ids, strict=True) if got != want]
    db.executemany("UPDATE stg.stage SET id = ? WHERE n = ?", moved)


def copy_others(db: sqlite3.Connection, keep: Path, sources: list[str], tables: tuple[str, ...] = ("fts",)) -> None:
    """Copy the rows of every source but ``sources`` from the index at ``keep`` (the live one: only read) into ``db``
    (a rebuild of ``sources`` only); an index at ``keep`` of another format cannot be copied."""
    db.execute("ATTACH DATABASE ? AS old", (str(keep),))  # only read
    try:
        if db.execute("PRAGMA old.user_version").fetchone()[0] != SCHEMA_VERSION:
            raise StateError("the index is of an older format: rebuild every source (`memex index rebuild`)", path=keep)
        marks = ", ".join("?" * len(sources))
        not_like = " AND ".join("key NOT LIKE ? ESCAPE '\\'" for _ in sources)
        db.execute("BEGIN")
        db.execute(f"INSERT INTO messages SELECT * FROM old.messages WHERE source NOT IN ({marks}) ORDER BY id", sources)
        db.execute(f"INSERT INTO revisions SELECT * FROM old.revisions WHERE {not_like}",
                        [_like_prefix(f"revisions/{encode_id(s)}/") for s in sources])  # fmt: skip
        db.execute(f"INSERT INTO sources SELECT * FROM old.sources WHERE source NOT IN ({marks})", sources)
        db.execute(f"INSERT INTO links SELECT l.* FROM old.links l JOIN old.messages m ON m.id = l.id WHERE m.source NOT IN ({marks})",
                   sources)  # fmt: skip
        for table in tables:
            db.execute(insert_fts(table) + " ORDER BY f.id")
        db.execute("COMMIT")
    finally:
        db.execute("DETACH DATABASE old")


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
