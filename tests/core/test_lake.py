"""The lake (memex lake, memex sql): a Delta table built from the store, read back by DuckDB, Polars and Daft.

Pinned: the table holds every record version of the store exactly once with every schema field, the same current
revisions and the same counts per source and month as the store itself; an update adds only what is new (and flips
what stopped being current); ``kill -9`` at any point then an update again leaves every record exactly once; a reader
during updates and a compaction sees a whole committed version, never a mix; it works on SeaweedFS as on the file store;
``memex sql`` cannot write outside the table.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAKE_AWS, ROOT, Gate, patience, run_cli, write_config
from tests.core.lake_archive import put_all, records, write

pytest.importorskip("deltalake")


def _config(tmp_path: Path, store: dict[str, Any] | None = None) -> Path:
    return write_config(tmp_path, {"mail": {"type": "maildir", "path": str(tmp_path / "maildir")}},
                        store or {"url": f"file://{tmp_path / 'store'}"})  # fmt: skip


def _expected(objects: dict[str, bytes]) -> tuple[set[str], set[str], Counter[tuple[str, str]]]:
    """From the store's own objects, computed independently of memex.lake: every key, each message's current
    version (its latest revision by time then key, else the original), and counts per source and month."""
    versions: dict[str, list[tuple[tuple[int, str, str], str]]] = {}
    months: Counter[tuple[str, str]] = Counter()
    for key, body in objects.items():
        doc = json.loads(body)
        parts = key.split("/")
        original = key if parts[0] == "messages" else f"messages/{parts[1]}/{parts[2]}.json"
        rev = doc.get("revision")
        rank = (0, "", key) if rev is None else (1, rev.get("at") or "", key)
        versions.setdefault(original, []).append((rank, key))
        when = doc.get("sent_at") or (rev or {}).get("at") or doc.get("edited_at")
        months[(doc["source"], when[:7] if when else "unknown")] += 1
    current = {max(v)[1] for v in versions.values()}
    return set(objects), current, months


def _table_uri(tmp_path: Path) -> str:
    return str(tmp_path / "store" / "lake" / "records")


def test_the_table_holds_the_store_and_duckdb_polars_daft_read_it_alike(tmp_path: Path) -> None:
    """Built by `memex lake update` from a five-source archive (revisions, reactions, attachments, events): DuckDB,
    Polars and Daft read the same rows, the same current revisions and the same counts per source and month as the
    store's objects; the nested fields survive; `memex verify` finds the store whole."""
    import daft
    import duckdb
    import polars as pl

    from memex.lake.sql import connect

    objects = write(tmp_path / "store", records(40))
    cfg = _config(tmp_path)
    done = run_cli("lake", "update", "--json", config=cfg)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["added"] == len(objects)
    keys, current, months = _expected(objects)

    con = connect(_table_uri(tmp_path), {})
    assert {k for (k,) in con.execute("SELECT key FROM records").fetchall()} == keys
    assert con.execute("SELECT count(*) FROM records").fetchone() == (len(keys),)
    assert {k for (k,) in con.execute("SELECT key FROM current").fetchall()} == current
    got = Counter({(s, m): n for s, m, n in con.execute("SELECT source, month, count(*) FROM records GROUP BY ALL").fetchall()})
    assert got == months
    # nested fields: a struct, a list of structs, JSON text
    row = con.execute("SELECT sender.name, conversation.participants, attachments[1].mime_type, extra "
                      "FROM records WHERE key = 'messages/mail/mail-0.json'").fetchone()  # fmt: skip
    assert row is not None and row[0] == "Person 0" and row[1] == ["+4917000000", "p0"] and row[2] == "image/jpeg"
    assert json.loads(row[3])["to"] == ["me@example.net"]
    assert isinstance(con, duckdb.DuckDBPyConnection)

    frame = pl.read_delta(_table_uri(tmp_path))
    assert set(frame["key"].to_list()) == keys and frame.height == len(keys)
    assert set(frame.filter(pl.col("is_current"))["key"].to_list()) == current
    polars_months = Counter({(r["source"], r["month"]): r["len"] for r in frame.group_by("source", "month").len().to_dicts()})
    assert polars_months == months

    df = daft.read_deltalake(_table_uri(tmp_path)).to_pydict()
    assert set(df["key"]) == keys and len(df["key"]) == len(keys)
    assert {k for k, c in zip(df["key"], df["is_current"], strict=True) if c} == current

    verified = run_cli("verify", "--json", config=cfg)
    assert verified.returncode == 0, verified.stderr


