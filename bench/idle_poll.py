"""Idle poll cost: wall time, CPU and peak memory of `memex poll` with nothing new, as ratios to `python -c pass`.

Both run with the same interpreter, alternated, medians (issue 25's goal: wall <= 3x). The store is S3 at an
endpoint that refuses connections, so any S3 request would fail the poll; the script also lists, from
-X importtime, which heavy modules (boto3, click, structlog, asyncio) the idle poll imported: none is the goal. It then times the iMessage poller's
idle ``fetch`` on a 100,000-message chat.db three ways in the same run: without the edit/unsend check
(the baseline), with it (the rows since the last look plus EDIT_WINDOW_ROWS), and checking the whole
table. Run: .venv/bin/python bench/idle_poll.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import median, run
from pollers.imessage import samples as imessage_samples

RUNS = 30
EDIT_ROWS = 100_000


def _fetch_ms(poller: Any, cursor: dict[str, Any]) -> float:
    """Median wall milliseconds of one idle ``fetch`` (nothing new, nothing changed), over RUNS calls."""
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        batch = poller.fetch(cursor, 500)
        times.append((time.perf_counter() - start) * 1000)
        assert not batch.items
    return sorted(times)[len(times) // 2]


def edit_check(d: Path) -> None:
    """The idle fetch's cost with and without the edit/unsend check, in the same run."""
    from memex.source import Batch
    from pollers.imessage import poller as imessage

    imessage_samples.build(d / "big.db", EDIT_ROWS, seed=3)
    poller = imessage.IMessagePoller("bench", d / "big.db", attachment_contents=False)
    cursor = poller.head()
    cursor = {**cursor, "checked": cursor["rowid"], "changed": 1}
    window = _fetch_ms(poller, cursor)
    changes = imessage.IMessagePoller._changes
    imessage.IMessagePoller._changes = lambda self, conn, cursor, changed, limit: Batch(items=[], cursor=cursor)  # type: ignore[method-assign]
    try:
        without = _fetch_ms(poller, cursor)
    finally:
        imessage.IMessagePoller._changes = changes  # type: ignore[method-assign]
    rows, imessage.EDIT_WINDOW_ROWS = imessage.EDIT_WINDOW_ROWS, EDIT_ROWS
    try:
        whole = _fetch_ms(poller, cursor)
    finally:
        imessage.EDIT_WINDOW_ROWS = rows
    poller.close()
    print(f"\nidle iMessage fetch, median of {RUNS} (chat.db {EDIT_ROWS:,} messages, in process)")
    print(f"{'':36}{'ms':>8}{'+ms':>8}")
    print(f"{'no edit/unsend check (baseline)':36}{without:>8.2f}{0:>8.2f}")
    print(f"{f'check, window {rows:,} rows':36}{window:>8.2f}{window - without:>8.2f}")
    print(f"{'check, whole table':36}{whole:>8.2f}{whole - without:>8.2f}")


def main() -> None:
    """Measure and print the table."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        imessage_samples.build(d / "chat.db", 5000, seed=1)
        cfg = d / "config.toml"
        cfg.write_text(f'state_dir = "{d}/state"\n[sources.imessage]\ntype = "imessage"\ndb = "{d}/chat.db"\n')
        memex = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage"]
        assert run(memex).returncode == 0  # catch up into the file store
        cfg.write_text(
            cfg.read_text().replace(
                "[sources.imessage]", '[store]\nurl = "s3://nowhere/x"\nendpoint_url = "http://127.0.0.1:9"\n[sources.imessage]'
            )
        )
        imports = subprocess.run([sys.executable, "-X", "importtime", *memex[1:]], capture_output=True, text=True, timeout=60)
        assert imports.returncode == 0, "idle poll failed: it must not touch S3"
        modules = {line.split("|")[-1].strip() for line in imports.stderr.splitlines() if line.startswith("import time:")}
        base, idle = [], []
        for _ in range(RUNS):  # interleaved, so machine noise hits both alike
            base.append(run([sys.executable, "-c", "pass"]))
            idle.append(run(memex))
        assert all(r.returncode == 0 for r in idle)
        b_wall, i_wall = median(base, "wall") * 1000, median(idle, "wall") * 1000
        b_rss, i_rss = median(base, "rss_mib"), median(idle, "rss_mib")
        print(f"idle poll, median of {RUNS} (chat.db 5,000 messages, S3 store unreachable)")
        b_cpu, i_cpu = median(base, "cpu") * 1000, median(idle, "cpu") * 1000
        print(f"{'':24}{'wall ms':>10}{'CPU ms':>10}{'peak RSS MiB':>14}")
        print(f"{'python -c pass':24}{b_wall:>10.1f}{b_cpu:>10.1f}{b_rss:>14.1f}")
        print(f"{'memex poll (idle)':24}{i_wall:>10.1f}{i_cpu:>10.1f}{i_rss:>14.1f}")
        print(f"{'ratio (goal: wall <= 3)':24}{i_wall / b_wall:>10.2f}{i_cpu / max(b_cpu, 1e-9):>10.2f}{i_rss / b_rss:>14.2f}")
        heavy = sorted(m for m in ("boto3", "botocore", "click", "structlog", "asyncio") if m in modules)
        print(f"load average {os.getloadavg()[0]:.2f}; modules imported: {len(modules)}; heavy modules imported: {heavy or 'none'}")
        edit_check(d)


if __name__ == "__main__":
    main()
