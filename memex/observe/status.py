"""``memex status``: one row per configured source, from the cursor store and the log tails."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from memex.config import Config, SourceConfig
from memex.errors import ConfigError, StateError
from memex.observe.follow import RecentReader
from memex.observe.health import FAILING, source_health
from memex.observe.logs import log_path, short_ts
from memex.observe.watch_state import from_log
from memex.safe_text import visible
from memex.source import describe
from memex.state.backend import cursor_store, host_name, leases


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
    last_quarantined: int | None  # records of the last poll kept in quarantine (memex verify lists them)
    settling: int | None  # files the last poll left until they stop changing (a Messenger export being written)
    last_ok_at: str | None
    last_error: str | None
    state: str  # from memex.observe.health: OK, IDLE, SKIPPED, AUTH, FAILING, STALE, STUCK, REGRESSED, SPOOL, DISABLED; REMOTE here
    state_reason: str
    polled_by: str | None  # with S3 state: the host of the last poll lease ("host pid N")
    lease: str | None  # with S3 state: "held by host pid N" while a poll runs, else "free"
    spooled: int | None  # sources that spool (memex.state.spool): entries waiting at the last poll
    spool_oldest_age_s: float | None
    unserved: int | None  # messages the source lists but would not send, no longer asked for (``unserved`` of the last poll)
    watch_mode: str | None  # how memex watch serves it (memex.observe.watch_state): push, interval (push down), files, interval
    watch_detail: str | None  # its push connection's age and the last arrival-to-stored delay, or why push is down


REMOTE = "REMOTE"
CONFIG = "CONFIG"


def config_problem(source: SourceConfig) -> str | None:
    """What is wrong with a source's config section (its type's keys, checked as a poll would), or None."""
    from memex.registry import make_poller

    try:
        poller = make_poller(source)
    except ConfigError as exc:
        return str(exc)
    poller.close()
    return None


def cursor_problem(source: SourceConfig, section: dict[str, Any], cfg: Config) -> str | None:
    """Why the stored cursor of ``source`` would be refused by its next poll (edited by hand), or None."""
    from memex.capabilities import capabilities
    from memex.errors import StoredCursorRefused
    from memex.live_cursor import refuse_bad_stored
    from memex.registry import make_poller

    poller = make_poller(source)
    try:
        refuse_bad_stored(poller, capabilities(poller), source.name, section.get("cursor"), cursor_store(cfg).where(source.name))
    except StoredCursorRefused as exc:
        return str(exc)
    finally:
        poller.close()
    return None


def collect(cfg: Config) -> list[SourceStatus]:
    """Build every source's status row (a corrupt cursors file raises StateError)."""
    sections = cursor_store(cfg).load()
    held = leases(cfg)
    now = time.time()
    rows: list[SourceStatus] = []
    for name, source in sorted(cfg.sources.items()):
        section: dict[str, Any] = sections.get(name, {})
        last, ok = _last_polls(log_path(cfg.state_dir, name), cfg.log_backups)
        watched = from_log(log_path(cfg.state_dir, name), cfg.log_backups).state(now)
        error = last.get("error") if last.get("status") == "error" else None
        health = source_health(cfg, name, now=now)
        state, reason = health.state, health.reason
        lease = held.get(name)
        problem = config_problem(source) if source.enabled else None
        refused = cursor_problem(source, section, cfg) if source.enabled and problem is None and "cursor" in section else None
        if problem is not None:  # the section itself is broken: every poll fails before reading anything
            state, reason = CONFIG, problem
        elif refused is not None:  # cursors.json edited by hand: no poll can start until the cursor is set right
            state, reason = FAILING, refused
        elif lease is not None and not last and lease.host != host_name():
            # Never polled here, polled on another host: its logs (and health) are there.
            state, reason = REMOTE, f"polled on {lease.host} {int(lease.age)}s ago; run memex status there for its health"
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
                last_quarantined=last.get("quarantined"),
                settling=last.get("settling"),
                last_ok_at=ok.get("ts") if ok else None,
                last_error=error,
                state=state,
                state_reason=reason,
                polled_by=f"{lease.host} pid {lease.pid}" if lease else None,
                spooled=last.get("spool_count"),
                spool_oldest_age_s=last.get("spool_oldest_age_s"),
                unserved=last.get("unserved"),
                watch_mode=watched.cell() if watched else None,
                watch_detail=(watched.detail() or None) if watched else None,
                lease=(f"held by {lease.host} pid {lease.pid} (epoch {lease.epoch})" if lease.live else "free") if lease else None,
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


