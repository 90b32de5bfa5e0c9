"""The people layer's edges (issue 40; harness: tests/core/bad_inputs.py): values a decision would write that memex
could not read back, a broken people file named by line and column, cards as other programs write them (a byte order
mark, UTF-16, a legacy charset, words in a TEL, a vCard 2.1 photo), and a search naming nobody or several people."""

from __future__ import annotations

import base64
import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from memex.errors import ConfigError
from memex.people import Settings, write_decisions
from memex.people.book import Decision
from memex.people.handles import Rules
from memex.people.seen import _handles
from tests.conftest import run_cli
from tests.core import people_archive as archive
from tests.core.bad_inputs import Case, run_case
from tests.core.test_bad_inputs_people import CARD, world

LATIN1 = "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Berit Müller\r\nTEL:+49 30 1234567\r\nEND:VCARD\r\n"
PHOTO = base64.b64encode(bytes(range(256)) * 12).decode()
OUTLOOK_PHOTO = (  # vCard 2.1 as Outlook writes a photo: base64 lines unfolded, a blank line after
    "BEGIN:VCARD\r\nVERSION:2.1\r\nN:Doe;John\r\nFN:John Doe\r\nTEL;CELL;VOICE:+1 555 0100\r\n"
    "PHOTO;TYPE=JPEG;ENCODING=BASE64:" + "\r\n".join(PHOTO[i : i + 76] for i in range(0, len(PHOTO), 76)) + "\r\n\r\n"
    "EMAIL;PREF;INTERNET:john@example.com\r\nEND:VCARD\r\n"
)
WORDS_IN_TEL = (
    "BEGIN:VCARD\nVERSION:3.0\nFN:Anna Berg\nTEL;TYPE=CELL:Handy\nTEL;TYPE=FAX:Fax privat\nEMAIL:anna@example.com\nEND:VCARD\n"
    "BEGIN:VCARD\nVERSION:3.0\nFN:Bob Stone\nTEL;TYPE=PAGER:Pager\nTEL;TYPE=CELL:Handy\nEMAIL:bob@example.com\nEND:VCARD\n"
)


def raw_card(data: bytes) -> Callable[[Path], Path]:
    """A world whose contacts file holds exactly ``data`` (bytes: a mark, another encoding)."""
    base = world()

    def setup(tmp: Path) -> Path:
        cfg = base(tmp)
        (tmp / "contacts.vcf").write_bytes(data)
        return cfg

    return setup


def indexed(tmp: Path) -> Path:
    """The five-source people archive stored and indexed, Anna's card and the people file beside the config."""
    return archive.indexed(tmp)


