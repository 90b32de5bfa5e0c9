"""A hostile mail and a hostile source, for the terminal-safety tests: what each carries raw, and how memex shows it.

The mail's subject, sender name, body and attachment name carry CSI 2J (clear the screen), OSC 0 (set the window
title), OSC 52 (write the clipboard), the 8-bit CSI (U+009B), a NUL and a right-to-left override (U+202E). The
mail's file name in the Maildir holds an OSC 0 (it is in the cursor). The
source ``bad`` is a Maildir whose configured path holds an OSC 0 and a U+202E: its poll fails with an error quoting
that path, so the path reaches status, tail, the dashboard and the poll's own line.
"""

from __future__ import annotations

import base64
import urllib.parse
from email.header import Header
from pathlib import Path

from tests.conftest import run_cli, write_config

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"
CLIPBOARD = "\x1b]52;c;aGVsbG8=\x07"
CSI8 = "\x9b31m"
NUL = "\x00"
RLO = "\u202e"

SUBJECT = f"Invoice {CLEAR}{TITLE} due{RLO}fdp.exe"
SENDER = f"Mallory {RLO}evil{NUL} {CSI8}"
BODY = f"hello {CLIPBOARD} world\nline two {CLEAR} and {CSI8} red{NUL} nul\r end\n"
FILENAME = f"report{RLO}fdp.exe"
MESSAGE_ID = "hostile-1@example.com"
BAD_PATH_TAIL = f"gone{TITLE}{RLO}dir"
FILE_NAME = f"1.hostile{TITLE}"  # the Maildir file's name: it is in the cursor

# Raw sequences that must never reach the output, and the visible forms that must (see memex.safe_text).
RAW = (CLEAR, "\x1b]0;", "\x1b]52;", "\x07", "\x9b", NUL, RLO)
SHOWN_SUBJECT = "Invoice \\x1b[2J\\x1b]0;pwned\\x07 due\\u202efdp.exe"
SHOWN_SENDER = "Mallory \\u202eevil\\x00 \\x9b31m"
SHOWN_BODY = "hello \\x1b]52;c;aGVsbG8=\\x07 world"
SHOWN_FILENAME = "report\\u202efdp.exe"
SHOWN_PATH = "gone\\x1b]0;pwned\\x07\\u202edir"


def hostile_mail() -> bytes:
    """The raw mail: encoded-word subject and sender name, a base64 body, an attachment named in RFC 2231 form."""
    subject = Header(SUBJECT, "utf-8").encode()
    sender = Header(SENDER, "utf-8").encode()
    body = base64.encodebytes(BODY.encode()).decode()
    name = urllib.parse.quote(FILENAME.encode())
    return (
        f"From: {sender} <mallory@example.com>\nTo: b@example.com\nSubject: {subject}\n"
        f"Date: Tue, 01 Nov 2022 10:00:00 +0000\nMessage-ID: <{MESSAGE_ID}>\nMIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="b1"\n\n'
        "--b1\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n"
        f"{body}\n"
        "--b1\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n"
        f"Content-Disposition: attachment; filename*=utf-8''{name}\n\n"
        f"{base64.encodebytes(b'not really a pdf').decode()}\n"
        "--b1--\n"
    ).encode()


def hostile_world(tmp: Path) -> Path:
    """A config with the Maildir ``mail`` holding the hostile mail (polled: stored and indexed) and the failing
    source ``bad``; returns the config path."""
    root = tmp / "mail"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "tmp" / FILE_NAME).write_bytes(hostile_mail())
    (root / "tmp" / FILE_NAME).rename(root / "new" / FILE_NAME)
    config = write_config(tmp, {"mail": {"type": "maildir", "path": str(root), "settle_seconds": 0},
                                "bad": {"type": "maildir", "path": str(tmp / BAD_PATH_TAIL)}})  # fmt: skip
    done = run_cli("poll", "mail", config=config)
    assert done.returncode == 0, done.stderr
    failed = run_cli("poll", "bad", config=config)
    assert failed.returncode != 0, failed.stderr
    return config


def stored_key(config: Path) -> str:
    """The hostile mail's store key, from ``memex search --json``."""
    import json

    out = run_cli("search", "--json", f"id:{MESSAGE_ID}", config=config)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert len(found) == 1, out.stdout
    return str(found[0]["key"])


def no_raw(text: str) -> None:
    """Assert that none of the raw hostile sequences is in ``text``."""
    for raw in RAW:
        assert raw not in text, f"{raw!r} reached the output:\n{text!r}"


__all__ = ["hostile_mail", "hostile_world", "no_raw", "stored_key"]
