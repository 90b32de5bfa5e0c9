"""The Prometheus textfile: written after every poll, parsed by prometheus_client's own parser."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from memex import config as config_mod
from memex.observe import metrics
from memex.state.locks import RunLock
from pollers.imessage import samples as imessage_samples
from tests.conftest import read_log, run_cli, write_config


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a textfile, keyed by (name, sorted labels); parsing fails loudly on a malformed file."""
    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float | None:
    """One sample's value, or None if absent."""
    return found.get((name, tuple(sorted(labels.items()))))


def setup(tmp_path: Path, **top: Any) -> tuple[Path, Path, Path]:
    """A 50-message chat.db, a config writing the textfile to a collector folder; returns (config, db, textfile)."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 50, seed=4)
    collector = tmp_path / "textfile_collector"
    collector.mkdir()
    prom = collector / "memex.prom"
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, metrics_textfile=str(prom), **top)
    return cfg, db, prom


def test_textfile_after_polls_totals_survive_restarts(tmp_path: Path) -> None:
    """Three polls in three processes: totals add up across them, the state and timestamps are there, the file is 0644."""
    cfg, db, prom = setup(tmp_path)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    imessage_samples.append(db, 5, seed=8)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    found = samples(prom)
    src = {"source": "imessage"}
    # Each poll is its own process: a total computed from the last poll only would say 0 (or 5).
    assert value(found, "memex_messages_ingested_total", **src) == 55
    assert value(found, "memex_duplicates_total", **src) == 0
    assert value(found, "memex_errors_total", **src) == 0
    assert value(found, "memex_polls_total", status="ok", **src) == 2
    assert value(found, "memex_polls_total", status="idle", **src) == 1
    assert value(found, "memex_state", state="IDLE", **src) == 1
    assert sum(v for (n, labels), v in found.items() if n == "memex_state") == 1
    last_ok = value(found, "memex_last_success_timestamp_seconds", **src)
    assert last_ok is not None and abs(last_ok - prom.stat().st_mtime) < 60
    assert value(found, "memex_last_poll_duration_seconds", **src) is not None
    assert value(found, "memex_cursor_lag", **src) is None  # no poller knows its head: absent, not wrong
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644
    assert [p.name for p in prom.parent.iterdir()] == ["memex.prom"]  # no temp file left behind


def test_errors_and_skipped_polls_are_counted_and_failing_shows(tmp_path: Path) -> None:
    """A poll that fails adds to errors_total; three in a row set the FAILING state; a skipped poll is counted as skipped."""
    cfg, db, prom = setup(tmp_path)
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    db.rename(tmp_path / "moved.db")
    for _ in range(3):
        assert run_cli("poll", "imessage", config=cfg).returncode == 1
    found = samples(prom)
    assert value(found, "memex_errors_total", source="imessage") == 3
    assert value(found, "memex_state", source="imessage", state="FAILING") == 1
    with RunLock(tmp_path / "state" / "locks" / "imessage.poll.lock"):
        assert run_cli("poll", "imessage", config=cfg).returncode == 0
    assert value(samples(prom), "memex_polls_total", source="imessage", status="skipped") == 1


def test_default_path_other_sources_and_no_log_scan(tmp_path: Path) -> None:
    """Without metrics_textfile the file is in state_dir/metrics; every configured source that polled is listed."""
    dbs = {}
    for name in ("a", "b"):
        dbs[name] = tmp_path / f"{name}.db"
        imessage_samples.build(dbs[name], 10, seed=len(name))
    cfg_path = write_config(tmp_path, {n: {"type": "imessage", "db": str(p)} for n, p in dbs.items()})
    assert run_cli("poll", "--all", config=cfg_path).returncode == 0
    prom = tmp_path / "state" / "metrics" / "memex.prom"
    found = samples(prom)
    assert value(found, "memex_messages_ingested_total", source="a") == 10
    assert value(found, "memex_messages_ingested_total", source="b") == 10
    # The totals come from the counters file, not from the logs: a log wiped meanwhile does not change them.
    (tmp_path / "state" / "logs" / "a.jsonl").unlink()
    assert run_cli("poll", "a", config=cfg_path).returncode == 0
    assert value(samples(prom), "memex_messages_ingested_total", source="a") == 10
    assert read_log(tmp_path / "state", "a")[-1]["status"] == "idle"


def test_unwritable_textfile_is_a_warning_not_a_failed_poll(tmp_path: Path) -> None:
    """If the textfile's folder is missing, the poll still succeeds and stores its messages; a metrics.failed warning is logged."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 5, seed=2)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, metrics_textfile=str(tmp_path / "missing" / "m.prom"))
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 0, out.stderr
    events = read_log(tmp_path / "state", "imessage")
    assert [e["event"] for e in events] == ["poll", "metrics.failed"]
    assert events[0]["new"] == 5


def test_render_other_source_goes_stale_without_reading_its_log(tmp_path: Path) -> None:
    """When source a polls, source b (last success long ago, state OK) is shown STALE from its saved timestamp."""
    cfg = config_mod.load(write_config(tmp_path, {"a": {"type": "imessage", "db": "a.db"}, "b": {"type": "imessage", "db": "b.db"}}))
    fields = {"status": "ok", "new": 3, "dup": 0, "quarantined": 0, "duration_ms": 12}
    metrics.update(cfg, "b", fields, now=1_000_000.0)
    path = metrics.update(cfg, "a", fields, now=1_000_000.0 + 600)
    found = samples(path)
    assert value(found, "memex_state", source="b", state="STALE") == 1
    assert os.path.exists(tmp_path / "state" / "metrics" / "counters.json")
