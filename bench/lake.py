"""The lake (issue 44): building the Delta table, updating it, and three analytical queries, each against a baseline
measured in the same run.

On N generated records (bench/search.py's generator: 500 conversations, 200 people, five years) in a file store:

1. **Full build**: ``memex lake update --rebuild`` (a child process) against DuckDB's own ``COPY`` of the same JSON
   objects to one Parquet file (``read_json`` over the store's files, given the record schema's columns), alternated, ``--rounds`` each; ratio = DuckDB's
   wall time over memex's (>= 1.0: memex builds its table at least at DuckDB's rate).
2. **Incremental update**: 10,000 new records stored beside the N, then ``memex lake update`` (medians of
   ``--rounds``, each round adding its own 10,000).
3. **Queries** (DuckDB in this process, medians of ``--repeat`` runs after a warm-up): counts per month and source;
   top 20 correspondents per year; the 20 longest conversations. Each over the table (``delta_scan``), over the JSON
   objects (``read_json``, what docs/searching.md showed before the lake), and, with ``--index``, the same question in
   SQL over memex's SQLite search index (``memex index rebuild`` first). Ratios: JSON time over table time.

    python bench/lake.py --messages 1000000 --rounds 3 [--index] [--copy-limit SECONDS]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import alternate, run
from bench.search import config, generated, record

QUERIES = {
    "per month and source": (
        "SELECT source, strftime(sent_at, '%Y-%m') AS m, count(*) FROM {t} WHERE {cur} GROUP BY ALL ORDER BY 1, 2",
        "SELECT source, strftime(ts, 'unixepoch', '%Y-%m') AS m, count(*) FROM messages GROUP BY 1, 2 ORDER BY 1, 2",
    ),
    "top 20 correspondents per year": (
        "SELECT y, name, n FROM (SELECT year(sent_at) AS y, sender.name AS name, count(*) AS n FROM {t} "
        "WHERE {cur} AND NOT sender.is_me GROUP BY ALL) QUALIFY row_number() OVER (PARTITION BY y ORDER BY n DESC, name) <= 20 ORDER BY y, n DESC",
        "SELECT y, name, n FROM (SELECT y, name, n, row_number() OVER (PARTITION BY y ORDER BY n DESC, name) AS r FROM "
        "(SELECT strftime(ts, 'unixepoch', '%Y') AS y, sender_name AS name, count(*) AS n FROM messages WHERE NOT is_me GROUP BY 1, 2)) "
        "WHERE r <= 20 ORDER BY y, n DESC",
    ),
    "20 longest conversations": (
        "SELECT conversation.id AS c, count(*) AS n FROM {t} WHERE {cur} GROUP BY 1 ORDER BY n DESC, c LIMIT 20",
        "SELECT conv_id AS c, count(*) AS n FROM messages GROUP BY 1 ORDER BY n DESC, c LIMIT 20",
    ),
}
# The record schema's columns given to DuckDB, so its read_json does no schema detection (which, over many small files,
# grows faster than linearly: 2,000 files 2.7 s, 20,000 files 655 s here) and types them as the table does.
COLUMNS = (
    "{'schema': 'VARCHAR', 'source': 'VARCHAR', 'type': 'VARCHAR', 'native_id': 'VARCHAR', 'sent_at': 'TIMESTAMPTZ', "
    "'edited_at': 'TIMESTAMPTZ', 'text': 'VARCHAR', 'reply_to': 'VARCHAR', 'deleted': 'BOOLEAN', "
    "'conversation': 'STRUCT(id VARCHAR, name VARCHAR, participants VARCHAR[])', 'sender': 'STRUCT(id VARCHAR, name VARCHAR, is_me BOOLEAN)', "
    "'attachments': 'STRUCT(id VARCHAR, filename VARCHAR, mime_type VARCHAR, size BIGINT, sha256 VARCHAR, missing BOOLEAN)[]', "
    "'extra': 'JSON', 'revision': 'STRUCT(id VARCHAR, kind VARCHAR, \"at\" TIMESTAMPTZ)'}"
)
COPY = """
import duckdb, sys
duckdb.sql(f"COPY (SELECT * FROM read_json('{sys.argv[1]}/messages/*/*.json', format='newline_delimited', columns={sys.argv[3]})) TO '{sys.argv[2]}' (FORMAT parquet)")
"""


def timed(fn: object, repeat: int) -> float:
    """Median seconds of ``repeat`` calls of ``fn`` after one warm-up."""
    assert callable(fn)
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def add_records(store: Path, start: int, n: int) -> None:
    """``n`` more records (numbered from ``start``) in the store's ``messages/bench/``."""
    rng = random.Random(start)
    folder = store / "messages" / "bench"
    for i in range(start, start + n):
        (folder / f"B{i:09d}-5E0C-4C4B-9F1A-6A0B1C2D3E4F.json").write_bytes(record(i, rng))


