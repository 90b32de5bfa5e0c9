"""Contact cards the user already has: vCard files (``.vcf``) and the Mac's address book, read-only.

A :class:`Card` is one contact as its source gives it: a name and the raw phone numbers, addresses and IDs on it.
vCard 2.1, 3.0 and 4.0 are read with ``vobject`` (folded lines, QUOTED-PRINTABLE and CHARSET, Apple's ``item1.``
groups); each card is parsed on its own, so one broken card is a warning naming the file and its position, and the
rest of the file is still read. Photos and every other property are ignored. The Mac's address book
(``AddressBook-v22.abcddb``, a Core Data SQLite file, one beside each account under ``Sources/*/``) is opened
read-only: ``ZABCDRECORD`` gives the names, ``ZABCDPHONENUMBER`` and ``ZABCDEMAILADDRESS`` the handles.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_BLOCK = re.compile(rb"^BEGIN:VCARD\n.*?^END:VCARD$", re.IGNORECASE | re.MULTILINE | re.DOTALL)
_CHARSET = re.compile(rb";CHARSET=([A-Za-z0-9_.:-]{1,40})", re.IGNORECASE)
_HANDLE_PROPS = ("tel", "email", "impp", "x-signal", "x-teams")
_IGNORED = frozenset({"PHOTO", "LOGO", "SOUND", "KEY", "PROFILE"})


@dataclass
class Card:
    """One contact: its name and the handles written on it, where it came from (``file.vcf#3``) for messages."""

    name: str | None
    handles: list[str] = field(default_factory=list)
    origin: str = ""
    keys: tuple[str, ...] | None = None  # the handles normalized (memex.people.handles), where already known


@dataclass
class Read:
    """What reading the configured cards gave: the cards, and one line for each card or file that could not be read."""

    cards: list[Card] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def read_vcards(path: Path, out: Read) -> None:
    """Append the cards of one ``.vcf`` file (or every ``.vcf`` in a folder) to ``out``."""
    if path.is_dir():
        for child in sorted(path.rglob("*.vcf")):
            read_vcards(child, out)
        return
    try:
        data = path.read_bytes()
    except OSError as exc:
        out.warnings.append(f"{path}: cannot read the contacts file ({exc.strerror}); check people.vcards")
        return
    found = cards_in(data, path.name)
    if not found:
        out.warnings.append(f"{path}: no vCard in it (no BEGIN:VCARD ... END:VCARD); check people.vcards")
    for n, card in enumerate(found, 1):
        if card is None:
            out.warnings.append(f"{path}: card {n} is not a vCard memex can read; it is left out")
        elif card.handles:
            out.cards.append(card)


def cards_in(data: bytes, name: str) -> list[Card | None]:
    """Every vCard in a ``.vcf`` file's bytes (``name``: the file's, for each card's origin), in order; None for one
    memex cannot read. UTF-16 and a byte order mark are read as :func:`_utf8` says, each card as :func:`text_of`."""
    data = _utf8(data)
    data = data.replace(b"\r\r\n", b"\n").replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # iOS writes CR CR LF
    return [_card(block, f"{name}#{n}") for n, block in enumerate(_BLOCK.findall(data), 1)]


def _card(block: bytes, origin: str) -> Card | None:
    """One vCard block parsed by vobject, or None when it cannot be read."""
    import vobject

    from memex.liblog import silenced

    text = _join_soft_breaks(text_of(block))
    try:
        with silenced("vobject"):  # its complaints quote the card's text: never on stderr
            component = vobject.readOne(text, ignoreUnreadable=True)
    except Exception:  # vobject raises several kinds (ParseError, ValueError, UnicodeError) on a bad card
        return _lenient(text, origin)
    name = _name(component)
    handles: list[str] = []
    for child in component.getChildren():
        if child.name.lower() in _HANDLE_PROPS and isinstance(child.value, str) and _is_handle(child.name, child.value):
            handles.append(child.value.strip())
    return Card(name=name, handles=handles, origin=origin)


def _utf8(data: bytes) -> bytes:
    """The file's bytes as UTF-8 where it was written in UTF-16 (Outlook's "Unicode" export, with or without a byte
    order mark), without a UTF-8 byte order mark (Windows tools write one); any other file as it is."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16", errors="replace").encode("utf-8")
    if data[:2] == b"B\x00" or data[:2] == b"\x00B":  # "BEGIN" in UTF-16 without a mark
        return data.decode("utf-16-le" if data[0] else "utf-16-be", errors="replace").encode("utf-8")
    return data.removeprefix(b"\xef\xbb\xbf")


def text_of(data: bytes) -> str:
    """Bytes of a card as text: UTF-8 when they are valid UTF-8; else in the charset one of its properties names
    (``LABEL;CHARSET=Windows-1253``: Outlook and FolkerKinzel's exports name it on a quoted-printable line and write
    the rest in it too); else Windows-1252 (cp1252, a superset of Latin-1's printable characters): Apple's and
    Outlook's legacy exports write a card in their charset without ``CHARSET``, and text in another charset is almost
    never valid UTF-8 by chance."""
    import codecs

    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for name in _CHARSET.findall(data):
        try:
            codec = codecs.lookup(name.decode("ascii"))
        except LookupError:
            continue
        if codec.name not in ("utf-8", "utf-16", "utf-32"):
            return data.decode(codec.name, errors="replace")
    return data.decode("cp1252", errors="replace")


def _is_handle(prop: str, value: str) -> bool:
    """Whether a handle property's value is one: a ``TEL`` holds a digit (Outlook and old phones write words such as
    ``Handy``, ``Fax privat`` or ``Pager`` there: a label, never a name to merge people by)."""
    value = value.strip()
    return bool(value) and (prop.lower() != "tel" or any(c.isdigit() for c in value))


def _join_soft_breaks(text: str) -> str:
    """The card made ready for vobject: vCard 2.1's QUOTED-PRINTABLE values joined across their soft line breaks (a
    final ``=``), and the properties memex ignores dropped with their folded lines (photos, logos, sounds, keys:
    vobject refuses a whole card for a base64 photo it cannot decode; Lotus Notes writes a ``PROFILE`` it refuses)."""
    out: list[str] = []
    joining = skipping = False
    for line in text.split("\n"):
        if skipping and (not line.strip() or line[:1] in " \t"):
            continue
        skipping = False
        if joining:
            out[-1] = out[-1][:-1] + line
        else:
            prop = line.split(":", 1)[0].split(";", 1)[0].rsplit(".", 1)[-1].upper()
            if line[:1] not in " \t" and prop in _IGNORED:
                skipping = True
                continue
            out.append(line)
        head = out[-1].split(":", 1)[0].upper()
        joining = "QUOTED-PRINTABLE" in head and out[-1].endswith("=")
    return "\r\n".join(out)


def _lenient(text: str, origin: str) -> Card | None:
    """A card vobject refused (an invalid byte in a quoted-printable ORG, say): its FN, TEL and EMAIL lines read one
    by one, a value's broken bytes replaced; None when it has no handle either."""
    import quopri

    name: str | None = None
    handles: list[str] = []
    for line in re.sub(r"\r\n[ \t]", "", text).split("\r\n"):
        head, sep, value = line.partition(":")
        if not sep:
            continue
        prop, *params = head.split(";")
        prop = prop.rsplit(".", 1)[-1].upper()
        if any(p.upper() in ("ENCODING=QUOTED-PRINTABLE", "QUOTED-PRINTABLE") for p in params):
            value = text_of(quopri.decodestring(value.encode("utf-8", "replace")))
        value = value.strip()
        if prop == "FN" and value and name is None:
            name = " ".join(value.split())
        elif prop.lower() in _HANDLE_PROPS and _is_handle(prop, value):
            handles.append(value)
    return Card(name=name, handles=handles, origin=origin) if handles else None


