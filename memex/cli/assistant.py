"""``memex mcp``: the archive served to an AI assistant over the Model Context Protocol (stdio), read-only."""

from __future__ import annotations

import sys

import click

from memex.cli.common import load_config, reports_errors


@click.command("mcp")
@click.pass_context
@reports_errors
def mcp(ctx: click.Context) -> None:
    """Serve the archive to an AI assistant over MCP on stdin/stdout (an assistant starts it; see docs/mcp.md).

    Read-only: tools search, show_message, show_conversation, counts, people and index_status answer from the
    search index and the store; none can poll, change a cursor, delete or write. Needs the optional SDK:
    pip install 'memex[mcp]'.
    """
    try:
        from memex.assistant.server import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "memex":
            raise
        click.echo("memex mcp needs the MCP SDK, an optional extra: pip install 'memex[mcp]'", err=True)
        sys.exit(2)
    serve(load_config(ctx))
