"""The ``memex`` command line.

Exit codes: 0 done (also: nothing new, or skipped because a poll is already
running), 1 runtime error, 2 usage or configuration error. Errors are one
line on stderr naming the file, key or message and what to do.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from memex.cli.assistant import mcp
from memex.cli.common import fail, json_option, load_config, reports_errors, stop_on_signals
from memex.cli.deploy import cron, launchd
from memex.cli.index import index
from memex.cli.lake import lake, sql
from memex.cli.people import people
from memex.cli.schema import schema
from memex.cli.search import search, show
from memex.cli.serve import serve
from memex.cli.verify import verify
from memex.cli.watch import watch


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="MEMEX_CONFIG",
    help="Config file (default: $MEMEX_CONFIG, else ~/.config/memex/config.toml; on macOS ~/Library/Application Support/memex/config.toml).",
)
@click.option("--debug", is_flag=True, envvar="MEMEX_DEBUG",
              help="On an internal error, also print its traceback (to report a bug; it may show message data); log debug events.")  # fmt: skip
@click.version_option(package_name="memex", message="memex %(version)s")
@click.pass_context
def main(ctx: click.Context, config_path: Path | None, debug: bool) -> None:
    """memex: bring your messages from every source into one deduplicated index.

    Each configured source is polled from where it left off; every message
    becomes one JSON object keyed by its native ID, so re-uploads are no-ops.
    Exit codes: 0 done, 1 runtime error, 2 usage or config error.
    """
    from memex.liblog import route_library_logs

    route_library_logs()  # the libraries a command uses (boto3, watchdog, msal) log in memex's form
    ctx.obj = {"config_path": config_path}
    if debug:
        import os

        os.environ["MEMEX_DEBUG"] = "1"  # also read by the runner for errors caught per source


@main.command()
@click.argument("sources", nargs=-1)
@click.option("--all", "all_sources", is_flag=True, help="Poll every enabled source (each in its own thread).")
@click.option("--max-seconds", type=click.FloatRange(min=0.1), default=50.0, show_default=True,
              help="Stop taking new messages after this long, so a cron minute ends before the next starts.")  # fmt: skip
@click.pass_context
@reports_errors
def poll(ctx: click.Context, sources: tuple[str, ...], all_sources: bool, max_seconds: float) -> None:
    """Poll SOURCES (or --all) once: fetch what is new, store it, advance the cursor.

    Meant for cron, every minute. A source whose previous poll is still
    running is skipped (exit 0). SIGTERM or Ctrl-C stops after the current
    message, with progress saved; a request to a server that hangs is cut
    short 2 s after SIGTERM or after --max-seconds.
    """
    from memex.cli.poll import run_poll

    cfg = load_config(ctx)
    if all_sources == bool(sources):
        raise click.UsageError("name one or more SOURCES, or pass --all")
    code = run_poll(cfg, sources, all_sources, max_seconds)
    if code:
        sys.exit(code)


@main.command()
@json_option
@click.pass_context
@reports_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Show a row per source: cursor, last poll, last successful poll, health state, last result.

    States (OK, IDLE, SKIPPED, AUTH, FAILING, STALE, STUCK, REGRESSED, SPOOL,
    DISABLED, CONFIG, REMOTE) are explained in docs/operations.md; --json adds
    state_reason. On a terminal each row fits one line (less useful columns
    dropped, the result cut with an ellipsis); off one rows are whole. Exits
    2 when a source's config section is broken (CONFIG).
    """
    from memex.observe.status import CONFIG, collect, render_table

    rows = collect(load_config(ctx))
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
    else:
        click.echo(render_table(rows, width=_screen_width()))
    if any(r["state"] == CONFIG for r in rows):
        sys.exit(2)


def _screen_width() -> int | None:
    """The terminal's width when stdout is one (``$COLUMNS`` first), else None: a pipe gets whole lines."""
    import shutil

    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


