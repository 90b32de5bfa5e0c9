"""People across sources (memex.people): handles compared as a user means them, real vCard exports, the Mac's
address book, the book's merge and conflict rules, and the decisions file through ``memex people``."""

from __future__ import annotations

import json
import sqlite3
import tomllib
from pathlib import Path

import pytest

from memex.people.book import Decision, Seen, build
from memex.people.cards import Card, Read, read_address_book, read_vcards
from memex.people.handles import Rules, normalize
from tests.conftest import run_cli

VCARDS = Path(__file__).parent / "data" / "vcards"

# (region, a number as people write it there, the same number in E.164): national formats of 12 countries
NATIONAL = [
    ("DE", "0170 1234567", "+491701234567"),
    ("DE", "(0170) 123-4567", "+491701234567"),
    ("US", "(201) 555-0123", "+12015550123"),
    ("GB", "07700 900123", "+447700900123"),
    ("FR", "06 12 34 56 78", "+33612345678"),
    ("NL", "06-12345678", "+31612345678"),
    ("IT", "312 345 6789", "+393123456789"),
    ("ES", "612 34 56 78", "+34612345678"),
    ("JP", "090-1234-5678", "+819012345678"),
    ("IN", "098765 43210", "+919876543210"),
    ("BR", "(11) 91234-5678", "+5511912345678"),
    ("AU", "0412 345 678", "+61412345678"),
    ("CH", "078 123 45 67", "+41781234567"),
]


@pytest.mark.parametrize(("region", "written", "e164"), NATIONAL, ids=[f"{r}-{w}" for r, w, _ in NATIONAL])
def test_a_national_number_is_the_person_of_its_e164_form(region: str, written: str, e164: str) -> None:
    """With the default region set, a number written the national way is the same handle as its E.164 form, so a
    card holding one and a message naming the other are one person."""
    rules = Rules(region)
    assert normalize(written, rules) == normalize(e164, rules) == f"tel:{e164}"
    book = build([], [Card("Anna Berg", [e164], "a.vcf#1")], [Seen(f"tel:{e164}", 3, {})], rules)
    (anna,) = book.find(written, rules)
    assert anna.name == "Anna Berg" and book.owner[normalize(written, rules) or ""] == anna.id


def test_addresses_ids_and_names_compare_as_meant() -> None:
    """Addresses are case-insensitive; Gmail's dots and +tags only with gmail_rules; UUIDs lower-cased; names folded."""
    plain, gmail = Rules(), Rules(gmail_rules=True)
    assert normalize("Anna.Berg@Example.COM") == normalize("anna.berg@example.com") == "email:anna.berg@example.com"
    assert normalize("a.n.na+list@gmail.com", gmail) == normalize("anna@googlemail.com", gmail) == "email:anna@gmail.com"
    assert normalize("a.n.na+list@gmail.com", plain) != normalize("anna@gmail.com", plain)
    assert normalize("8CE7B0B9-3C2A-4A8E-9F8E-1234567890AB") == "uuid:8ce7b0b9-3c2a-4a8e-9f8e-1234567890ab"
    assert normalize("  Anna   BERG ") == normalize("anna berg") == "name:anna berg"
    assert normalize("tel:+1-418-656-9254;ext=102") == "tel:+14186569254" and normalize("mailto:x@y.org") == "email:x@y.org"


def test_real_vcard_exports_are_read_card_by_card() -> None:
    """ez-vcard's real exports: 17 cards from 2.1, 3.0 and 4.0 files, quoted-printable names across soft line breaks,
    photos skipped, iPhone's CR CR LF, Lotus Notes' PROFILE, a card with invalid UTF-8 read leniently; no warning."""
    got = Read()
    read_vcards(VCARDS, got)
    assert got.warnings == [] and len(got.cards) == 17
    simon = next(c for c in got.cards if c.name == "Simon Perreault")
    assert {normalize(h) for h in simon.handles} == {"tel:+14186569254", "tel:+14182626501", "email:simon.perreault@viagenie.ca"}
    android = [c for c in got.cards if c.origin.startswith("John_Doe_ANDROID")]
    assert android[3].name == "Ñ Ñ Ñ Ñ Ñ Ñ Ñ Ñ Ñ Ñ Ñ" and "henry@company.com" in android[5].handles


