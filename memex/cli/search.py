"""``memex search``, ``memex show`` and ``memex index rebuild|status``: finding messages (see :mod:`memex.search`)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from memex.cli.common import json_option, load_config, reports_errors
from memex.cli.verify import progress


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
    """``--count``, ``--group-by`` and ``--output=threads`` (:mod:`memex.search.threads`)."""
    from memex.cli.find import _cut, _when
    from memex.safe_text import json_text, visible
    from memex.search import threads as conv
    from memex.search.index import SearchIndex
    from memex.search.query import parse
    from memex.search.schema import STEM

    if count_only and group_by:
        from memex.errors import ConfigError

        raise ConfigError("--count and --group-by: give one of them (--group-by prints a count per group)")
    with SearchIndex.open(cfg.state_dir, create=False) as index:
        q = parse(text, stemmed=STEM in index.tables)
        if count_only:
            n = conv.count(index, q, threads=output == "threads")
            click.echo(json.dumps({"count": n}) if as_json else str(n))
            return
        if group_by:
            groups = conv.group_counts(index, q, group_by, limit)
            if as_json:
                click.echo(json_text(groups, indent=2))
                return
            for g in groups:
                label = g["group"] or "(none)"
                shown = f"{g['name']} <{label}>" if group_by == "sender" and g["name"] else (g["name"] or label)
                click.echo(f"{g['count']:>8}  {visible(_cut(shown, 80))}")
            return
        found = conv.threads(index, q, limit)
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
    from memex.safe_text import json_text
    from memex.search.show import conversation, find, human
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
    _known_sources(cfg, store, sources)
    began = time.monotonic()
    with progress(sys.stderr.isatty(), "indexing: {n} records") as tick:
        n = run_rebuild(cfg, store, list(dict.fromkeys(sources)) or None, workers=workers, tick=tick)
    summary = {"records": n, "seconds": round(time.monotonic() - began, 2), "sources": list(sources) or "all"}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    elif sys.stdout.isatty():
        click.echo(f"indexed {n:,} records in {summary['seconds']} s")


def _known_sources(cfg: Any, store: Any, sources: tuple[str, ...]) -> None:
    """Refuse (exit 2) a named source neither configured nor in the store: a rebuild of it would leave an empty row."""
    from memex.errors import ConfigError
    from memex.records import encode_id

    for name in sources:
        if name not in cfg.sources and next(iter(store.list_keys(f"messages/{encode_id(name)}/")), None) is None:
            known = ", ".join(sorted(cfg.sources)) or "none"
            raise ConfigError(f"no source named {name!r} in the config or the store (configured: {known}); name one of them",
                              path=cfg.path, key=f"sources.{name}")  # fmt: skip


@index.command("status")
@json_option
@click.pass_context
@reports_errors
def index_status(ctx: click.Context, as_json: bool) -> None:
    """Per source: messages indexed (and of them edited, deleted), records in the store, how many the index lacks,
    and records stored but not yet indexed (a crash's journal: the source's next poll adds them)."""
    from memex.cli.find import run_index_status

    run_index_status(load_config(ctx), as_json)
