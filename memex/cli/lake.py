"""``memex lake`` (the store's records as a Delta Lake table: update, compact, vacuum, status) and ``memex sql``."""

from __future__ import annotations

import sys
from typing import Any

import click

from memex.cli.common import json_option, load_config, reports_errors

_NEEDS_EXTRA = "the lake needs its optional extra (deltalake, pyarrow, duckdb and its Delta extension): pip install 'memex[lake]'"


def _lake() -> Any:
    """The lake's table module, or one line on how to install the extra (exit 2)."""
    try:
        import deltalake  # noqa: F401
        import pyarrow  # noqa: F401

        from memex.lake import table
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "memex":
            raise
        click.echo(f"memex: {_NEEDS_EXTRA}", err=True)
        sys.exit(2)
    return table


def _say(text: str) -> None:
    """A summary line, on a terminal only (off one, a command that worked prints nothing it was not asked for)."""
    if sys.stdout.isatty():
        click.echo(text)


@click.group()
def lake() -> None:
    """The store's records as a Delta Lake table beside the objects (<store>/lake/records), for DuckDB, Polars, Daft,
    Spark, Trino and Athena (docs/lake.md). The objects stay the truth: the table is built from them."""


@lake.command("update")
@click.option(
    "--rebuild", is_flag=True, help="Build the table anew from the whole store (one atomic overwrite; old files stay until vacuum)."
)
@click.option("--batch", type=click.IntRange(1, 10_000_000), default=50_000, show_default=True, help="Records per commit.")
@json_option
@click.pass_context
@reports_errors
def update(ctx: click.Context, rebuild: bool, batch: int, as_json: bool) -> None:
    """Add to the table every record the store holds and the table lacks (each exactly once; safe to kill and rerun)."""
    table = _lake()
    from memex.observe.logs import config_logger

    cfg = load_config(ctx, state=True)
    log = config_logger(cfg, "lake", console=sys.stderr)
    result = table.update(cfg, rebuild=rebuild, batch=batch, log=log)
    if as_json:
        from memex.observe.safe_text import json_text

        click.echo(json_text({"added": result.added, "no_longer_current": result.flipped, "commits": result.commits,
                              "version": result.version, "unreadable": result.unreadable, "rebuilt": result.rebuilt}))  # fmt: skip
    else:
        _say(f"lake: {result.added} records added, {result.flipped} no longer current, {result.commits} commits, version {result.version}")
    if result.unreadable:
        from memex.observe.safe_text import visible

        click.echo(f"memex: {len(result.unreadable)} objects are not readable records (first: {visible(result.unreadable[0])}); "
                   "run `memex verify` to see them", err=True)  # fmt: skip


@lake.command("compact")
@click.pass_context
@reports_errors
def compact(ctx: click.Context) -> None:
    """Rewrite small files into larger ones (one commit; readers see the table before or after, never between)."""
    table = _lake()
    metrics = table.compact(load_config(ctx, state=True))
    _say(f"lake: {metrics.get('numFilesRemoved', 0)} files compacted into {metrics.get('numFilesAdded', 0)}")


@lake.command("vacuum")
@click.option("--retain-hours", type=click.IntRange(0, 100_000), default=168, show_default=True,
              help="Keep every file a table version younger than this needs (readers that started earlier keep theirs).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="List what would be deleted, delete nothing.")
@click.pass_context
@reports_errors
def vacuum(ctx: click.Context, retain_hours: int, dry_run: bool) -> None:
    """Delete the table's files no recent version needs (old versions, and what a killed update left behind)."""
    table = _lake()
    removed = table.vacuum(load_config(ctx, state=True), retention_hours=retain_hours, dry_run=dry_run)
    if dry_run:
        for path in removed:
            click.echo(path)
    else:
        _say(f"lake: {len(removed)} files deleted")


@lake.command("status")
@json_option
@click.pass_context
@reports_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Where the table is, its version, files, rows and last commit."""
    table = _lake()
    from memex.observe.safe_text import json_text, visible

    found = table.status(load_config(ctx))
    if as_json:
        click.echo(json_text(found))
        return
    for k in ("uri", "version", "files", "rows", "committed_at"):
        click.echo(f"{k}: {visible('-' if found[k] is None else found[k])}")


@click.command("sql")
@click.argument("query")
@json_option
@click.pass_context
@reports_errors
def sql(ctx: click.Context, query: str, as_json: bool) -> None:
    """Run QUERY in DuckDB over the lake: views `records` (every stored version) and `current` (each message once).

    Example: memex sql "SELECT source, strftime(sent_at, '%Y-%m') AS month, count(*) FROM current GROUP BY ALL ORDER BY 2"
    """
    table = _lake()
    from memex.lake import sql as lake_sql
    from memex.observe.safe_text import json_text, visible

    cfg = load_config(ctx)
    uri, options = table.location(cfg)
    if table.open_table(uri, options) is None:
        raise table.LakeError(f"no lake table at {uri}; run `memex lake update` first")
    names, rows = lake_sql.run(uri, options, query)
    if as_json:
        for r in rows:
            click.echo(json_text(dict(zip(names, r, strict=True)), default=str))
        return
    click.echo("\t".join(visible(n) for n in names))
    for r in rows:
        click.echo("\t".join("" if v is None else visible(v) for v in r))