def test_one_contact_exported_five_times_is_one_person_and_a_shared_address_with_another_name_a_conflict() -> None:
    """The same John Doe from Evolution, Gmail, iPhone, Mac and Outlook (names written differently) is one person;
    the Lotus Notes card names another man with John's address: that address is a conflict, given to neither."""
    got = Read()
    read_vcards(VCARDS, got)
    rules = Rules("US")
    book = build([], got.cards, [], rules)
    (john,) = book.find("+1 905 555 1234", rules)
    assert {"tel:+19055551234", "tel:+19057771234", "email:john.doe@ibm.cm"} <= john.handles
    assert len([o for o in john.origins if "John_Doe" in o]) == 5
    conflict = next(c for c in book.conflicts if c.handle == "email:john.doe@ibm.com")
    assert any("Johny" in c for c in conflict.claimants) and "email:john.doe@ibm.com" not in book.owner


def test_your_decisions_win_over_cards_and_never_lists_keep_a_handle_out() -> None:
    """A handle you give a person is theirs even against a card; `not` keeps a card's handle away from them; a
    handle you give two people is a conflict."""
    rules = Rules("DE")
    cards = [Card("Anna Berg", ["0170 1234567", "anna@work.example"], "c.vcf#1"), Card("Bob", ["bob@x.org"], "c.vcf#2")]
    mine = [Decision("anna", "Anna", ("anna@home.example", "bob@x.org", "+49 170 1234567"), ("anna@work.example",)),
            Decision("zed", None, ("anna@home.example",), ())]  # fmt: skip
    book = build(mine, cards, [Seen("email:anna@work.example", 2, {"Anna at work": 2})], rules)
    anna = book.people["anna"]
    assert "tel:+491701234567" in anna.handles and "email:bob@x.org" in anna.handles
    assert "email:anna@work.example" not in anna.handles and book.owner["email:anna@work.example"] != "anna"
    assert [c.handle for c in book.conflicts] == ["email:anna@home.example"]


def test_me_and_name_only_handles() -> None:
    """Handles a source marked as the user's are the person `me`; a Messenger name joins the one person of that name."""
    book = build([], [Card("Anna Berg", ["anna@example.com"], "c#1")],
                 [Seen("email:me@example.com", 4, {}, is_me=True), Seen("name:anna berg", 2, {"Anna Berg": 2})], Rules())  # fmt: skip
    assert book.owner["email:me@example.com"] == "me" and book.owner["name:anna berg"] == book.owner["email:anna@example.com"]


def address_book(path: Path) -> Path:
    """An AddressBook-v22.abcddb with the Mac's table and column names, two contacts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE ZABCDRECORD (Z_PK INTEGER PRIMARY KEY, Z_ENT INTEGER, ZFIRSTNAME VARCHAR, ZLASTNAME VARCHAR, ZORGANIZATION VARCHAR);
        CREATE TABLE ZABCDPHONENUMBER (Z_PK INTEGER PRIMARY KEY, ZOWNER INTEGER, ZFULLNUMBER VARCHAR, ZLABEL VARCHAR);
        CREATE TABLE ZABCDEMAILADDRESS (Z_PK INTEGER PRIMARY KEY, ZOWNER INTEGER, ZADDRESS VARCHAR, ZADDRESSNORMALIZED VARCHAR);
        INSERT INTO ZABCDRECORD VALUES (1, 19, 'Anna', 'Berg', NULL), (2, 19, NULL, NULL, 'Acme GmbH');
        INSERT INTO ZABCDPHONENUMBER VALUES (1, 1, '+49 170 1234567', '_$!<Mobile>!$_'), (2, 2, '030 1234567', NULL);
        INSERT INTO ZABCDEMAILADDRESS VALUES (1, 1, 'Anna@Example.com', 'anna@example.com');
    """)
    conn.commit()
    conn.close()
    return path


def test_the_macs_address_book_is_read_read_only(tmp_path: Path) -> None:
    """The AddressBook folder: its own file and each account's under Sources/; names from ZABCDRECORD (an
    organisation when there is no person's name), handles from the phone and address tables; the files unchanged."""
    root = tmp_path / "AddressBook"
    one = address_book(root / "AddressBook-v22.abcddb")
    address_book(root / "Sources" / "ABC-123" / "AddressBook-v22.abcddb")
    before = one.read_bytes()
    got = Read()
    read_address_book(root, got)
    assert [c.name for c in got.cards] == ["Anna Berg", "Acme GmbH", "Anna Berg", "Acme GmbH"] and got.warnings == []
    assert got.cards[0].handles == ["+49 170 1234567", "Anna@Example.com"] and one.read_bytes() == before
    broken = tmp_path / "not" / "AddressBook-v22.abcddb"
    broken.parent.mkdir()
    broken.write_text("not sqlite")
    bad = Read()
    read_address_book(broken, bad)
    assert bad.cards == [] and len(bad.warnings) == 1 and "not an address book memex can read" in bad.warnings[0]


