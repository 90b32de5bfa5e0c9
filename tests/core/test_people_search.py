"""``with:``, ``from:`` and ``to:`` taking a person, on a generated archive over five sources (people_archive.py)
checked against its hand-made answer key; decisions take effect without a poll and survive ``memex index rebuild``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.core import people_archive as archive


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """The archive stored and indexed, Anna's card and the user's people file beside the config."""
    return archive.indexed(tmp_path)


def found(cfg: Path, *query: str) -> set[tuple[str, str]]:
    """(source, native ID) of everything ``memex search`` finds."""
    out = run_cli("search", "-n", "1000", "--json", *query, config=cfg)
    assert out.returncode == 0, out.stderr
    return {(r["source"], r["native_id"]) for r in json.loads(out.stdout)}


def test_with_a_person_finds_exactly_their_messages_in_every_source(world: Path) -> None:
    """with:PERSON by ID, by name, by words of the name, and by any handle (written the national way) is the answer
    key: her iMessages (number from her card), mails (address, any case), Signal (ACI by your decision), Teams (ID and
    UPN by your decision) and Messenger (her name); the other Anna and Bob never."""
    for ref in ("anna-berg", '"Anna Berg"', '"Anna B"', "0170-1234567", "ANNA@example.com"):
        assert found(world, f"with:{ref}") == archive.ANNA_BERG, ref
    assert found(world, "from:anna-berg") == archive.ANNA_BERG_FROM
    assert found(world, "to:anna-berg") == archive.ANNA_BERG - archive.ANNA_BERG_FROM
    assert found(world, "with:anna-berg", "lease") == {("mail", "<a1@example.com>"), ("mail", "<m1@example.net>")}
    assert found(world, "with:anna-berg", "OR", "with:bob") >= archive.ANNA_BERG


def test_a_value_that_names_nobody_is_matched_as_words(world: Path) -> None:
    """with:zelda names no person: matched as words in sender and recipients (nothing here), never an error."""
    assert found(world, "with:zelda") == set()
    assert ("mail", "<b2@example.org>") in found(world, "with:bob")


def test_decisions_take_effect_at_once_and_survive_a_rebuild(world: Path) -> None:
    """Removing Anna's ACI from the people file drops her Signal messages from with: at once (no poll, no rebuild);
    putting it back and rebuilding the index gives the answer key again."""
    people = world.parent / "people.toml"
    people.write_text(archive.PEOPLE_TOML.replace(f'"{archive.ANNA_ACI}", ', ""))
    assert found(world, "with:anna-berg") == {k for k in archive.ANNA_BERG if k[0] != "sig"}
    people.write_text(archive.PEOPLE_TOML)
    assert run_cli("index", "rebuild", config=world).returncode == 0
    assert found(world, "with:anna-berg") == archive.ANNA_BERG
    listed = {p["id"]: p for p in json.loads(run_cli("people", "--json", config=world).stdout)}
    assert listed["anna-berg"]["messages"] == {"fb": 2, "mail": 3, "phone": 3, "sig": 2, "work": 2}