def _name(component: object) -> str | None:
    """The card's full name (``FN``), else one made of ``N``'s given and family names."""
    contents = getattr(component, "contents", {})
    for line in contents.get("fn", []):
        if isinstance(line.value, str) and line.value.strip():
            return " ".join(line.value.split())
    for line in contents.get("n", []):
        value = line.value
        parts = [getattr(value, "given", ""), getattr(value, "additional", ""), getattr(value, "family", "")]
        joined = " ".join(" ".join(p) if isinstance(p, list) else str(p) for p in parts).split()
        if joined:
            return " ".join(joined)
    return None


def read_address_book(path: Path, out: Read) -> None:
    """Append the contacts of the Mac's address book at ``path`` (the file, or the AddressBook folder and its sources)."""
    files = address_book_files(path)
    if not files:
        out.warnings.append(f"{path}: no AddressBook-v22.abcddb there; check people.address_book")
    for file in files:
        out.cards.extend(_address_book_cards(file, out))


def address_book_files(path: Path) -> list[Path]:
    """The address book files at ``path`` (the file, or the AddressBook folder and its sources)."""
    return [path] if path.is_file() else sorted([*path.glob("AddressBook-v22.abcddb"), *path.glob("Sources/*/AddressBook-v22.abcddb")])


def _address_book_cards(file: Path, out: Read) -> Iterator[Card]:
    import sqlite3

    try:
        conn = sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True, timeout=2)
        try:
            names = {pk: " ".join(p for p in (first, last) if p) or org or None
                     for pk, first, last, org in conn.execute("SELECT Z_PK, ZFIRSTNAME, ZLASTNAME, ZORGANIZATION FROM ZABCDRECORD")}  # fmt: skip
            handles: dict[int, list[str]] = {}
            for owner, value in conn.execute(
                "SELECT ZOWNER, ZFULLNUMBER FROM ZABCDPHONENUMBER UNION ALL SELECT ZOWNER, ZADDRESS FROM ZABCDEMAILADDRESS"
            ):
                if isinstance(owner, int) and isinstance(value, str) and value.strip():
                    handles.setdefault(owner, []).append(value.strip())
        finally:
            conn.close()
    except sqlite3.Error as exc:
        kind = "busy" if "locked" in str(exc) or "busy" in str(exc) else "not an address book memex can read"
        out.warnings.append(f"{file}: {kind} ({exc.__class__.__name__}); check people.address_book")
        return
    for owner, found in sorted(handles.items()):
        yield Card(name=names.get(owner), handles=found, origin=f"{file.parent.name}/AddressBook#{owner}")
