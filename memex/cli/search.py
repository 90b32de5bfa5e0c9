"""``memex search`` and ``memex show``: finding messages, read through :mod:`memex.read` (``memex index``: :mod:`memex.cli.index`)."""

from __future__ import annotations

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
    from memex.cli.find import check_query, run_search, run_summaries

    check_query(query)
    cfg = load_config(ctx)
    if count_only or group_by or output == "threads":
        run_summaries(cfg, " ".join(query), limit, output=output, count_only=count_only, group_by=group_by, as_json=as_json)
        return
    run_search(cfg, query, limit, rank, as_json)


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
    from memex.cli.find import run_show, run_thread

    (run_thread if whole else run_show)(load_config(ctx), ref, as_json)