# Dropped first when the table is wider than the terminal, in this order; SOURCE, STATE and RESULT always show.
DROP_ORDER = ("TYPE", "LAST OK", "CURSOR", "HOST", "MODE", "LAST POLL")
RESULT_MIN = 24  # columns are dropped until RESULT has this many characters; then it is cut with an ellipsis


def render_table(rows: list[SourceStatus], width: int | None = None) -> str:
    """Plain-text table of status rows, each on one line of at most ``width`` characters (None: no limit).

    Too wide, the table drops its least useful columns first (``DROP_ORDER``), then cuts RESULT (and, on a very
    narrow screen, any cell still too wide) with an ellipsis. Every cell is shown through
    :func:`memex.safe_text.visible`: an error quoting server text cannot reach the terminal as a control.
    """
    with_host = any(r["lease"] is not None for r in rows)  # S3 state: say which host polls each source
    with_mode = any(r.get("watch_mode") for r in rows)  # memex watch serves a source: say how
    header: tuple[str, ...] = ("SOURCE", "TYPE", "CURSOR", "LAST POLL", "LAST OK", "STATE", *(("HOST",) if with_host else ()),
                               *(("MODE",) if with_mode else ()), "RESULT")  # fmt: skip
    body: list[tuple[str, ...]] = []
    for r in rows:
        result = r["last_status"] or "never polled"
        if r["last_status"] in ("ok", "idle"):
            result += f": {r['last_new']} new"
            if r["last_dup"]:
                result += f", {r['last_dup']} dup"
            if r.get("last_quarantined"):  # never hidden behind "0 new": they were read and are not in the archive
                result += f", {r.get('last_quarantined')} quarantined"
            if r.get("settling"):
                result += f"; waiting for {r.get('settling')} still being written to settle"
        elif r["last_status"] == "error":
            result += f": {r['last_error']}"
        if r["state"] == CONFIG:  # the section's error is why it is not polled: say it where the result would be
            result = r["state_reason"]
        if r["spooled"]:
            result += f"; {r['spooled']} spooled (oldest {int(r['spool_oldest_age_s'] or 0)}s)"
        if r["unserved"]:
            result += f"; {r['unserved']} not sent by the server (memex verify lists them)"
        if r.get("watch_detail"):
            result += f"; {r['watch_detail']}"
        if not r["enabled"]:
            result = "disabled; " + result
        cells = [r["source"], r["type"], r["cursor"], short_ts(r["last_poll_at"]), short_ts(r["last_ok_at"]), r["state"], result]
        if with_mode:
            cells.insert(6, r.get("watch_mode") or "cron")
        if with_host:
            running = (r["lease"] or "").startswith("held")
            cells.insert(6, (r["polled_by"] or "-").split(" pid ")[0] + (" (running)" if running else ""))
        body.append(tuple(visible(c) for c in cells))
    keep = list(range(len(header)))
    if width is not None:
        for name in DROP_ORDER:
            if _table_width([header, *body], keep) <= width - RESULT_MIN:
                break
            if name in header:
                keep.remove(header.index(name))
    table = [tuple(row[i] for i in keep) for row in [header, *body]]
    widths = [max(len(row[i]) for row in table) for i in range(len(keep) - 1)]
    out = []
    for row in table:
        line = "  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)), row[-1]]).rstrip()
        out.append(line if width is None else _cut(line, width))
    return "\n".join(out)


def _table_width(table: list[tuple[str, ...]], keep: list[int]) -> int:
    """Characters the kept columns but the last take, with their two-space gaps (the last column's start)."""
    return sum(max(len(row[i]) for row in table) + 2 for i in keep[:-1])


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(1, width - 1)] + "…"


__all__ = ["SourceStatus", "StateError", "collect", "render_table"]
