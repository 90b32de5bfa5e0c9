"""``memex people``: everyone across sources, with their handles and messages; merge, split and name them.

Decisions go to the people file (``people.toml`` beside the config, or ``[people] file``), a plain file you can read,
edit and keep in version control; nothing in the store or the search index changes (docs/people.md).
"""

from __future__ import annotations

from typing import Any

import click

from memex.cli.common import json_option, load_config, reports_errors
from memex.errors import MemexError
from memex.observe.safe_text import json_text


class PersonError(MemexError):
    """A person named on the command line that is not one person (exit 2, one line)."""

    exit_code = 2
    retry_helps = False


def _open(ctx: click.Context) -> Any:
    from memex.cli.poll import warn
    from memex.observe.safe_text import visible
    from memex.people import open_people
    from memex.search import index_path

    cfg = load_config(ctx)
    everyone = open_people(cfg, index=index_path(cfg.state_dir))
    for warning in everyone.warnings:  # a card or contacts file that could not be read: the rest still counts
        warn(visible(warning))
    return everyone


def _one(people: Any, ref: str) -> Any:
    """The one person ``ref`` names, or exit 2 saying why not."""
    from memex.people import handles_of

    found, _ = handles_of(people, ref)
    if not found:
        raise PersonError(f"no person matches {ref!r}; `memex people` lists everyone (an ID, a name or a handle)")
    if len(found) > 1:
        raise PersonError(f"{ref!r} names {len(found)} people ({', '.join(p.id for p in found)}); use one of their IDs")
    return found[0]


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
@reports_errors
def people(ctx: click.Context, as_json: bool) -> None:
    """Everyone across your sources: ID, name, handles, messages per source.

    People come from your contact cards ([people] vcards, address_book), the
    handles the indexed messages name, and your decisions in the people file
    (merge, split, name). Search takes a person: with:ID, from:"Anna Berg",
    to:+491701234567 (docs/people.md).
    """
    if ctx.invoked_subcommand is not None:
        return
    from memex.people import summary

    everyone = _open(ctx)
    try:
        rows = [summary(everyone, p) for p in sorted(everyone.book.people.values(), key=lambda p: p.id)]
    finally:
        everyone.close()
    if as_json:
        click.echo(json_text(rows, indent=2))
        return
    for row in rows:
        counts = ", ".join(f"{s} {n}" for s, n in sorted(row["messages"].items())) or "no messages"
        shown = ", ".join(row["handles"][:3]) + (f" +{len(row['handles']) - 3}" if len(row["handles"]) > 3 else "")
        click.echo(_safe(f"{_cut(row['id'], 20):<20} {_cut(row['name'] or '-', 24):<24} {shown}  ({counts})"))


@people.command("show")
@click.argument("ref")
@json_option
@click.pass_context
@reports_errors
def show(ctx: click.Context, ref: str, as_json: bool) -> None:
    """One person (REF: an ID, a name or a handle): every handle and where it came from."""
    from memex.people import summary

    everyone = _open(ctx)
    try:
        row = summary(everyone, _one(everyone, ref))
    finally:
        everyone.close()
    if as_json:
        click.echo(json_text(row, indent=2))
        return
    click.echo(_safe(f"{row['id']}: {row['name'] or '-'}"))
    for handle in row["handles"]:
        click.echo(_safe(f"  {handle}"))
    click.echo(_safe("  messages: " + (", ".join(f"{s} {n}" for s, n in sorted(row["messages"].items())) or "none")))
    click.echo(_safe("  from: " + ", ".join(row["from"])))


@people.command("conflicts")
@json_option
@click.pass_context
@reports_errors
def conflicts(ctx: click.Context, as_json: bool) -> None:
    """Handles two people claim: given to neither until you merge them or say whose they are in the people file."""
    everyone = _open(ctx)
    everyone.close()
    rows = [{"handle": c.handle.split(":", 1)[1], "claimed_by": list(c.claimants)} for c in everyone.book.conflicts]
    if as_json:
        click.echo(json_text(rows, indent=2))
        return
    for row in rows:
        click.echo(_safe(f"{row['handle']}: {'; '.join(row['claimed_by'])}"))


