"""Bad queries (issue 32 §6, issue 34): each is one line and exit 2, before the index is read; none returns every
message or none silently. Run through the harness in ``tests/core/bad_inputs.py``, by the plain command line (the
entry's own path) and by one click reads (``--debug``), which must say the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.bad_inputs import Case, run_case

QUERIES = [  # (id, query words, a fragment of the one line)
    ("and-alone", ("AND",), "AND needs a term before it"),
    ("or-alone", ("or",), "OR needs a term before it"),
    ("not-alone", ("NOT",), "NOT needs a term after it"),
    ("dangling-or", ("lease", "OR"), "OR needs a term after it"),
    ("dangling-and", ("lease", "and"), "AND needs a term after it"),
    ("leading-or", ("OR", "lease"), "OR needs a term before it"),
    ("or-and", ("lease", "OR", "AND", "lunch"), "OR needs a term after it"),
    ("xor-alone", ("xor",), "XOR needs a term before it"),
    ("unclosed-paren", ("(subject:patch",), "unclosed parenthesis"),
    ("unclosed-nested", ("((a OR b)",), "unclosed parenthesis"),
    ("unmatched-paren", ("subject:patch)",), "unmatched )"),
    ("empty-parens", ("()",), "empty parentheses"),
    ("minus-alone", ("lease", "-"), "no letter or digit"),
    ("not-before-paren-close", ("(lease NOT)",), "NOT needs a term after it"),
    ("from-no-value", ("from:",), "from: has no value"),
    ("after-no-value", ("after:",), "after: has no value"),
    ("subject-no-value", ("subject:",), "subject: has no value"),
    ("date-no-value", ("date:",), "date: has no value"),
    ("to-no-value-in-or", ("lease", "OR", "to:"), "to: has no value"),
    ("date-empty-range", ("date:..",), "give a date on at least one side"),
    ("date-not-a-date", ("date:soon",), "date:soon"),
    ("date-bad-month", ("date:2024-13",), "no such month"),
    ("date-bad-day", ("date:2023-02-29",), "no such day"),
    ("date-three-sides", ("date:2010..2011..2012",), "one .. between two dates"),
    ("after-not-a-day", ("after:2024",), "write it as YYYY-MM-DD"),
    ("unknown-operator", ("folder:inbox",), "unknown operator folder:"),
    ("unknown-is", ("is:unread",), "is:unread: unknown"),
    ("unclosed-quote", ('"lease',), "unclosed quote"),
    ("only-punctuation", ("!!!",), "no letter or digit"),
    ("option-after-query", ("lease", "--json"), "--json after the query"),
]

CASES = [Case(f"search-{cid}", ("search", *words), 2, says) for cid, words, says in QUERIES]
CASES += [Case(f"search-{cid}-via-click", ("--debug", "search", *words), 2, says) for cid, words, says in QUERIES[:3]]


def setup_with_config(tmp: Path) -> Path:
    """A config with no index yet: a query that is refused must be refused before the index is looked for."""
    from tests.conftest import write_config

    return write_config(tmp, {})


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_query_gets_one_line_and_exit_2(tmp_path: Path, case: Case) -> None:
    """Each row: exit 2 and its one line (never "no search index yet", never results), no traceback, nothing
    changed outside the configured paths."""
    case.setup = setup_with_config
    out = run_case(case, tmp_path)
    assert out.stdout == "" and "no search index" not in out.stderr