def main() -> None:
    """Run the three parts at ``--messages`` records."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--index", action="store_true", help="also answer the queries from the SQLite search index")
    ap.add_argument("--work", type=Path, default=None, help="keep the generated store here between runs")
    ap.add_argument("--copy-limit", type=int, default=None,
                    help="run DuckDB's COPY baseline once, stopped after this many seconds (it grows faster than linearly)")  # fmt: skip
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores", flush=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="memex-lake-bench-"))
    n = args.messages
    d, store = generated(work, n)
    cfg = config(d, store)
    memex = [sys.executable, "-m", "memex", "--config", str(cfg)]
    out = d / "copy.parquet"

    # 1. full build
    build, copy = [*memex, "lake", "update", "--rebuild"], [sys.executable, "-c", COPY, str(store), str(out), COLUMNS]
    if args.copy_limit is None:
        va, vb = alternate("full build", build, copy, args.rounds, names=("memex lake", "duckdb COPY"))
        print(f"full build: {n:,} records: memex {n / va.wall:,.0f}/s ({va.wall:.1f}s, cpu {va.cpu:.1f}s, peak RSS {va.rss_mib:.0f} MiB); "
              f"DuckDB COPY to Parquet {n / vb.wall:,.0f}/s ({vb.wall:.1f}s, peak RSS {vb.rss_mib:.0f} MiB); ratio {vb.wall / va.wall:.2f}x",
              flush=True)  # fmt: skip
    else:  # the baseline once, stopped at the limit: a ratio of at least limit / memex's time when it does not finish
        builds = [run(build) for _ in range(args.rounds)]
        va = min(builds, key=lambda r: abs(r.wall - statistics.median(w.wall for w in builds)))
        vb = run(["timeout", str(args.copy_limit), *copy])
        done = vb.returncode == 0
        shown = f"{vb.wall:.1f}s, peak RSS {vb.rss_mib:.0f} MiB" if done else f"not done after {args.copy_limit} s, stopped"
        print(f"full build: {n:,} records: memex {n / va.wall:,.0f}/s ({va.wall:.1f}s, cpu {va.cpu:.1f}s, peak RSS {va.rss_mib:.0f} MiB); "
              f"DuckDB COPY to Parquet ({shown}); ratio {'' if done else '>= '}{vb.wall / va.wall:.2f}x", flush=True)  # fmt: skip
    run([*memex, "lake", "vacuum", "--retain-hours", "0"])

    # 2. incremental update of 10,000
    walls = []
    for r in range(args.rounds):
        add_records(store, n + r * 10_000, 10_000)
        got = run([*memex, "lake", "update"])
        walls.append(got.wall)
    print(
        f"incremental update: 10,000 new on {n:,}: median {statistics.median(walls):.1f}s ({10_000 / statistics.median(walls):,.0f}/s)",
        flush=True,
    )
    run([*memex, "lake", "compact"])

    # 3. queries
    from memex.config import load
    from memex.lake.sql import connect
    from memex.lake.table import location

    uri, options = location(load(cfg))
    con = connect(uri, options)
    import duckdb

    raw = duckdb.connect()
    raw.execute(f"CREATE VIEW j AS SELECT * FROM read_json('{store}/messages/*/*.json', format='newline_delimited', columns={COLUMNS})")
    index_db = None
    if args.index:
        run([*memex, "index", "rebuild"])
        index_db = sqlite3.connect(f"file:{d / 'state' / 'search' / 'index.sqlite'}?mode=ro", uri=True)
    for name, (lake_sql, index_sql) in QUERIES.items():
        tl = timed(lambda q=lake_sql: con.execute(q.format(t="records", cur="is_current")).fetchall(), args.repeat)
        tj = timed(lambda q=lake_sql: raw.execute(q.format(t="j", cur="true")).fetchall(), max(1, args.repeat // 2))
        line = f"query {name}: table {tl * 1000:.0f} ms, JSON objects {tj * 1000:.0f} ms ({tj / tl:.0f}x)"
        if index_db is not None:
            ti = timed(lambda q=index_sql: index_db.execute(q).fetchall(), args.repeat)
            line += f", SQLite index {ti * 1000:.0f} ms ({ti / tl:.1f}x)"
        print(line, flush=True)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
