"""Which handles each indexed message names, kept beside the search index in ``<state_dir>/search/people.sqlite``.

For every row of the search index it holds the message's handles, normalized (:mod:`memex.people.handles`): the
sender's (role 0) and each recipient's or other participant's (role 1), the display names seen with each, and the
handles the sources marked as the user's own. It says nothing about who is who: that is the book
(:mod:`memex.people.book`), made at query time from your cards and decisions, so editing people needs neither a
re-poll nor a rebuild. It follows the index by the index rows' arrival order (SQLite's rowid) and starts again
when the index file was replaced (``memex index rebuild``) or the comparison rules changed; it is derived data,
deleted and made again at will.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memex.people.handles import Rules, normalize

FILE = "people.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS handles(msg_id INTEGER NOT NULL, handle TEXT NOT NULL, role INTEGER NOT NULL, source TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS handles_handle ON handles(handle, role);
CREATE TABLE IF NOT EXISTS names(handle TEXT NOT NULL, name TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY(handle, name));
CREATE TABLE IF NOT EXISTS mine(handle TEXT PRIMARY KEY);
"""
BATCH = 5000
VERSION = "2"  # how rows are read (2: a mail's recipient display names are its addresses', not handles of their own)


def path(index: Path) -> Path:
    """The handles file beside the search index file ``index``."""
    return index.parent / FILE


def _identity(index: Path, rules: Rules) -> str:
    """What the kept handles were made from: the index file (a rebuild makes a new one) and the rules."""
    st = os.stat(index)
    return f"{VERSION}:{st.st_dev}:{st.st_ino}:{rules.region or ''}:{int(rules.gmail_rules)}"


def follow(index: Path, rules: Rules, index_rows: str) -> sqlite3.Connection:
    """The handles file brought up to date with the index at ``index``; the connection has it as ``main``.

    ``index_rows``: the index's query of the rows after a rowid (``memex.search.schema.PEOPLE_ROWS``), handed in by the
    caller: the people layer sits below the index's package and never imports it (no cycle between the two).

    Creating or updating it is the only write; a read-only state folder gives a handles table in memory instead.
    """
    try:
        conn = sqlite3.connect(path(index), timeout=10, isolation_level=None)
        conn.executescript(SCHEMA)
    except sqlite3.OperationalError:  # cannot write beside the index: made in memory for this command
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.executescript(SCHEMA)
    identity = _identity(index, rules)
    row = conn.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
    conn.execute("BEGIN IMMEDIATE")
    try:
        if row is None or row[0] != identity:
            for table in ("handles", "names", "mine"):
                conn.execute(f"DELETE FROM {table}")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('identity', ?), ('rowid', '0')", (identity,))
        (mark,) = conn.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'rowid'").fetchone()
        mark = _catch_up(conn, index, int(mark), rules, index_rows)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'rowid'", (str(mark),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return conn


def read_only(index: Path, rules: Rules) -> sqlite3.Connection | None:
    """The handles file as it is, opened read-only (``mode=ro``, ``query_only``), when it was made from the index
    at ``index`` with ``rules``; else None (missing, or made from another index file: its ids mean nothing here)."""
    handles = path(index)
    if not handles.is_file():
        return None
    conn = sqlite3.connect(f"{handles.as_uri()}?mode=ro", uri=True, timeout=10, check_same_thread=False)
    conn.execute("PRAGMA query_only = ON")
    try:
        made_from = conn.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
    except sqlite3.Error:
        made_from = None
    if made_from is None or made_from[0] != _identity(index, rules):
        conn.close()
        return None
    return conn


