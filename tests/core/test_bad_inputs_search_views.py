"""Bad inputs of conversations and counts (``memex show --thread``, ``memex search --count/--group-by/--output``), run
through the harness in ``tests/core/bad_inputs.py``: wrong option combinations, and the hostile mail of
``tests/core/hostile.py`` through each new view (the harness fails on any raw control character; each row names the
visible form it must print instead)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core import hostile as h
from tests.core.bad_inputs import Case, run_case


def out(id: str, args: tuple[str, ...], says: str, *, lines: int = 40) -> Case:
    """A row over the hostile world whose expected text is on stdout."""
    return Case(id, args, 0, says, setup=h.hostile_world, stream="stdout", lines=lines)


CASES = [
    Case("search-count-and-group-by", ("search", "--count", "--group-by", "month", "*"), 2, "--count and --group-by"),
    Case("search-count-option-after-query", ("search", "lease", "--count"), 2, "--count after the query"),
    Case("search-count-no-index", ("search", "--count", "*"), 1, "memex index rebuild"),
    Case("show-thread-not-stored", ("show", "--thread", "nobody@nowhere"), 2, "no stored message has the native ID"),
    out("threads-line", ("search", "--output=threads", "invoice"), h.SHOWN_SUBJECT, lines=1),
    out("threads-json", ("search", "--output=threads", "--json", "invoice"), "\\u202eevil\\u0000"),
    out("group-by-sender", ("search", "--group-by", "sender", "*"), h.SHOWN_SENDER, lines=1),
    out("group-by-conversation-json", ("search", "--group-by", "conversation", "--json", "*"), "\\u001b[2J"),
    out("show-thread", ("show", "--thread", h.MESSAGE_ID), h.SHOWN_BODY),
    out("show-thread-json", ("show", "--thread", "--json", h.MESSAGE_ID), "due\\u202efdp.exe", lines=200),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_gets_one_line_and_harms_nothing(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and line, no traceback, no raw escape, nothing changed outside the configured paths."""
    run_case(case, tmp_path)
