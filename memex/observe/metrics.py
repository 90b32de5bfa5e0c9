"""A Prometheus textfile (for node_exporter's textfile collector), rewritten after every poll.

After each poll of a source, under ``locks/metrics.lock``:

1. its running totals in ``<state_dir>/metrics/counters.json`` (0600) are
   updated: messages ingested, duplicates, quarantined, polls by status,
   errors; plus its last poll's time, duration and state. Keeping counters in
   the state dir makes them survive restarts without ever scanning a log, so
   the idle poll stays cheap (one small JSON file read and two small atomic
   writes). If the counters file is lost or corrupt, the totals start again
   from zero, which Prometheus treats as a counter reset;
2. the polled source's state is computed by :mod:`memex.observe.health` from its
   recent events (read from the end of its log). Other sources keep the state
   of their own last poll, except that one whose last success is older than
   twice its interval is shown ``STALE`` (no log is read for them);
3. the textfile is written atomically (temp file, fsync, rename) with mode
   0644: node_exporter usually runs as another user, and the file holds only
   source names and numbers. Its default place, ``<state_dir>/metrics/memex.prom``,
   is inside the private (0700) state dir; point the top-level config key
   ``metrics_textfile`` at node_exporter's ``--collector.textfile.directory``
   (the folder must exist) to have it collected.

Metrics (label ``source``): ``memex_last_success_timestamp_seconds``,
``memex_last_poll_timestamp_seconds``, ``memex_last_poll_duration_seconds``,
``memex_messages_ingested_total``, ``memex_duplicates_total``,
``memex_quarantined_total``, ``memex_errors_total``, ``memex_polls_total``
(also ``status``), ``memex_state`` (also ``state``; 1 for the current state,
0 for the others), and only when the source reports them,
``memex_cursor_lag`` (messages between the cursor and the source's head) and
``memex_spool_oldest_age_seconds`` and ``memex_spool_entries`` (a source
that spools, e.g. signal). Absent for the others rather than wrong.

Nothing here can fail a poll: a fault is logged as ``metrics.failed``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from memex.config import Config
from memex.errors import MemexError
from memex.observe import health
from memex.state.files import atomic_replace, ensure_private_dir
from memex.state.locks import exclusive

FORMAT = 1
TEXTFILE_MODE = 0o644
STATUSES = ("ok", "idle", "skipped", "error")


def metrics_dir(state_dir: Path) -> Path:
    """Where the counters (and by default the textfile) live."""
    return state_dir / "metrics"


def textfile_path(cfg: Config) -> Path:
    """The textfile's path: ``metrics_textfile`` from the config, else ``<state_dir>/metrics/memex.prom``."""
    configured: Path | None = getattr(cfg, "metrics_textfile", None)
    return configured if configured is not None else metrics_dir(cfg.state_dir) / "memex.prom"