@main.command()
@click.argument("source")
@click.option("--no-browser", is_flag=True, help="Google: open the address on any machine and paste back where the browser was sent.")
@click.pass_context
@reports_errors
def auth(ctx: click.Context, source: str, no_browser: bool) -> None:
    """Sign SOURCE in interactively once (Teams, IMAP with auth = "oauth2"); cron polls then refresh silently.

    Microsoft (Teams, IMAP provider "microsoft"): prints a URL and a code; open
    the URL in any browser, enter the code and approve. Google (IMAP provider
    "google"): prints an address to open in a browser on this machine, which
    comes back to memex on 127.0.0.1; with --no-browser, open it anywhere and
    paste back the address the browser ends on. The login is kept in the
    state folder (0600). Run it again when a poll says the login expired or
    was revoked. Exit codes: 0 signed in, 1 sign-in failed, 2 SOURCE's type
    needs no sign-in or the config is wrong.
    """
    from memex.capabilities import capabilities
    from memex.errors import ConfigError, SourceError
    from memex.registry import open_poller
    from memex.safe_text import visible

    cfg = load_config(ctx)
    conf = cfg.source(source)
    with open_poller(conf) as poller:
        authenticate = capabilities(poller).authenticate  # memex.capabilities.Authenticating
        if authenticate is None:
            raise ConfigError(f"sources of type {conf.type!r} need no sign-in", path=cfg.path, key=f"sources.{source}")
        extra: dict[str, Any] = {}
        if no_browser:

            def ask(prompt: str) -> str:
                try:
                    return str(click.prompt(prompt, err=True))
                except click.Abort:  # stdin ended (no terminal, nothing piped in): never click's bare "Aborted!"
                    click.echo(err=True)  # end the prompt's line
                    raise SourceError(f"{source}: no address was pasted (the input ended); run `memex auth {source} --no-browser` "
                                      "on a terminal and paste the address the browser ends on") from None  # fmt: skip

            extra["ask"] = ask
        elif sys.stderr.isatty():
            import webbrowser

            extra["open_browser"] = webbrowser.open
        who = authenticate(lambda line: click.echo(visible(line), err=True), **extra)
    click.echo(f"{source}: signed in as {visible(who)}; polls will refresh the login silently")


@main.group()
def cursor() -> None:
    """Show, set or reset a source's cursor (the only way to move one backward)."""


@cursor.command("show")
@click.argument("source", required=False)
@json_option
@click.pass_context
@reports_errors
def cursor_show(ctx: click.Context, source: str | None, as_json: bool) -> None:
    """Print the stored cursor of SOURCE (or of every source)."""
    from memex.state.backend import cursor_store

    cfg = load_config(ctx)
    sections = cursor_store(cfg).load()
    names = [source] if source else sorted(set(cfg.sources) | set(sections))
    if source:
        cfg.source(source)
    data = {n: sections.get(n, {}).get("cursor") for n in names}
    if as_json:
        click.echo(json.dumps(data if not source else data[source], indent=2, sort_keys=True))
        return
    from memex.safe_text import visible

    for n in names:  # json.dumps escapes every non-ASCII character: the cursor is exact and inert
        click.echo(f"{visible(n)}\t{json.dumps(data[n], sort_keys=True)}")


def _confirm(what: str) -> None:
    """Ask on the terminal whether to go on (no: abort); with no terminal, one line saying to pass ``--yes`` (exit 2)."""
    if not sys.stdin.isatty():
        fail(f"{what}; there is no terminal to confirm it on: pass --yes", 2)
    if not click.confirm(f"{what}. Continue?", default=False):
        raise click.Abort()


def _explicit_change(cfg: Any, source: str, value: Any, *, yes: bool = True) -> None:
    """Set (or, with None, reset) ``source``'s cursor through :func:`memex.cursor_edit.change_cursor`; say what changed."""
    from memex.cursor_edit import change_cursor
    from memex.safe_text import visible

    change = change_cursor(cfg, source, value, confirm_back=None if yes else _confirm)
    click.echo(visible(change.line()))


