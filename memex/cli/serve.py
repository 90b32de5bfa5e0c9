"""``memex serve``: the archive as a local web view, read-only (see docs/web.md)."""

from __future__ import annotations

import sys

import click

from memex.cli.common import fail, load_config, reports_errors

WEB_MODULES = ("starlette", "uvicorn", "jinja2", "nh3")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; anything but loopback needs --token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on (0: any free one).")
@click.option("--token", "use_token", is_flag=True,
              help="Require the token (made once, kept 0600 in the state folder as web-token, printed when made) on every request.")  # fmt: skip
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Another name the browser may use for this server (a reverse proxy's); repeatable.")  # fmt: skip
@click.pass_context
@reports_errors
def serve(ctx: click.Context, host: str, port: int, use_token: bool, allow_hosts: tuple[str, ...]) -> None:
    """Serve the archive as a web view in your browser: conversations, search, people, a timeline, the sources.

    Read-only: no page can poll, change a cursor, delete or write. Listens on 127.0.0.1 by default; another address
    (--host 0.0.0.0) refuses to start without --token. Every request is checked for its Host name (DNS rebinding),
    every response carries a strict Content-Security-Policy. Needs the optional extra: pip install 'memex[web]'.
    """
    missing = [name for name in WEB_MODULES if not _importable(name)]
    if missing:
        click.echo(f"memex serve needs the web extra ({', '.join(missing)} missing): pip install 'memex[web]'", err=True)
        sys.exit(2)
    from memex.web.security import is_loopback

    if not is_loopback(host) and not use_token:
        fail(f"--host {host} is reachable from other machines: add --token (every request then needs it), and put TLS in front (docs/web.md)",
             code=2)  # fmt: skip
    cfg = load_config(ctx, state=True)
    from memex.cli.find import render_line
    from memex.web.run import run

    run(cfg, host=host, port=port, use_token=use_token, allow_hosts=allow_hosts, say=click.echo, render=render_line)


def _importable(name: str) -> bool:
    """Whether the module ``name`` can be imported (imported to find out: the command uses it next)."""
    import importlib

    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True
