"""The fast command lines of ``memex search`` and ``memex show`` (:mod:`memex.cli.find`) against the click commands
they stand for: every click option has its fast form (same parameter, kind, choices, default), and every line the
fast path understands means what click makes of it. A new click option without its fast form fails here, instead
of silently sending its command lines the slow way (issue 41 §4)."""

from __future__ import annotations

import click
import pytest

from memex.cli import find
from memex.cli.search import search, show


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


def test_every_click_option_of_search_and_show_has_its_fast_form() -> None:
    """Each option of the click commands (all its spellings) is in the fast tables under its parameter's name,
    a flag as a flag and a value as a value, with the same choices, minimum and default; nothing else is there."""
    spelled: set[str] = set()
    for opt in _options(search):
        table = find.SEARCH_FLAGS if opt.is_flag else find.SEARCH_VALUES
        for name in opt.opts + opt.secondary_opts:
            assert table.get(name) == opt.name, f"search {name}: add it to memex.cli.find's tables"
            spelled.add(name)
        assert find.SEARCH_DEFAULTS[str(opt.name)] == (opt.default if not opt.is_flag else False), opt.name
        if isinstance(opt.type, click.Choice):
            assert find.CHOICES[str(opt.name)] == tuple(opt.type.choices), opt.name
        if isinstance(opt.type, click.IntRange):
            assert (opt.type.min, opt.type.max) == (1, None), opt.name
    assert spelled == set(find.SEARCH_FLAGS) | set(find.SEARCH_VALUES)
    assert {n for o in _options(show) for n in o.opts} == set(find.SHOW_FLAGS)
    assert all(find.SHOW_FLAGS[n] == o.name for o in _options(show) for n in o.opts)
    assert [p.name for p in search.params if isinstance(p, click.Argument)] == ["query"]


LINES = [
    ["search", "lease"], ["search", "-n", "5", "--rank", "--json", "a", "OR", "b"], ["search", "--limit=7", "(a", "-b)"],
    ["search", "--count", "x"], ["search", "--count", "--output=threads", "*"], ["search", "--output", "threads", "--json", "x"],
    ["search", "--group-by", "month", "-n", "3", "*"], ["search", "--group-by=sender", "x"], ["search", "--", "-x"],
    ["search", "--json", "--", "--rank", "y"], ["search", "-n", "2", "--", "a"], ["show", "K"], ["show", "--thread", "K"],
    ["show", "--json", "--thread", "K"], ["show", "K", "--json"],
]  # fmt: skip


@pytest.mark.parametrize("argv", LINES)
def test_a_fast_line_means_what_click_makes_of_it(argv: list[str]) -> None:
    """Each line is understood by the fast path, and its values are those click parses from it."""
    found = find.find_args(argv, {})
    assert found is not None, argv
    ctx = (search if argv[0] == "search" else show).make_context(argv[0], argv[1:])
    if argv[0] == "search":
        expected = {k: ctx.params[k] for k in find.SEARCH_DEFAULTS}
        got = {k: getattr(found, k) for k in find.SEARCH_DEFAULTS}
        assert (got, found.words) == (expected, tuple(ctx.params["query"]))
    else:
        assert (found.whole, found.as_json, found.words) == (ctx.params["whole"], ctx.params["as_json"], (ctx.params["ref"],))


@pytest.mark.parametrize(
    "argv",
    [["search", "--output", "all", "x"], ["search", "--group-by", "day", "x"], ["search", "--count", "--group-by", "month", "x"],
     ["search", "--count", "--count", "x"], ["search", "--output=threads", "--output=messages", "x"], ["search", "--"],
     ["search", "--json", "--"], ["show", "--thread", "--thread", "K"], ["show", "--all", "K"]],
)  # fmt: skip
def test_a_bad_or_unusual_line_is_left_to_click(argv: list[str]) -> None:
    """A value click refuses, a repeated option, --count with --group-by or no query: click parses it (and says
    what is wrong)."""
    assert find.find_args(argv, {}) is None
