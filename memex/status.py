"""``memex status``: one row per configured source, from the cursor store and the log tails."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from memex.config import Config
from memex.cursors import CursorStore
from memex.errors import StateError
from memex.follow import RecentReader
from memex.health import source_health
from memex.logs import log_path, short_ts
from memex.source import describe


class SourceStatus(TypedDict):
    """One source's row."""

    source: str
    type: str
    enabled: bool
    cursor: str
    cursor_updated_at: str | None
    last_poll_at: str | None
    last_status: str | None
    last_new: int | None
    last_dup: int | None
    last_ok_at: str | None
    last_error: str | None
    state: str  # from memex.health: OK, IDLE, SKIPPED, FAILING, STALE, STUCK, REGRESSED, SPOOL, DISABLED
    state_reason: str


def collect(cfg: Config) -> list[SourceStatus]:
    """Build every source's status row (a corrupt cursors file raises StateError)."""
    sections = CursorStore(cfg.state_dir).load()
    now = time.time()
    rows: list[SourceStatus] = []
    for name, source in sorted(cfg.sources.items()):
        section: dict[str, Any] = sections.get(name, {})
        last, ok = _last_polls(log_path(cfg.state_dir, name), cfg.log_backups)
        error = last.get("error") if last.get("status") == "error" else None
        rows.append(
            SourceStatus(
                source=name,
                type=source.type,
                enabled=source.enabled,
                cursor=describe(section.get("positions") or {}) if "cursor" in section else "-",
                cursor_updated_at=section.get("cursor_updated_at"),
                last_poll_at=last.get("ts"),
                last_status=last.get("status"),
                last_new=last.get("new"),
                last_dup=last.get("dup"),
                last_ok_at=ok.get("ts") if ok else None,
                last_error=error,
                state=(health := source_health(cfg, name, now=now)).state,
                state_reason=health.reason,
            )
        )
    return rows


def _last_polls(path: Path, backups: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The newest poll event and the newest successful one, read from the end across rotated files."""
    last: dict[str, Any] | None = None
    for event in RecentReader(path, backups=backups, max_bytes=4 * 1024 * 1024).events():
        if event.get("event") != "poll":
            continue
        if last is None:
            last = event
        if event.get("status") in ("ok", "idle"):
            return last, event
    return last or {}, None


def render_table(rows: list[SourceStatus]) -> str:
    """Plain-text table of status rows."""
    header = ("SOURCE", "TYPE", "CURSOR", "LAST POLL", "LAST OK", "STATE", "RESULT")
    body = []
    for r in rows:
        result = r["last_status"] or "never polled"
        if r["last_status"] in ("ok", "idle"):
            result += f": {r['last_new']} new"
            if r["last_dup"]:
                result += f", {r['last_dup']} dup"
        elif r["last_status"] == "error":
            result += f": {r['last_error']}"
        if not r["enabled"]:
            result = "disabled; " + result
        body.append((r["source"], r["type"], r["cursor"], short_ts(r["last_poll_at"]), short_ts(r["last_ok_at"]), r["state"], result))
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(len(header) - 1)]
    out = []
    for row in [header, *body]:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths, strict=True)]
        out.append("  ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(out)


__all__ = ["SourceStatus", "StateError", "collect", "render_table"]
