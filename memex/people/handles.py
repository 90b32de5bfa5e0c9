"""Handles compared as a user means them: one canonical string per phone number, address, ID or name.

A handle is how a source names a person: ``+1 555 0100`` (iMessage, Signal), ``anna@example.com`` (mail, iMessage,
Teams' UPNs), a UUID (Signal's ACI, a Teams user ID), or only a display name (Messenger). :func:`normalize` turns each
into one comparable form with a kind prefix:

- ``tel:+491701234567``: a phone number in E.164, parsed by ``phonenumbers`` (Google's libphonenumber) with the
  configured default region for numbers written without ``+`` (``0170 1234567`` in region DE); one that cannot be
  placed without a region keeps its digits (``tel:01701234567``), so equal local forms still match;
- ``email:anna@example.com``: an address, lower-cased whole (no major provider treats the local part's case as
  significant, though RFC 5321 allows it); with ``gmail_rules`` dots and a ``+tag`` are dropped from Gmail addresses;
- ``uuid:...``: a UUID, lower-cased (Signal ACIs and Teams user IDs are both UUIDs and never collide);
- ``name:anna berg``: anything else, case-folded with its spaces collapsed.

A value with no letter, digit or symbol such as an emoji in it (``""``, ``+++``, ``@``) is no handle: None.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_PHONEISH = re.compile(r"\+?[\d\s().\-/]{5,}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_GMAIL = frozenset({"gmail.com", "googlemail.com"})
KINDS = ("tel", "email", "uuid", "name")


@dataclass(frozen=True)
class Rules:
    """How handles are compared: the default phone region (ISO 3166 alpha-2, e.g. ``DE``) and the Gmail rules."""

    region: str | None = None
    gmail_rules: bool = False


def normalize(value: str, rules: Rules = Rules()) -> str | None:
    """The canonical handle of ``value`` (see the module's docstring), or None for a value that names nobody."""
    return _normalize(value, rules.region, rules.gmail_rules)


@lru_cache(maxsize=65536)
def _normalize(value: str, region: str | None, gmail_rules: bool) -> str | None:
    text = " ".join(value.split())
    if not text:
        return None
    lowered = text.lower()
    for prefix in ("mailto:", "tel:", "sms:"):
        if lowered.startswith(prefix):  # a URI (vCard 4.0 writes TEL;VALUE=uri:tel:+1-418-656-9254;ext=102)
            text = text[len(prefix) :].split(";", 1)[0].strip()
            lowered = text.lower()
    if not any(c.isalnum() or unicodedata.category(c) == "So" for c in text):
        return None  # "+++", "@", "-": punctuation names nobody (a lone emoji, as a Messenger name may be, does)
    if lowered.startswith(KINDS_PREFIXES):  # already canonical (a handle typed from `memex people` output)
        return lowered if not lowered.startswith("tel:") else lowered.replace(" ", "")
    if _EMAIL.fullmatch(lowered):
        local, _, domain = lowered.rpartition("@")
        if gmail_rules and domain in _GMAIL:
            local, domain = local.split("+", 1)[0].replace(".", ""), "gmail.com"
        return f"email:{local}@{domain}"
    if _UUID.fullmatch(lowered):
        return f"uuid:{lowered}"
    if _PHONEISH.fullmatch(text) and sum(c.isdigit() for c in text) >= 5:
        return _phone(text, region)
    return "name:" + text.casefold()


KINDS_PREFIXES = ("email:", "uuid:", "name:", "tel:+")


def _phone(text: str, region: str | None) -> str:
    """``tel:`` + E.164 where libphonenumber can place the number, else ``tel:`` + its digits (a leading + kept)."""
    import phonenumbers

    try:
        number = phonenumbers.parse(text, region.upper() if region else None)
    except phonenumbers.NumberParseException:
        number = None
    if number is not None and phonenumbers.is_possible_number(number):
        return "tel:" + phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    digits = "".join(c for c in text if c.isdigit())
    return "tel:" + ("+" if text.lstrip().startswith("+") else "") + digits


def valid_region(region: str) -> bool:
    """Whether libphonenumber knows ``region`` (an ISO 3166 alpha-2 code such as ``DE`` or ``US``).

    Answered from the package's data files (``phonenumbers/data/region_DE.py``: one per region it knows) where it
    ships them, without importing it: a search naming a person imports nothing it does not use (0.1 s)."""
    from importlib.util import find_spec

    if not re.fullmatch(r"[A-Za-z]{2}", region):
        return False
    spec = find_spec("phonenumbers")
    data = Path(spec.origin).parent / "data" if spec is not None and spec.origin else None
    if data is not None and (data / "region_US.py").is_file():
        return (data / f"region_{region.upper()}.py").is_file()
    import phonenumbers

    return region.upper() in phonenumbers.SUPPORTED_REGIONS


def shown(handle: str) -> str:
    """A handle as a person reads it: without its kind (``+491701234567``, ``anna@example.com``, ``Anna Berg`` folded)."""
    return handle.split(":", 1)[1] if ":" in handle else handle
