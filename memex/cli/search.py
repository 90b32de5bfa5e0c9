"""``memex search`` and ``memex show``: finding messages, read through :mod:`memex.read` (``memex index``: :mod:`memex.cli.index`)."""

from __future__ import annotations

import json
from typing import Any

import click

from memex.cli.common import json_option, load_config, reports_errors


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})  # options first: -term is a term
@click.argument("query", nargs=-1, required=True)
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Show at most N messages.")
@click.option("--rank", is_flag=True, help="Best match first (BM25; words as written before their other forms) instead of newest first.")
@click.option("--output", type=click.Choice(["messages", "threads"]), default="messages", show_default=True,
              help="One line per message, or per conversation (its time range, messages matched/in all, participants, subject).")  # fmt: skip
@click.option("--count", "count_only", is_flag=True, help="Print how many messages (or with --output=threads, conversations) match.")
@click.option("--group-by", type=click.Choice(["sender", "conversation", "month"]), default=None,
              help="Count the matches per sender, conversation or month (most first; months newest first), -n groups.")  # fmt: skip
@json_option
@click.pass_context
@reports_errors
def search(ctx: click.Context, query: tuple[str, ...], limit: int, rank: bool, output: str, count_only: bool,
           group_by: str | None, as_json: bool) -> None:  # fmt: skip
    """Find messages: words (matched by their stem), "phrases", prefix*, from: to: subject: body: attachment: in:
    (a conversation's name or id), source: id: has:attachment after:/before:YYYY-MM-DD date:SINCE..UNTIL is:me
    is:edited is:deleted, joined by AND, OR, NOT, XOR (any case), -term and (parentheses).

    Newest first (or --rank); one line per message: time (UTC), source, conversation, sender, snippet. --json
    gives each message's key and native ID (read the full object from the store, or `memex show KEY`). Unsent or
    deleted messages are left out unless the query says is:deleted. A query memex cannot read is one line, exit 2.
    --output=threads: one line per conversation instead; --count: how many match; --group-by: how many per sender,
    conversation or month.
    """
    from memex.cli.find import check_query, run_search

    check_query(query)
    cfg = load_config(ctx)
    if count_only or group_by or output == "threads":
        _summaries(cfg, " ".join(query), limit, output=output, count_only=count_only, group_by=group_by, as_json=as_json)
        return
    run_search(cfg, query, limit, rank, as_json)


def _summaries(cfg: Any, text: str, limit: int, *, output: str, count_only: bool, group_by: str | None, as_json: bool) -> None:
    """``--count``, ``--group-by`` and ``--output=threads`` (:mod:`memex.read.conversations`)."""
    from memex.cli.find import _cut, _when, served
    from memex.observe.safe_text import json_text, visible
    from memex.read.archive import Archive

    if count_only and group_by:
        from memex.errors import ConfigError

        raise ConfigError("--count and --group-by: give one of them (--group-by prints a count per group)")
    archive = Archive(cfg)
    if count_only:
        n = served(cfg, "count", query=text, conversations=output == "threads")
        if n is None:
            n = archive.count(text, conversations=output == "threads", people=False)
        click.echo(json.dumps({"count": n}) if as_json else str(n))
        return
    if group_by:
        groups = served(cfg, "group_counts", query=text, by=group_by, limit=limit)
        if groups is None:
            groups = archive.group_counts(text, group_by, limit)
        if as_json:
            click.echo(json_text(groups, indent=2))
            return
        for g in groups:
            label = g["group"] or "(none)"
            shown = f"{g['name']} <{label}>" if group_by == "sender" and g["name"] else (g["name"] or label)
            click.echo(f"{g['count']:>8}  {visible(_cut(shown, 80))}")
        return
    found = served(cfg, "threads", query=text, limit=limit)
    if found is None:
        found = archive.threads(text, limit)
    if as_json:
        click.echo(json_text(found, indent=2))
        return
    for t in found:
        span = _when(t["first"]) if t["first"] == t["last"] else f"{_when(t['first'])} .. {_when(t['last'])}"
        people = _cut(", ".join(t["participants"]) or "?", 40)
        title = _cut(t["subject"] or t["conversation"] or "-", 60)
        click.echo(f"{span}  [{t['matched']}/{t['total']}]  {visible(t['source'])}  {visible(people)}; {visible(title)}")


@click.command()
@click.argument("ref")
@click.option("--thread", "whole", is_flag=True, help="The whole conversation REF is in, oldest first (a mail thread by "
              "References and In-Reply-To, a chat by its conversation); needs the search index.")  # fmt: skip
@json_option
@click.pass_context
@reports_errors
def show(ctx: click.Context, ref: str, whole: bool, as_json: bool) -> None:
    """Print one message (REF: its key, or its native ID) with its revisions and attachment list, read from the store;
    with --thread, every message of its conversation."""
    from memex.cli.find import run_show

    cfg = load_config(ctx)
    if not whole:
        run_show(cfg, ref, as_json)
        return
    from memex.cli.find import served
    from memex.cli.show import human
    from memex.observe.safe_text import json_text

    found = served(cfg, "thread", ref=ref)
    if found is not None:
        messages = [(k, d, [(rk, rd) for rk, rd in r]) for k, d, r in found]
    else:
        from memex.cli.show import conversation, find
        from memex.store import open_store

        store = open_store(cfg.store)
        key, record = find(cfg, store, ref)
        messages = conversation(cfg, store, key, record)
    if as_json:
        click.echo(json_text({"thread": [{"key": k, "record": d, "revisions": [{"key": rk, "record": rd} for rk, rd in r]}
                                         for k, d, r in messages]}, indent=2, sort_keys=True))  # fmt: skip
        return
    rule = "\n\n" + "=" * 72 + "\n"
    click.echo(f"{len(messages)} message{'' if len(messages) == 1 else 's'}" + rule + rule.join(human(k, d, r) for k, d, r in messages))
