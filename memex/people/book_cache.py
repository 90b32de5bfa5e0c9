"""The book (who is who) kept beside the parsed cards (:mod:`memex.people.card_cache`), under a fingerprint of what it
was made from, so that a command whose inputs did not change reads it instead of making it again.

The fingerprint (:func:`fingerprint`) is a SHA-256 over: each configured card file's stamp (size, times, inode and
the rules, as the card cache keys a file) or ``missing``, each address book file's and its write-ahead log's size
and modification time, the people file's stamp, the handles file's identity and mark (which index file, how far it
has followed it), and this layout's version. The rows are written in one transaction with the fingerprint and read
in one, so a reader never mixes two books.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memex.people.book import Book, Conflict, Person, fold, name_words, words_in
from memex.people.card_cache import VERSION, stamp_of
from memex.people.handles import Rules, normalize


def fingerprint(vcf_files: list[Path], address_books: list[Path], people_file: Path, handles_mark: str, rules: Rules) -> str:
    """What a book is made from, in one string (see the module's docstring)."""
    digest = hashlib.sha256(f"{VERSION}\0{rules}\0{handles_mark}\0{_stat(people_file)}".encode())
    for file in vcf_files:
        digest.update(f"\0{file.absolute()}\0{stamp_of(file, rules) or 'missing'}".encode())
    for file in address_books:
        digest.update(f"\0{file.absolute()}\0{_stat(file)}\0{_stat(Path(f'{file}-wal'))}".encode())
    return digest.hexdigest()


def _stat(file: Path) -> str:
    try:
        st = os.stat(file)
    except OSError:
        return "missing"
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


@contextmanager
def _snapshot(conn: sqlite3.Connection, made_from: str) -> Iterator[bool]:
    """One read transaction over the kept book: whether it is the one made from ``made_from``."""
    conn.execute("BEGIN")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'book'").fetchone()
        yield row is not None and row[0] == made_from
    finally:
        conn.execute("COMMIT")


def load(conn: sqlite3.Connection, made_from: str) -> tuple[Book, list[str]] | None:
    """The book kept under ``made_from`` and the warnings its making gave, or None when the kept one is another's."""
    try:
        with _snapshot(conn, made_from) as ours:
            if not ours:
                return None
            (warnings,) = conn.execute("SELECT value FROM meta WHERE key = 'book_warnings'").fetchone()
            book = Book()
            people, owner = book.people, book.owner
            for pid, name, origins, handles in conn.execute("SELECT id, name, origins, handles FROM persons ORDER BY rowid"):
                mine = set(handles.split("\n")) if handles else set()
                people[pid] = Person(pid, name, mine, origins.split("\n") if origins else [])
                owner.update(dict.fromkeys(mine, pid))
            book.conflicts = [
                Conflict(h, tuple(json.loads(c))) for h, c in conn.execute("SELECT handle, claimants FROM conflicts ORDER BY rowid")
            ]
        return book, list(json.loads(warnings))
    except (sqlite3.Error, ValueError, KeyError, TypeError):  # busy, damaged or half of another layout: made afresh
        return None


def kept_warnings(conn: sqlite3.Connection, made_from: str) -> list[str] | None:
    """The warnings the making of the book kept under ``made_from`` gave; None when the kept book is another's."""
    try:
        row = conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'book'), (SELECT value FROM meta WHERE key = 'book_warnings')"
        ).fetchone()
        return list(json.loads(row[1])) if row[0] == made_from else None
    except (sqlite3.Error, ValueError, TypeError):
        return None


def find(conn: sqlite3.Connection, made_from: str, ref: str, rules: Rules) -> list[Person] | None:
    """The people ``ref`` names in the book kept under ``made_from``, as :meth:`Book.find` answers, read from the
    cache alone (the ID, the name and the handle are looked up; only words of a name read every name); None when
    the kept book is another's."""
    try:
        with _snapshot(conn, made_from) as ours:
            if not ours:
                return None
            ids = [pid for (pid,) in conn.execute("SELECT id FROM persons WHERE id = ?", (ref,))]
            if not ids:
                ids = [pid for (pid,) in conn.execute("SELECT id FROM persons WHERE fold = ? ORDER BY rowid", (fold(ref),))]
            if not ids:
                handle = normalize(ref, rules)
                ids = [pid for (pid,) in conn.execute("SELECT pid FROM owners WHERE handle = ?", (handle,))] if handle else []
            if not ids:
                words = name_words(ref)
                ids = [pid for pid, name in conn.execute("SELECT id, name FROM persons ORDER BY rowid") if words and words_in(words, name)]
            out = []
            for pid in ids:
                ((name, origins, handles),) = conn.execute("SELECT name, origins, handles FROM persons WHERE id = ?", (pid,))
                out.append(Person(pid, name, set(handles.split("\n")) if handles else set(), origins.split("\n") if origins else []))
            return out
    except (sqlite3.Error, ValueError):
        return None


def store(conn: sqlite3.Connection, made_from: str, book: Book, warnings: list[str]) -> None:
    """Keep ``book`` (and the warnings its making gave) under ``made_from``; a busy cache keeps nothing."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        for table in ("persons", "owners", "conflicts"):
            conn.execute(f"DELETE FROM {table}")
        conn.executemany(
            "INSERT INTO persons VALUES (?, ?, ?, ?, ?)",
            [(p.id, p.name, fold(p.name), "\n".join(p.origins), "\n".join(sorted(p.handles))) for p in book.people.values()],
        )
        conn.executemany("INSERT INTO owners VALUES (?, ?)", book.owner.items())
        conn.executemany(
            "INSERT INTO conflicts VALUES (?, ?)", [(c.handle, json.dumps(c.claimants, ensure_ascii=False)) for c in book.conflicts]
        )
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('book', ?), ('book_warnings', ?)", (made_from, json.dumps(warnings, ensure_ascii=False))
        )
        conn.execute("COMMIT")
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