def test_an_update_adds_only_what_is_new_and_a_new_revision_ends_the_old_ones_currency(tmp_path: Path) -> None:
    """A second update adds exactly the records stored since the first (none twice); a new edit of an old message
    makes it the current version and its earlier versions not current, in one commit per batch."""
    from deltalake import DeltaTable

    from memex.records import Revision

    first = write(tmp_path / "store", records(20))
    cfg = _config(tmp_path)
    assert run_cli("lake", "update", config=cfg).returncode == 0
    again = run_cli("lake", "update", "--json", config=cfg)
    assert json.loads(again.stdout)["added"] == 0
    old = next(m for m in records(20) if m.native_id == "signal-5" and m.revision is None)
    old.revision = Revision(id="late-edit", kind="edit", at="2030-01-01T00:00:00Z")
    old.text = "edited much later"
    more = write(tmp_path / "store", [*records(5, start=20), old])
    done = run_cli("lake", "update", "--json", config=cfg)
    result = json.loads(done.stdout)
    assert result["added"] == len(more) and result["no_longer_current"] >= 1
    table = DeltaTable(_table_uri(tmp_path)).to_pyarrow_table().to_pylist()
    assert len(table) == len(first) + len(more) == len({r["key"] for r in table})
    mine = [r for r in table if r["message_key"] == "messages/signal/signal-5.json"]
    assert [r["key"] for r in mine if r["is_current"]] == [old.key()]
    assert sum(r["is_current"] for r in table) == len({r["message_key"] for r in table})


def test_an_original_stored_after_its_revision_and_a_second_edit_settle_which_version_is_current(tmp_path: Path) -> None:
    """An update follows only the messages that have a revision (the versions of every message took 700 MiB at a
    million records): an original stored after its own revision (a backfill's order) is added as not current, and a
    second edit of a message the table already holds a revision of is the only current version of it."""
    import copy

    from deltalake import DeltaTable

    from memex.records import Revision

    base = records(12)
    original = next(m for m in base if m.native_id == "signal-3" and m.revision is None)
    edit = copy.deepcopy(original)
    edit.revision, edit.text = Revision(id="e1", kind="edit", at="2030-01-01T00:00:00Z"), "first edit"
    write(tmp_path / "store", [*(m for m in base if m.native_id != "signal-3"), edit])
    cfg = _config(tmp_path)

    def current() -> list[str]:
        table = DeltaTable(_table_uri(tmp_path)).to_pyarrow_table().to_pylist()
        assert sum(r["is_current"] for r in table) == len({r["message_key"] for r in table})
        return [r["key"] for r in table if r["message_key"] == "messages/signal/signal-3.json" and r["is_current"]]

    assert run_cli("lake", "update", config=cfg).returncode == 0
    assert current() == [edit.key()]
    write(tmp_path / "store", [original])
    assert run_cli("lake", "update", config=cfg).returncode == 0
    assert current() == [edit.key()]
    second = copy.deepcopy(original)
    second.revision, second.text = Revision(id="e2", kind="edit", at="2031-01-01T00:00:00Z"), "second edit"
    write(tmp_path / "store", [second])
    assert run_cli("lake", "update", config=cfg).returncode == 0
    assert current() == [second.key()]


def _update(cfg: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    full = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    full.update(env or {})
    return subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "lake", "update", "--batch", "60"],
                            cwd=ROOT, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip


def test_kill_9_at_any_point_of_an_update_then_an_update_leaves_every_record_once(tmp_path: Path) -> None:
    """An update killed with SIGKILL right after a commit (held there by the test hold), and others killed at random
    moments (parquet written, log not yet, ...), then one update to the end: every record exactly once."""
    from deltalake import DeltaTable

    objects = write(tmp_path / "store", records(60))
    cfg = _config(tmp_path)
    gate = Gate(tmp_path, 1)
    proc = _update(cfg, {"MEMEX_TEST_HOLD": f"lake-committed:{gate.path}"})
    gate.wait_held(proc, timeout=patience(120))
    proc.kill()
    proc.wait(timeout=patience(30))
    assert 0 < DeltaTable(_table_uri(tmp_path)).count() < len(objects)
    rng = random.Random(44)
    for _ in range(3):
        proc = _update(cfg)
        try:
            proc.wait(timeout=rng.uniform(0.5, 3.0))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=patience(30))
    final = _update(cfg)
    assert final.wait(timeout=patience(120)) == 0, final.stderr.read() if final.stderr else ""
    keys = DeltaTable(_table_uri(tmp_path)).to_pyarrow_table(columns=["key"]).column("key").to_pylist()
    assert sorted(keys) == sorted(objects), "every record exactly once"


READER = """
import sys, json
from deltalake import DeltaTable
uri, stop = sys.argv[1], sys.argv[2]
import os
seen = []
while not os.path.exists(stop):
    try:
        dt = DeltaTable(uri)
    except Exception:
        continue
    keys = dt.to_pyarrow_table(columns=["key"]).column("key").to_pylist()
    seen.append([dt.version(), len(keys), len(set(keys))])
print(json.dumps(seen))
"""


