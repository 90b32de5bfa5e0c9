"""The lake: the store's records as a Delta Lake table that DuckDB, Polars, Daft, Spark, Trino and Athena query.

The objects stay the truth; the table is built from them and brought up to date incrementally (:mod:`memex.lake.table`);
its columns are :mod:`memex.lake.columns`; ``memex sql`` runs DuckDB over it (:mod:`memex.lake.sql`). Everything here
is an optional extra (``pip install 'memex[lake]'``: deltalake, pyarrow, duckdb and its Delta extension) that no
poll imports. [docs/lake.md] says what the table holds and how each engine reads it.
"""
