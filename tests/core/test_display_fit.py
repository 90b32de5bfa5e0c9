"""What a person sees fits and says what happened (issue 32 §8): the status table's width, the dashboard's error
column, a poll's stopped line, the state of a source that never worked, the demo's dates."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from memex.observe import health
from memex.observe.dashboard_view import layout
from memex.observe.logs import human_line
from memex.observe.status import SourceStatus, render_table
from pollers.imessage import sample as imessage_sample
from pollers.imessage import samples as imessage_samples
from tests.conftest import Gate, write_config
from tests.core.terminal import finish_pty, start_pty

LONG_ERROR = "07:21Z: imap.example.com:993: connection refused; check host and port, and that the server is up and reachable"


def cells(error: str = LONG_ERROR) -> list[dict[str, str]]:
    """Two dashboard rows, one with a long last error."""
    row = {"SOURCE": "work-imap", "STATE": "FAILING", "CURSOR": "INBOX:1234,Sent:55", "LAST POLL": "2m ago", "LAST OK": "3h ago",
           "NEW/DUP": "0/0", "1H": "0", "24H": "120", "PER HOUR (24H)": "▁" * 24, "LAST ERROR": error}  # fmt: skip
    return [row, {**row, "SOURCE": "phone", "STATE": "OK", "LAST ERROR": ""}]


def test_a_wider_dashboard_never_shows_a_narrower_error() -> None:
    """The LAST ERROR column's width never shrinks as the terminal widens (it was narrower at 120 than at 80)."""
    widths = {w: layout(cells(), w).error_width for w in range(60, 260)}
    assert all(widths[w] <= widths[w + 1] for w in range(60, 259)), widths
    assert widths[120] >= widths[80] >= 30
    assert widths[259] == len(LONG_ERROR)  # room enough: the whole error
    assert "LAST ERROR" in layout(cells(), 60).columns


def test_with_no_error_the_other_columns_get_the_room() -> None:
    """No last error: its column takes only its heading's width, and 120 columns show all but the sparkline."""
    fit = layout(cells(error=""), 120)
    assert fit.error_width == len("LAST ERROR") and "CURSOR" in fit.columns and "24H" in fit.columns


def status_row(name: str, **more: Any) -> SourceStatus:
    """A status row with every field, ``more`` overriding."""
    row: dict[str, Any] = {
        "source": name, "type": "imap", "enabled": True, "cursor": "INBOX:123456,Sent:5512,Archive/2019:88812",
        "cursor_updated_at": None, "last_poll_at": "2026-11-22T07:08:03.5Z", "last_status": "error", "last_new": None,
        "last_dup": None, "last_ok_at": "2026-11-21T07:08:03.5Z", "last_error": LONG_ERROR, "state": "FAILING",
        "state_reason": "x", "polled_by": None, "lease": None, "spooled": None, "spool_oldest_age_s": None,
    }  # fmt: skip
    row.update(more)
    return row  # type: ignore[return-value]


def test_status_rows_fit_the_width_dropping_low_value_columns_first() -> None:
    """At 80 columns one line per source, none over 80: TYPE and LAST OK go first, then CURSOR; the result is cut with …."""
    rows = [status_row("personal-imap"), status_row("work", last_status="ok", last_new=4, last_error=None, state="OK")]
    for width in (60, 80, 100, 120):
        lines = render_table(rows, width=width).split("\n")
        assert len(lines) == 3 and all(len(li) <= width for li in lines), (width, lines)
        assert lines[0].startswith("SOURCE") and "STATE" in lines[0] and "RESULT" in lines[0]
        assert lines[1].startswith("personal-imap") and "FAILING" in lines[1] and lines[1].endswith("…")
    narrow = render_table(rows, width=80).split("\n")[0].split()
    assert "TYPE" not in narrow and "OK" not in narrow  # LAST OK dropped
    wide = render_table(rows, width=None).split("\n")
    assert "TYPE" in wide[0] and wide[1].endswith(LONG_ERROR)  # off a terminal: whole lines


