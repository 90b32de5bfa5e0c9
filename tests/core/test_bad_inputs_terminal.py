"""Hostile text through every command off a terminal: the bad-input table's rows for issue 32 §2.

Each row runs one command over the hostile world of ``tests/core/hostile.py`` (a mail whose subject, sender name,
body and attachment name carry CSI 2J, OSC 0, OSC 52, the 8-bit CSI, a NUL and U+202E; a source whose path does)
through the harness, which fails on any raw control character in the output; each row names the visible form
(``\\x1b``, ``\\u202e``; ``--json``: JSON's own ``\\u001b``) it must print instead. The same commands on a real
terminal: ``tests/core/test_terminal_safety.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core import hostile as h
from tests.core.bad_inputs import Case, run_case

KEY = "messages/mail/hostile-1%40example.com.json"


def with_damaged_object(tmp: Path) -> Path:
    """The hostile world plus an empty object in the store whose name carries an OSC 0 (a file name from the disk)."""
    config = h.hostile_world(tmp)
    (tmp / "state" / "store" / "messages" / "mail" / f"evil{h.TITLE}.json").write_bytes(b"")
    return config


def out(id: str, args: tuple[str, ...], says: str, *, code: int = 0, lines: int = 40, setup: object = h.hostile_world) -> Case:
    """A row whose expected text is on stdout."""
    return Case(id, args, code, says, setup=setup, stream="stdout", lines=lines)  # type: ignore[arg-type]


CASES = [
    out("show-subject-and-sender", ("show", h.MESSAGE_ID), h.SHOWN_SUBJECT),
    out("show-by-key-body", ("show", KEY), h.SHOWN_BODY),
    out("show-attachment-name", ("show", h.MESSAGE_ID), h.SHOWN_FILENAME),
    out("show-sender-bidi-and-nul", ("show", KEY), h.SHOWN_SENDER),
    out("show-json", ("show", "--json", h.MESSAGE_ID), '"subject": "Invoice \\u001b[2J\\u001b]0;pwned\\u0007 due\\u202efdp.exe"', lines=200),
    out("search-line", ("search", "invoice"), h.SHOWN_SENDER, lines=1),
    out("search-by-sender", ("search", "from:mallory"), "\\x1b]52;c;aGVsbG8=\\x07", lines=1),
    out("search-json", ("search", "--json", "invoice"), '"name": "Mallory \\u202eevil\\u0000 \\u009b31m"', lines=100),
    out("status-error-quoting-a-path", ("status",), h.SHOWN_PATH, lines=3),
    out("status-json", ("status", "--json"), "gone\\u001b]0;pwned\\u0007\\u202edir", lines=100),
    out("tail-error-line", ("tail",), h.SHOWN_PATH, lines=2),
    out("tail-json", ("tail", "--json"), "gone\\u001b]0;pwned\\u0007\\u202edir", lines=2),
    out("dashboard-once", ("dashboard", "--once", "--width", "200", "--height", "30"), h.SHOWN_PATH, lines=30),
    out("cursor-show-file-name", ("cursor", "show"), '"1.hostile\\u001b]0;pwned\\u0007"', lines=2),
    out("cursor-show-json", ("cursor", "show", "mail", "--json"), '"1.hostile\\u001b]0;pwned\\u0007"', lines=20),
    out("index-status", ("index", "status"), "mail", lines=3),
    out("verify-damaged-object-name", ("verify",), "messages/mail/evil\\x1b]0;pwned\\x07.json", code=1, lines=6,
        setup=with_damaged_object),
    Case("poll-error-off-a-terminal", ("poll", "bad"), 1, "gone\\u001b]0;pwned\\u0007\\u202edir", setup=h.hostile_world),
    Case("show-unknown-ref-quoted", ("show", f"nope{h.CLEAR}{h.RLO}"), 2, "nope\\\\x1b[2J\\\\u202e", setup=h.hostile_world),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_text_is_shown_not_acted_on(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and visible form, no raw control (the harness) and no raw bidi override in the output."""
    done = run_case(case, tmp_path)
    assert h.RLO not in done.stdout + done.stderr, done.stdout + done.stderr
