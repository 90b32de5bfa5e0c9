"""``memex search``: a full-text index of the stored messages (SQLite FTS5 in the state folder), kept in step by the runner.

Where things are:

- :mod:`memex.search.rows` turns a stored record (an original or a revision) into the index's row;
- :mod:`memex.search.index` is the SQLite file: its schema, adding records, the per-source marks, lookups;
- :mod:`memex.search.query` parses the query language (notmuch's habits) into SQL and an FTS5 expression;
- :mod:`memex.search.build` fills it: ``memex index rebuild`` from the store alone, the runner's journal and catch-up;
- :mod:`memex.read.conversations` reads whole conversations and counts (``show --thread``, ``--output=threads``,
  ``--count``, ``--group-by``).

Kept in step: the runner (and the backfill) appends the keys it stored to a journal,
``<state_dir>/search/pending/<source>.<writer>.keys`` (0600), made durable *before* the store's own commit; after
the commit (and the cursor) the records are added to the index and the journal is emptied. A crash between the two
leaves the journal: the next run of that writer (idle or not: one ``stat``, no SQLite) reads those keys back from
the store and adds them. This module holds only the paths, so the idle poll can ask without importing the index.
"""

from __future__ import annotations

import os
from pathlib import Path

INDEX_DIR = "search"
INDEX_FILE = "index.sqlite"


def index_dir(state_dir: Path) -> Path:
    """The folder holding the index and its journals (0700)."""
    return state_dir / INDEX_DIR


def index_path(state_dir: Path) -> Path:
    """The SQLite index file (0600)."""
    return state_dir / INDEX_DIR / INDEX_FILE


def journal_path(state_dir: Path, source: str, writer: str) -> Path:
    """The journal of keys ``writer`` (``poll`` or ``backfill``) stored for ``source`` but has not yet indexed."""
    from memex.records import encode_id

    return state_dir / INDEX_DIR / "pending" / f"{encode_id(source)}.{writer}.keys"


def has_pending(state_dir: Path, source: str, writer: str) -> bool:
    """Whether a journal holds keys to catch up (one ``stat``; the idle poll's only cost). An emptied journal is
    kept (truncated, not removed), so the next append need not make a new name durable."""
    try:
        return os.stat(journal_path(state_dir, source, writer)).st_size > 0
    except FileNotFoundError:
        return False


def journal_keys(path: Path) -> list[str]:
    """The keys a journal holds, each once, in order."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return list(dict.fromkeys(k for k in text.splitlines() if k))