PEOPLE_FILE = ("state", "store", "people.toml")  # what a decision may write
CASES = [
    # issue 40 §1: a decision is held to the rule the file is read with, or refused with nothing written
    Case(
        "split-as-bad-id",
        ("people", "split", "anna-berg", "anna@example.com", "--as", "Bad ID!"),
        2,
        "'Bad ID!' is not a person ID",
        world(),
    ),
    Case(
        "split-as-toml-injection",
        ("people", "split", "anna-berg", "anna@example.com", "--as", 'x"] evil = ["'),
        2,
        "is not a person ID",
        world(),
    ),
    Case("split-as-too-long", ("people", "split", "anna-berg", "anna@example.com", "--as", "a" * 41), 2, "at most 40", world()),
    Case("name-empty", ("people", "name", "anna-berg", ""), 2, "the name is empty", world()),
    Case("name-blank", ("people", "name", "anna-berg", "   "), 2, "the name is empty", world()),
    Case("split-name-empty", ("people", "split", "anna-berg", "anna@example.com", "--name", ""), 2, "--name is empty", world()),
    Case("split-handle-plus", ("people", "split", "anna-berg", "+++"), 2, "'+++' is not a handle of anna-berg", world()),
    Case("split-handle-at", ("people", "split", "anna-berg", "@"), 2, "'@' is not a handle of anna-berg", world()),
    Case("split-handle-empty", ("people", "split", "anna-berg", ""), 2, "'' is not a handle of anna-berg", world()),
    Case("file-handle-empty", ("people",), 2, "person.anna.handles: '' is not a handle", world(toml='[person.anna]\nhandles = [""]\n')),
    Case(
        "file-handle-plus", ("people",), 2, "person.anna.handles: '+++' is not a handle", world(toml='[person.anna]\nhandles = ["+++"]\n')
    ),
    Case("file-not-at", ("people",), 2, "person.anna.not: '@' is not a handle", world(toml='[person.anna]\nhandles = []\nnot = ["@"]\n')),
    Case("file-name-empty", ("people",), 2, "person.anna.name must be a name", world(toml='[person.anna]\nname = ""\n')),
    Case(
        "file-line-and-column", ("people",), 2, "Invalid value (at line 3, column 6)", world(toml='[person.anna]\nname = "A"\nnot == 1\n')
    ),
    # issue 40 §4 and §6: cards as other programs write them
    Case("card-utf16-bom", ("people",), 0, "anna-berg", raw_card(CARD.encode("utf-16")), stream="stdout"),
    Case("card-utf16-be-bom", ("people",), 0, "anna-berg", raw_card(b"\xfe\xff" + CARD.encode("utf-16-be")), stream="stdout"),
    Case("card-utf16-le-no-bom", ("people",), 0, "anna-berg", raw_card(CARD.replace("\n", "\r\n").encode("utf-16-le")), stream="stdout"),
    Case("card-utf8-bom", ("people",), 0, "anna-berg", raw_card(b"\xef\xbb\xbf" + CARD.encode()), stream="stdout"),
    Case("card-latin1", ("people",), 0, "Berit Müller", raw_card(LATIN1.encode("latin-1")), stream="stdout"),
    Case(
        "card-cp1252",
        ("people",),
        0,
        "Berit Müller \u2013 Büro",
        raw_card(LATIN1.replace("Müller", "Müller \u2013 Büro").encode("cp1252")),
        stream="stdout",
    ),
    Case("card-tel-words", ("people", "conflicts"), 0, "", raw_card(WORDS_IN_TEL.encode()), stream="stdout", lines=0),
    Case("card-outlook-photo", ("people",), 0, "", raw_card(OUTLOOK_PHOTO.encode()), lines=0),
    # issue 40 §4 and §6: a search naming nobody says so; naming several is one line, exit 2, as `people show` says it
    Case("with-nobody", ("search", "with:nosuchperson"), 0, "with:nosuchperson names no person", indexed, owned=PEOPLE_FILE),
    Case("with-several", ("search", "with:Anna"), 2, "with:Anna names 2 people (anna-berg, anna-schmidt)", indexed, owned=PEOPLE_FILE),
    Case("from-several", ("search", "from:Anna"), 2, "from:Anna names 2 people", indexed, owned=PEOPLE_FILE),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_people_edge_gets_its_one_line(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, nothing raw on the terminal, nothing outside the configured paths changed
    (a refused decision leaves no people file behind: it is not among the paths a row may write)."""
    run_case(case, tmp_path)


def test_a_hostile_name_and_handle_are_written_as_toml_and_read_back(tmp_path: Path) -> None:
    """`people name` with quotes, brackets, a newline and DEL, and `split --name` likewise, write a people file that
    TOML reads back to exactly those values, and memex then shows the person under that name."""
    cfg = world()(tmp_path)
    hostile = 'A"] evil = ["x\n[person.root]\x7f'
    assert run_cli("people", "name", "anna-berg", hostile, config=cfg).returncode == 0
    assert run_cli("people", "split", "anna-berg", "anna@example.com", "--as", "work", "--name", "x'''\"\"\"", config=cfg).returncode == 0
    doc = tomllib.loads((tmp_path / "people.toml").read_text())
    assert set(doc["person"]) == {"anna-berg", "work"}
    assert doc["person"]["anna-berg"]["name"] == hostile and doc["person"]["work"]["name"] == "x'''\"\"\""
    listed = {p["id"]: p["name"] for p in json.loads(run_cli("people", "--json", config=cfg).stdout)}
    assert listed == {"anna-berg": hostile, "work": "x'''\"\"\""}


def test_a_recipient_with_a_display_name_is_one_handle_as_a_sender_is() -> None:
    """A mail's index row lists its addresses, then their display names: `Yan Unknown` is the name of yan@..., never a
    handle of its own; a Messenger row (names only) keeps its names as handles."""
    mail = list(_handles("me@example.com", "Me", "yan@example.com\nbob@example.com\nYan Unknown\nBob Stone", Rules()))
    assert mail == [
        ("email:me@example.com", 0, "Me"),
        ("email:yan@example.com", 1, "Yan Unknown"),
        ("email:bob@example.com", 1, "Bob Stone"),
    ]
    partly = list(_handles("me@example.com", "", "yan@example.com\nbob@example.com\nYan Unknown", Rules()))
    assert [h for h, _, _ in partly] == ["email:me@example.com", "email:yan@example.com", "email:bob@example.com"]
    chat = list(_handles("", "Anna Berg", "Bob Stone\nCarla Diaz", Rules()))
    assert [h for h, _, _ in chat] == ["name:anna berg", "name:bob stone", "name:carla diaz"]


@pytest.mark.parametrize(
    "bad",
    [Decision("Bad ID!", None, ("anna@example.com",), ()), Decision('x"] evil = ["', None, (), ()), Decision("anna", "", (), ()),
     Decision("anna", None, ("+++",), ()), Decision("anna", None, (), ("@",)), Decision("anna", None, ("",), ())],
    ids=["id", "id-injection", "name-empty", "handle-plus", "not-at", "handle-empty"],
)  # fmt: skip
def test_the_writer_refuses_a_value_memex_could_not_read_back(tmp_path: Path, bad: Decision) -> None:
    """Whatever a caller hands the people-file writer (the CLI checks first; a script or another front end may not),
    a value the reading rule refuses is a ConfigError naming it, and no file is written."""
    s = Settings(Rules(), (), None, tmp_path / "people.toml")
    with pytest.raises(ConfigError, match="nothing was written"):
        write_decisions(s, [Decision("bob", "Bob", ("bob@example.com",), ()), bad])
    assert not s.file.exists()
