"""Cursor lock contention: time per cursor update for 1 and 5 writer processes, fair blocking lock vs polling.

Each writer process does ``--updates`` read-modify-write updates of its own section through
:class:`memex.state.cursors.CursorStore` (lock, read, write temp, fsync, rename, fsync folder, unlock), timing each
call. Printed: p50, p99 and max per update, for memex's lock (a blocking ``flock`` with the deadline kept by a
helper thread) and, measured in the same run as the baseline, the former ``flock(LOCK_NB)`` polling with a
backoff capped at 50 ms.
The paced rows run the 5 writers at one update each per ``--pace-ms`` (default 100 ms, ten times the rate of a real
poll, which saves its cursor at most about once a second), each at a random moment of its slot: the latency a poll
sees, where the back-to-back rows measure a saturated queue (each update waits for the other writers' fsyncs).
Run: .venv/bin/python bench/cursor_contention.py [--updates 1000] [--pace-ms 100] [--paced-updates 300]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRITER = """
import fcntl, json, os, random, sys, time
from pathlib import Path
import memex.state.locks
from memex.state.cursors import CursorStore

state, name, updates, start_at, mode = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
pace = float(sys.argv[6])  # 0: back to back; else one update at a random moment in each slot of `pace` seconds

def polling(path, timeout):  # the former wait: LOCK_NB, sleep 1 ms doubling up to 50 ms
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline, delay = time.monotonic() + timeout, 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

if mode == "polling":
    memex.state.locks.lock_exclusive = polling
store = CursorStore(state, lock_timeout=60.0)
store.update(name, lambda s: {**s, "cursor": {"n": 0}})
while time.time() < start_at:
    time.sleep(0.001)
times = []
rng = random.Random(name)
for i in range(updates):
    if pace:
        target = start_at + (i + rng.random()) * pace
        while time.time() < target:
            time.sleep(min(0.001, max(0.0, target - time.time())))
    t = time.perf_counter()
    store.update(name, lambda s: {**s, "cursor": {"n": i + 1}})
    times.append(time.perf_counter() - t)
print(json.dumps(times))
"""


def measure(writers: int, updates: int, mode: str, pace: float = 0.0) -> list[float]:
    """Run ``writers`` processes at once, each doing ``updates`` updates (back to back, or one per ``pace`` seconds at a
    random moment of each slot); every update's seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        start_at = time.time() + 1.0 + 0.2 * writers  # all started (imports done) before the first update
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, tmp, f"source{i}", str(updates), str(start_at), mode, str(pace)],
                stdout=subprocess.PIPE,
                env=env,
                text=True,
            )
            for i in range(writers)
        ]
        times: list[float] = []
        for p in procs:
            out, _ = p.communicate(timeout=600)
            assert p.returncode == 0, "a writer failed"
            times.extend(json.loads(out))
        state = json.loads((Path(tmp) / "cursors.json").read_text())
        assert all(state["sources"][f"source{i}"]["cursor"] == {"n": updates} for i in range(writers)), "an update was lost"
        return times


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    """Measure 1 and 5 writers with each lock and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--pace-ms", type=float, default=100.0, help="the paced rows: one update per writer per this many ms")
    parser.add_argument("--paced-updates", type=int, default=300, help="updates per writer in the paced rows")
    args = parser.parse_args()
    print(f"cursor updates, {args.updates:,} per writer process; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'':50}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for writers in (1, 5):
        for mode, label in (("polling", "polling LOCK_NB (former, base)"), ("blocking", "blocking flock (memex)")):
            t = measure(writers, args.updates, mode)
            print(f"{f'{writers} writer(s), {label}':50}{pct(t, 0.5):>9.2f}{pct(t, 0.99):>9.2f}{max(t) * 1000:>9.2f}", flush=True)
    # What pollers do: a poll saves its cursor at most about once a second (a group commit); 100 ms is ten times that.
    for mode, label in (("polling", "polling (base)"), ("blocking", "blocking (memex)")):
        t = measure(5, args.paced_updates, mode, pace=args.pace_ms / 1000)
        row = f"5 writer(s), 1 per {args.pace_ms:g} ms each, {label}"
        print(f"{row:50}{pct(t, 0.5):>9.2f}{pct(t, 0.99):>9.2f}{max(t) * 1000:>9.2f}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