def test_a_reader_during_updates_and_a_compaction_sees_a_whole_version_never_a_mix(tmp_path: Path) -> None:
    """A reader process loops over the table while a writer updates in small batches and compacts: every read is
    exactly one committed version's rows (its count equals that version's), never a partial or duplicated state."""
    from deltalake import DeltaTable

    write(tmp_path / "store", records(10))
    cfg = _config(tmp_path)
    assert run_cli("lake", "update", config=cfg).returncode == 0
    write(tmp_path / "store", records(60, start=10))
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", READER, _table_uri(tmp_path), str(stop)], stdout=subprocess.PIPE, cwd=ROOT)
    writer = _update(cfg)
    assert writer.wait(timeout=patience(120)) == 0
    assert run_cli("lake", "compact", config=cfg).returncode == 0
    stop.touch()
    out, _ = reader.communicate(timeout=patience(60))
    seen = json.loads(out)
    assert seen, "the reader read the table at least once"
    counts = {v: DeltaTable(_table_uri(tmp_path), version=v).count() for v in {s[0] for s in seen}}
    for version, rows, distinct in seen:
        assert rows == distinct == counts[version], (
            f"version {version}: read {rows} rows ({distinct} distinct), committed {counts[version]}"
        )


def test_on_seaweedfs_the_table_sits_beside_the_objects_and_memex_sql_reads_it(tmp_path: Path, seaweed_endpoint: str) -> None:
    """On a real S3 server (SeaweedFS) with the store's credentials: the table at <prefix>/lake/records holds every
    record once after two updates, and `memex sql` (DuckDB over S3) counts them per source."""
    from tests.servers.seaweed import create_bucket

    bucket = "memex-lake-test"
    create_bucket(seaweed_endpoint, bucket)
    from memex.store.s3 import S3Store

    os.environ.update(FAKE_AWS)
    store = S3Store(bucket, "/idx", endpoint_url=seaweed_endpoint, region="us-east-1")
    objects = put_all(store, records(8))
    cfg = _config(tmp_path, {"url": f"s3://{bucket}/idx", "endpoint_url": seaweed_endpoint, "region": "us-east-1"})
    assert run_cli("lake", "update", config=cfg, env=FAKE_AWS).returncode == 0
    objects |= put_all(store, records(4, start=8))
    done = run_cli("lake", "update", "--json", config=cfg, env=FAKE_AWS)
    assert done.returncode == 0, done.stderr
    out = run_cli("sql", "SELECT source, count(*) AS n, count(DISTINCT key) AS d FROM records GROUP BY 1 ORDER BY 1", "--json",
                  config=cfg, env=FAKE_AWS)  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    per_source = Counter(k.split("/")[1] for k in objects)
    assert {r["source"]: r["n"] for r in rows} == per_source
    assert all(r["n"] == r["d"] for r in rows)


def test_memex_sql_reads_but_cannot_write_and_bad_queries_are_one_line(tmp_path: Path) -> None:
    """`memex sql` answers a query; one that writes a file outside the table, a bad one, an empty one, or one before
    any update is one line with exit 2 (the last names `memex lake update`), and message text reaches the terminal
    inert."""
    write(tmp_path / "store", records(3))
    cfg = _config(tmp_path)
    before = run_cli("sql", "SELECT 1", config=cfg)
    assert before.returncode == 1 and "memex lake update" in before.stderr and "Traceback" not in before.stderr
    assert run_cli("lake", "update", config=cfg).returncode == 0
    ok = run_cli("sql", "SELECT count(*) AS n FROM current WHERE type = 'message'", config=cfg)
    assert ok.returncode == 0 and ok.stdout.splitlines()[0] == "n"
    target = tmp_path / "out.csv"
    wrote = run_cli("sql", f"COPY (SELECT * FROM records) TO '{target}'", config=cfg)
    assert wrote.returncode == 2 and not target.exists()
    assert len(wrote.stderr.strip().splitlines()) == 1 and "Traceback" not in wrote.stderr
    bad = run_cli("sql", "SELEC nothing", config=cfg)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    for nothing in ("", "  ", "/* a comment only */"):  # DuckDB returns no result at all: one line, never an internal error
        empty = run_cli("sql", nothing, config=cfg)
        assert empty.returncode == 2 and "no statement" in empty.stderr and len(empty.stderr.strip().splitlines()) == 1, empty.stderr
    hostile = run_cli("sql", "SELECT 'a' || chr(27) || '[2J' || chr(8238) AS t", config=cfg)
    assert hostile.returncode == 0 and "\x1b" not in hostile.stdout and "\u202e" not in hostile.stdout
