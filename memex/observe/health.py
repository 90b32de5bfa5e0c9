"""A source's health state, from its recent log events: pure rules, no I/O in :func:`assess`.

The failure memex exists to prevent logged ``poll ok: 4 new (cursor 89632 ->
89636)`` every minute for weeks while another writer kept resetting the
cursor. "Status ok" said nothing; the *shape* of the cursor's movement said
everything. Each state below has one rule over the source's recent events
(oldest first) and its config:

``OK``
    The newest successful poll stored something (``status: ok``).
``IDLE``
    The newest successful poll found nothing new (``status: idle``).
``SKIPPED``
    The newest poll found the previous one still running (``status: skipped``).
``AUTH``
    The newest poll (skipped ones not counted) failed because the source's
    login is missing, expired or revoked (its line has ``auth_required``):
    nothing will work until the user runs ``memex auth SOURCE``, so this is
    shown from the first such failure, not after ``failing_after``.
``FAILING``
    The newest ``failing_after`` (default 3) polls, skipped ones not counted,
    all failed (``status: error``). One or two failures in a row are reported
    in the reason but do not change the state: a network blip is not an
    outage, and the error is in the log and on cron's stderr already. A
    source with no successful poll in the rules' horizon is FAILING from its
    first failure: nothing shows it ever worked, and the error says why. A poll
    whose first batch took longer to read than its time limit and stored
    nothing (its line has ``slow_read_s``) is FAILING at once: the next polls
    would fail the same way until ``--max-seconds`` is raised. So is a poll
    that failed on something no retry fixes (its line has ``needs_action``: a
    full disk, a read-only mount, a permission, a hand-edited cursor).
``STALE``
    No successful poll (``ok`` or ``idle``) within ``stale_factor`` (2) times
    the source's ``interval`` from the config (default 60 s): the dead-man's
    switch. A source that never polled is STALE too: a source configured but
    never run by cron must not look fine (one whose polls all failed is
    FAILING, which comes first).
``STUCK``
    Any of, over the polls since the last explicit change (skipped polls not
    counted):

    * the same moving cursor transition A -> B (A != B) in the newest
      ``stuck_repeats`` (3) polls in a row, whatever the split between new and
      duplicate: the clobber loop, where something resets the cursor to A
      between polls and every poll re-reads A..B;
    * the newest poll processed messages (new + dup + quarantined > 0), did
      not fail, and its cursor did not move;
    * the cursor moved in each of the newest ``hollow_after`` (5) polls while
      nothing was stored (their lines have ``moved_idle``): a poller that
      passes over what it should store (two copies of one export, a plug-in
      bug) would otherwise read ``IDLE`` for ever. A poller whose cursor
      legitimately moves past things that are not messages (Signal's receipts)
      declares ``moves_when_idle`` and its polls are never counted;
    * a replay: the newest poll met duplicates the poller did not declare as
      expected (``dup - dup_expected > 0``) starting at or below the position
      where the previous poll started, although that poll moved on: something
      put the cursor back. Duplicates met by a cursor that moves forward (a
      Maildir flag rename, one message in two IMAP mailboxes, a backfill beside
      cron, a PUT retried after its answer was lost) are normal and never STUCK.
``REGRESSED``
    A cursor went backward without an explicit change: some position in a
    poll's ``positions_before`` is lower than the same position in the previous
    poll's ``positions_after`` (or a poll's own ``positions_after`` is lower
    than its ``positions_before``), with no ``cursor.set``, ``cursor.reset``,
    ``cursor.start_now``, ``source.reset`` or poll ``reset`` in between (an
    explicit change that happened while a poll was running also counts as
    between). Only positions present on both sides are compared (a mailbox
    removed from the config is not a regression). The state holds for
    ``regressed_hold_s`` (default 24 h) after the poll that showed it, so a
    one-off is still visible at the next glance.
``SPOOL``
    (SPOOL BACKLOG) The newest poll that reports ``spool_oldest_age_s`` reports
    more than ``spool_max_age_s`` (default 900 s): a source that spools before
    upload is not getting its spool out (signal: :mod:`memex.state.spool`).
``DISABLED``
    ``enabled = false`` in the config; no other rule applies.

When several apply, the state is the first in the precedence order
``STUCK > REGRESSED > AUTH > FAILING > STALE > SPOOL > SKIPPED > IDLE > OK``: the
silent, data-shaped symptoms first (they are what nothing else reports; the
clobber loop is both STUCK and REGRESSED and shows as STUCK, the sustained
pattern), then the loud ones. :attr:`Health.flags` lists every state that
applies, in that order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memex.config import Config

OK = "OK"
IDLE = "IDLE"
SKIPPED = "SKIPPED"
AUTH = "AUTH"
FAILING = "FAILING"
STALE = "STALE"
STUCK = "STUCK"
REGRESSED = "REGRESSED"
SPOOL = "SPOOL"
DISABLED = "DISABLED"

PRECEDENCE = (STUCK, REGRESSED, AUTH, FAILING, STALE, SPOOL, SKIPPED, IDLE, OK)
STATES = (*PRECEDENCE, DISABLED)
EXPLICIT_EVENTS = frozenset({"cursor.set", "cursor.reset", "cursor.start_now", "source.reset"})


@dataclass(frozen=True)
class Rules:
    """The rules' thresholds (the defaults are the documented ones)."""

    failing_after: int = 3
    stale_factor: float = 2.0
    stuck_repeats: int = 3
    hollow_after: int = 5
    regressed_hold_s: float = 24 * 3600.0
    spool_max_age_s: float = 900.0

    def horizon_s(self, interval: int) -> float:
        """How far back the rules look: events older than this never change the state."""
        return max(self.regressed_hold_s, self.stale_factor * interval) + 3600.0


