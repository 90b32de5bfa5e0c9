"""The mails the renderer's equivalence checks run on, and the digest of what the renderer makes of each.

Cases: every test mail in ``tests/email/data/`` (the real public mails), variants of each (line ends made LF, made
CRLF, made CR; cut at a third and at two thirds; a line dropped, a boundary line doubled, from a seeded random
choice), the hand-made mails of :data:`CRAFTED` (each branch of the MIME grammar: unix From lines, header defects,
multiparts without a boundary, never started, never closed, nested, digests, attached and delivery-status
messages, epilogues), the crafted mails stored in ``render_expected.json`` (the byte literals of the email tests
when it was written), and mails shaped like the benchmark's (plain, alternative, with an attachment).

``python tests/email/render_cases.py --write`` (run with the renderer to pin on the import path first, e.g.
``PYTHONPATH=<tree of main>``) writes the digests of every case to ``render_expected.json``; the test
``test_render_equivalence.py`` renders every case again and requires the same digest: the same record bytes, the
same earlier fingerprint, the same failure, the same refingerprint. This module imports no renderer at import time.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
DATA = HERE / "data"
EXPECTED = HERE / "render_expected.json"
NOT_MAILS = ("readme", "license", "copying")
MBOXES = "mbox"  # tests/email/data/mbox holds mbox archives (many mails a file): the mbox tests' data, not mails

CRAFTED: dict[str, bytes] = {
    "unix-from": b"From nobody Mon Jan  1 00:00:00 2024\nFrom: a@b.c\nSubject: x\nMessage-ID: <u@x>\n\nbody\n",
    "misplaced-from": b"Subject: x\nFrom nobody\nTo: y@z\n\nbody\n",
    "from-last-header": b"Subject: x\nFrom here on\n\nbody\n",
    "from-last-no-blank": b"Subject: x\nFrom here on\nbody\n",
    "first-line-continuation": b" folded\nSubject: x\n\nb\n",
    "missing-header-name": b":x\nSubject: y\n\nb\n",
    "missing-separator": b"Subject: x\nthis is body\nmore\n",
    "header-only": b"Subject: x\nFrom: a@b\n",
    "empty": b"",
    "blank": b"\n",
    "blank-crlf": b"\r\n",
    "body-only": b"\nbody\n",
    "no-final-newline": b"Subject: x\n\nbody",
    "folded-headers": b"Subject: one\n two\n\tthree\nTo: a@b,\n c@d\n\nbody\n",
    "eight-bit": b"Subject: r\xe9sum\xe9\nFrom: J\xc3\xbcrgen <j@x>\nContent-Type: text/plain; charset=latin-1\n\ncaf\xe9 \xff\n",
    "multipart-no-boundary": b"Content-Type: multipart/mixed\n\nbody\n--x\n",
    "multipart-never-started": b'Content-Type: multipart/mixed; boundary="b"\n\nno parts here\n--bb\n',
    "multipart-never-closed": b'Content-Type: multipart/mixed; boundary="b"\n\npre\n--b\nContent-Type: text/plain\n\nx\n',
    "multipart-never-closed-no-body": b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n',
    "multipart-double-boundary": b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n--b\nContent-Type: text/plain\n\nx\n--b\n\n--b--\n',
    "multipart-close-twice": b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n--b--\nx\n--b--\nepi\n',
    "multipart-bad-cte": (b'Content-Type: multipart/mixed; boundary="b"\nContent-Transfer-Encoding: base64\n\n--b\n\nx\n--b--\n'),
    "multipart-close-at-eof": b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n\nx\n--b--',
    "multipart-close-spaces": b'Content-Type: multipart/mixed; boundary="b"\n\n--b  \n\nx\n--b-- \t\n\n\nepilogue\n',
    "multipart-epilogue-blank": b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n\nx\n--b--\n\n',
    "multipart-part-headers-to-boundary": b'Content-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: text/plain\n--b--\n',
    "multipart-lookalikes": (
        b'Content-Type: multipart/mixed; boundary="b"\n\n-- \n--bx\n---b\n--b\n\nsig\n-- \n--b-x\n--b--x\n--b\n\ny\n--b--\n'
    ),
    "multipart-regex-boundary": (b'Content-Type: multipart/mixed; boundary="a.b+c(d)*"\n\n--a.b+c(d)*\n\nx\n--aXb+c(d)*\n--a.b+c(d)*--\n'),
    "multipart-folded-boundary": b'Content-Type: multipart/mixed; boundary="foo\n bar"\n\n--foo bar\n\nx\n--foo bar--\n',
    "multipart-loose-boundary": b'Content-Type: multipart/mixed\n boundary="b"\n\n--b\n\nx\n--b--\n',
    "multipart-boundary-colon": b'Content-Type: multipart/mixed; boundary="x:y"\n\n--x:y\nA: b\n--x:y\n\nz\n--x:y--\n',
    "nested": (
        b'Content-Type: multipart/mixed; boundary="o"\n\npre\n--o\nContent-Type: multipart/alternative; boundary="i"\n\n'
        b"ipre\n--i\nContent-Type: text/plain\n\nplain\n--i\nContent-Type: text/html\n\n<p>html</p>\n--i--\niepi\n\n"
        b"--o\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\naGVsbG8=\n--o--\nepi\n"
    ),
    "nested-inner-unclosed": (
        b'Content-Type: multipart/mixed; boundary="o"\n\n--o\nContent-Type: multipart/alternative; boundary="i"\n\n'
        b"--i\n\nplain\n--o\n\nafter\n--o--\n"
    ),
    "nested-inner-close-then-outer": (
        b'Content-Type: multipart/mixed; boundary="o"\n\n--o\nContent-Type: multipart/mixed; boundary="i"\n\n--i\n\nin\n--i--\n--o--\n'
    ),
    "nested-same-boundary": (
        b'Content-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: multipart/mixed; boundary="b"\n\n--b\n\nx\n--b--\n--b--\n'
    ),
    "digest": (
        b'Content-Type: multipart/digest; boundary="d"\n\n--d\n\nFrom: a@b\nSubject: one\n\nfirst\n'
        b"--d\nContent-Type: text/plain\n\nsecond\n--d\n\n--d--\n"
    ),
    "attached": (
        b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n\nsee\n--b\nContent-Type: message/rfc822\n\n'
        b"From: c@d\nSubject: inner\nMessage-ID: <in@x>\n\ninner body\n--b--\n"
    ),
    "attached-multipart": (
        b'Content-Type: multipart/mixed; boundary="b"\n\n--b\nContent-Type: message/rfc822\n\n'
        b'From: c@d\nContent-Type: multipart/mixed; boundary="c"\n\n--c\n\ninner\n--c\n\nx\n--b--\n'
    ),
    "top-message": b"Content-Type: message/rfc822\n\nFrom: c@d\nSubject: inner\n\nbody\n",
    "delivery-status": (
        b'Content-Type: multipart/report; report-type=delivery-status; boundary="r"\n\n--r\n\nfailed\n'
        b"--r\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; x\n\nFinal-Recipient: rfc822; a@b\nAction: failed\n"
        b"--r--\n"
    ),
    "lone-cr": b"Subject: x\rFrom: a@b\r\rbody\rmore\r",
    "mixed-line-ends": b'Content-Type: multipart/mixed; boundary="b"\r\n\n--b\r\n\r\nx\n--b--\r\n',
    "crlf-cr": b"Subject: x\r\r\n\r\nbody\r\r\n",
}


def _variants(name: str, raw: bytes) -> dict[str, bytes]:
    """Damaged and re-ended copies of one mail (seeded by its name, so every run makes the same)."""
    lf = raw.replace(b"\r\n", b"\n")
    out = {
        "lf": lf,
        "crlf": lf.replace(b"\n", b"\r\n"),
        "cr": lf.replace(b"\n", b"\r"),
        "third": raw[: len(raw) // 3],
        "two-thirds": raw[: 2 * len(raw) // 3],
    }
    rng = random.Random(hashlib.sha256(name.encode()).digest())
    lines = raw.splitlines(keepends=True)
    if len(lines) > 2:
        drop = rng.randrange(len(lines))
        out["drop-line"] = b"".join(lines[:drop] + lines[drop + 1 :])
    boundaries = [i for i, line in enumerate(lines) if line.startswith(b"--")]
    if boundaries:
        twice = rng.choice(boundaries)
        out["boundary-twice"] = b"".join(lines[: twice + 1] + lines[twice:])
        out["boundary-dropped"] = b"".join(lines[:twice] + lines[twice + 1 :])
    return {f"{name}~{k}": v for k, v in out.items() if v != raw}


def _bench_like() -> dict[str, bytes]:
    """Mails of ``bench/imap_vs_mbsync.py``: plain, plain + HTML alternatives, each with a base64 attachment."""
    from tests.email.bench_mail import sample

    return {f"bench-{i}": sample(i) for i in (0, 1, 2, 5, 15)}


def harvest(paths: list[Path]) -> dict[str, bytes]:
    """The byte literals that look like mails (a header line) in these test files, keyed by a digest of their bytes."""
    found: dict[str, bytes] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
                value = node.value
                if len(value) >= 16 and re.match(rb"[A-Za-z-]+:", value) and b"\n" in value:
                    found[f"literal-{hashlib.sha256(value).hexdigest()[:12]}"] = value
    return found


def mails() -> list[Path]:
    """The real public test mails."""
    return sorted(
        p for p in DATA.rglob("*") if p.is_file() and not p.name.lower().startswith(NOT_MAILS) and p.relative_to(DATA).parts[0] != MBOXES
    )


def cases() -> dict[str, bytes]:
    """Every case by name (see the module docstring)."""
    out: dict[str, bytes] = {}
    for path in mails():
        name = str(path.relative_to(DATA))
        raw = path.read_bytes()
        out[name] = raw
        out.update(_variants(name, raw))
    for name, raw in {**CRAFTED, **_bench_like()}.items():
        out[name] = raw
        out.update(_variants(name, raw))
    if EXPECTED.exists():
        stored = json.loads(EXPECTED.read_text())["literals"]
        out.update({name: text.encode("latin-1") for name, text in stored.items()})
    return out


def digest(raw: bytes) -> str:
    """What the renderer on the import path makes of ``raw``, as a SHA-256 (32 hex digits): the record's bytes and its
    earlier fingerprint, or the failure; the refingerprint of the raw bytes; the blobs stored beside it."""
    from pollers.email.mail.render import to_item

    item = to_item(raw, "cases", None, ref="case")
    doc: dict[str, Any] = {"earlier": list(item.earlier_fingerprints)}
    if item.message is not None:
        doc["record"] = item.message.to_json().decode()
    if item.failure is not None:
        doc["failure"] = [item.failure.native_id, item.failure.reason, item.failure.ref]
    if item.refingerprint is not None:
        doc["refingerprint"] = item.refingerprint(raw)
    doc["blobs"] = sorted((k, hashlib.sha256(v).hexdigest()) for k, v in item.blobs.items())
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def write() -> None:
    """Pin the renderer on the import path: the harvested literals and every case's digest into render_expected.json."""
    literals = harvest(sorted(HERE.glob("test_*.py")))
    doc: dict[str, Any] = {"literals": {k: v.decode("latin-1") for k, v in sorted(literals.items())}, "records": {}}
    EXPECTED.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")  # the literals first: cases() reads them
    doc["records"] = {name: digest(raw) for name, raw in sorted(cases().items())}
    EXPECTED.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: PYTHONPATH=<tree to pin> python tests/email/render_cases.py --write")
    write()
