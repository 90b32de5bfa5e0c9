"""``memex people``: everyone across sources, with their handles and messages; merge, split and name them.

Decisions go to the people file (``people.toml`` beside the config, or ``[people] file``), a plain file you can read,
edit and keep in version control; nothing in the store or the search index changes (docs/people.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from memex.cli.common import json_option, load_config, reports_errors
from memex.observe.safe_text import json_text, visible


def _open(ctx: click.Context) -> Any:
    from memex.cli.poll import warn
    from memex.people import open_people
    from memex.search import index_path
    from memex.search.schema import PEOPLE_ROWS

    cfg = load_config(ctx)
    everyone = open_people(cfg, index=index_path(cfg.state_dir), index_rows=PEOPLE_ROWS)
    for warning in everyone.warnings:  # a card or contacts file that could not be read: the rest still counts
        warn(visible(warning))
    return everyone


def _one(people: Any, ref: str) -> Any:
    """The one person ``ref`` names, or exit 2 saying why not."""
    from memex.people.decide import only

    return only(people.find(ref), ref)


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
    from memex.people import summaries

    everyone = _open(ctx)
    try:
        rows = summaries(everyone)
    finally:
        everyone.close()
    if as_json:
        click.echo(json_text(rows, indent=2))
        return
    lines = []
    for row in rows:
        counts = ", ".join(f"{s} {n}" for s, n in sorted(row["messages"].items())) or "no messages"
        shown = ", ".join(row["handles"][:3]) + (f" +{len(row['handles']) - 3}" if len(row["handles"]) > 3 else "")
        lines.append(_safe(f"{_cut(row['id'], 20):<20} {_cut(row['name'] or '-', 24):<24} {shown}  ({counts})"))
    if lines:  # one write: 200,000 people are one call, not 200,000
        click.echo("\n".join(lines))


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
    try:
        rows = [{"handle": c.handle.split(":", 1)[1], "claimed_by": list(c.claimants)} for c in everyone.book.conflicts]
    finally:
        everyone.close()
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
    from memex.people import decide

    _decide(ctx, lambda everyone, mine: decide.merge(everyone.book, mine, into, other, everyone.settings.rules))


@people.command("split")
@click.argument("ref")
@click.argument("handles", nargs=-1, required=True)
@click.option(
    "--as", "new_id", help="The new person's ID: lower-case letters, digits and '-' (default: made of --name or the first handle)."
)
@click.option("--name", help="The new person's name.")
@click.pass_context
@reports_errors
def split(ctx: click.Context, ref: str, handles: tuple[str, ...], new_id: str | None, name: str | None) -> None:
    """HANDLES of REF belong to someone else: a new person with them, and never REF's again (written to the people file)."""
    from memex.people import decide

    _decide(ctx, lambda everyone, mine: decide.split(everyone.book, mine, ref, handles, everyone.settings.rules, new_id, name))


@people.command("name")
@click.argument("ref")
@click.argument("name")
@click.pass_context
@reports_errors
def name(ctx: click.Context, ref: str, name: str) -> None:
    """Call REF by NAME everywhere memex shows people (written to the people file)."""
    from memex.people import decide

    _decide(ctx, lambda everyone, mine: decide.rename(everyone.book, mine, ref, name, everyone.settings.rules))


def _decide(ctx: click.Context, make: Callable[[Any, list[Any]], Any]) -> None:
    """Make a change from everyone and your decisions (memex.people.decide), write it, and say what it changed."""
    from memex.people import read_decisions, write_decisions

    everyone = _open(ctx)
    try:
        change = make(everyone, read_decisions(everyone.settings))
    finally:
        everyone.close()
    write_decisions(everyone.settings, change.decisions)
    _done(_safe(f"{change.said} ({everyone.settings.file})"))


def _done(line: str) -> None:
    """What a decision changed, said on a terminal only: off one (a script, cron) a command that worked prints nothing."""
    import sys

    if sys.stderr.isatty():
        click.echo(line, err=True)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _safe(text: str) -> str:
    """Names and handles come from cards and messages: control characters are shown, never sent to the terminal."""
    return visible(text)
