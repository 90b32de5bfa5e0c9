"""The health state rules, on recorded log sequences and on real polls through the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memex import config as config_mod
from memex.observe import health
from memex.observe.health import assess
from pollers.imessage import samples as imessage_samples
from tests.conftest import run_cli, write_config

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC).timestamp()


def ts(t: float) -> str:
    """RFC 3339 UTC, as the logs write it."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def poll(
    t: float, before: int | None, after: int | None, *, status: str = "ok", new: int = 0, dup: int = 0, **extra: Any
) -> dict[str, Any]:
    """One poll summary event at time ``t`` with a rowid cursor ``before -> after``."""
    pb = {"rowid": before} if before is not None else {}
    pa = {"rowid": after} if after is not None else {}
    return {
        "event": "poll",
        "source": "imessage",
        "status": status,
        "new": new,
        "dup": dup,
        "quarantined": 0,
        "cursor_before": str(before) if before is not None else "-",
        "cursor_after": str(after) if after is not None else "-",
        "positions_before": pb,
        "positions_after": pa,
        "duration_ms": 40,
        "level": "error" if status == "error" else "info",
        "ts": ts(t),
        **extra,
    }


def naive_state(events: list[dict[str, Any]]) -> str:
    """What a dashboard that trusts 'status ok' would say."""
    last = [e for e in events if e.get("event") == "poll"][-1]
    return {"ok": "OK", "idle": "IDLE", "error": "FAILING", "skipped": "SKIPPED"}[last["status"]]


def clobber_loop(count: int, *, dup: int = 4, new: int = 0) -> list[dict[str, Any]]:
    """The incident: every minute ``poll ok: 4 ... (cursor 89632 -> 89636)`` because something resets the cursor."""
    return [poll(T0 + 60 * i, 89632, 89636, new=new, dup=dup) for i in range(count)]


def test_clobber_loop_is_stuck_where_status_ok_says_fine() -> None:
    """The repeated 89632 -> 89636 loop is STUCK (and REGRESSED is flagged too); trusting 'status ok' says OK."""
    events = clobber_loop(5)
    got = assess(events, now=T0 + 4 * 60 + 5)
    assert naive_state(events) == "OK"
    assert got.state == health.STUCK
    assert "89632 -> 89636" in got.reason
    assert health.REGRESSED in got.flags


def test_clobber_loop_with_new_messages_is_stuck_too() -> None:
    """Whatever the split between new and duplicate (here all reported new, as with overwriting uploads), the loop is STUCK."""
    got = assess(clobber_loop(3, dup=0, new=4), now=T0 + 125)
    assert got.state == health.STUCK


def test_two_repeats_are_not_yet_stuck_and_moving_forward_is_ok() -> None:
    """Two identical transitions are not enough for the loop rule; a cursor that moves on each poll is OK."""
    two = [poll(T0, 10, 14, new=4), poll(T0 + 60, 14, 14, status="idle"), poll(T0 + 120, 10, 14, new=4)]
    assert health.STUCK not in assess(two, now=T0 + 125).flags
    moving = [poll(T0 + 60 * i, 10 + 4 * i, 14 + 4 * i, new=4) for i in range(6)]
    got = assess(moving, now=T0 + 5 * 60 + 5)
    assert (got.state, got.flags) == (health.OK, (health.OK,))


def test_messages_processed_without_the_cursor_moving_is_stuck() -> None:
    """A poll that processed messages but left its cursor where it was is STUCK at once."""
    events = [poll(T0, 500, 520, new=20), poll(T0 + 60, 520, 520, dup=3)]
    assert naive_state(events) == "OK"
    got = assess(events, now=T0 + 65)
    assert got.state == health.STUCK and "stayed at 520" in got.reason