def _catch_up(conn: sqlite3.Connection, index: Path, mark: int, rules: Rules, index_rows: str) -> int:
    """Add the handles of every index row after rowid ``mark``; the new mark."""
    src = sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        while True:
            rows = src.execute(index_rows, (mark, BATCH)).fetchall()
            if not rows:
                return mark
            handles: list[tuple[int, str, int, str]] = []
            names: dict[tuple[str, str], int] = {}
            mine: set[str] = set()
            for rowid, msg_id, source, sender_id, sender_name, is_me, recipients in rows:
                mark = rowid
                for handle, role, name in _handles(sender_id, sender_name, recipients, rules):
                    handles.append((msg_id, handle, role, source))
                    if name:
                        names[(handle, name)] = names.get((handle, name), 0) + 1
                    if role == 0 and is_me:
                        mine.add(handle)
            conn.executemany("INSERT INTO handles VALUES (?, ?, ?, ?)", handles)
            conn.executemany("INSERT INTO names VALUES (?, ?, ?) ON CONFLICT(handle, name) DO UPDATE SET n = n + excluded.n",
                             [(h, n, c) for (h, n), c in names.items()])  # fmt: skip
            conn.executemany("INSERT OR IGNORE INTO mine VALUES (?)", [(h,) for h in mine])
    finally:
        src.close()


def _handles(sender_id: str, sender_name: str, recipients: str, rules: Rules) -> Iterator[tuple[str, int, str | None]]:
    """(handle, role, display name) of one row: the sender's (0), then each recipient's (1), each once."""
    done: set[str] = set()
    sender = normalize(sender_id, rules) if sender_id else normalize(sender_name, rules) if sender_name else None
    if sender is not None:
        done.add(sender)
        yield sender, 0, sender_name or None
    found: list[tuple[str, str | None, str]] = []  # (handle, its display name, the line as written)
    for raw in recipients.split("\n") if recipients else ():
        name, address = _split_name(raw)
        handle = normalize(address, rules)
        if handle is not None:
            found.append((handle, name, raw.strip()))
    addresses = [(h, n) for h, n, _ in found if not h.startswith("name:")]
    if not addresses or len(addresses) == len(found):
        pairs = [(h, n) for h, n, _ in found]
    else:  # a mail's row lists its addresses, then their display names ("Yan Unknown"): names of addresses, as a
        # sender's name is, never people of their own; paired with the addresses in order where each has one
        names = [raw for h, _, raw in found if h.startswith("name:")]
        pairs = [(h, n or (names[i] if len(names) == len(addresses) else None)) for i, (h, n) in enumerate(addresses)]
    for handle, name in pairs:
        if handle not in done:
            done.add(handle)
            yield handle, 1, name


def _split_name(raw: str) -> tuple[str | None, str]:
    """``Anna Berg <anna@example.com>`` -> (``Anna Berg``, ``anna@example.com``); a bare handle has no name."""
    raw = raw.strip()
    if raw.endswith(">") and "<" in raw:
        name, _, address = raw[:-1].rpartition("<")
        return name.strip().strip('"') or None, address.strip()
    return None, raw


def seen(conn: sqlite3.Connection) -> Iterator[tuple[str, int, dict[str, int], bool]]:
    """Every handle: (handle, messages naming it, display names with counts, whether it is the user's)."""
    names: dict[str, dict[str, int]] = {}
    for handle, name, n in conn.execute("SELECT handle, name, n FROM names"):
        names.setdefault(handle, {})[name] = n
    mine = {h for (h,) in conn.execute("SELECT handle FROM mine")}
    for handle, count in conn.execute("SELECT handle, COUNT(DISTINCT msg_id) FROM handles GROUP BY handle"):
        yield handle, count, names.get(handle, {}), handle in mine


def mark(conn: sqlite3.Connection | None) -> str:
    """Which index file the handles were made from, with which rules, and how far they follow it ("" for none)."""
    if conn is None:
        return ""
    return "/".join(str(v) for (v,) in conn.execute("SELECT value FROM meta WHERE key IN ('identity', 'rowid') ORDER BY key"))


def named(conn: sqlite3.Connection) -> set[str]:
    """Every handle some indexed message names."""
    return {h for (h,) in conn.execute("SELECT DISTINCT handle FROM handles")}


def counts(conn: sqlite3.Connection, handles: set[str]) -> dict[str, int]:
    """Messages naming any of ``handles``, per source."""
    if not handles:
        return {}
    marks = ",".join("?" * len(handles))
    rows: list[Any] = conn.execute(f"SELECT source, COUNT(DISTINCT msg_id) FROM handles WHERE handle IN ({marks}) GROUP BY source",
                                   sorted(handles)).fetchall()  # fmt: skip
    return {source: n for source, n in rows}
