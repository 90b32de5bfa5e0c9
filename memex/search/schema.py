"""The search index's format: its tables, FTS5's table and the view it reads its words through, and the format number.

``messages`` holds one row per stored message (the fields queries filter on, the latest text, and the original text
once an edit replaced it: NULL until then), appended in arrival order; its ``id`` is in time order
(:func:`memex.search.rows.time_id`) and is FTS5's rowid. ``fts`` is an FTS5 table whose content is read from
``messages`` through the view ``fts_source`` (so a row's words must leave FTS5 before the row changes).
``revisions`` keeps every revision seen (one that arrives before its message is applied when the message comes);
``sources`` when records of a source were last added and the index last rebuilt. ``links`` ties each row to the
IDs that join it to its conversation (:mod:`memex.search.rows`: ``thread`` is the lowest row id of the rows linked
together); ``search_text`` is searched as part of the text (``body``) but never shown. The format number is SQLite's
``user_version``: an index of another format is never written into (:class:`memex.search.index.SearchIndex`).
"""

from __future__ import annotations

SCHEMA_VERSION = 3  # 2: messages appended in arrival order (id a unique column), FTS5's content read from them;
# 3: recipients' names, search_text, threads (links, thread) and the group-by indexes
FTS_COLUMNS = "body, subject, sender, recipients, conversation, attachments"  # fts's columns, as fts_source names them
SCHEMA = f"""
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
  recipients, conv_name || char(10) || conv_id AS conversation, attachments FROM messages;
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5({FTS_COLUMNS},
  content = 'fts_source', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3');
CREATE TABLE IF NOT EXISTS sources(source TEXT PRIMARY KEY, added_at TEXT, rebuilt_at TEXT);
"""
# Rows' words into FTS5, read as FTS5 reads them to remove them (through fts_source, as ``f``); the caller adds which
# rows (a WHERE, or a join and an order).
INSERT_FTS = f"INSERT INTO fts(rowid, {FTS_COLUMNS}) SELECT f.id, {', '.join('f.' + c for c in FTS_COLUMNS.split(', '))} FROM fts_source f"
SECONDARY = {  # dropped during a rebuild, made again at its end
    "messages_ts": "CREATE INDEX IF NOT EXISTS messages_ts ON messages(ts)",
    "messages_native": "CREATE INDEX IF NOT EXISTS messages_native ON messages(native_id)",
    "messages_source": "CREATE INDEX IF NOT EXISTS messages_source ON messages(source, ts)",
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
