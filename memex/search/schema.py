"""The search index's format: its tables, FTS5's table and the view it reads its words through, and the format number.

``messages`` holds one row per stored message (the fields queries filter on, the latest text, and the original text
once an edit replaced it: NULL until then), appended in arrival order; its ``id`` is in time order
(:func:`memex.search.rows.time_id`, negative before 1970) and is FTS5's rowid. ``fts`` is an FTS5 table whose content
is read from ``messages`` through the view ``fts_source`` (so a row's words must leave FTS5 before the row changes);
``fts_stem`` (unless ``search_stemming = "none"``) indexes the same columns by their English stems (FTS5's ``porter``).
``revisions`` keeps every revision seen (one that arrives before its message is applied when the message comes);
``sources`` when records of a source were last added and the index last rebuilt. ``links`` ties each row to the
IDs that join it to its conversation (:mod:`memex.search.rows`: ``thread`` is the lowest row id of the rows linked
together); ``search_text`` is searched as part of the text (``body``) but never shown. The format number is SQLite's
``user_version``: an index of another format is never written into (:class:`memex.search.index.SearchIndex`).
"""

from __future__ import annotations

SCHEMA_VERSION = 5  # 2: messages appended in arrival order (id a unique column), FTS5's content read from them;
# 3: recipients' names, search_text, threads (links, thread) and the group-by indexes; 4: row ids negative before 1970,
# a second FTS5 table of stems, the conversation's id an FTS5 column of its own (bare words do not match a Message-ID);
# 5: no prefix indexes (``prefix*`` reads the terms' own lists; a poll indexed every word three times: issue 45)
FTS_COLUMNS = "body, subject, sender, recipients, conversation, attachments, conv_id"  # fts's columns, as fts_source names them
EXACT, STEM = "fts", "fts_stem"  # the FTS5 tables: every word as written, and every word's stem
STEMMERS = {"english": "porter unicode61 remove_diacritics 2"}  # search_stemming -> fts_stem's tokenizer ("none": no table)
_TABLES = """
CREATE TABLE IF NOT EXISTS messages(
  id INTEGER NOT NULL UNIQUE, key TEXT NOT NULL UNIQUE, source TEXT NOT NULL, native_id TEXT NOT NULL, sent_at TEXT,
  ts REAL, conv_id TEXT NOT NULL, conv_name TEXT NOT NULL, sender_id TEXT NOT NULL, sender_name TEXT NOT NULL,
  is_me INTEGER NOT NULL, recipients TEXT NOT NULL, subject TEXT NOT NULL, attachments TEXT NOT NULL,
  n_attachments INTEGER NOT NULL, original TEXT, original_deleted INTEGER NOT NULL, text TEXT NOT NULL,
  edited INTEGER NOT NULL DEFAULT 0, deleted INTEGER NOT NULL, search_text TEXT NOT NULL DEFAULT '',
  thread INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS links(ref TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY(ref, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS revisions(key TEXT PRIMARY KEY, message_key TEXT NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL,
  text TEXT, deleted INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS revisions_message ON revisions(message_key);
CREATE VIEW IF NOT EXISTS fts_source AS SELECT id,
  CASE search_text WHEN '' THEN text ELSE text || char(10) || search_text END AS body, subject, sender_name || char(10) || sender_id AS sender,
  recipients, conv_name AS conversation, attachments, conv_id FROM messages;
CREATE TABLE IF NOT EXISTS sources(source TEXT PRIMARY KEY, added_at TEXT, rebuilt_at TEXT);
"""
_FTS = """CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5({columns},
  content = 'fts_source', content_rowid = 'id', tokenize = '{tokenize}');
"""


def schema(stemming: str) -> str:
    """The tables of a new index: with ``stemming`` (a :data:`STEMMERS` key) the stems' table too ("none": not).

    No prefix indexes (FTS5's ``prefix``): ``prefix*`` merges the lists of the terms it names, fast for three letters
    or more; a prefix index made every word three times the work of a poll (docs/benchmarks.md, issue 45)."""
    out = _TABLES + _FTS.format(table=EXACT, columns=FTS_COLUMNS, tokenize="unicode61 remove_diacritics 2")
    if stemming in STEMMERS:
        out += _FTS.format(table=STEM, columns=FTS_COLUMNS, tokenize=STEMMERS[stemming])
    return out


SCHEMA = schema("english")


def insert_fts(table: str) -> str:
    """Rows' words into the FTS5 ``table``, read as FTS5 reads them to remove them (through fts_source, as ``f``); the
    caller adds which rows (a WHERE, or a join and an order)."""
    return (
        f"INSERT INTO {table}(rowid, {FTS_COLUMNS}) SELECT f.id, {', '.join('f.' + c for c in FTS_COLUMNS.split(', '))} FROM fts_source f"
    )


INSERT_FTS = insert_fts(EXACT)


def fts_tables(db: object) -> tuple[str, ...]:
    """The FTS5 tables the open index ``db`` (a ``sqlite3.Connection``) has: ``fts``, and ``fts_stem`` when it stems."""
    found = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name IN (?, ?)", (EXACT, STEM))}  # type: ignore[attr-defined]
    return tuple(t for t in (EXACT, STEM) if t in found)


SECONDARY = {  # dropped during a rebuild, made again at its end
    "messages_ts": "CREATE INDEX IF NOT EXISTS messages_ts ON messages(ts)",
    "messages_native": "CREATE INDEX IF NOT EXISTS messages_native ON messages(native_id)",
    "messages_source": "CREATE INDEX IF NOT EXISTS messages_source ON messages(source, ts)",
    # one source's messages newest first: the read model's list of its conversations (memex.read.archive)
    "messages_source_last": "CREATE INDEX IF NOT EXISTS messages_source_last ON messages(source, deleted, id)",
    # a thread's rows; --group-by and --output=threads read these three alone (deleted and id in them: no row is read)
    "messages_thread": "CREATE INDEX IF NOT EXISTS messages_thread ON messages(thread, deleted, id)",
    "messages_sender": "CREATE INDEX IF NOT EXISTS messages_sender ON messages(sender_id, deleted, sender_name)",
    "messages_month": "CREATE INDEX IF NOT EXISTS messages_month ON messages(substr(sent_at, 1, 7), deleted)",
    "links_id": "CREATE INDEX IF NOT EXISTS links_id ON links(id)",  # a row's links, replaced when it is stored again
}
MONTH = "substr(m.sent_at, 1, 7)"  # a row's month (YYYY-MM), as messages_month indexes it

COLUMNS = ("key", "source", "native_id", "sent_at", "ts", "conv_id", "conv_name", "sender_id", "sender_name", "is_me",
           "recipients", "subject", "attachments", "n_attachments", "original", "original_deleted", "text", "edited",
           "deleted", "search_text")  # fmt: skip

# The people layer's follower (memex.people.seen) reads the handles of every row after the last it read
PEOPLE_ROWS = "SELECT rowid, id, source, sender_id, sender_name, is_me, recipients FROM messages WHERE rowid > ? ORDER BY rowid LIMIT ?"
