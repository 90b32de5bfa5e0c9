"""``memex sql``: DuckDB over the lake's table, for a person who has no engine of their own.

The query runs in an in-memory DuckDB with the Delta extension (shipped as the PyPI package ``duckdb-ext-delta``,
loaded from the package's folder: nothing is downloaded), over two views: ``records`` (every row of the table) and
``current`` (each message's current version: ``records WHERE is_current``). The session is read-only toward the
host: after the views are made, DuckDB may reach only the table's own folder or S3 prefix
(``allowed_directories``, ``enable_external_access = false``, and the configuration locked), so a
``COPY ... TO`` or an ``ATTACH`` writing elsewhere is refused by DuckDB itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memex.lake.table import LakeError


def _extension(name: str) -> str:
    """The path of a DuckDB extension shipped by its ``duckdb-ext-*`` package, for this DuckDB's version."""
    import importlib.util

    import duckdb

    spec = importlib.util.find_spec("duckdb_ext")
    found = []
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            found += sorted(Path(folder).glob(f"extensions/v{duckdb.__version__}/*/{name}.duckdb_extension"))
    if not found:
        raise LakeError(f"DuckDB's {name} extension for DuckDB {duckdb.__version__} is not installed; pip install 'memex[lake]'")
    return str(found[0])


def connect(uri: str, options: dict[str, str]) -> Any:
    """A DuckDB connection with the views ``records`` and ``current`` over the table at ``uri``, locked down."""
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(f"LOAD '{_extension('delta')}'")
    quoted = uri.replace("'", "''")
    if uri.startswith("s3://"):
        con.execute(f"LOAD '{_extension('httpfs')}'")
        endpoint = urlsplit(options.get("AWS_ENDPOINT_URL", "")) if options.get("AWS_ENDPOINT_URL") else None
        params = {
            "TYPE": "s3",
            "KEY_ID": options["AWS_ACCESS_KEY_ID"],
            "SECRET": options["AWS_SECRET_ACCESS_KEY"],
            "REGION": options.get("AWS_REGION", "us-east-1"),
        }
        if options.get("AWS_SESSION_TOKEN"):
            params["SESSION_TOKEN"] = options["AWS_SESSION_TOKEN"]
        if endpoint is not None:
            params["ENDPOINT"] = endpoint.netloc
            params["URL_STYLE"] = "path"
            params["USE_SSL"] = "true" if endpoint.scheme == "https" else "false"
        body = ", ".join(f"{k} {v if k in ('TYPE', 'USE_SSL') else repr(v)}" for k, v in params.items())
        con.execute(f"CREATE SECRET memex_store ({body})")
    con.execute(f"SET allowed_directories = ['{quoted.rstrip('/')}/']")
    con.execute(f"CREATE VIEW records AS SELECT * FROM delta_scan('{quoted}')")
    con.execute("CREATE VIEW current AS SELECT * FROM records WHERE is_current")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run(uri: str, options: dict[str, str], query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``query``; its column names and rows. A DuckDB error is one line (:class:`LakeError`, exit 2)."""
    import duckdb

    con = connect(uri, options)
    try:
        cur = con.execute(query)
        if cur is None:  # only blanks or comments: DuckDB runs nothing and returns no result
            raise QueryError('the query holds no statement; give one, e.g. memex sql "SELECT count(*) FROM current"')
        names = [d[0] for d in cur.description] if cur.description else []
        return names, cur.fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise QueryError(f"the query failed: {first}") from None
    finally:
        con.close()


class QueryError(LakeError):
    """The SQL given to ``memex sql`` is not valid or failed (exit 2: the query is the user's to change)."""

    exit_code = 2
    retry_helps = False
