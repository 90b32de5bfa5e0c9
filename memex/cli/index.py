"""``memex index rebuild|status``: the search index made again from the store (:mod:`memex.search.build`, the
writer), and how far it is behind."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import click

from memex.cli.common import json_option, load_config, reports_errors
from memex.cli.verify import progress


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
