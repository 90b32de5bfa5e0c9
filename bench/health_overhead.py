"""What the health/metrics step adds to an idle poll, on a source with a full day of one-minute polls in its log.

Prints the idle poll's time (median, in-process) and the share of it spent in
metrics.update (health from the log's last day + counters + textfile), and the
dashboard's start-up bytes read on the same log padded with 90 days of history.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from memex import config as config_mod
from memex import runner
from memex.observe import metrics
from memex.observe.dashboard import Dashboard
from pollers.imessage import samples as imessage_samples
from tests.core.test_dashboard import fake_poll  # run with PYTHONPATH=.


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        db = root / "chat.db"
        imessage_samples.build(db, 200)
        (root / "config.toml").write_text(f'state_dir = "{root / "state"}"\n[sources.big]\ntype = "imessage"\ndb = "{db}"\n')
        cfg = config_mod.load(root / "config.toml")
        runner.poll(cfg, "big")
        logs = root / "state" / "logs"
        now = time.time()
        history = 90 * 24 * 60
        with open(logs / "big.jsonl", "a") as f:
            f.writelines(fake_poll(now - 60 * (history - i), 200) for i in range(history))
        size = (logs / "big.jsonl").stat().st_size
        polls, updates = [], []
        fields = {"status": "idle", "new": 0, "dup": 0, "quarantined": 0, "duration_ms": 5}
        for _ in range(30):
            t = time.perf_counter()
            runner.poll(cfg, "big")
            polls.append(time.perf_counter() - t)
            t = time.perf_counter()
            metrics.update(cfg, "big", fields)
            updates.append(time.perf_counter() - t)
        p, u = statistics.median(polls), statistics.median(updates)
        print(f"idle poll (incl. metrics): {p * 1000:.1f} ms; metrics.update alone: {u * 1000:.1f} ms ({u / p:.0%} of the poll)")
        board = Dashboard(cfg)
        print(f"dashboard start-up on a {size / 1e6:.0f} MB log: read {board.bytes_read / 1e6:.2f} MB ({board.bytes_read / size:.1%}), "
              f"parsed {board.lines_parsed} lines")  # fmt: skip
        board.close()


if __name__ == "__main__":
    main()
