"""A backfill's checkpoint: the ``backfill`` key of its source's section of the cursors file (:mod:`memex.backfill`).

Only that key is ever rewritten, under the cursors lock; the live cursor is never touched. The checkpoint is
stored with the arguments it belongs to: the same command resumes, other arguments are refused until
``--restart`` (a finished backfill is simply replaced).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memex.backfill.frontier import Frontier
from memex.backfill.report import BackfillResult
from memex.capabilities import Capabilities
from memex.config import Config
from memex.errors import MemexError
from memex.live_cursor import BACKFILL_KEY
from memex.records import rfc3339
from memex.source import Cursor
from memex.state.backend import cursor_store
from memex.state.cursors import Section, utc_now
from memex.uploader import Uploader

SECTION_KEY = BACKFILL_KEY  # "backfill"


class BackfillConflict(MemexError):
    """A stopped backfill of the source was started with other arguments (exit 2: rerun them or --restart)."""

    exit_code = 2


def backfill_args(since: datetime | None, until: datetime | None, rewrite: bool) -> dict[str, Any]:
    """The arguments a checkpoint belongs to, as stored beside it."""
    return {
        "since": rfc3339(since) if since else None,
        "until": rfc3339(until) if until else None,
        "rewrite": rewrite,
    }


def describe_args(args: dict[str, Any]) -> str:
    """The options a checkpoint belongs to, as typed on the command line."""
    parts = [f"--since {args['since']}" if args.get("since") else "", f"--until {args['until']}" if args.get("until") else ""]
    parts.append("--rewrite" if args.get("rewrite") else "")
    return " ".join(p for p in parts if p) or "(no options)"


class Checkpoint:
    """Where a backfill resumes, and saving its frontier (the cursors file's ``backfill`` key of the source)."""

    def __init__(self, cfg: Config, source: str, poller: Any, can: Capabilities, log: Any, result: BackfillResult,
                 args: dict[str, Any]) -> None:  # fmt: skip
        self.cfg, self.source, self.poller, self.can, self.log, self.result, self.args = cfg, source, poller, can, log, result, args
        self.cursors = cursor_store(cfg)
        self.start: Cursor = None
        self.done_before = 0
        self._saved: tuple[Cursor, int] | None = None
        self.follower: Any = None  # memex.search.build.Follower, set by the run: keeps the search index in step

    def prepare(self, restart: bool, workers: int) -> None:
        """Decide where to start (resume, restart, or refuse) and record the run as running."""
        state = self.cursors.section(self.source).get(SECTION_KEY)
        if isinstance(state, dict) and not restart:
            if state.get("args") == self.args:
                self.start = state.get("checkpoint")
                self.done_before = int(state.get("done", 0))
                self.result.finished_before = state.get("status") == "done"
            elif state.get("status") != "done":
                where = self.poller.positions(state.get("checkpoint")) if state.get("checkpoint") else {}
                raise BackfillConflict(
                    f"{self.cursors.path}: a backfill of {self.source!r} with {describe_args(state.get('args') or {})} "
                    f"stopped at {where or 'the start'}; run it again with the same options to continue, "
                    "or add --restart to start over with the new ones"
                )
        self.result.resumed_from = self.poller.positions(self.start) if self.start else {}
        self.result.checkpoint = self.result.resumed_from
        self.result.done_total = self.done_before
        live_start = self._live_start(state)
        now = utc_now()

        def change(section: Section) -> Section:
            section[SECTION_KEY] = {
                "args": self.args,
                "checkpoint": self.start,
                "positions": self.result.resumed_from,
                "done": self.done_before,
                "status": "running",
                "started_at": now,
                "updated_at": now,
            }
            if live_start is not None:
                section[SECTION_KEY]["live_start"] = live_start
            return section

        self.cursors.update(self.source, change)
        self.log.info("backfill.started", args=self.args, resumed_from=self.result.resumed_from, done_before=self.done_before,
                      workers=workers, restart=restart)  # fmt: skip

    def _live_start(self, state: Any) -> Cursor:
        """Where the first live poll of a ``start = "now"`` source begins once this backfill ran (see memex.live_cursor.start_now).

        The source's head before the walk begins (the walk covers everything up to it), recorded only while
        the source has no live cursor. An earlier backfill's record is kept: it is the earlier point, so
        nothing between the two is skipped.
        """
        if isinstance(state, dict) and state.get("live_start") is not None:
            return state["live_start"]
        if self.cursors.cursor(self.source) is not None or self.cfg.source(self.source).start != "now":
            return None
        return self.can.head() if self.can.head is not None else None  # memex.capabilities.Headed

    def save(self, frontier: Frontier, uploader: Uploader, status: str = "running") -> None:
        """Sync the store, then record the frontier (only the ``backfill`` key of the section changes)."""
        cursor, behind = frontier.snapshot()  # first the frontier, then sync: everything behind it completed before
        if status == "running" and (cursor, behind) == self._saved:
            return
        self._saved = (cursor, behind)
        batch = uploader.take_stored()  # for the search index: journaled before the sync, indexed after the save
        if batch and self.follower is not None:
            self.follower.before_commit(batch)
        uploader.sync()
        positions = self.poller.positions(cursor) if cursor else {}
        done = self.done_before + behind
        now = utc_now()

        def change(section: Section) -> Section:
            state = dict(section.get(SECTION_KEY) or {})
            state.update(args=self.args, checkpoint=cursor, positions=positions, done=done, status=status, updated_at=now)
            section[SECTION_KEY] = state
            return section

        self.cursors.update(self.source, change)
        self.result.checkpoint, self.result.done_total = positions, done
        if batch and self.follower is not None:
            self.follower.after_commit(batch, uploader.store)
