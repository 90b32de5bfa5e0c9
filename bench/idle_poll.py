"""Idle poll cost: wall time and peak memory of `memex poll` with nothing new, as ratios to `python3 -c pass`.

The store is S3 at an endpoint that refuses connections, so any S3 request would fail the poll; the
script also checks with -X importtime that boto3 is never imported. Run: .venv/bin/python bench/idle_poll.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import median, run
from pollers import imessage_samples

RUNS = 30


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
        print(f"{'':24}{'wall ms':>10}{'peak RSS MiB':>14}")
        print(f"{'python3 -c pass':24}{b_wall:>10.1f}{b_rss:>14.1f}")
        print(f"{'memex poll (idle)':24}{i_wall:>10.1f}{i_rss:>14.1f}")
        print(f"{'ratio':24}{i_wall / b_wall:>10.2f}{i_rss / b_rss:>14.2f}")
        print(f"modules imported: {len(modules)}; boto3 imported: {'boto3' in modules}; botocore imported: {'botocore' in modules}")


if __name__ == "__main__":
    main()
