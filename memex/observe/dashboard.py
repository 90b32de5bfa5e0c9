"""``memex dashboard``: every source's health at a glance, live in the terminal (rich).

Start-up reads each source's log from the end (:class:`memex.observe.follow.RecentReader`)
only as far back as the health rules and the 24-hour counts need, so a state
dir with months of logs opens at once. After that nothing is re-read: a
watchdog observer on ``logs/`` and on the state dir (for ``cursors.json``)
sets a flag, and the main loop then reads only the appended lines of each log
(:class:`memex.observe.follow.Follower`, by offset, across rotation and truncation)
and reloads the small cursors file. A 1-second tick re-renders only to keep
the ages current (and re-checks the logs' sizes every few seconds in case an
event was missed). ``q`` or Ctrl-C quits and restores the terminal.

:func:`render_text` renders the same screen as plain text for a config's
state dir, for tests and ``memex dashboard --once``.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memex.config import Config, SourceConfig
from memex.errors import MemexError
from memex.observe import dashboard_view as dv
from memex.observe import health
from memex.observe.follow import Follower, parse_line
from memex.observe.logs import human_line, log_path
from memex.observe.status import CONFIG, config_problem
from memex.observe.tail import colour, shown
from memex.observe.watch_state import WatchLog, from_log
from memex.safe_text import visible
from memex.source import describe
from memex.state.backend import cursor_store, leases

if TYPE_CHECKING:
    from rich.console import RenderableType

    from memex.state.s3lease import LeaseInfo

DAY = 24 * 3600.0
SPARK = "▁▂▃▄▅▆▇█"
TAIL_LINES = 12
RECHECK_S = 5.0
STATE_STYLE = {
    health.OK: "bold green",
    health.IDLE: "green",
    health.SKIPPED: "yellow",
    health.SPOOL: "yellow",
    health.AUTH: "bold red",
    health.FAILING: "bold red",
    health.STALE: "bold red",
    health.STUCK: "bold white on red",
    health.REGRESSED: "bold white on red",
    health.DISABLED: "bright_black",
    "CONFIG": "bold red",
}


def sparkline(values: list[int]) -> str:
    """One character per value, scaled to the largest (a blank-ish ``▁`` for zero)."""
    top = max(values, default=0)
    if top <= 0:
        return SPARK[0] * len(values)
    return "".join(SPARK[min(len(SPARK) - 1, (v * (len(SPARK) - 1) + top - 1) // top)] if v > 0 else SPARK[0] for v in values)


@dataclass
class SourceView:
    """What the dashboard knows about one source: its recent events (oldest first) and its follower."""

    name: str
    conf: SourceConfig
    horizon_s: float
    events: deque[dict[str, Any]] = field(default_factory=deque)
    follower: Follower | None = None
    problem: str | None = None  # the source's config section is broken (state CONFIG)
    watch: WatchLog = field(default_factory=WatchLog)  # memex watch's lines since its start (kept past the horizon)

    def add(self, event: dict[str, Any]) -> None:
        """Append a newly logged event."""
        self.events.append(event)
        self.watch.add(event)

    def trim(self, now: float) -> None:
        """Forget events older than the horizon."""
        while self.events:
            ts = health.parse_ts(self.events[0].get("ts"))
            if ts is None or now - ts <= self.horizon_s:
                break
            self.events.popleft()


@dataclass
class Row:
    """One source's row, computed for a given moment."""

    name: str
    state: str
    reason: str
    cursor: str
    last_poll_age: str
    last_ok_age: str
    last_counts: str
    hour: int
    day: int
    spark: str
    last_error: str
    mode: str = "-"  # how memex watch serves it (memex.observe.watch_state); "-": polled by cron or not at all