def test_duplicates_met_by_a_moving_cursor_are_normal_but_a_replay_is_stuck() -> None:
    """Duplicates poll after poll while the cursor moves on (renames, two mailboxes, backfill beside cron) are OK;
    a poll re-reading from where the previous one started (the cursor put back) is STUCK; after an explicit reset it is not."""
    moving = [poll(T0 + 60 * i, 100 + 10 * i, 110 + 10 * i, dup=2, new=8) for i in range(5)]
    assert assess(moving, now=T0 + 245).state == health.OK
    replay = [poll(T0, 100, 110, new=10), poll(T0 + 60, 100, 112, new=2, dup=10)]
    got = assess(replay, now=T0 + 65)
    assert got.state == health.STUCK and "re-read messages from 100" in got.reason
    reset = {"event": "cursor.reset", "level": "warning", "ts": ts(T0 - 30), "positions_before": {"rowid": 100}, "positions_after": {}}
    reread = [reset, *[poll(T0 + 60 * i, 10 * i if i else None, 10 * i + 10, dup=10) for i in range(5)]]
    assert assess(reread, now=T0 + 245).state == health.OK


def test_a_failed_poll_that_processed_messages_is_not_stuck() -> None:
    """A poll ending in a CursorConflict after an explicit `cursor set` processed messages and kept its cursor: FAILING material, not STUCK."""
    events = [poll(T0, 100, 110, new=10), poll(T0 + 60, 110, 110, status="error", dup=200, error="cursor of 'imessage' changed")]
    assert health.STUCK not in assess(events, now=T0 + 65).flags


def test_regressed_cursor_is_flagged() -> None:
    """A poll starting below where the previous one ended, with no explicit change, is REGRESSED."""
    events = [poll(T0, 100, 110, new=10), poll(T0 + 60, 105, 110, dup=5)]
    got = assess(events, now=T0 + 65)
    assert got.state == health.REGRESSED and "110 to 105" in got.reason
    # A check that looks only within each poll (after < before) misses it:
    assert not any(e["positions_after"]["rowid"] < e["positions_before"]["rowid"] for e in events)


def test_regression_across_mailboxes_compares_each_position() -> None:
    """With several positions, one going down is enough; a position that vanished is not a regression."""
    a = poll(T0, None, None, new=5, positions_before={"INBOX": 10, "Sent": 3}, positions_after={"INBOX": 15, "Sent": 4})
    b = poll(T0 + 60, None, None, status="idle", positions_before={"INBOX": 15, "Sent": 2}, positions_after={"INBOX": 15, "Sent": 2})
    assert health.REGRESSED in assess([a, b], now=T0 + 65).flags
    c = poll(T0 + 60, None, None, status="idle", positions_before={"INBOX": 15}, positions_after={"INBOX": 15})
    assert health.REGRESSED not in assess([a, c], now=T0 + 65).flags


def test_explicit_cursor_set_or_declared_reset_is_not_regressed() -> None:
    """cursor.set between polls, a set made while a poll ran, and a poll declaring a source reset are not flagged."""
    first = poll(T0, 100, 110, new=10)
    cursor_set = {
        "event": "cursor.set",
        "level": "warning",
        "ts": ts(T0 + 30),
        "positions_before": {"rowid": 110},
        "positions_after": {"rowid": 50},
    }
    after_set = poll(T0 + 60, 50, 110, dup=60)
    assert health.REGRESSED not in assess([first, cursor_set, after_set], now=T0 + 65).flags
    # The set happened while a long poll ran: its line comes after the set's, the next poll starts below it.
    long_poll = poll(T0 + 40, 100, 130, new=30, duration_ms=30_000)
    during = {**cursor_set, "ts": ts(T0 + 20)}
    nxt = poll(T0 + 100, 50, 130, dup=80)
    assert health.REGRESSED not in assess([first, during, long_poll, nxt], now=T0 + 105).flags
    declared = poll(T0 + 60, 110, 12, new=12, reset="chat.db was replaced (highest ROWID 12 < cursor 110)")
    assert health.REGRESSED not in assess([first, declared, poll(T0 + 120, 12, 12, status="idle")], now=T0 + 125).flags
    # Without the explicit event, the same sequence is flagged.
    assert health.REGRESSED in assess([first, after_set], now=T0 + 65).flags


def test_regression_is_held_for_a_day_then_clears() -> None:
    """A one-off regression stays visible for regressed_hold_s (24 h), then the state returns to normal."""
    events = [poll(T0, 100, 110, new=10), poll(T0 + 60, 105, 110, new=5), poll(T0 + 120, 110, 110, status="idle")]
    assert assess(events, now=T0 + 3600).state == health.REGRESSED
    later = [*events, poll(T0 + 90_000, 110, 110, status="idle")]
    assert assess(later, now=T0 + 90_005).state == health.IDLE


