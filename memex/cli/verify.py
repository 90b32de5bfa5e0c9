"""``memex verify``: is the index whole? (see :mod:`memex.verify`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from memex.cli.common import json_option, load_config, reports_errors, stop_on_signals


@contextmanager
def progress(enabled: bool, label: str = "verifying: {n} objects read") -> Iterator[Callable[[int], None] | None]:
    """A live count (``label`` with ``{n}``) on the terminal's stderr (nothing when stderr is not a terminal)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn(label.replace("{n}", "{task.completed:,}")), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:  # fmt: skip
        task = bar.add_task("verify", total=None)

        def tick(n: int) -> None:
            if n % 500 == 0:
                bar.update(task, completed=n)

        yield tick


@click.command()
@click.argument("sources", nargs=-1)
@click.option("--repair", is_flag=True,
              help="Re-read from the sources what is missing or damaged and store it (create-only; a damaged object is "
                   "replaced atomically); then check again. Never deletes anything.")  # fmt: skip
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when the index is whole (cron mails only when something is wrong).")
@click.option("--workers", type=click.IntRange(min=1, max=256), default=None,
              help="Objects read at once (default: 16 on S3, 1 on a local folder).")  # fmt: skip
@json_option
@click.pass_context
@reports_errors
def verify(ctx: click.Context, sources: tuple[str, ...], repair: bool, quiet: bool, workers: int | None, as_json: bool) -> None:
    """Check that the index is whole: read every stored object of SOURCES (default: all) and compare with the sources.

    Reports per source: objects read; objects that are empty, not JSON, not the record schema, or whose key does
    not match their native_id; revisions whose original is missing; attachments whose bytes do not hash to their
    name; quarantined records; and, for sources that can be listed cheaply (iMessage, Maildir, IMAP, Messenger),
    messages up to the cursor that the index lacks. Exit codes: 0 whole, 1 something is damaged or missing (a summary says what),
    2 usage or configuration error. A progress count shows on a terminal only (stderr).
    """
    from memex.verify import verify as run_verify

    cfg = load_config(ctx)
    names = list(dict.fromkeys(sources))
    for name in names:
        cfg.source(name)  # an unknown source is a config error (exit 2)
    with stop_on_signals() as stop, progress(sys.stderr.isatty()) as tick:
        report = run_verify(cfg, names or None, repair=repair, workers=workers, stop=stop, tick=tick)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, sort_keys=True))
    elif not (quiet and report.whole):
        from memex.safe_text import visible

        click.echo("\n".join(visible(line) for line in report.human().split("\n")))  # keys, reasons, server text
    if not report.whole:
        sys.exit(1)
