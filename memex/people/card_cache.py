"""Contact cards parsed once and kept, and the book made from them: ``<state_dir>/people/cache.sqlite``.

Parsing a vCard (vobject) and placing its numbers (libphonenumber) costs about a millisecond a card: 20,000 cards
took 13 s on every ``from:``, ``with:`` and ``people`` command. Each ``.vcf`` file's cards, their handles already
normalized, and the warnings its reading gave are kept here, keyed by the file's path and checked against what it
is now: its size, modification and change times (nanoseconds) and inode, and the comparison rules (``region``,
``gmail_rules``). A file that changed in any of them is read again; one no longer configured is dropped.

The book itself (who is who: :func:`memex.people.book.build`) is kept too (:mod:`memex.people.book_cache`), with a
fingerprint of everything it was made from: each card file's and address book's stamp, the people file's, the
handles file's identity and mark, and the rules. A command whose inputs are unchanged reads it instead of making it.

The cache is derived data: the file is 0600 in a 0700 folder (cards are private), SQLite keeps two commands writing
it at once apart (each file's row is replaced in one transaction; the last writer's row stands, and both were read
from the same file), and one that cannot be read (damaged, another program's, a newer layout) is removed and made
again. Where it cannot be written at all (a read-only state folder), the cards are read afresh, as before.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from memex.people.cards import Card, Read, read_vcards
from memex.people.handles import Rules, normalize

FILE = "cache.sqlite"
VERSION = "2"  # the rows' layout and the reading rules: a new one makes every file read again
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, stamp TEXT NOT NULL, cards TEXT NOT NULL, warnings TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS persons(id TEXT PRIMARY KEY, name TEXT, fold TEXT, origins TEXT NOT NULL, handles TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS persons_fold ON persons(fold);
CREATE TABLE IF NOT EXISTS owners(handle TEXT PRIMARY KEY, pid TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS conflicts(handle TEXT NOT NULL, claimants TEXT NOT NULL);
"""


def path(state_dir: Path) -> Path:
    """The cache file of the state folder ``state_dir``."""
    return state_dir / "people" / FILE


def vcf_files(paths: Iterable[Path]) -> list[Path]:
    """The configured ``vcards`` entries as files: a folder gives every ``.vcf`` under it, in name order."""
    out: list[Path] = []
    for p in paths:
        out.extend(sorted(p.rglob("*.vcf")) if p.is_dir() else [p])
    return out


def read_kept(files: list[Path], conn: sqlite3.Connection | None, rules: Rules, out: Read) -> None:
    """Append the cards of ``files`` (:func:`vcf_files`) to ``out``, from the cache ``conn`` (:func:`open_cache`)
    where each file is unchanged; every card's handles normalized."""
    if conn is None:
        for file in files:
            read_vcards(file, out)
        _normalize(out.cards, rules)
        return
    kept = {p: (stamp, cards, warnings) for p, stamp, cards, warnings in conn.execute("SELECT path, stamp, cards, warnings FROM files")}
    fresh: list[tuple[str, str, str, str]] = []
    for file in files:
        key, stamp = str(file.absolute()), stamp_of(file, rules)
        row = kept.get(key)
        if stamp is not None and row is not None and row[0] == stamp:
            out.cards.extend(Card(n, list(h), o, tuple(k)) for n, h, o, k in json.loads(row[1]))
            out.warnings.extend(json.loads(row[2]))
            continue
        got = Read()
        read_vcards(file, got)
        _normalize(got.cards, rules)
        out.cards.extend(got.cards)
        out.warnings.extend(got.warnings)
        if stamp is not None and stamp == stamp_of(file, rules):  # unchanged while read: worth keeping
            rows = [[c.name, c.handles, c.origin, list(c.keys or ())] for c in got.cards]
            fresh.append((key, stamp, json.dumps(rows, ensure_ascii=False), json.dumps(got.warnings, ensure_ascii=False)))
    gone = set(kept) - {str(f.absolute()) for f in files}
    if fresh or gone:
        _store(conn, fresh, gone)


def _normalize(cards: list[Card], rules: Rules) -> None:
    for card in cards:
        if card.keys is None:
            card.keys = tuple(dict.fromkeys(h for h in (normalize(x, rules) for x in card.handles) if h))


def stamp_of(file: Path, rules: Rules) -> str | None:
    """What the kept rows of ``file`` were made from; None for a file that cannot be looked at (read, it warns)."""
    try:
        st = os.stat(file)
    except OSError:
        return None
    return f"{VERSION}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{rules.region or ''}:{int(rules.gmail_rules)}"


def open_cache(state_dir: Path, *, read_only: bool = False) -> sqlite3.Connection | None:
    """The cache of ``state_dir``, made (0600) where missing and made again where unreadable; None where it cannot
    be written, or where the state folder does not exist yet (then everything is read afresh). ``read_only``
    (``memex mcp``): opened as it is, never written."""
    from memex.state.files import ensure_private_dir

    file = path(state_dir)
    if not state_dir.is_dir():  # no state folder yet: a people command does not make one for a cache
        return None
    if read_only:
        try:
            conn = sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True, timeout=10, isolation_level=None)
            conn.execute("PRAGMA query_only = ON")
            return conn
        except sqlite3.Error:
            return None
    for attempt in range(2):
        try:
            ensure_private_dir(file.parent)
            if not file.exists():
                os.close(os.open(file, os.O_WRONLY | os.O_CREAT, 0o600))
            conn = sqlite3.connect(file, timeout=10, isolation_level=None)
        except (OSError, sqlite3.Error):
            return None
        try:
            conn.executescript(SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
            if row is None:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('version', ?)", (VERSION,))
            elif row[0] != VERSION:
                raise sqlite3.DatabaseError("another layout")
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if "locked" in str(exc) or "busy" in str(exc) or "readonly" in str(exc) or attempt:
                return None  # busy past the timeout, or not writable: read the cards afresh this time
            _remove(file)
        except sqlite3.DatabaseError:  # not a database, damaged, another layout: derived data, made again
            conn.close()
            if attempt:
                return None
            _remove(file)
    return None


def _remove(file: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        try:
            os.unlink(f"{file}{suffix}")
        except FileNotFoundError:
            pass
        except OSError:
            return


def _store(conn: sqlite3.Connection, fresh: list[tuple[str, str, str, str]], gone: set[str]) -> None:
    """Keep ``fresh`` rows and drop the files no longer configured, in one transaction; a busy cache keeps nothing."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", fresh)
        conn.executemany("DELETE FROM files WHERE path = ?", [(g,) for g in gone])
        conn.execute("COMMIT")
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
