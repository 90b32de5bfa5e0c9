"""``memex schema``: print the published record schema (``memex.message/1``, JSON Schema Draft 2020-12)."""

from __future__ import annotations

import click


@click.command()
def schema() -> None:
    """Print the JSON Schema every stored record and revision conforms to (memex.message/1).

    Save it to validate the index with your own tools, e.g. `memex schema > memex.message-1.json`.
    """
    from memex.schema import schema_text

    click.echo(schema_text(), nl=False)
