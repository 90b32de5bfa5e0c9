"""``memex cron`` and ``memex launchd``: scheduler recipes written from the config (no hand-edited paths)."""

from __future__ import annotations

import getpass
import sys
from pathlib import Path

import click

from memex.cli.common import fail, load_config, reports_errors
from memex.errors import ConfigError


def _config_path(cfg: object) -> Path:
    path = getattr(cfg, "path", None)
    if path is None:
        raise ConfigError("the recipe needs a config file on disk; pass --config PATH")
    return Path(path).resolve()


@click.command()
@click.option("--mailto", default=None, metavar="ADDRESS", help="Where cron mails warnings and errors (default: the current user).")
@click.option("--install", is_flag=True, help="Put the lines into your crontab between memex's marker lines (the rest is kept).")
@click.option("--uninstall", is_flag=True, help="Remove memex's marker block from your crontab (the rest is kept).")
@click.pass_context
@reports_errors
def cron(ctx: click.Context, mailto: str | None, install: bool, uninstall: bool) -> None:
    """Print crontab lines for every enabled source, each at its own interval.

    The lines name this memex's executable and the config's absolute path, and
    set PATH and MAILTO. Install them with `memex cron --install`: it reads your
    crontab (crontab -l), replaces only the block between memex's marker lines
    (or appends it) and installs the result (crontab -); running it again is a
    no-op. `memex cron --uninstall` removes the block. The installed block sets
    no MAILTO (cron mails you, the crontab's owner), so --mailto goes only with
    printing. Warns about a source using a *_env key: cron will not have it.
    """
    from memex.cli import cron_install
    from memex.cli.recipes import cron_warnings, crontab, current_program
    from memex.error_lines import warn

    if install and uninstall:
        fail("pass --install or --uninstall, not both", 2)
    if mailto is not None and (install or uninstall):
        fail("--mailto goes with printing only: a MAILTO line in the block would redirect the mail of your own crontab lines "
             "below it; set MAILTO yourself with crontab -e", 2)  # fmt: skip
    if uninstall:
        changed = cron_install.install(None)
        if sys.stderr.isatty():
            click.echo("removed memex's block from your crontab" if changed else "your crontab holds no memex block", err=True)
        return
    cfg = load_config(ctx)
    for line in cron_warnings(cfg):
        warn(line)
    if not install:
        click.echo(crontab(cfg, _config_path(cfg), current_program(), mailto=mailto or getpass.getuser()), nl=False)
        return
    changed = cron_install.install(crontab(cfg, _config_path(cfg), current_program(), mailto=None))
    if sys.stderr.isatty():
        click.echo("installed memex's block in your crontab" if changed else "your crontab already holds these lines", err=True)


@click.command()
@click.argument("sources", nargs=-1)
@click.option("--write", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write one <label>.plist per source into this folder (e.g. ~/Library/LaunchAgents) instead of printing.")  # fmt: skip
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("~/Library/Logs/memex"), show_default=True,
              help="Where launchd writes each agent's stdout and stderr.")  # fmt: skip
@click.pass_context
@reports_errors
def launchd(ctx: click.Context, sources: tuple[str, ...], out_dir: Path | None, log_dir: Path) -> None:
    """Print (or --write) a macOS LaunchAgent per source, polling it every `interval` seconds.

    Without SOURCES: every enabled source. Printing needs exactly one source.
    Reading chat.db needs Full Disk Access for the interpreter the agent runs;
    the command says which file to grant it to.
    """
    from memex.cli.recipes import current_program, enabled_sources, full_disk_access_binary, launchd_label, launchd_plist

    cfg = load_config(ctx)
    chosen = [cfg.source(n) for n in sources] if sources else enabled_sources(cfg)
    program = current_program()
    config_path = _config_path(cfg)
    logs = log_dir.expanduser()
    if out_dir is None:
        if len(chosen) != 1:
            raise click.UsageError("printing shows one agent: name one SOURCE, or pass --write DIR for several")
        click.echo(launchd_plist(cfg, config_path, program, chosen[0], log_dir=logs).decode(), nl=False)
        return
    out = out_dir.expanduser()
    out.mkdir(parents=True, exist_ok=True)
    for source in chosen:
        target = out / f"{launchd_label(source.name)}.plist"
        target.write_bytes(launchd_plist(cfg, config_path, program, source, log_dir=logs))
        click.echo(f"wrote {target}\n  load with: launchctl bootstrap gui/$(id -u) {target}")
    click.echo(f"mkdir -p {logs}   # launchd does not create the log folder")
    if any(s.type == "imessage" for s in chosen):
        click.echo(
            f"Full Disk Access (chat.db): grant it to {full_disk_access_binary(program)} in System Settings > Privacy & Security;"
            " upgrading that Python changes the path and silently revokes the grant."
        )
