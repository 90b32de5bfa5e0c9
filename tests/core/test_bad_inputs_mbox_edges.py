"""mbox files and paths at the edges (issue 40 §4, §6) through the harness in ``tests/core/bad_inputs.py``.

Each row is one unusual input a real user met: its exit code and one line, no traceback, nothing outside the
configured paths changed; where the poll reads mails, the rows' ``STORED`` entry names what must be stored and
``CHECKS`` what else must hold (a subject, a sender's address found by search, a line's offset).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_cli, write_config
from tests.core.bad_inputs import Case, run_case
from tests.core.test_bad_inputs_mbox import SEP, mail, mbox_source

RFC2822_SEP = b"From daemon@host.example Sun, 11 Nov 2007 06:58:35 +0200\n"
# RFC 2822 appendix A.6.3: obsolete syntax, whitespace before a colon among others
A63 = b"""From: John Doe <jdoe@machine(comment).  example>
To: Mary Smith
\x20\x20
     <mary@example.net>
Subject     : Saying Hello
Date: Fri, 21 Nov 1997 09(comment):   55  :  06 -0600
Message-ID: <1234   @   local(blah)  .machine .example>

This is a message just to say hello.
So, "Hello".
"""
ESCAPED_FROM = b"From: \x1b[31mEvil\x1b[0m <e@x.example>\nSubject: esc\nMessage-ID: <bad1@example.com>\n\nbody\n"
UNQUOTED = SEP + mail(1, b"\nFrom the desk of the editor\n") + b"\n" + SEP + mail(2) + b"\n"
TWO = SEP + mail(1) + b"\n" + SEP + mail(2) + b"\n"


def folder_source(files: dict[str, bytes]) -> Callable[[Path], Path]:
    """A setup writing ``files`` under ``export/`` and a config reading that folder as source ``mb``."""

    def setup(tmp: Path) -> Path:
        for rel, data in files.items():
            (tmp / "export" / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / "export" / rel).write_bytes(data)
        return write_config(tmp, {"mb": {"type": "mbox", "path": str(tmp / "export"), "settle_seconds": 0}})

    return setup


def odd_path(make: Callable[[Path], None]) -> Callable[[Path], Path]:
    """A setup making ``box`` with ``make`` (a FIFO, a link loop) and a config reading it as source ``mb``."""

    def setup(tmp: Path) -> Path:
        make(tmp / "box")
        return write_config(tmp, {"mb": {"type": "mbox", "path": str(tmp / "box"), "settle_seconds": 0}})

    return setup


def into_typo(tmp: Path) -> Path:
    """An mbox source whose ``into`` names a source the config does not have."""
    (tmp / "box.mbox").write_bytes(TWO)
    return write_config(tmp, {"mb": {"type": "mbox", "path": str(tmp / "box.mbox"), "into": "typo", "settle_seconds": 0}})


CASES = [
    Case("mbox-cr-only-line-ends", ("poll", "mb"), 0, "lone CR", mbox_source(TWO.replace(b"\n", b"\r"))),
    Case("mbox-rfc2822-separator-date", ("poll", "mb"), 0, "", mbox_source(RFC2822_SEP + mail(1) + b"\n" + RFC2822_SEP + mail(2)), lines=0),
    Case("mbox-blank-lines-before-first-separator", ("poll", "mb"), 0, "", mbox_source(b"\n\n\r\n" + TWO), lines=0),
    Case(
        "mbox-unquoted-from-names-its-line", ("poll", "mb"), 0, f"first at byte {UNQUOTED.index(b'From the desk')}", mbox_source(UNQUOTED)
    ),
    Case("mbox-obsolete-subject-a63", ("poll", "mb"), 0, "", mbox_source(SEP + A63), lines=0),
    Case("mbox-escape-in-from-header", ("poll", "mb"), 0, "", mbox_source(SEP + ESCAPED_FROM + b"\n" + SEP + mail(2)), lines=0),
    Case(
        "mbox-folder-without-mbox",
        ("poll", "mb"),
        0,
        "no mbox file in this folder",
        folder_source({"archive_browser.html": b"<html></html>\n", "Mail/README.txt": b"see Mail\n"}),
    ),
    Case("mbox-path-is-a-fifo", ("poll", "mb"), 1, "a named pipe (FIFO)", odd_path(lambda p: os.mkfifo(p))),
    Case("mbox-path-is-a-link-loop", ("poll", "mb"), 1, "leads back to itself", odd_path(lambda p: p.symlink_to(p))),
    Case("mbox-into-names-no-source", ("poll", "mb"), 2, "no source named 'typo'", into_typo),
]

# What each row that reads mails must have stored (file names under the store's messages/).
STORED = {
    "mbox-cr-only-line-ends": ["bad1%40example.com.json", "bad2%40example.com.json"],
    "mbox-rfc2822-separator-date": ["bad1%40example.com.json", "bad2%40example.com.json"],
    "mbox-blank-lines-before-first-separator": ["bad1%40example.com.json", "bad2%40example.com.json"],
    "mbox-unquoted-from-names-its-line": ["bad1%40example.com.json", "bad2%40example.com.json"],
    "mbox-obsolete-subject-a63": ["1234%20%40%20local%28blah%29%20.machine%20.example.json"],
    "mbox-escape-in-from-header": ["bad1%40example.com.json", "bad2%40example.com.json"],
    "mbox-folder-without-mbox": [],
}


def _records(tmp: Path) -> dict[str, dict[str, object]]:
    """The stored message records by file name."""
    paths = (tmp / "state" / "store").rglob("*.json")
    return {p.name: json.loads(p.read_text()) for p in paths if "messages" in p.parts}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_an_mbox_at_the_edge_is_read_or_named_in_one_line(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, nothing changed outside the configured paths; a row that
    reads mails stores every one of them (a CR-only file is never one empty mail marked read)."""
    run_case(case, tmp_path)
    if case.id in STORED:
        records = _records(tmp_path)
        assert sorted(records) == STORED[case.id], case.id
    if case.id == "mbox-cr-only-line-ends":
        eml = sorted((tmp_path / "state" / "store").rglob("*.eml"))
        assert [p.read_bytes().count(b"\n") > 3 and b"\r" not in p.read_bytes() for p in eml] == [True, True]
        assert all("mbox: classic Mac line ends (CR only), read as LF" in r["extra"]["problems"] for r in records.values())  # type: ignore[index,operator]
    if case.id == "mbox-obsolete-subject-a63":
        (record,) = records.values()
        assert record["extra"]["subject"] == "Saying Hello"  # type: ignore[index]
    if case.id == "mbox-escape-in-from-header":
        assert records["bad1%40example.com.json"]["sender"]["id"] == "e@x.example"  # type: ignore[index]
        found = run_cli("search", "--json", "from:e@x.example", config=tmp_path / "config.toml")
        assert found.returncode == 0 and "bad1@example.com" in found.stdout, found.stdout + found.stderr


def test_a_folder_without_mbox_says_so_on_every_poll(tmp_path: Path) -> None:
    """A folder holding no mbox (a Takeout's top folder, mails not yet exported) is named on each poll, not only the
    first: cron's later polls must not turn silent and read ``idle: 0 new`` for ever."""
    config = folder_source({"archive_browser.html": b"<html></html>\n"})(tmp_path)
    for _ in range(2):
        out = run_cli("poll", "mb", config=config)
        assert out.returncode == 0 and "no mbox file in this folder" in out.stderr, out.stderr
