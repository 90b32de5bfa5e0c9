"""What ``memex status`` and the dashboard say of a source ``memex watch`` serves, from its log lines."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memex.observe.health import parse_ts
from memex.observe.watch_state import KEEP, WatchLog, watching

NOW = 1_800_000_000.0


def line(event: str, at: float, **fields: Any) -> dict[str, Any]:
    """A log line ``event`` written ``at`` seconds before :data:`NOW`."""
    ts = datetime.fromtimestamp(NOW - at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"event": event, "ts": ts, **fields}


def test_push_shows_its_connection_age_and_the_last_delay_and_falls_back_to_interval_when_down() -> None:
    """Up: ``push`` with the newest connection's age and the last pushed poll's arrival-to-stored delay; every
    connection down: ``interval (push down)`` with the reason; a stopped watcher, or none: nothing."""
    events = [line("poll", 900, status="idle", new=0), line("watch.start", 800, mode="push"),
              line("watch.push", 799, state="up", connection="notify"),
              line("poll", 300, trigger="push", new=2, waited_s=0.25, duration_ms=150)]  # fmt: skip
    state = watching(events, NOW)
    assert state is not None and state.cell() == "push 13m"
    assert state.detail() == "push connected 13m, last mail stored 0.4s after it arrived"
    events.append(line("watch.push", 60, state="down", connection="notify", reason="no answer to DONE within 30s"))
    state = watching(events, NOW)
    assert state is not None and state.cell() == "interval (push down)"
    assert "no answer to DONE within 30s" in state.detail() and "polled every interval" in state.detail()
    events.append(line("watch.push", 30, state="up", connection="notify"))
    assert (state := watching(events, NOW)) is not None and state.cell() == "push 30s"
    assert watching([*events, line("watch.stop", 1)], NOW) is None
    assert watching([line("poll", 5, status="ok", new=1)], NOW) is None


def test_file_and_interval_sources_and_a_server_never_reached() -> None:
    """A watched Maildir shows ``files``, an interval-only source ``interval``; push whose first connection never came
    up (the server unreachable) shows the fallback with the planning connection's reason."""
    assert (s := watching([line("watch.start", 10, mode="events")], NOW)) is not None and s.cell() == "files"
    assert (s := watching([line("watch.start", 10, mode="interval")], NOW)) is not None and s.cell() == "interval"
    events = [line("watch.start", 10, mode="push"), line("watch.push", 9, state="down", connection="plan", reason="connection refused")]
    assert (s := watching(events, NOW)) is not None and s.cell() == "interval (push down)" and "connection refused" in s.detail()


def test_the_followed_log_keeps_the_start_line_and_a_bounded_tail() -> None:
    """The dashboard's running copy keeps the watcher's start however long it runs, and at most KEEP lines after it."""
    log = WatchLog()
    log.add(line("poll", 99, status="idle"))
    assert log.lines == []
    log.add(line("watch.start", 90, mode="push"))
    for n in range(KEEP * 2):
        log.add(line("watch.push", 80, state="up" if n % 2 else "down", connection="idle INBOX", reason="x"))
        log.add(line("poll", 80, trigger="interval", new=0))
    assert log.lines[0]["event"] == "watch.start" and len(log.lines) == KEEP + 1
    assert (s := log.state(NOW)) is not None and s.cell() == "push 80s"


def test_the_dashboard_shows_a_mode_column_only_while_memex_watch_serves_a_source(tmp_path: Path) -> None:
    """Two sources, one served by a watcher with push up (from its log lines): the dashboard shows MODE, ``push`` for
    it and ``-`` for the other; once the watcher wrote ``watch.stop``, the column is gone."""
    from memex import config as config_mod
    from memex.observe.dashboard import render_text
    from tests.conftest import write_config
    from tests.core.test_dashboard_fit import header, rows

    path = write_config(
        tmp_path, {"a": {"type": "maildir", "path": str(tmp_path / "a")}, "b": {"type": "maildir", "path": str(tmp_path / "b")}}
    )
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    now = time.time()
    lines = [line("watch.start", 60, mode="push"), line("watch.push", 59, state="up", connection="notify")]
    for event in lines:  # the helper's clock is NOW; shift the stamps to the real one
        event["ts"] = datetime.fromtimestamp(now - (NOW - (parse_ts(event["ts"]) or NOW)), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (logs / "a.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    text = render_text(config_mod.load(path), width=160)
    assert "MODE" in header(text)
    assert rows(text)["a"][header(text).index("MODE")].startswith("push") and rows(text)["b"][header(text).index("MODE")] == "-"
    with (logs / "a.jsonl").open("a") as f:
        f.write(json.dumps({"event": "watch.stop", "ts": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}) + "\n")
    assert "MODE" not in header(render_text(config_mod.load(path), width=160))