def test_memex_people_merges_splits_and_names_into_the_people_file(tmp_path: Path) -> None:
    """`memex people merge/split/name` write people.toml beside the config (printing nothing off a terminal);
    `memex people` reads it back at once (no poll, no rebuild); a name that matches nobody is one line, exit 2."""
    vcf = tmp_path / "contacts.vcf"
    vcf.write_text("BEGIN:VCARD\nVERSION:3.0\nFN:Anna Berg\nTEL:0170 1234567\nEMAIL:anna@example.com\nEND:VCARD\n"
                   "BEGIN:VCARD\nVERSION:3.0\nFN:Anna B.\nEMAIL:anna@work.example\nEND:VCARD\n")  # fmt: skip
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n[people]\nvcards = ["{vcf}"]\nregion = "DE"\n')
    listed = json.loads(run_cli("people", "--json", config=cfg).stdout)
    assert {p["id"] for p in listed} == {"anna-berg", "anna-b"}
    merged = run_cli("people", "merge", "anna-berg", "anna@work.example", config=cfg)
    assert (merged.returncode, merged.stdout, merged.stderr) == (0, "", "")  # off a terminal, success prints nothing
    (anna,) = json.loads(run_cli("people", "--json", config=cfg).stdout)
    assert anna["id"] == "anna-berg" and set(anna["handles"]) == {"+491701234567", "anna@example.com", "anna@work.example"}
    assert run_cli("people", "split", "anna-berg", "anna@work.example", "--as", "work-anna", config=cfg).returncode == 0
    assert run_cli("people", "name", "work-anna", "Anna (work)", config=cfg).returncode == 0
    people = {p["id"]: p for p in json.loads(run_cli("people", "--json", config=cfg).stdout)}
    assert people["work-anna"]["handles"] == ["anna@work.example"] and people["work-anna"]["name"] == "Anna (work)"
    assert "anna@work.example" not in people["anna-berg"]["handles"]
    written = tomllib.loads((tmp_path / "people.toml").read_text())["person"]
    assert written["work-anna"]["handles"] == ["anna@work.example"] and written["anna-berg"]["not"] == ["anna@work.example"]
    nobody = run_cli("people", "show", "Zelda", config=cfg)
    assert nobody.returncode == 2 and nobody.stderr.count("\n") == 1 and "no person matches 'Zelda'" in nobody.stderr


def test_merge_split_and_name_are_callable_without_the_cli() -> None:
    """memex.people.decide's operations take the book and the decisions and return what changed, writing nothing:
    the CLI, the tests and any other front end call the same functions (issue 41)."""
    from memex.people import decide

    rules = Rules("DE")
    cards = [Card("Anna Berg", ["0170 1234567", "anna@example.com"], "c.vcf#1"), Card("Anna B.", ["anna@work.example"], "c.vcf#2")]
    book = build([], cards, [], rules)
    merged = decide.merge(book, [], "anna-berg", "anna@work.example", rules)
    assert merged.changed == ("anna-berg", "anna-b") and merged.said == "anna-b merged into anna-berg"
    (anna,) = merged.decisions
    assert anna.id == "anna-berg" and set(anna.handles) == {"+491701234567", "anna@example.com", "anna@work.example"}
    book = build(merged.decisions, cards, [], rules)
    split = decide.split(book, merged.decisions, "anna-berg", ["anna@work.example"], rules, new_id="work-anna", name="Anna (work)")
    assert {d.id: d.never for d in split.decisions} == {"anna-berg": ("anna@work.example",), "work-anna": ()}
    named = decide.rename(build(split.decisions, cards, [], rules), split.decisions, "work-anna", "Anna W.", rules)
    assert {d.id: d.name for d in named.decisions}["work-anna"] == "Anna W."
    with pytest.raises(decide.PersonError, match="is not a person ID"):
        decide.split(book, merged.decisions, "anna-berg", ["anna@work.example"], rules, new_id="Work Anna")
