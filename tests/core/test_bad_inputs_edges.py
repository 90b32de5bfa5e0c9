"""Trust at the edges (issue 40 §2 and §4): a closed pipe, a query too deep or too long, system paths, a huge token,
a state folder that is a file, a command with no terminal, a mistyped key, an interrupted backfill. Each row is one
line and its exit code, through the harness in ``tests/core/bad_inputs.py``; the closed pipe is its own test (the
harness reads the output, so it cannot close it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memex.search.parse import MAX_DEPTH, MAX_LENGTH, MAX_TERMS
from tests.conftest import ROOT, write_config
from tests.core.bad_inputs import Case, run_case

# -- a closed pipe (§2) --------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo archive (a sample chat.db polled into a file store, with its log, cursor and index): its config."""
    where = tmp_path_factory.mktemp("pipe") / "demo"
    out = subprocess.run([sys.executable, "-m", "memex", "demo", "--dir", str(where), "--messages", "40"],
                         capture_output=True, text=True, timeout=120, env={**_env(), "HOME": str(where.parent)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    return where / "config.toml"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMEX_CONFIG", "MEMEX_DEBUG")}
    env["PYTHONPATH"] = str(ROOT)
    return env


# Commands that write more than one line: the reader has gone before the first.
PIPED = [
    ("tail",),
    ("people",),
    ("cursor", "show"),
    ("status",),
    ("search", "*"),  # the entry's own path (no click)
    ("search", "--json", "*"),
    ("--debug", "search", "*"),  # the same through click
    ("index", "status"),
    ("--help",),
]


@pytest.mark.parametrize("args", PIPED, ids=[" ".join(a) for a in PIPED])
def test_a_closed_pipe_ends_the_command_quietly(demo: Path, args: tuple[str, ...]) -> None:
    """``memex tail | head -1`` once ``head`` has gone: no line on stderr (no "internal error", no traceback, no
    "Exception ignored" from the interpreter's last flush), exit 1, as ``ls | head`` ends (the reader's end is closed
    before the command starts, so every run is the case the issue met 5 times in 5)."""
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run([sys.executable, "-m", "memex", "--config", str(demo), *args], stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=120, env=_env())  # fmt: skip
    finally:
        os.close(write)
    assert (out.returncode, out.stderr) == (1, ""), out.stderr


def test_a_pipe_read_to_its_end_is_no_error(demo: Path) -> None:
    """The other side of the closed-pipe rule: a reader that takes everything gets everything, exit 0 (the check asks
    the kernel whether the reader has gone, never guesses from the error alone)."""
    out = subprocess.run([sys.executable, "-m", "memex", "--config", str(demo), "search", "*"],
                         capture_output=True, text=True, timeout=120, env=_env())  # fmt: skip
    assert out.returncode == 0 and len(out.stdout.splitlines()) >= 20 and out.stderr == ""


# -- the bad-input table ---------------------------------------------------------


def _no_index(tmp: Path) -> Path:
    """A config with no index yet: a query past a limit is refused before the index is looked for."""
    return write_config(tmp, {})


DEEP = "(" * (MAX_DEPTH + 1) + "lunch" + ")" * (MAX_DEPTH + 1)

CASES = [
    # §2: a query past a limit is one line naming the limit, exit 2 (was RecursionError, SQLite's "parser stack overflow")
    Case("search-200-parentheses", ("search", "(" * 200 + "lunch" + ")" * 200), 2, f"more than {MAX_DEPTH} levels deep", setup=_no_index),
    Case("search-deeper-than-the-limit", ("search", DEEP), 2, f"more than {MAX_DEPTH} levels deep", setup=_no_index),
    Case("search-50-stacked-nots", ("search", "NOT " * 50 + "lunch"), 2, f"more than {MAX_DEPTH} levels deep", setup=_no_index),
    Case("search-nots-and-minus", ("search", "lunch -(" * (MAX_DEPTH // 2 + 1) + "NOT lunch" + ")" * (MAX_DEPTH // 2 + 1)), 2,
         "levels deep", setup=_no_index),
    Case("search-too-many-terms", ("search", " OR ".join(["source:x"] * (MAX_TERMS + 1))), 2, f"at most {MAX_TERMS}", setup=_no_index),
    Case("search-too-long", ("search", "x" * (MAX_LENGTH + 1)), 2, f"at most {MAX_LENGTH:,}", setup=_no_index),
    Case("search-deep-via-click", ("--debug", "search", DEEP), 2, "levels deep", setup=_no_index),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_input_at_the_edges_gets_one_line(tmp_path: Path, case: Case) -> None:
    """Each row: its exit code and its one line, no traceback, no raw escape, nothing changed outside the configured
    paths."""
    run_case(case, tmp_path)


# -- the same limits over MCP ---------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("(" * 200 + "lunch" + ")" * 200, "levels deep"),
        ("NOT " * 50 + "lunch", "levels deep"),
        ("lu\x00nch", "NUL"),
        (" ".join(["lunch"] * (MAX_TERMS + 1)), f"at most {MAX_TERMS}"),
    ],
    ids=["parentheses", "nots", "nul", "terms"],
)
def test_a_query_past_a_limit_over_mcp_names_the_limit_not_the_index(tmp_path: Path, query: str, says: str) -> None:
    """Over MCP the same query is one tool error naming the limit: never "cannot read the search index" nor advice
    to rebuild a healthy index (the index is there: the query is what is wrong)."""
    from memex.assistant.archive import Archive
    from memex.assistant.server import call
    from memex.config import load
    from memex.search.index import SearchIndex, index_path

    cfg = load(write_config(tmp_path, {}))
    index_path(cfg.state_dir).parent.mkdir(parents=True)
    SearchIndex(index_path(cfg.state_dir)).close()
    result = call(Archive(cfg), "search", {"query": query})
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error and says in text and "rebuild" not in text and "index" not in text, text