@cursor.command("set")
@click.argument("source")
@click.argument("value")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation when the cursor moves back.")
@click.pass_context
@reports_errors
def cursor_set(ctx: click.Context, source: str, value: str, yes: bool) -> None:
    """Set SOURCE's cursor to VALUE, a JSON value in the poller's own shape.

    Example: memex cursor set imessage '{"rowid": 89000}'. The value is
    checked (shape, types, no negative positions; exit 2 otherwise); moving
    the cursor back, or null (a reset), asks for confirmation like reset does. The change is
    logged as an explicit cursor.set, so the dashboard does not flag it.
    """
    cfg = load_config(ctx)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        fail(f"cursor of {source!r} not set: VALUE must be JSON, e.g. '{{\"rowid\": 89000}}'", 2)
    if parsed is None:  # null forgets the cursor: the same as reset, so it asks the same way
        cfg.source(source)
        if not yes:
            _confirm(f"Setting the cursor of {source!r} to null resets it: the next poll re-reads its whole history")
        _explicit_change(cfg, source, None)
        return
    _explicit_change(cfg, source, parsed, yes=yes)


@cursor.command("reset")
@click.argument("source")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
@reports_errors
def cursor_reset(ctx: click.Context, source: str, yes: bool) -> None:
    """Forget SOURCE's cursor: its next poll starts from the beginning (duplicates are skipped)."""
    cfg = load_config(ctx)
    cfg.source(source)
    if not yes:
        _confirm(f"Resetting the cursor of {source!r} makes the next poll re-read its whole history")
    _explicit_change(cfg, source, None)


@main.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path(".demo"),
              show_default=True, help="Where the demo's config, sample chat.db, state and store go.")  # fmt: skip
@click.option("--messages", type=click.IntRange(min=1), default=2000, show_default=True, help="Size of the first sample history.")
@reports_errors
def demo(directory: Path, messages: int) -> None:
    """Run memex on generated sample data: build a chat.db, poll it into a local store, show status.

    The first run creates DIR with a config, a realistic sample chat.db and
    an empty file store. Each later run adds a few new messages, so you can
    watch a poll pick them up. It writes only inside DIR: a config there whose
    state or store points outside DIR is refused (exit 2).
    """
    from memex.cli.demo import run_demo

    sys.exit(run_demo(directory, messages))


def _utc_datetime(value: str | None, option: str) -> Any:
    """Parse ``YYYY-MM-DD`` or RFC 3339 as an aware UTC datetime (no offset given: UTC)."""
    from datetime import UTC, datetime

    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date; use YYYY-MM-DD or RFC 3339 (2019-05-01T12:00:00Z)", param_hint=option) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@main.command()
@click.argument("source")
@click.option("--since", metavar="DATE", help="Messages sent at or after DATE (YYYY-MM-DD or RFC 3339; UTC unless it has an offset).")
@click.option("--until", metavar="DATE", help="Only messages sent before DATE (same forms as --since).")
@click.option("--rewrite", is_flag=True, help="Replace stored objects that differ (after a parser fix) instead of skipping them.")
@click.option("--workers", type=click.IntRange(min=1, max=256), default=8, show_default=True, help="Concurrent uploads.")
@click.option("--restart", is_flag=True, help="Forget this source's backfill checkpoint and start over.")
@click.option("--retry-delay", type=click.FloatRange(min=0), default=0.5, hidden=True, help="First retry's backoff (tests).")
@json_option
@click.pass_context
@reports_errors
def backfill(ctx: click.Context, source: str, since: str | None, until: str | None, rewrite: bool, workers: int, restart: bool,
             retry_delay: float, as_json: bool) -> None:  # fmt: skip
    """Store SOURCE's whole history, or the messages sent in [--since, --until).

    Runs beside cron: it never moves the live cursor or takes the poll's
    lock (duplicates are skipped). Progress is checkpointed: Ctrl-C or
    SIGTERM stops cleanly (exit 130) and the same command continues; other
    options than the stopped run's are refused until --restart. The summary
    line is printed on a terminal; off one, a finished backfill prints nothing
    and any other ends with its JSON log line on stderr. Exit codes:
    0 done, 1 some messages failed or another backfill of SOURCE is running,
    2 usage or configuration error, 130 interrupted.
    """
    from memex.backfill import backfill as run_backfill
    from memex.error_lines import say_error
    from memex.safe_text import visible

    start, end = _utc_datetime(since, "--since"), _utc_datetime(until, "--until")
    if start is not None and end is not None and start >= end:
        raise click.UsageError("--since must be before --until")
    cfg = load_config(ctx)
    cfg.source(source)
    with stop_on_signals() as stop:
        result = run_backfill(cfg, source, since=start, until=end, rewrite=rewrite, workers=workers, restart=restart,
                              stop_event=stop, console=sys.stderr, retry_delay=retry_delay)  # fmt: skip
    if as_json:
        click.echo(json.dumps(result.summary(), indent=2, sort_keys=True))
    elif result.status == "refused":
        say_error(result.error or "")
    elif sys.stdout.isatty():  # off a terminal the summary is the log's backfill.finished (on stderr too unless it is done)
        click.echo(visible(result.human()))
    if result.exit_code:
        sys.exit(result.exit_code)