@people.command("merge")
@click.argument("into")
@click.argument("other")
@click.pass_context
@reports_errors
def merge(ctx: click.Context, into: str, other: str) -> None:
    """OTHER is the same person as INTO: every handle of OTHER becomes INTO's (written to the people file)."""
    from memex.people import read_decisions, write_decisions

    everyone = _open(ctx)
    everyone.close()
    a, b = _one(everyone, into), _one(everyone, other)
    if a.id == b.id:
        raise PersonError(f"{into!r} and {other!r} are one person already ({a.id})")
    decisions = {d.id: d for d in read_decisions(everyone.settings)}
    mine = decisions.pop(a.id, None)
    theirs = decisions.pop(b.id, None)
    decisions[a.id] = _decision(a.id, (mine.name if mine else None) or a.name or b.name,
                                [*(mine.handles if mine else ()), *_shown(a.handles), *(theirs.handles if theirs else ()), *_shown(b.handles)],
                                [*(mine.never if mine else ()), *(theirs.never if theirs else ())])  # fmt: skip
    write_decisions(everyone.settings, list(decisions.values()))
    _done(_safe(f"{b.id} merged into {a.id} ({everyone.settings.file})"))


@people.command("split")
@click.argument("ref")
@click.argument("handles", nargs=-1, required=True)
@click.option("--as", "new_id", help="The new person's ID (default: made of --name or the first handle).")
@click.option("--name", help="The new person's name.")
@click.pass_context
@reports_errors
def split(ctx: click.Context, ref: str, handles: tuple[str, ...], new_id: str | None, name: str | None) -> None:
    """HANDLES of REF belong to someone else: a new person with them, and never REF's again (written to the people file)."""
    from memex.people import read_decisions, write_decisions
    from memex.people.book import slug
    from memex.people.handles import normalize

    everyone = _open(ctx)
    everyone.close()
    person = _one(everyone, ref)
    rules = everyone.settings.rules
    moving = [h for h in handles if normalize(h, rules) in person.handles]
    if len(moving) != len(handles):
        missing = [h for h in handles if h not in moving]
        raise PersonError(f"{missing[0]!r} is not a handle of {person.id} (`memex people show {person.id}` lists them)")
    decisions = {d.id: d for d in read_decisions(everyone.settings)}
    new = new_id or slug(name or handles[0])
    if new in everyone.book.people or new in decisions:
        raise PersonError(f"{new!r} is taken; choose another ID with --as")
    mine = decisions.get(person.id)
    keep = [
        h for h in (mine.handles if mine else _shown(person.handles)) if normalize(h, rules) not in {normalize(x, rules) for x in moving}
    ]
    decisions[person.id] = _decision(person.id, (mine.name if mine else None) or person.name, keep,
                                     [*(mine.never if mine else ()), *moving])  # fmt: skip
    decisions[new] = _decision(new, name, list(moving), [])
    write_decisions(everyone.settings, list(decisions.values()))
    _done(_safe(f"{', '.join(moving)} split from {person.id} into {new} ({everyone.settings.file})"))


@people.command("name")
@click.argument("ref")
@click.argument("name")
@click.pass_context
@reports_errors
def name(ctx: click.Context, ref: str, name: str) -> None:
    """Call REF by NAME everywhere memex shows people (written to the people file)."""
    from memex.people import read_decisions, write_decisions

    everyone = _open(ctx)
    everyone.close()
    person = _one(everyone, ref)
    decisions = {d.id: d for d in read_decisions(everyone.settings)}
    mine = decisions.get(person.id)
    decisions[person.id] = _decision(
        person.id, name, list(mine.handles) if mine else _shown(person.handles), list(mine.never) if mine else []
    )
    write_decisions(everyone.settings, list(decisions.values()))
    _done(_safe(f"{person.id} is now called {name} ({everyone.settings.file})"))


def _done(line: str) -> None:
    """What a decision changed, said on a terminal only: off one (a script, cron) a command that worked prints nothing."""
    import sys

    if sys.stderr.isatty():
        click.echo(line, err=True)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _shown(handles: set[str]) -> list[str]:
    from memex.people.handles import shown

    return sorted(shown(h) for h in handles)


def _decision(pid: str, name: str | None, handles: list[str], never: list[str]) -> Any:
    from memex.people.book import Decision

    return Decision(pid, name, tuple(dict.fromkeys(handles)), tuple(dict.fromkeys(never)))


def _safe(text: str) -> str:
    """Names and handles come from cards and messages: control characters are shown, never sent to the terminal."""
    from memex.observe.safe_text import visible

    return visible(text)