def test_a_stopped_poll_says_why_and_what_it_stored() -> None:
    """A poll stopped by its time limit or by Ctrl-C/SIGTERM is not a plain ``poll ok``: it says stopped, and the counts."""
    base = {"event": "poll", "source": "mail", "status": "ok", "new": 4, "dup": 1, "cursor_before": "10", "cursor_after": "14"}
    assert human_line({**base, "stopped": "deadline"}) == "mail: poll stopped (time limit): 4 new, 1 dup (cursor 10 -> 14)"
    assert human_line({**base, "stopped": "signal"}) == "mail: poll stopped (interrupted): 4 new, 1 dup (cursor 10 -> 14)"
    idle = {**base, "status": "idle", "new": 0, "dup": 0, "cursor_after": "10", "stopped": "signal"}
    assert human_line(idle) == "mail: poll stopped (interrupted): 0 new (cursor 10 -> 10)"
    assert human_line(base) == "mail: poll ok: 4 new, 1 dup (cursor 10 -> 14)"


def held_poll(tmp_path: Path, *more: str) -> tuple[subprocess.Popen[bytes], int, Gate]:
    """``memex poll imessage MORE`` on a pty over 60 sample messages, held (the test hold) at its 10th stored message."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 60, seed=5)
    config = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    gate = Gate(tmp_path, 10)
    proc, master = start_pty("poll", "imessage", *more, config=config, env=gate.env())
    gate.wait_held(proc)
    return proc, master, gate


def test_a_poll_stopped_by_ctrl_c_says_interrupted_on_the_terminal(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) mid-poll: the terminal line says ``poll stopped (interrupted)`` with what was stored, not ``poll ok``."""
    proc, master, _gate = held_poll(tmp_path)
    os.kill(proc.pid, signal.SIGINT)  # a held poll lets go when it is asked to stop
    code, text = finish_pty(proc, master, "the interrupted poll")
    assert code == 0, text
    assert re.search(r"imessage: poll stopped \(interrupted\): [1-9]\d* new", text), text
    assert "poll ok" not in text


def test_a_poll_stopped_by_its_time_limit_says_so_on_the_terminal(tmp_path: Path) -> None:
    """A poll that runs out of --max-seconds mid-way: ``poll stopped (time limit)`` with what was stored."""
    proc, master, _gate = held_poll(tmp_path, "--max-seconds", "5")  # held until its time is up
    code, text = finish_pty(proc, master, "the poll past its time limit")
    assert code == 0, text
    assert re.search(r"imessage: poll stopped \(time limit\): [1-9]\d* new", text), text


def test_a_source_whose_first_poll_failed_is_failing_not_stale() -> None:
    """No success yet and the poll failed: FAILING with the error (STALE would hide why); after a success, 1 failure is not."""
    now = health.parse_ts("2027-01-15T08:00:30Z") or 0.0
    err = {"event": "poll", "status": "error", "error": "no such Maildir folder", "ts": "2027-01-15T08:00:00Z"}
    state = health.assess([err], now=now)
    assert state.state == health.FAILING and "no such Maildir folder" in state.reason, state
    assert health.assess([], now=now).state == health.STALE  # never polled at all: the dead-man's switch
    ok = {"event": "poll", "status": "ok", "new": 1, "ts": "2027-01-15T07:59:00Z"}
    assert health.assess([ok, err], now=now).state == health.OK  # a blip in a working source: the error in the reason


def newest_date(db: Path) -> float:
    """The newest message's date in a chat.db, as Unix time."""
    with sqlite3.connect(db) as conn:
        (date,) = conn.execute("SELECT MAX(date) FROM message").fetchone()
    return imessage_samples._unix(int(date))


def test_demo_messages_are_dated_in_the_past(tmp_path: Path) -> None:
    """The demo's sample chat.db (2000 messages, then 5 more) has no message dated after now (it was ~35 min ahead)."""
    db = tmp_path / "chat.db"
    imessage_sample(db, 2000)
    assert time.time() - 3600 < newest_date(db) <= time.time()
    imessage_sample(db, 2000)
    assert time.time() - 120 < newest_date(db) <= time.time()