@main.command()
@click.argument("sources", nargs=-1)
@click.option("-f", "--follow", "follow", is_flag=True, help="Keep printing new lines as they are logged (across log rotation).")
@click.option("-n", "--lines", type=click.IntRange(min=0), default=10, show_default=True, help="How many latest lines to print first.")
@json_option
@click.pass_context
@reports_errors
def tail(ctx: click.Context, sources: tuple[str, ...], follow: bool, lines: int, as_json: bool) -> None:
    """Print the latest poll lines of SOURCES (default: every configured source), merged by time.

    Warnings and errors (cursor.set, source.reset, quarantined records) are
    shown too. With -f, follow new lines like tail -F until Ctrl-C; --json
    prints the raw JSON lines.
    """
    from memex.observe.tail import Line, colour, format_line, last_lines
    from memex.observe.tail import follow as follow_logs
    from memex.safe_text import inert_json

    cfg = load_config(ctx, state=True)
    names = list(sources) or sorted(cfg.sources)
    for name in names:
        cfg.source(name)

    def emit(line: Line) -> None:
        if as_json:  # a line written before memex made its logs inert may hold raw C1 or bidi controls
            click.echo(inert_json(line.raw.decode("utf-8", "replace")))
        else:
            click.echo(click.style(format_line(line.event), fg=colour(line.event)))

    if not follow:
        for line in last_lines(cfg, names, lines):
            emit(line)
        return
    with stop_on_signals() as stop:
        follow_logs(cfg, names, emit, stop, initial=lines)


@main.command()
@click.option("--once", is_flag=True, help="Print the dashboard once as plain text and exit (for scripts and logs).")
@click.option("--width", type=click.IntRange(min=60), default=None, help="Width of the --once text (default: the terminal's).")
@click.option("--height", type=click.IntRange(min=10), default=None, help="Height of the --once text (default: the terminal's).")
@click.pass_context
@reports_errors
def dashboard(ctx: click.Context, once: bool, width: int | None, height: int | None) -> None:
    """A live terminal dashboard: every source's health state at a glance.

    A row per configured source: state (OK, IDLE, SKIPPED, FAILING, STALE,
    STUCK, REGRESSED, SPOOL, AUTH), cursor, age of the last poll and of the last
    successful one, new/duplicate counts of the last poll, messages ingested
    in the last hour and day with a sparkline, last error; below, the latest
    poll lines of all sources. Updated when the logs or the cursors change.
    Fits the terminal (80x24 and up): narrow screens drop the less important
    columns first; name, state and last-poll age always show. Press q or
    Ctrl-C to quit.
    """
    from memex.observe.dashboard import render_text, run

    cfg = load_config(ctx, state=True)
    if once:
        import shutil

        size = shutil.get_terminal_size()
        click.echo(render_text(cfg, width=width or size.columns, height=height or size.lines), nl=False)
        return
    run(cfg)


main.add_command(cron)
main.add_command(launchd)
main.add_command(watch)
main.add_command(verify)
main.add_command(search)
main.add_command(show)
main.add_command(index)
main.add_command(mcp)
main.add_command(serve)
main.add_command(schema)
main.add_command(people)
main.add_command(lake)
main.add_command(sql)
