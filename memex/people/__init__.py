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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memex.config import PEOPLE_FILE, Config, Keys
from memex.errors import ConfigError
from memex.people.book import Book, Decision, Person, build, decisions_from, render_decisions
from memex.people.handles import Rules, valid_region

DEFAULT_FILE = PEOPLE_FILE
_KEYS = ("vcards", "address_book", "region", "gmail_rules", "file")

__all__ = ["Book", "People", "Person", "Settings", "handles_of", "open_people", "read_decisions", "settings", "write_decisions"]


@dataclass(frozen=True)
class Settings:
    """The ``[people]`` table, checked."""

    rules: Rules
    vcards: tuple[Path, ...]
    address_book: Path | None
    file: Path


@dataclass
class People:
    """The book, the handles of the indexed messages (None without an index), and what could not be read."""

    book: Book
    settings: Settings
    conn: sqlite3.Connection | None
    warnings: list[str]

    def close(self) -> None:
        """Close the handles connection."""
        if self.conn is not None:
            self.conn.close()


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
        return decisions_from(doc, str(s.file))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"not a TOML file memex can read ({exc.__class__.__name__}); fix it or move it away", path=s.file) from None
    except ValueError as exc:
        raise ConfigError(str(exc).removeprefix(f"{s.file}: ") + "; see docs/people.md", path=s.file) from None


def write_decisions(s: Settings, decisions: list[Decision]) -> None:
    """Write your decisions whole (a temporary file renamed over the old one: never half written)."""
    from memex.state.files import atomic_replace

    s.file.parent.mkdir(parents=True, exist_ok=True)
    atomic_replace(s.file, render_decisions(decisions).encode("utf-8"), mode=0o644)


def open_people(cfg: Config, *, index: Path | None = None, read_only: bool = False) -> People:
    """Everyone, from the config's cards, your decisions and the indexed messages (``index``: the search index file).

    ``read_only`` (``memex mcp``): the handles file is read as it is and never brought up to date
    (:func:`memex.people.seen.read_only`)."""
    from memex.people import cards, seen
    from memex.people.book import Seen

    s = settings(cfg)
    decisions = read_decisions(s)
    got = cards.Read()
    for path in s.vcards:
        cards.read_vcards(path, got)
    if s.address_book is not None:
        cards.read_address_book(s.address_book, got)
    conn = None
    if index is not None and index.exists():
        conn = seen.read_only(index, s.rules) if read_only else seen.follow(index, s.rules)
    observed = [Seen(h, n, names, mine) for h, n, names, mine in seen.seen(conn)] if conn is not None else []
    return People(build(decisions, got.cards, observed, s.rules), s, conn, got.warnings)


def handles_of(people: People, ref: str) -> tuple[list[Person], set[str]]:
    """The people ``ref`` names (ID, name or handle) and all their handles together."""
    found = people.book.find(ref, people.settings.rules)
    return found, {h for p in found for h in p.handles}


def summary(people: People, person: Person) -> dict[str, Any]:
    """One person as ``memex people --json`` shows them: ID, name, handles, messages per source, origins."""
    from memex.people import seen
    from memex.people.handles import shown

    counts = seen.counts(people.conn, person.handles) if people.conn is not None else {}
    return {"id": person.id, "name": person.name, "handles": sorted(shown(h) for h in person.handles),
            "messages": counts, "from": sorted(set(person.origins))}  # fmt: skip
