"""Signal spool throughput: a signal-cli stand-in prints N envelopes; `memex poll` spools and stores them all.

Reports lines per second into the file store and peak memory, as ratios to the same number of messages
polled from an iMessage chat.db (the baseline, measured in the same run), and the idle poll with an empty
receive against `python3 -c pass`. Run: .venv/bin/python bench/signal_spool.py [--messages N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import median, run
from pollers.imessage import samples as imessage_samples
from tests.signal import signal_standin as sc

T0 = 1744235749734


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    n = parser.parse_args().messages
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        folder = d / "sc"
        exe = sc.install(folder)
        sc.queue(folder, *(sc.message(sc.ALICE, T0 + i, f"message {i}") for i in range(n)))
        cfg = d / "signal.toml"
        cfg.write_text(f'state_dir = "{d}/sstate"\n[sources.sig]\ntype = "signal"\naccount = "{sc.ACCOUNT}"\nexecutable = "{exe}"\n')
        imessage_samples.build(d / "chat.db", n, seed=1)
        icfg = d / "imessage.toml"
        icfg.write_text(f'state_dir = "{d}/istate"\n[sources.imessage]\ntype = "imessage"\ndb = "{d}/chat.db"\n')
        poll = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "sig", "--max-seconds", "3600"]
        ipoll = [sys.executable, "-m", "memex", "--config", str(icfg), "poll", "imessage", "--max-seconds", "3600"]
        sig, imsg = run(poll), run(ipoll)
        assert sig.returncode == 0 and imsg.returncode == 0
        stored = sum(1 for _ in (d / "sstate" / "store" / "messages" / "sig").iterdir())
        assert stored == n, f"{stored} of {n} stored"
        print(f"{n} messages  signal spool -> file store: {n / sig.wall:,.0f} msg/s, peak {sig.rss_mib:.0f} MiB")
        print(f"{n} messages  imessage (baseline):          {n / imsg.wall:,.0f} msg/s, peak {imsg.rss_mib:.0f} MiB")
        print(f"ratio signal/imessage: speed {imsg.wall / sig.wall:.2f}x, memory {sig.rss_mib / imsg.rss_mib:.2f}x")
        base = [run([sys.executable, "-c", "pass"]) for _ in range(10)]
        idle = [run(poll) for _ in range(10)]
        b, i = median(base, "wall"), median(idle, "wall")
        print(f"idle poll (empty receive, stand-in is python): {i * 1000:.0f} ms, {i / b:.1f}x python -c pass ({b * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
