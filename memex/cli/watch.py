"""``memex watch``: a long-lived process that polls sources as soon as their files change (see :mod:`memex.watch`)."""

from __future__ import annotations

import sys

import click

from memex.cli.common import load_config, reports_errors, stop_on_signals


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--settle", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Seconds of quiet after the last change before a poll (never less than the source's settle_seconds + 0.5).")  # fmt: skip
@click.option("--max-seconds-per-poll", "max_seconds", type=click.FloatRange(min=0.1), default=50.0, show_default=True,
              help="Stop one poll after this long; the next one starts at once where it stopped.")  # fmt: skip
@click.pass_context
@reports_errors
def watch(ctx: click.Context, sources: tuple[str, ...], settle: float, max_seconds: float) -> None:
    """Poll SOURCES as soon as new data has settled, until SIGTERM or Ctrl-C.

    Polls each source once at start, then whenever its files change (iMessage:
    chat.db and chat.db-wal; Maildir: new/ and cur/ of its folders), after
    --settle seconds of quiet, and every `interval` seconds in case a change
    was missed. IMAP is polled as soon as its server says mail arrived
    (NOTIFY or IDLE; `push` in its section), Signal as soon as its
    signal-cli daemon hands a message over (`daemon`). Teams, and Signal
    without a daemon, are polled every `interval` only. Each poll is the one `memex poll` runs,
    with its lock: cron may keep polling beside the watcher, and whichever
    finds the source busy logs `poll skipped` (the watcher retries). Runs as a
    service (systemd, launchd: see docs/deploy.md). SIGTERM or Ctrl-C stops a poll
    in progress with its progress saved; exit 0. While it runs, `memex search`
    and `memex show` ask it (a socket in the state folder) instead of opening
    the archive themselves.
    """
    from memex.cli.find import render_line
    from memex.watch import watch as run_watch

    cfg = load_config(ctx)
    names = list(dict.fromkeys(sources))
    for name in list(names):
        if not cfg.source(name).enabled:
            click.echo(f"memex: {name}: skipped: enabled = false in the config", err=True)
            names.remove(name)
    if not names:
        return
    with stop_on_signals() as stop:
        run_watch(cfg, names, stop=stop, settle=settle, max_seconds=max_seconds, console=sys.stderr, render=render_line)
