"""Bad inputs of issue 32 §7 (a 0-byte mail, hand-made IMAP cursors with holes), run through the harness in
``tests/core/bad_inputs.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memex import config as config_mod
from memex.runner import poll
from tests.conftest import write_config
from tests.core.bad_inputs import Case, run_case


def maildir_with_an_empty_file(tmp: Path) -> Path:
    """A Maildir source holding one mail and one 0-byte file (not polled yet)."""
    root = tmp / "Mail"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    (root / "new" / "1.host").write_bytes(b"Message-ID: <a@example.com>\r\nSubject: x\r\n\r\nhi\r\n")
    (root / "new" / "2.host").write_bytes(b"")
    return write_config(tmp, {"md": {"type": "maildir", "path": str(root), "settle_seconds": 0}})


def polled_maildir_with_an_empty_file(tmp: Path) -> Path:
    """The same Maildir, polled once (the 0-byte file quarantined)."""
    path = maildir_with_an_empty_file(tmp)
    assert poll(config_mod.load(path), "md").quarantined == 1
    return path


def imap(tmp: Path) -> Path:
    """An IMAP source (nothing is connected to: `cursor set` only checks the shape)."""
    table = {"type": "imap", "host": "127.0.0.1", "port": 1, "security": "none", "user": "u", "password_env": "NO_SUCH_PASSWORD"}
    return write_config(tmp, {"mail": table})


def cursor(**inbox: object) -> str:
    """An IMAP cursor whose INBOX entry is ``uidvalidity`` 7, ``last_uid`` 9 and ``inbox``."""
    return json.dumps({"mailboxes": {"INBOX": {"uidvalidity": 7, "last_uid": 9, **inbox}}})


HOLES = '"holes" must be a list of {"uid": U, "tries": T}'
CASES = [
    Case(
        "poll-maildir-zero-byte-file",
        ("poll", "md"),
        0,
        "empty (0 bytes): not a mail",
        setup=maildir_with_an_empty_file,
        owned=("state", "store"),
    ),
    Case(
        "verify-maildir-zero-byte-file",
        ("verify", "md"),
        0,
        "1 quarantined",
        setup=polled_maildir_with_an_empty_file,
        stream="stdout",
        lines=2,
    ),
    Case(
        "verify-repair-maildir-zero-byte-file",
        ("verify", "md", "--repair"),
        0,
        "whole",
        setup=polled_maildir_with_an_empty_file,
        stream="stdout",
        lines=2,
    ),
    Case(
        "cursor-set-imap-hole-above-last-uid",
        ("cursor", "set", "mail", cursor(holes=[{"uid": 12, "tries": 1}]), "--yes"),
        2,
        HOLES,
        setup=imap,
    ),
    Case("cursor-set-imap-holes-not-a-list", ("cursor", "set", "mail", cursor(holes="2"), "--yes"), 2, HOLES, setup=imap),
    Case(
        "cursor-set-imap-hole-tries-zero", ("cursor", "set", "mail", cursor(holes=[{"uid": 2, "tries": 0}]), "--yes"), 2, HOLES, setup=imap
    ),
    Case(
        "cursor-set-imap-hole-twice",
        ("cursor", "set", "mail", cursor(holes=[{"uid": 2, "tries": 1}] * 2), "--yes"),
        2,
        "each UID once",
        setup=imap,
    ),
    Case(
        "cursor-set-imap-hole-uid-text", ("cursor", "set", "mail", cursor(holes=[{"uid": "2", "tries": 1}]), "--yes"), 2, HOLES, setup=imap
    ),
    Case(
        "cursor-set-imap-too-many-holes",
        (
            "cursor",
            "set",
            "mail",
            json.dumps(
                {"mailboxes": {"INBOX": {"uidvalidity": 7, "last_uid": 500, "holes": [{"uid": u, "tries": 1} for u in range(1, 102)]}}}
            ),
            "--yes",
        ),
        2,
        "at most 100",
        setup=imap,
    ),
    Case("cursor-set-imap-unknown-key", ("cursor", "set", "mail", cursor(gaps=[2]), "--yes"), 2, '(and optionally "holes")', setup=imap),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, no raw escape, nothing changed outside the configured paths."""
    run_case(case, tmp_path)
