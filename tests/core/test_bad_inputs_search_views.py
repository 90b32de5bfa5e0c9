"""Bad inputs of conversations and counts (``memex show --thread``, ``memex search --count/--group-by/--output``), run
through the harness in ``tests/core/bad_inputs.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.bad_inputs import Case, run_case

CASES = [
    Case("search-count-and-group-by", ("search", "--count", "--group-by", "month", "*"), 2, "--count and --group-by"),
    Case("search-count-option-after-query", ("search", "lease", "--count"), 2, "--count after the query"),
    Case("search-count-no-index", ("search", "--count", "*"), 1, "memex index rebuild"),
    Case("show-thread-not-stored", ("show", "--thread", "nobody@nowhere"), 2, "no stored message has the native ID"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, no raw escape, nothing changed outside the configured paths."""
    run_case(case, tmp_path)
