"""Cards parsed once and kept, and the book kept with them (``<state_dir>/people/cache.sqlite``): owner-only, parsed
again when a card file changes, made again when unreadable, safe with several commands at once, never written by the
read-only reader, and a person looked up in it answers as the book made afresh does."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memex.config import load
from memex.people import card_cache, cards, open_people
from memex.search import index_path
from memex.search.schema import PEOPLE_ROWS
from tests.core import people_archive as archive

CARDS = "".join(f"BEGIN:VCARD\nVERSION:3.0\nFN:Person {i}\nTEL:+49 170 {i:07d}\nEMAIL:p{i}@example.com\nEND:VCARD\n" for i in range(50))


def setup_world(tmp: Path) -> Path:
    """50 cards in a contacts file under [people], and the state folder (a poll would have made it); the config's path."""
    (tmp / "contacts.vcf").write_text(CARDS)
    (tmp / "state").mkdir(mode=0o700)
    cfg = tmp / "config.toml"
    cfg.write_text(f'state_dir = "{tmp / "state"}"\n[people]\nvcards = ["{tmp / "contacts.vcf"}"]\nregion = "DE"\n')
    return cfg


def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that grows by one origin for each card vobject parses from now on."""
    seen: list[str] = []
    real = cards._card

    def counting(block: bytes, origin: str) -> cards.Card | None:
        seen.append(origin)
        return real(block, origin)

    monkeypatch.setattr(cards, "_card", counting)
    return seen


def names(cfg: Path) -> dict[str, str | None]:
    """Everyone's ID and name, as open_people gives them now."""
    people = open_people(load(cfg))
    try:
        return {p.id: p.name for p in people.book.people.values()}
    finally:
        people.close()


def test_cards_are_parsed_once_and_again_when_their_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first command parses the 50 cards, the second none (the book read whole from the cache); a change of one
    name that keeps the file's size is seen at once; the cache is 0600 in a 0700 folder. Without a state folder, no
    cache (a people command makes no state folder for it)."""
    cfg = setup_world(tmp_path)
    count = parsed(monkeypatch)
    assert names(cfg)["person-7"] == "Person 7" and len(count) == 50
    assert names(cfg)["person-7"] == "Person 7" and len(count) == 50
    cache = card_cache.path(tmp_path / "state")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600 and stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    vcf = tmp_path / "contacts.vcf"
    vcf.write_text(CARDS.replace("FN:Person 7\n", "FN:Persen 7\n"))  # the same size
    assert names(cfg).get("persen-7") == "Persen 7" and len(count) == 100
    (tmp_path / "state" / "people" / "cache.sqlite").unlink()
    (tmp_path / "state" / "people").rmdir()
    (tmp_path / "state").rmdir()
    assert names(cfg).get("persen-7") == "Persen 7" and len(count) == 150 and not (tmp_path / "state").exists()


def test_an_unreadable_cache_is_made_again(tmp_path: Path) -> None:
    """A cache file of garbage, or of another program's SQLite, is removed and made again; the answer is the same."""
    cfg = setup_world(tmp_path)
    want = names(cfg)
    cache = card_cache.path(tmp_path / "state")
    cache.write_bytes(b"not a database at all" * 100)
    assert names(cfg) == want
    cache.unlink()
    import sqlite3

    other = sqlite3.connect(cache)
    other.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('version', '0');")
    other.close()
    assert names(cfg) == want and names(cfg) == want


def test_several_commands_at_once_each_get_the_whole_book(tmp_path: Path) -> None:
    """Four `memex people --json` at once over a cold cache, then four over a warm one: each lists all 50 people."""
    cfg = setup_world(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("MEMEX_CONFIG", "MEMEX_DEBUG")}
    for _ in range(2):
        procs = [subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "people", "--json"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]  # fmt: skip
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and err == "" and out.count('"id"') == 50, err


def test_the_read_only_reader_writes_no_cache(tmp_path: Path) -> None:
    """``memex mcp``'s reader (read_only) leaves the state folder without a cache, and reads a kept one as it is."""
    cfg = setup_world(tmp_path)
    people = open_people(load(cfg), read_only=True)
    people.close()
    assert not card_cache.path(tmp_path / "state").exists()
    want = names(cfg)
    before = card_cache.path(tmp_path / "state").stat().st_mtime_ns
    people = open_people(load(cfg), read_only=True)
    try:
        assert {p.id: p.name for p in people.book.people.values()} == want
    finally:
        people.close()
    assert card_cache.path(tmp_path / "state").stat().st_mtime_ns == before


def test_a_read_only_reader_makes_the_book_once_per_process_until_its_inputs_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no cache on disk (the read-only reader writes none), a second read-only open in the same process (a
    server's next page) parses no card and gets the same book; a changed card file is read again at once."""
    cfg = setup_world(tmp_path)
    count = parsed(monkeypatch)
    first = open_people(load(cfg), read_only=True)
    first.close()
    assert len(count) == 50 and not card_cache.path(tmp_path / "state").exists()
    again = open_people(load(cfg), read_only=True)
    again.close()
    assert len(count) == 50 and again.book is first.book
    (tmp_path / "contacts.vcf").write_text(CARDS.replace("FN:Person 7\n", "FN:Person Seven\n"))
    changed = open_people(load(cfg), read_only=True)
    changed.close()
    assert len(count) == 100 and "Person Seven" in {p.name for p in changed.book.people.values()}


def test_a_person_found_in_the_kept_book_is_the_one_the_book_finds(tmp_path: Path) -> None:
    """Over the five-source archive: each reference (ID, name, words of it, a handle written nationally, nobody,
    both Annas) finds the same people with the same handles in the cache as in the book made afresh."""
    cfg = archive.indexed(tmp_path)
    config = load(cfg)
    open_people(config, index=index_path(config.state_dir), index_rows=PEOPLE_ROWS).close()  # the book made and kept
    for ref in ("anna-berg", "Anna Berg", "Anna B", "0170-1234567", "ANNA@example.com", "Anna", "zelda", "bob"):
        kept = open_people(config, index=index_path(config.state_dir), index_rows=PEOPLE_ROWS)
        try:
            fast = [(p.id, p.name, p.handles, sorted(p.origins)) for p in kept.find(ref)]
            whole = [(p.id, p.name, p.handles, sorted(p.origins)) for p in kept.book.find(ref, kept.settings.rules)]
        finally:
            kept.close()
        assert fast == whole, ref
