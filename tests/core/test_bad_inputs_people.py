"""Bad inputs of the people layer through the real CLI (harness: tests/core/bad_inputs.py): a broken people file or
[people] table, unreadable contacts, a person that is nobody or several, hostile names on a card."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.core.bad_inputs import Case, run_case

CARD = "BEGIN:VCARD\nVERSION:3.0\nFN:Anna Berg\nTEL:+491701234567\nEMAIL:anna@example.com\nEND:VCARD\n"


def world(people: str = "", toml: str | None = None, card: str = CARD) -> Callable[[Path], Path]:
    """A config whose [people] table holds ``people`` (plus a contacts file), and a people file with ``toml``."""

    def setup(tmp: Path) -> Path:
        (tmp / "contacts.vcf").write_text(card)
        if toml is not None:
            (tmp / "people.toml").write_text(toml)
        cfg = tmp / "config.toml"
        vcards = "" if "vcards" in people else f'vcards = ["{tmp / "contacts.vcf"}"]\n'
        cfg.write_text(f'state_dir = "{tmp / "state"}"\n[people]\n{vcards}{people}')
        return cfg

    return setup


CASES = [
    Case("people-file-not-toml", ("people",), 2, "not a TOML file memex can read", world(toml="[person.anna\n")),
    Case("people-file-unknown-key", ("people",), 2, "unknown key 'persons'", world(toml="[persons.anna]\nname = 'A'\n")),
    Case("people-file-bad-id", ("people",), 2, "lower-case letters, digits and '-'", world(toml='[person."Anna B"]\nhandles = []\n')),
    Case(
        "people-file-handles-not-a-list",
        ("people",),
        2,
        "person.anna.handles must be a list of strings",
        world(toml="[person.anna]\nhandles = 'x'\n"),
    ),
    Case("people-region-unknown", ("people",), 2, "is not a region libphonenumber knows", world('region = "XX"\n')),
    Case("people-vcards-not-a-list", ("people",), 2, "people.vcards", world("vcards = 3\n")),
    Case("people-unknown-key", ("people",), 2, "unknown key", world('phone_region = "DE"\n')),
    Case("people-contacts-missing", ("people",), 0, "cannot read the contacts file", world('vcards = ["nowhere.vcf"]\n'), lines=1),
    Case("people-contacts-not-vcard", ("people",), 0, "no vCard in it", world(card="hello\n"), lines=1),
    Case("people-show-nobody", ("people", "show", "Zelda"), 2, "no person matches 'Zelda'", world()),
    Case("people-merge-same", ("people", "merge", "anna-berg", "anna@example.com"), 2, "are one person already", world()),
    Case("people-split-not-theirs", ("people", "split", "anna-berg", "bob@example.org"), 2, "is not a handle of anna-berg", world()),
    Case(
        "people-hostile-name",
        ("people",),
        0,
        "\\x1b]0;",
        world(card=CARD.replace("Anna Berg", "Anna\x1b]0;owned\x07 Berg")),
        stream="stdout",
        lines=1,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_people_input_gets_one_line(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, nothing raw on the terminal, nothing outside the configured paths changed."""
    run_case(case, tmp_path)
