"""``memex search``, ``memex show`` and ``memex index rebuild|status``: finding messages (see :mod:`memex.search`)."""

from __future__ import annotations

import json
import sys
import time

import click

from memex.cli.common import json_option, load_config, reports_errors
from memex.cli.verify import progress


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})  # options first: -term is a term
@click.argument("query", nargs=-1, required=True)
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Show at most N messages.")
@click.option("--rank", is_flag=True, help="Best match first (BM25; words as written before their other forms) instead of newest first.")
@json_option
@click.pass_context
@reports_errors
def search(ctx: click.Context, query: tuple[str, ...], limit: int, rank: bool, as_json: bool) -> None:
    """Find messages: words (matched by their stem), "phrases", prefix*, from: to: subject: body: attachment: in:
    (a conversation's name or id), source: id: has:attachment after:/before:YYYY-MM-DD date:SINCE..UNTIL is:me
    is:edited is:deleted, joined by AND, OR, NOT, XOR (any case), -term and (parentheses).

    Newest first (or --rank); one line per message: time (UTC), source, conversation, sender, snippet. --json
    gives each message's key and native ID (read the full object from the store, or `memex show KEY`). Unsent or
    deleted messages are left out unless the query says is:deleted. A query memex cannot read is one line, exit 2.
    """
    from memex.cli.find import check_query, run_search

    check_query(query)
    run_search(load_config(ctx), query, limit, rank, as_json)


@click.command()
@click.argument("ref")
@json_option
@click.pass_context
@reports_errors
def show(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Print one message (REF: its key, or its native ID) with its revisions and attachment list, read from the store."""
    from memex.cli.find import run_show

    run_show(load_config(ctx), ref, as_json)


@click.group()
def index() -> None:
    """The search index: rebuild it from the store, see how far it is behind (polls keep it in step)."""


@index.command()
@click.argument("sources", nargs=-1)
@click.option("--workers", type=click.IntRange(min=1, max=256), default=None,
              help="Objects read at once (default: 16 on S3, 1 on a local folder).")  # fmt: skip
@json_option
@click.pass_context
@reports_errors
def rebuild(ctx: click.Context, sources: tuple[str, ...], workers: int | None, as_json: bool) -> None:
    """Rebuild the search index of SOURCES (default: every source in the store) from the store alone.

    Reads every record and revision (S3: listed page by page, read in parallel); a second host, or anyone with
    only the bucket, gets the same index. A progress count shows on a terminal only (stderr).
    """
    from memex.search.build import rebuild as run_rebuild
    from memex.store import open_store
    from memex.verify import default_workers

    cfg = load_config(ctx, state=True)
    workers = workers or default_workers(cfg)
    store = open_store(cfg.store, max_pool_connections=max(10, workers))
    began = time.monotonic()
    with progress(sys.stderr.isatty(), "indexing: {n} records") as tick:
        n = run_rebuild(cfg, store, list(dict.fromkeys(sources)) or None, workers=workers, tick=tick)
    summary = {"records": n, "seconds": round(time.monotonic() - began, 2), "sources": list(sources) or "all"}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    elif sys.stdout.isatty():
        click.echo(f"indexed {n:,} records in {summary['seconds']} s")


@index.command("status")
@json_option
@click.pass_context
@reports_errors
def index_status(ctx: click.Context, as_json: bool) -> None:
    """Per source: messages indexed (and of them edited, deleted), records in the store, how many the index lacks,
    and records stored but not yet indexed (a crash's journal: the source's next poll adds them)."""
    from memex.cli.find import run_index_status

    run_index_status(load_config(ctx), as_json)
