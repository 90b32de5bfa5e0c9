"""Bad mbox files through the harness in ``tests/core/bad_inputs.py``: one line each, the rest of the file still read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.core.bad_inputs import Case, run_case

SEP = b"From sender@example.com Tue Nov  1 10:00:00 2022\n"


def mail(n: int, body: bytes = b"", eol: bytes = b"\n") -> bytes:
    """A small mail with its own Message-ID."""
    lines = [b"From: a@example.com", b"Subject: s%d" % n, b"Message-ID: <bad%d@example.com>" % n, b"", b"body %d" % n]
    return eol.join(lines) + eol + body


def mbox_source(data: bytes, name: str = "box.mbox") -> Callable[[Path], Path]:
    """A setup writing ``data`` as an mbox file and a config reading it as source ``mb``."""

    def setup(tmp: Path) -> Path:
        (tmp / name).write_bytes(data)
        return write_config(tmp, {"mb": {"type": "mbox", "path": str(tmp / name), "settle_seconds": 0}})

    return setup


CASES = [
    Case("mbox-not-an-mbox", ("poll", "mb"), 1, "not an mbox file", mbox_source(b"Subject: hello\n\nnot an mbox\n")),
    Case(
        "mbox-truncated-last-mail",
        ("poll", "mb"),
        0,
        "the last mail ends mid-line",
        mbox_source(SEP + mail(1) + b"\n" + SEP + mail(2)[:-3]),
    ),
    Case(
        "mbox-unquoted-from-in-body",
        ("poll", "mb"),
        0,
        "was not quoted by its writer",
        mbox_source(SEP + mail(1, b"\nFrom the desk of the editor\n") + b"\n" + SEP + mail(2) + b"\n"),
    ),
    Case("mbox-nul-bytes", ("poll", "mb"), 0, "NUL bytes", mbox_source(SEP + mail(1) + b"\n" + b"\0" * 300 + SEP + mail(2) + b"\n")),
    Case(
        "mbox-mixed-line-ends",
        ("poll", "mb"),
        0,
        "mixed line ends",
        mbox_source(SEP + mail(1, b"second line\r\n") + b"\n" + SEP + mail(2, eol=b"\r\n") + b"\n"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_mbox_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, nothing changed outside the configured paths; where the poll
    goes on, both mails of the file are stored."""
    run_case(case, tmp_path)
    if case.code == 0:
        stored = sorted(p.name for p in (tmp_path / "state" / "store").rglob("*.json") if "messages" in p.parts)
        assert stored == ["bad1%40example.com.json", "bad2%40example.com.json"], case.id
