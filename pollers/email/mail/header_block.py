"""A mail's header block read as gmime (notmuch's parser) reads it: obsolete syntax and a stray line do not end it.

Python's parser ends the header block at the first line that is not ``name:``, a continuation or a unix ``From ``.
Two shapes of real mail then lose their headers:

- **whitespace before the colon** (``Subject  : x``), the obsolete syntax RFC 5322 §4.5 says to accept: the line
  ends the block (``From  : x`` is even taken for a unix From line), so sender, subject, date and Message-ID move
  into the body;
- **one malformed line** among the headers (``quite Delivered-To: x``, a mailer's bug): the headers after it become
  the body's first lines.

:func:`repair` gives the bytes the parser should read instead: the header block (up to its first empty line) with
the whitespace before such a colon removed and each malformed line left out, and the problems to list. It changes
nothing when every line up to the first empty line is one Python reads as a header (all well-formed mail: the same
bytes, so the same record, key and fingerprint as before). It leaves malformed lines alone (the mail is parsed as
before) unless each holds a colon, none starts with ``--`` (a boundary), and at least two well-formed header lines,
and as many as there are malformed lines, follow the first of them inside the block: a mail whose body starts with
no empty line before it keeps that text as its body. The raw bytes stored are never changed.
"""

from __future__ import annotations

import re

_NAME = rb"[\x21-\x39\x3b-\x7e]+"
_GOOD = re.compile(rb"(?:From |[\x21-\x39\x3b-\x7e]*:|[ \t])")  # what Python's parser reads as a header line
_HEADER = re.compile(_NAME + rb":")  # a well-formed header line
_OBSOLETE = re.compile(rb"(" + _NAME + rb")[ \t]+:")  # a name, whitespace, then the colon (RFC 5322 §4.5)
_END = re.compile(rb"(\r?\n)\r?\n")  # the empty line that ends the header block (after the last header's line end)


def repair(raw: bytes) -> tuple[bytes, list[str]]:
    """``raw`` with its header block made readable (see the module docstring), and the problems found; ``raw``
    itself (the same object) when there was nothing to repair."""
    end = _END.search(raw)
    if end is None:
        return raw, []
    cut = end.start() + len(end.group(1))  # every header line keeps its own line end
    block = raw[:cut]
    lines = block.splitlines(keepends=True)
    if all(_GOOD.match(line) and not _unix_obsolete(line) for line in lines):
        return raw, []  # the common case: nothing to do
    kinds = [_kind(line) for line in lines]
    bad = [i for i, kind in enumerate(kinds) if kind == "bad"]
    problems: list[str] = []
    out: list[bytes] = []
    after = sum(1 for line in lines[bad[0] :] if _HEADER.match(line) or _OBSOLETE.match(line)) if bad else 0
    if bad and (after < max(2, len(bad)) or any(b":" not in lines[i] or lines[i].startswith(b"--") for i in bad)):
        return raw, []  # text with no empty line before it (a boundary, words with no colon): the body, as before
    for line, kind in zip(lines, kinds, strict=True):
        if kind == "obsolete":
            line = _OBSOLETE.sub(lambda m: m.group(1) + b":", line, count=1)
            problems.append("header: whitespace before a colon (obsolete syntax), read as a header")
        elif kind == "bad":
            problems.append("header: a malformed line among the headers, left out")
            continue
        out.append(line)
    return b"".join(out) + raw[cut:], sorted(set(problems))


def _unix_obsolete(line: bytes) -> bool:
    """Whether ``line`` is ``From  : ...``: obsolete syntax Python would take for a unix From line."""
    return line.startswith(b"From ") and _OBSOLETE.match(line) is not None


def _kind(line: bytes) -> str:
    """``obsolete`` (whitespace before the colon), ``read`` (a line Python's parser reads as it should: a header, a
    continuation, a unix From line, a header with no name) or ``bad``."""
    if _OBSOLETE.match(line):
        return "obsolete"
    return "read" if _GOOD.match(line) else "bad"