def load_counters(state_dir: Path) -> dict[str, dict[str, Any]]:
    """Every source's saved totals (empty when missing or unreadable: totals restart, a counter reset)."""
    try:
        doc = json.loads((metrics_dir(state_dir) / "counters.json").read_bytes())
    except (OSError, ValueError):
        return {}
    sources = doc.get("sources") if isinstance(doc, dict) else None
    return {k: v for k, v in sources.items() if isinstance(v, dict)} if isinstance(sources, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def record_poll(entry: dict[str, Any], fields: dict[str, Any], now: float) -> dict[str, Any]:
    """Add one poll's summary fields to a source's totals entry (returns the entry)."""
    status = str(fields.get("status", "error"))
    entry["ingested"] = _int(entry.get("ingested")) + _int(fields.get("new"))
    entry["duplicates"] = _int(entry.get("duplicates")) + _int(fields.get("dup"))
    entry["quarantined"] = _int(entry.get("quarantined")) + _int(fields.get("quarantined"))
    saved = entry.get("polls")
    polls = {s: _int(saved.get(s)) for s in STATUSES} if isinstance(saved, dict) else dict.fromkeys(STATUSES, 0)
    polls[status] = polls.get(status, 0) + 1
    entry["polls"] = polls
    entry["errors"] = polls["error"]
    entry["last_poll_ts"] = now
    entry["last_duration_s"] = _int(fields.get("duration_ms")) / 1000.0
    if status in ("ok", "idle"):
        entry["last_success_ts"] = now
    for key in ("cursor_lag", "spool_oldest_age_s", "spool_count"):
        value = fields.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            entry[key] = value
        else:
            entry.pop(key, None)
    return entry


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def render(entries: dict[str, dict[str, Any]]) -> str:
    """The textfile for these sources' entries (Prometheus text exposition format 0.0.4)."""
    families: list[tuple[str, str, str, list[tuple[dict[str, str], float]]]] = []

    def fam(name: str, kind: str, help_text: str, key: str) -> None:
        samples = [({"source": s}, float(e[key])) for s, e in sorted(entries.items()) if isinstance(e.get(key), int | float)]
        if samples:
            families.append((name, kind, help_text, samples))

    fam("memex_last_success_timestamp_seconds", "gauge", "Unix time of the last successful (ok or idle) poll.", "last_success_ts")
    fam("memex_last_poll_timestamp_seconds", "gauge", "Unix time of the last poll (any result).", "last_poll_ts")
    fam("memex_last_poll_duration_seconds", "gauge", "Duration of the last poll.", "last_duration_s")
    fam("memex_messages_ingested_total", "counter", "Messages stored new.", "ingested")
    fam("memex_duplicates_total", "counter", "Messages met that were already stored.", "duplicates")
    fam("memex_quarantined_total", "counter", "Records kept in quarantine.", "quarantined")
    fam("memex_errors_total", "counter", "Polls that failed.", "errors")
    fam("memex_cursor_lag", "gauge", "Messages between the cursor and the source's head (sources that know it).", "cursor_lag")
    fam("memex_spool_oldest_age_seconds", "gauge", "Age of the oldest spooled entry (sources that spool).", "spool_oldest_age_s")
    fam("memex_spool_entries", "gauge", "Spooled entries not yet stored (sources that spool).", "spool_count")
    polls = [
        ({"source": s, "status": st}, float(_int((e.get("polls") or {}).get(st)))) for s, e in sorted(entries.items()) for st in STATUSES
    ]
    if polls:
        families.append(("memex_polls_total", "counter", "Polls by result.", polls))
    states = [
        ({"source": s, "state": st}, 1.0 if e.get("state") == st else 0.0)
        for s, e in sorted(entries.items())
        if isinstance(e.get("state"), str)
        for st in health.STATES
    ]
    if states:
        families.append(("memex_state", "gauge", "Health state of the source (1 = current); see memex.observe.health.", states))
    out = []
    for name, kind, help_text, samples in families:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            out.append(f"{name}{{{text}}} {_num(value)}")
    return "\n".join(out) + "\n"


def update(cfg: Config, source: str, fields: dict[str, Any], *, now: float | None = None) -> Path:
    """Add one poll to the totals, recompute states and rewrite the textfile; return its path."""
    when = time.time() if now is None else now
    state_dir = cfg.state_dir
    folder = ensure_private_dir(metrics_dir(state_dir))
    with exclusive(ensure_private_dir(state_dir / "locks") / "metrics.lock", timeout=5.0):
        entries = load_counters(state_dir)
        entry = record_poll(entries.get(source, {}), fields, when)
        if source in cfg.sources:
            entry["state"] = health.source_health(cfg, source, now=when).state
            entry["interval"] = cfg.sources[source].interval
        entries[source] = entry
        for name, other in entries.items():
            if name == source or name not in cfg.sources:
                continue
            conf = cfg.sources[name]
            other["interval"] = conf.interval
            if not conf.enabled:
                other["state"] = health.DISABLED
                continue
            last_ok = other.get("last_success_ts")
            quiet = not isinstance(last_ok, int | float) or when - last_ok > health.Rules().stale_factor * conf.interval
            if quiet and other.get("state") in (health.OK, health.IDLE, health.SKIPPED, health.SPOOL):
                other["state"] = health.STALE
        doc = {"format": FORMAT, "sources": entries}
        atomic_replace(folder / "counters.json", json.dumps(doc, sort_keys=True).encode() + b"\n")
        shown = {k: v for k, v in entries.items() if k in cfg.sources}
        path = textfile_path(cfg)
        atomic_replace(path, render(shown).encode(), mode=TEXTFILE_MODE)
        os.chmod(path, TEXTFILE_MODE)  # the temp file's mode was cut by the umask
    return path


def after_poll(cfg: Config, source: str, fields: dict[str, Any], log: Any) -> None:
    """Update the metrics after a poll; a fault is logged as a warning, never raised."""
    try:
        update(cfg, source, fields)
    except (OSError, MemexError) as exc:
        log.warning("metrics.failed", error=f"{type(exc).__name__}: {exc}", path=str(textfile_path(cfg)))
    except Exception as exc:  # a bug here must not turn a finished poll into a failure
        log.warning("metrics.failed", error=f"internal error: {type(exc).__name__}", path=str(textfile_path(cfg)))
