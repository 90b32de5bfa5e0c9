"""Bad inputs every area shares, run through the harness in ``tests/core/bad_inputs.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.bad_inputs import Case, run_case

CASES = [
    Case("cursor-set-not-json", ("cursor", "set", "imessage", "rowid=5"), 2, "VALUE must be JSON"),
    Case("poll-unknown-source", ("poll", "nosuch"), 2, "nosuch"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, no raw escape, nothing changed outside the configured paths."""
    run_case(case, tmp_path)