class Dashboard:
    """The dashboard's model: loads from the logs' ends, then updates incrementally."""

    def __init__(self, cfg: Config, *, now: float | None = None, rules: health.Rules | None = None) -> None:
        self.cfg = cfg
        self.rules = rules = rules or health.Rules()
        self.bytes_read = 0
        self.lines_parsed = 0
        self.cursor_error: str | None = None
        self.sections: dict[str, dict[str, Any]] = {}
        self.leases: dict[str, LeaseInfo] = {}
        when = time.time() if now is None else now
        self.views: dict[str, SourceView] = {}
        for name, conf in sorted(cfg.sources.items()):
            view = SourceView(name, conf, horizon_s=max(DAY, rules.horizon_s(conf.interval)),
                              problem=config_problem(conf) if conf.enabled else None)  # fmt: skip
            path = log_path(cfg.state_dir, name)
            view.follower = Follower(path, cfg.log_backups, from_end=True)  # first: nothing falls between
            reader = view.follower.history()
            newest_first = []
            for event in reader.events():
                ts = health.parse_ts(event.get("ts"))
                if ts is not None and when - ts > view.horizon_s:
                    break
                newest_first.append(event)
            view.events.extend(reversed(newest_first))
            view.watch = from_log(path, cfg.log_backups)
            self.bytes_read += reader.bytes_read
            self.lines_parsed += reader.lines_parsed
            self.views[name] = view
        self.reload_cursors()

    def close(self) -> None:
        """Close the followed files."""
        for view in self.views.values():
            if view.follower is not None:
                view.follower.close()

    def reload_cursors(self) -> None:
        """Re-read ``cursors.json`` (small; replaced whole by every writer)."""
        try:
            self.sections = cursor_store(self.cfg).load()
            self.leases = leases(self.cfg)  # S3 state only: who polls each source
            self.cursor_error = None
        except MemexError as exc:  # corrupt state, or S3 state out of reach
            self.cursor_error = str(exc)

    def read_new(self, now: float | None = None) -> int:
        """Read what was appended to every log since the last call; return how many events were added."""
        when = time.time() if now is None else now
        added = 0
        for view in self.views.values():
            if view.follower is None:
                continue
            before = view.follower.bytes_read
            for raw in view.follower.read():
                self.lines_parsed += 1
                event = parse_line(raw)
                if event is not None:
                    view.add(event)
                    added += 1
            self.bytes_read += view.follower.bytes_read - before
            view.trim(when)
        return added

    # -- the rows ----------------------------------------------------------
    def row(self, view: SourceView, now: float) -> Row:
        """Compute one source's row at ``now``."""
        events = list(view.events)
        state = health.assess(events, interval=view.conf.interval, now=now, enabled=view.conf.enabled, rules=self.rules)
        if view.problem is not None:
            state = health.Health(CONFIG, view.problem, (CONFIG, *state.flags))
        polls = [e for e in events if e.get("event") == "poll"]
        last = polls[-1] if polls else None
        last_ok = next((p for p in reversed(polls) if p.get("status") in ("ok", "idle")), None)
        last_err = next((p for p in reversed(polls) if p.get("status") == "error"), None)
        buckets = [0] * 24
        hour = day = 0
        for p in polls:
            ts = health.parse_ts(p.get("ts"))
            new = p.get("new")
            if ts is None or not isinstance(new, int) or now - ts > DAY or now < ts:
                continue
            day += new
            if now - ts <= 3600:
                hour += new
            buckets[min(23, int((now - ts) // 3600))] += new
        section = self.sections.get(view.name, {})
        cursor = describe(section.get("positions") or {}) if "cursor" in section else "-"
        counts = f"{last.get('new', 0)}/{last.get('dup', 0)}" if last and last.get("status") in ("ok", "idle") else "-"
        if last and isinstance(last.get("spool_count"), int) and last["spool_count"]:
            counts += f" +{last['spool_count']} spooled"
        return Row(
            name=view.name,
            state=state.state,
            reason=state.reason,
            cursor=cursor,
            last_poll_age=_age_of(last, now),
            last_ok_age=_age_of(last_ok, now),
            last_counts=counts,
            hour=hour,
            day=day,
            spark=sparkline(list(reversed(buckets))),
            last_error=_error_text(last_err, last_ok),
            mode=watched.cell() if (watched := view.watch.state(now)) is not None else "-",
        )

    def tail(self, count: int = TAIL_LINES) -> list[dict[str, Any]]:
        """The newest ``count`` poll lines (and warnings/errors) of all sources, oldest first."""
        merged: list[dict[str, Any]] = []
        for view in self.views.values():
            picked = []
            for event in reversed(view.events):
                if shown(event):
                    picked.append(event)
                    if len(picked) >= count:
                        break
            merged.extend(picked)
        merged.sort(key=lambda e: str(e.get("ts", "")))
        return merged[-count:]

    def renderable(self, now: float | None = None, *, width: int = 160, height: int | None = None, live: bool = False) -> RenderableType:
        """The screen as a rich renderable, fitted to ``width`` x ``height`` (no height: a fixed number of poll lines)."""
        from rich.console import Group

        when = time.time() if now is None else now
        rows = [self.row(v, when) for v in self.views.values()]
        cells = [_cells(r) for r in rows]
        styles = [STATE_STYLE.get(r.state, "") for r in rows]
        parts: list[RenderableType] = [dv.line(f"memex — {visible(self.cfg.state_dir)}"), dv.table(cells, styles, width)]
        notes = [dv.line(visible(f"{r.name}: {r.state}: {r.reason}"), STATE_STYLE.get(r.state, "")) for r in rows if r.state not in _QUIET]
        if self.leases:
            held = [f"{n} {'polling on' if le.live else 'last polled on'} {le.host}" for n, le in sorted(self.leases.items())]
            notes.append(dv.line(visible("hosts: " + "; ".join(held))))
        if self.cursor_error:
            notes.append(dv.line(f"cursors: {visible(self.cursor_error)}", "bold red"))
        if not self.views:
            notes.append(dv.line("no sources configured"))
        parts.extend(notes)
        footer = [dv.line("q or Ctrl-C quits", "bright_black")] if live else []
        count = TAIL_LINES
        if height is not None:  # what is left under the table, the notes, the heading and the footer
            count = max(0, height - 1 - dv.table_height(len(rows)) - len(notes) - 2 - len(footer))
        if count:
            parts.append(dv.line(""))
            parts.append(dv.line("latest polls", "bold"))
            for event in self.tail(count):
                ts = str(event.get("ts", ""))
                stamp = ts[11:19] if len(ts) >= 19 else "--:--:--"
                parts.append(dv.line(f"{stamp} {human_line(event)}", colour(event) or ""))
        parts.extend(footer)
        return Group(*parts)


_QUIET = (health.OK, health.IDLE, health.DISABLED)


def _cells(r: Row) -> dict[str, str]:
    """A row's cells by column, each shown through :func:`visible` (a name, a cursor's mailbox, an error's server text)."""
    cells = {
        "SOURCE": r.name, "STATE": r.state, "CURSOR": r.cursor, "LAST POLL": r.last_poll_age, "LAST OK": r.last_ok_age,
        "MODE": r.mode, "NEW/DUP": r.last_counts, "1H": str(r.hour), "24H": str(r.day), "PER HOUR (24H)": r.spark, "LAST ERROR": r.last_error,
    }  # fmt: skip
    return {col: visible(text) for col, text in cells.items()}


def _error_text(last_err: dict[str, Any] | None, last_ok: dict[str, Any] | None) -> str:
    """The last failed poll's time and error (``07:21Z: ...``), or nothing once a later poll succeeded."""
    if last_err is None:
        return ""
    err_ts, ok_ts = str(last_err.get("ts", "")), str(last_ok.get("ts", "")) if last_ok else ""
    if ok_ts and ok_ts >= err_ts:
        return ""  # recovered
    stamp = err_ts[11:16] + "Z" if len(err_ts) >= 16 else "--:--"
    return f"{stamp}: {last_err.get('error', '')}"


def _age_of(event: dict[str, Any] | None, now: float) -> str:
    if event is None:
        return "never"
    ts = health.parse_ts(event.get("ts"))
    return "?" if ts is None else health.age(now - ts) + " ago"


def render_text(cfg: Config, *, now: float | None = None, width: int = 160, height: int | None = None) -> str:
    """The dashboard of ``cfg``'s state dir as plain text (no colours), as it would look at ``now`` on a ``width`` x ``height`` screen."""
    board = Dashboard(cfg, now=now)
    try:
        return screen_text(board, now=now, width=width, height=height)
    finally:
        board.close()


def screen_text(board: Dashboard, *, now: float | None = None, width: int = 160, height: int | None = None) -> str:
    """Render an existing :class:`Dashboard` as plain text."""
    import io

    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(board.renderable(now, width=width, height=height))
    return out.getvalue()


def run(cfg: Config) -> None:
    """Show the live dashboard until q or Ctrl-C."""
    from rich.console import Console
    from rich.live import Live
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    from memex.state.files import ensure_private_dir

    wake = threading.Event()

    class Wake(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            wake.set()

    logs = ensure_private_dir(cfg.state_dir / "logs")
    observer = Observer()
    observer.schedule(Wake(), str(logs), recursive=False)
    observer.schedule(Wake(), str(cfg.state_dir), recursive=False)
    observer.start()
    board = Dashboard(cfg)
    stdin_fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    saved: Any = None
    if stdin_fd is not None:
        import termios
        import tty

        saved = termios.tcgetattr(stdin_fd)
        tty.setcbreak(stdin_fd)  # keys one at a time, no echo; Ctrl-C still raises KeyboardInterrupt
    console = Console()

    def screen() -> RenderableType:
        return board.renderable(width=console.size.width, height=console.size.height, live=True)

    try:
        with Live(screen(), console=console, screen=True, auto_refresh=False) as live:
            rendered = checked = time.monotonic()
            while True:
                if stdin_fd is not None:
                    ready, _, _ = select.select([stdin_fd], [], [], 0.2)
                    if ready and os.read(stdin_fd, 1) in (b"q", b"Q"):
                        break
                else:
                    wake.wait(0.2)
                tick = time.monotonic()
                if wake.is_set() or tick - checked >= RECHECK_S:
                    wake.clear()
                    checked = tick
                    board.read_new()
                    board.reload_cursors()
                    live.update(screen(), refresh=True)
                    rendered = tick
                elif tick - rendered >= 1.0:
                    live.update(screen(), refresh=True)  # ages only
                    rendered = tick
    except KeyboardInterrupt:
        pass
    finally:
        if stdin_fd is not None and saved is not None:
            import termios

            termios.tcsetattr(stdin_fd, termios.TCSADRAIN, saved)
        observer.stop()
        observer.join(5)
        board.close()
