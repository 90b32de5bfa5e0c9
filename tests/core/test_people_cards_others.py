"""Real vCards written by other programs (tests/core/data/vcards-others/, README there: FolkerKinzel.VCards' and
vobject's test files) read by memex and compared with a reference reader: vobject itself, given each file's text in
the encoding its origin says it is in (memex must find that encoding alone), and a hand-checked answer key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import vobject

from memex.people.cards import Read, cards_in, read_vcards

OTHERS = Path(__file__).parent / "data" / "vcards-others"
ENCODING = {  # each file's encoding, as its origin documents it (the file names say it too)
    "ansi-3.0.vcf": "cp1252", "ansi-german.vcf": "cp1252", "ansi-greek.vcf": "cp1253", "utf-16-bom-3.0.vcf": "utf-16",
    "utf-8.vcf": "utf-8-sig",
}  # fmt: skip
NAMES = {  # the answer key: each card's name, read by eye from the file
    "ansi-3.0.vcf": ["Folker Kinzel", "KMS Außenstelle"],
    "ansi-german.vcf": ["Sören Täve Nüßlebaum"],
    "ansi-greek.vcf": ["Βαγγέλης"],
    "kinzel-2.1.vcf": ["Maxl"],
    "kinzel-4.0.vcf": ["Möhrke Gerda", "Dr. Max Horst Mustermann jr. Maxl SED"],
    "outlook-2.1-photo.vcf": [None],
    "outlook-2.1.vcf": ["Herr Max Anderer Mustermann sen."],
    "photo-3.0.vcf": ["Emma Musterfrau"],
    "radicale-1587.vcf": ["Given Family"],
    "utf-16-bom-3.0.vcf": ["Folker Kinzel", "KMS Außenstelle"],
    "utf-8.vcf": ["孔夫子"],
}

VOBJECT_REFUSES = {  # files vobject cannot read whole, and their handles, read by eye
    "utf-8.vcf": [[]],  # a BOM, then a card vobject calls unclosed
    "kinzel-2.1.vcf": [["0123/579", "privat@folker-kinzel.de", "business@folker-kinzel.de", "andere@folker-kinzel.de"]],
    # ^ a quoted-printable UTF-8 value cut inside a character at a soft line break: vobject's decoder fails
}


def reference(path: Path) -> list[tuple[str | None, list[str]]]:
    """Each card as vobject reads the file's text (decoded as ENCODING says): its FN and its TEL (holding a digit),
    EMAIL and IMPP values, in order."""
    text = path.read_bytes().decode(ENCODING.get(path.name, "utf-8"))
    out = []
    logging.disable(logging.CRITICAL)  # vobject complains about the photo's lines; this is its reading, not memex's
    try:
        for card in vobject.readComponents(text, ignoreUnreadable=True):
            fn = card.contents.get("fn")
            handles = [(c.name.lower(), c.value.strip()) for c in card.getChildren() if c.name.lower() in ("tel", "email", "impp")]
            out.append((fn[0].value if fn else None, [v for kind, v in handles if v and (kind != "tel" or any(ch.isdigit() for ch in v))]))
    finally:
        logging.disable(logging.NOTSET)
    return out


@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_card_from_another_program_reads_as_the_reference_reads_it(name: str) -> None:
    """Every card of the file: memex's name and handles are the reference reader's (vobject given the right
    encoding), and the names are the answer key's; none is unreadable."""
    path = OTHERS / name
    got = cards_in(path.read_bytes(), name)
    assert None not in got
    mine = [(c.name, c.handles) for c in got if c is not None]
    if name in VOBJECT_REFUSES:  # the answer key alone
        assert [h for _, h in mine] == VOBJECT_REFUSES[name]
    else:
        assert mine == reference(path)
    assert [n for n, _ in mine] == NAMES[name]


def test_words_in_a_tel_and_a_photo_are_no_handles() -> None:
    """kinzel-4.0.vcf's TELs that hold words (Privattelefon, Fax privat, Pager, ...) and the Outlook 2.1 photo card
    give no handle: the files' cards with handles are exactly the ones with numbers and addresses."""
    got = Read()
    read_vcards(OTHERS, got)
    assert got.warnings == []
    handles = {h for c in got.cards for h in c.handles}
    assert not {"Privattelefon", "Fax privat", "Pager", "Mobil"} & handles
    assert "0160-45678910" in handles and "max.mustermann@musterfirma.de" in handles
