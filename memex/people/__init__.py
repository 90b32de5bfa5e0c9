"""People across sources: one person's phone numbers, addresses and IDs in every source, as one.

An index-level layer (docs/people.md): records in the store stay as the sources gave them. Who is who is decided at
query time from three things, none of which needs a re-poll or a rebuild when it changes:

- the ``[people]`` table of the config: ``vcards`` (files or folders of ``.vcf``), ``address_book`` (the Mac's
  AddressBook folder or file), ``region`` (the default phone region, e.g. ``"DE"``), ``gmail_rules``, and ``file``
  (your decisions, by default ``people.toml`` beside the config);
- your decisions file (:func:`memex.people.book.decisions_from`);
- the handles the search index's messages name (:mod:`memex.people.seen`).

:func:`open_people` gives the book and the handles connection; ``from:``, ``to:`` and ``with:`` in a search take a
person through :func:`handles_of`.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memex.config import PEOPLE_FILE, Config, Keys
from memex.errors import ConfigError
from memex.people.book import Book, Decision, Person, build, decisions_from, render_decisions
from memex.people.handles import Rules, valid_region

DEFAULT_FILE = PEOPLE_FILE
_KEYS = ("vcards", "address_book", "region", "gmail_rules", "file")

__all__ = [
    "Book",
    "People",
    "Person",
    "Settings",
    "handles_of",
    "open_people",
    "read_decisions",
    "settings",
    "summaries",
    "summary",
    "write_decisions",
]


@dataclass(frozen=True)
class Settings:
    """The ``[people]`` table, checked."""

    rules: Rules
    vcards: tuple[Path, ...]
    address_book: Path | None
    file: Path


class People:
    """The book, the handles of the indexed messages (None without an index), and what could not be read.

    A book kept from an earlier command (:mod:`memex.people.book_cache`) is read only when asked for: a search naming
    one person finds them in the cache (:meth:`find`) without reading everyone."""

    def __init__(self, book: Book | None, settings: Settings, conn: sqlite3.Connection | None, warnings: list[str],
                 kept: Callable[[], Book] | None = None, find_kept: Callable[[str], list[Person] | None] | None = None,
                 cache: sqlite3.Connection | None = None) -> None:  # fmt: skip
        self._book = book
        self.settings = settings
        self.conn = conn
        self.warnings = warnings
        self._kept = kept
        self._find_kept = find_kept
        self._cache = cache

    @property
    def book(self) -> Book:
        """Everyone (read from the cache on first use where it was kept)."""
        if self._book is None:
            assert self._kept is not None
            self._book = self._kept()
        return self._book

    def find(self, ref: str) -> list[Person]:
        """The people ``ref`` names, as :meth:`memex.people.book.Book.find` answers."""
        if self._book is None and self._find_kept is not None:
            found = self._find_kept(ref)
            if found is not None:
                return found
        return self.book.find(ref, self.settings.rules)

    def close(self) -> None:
        """Close the handles connection (and the cache, where a kept book was never read whole)."""
        for conn in (self.conn, self._cache):
            if conn is not None:
                conn.close()


def settings(cfg: Config) -> Settings:
    """The checked ``[people]`` table (ConfigError naming the key on a mistake)."""
    keys = Keys(cfg.people, path=cfg.path, prefix="people", base_dir=cfg.path.parent.absolute() if cfg.path else Path.cwd())
    vcards = tuple(keys.base_dir / Path(v).expanduser() for v in keys.strings("vcards", default=[]))
    book = keys.text("address_book", default=None)
    if book == "auto":  # the Mac's own, where it is
        found = Path.home() / "Library" / "Application Support" / "AddressBook"
        address_book = found if sys.platform == "darwin" or found.exists() else None
    else:
        address_book = keys.path("address_book", default=None)
    region = keys.text("region", default=None)
    if region is not None and not valid_region(region):
        raise keys.error("region", f'{region!r} is not a region libphonenumber knows; use a two-letter country code such as "DE" or "US"')
    gmail = keys.flag("gmail_rules", default=False)
    default_file = (cfg.path.parent if cfg.path else Path.cwd()) / DEFAULT_FILE
    file = keys.path("file", default=None) or default_file
    keys.finish(_KEYS)
    return Settings(Rules(region.upper() if region else None, gmail), vcards, address_book, file)


def read_decisions(s: Settings) -> list[Decision]:
    """Your decisions (an absent file: none); ConfigError naming the file and key for a file memex cannot read."""
    import tomllib

    try:
        raw = s.file.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigError(f"cannot read your people file ({exc.strerror})", path=s.file) from None
    try:
        doc = tomllib.loads(raw.decode("utf-8-sig"))
        return decisions_from(doc, str(s.file), s.rules)
    except UnicodeDecodeError:
        raise ConfigError("not a TOML file memex can read (it is not UTF-8 text); fix it or move it away", path=s.file) from None
    except tomllib.TOMLDecodeError as exc:  # its text names the line and column, as config.toml's error does
        raise ConfigError(f"not a TOML file memex can read: {exc}; fix it or move it away", path=s.file) from None
    except ValueError as exc:
        raise ConfigError(str(exc).removeprefix(f"{s.file}: ") + "; see docs/people.md", path=s.file) from None


def write_decisions(s: Settings, decisions: Iterable[Decision]) -> None:
    """Write your decisions whole (a temporary file renamed over the old one: never half written), each value held
    to the rule the file is read with (:func:`memex.people.book.render_decisions`): ConfigError, and nothing written,
    for one memex could not read back."""
    from memex.state.files import atomic_replace

    try:
        text = render_decisions(decisions, s.rules)
    except ValueError as exc:
        raise ConfigError(str(exc).removeprefix("people.toml: ") + "; nothing was written", path=s.file) from None
    s.file.parent.mkdir(parents=True, exist_ok=True)
    atomic_replace(s.file, text.encode("utf-8"), mode=0o644)


# A read-only reader (the read model in ``memex serve``, ``memex mcp``) writes no cache; when none on disk matches
# (never made, or the inputs changed since a command kept one), the book it made is kept here for its process, under
# the same fingerprint the disk cache is keyed by (and the people file's and index's paths), so each page does not make it again (issue 42: 0.6 s at 100,000).
_MADE_READ_ONLY: dict[str, tuple[Book, list[str]]] = {}


def open_people(cfg: Config, *, index: Path | None = None, read_only: bool = False, index_rows: str | None = None) -> People:
    """Everyone, from the config's cards, your decisions and the indexed messages (``index``: the search index file).

    ``index_rows``: the index's query of its rows after a rowid (``memex.search.schema.PEOPLE_ROWS``), which the handles
    file is brought up to date with; without it (or ``read_only``) the handles file is only read as it is.

    ``read_only`` (``memex mcp``): the handles file is read as it is and never brought up to date
    (:func:`memex.people.seen.read_only`)."""
    from memex.people import book_cache, card_cache, cards, seen
    from memex.people.book import Seen

    s = settings(cfg)
    conn = None
    if index is not None and index.exists():
        conn = seen.read_only(index, s.rules) if read_only or index_rows is None else seen.follow(index, s.rules, index_rows)
    files = card_cache.vcf_files(s.vcards)
    books = cards.address_book_files(s.address_book) if s.address_book is not None else []
    cache = card_cache.open_cache(cfg.state_dir, read_only=read_only)

    def make() -> tuple[Book, list[str]]:
        decisions = read_decisions(s)
        got = cards.Read()
        card_cache.read_kept(files, None if read_only else cache, s.rules, got)
        if s.address_book is not None:
            cards.read_address_book(s.address_book, got)
        observed = [Seen(h, n, names, mine) for h, n, names, mine in seen.seen(conn)] if conn is not None else []
        book = build(decisions, got.cards, observed, s.rules)
        if cache is not None and not read_only:
            book_cache.store(cache, made_from, book, got.warnings)
        return book, got.warnings

    # the fingerprint before the inputs are read: one changed meanwhile is read again next time, never kept stale
    made_from = book_cache.fingerprint(files, books, s.file, seen.mark(conn), s.rules)
    warnings = book_cache.kept_warnings(cache, made_from) if cache is not None else None
    if warnings is None:  # nothing kept from these very inputs: made (and kept)
        memo = f"{s.file.absolute()}\0{index}\0{made_from}"  # the fingerprint names no file that is missing
        if read_only and memo in _MADE_READ_ONLY:  # made by this process from the very same inputs
            if cache is not None:
                cache.close()
            book, warnings = _MADE_READ_ONLY[memo]
            return People(book, s, conn, list(warnings))
        try:
            book, warnings = make()
        finally:
            if cache is not None:
                cache.close()
        if read_only:
            _MADE_READ_ONLY.clear()  # the last inputs' book only: the memory of one book, never of every version
            _MADE_READ_ONLY[memo] = (book, list(warnings))
        return People(book, s, conn, warnings)

    assert cache is not None

    def kept() -> Book:  # read when everyone is asked for; made afresh if another command replaced it meanwhile
        found = book_cache.load(cache, made_from)
        return found[0] if found is not None else make()[0]

    return People(None, s, conn, warnings, kept, lambda ref: book_cache.find(cache, made_from, ref, s.rules), cache)


def handles_of(people: People, ref: str) -> tuple[list[Person], set[str]]:
    """The people ``ref`` names (ID, name or handle) and all their handles together."""
    found = people.find(ref)
    return found, {h for p in found for h in p.handles}


def summary(people: People, person: Person, named: set[str] | None = None) -> dict[str, Any]:
    """One person as ``memex people --json`` shows them: ID, name, handles, messages per source, origins.

    ``named``: the handles any indexed message names (:func:`memex.people.seen.named`), when summing up many people:
    someone none of whose handles is in it has no messages, and costs no query."""
    from memex.people import seen

    counted = person.handles if named is None else person.handles & named
    counts = seen.counts(people.conn, counted) if people.conn is not None and counted else {}
    return {"id": person.id, "name": person.name, "handles": sorted([h.partition(":")[2] or h for h in person.handles]),
            "messages": counts, "from": sorted(set(person.origins))}  # fmt: skip


def summaries(people: People) -> list[dict[str, Any]]:
    """Everyone, by ID, as :func:`summary` shows each (``memex people``): one query for the handles messages name,
    then one per person who has messages (200,000 cards, few of them in messages: a few seconds, not minutes)."""
    from memex.people import seen

    conn = people.conn
    named = seen.named(conn) if conn is not None else set()
    rows = []
    for p in sorted(people.book.people.values(), key=lambda p: p.id):
        counted = p.handles & named
        rows.append({"id": p.id, "name": p.name, "handles": sorted([h.partition(":")[2] or h for h in p.handles]),
                     "messages": seen.counts(conn, counted) if conn is not None and counted else {},
                     "from": sorted(set(p.origins)) if len(p.origins) > 1 else list(p.origins)})  # fmt: skip
    return rows
