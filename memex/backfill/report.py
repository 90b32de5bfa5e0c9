"""What a backfill run did (:class:`BackfillResult`), its running tallies and how its progress is shown.

Counts and positions only: no message text, ever.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import IO, Any


@dataclass
class BackfillResult:
    """What one backfill run did; also the fields of its ``backfill.finished`` line."""

    source: str
    status: str = "done"  # done | stopped | failed | error | refused
    new: int = 0
    dup: int = 0
    rewritten: int = 0
    quarantined: int = 0
    failed: int = 0
    repaired: int = 0  # of ``new``: objects that replaced a damaged one (empty, truncated) found at their name
    elapsed_s: float = 0.0
    rate: float = 0.0
    resumed_from: dict[str, int] = field(default_factory=dict)
    checkpoint: dict[str, int] = field(default_factory=dict)
    done_total: int = 0  # items behind the checkpoint, over every run of this backfill
    finished_before: bool = False  # the same backfill had finished: this run found nothing past its end
    error: str | None = None
    holder_pid: int | None = None
    exit_code: int = 0

    @property
    def processed(self) -> int:
        """Items stored (in any way) by this run."""
        return self.new + self.dup + self.rewritten + self.quarantined

    def summary(self) -> dict[str, Any]:
        """The summary's fields (counts and positions only, never message text)."""
        fields: dict[str, Any] = {
            "source": self.source,
            "status": self.status,
            "new": self.new,
            "dup": self.dup,
            "rewritten": self.rewritten,
            "quarantined": self.quarantined,
            "failed": self.failed,
            "elapsed_s": round(self.elapsed_s, 3),
            "rate": round(self.rate, 1),
            "resumed_from": self.resumed_from,
            "checkpoint": self.checkpoint,
            "done_total": self.done_total,
            "exit_code": self.exit_code,
        }
        if self.repaired:
            fields["repaired"] = self.repaired
        for key in ("error", "holder_pid"):
            value = getattr(self, key)
            if value is not None:
                fields[key] = value
        return fields

    def human(self) -> str:
        """One line for a person: ``imessage: backfill done: 120 new, 3 dup ... in 4.2s (28.6/s)``."""
        if self.status == "refused":
            return f"{self.source}: backfill refused: {self.error}"
        parts = [f"{self.new} new" + (f" ({self.repaired} repaired)" if self.repaired else ""), f"{self.dup} dup"]
        if self.rewritten:
            parts.append(f"{self.rewritten} rewritten")
        parts += [f"{self.quarantined} quarantined", f"{self.failed} failed"]
        line = f"{self.source}: backfill {self.status}: {', '.join(parts)} in {self.elapsed_s:.1f}s ({self.rate:.0f}/s)"
        if self.status == "stopped":
            line += "; progress saved, run the same command again to continue"
        if self.status == "done" and self.finished_before and not self.processed:
            line += "; it had finished before: add --restart to read the whole history again"
        if self.error:
            line += f"; {self.error}"
        return line


@dataclass
class Counts:
    """A run's tallies, shared by its upload threads."""

    new: int = 0
    dup: int = 0
    rewritten: int = 0
    quarantined: int = 0
    failed: int = 0
    first_error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, outcome: str) -> None:
        """Count one stored item by its outcome (``new``, ``dup``, ``rewritten``, ``quarantined``)."""
        with self.lock:
            if outcome == "new":
                self.new += 1
            elif outcome == "dup":
                self.dup += 1
            elif outcome == "rewritten":
                self.rewritten += 1
            elif outcome == "quarantined":
                self.quarantined += 1

    def fail(self, error: str) -> int:
        """Count one item that could not be stored (keeping the first error); return the failures so far."""
        with self.lock:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error
            return self.failed

    @property
    def processed(self) -> int:
        """Items stored (in any way) so far."""
        return self.new + self.dup + self.rewritten + self.quarantined


class Progress:
    """A run's progress for people: a ``backfill.progress`` line every few seconds, a bar on a terminal."""

    def __init__(self, source: str, counts: Counts, result: BackfillResult, log: Any, console: IO[str] | None) -> None:
        self.source, self.counts, self.result, self._log, self.console = source, counts, result, log, console
        self.tty = bool(console is not None and console.isatty())

    def log(self, elapsed: float, total: int | None) -> None:
        """Log one ``backfill.progress`` line (counts, rate, checkpoint; with a total, the ETA)."""
        c = self.counts
        rate = c.processed / elapsed if elapsed > 0 else 0.0
        fields: dict[str, Any] = {"processed": c.processed, "new": c.new, "dup": c.dup, "rewritten": c.rewritten,
                                  "quarantined": c.quarantined, "failed": c.failed, "rate": round(rate, 1),
                                  "checkpoint": self.result.checkpoint}  # fmt: skip
        if total is not None:
            fields["total"] = total
            if rate > 0:
                fields["eta_s"] = round(max(total - c.processed - c.failed, 0) / rate, 1)
        self._log.info("backfill.progress", **fields)

    def draw(self, elapsed: float, total: int | None, *, final: bool = False) -> None:
        """Redraw the progress bar on the terminal (``final``: the last time, ending the line)."""
        if self.console is None:
            return
        c = self.counts
        done = c.processed + c.failed
        rate = done / elapsed if elapsed > 0 else 0.0
        if total:
            width = 24
            filled = min(width, int(width * done / total))
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} {100 * done / total:3.0f}%"
            eta = _duration(max(total - done, 0) / rate) if rate > 0 else "?"
            line = f"{self.source}: {bar} {rate:,.0f} msg/s ETA {eta}"
        else:
            line = f"{self.source}: {done:,} messages {rate:,.0f} msg/s"
        if c.failed:
            line += f" ({c.failed} failed)"
        self.console.write("\r\x1b[2K" + line + ("\n" if final else ""))
        self.console.flush()


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