def test_stale_source_uses_its_configured_interval(tmp_path: Path) -> None:
    """No successful poll within 2x the source's interval (from the config) is STALE; a slower interval is not."""
    cfg = config_mod.load(
        write_config(tmp_path, {"fast": {"type": "imessage", "db": "a.db"}, "slow": {"type": "imessage", "db": "b.db", "interval": 900}})
    )
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)
    for name in ("fast", "slow"):
        (logs / f"{name}.jsonl").write_text(json.dumps(poll(T0, 10, 12, new=2)) + "\n")
    assert health.source_health(cfg, "fast", now=T0 + 100).state == health.OK
    stale = health.source_health(cfg, "fast", now=T0 + 180)
    assert stale.state == health.STALE and "expected every 60s" in stale.reason
    assert health.source_health(cfg, "slow", now=T0 + 180).state == health.OK
    assert health.source_health(cfg, "slow", now=T0 + 1801).state == health.STALE
    assert assess([], now=T0).state == health.STALE  # never polled: the dead-man's switch is not silent


def test_failing_after_three_failed_polls() -> None:
    """Three failed polls in a row are FAILING; one or two keep the last good state with the error in the reason."""
    ok = poll(T0, 10, 12, new=2)
    errs = [poll(T0 + 30 * (i + 1), 12, 12, status="error", error="cannot open chat.db") for i in range(3)]
    two = assess([ok, *errs[:2]], now=T0 + 65)
    assert two.state == health.OK and "cannot open chat.db" in two.reason
    three = assess([ok, *errs], now=T0 + 95)
    assert three.state == health.FAILING and "the last 3 polls failed" in three.reason
    assert assess([ok, *errs], now=T0 + 185).flags[:2] == (health.FAILING, health.STALE)


def test_skipped_then_stale_if_it_goes_on() -> None:
    """A poll that found the previous still running is SKIPPED; if skipping goes on past 2x interval, STALE wins."""
    events = [poll(T0, 10, 12, new=2), poll(T0 + 60, None, None, status="skipped", holder_pid=4242)]
    got = assess(events, now=T0 + 65)
    assert got.state == health.SKIPPED and "4242" in got.reason
    assert assess(events, now=T0 + 400).state == health.STALE


def test_spool_backlog_and_disabled() -> None:
    """A reported spool older than the threshold is SPOOL; a disabled source is DISABLED whatever its log says."""
    events = [poll(T0, 10, 12, new=2, spool_oldest_age_s=1200)]
    assert assess(events, now=T0 + 5).state == health.SPOOL
    assert assess([poll(T0, 10, 12, new=2, spool_oldest_age_s=30)], now=T0 + 5).state == health.OK
    assert assess(events, now=T0 + 5, enabled=False).state == health.DISABLED


def test_clobbered_cursor_shows_stuck_in_status_json(tmp_path: Path) -> None:
    """Real polls through the CLI while another writer keeps restoring an old cursors.json: status --json says STUCK."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 40, seed=3)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    assert run_cli("poll", "imessage", config=cfg).returncode == 0
    cursors = tmp_path / "state" / "cursors.json"
    stale_copy = cursors.read_bytes()  # what the buggy writer loaded "in the same second"
    imessage_samples.append(db, 4, seed=9)
    for _ in range(3):
        out = run_cli("poll", "imessage", config=cfg)
        assert out.returncode == 0, out.stderr
        cursors.write_bytes(stale_copy)  # the other poller's write-temp-then-rename of its stale view
    rows = json.loads(run_cli("status", "--json", config=cfg).stdout)
    assert rows[0]["last_status"] == "ok"  # what the logs said every minute
    assert rows[0]["state"] == "STUCK", rows[0]["state_reason"]
    assert "40 -> 44" in rows[0]["state_reason"]
    table = run_cli("status", config=cfg).stdout
    assert "STATE" in table.splitlines()[0] and "STUCK" in table