@dataclass(frozen=True)
class Health:
    """A source's state, why, and every state that applies."""

    state: str
    reason: str
    flags: tuple[str, ...] = ()


def parse_ts(value: Any) -> float | None:
    """An event's RFC 3339 ``ts`` as a Unix timestamp, or None if missing or malformed."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _positions(event: dict[str, Any], key: str) -> dict[str, int]:
    value = event.get(key)
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _lower(later: dict[str, int], earlier: dict[str, int]) -> list[str]:
    """Names present in both whose value in ``later`` is lower than in ``earlier``."""
    return sorted(k for k, v in earlier.items() if k in later and later[k] < v)


def _processed(poll: dict[str, Any]) -> int:
    total = 0
    for key in ("new", "dup", "quarantined"):
        value = poll.get(key)
        if isinstance(value, int):
            total += value
    return total


def _is_poll(event: dict[str, Any]) -> bool:
    return event.get("event") == "poll"


def find_regression(events: Sequence[dict[str, Any]]) -> tuple[float | None, str] | None:
    """The newest backward cursor move with no explicit change in between: (its poll's ts, description)."""
    found: tuple[float | None, str] | None = None
    prev_after: dict[str, int] | None = None
    last_boundary: float | None = None
    for event in events:
        if event.get("event") in EXPLICIT_EVENTS:
            prev_after = None
            last_boundary = parse_ts(event.get("ts"))
            continue
        if not _is_poll(event) or event.get("status") == "skipped":
            continue
        before, after = _positions(event, "positions_before"), _positions(event, "positions_after")
        ts = parse_ts(event.get("ts"))
        if event.get("reset"):
            prev_after = after or None
            continue
        if prev_after is not None and before:
            down = _lower(before, prev_after)
            if down:
                found = (ts, f"cursor went back from {_fmt(prev_after, down)} to {_fmt(before, down)} between polls")
        if before and after:
            down = _lower(after, before)
            if down:
                found = (ts, f"cursor went back from {_fmt(before, down)} to {_fmt(after, down)} within a poll")
        if after:
            prev_after = after
        # An explicit change made while this poll ran (its line comes after the change's) separates it from the next.
        started = None if ts is None else ts - float(event.get("duration_ms") or 0) / 1000.0
        if last_boundary is not None and started is not None and last_boundary >= started:
            prev_after = None
    return found


def _fmt(positions: dict[str, int], names: list[str]) -> str:
    if len(positions) == 1:
        return str(next(iter(positions.values())))
    return ",".join(f"{k}:{positions[k]}" for k in names)


def _recent_polls(events: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Non-skipped polls newest first; a None marks an explicit change (a boundary) in the sequence."""
    out: list[dict[str, Any] | None] = []
    for event in reversed(events):
        if _is_poll(event):
            if event.get("status") == "skipped":
                continue
            out.append(event)
            if event.get("reset"):
                out.append(None)
        elif event.get("event") in EXPLICIT_EVENTS:
            out.append(None)
    return out


def find_stuck(events: Sequence[dict[str, Any]], rules: Rules = Rules()) -> str | None:
    """Why the source looks stuck (see the module docstring), or None."""
    polls = _recent_polls(events)
    newest = polls[0] if polls else None
    if newest is None:
        return None
    before, after = _positions(newest, "positions_before"), _positions(newest, "positions_after")
    if _processed(newest) > 0 and before == after and newest.get("status") != "error":
        return f"last poll processed {_processed(newest)} messages but the cursor stayed at {newest.get('cursor_after', '?')}"
    hollow = 0  # polls in a row whose cursor moved while nothing was stored
    for poll in polls:
        if poll is None or not poll.get("moved_idle"):
            break
        hollow += 1
    if hollow >= rules.hollow_after:
        return (f"the cursor moved in each of the last {hollow} polls (now {newest.get('cursor_after', '?')}) but nothing was "
                "stored: the source's poller passes over messages without handing them over (a bug to report to its author)")  # fmt: skip
    # The same moving transition, N times in a row (no boundary in between).
    run = []
    for poll in polls:
        if poll is None:
            break
        run.append(poll)
        if len(run) >= rules.stuck_repeats:
            break
    if len(run) >= rules.stuck_repeats:
        transitions = {
            (repr(sorted(_positions(p, "positions_before").items())), repr(sorted(_positions(p, "positions_after").items()))) for p in run
        }
        if len(transitions) == 1 and before and after and before != after:
            return (
                f"the same cursor transition {newest.get('cursor_before')} -> {newest.get('cursor_after')} "
                f"{len(run)} polls in a row (something keeps moving the cursor back)"
            )
    # A replay: the newest poll met duplicates it did not expect, starting at or below where the previous poll
    # started although that one moved on (something put the cursor back). Duplicates a moving cursor meets
    # (a renamed file, one message in two mailboxes, a backfill beside cron, a retried PUT) are not a replay.
    previous = polls[1] if len(polls) > 1 else None
    if previous is not None and _unexpected_dups(newest) > 0:
        prev_before, prev_after = _positions(previous, "positions_before"), _positions(previous, "positions_after")
        replayed = bool(before) and prev_before != prev_after and all(k in prev_before and v <= prev_before[k] for k, v in before.items())
        if replayed:
            return (f"the last poll re-read messages from {newest.get('cursor_before', '?')}, where the poll before it had started "
                    "(something put the cursor back)")  # fmt: skip
    return None


def _unexpected_dups(poll: dict[str, Any]) -> int:
    dup, expected = poll.get("dup"), poll.get("dup_expected", 0)
    if not isinstance(dup, int):
        return 0
    return dup - (expected if isinstance(expected, int) else 0)


def assess(
    events: Sequence[dict[str, Any]],
    *,
    interval: int = 60,
    now: float,
    enabled: bool = True,
    rules: Rules = Rules(),
) -> Health:
    """Apply every rule to a source's recent events (oldest first) at Unix time ``now``; return its state."""
    if not enabled:
        return Health(DISABLED, "disabled in the config", (DISABLED,))
    polls = [e for e in events if _is_poll(e)]
    reasons: dict[str, str] = {}

    stuck = find_stuck(events, rules)
    if stuck:
        reasons[STUCK] = stuck

    regression = find_regression(events)
    if regression is not None:
        ts, text = regression
        if ts is None or now - ts <= rules.regressed_hold_s:
            reasons[REGRESSED] = text + " without an explicit `memex cursor set/reset`"

    live = [p for p in polls if p.get("status") != "skipped"]
    failures = 0
    for poll in reversed(live):
        if poll.get("status") != "error":
            break
        failures += 1
    last_error = next((p.get("error") for p in reversed(live) if p.get("status") == "error"), None)
    if live and live[-1].get("status") == "error" and live[-1].get("auth_required"):
        reasons[AUTH] = str(live[-1].get("error") or "the login is gone; run `memex auth SOURCE`")
    ok_times = [parse_ts(p.get("ts")) for p in polls if p.get("status") in ("ok", "idle")]
    last_ok = max((t for t in ok_times if t is not None), default=None)
    if failures >= rules.failing_after:
        reasons[FAILING] = f"the last {failures} polls failed: {last_error}"
    elif failures and last_ok is None:  # never worked: not a blip in a working source, and the error says why
        reasons[FAILING] = f"no poll has succeeded yet; the last {failures} failed: {last_error}"
    elif live and live[-1].get("status") == "error" and live[-1].get("slow_read_s") is not None:
        reasons[FAILING] = str(last_error)  # slower than its time limit: every poll would fail the same way
    elif failures and live[-1].get("needs_action"):  # a full disk, a hand-edited cursor: no retry will help
        reasons[FAILING] = f"the last poll failed: {last_error}"
    limit = rules.stale_factor * interval
    if last_ok is None:
        reasons[STALE] = "never polled successfully"
    elif now - last_ok > limit:
        reasons[STALE] = f"no successful poll for {_age(now - last_ok)} (expected every {interval}s)"

    spool = next((p for p in reversed(polls) if isinstance(p.get("spool_oldest_age_s"), int | float)), None)
    if spool is not None and float(spool["spool_oldest_age_s"]) > rules.spool_max_age_s:
        reasons[SPOOL] = f"spooled entries waiting for {_age(float(spool['spool_oldest_age_s']))}"

    newest = polls[-1] if polls else None
    if newest is not None and newest.get("status") == "skipped":
        reasons[SKIPPED] = f"the previous poll was still running (pid {newest.get('holder_pid', '?')})"

    last_good = next((p for p in reversed(polls) if p.get("status") in ("ok", "idle")), None)
    if last_good is not None:
        base = OK if last_good.get("status") == "ok" else IDLE
        text = f"{last_good.get('new', 0)} new" if base == OK else "nothing new"
        if 0 < failures < rules.failing_after:
            text += f"; the last {failures} poll(s) failed: {last_error}"
        reasons[base] = text

    flags = tuple(s for s in PRECEDENCE if s in reasons)
    if not flags:
        return Health(STALE, "never polled", (STALE,))
    return Health(flags[0], reasons[flags[0]], flags)


def _age(seconds: float) -> str:
    """A short human duration: ``45s``, ``12m``, ``3h``, ``2d``."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{int(seconds)}s"
    if seconds < 7200:
        return f"{int(seconds // 60)}m"
    if seconds < 172800:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


def age(seconds: float) -> str:
    """A short human duration (``45s``, ``12m``, ``3h``, ``2d``), for tables."""
    return _age(seconds)


def events_for_health(lines: Iterable[dict[str, Any]], *, now: float, horizon_s: float) -> list[dict[str, Any]]:
    """Take events newest first until one is older than ``horizon_s``; return them oldest first."""
    out: list[dict[str, Any]] = []
    for event in lines:
        ts = parse_ts(event.get("ts"))
        if ts is not None and now - ts > horizon_s:
            break
        out.append(event)
    out.reverse()
    return out


def load_events(
    state_dir: Path, source: str, *, interval: int, now: float, backups: int = 5, rules: Rules = Rules()
) -> list[dict[str, Any]]:
    """A source's events within the rules' horizon, oldest first, read from the end of its (rotated) log."""
    from memex.observe.follow import RecentReader
    from memex.observe.logs import log_path

    reader = RecentReader(log_path(state_dir, source), backups)
    return events_for_health(reader.events(), now=now, horizon_s=rules.horizon_s(interval))


def source_health(cfg: Config, source: str, *, now: float | None = None, rules: Rules = Rules()) -> Health:
    """The state of one configured source, from its log."""
    import time

    when = time.time() if now is None else now
    conf = cfg.source(source)
    if not conf.enabled:
        return assess([], now=when, enabled=False)
    events = load_events(cfg.state_dir, source, interval=conf.interval, now=when, backups=cfg.log_backups, rules=rules)
    return assess(events, interval=conf.interval, now=when, rules=rules)
