"""Messenger export reading: messages per second and peak memory of the poller against a naive loop, in one run.

A zipped standard export of N messages in T threads (500 messages per ``message_N.json``, mojibake as
Facebook writes it, a 1 KiB photo stub per 100 messages) is read two ways, each in its own process:

- memex: the Messenger poller's ``fetch`` loop over the zip in place (every record rendered, every media
  stub hashed as the runner would before storing it); the store itself is left out (its cost is the
  file store's, measured by bench/throughput.py);
- strict: the same essential work and nothing else (issue 25's baseline, goal memex >= 0.5x): each
  ``message_N.json`` read from the zip and parsed, every string repaired (latin-1 back to UTF-8), a small
  record made per message (sender, time, text, thread, ID), and SHA-256 of every photo read from the zip;
- naive: extract the zip to a folder, then ``json.load`` every file.

Rounds alternate memex, strict, naive (``--rounds``, default 3) and the medians are printed: CPU seconds (user +
system of the child: what compares on a machine shared with other jobs) and peak RSS of each, then the table of
messages per second (wall). ``--before TREE`` adds memex as the folder TREE holds it (``memex/`` and ``pollers/``, e.g.
``git archive main memex pollers | tar -x -C TREE``) to the same rounds; ``--no-naive`` leaves the naive loop out.
The memex child tunes the collector as ``memex poll`` does (:func:`memex.cli.entry.one_shot_collector`).

Run: .venv/bin/python bench/messenger_export.py [--messages N ...] (default 100000 and 1000000) [--before TREE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if os.environ.get("MEMEX_BENCH_TREE"):  # --before TREE: this child reads with the memex and pollers of TREE
    sys.path.insert(0, os.environ["MEMEX_BENCH_TREE"])

from bench._common import Run, run
from tests.messenger.messenger_fixtures import ME, T0, _mangle, msg

PER_FILE = 500


def build(path: Path, n: int, threads: int) -> None:
    """Write the export zip, one thread at a time (memory stays small)."""
    per_thread = n // threads
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for t in range(threads):
            folder = f"friend{t}_{1000 + t}"
            base = f"messages/inbox/{folder}"
            for f in range(0, per_thread, PER_FILE):
                chunk = []
                for i in range(f, min(f + PER_FILE, per_thread)):
                    photos = [f"{base}/photos/{i}.jpg"] if i % 100 == 0 else []
                    chunk.append(_mangle(msg(f"Friend {t} Ü", T0 + (per_thread - i) * 1000, f"message {i} ünïcødé 🎉", photos=photos)))
                doc = {"participants": [{"name": f"Friend {t} Ü"}, {"name": ME}], "messages": chunk, "title": f"Friend {t}"}
                zf.writestr(f"{base}/message_{f // PER_FILE + 1}.json", json.dumps(doc))
            for i in range(0, per_thread, 100):
                zf.writestr(f"{base}/photos/{i}.jpg", bytes([i % 256]) * 1024)


def child_memex(zip_path: str) -> None:
    """Read every item of the export through the poller (media hashed), print the count."""
    from memex.cli import entry
    from memex.store.attachments import digest
    from pollers.messenger.poller import MessengerPoller

    tune = getattr(entry, "one_shot_collector", None)  # what `memex poll` does before it polls (absent in older trees)
    if tune is not None:
        tune()
    poller = MessengerPoller("bench", Path(zip_path).parent, settle_seconds=0)
    cursor, count = None, 0
    while True:
        batch = poller.fetch(cursor, 500)
        for item in batch.items:
            count += 1
            for content in item.contents:
                digest(content.open)
        if not batch.items and batch.cursor == cursor:
            break
        cursor = batch.cursor
    poller.close()
    print(count)


def _repair(value: object) -> object:
    """Facebook's mojibake undone: every string's latin-1 code points are its UTF-8 bytes."""
    if isinstance(value, str):
        try:
            return value.encode("latin-1").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return value
    if isinstance(value, list):
        return [_repair(v) for v in value]
    if isinstance(value, dict):
        return {k: _repair(v) for k, v in value.items()}
    return value


def child_strict(zip_path: str) -> None:
    """The essential work only: JSON from the zip, the repair, a small record per message, SHA-256 of each photo."""
    count = 0
    with zipfile.ZipFile(zip_path) as zf:
        for name in zf.namelist():
            if not (name.startswith("messages/") and name.rsplit("/", 1)[-1].startswith("message_") and name.endswith(".json")):
                continue
            with zf.open(name) as f:
                doc = _repair(json.load(f))
            assert isinstance(doc, dict)
            thread = name.rsplit("/", 2)[-2]
            for m in doc["messages"]:
                record = {"thread": thread, "sender": m.get("sender_name"), "ts": m.get("timestamp_ms"), "text": m.get("content")}
                record["id"] = f"{thread}:{m.get('timestamp_ms')}:{m.get('sender_name')}"
                for photo in m.get("photos", ()):
                    with zf.open(photo["uri"]) as body:
                        hashlib.sha256(body.read()).hexdigest()
                count += 1
    print(count)


def child_naive(zip_path: str, out: str) -> None:
    """Extract the zip, json.load every file, print the message count."""
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(out)
    count = 0
    for p in Path(out).rglob("*.json"):
        with open(p, "rb") as f:
            count += len(json.load(f)["messages"])
    print(count)


def main() -> None:
    """Build the exports, measure both readers on each, print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", metavar="TREE", help="also time the memex reader of TREE (a folder holding memex/ and pollers/)")
    parser.add_argument("--no-naive", action="store_true", help="leave the naive loop out")
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, zip_path = args.child[0], args.child[1]
        if kind in ("memex", "before"):  # "before": the same child, importing from MEMEX_BENCH_TREE
            child_memex(zip_path)
        elif kind == "strict":
            child_strict(zip_path)
        else:
            child_naive(zip_path, args.child[2])
        return
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.rounds} alternated rounds; goal: memex / strict >= 0.5")
    if not args.no_naive:  # the wall-clock table (msg/s), printed under the CPU line of each size
        print(
            f"{'messages':>9} {'zip MiB':>8} {'memex msg/s':>12} {'strict msg/s':>13} {'/strict':>8} {'naive msg/s':>12} {'/naive':>7}"
            f" {'memex MiB':>10} {'naive MiB':>10}"
        )
    for n in args.messages:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            (d / "inbox").mkdir()
            zpath = d / "inbox" / "facebook-bench.zip"
            started = time.perf_counter()
            build(zpath, n, args.threads)
            built = time.perf_counter() - started
            runs: dict[str, list[Run]] = {"memex": [], "strict": [], "naive": []}
            if args.no_naive:
                del runs["naive"]
            if args.before:
                runs = {"before": [], **runs}
            for _ in range(args.rounds):
                for kind in runs:
                    extra = [str(d / "out")] if kind == "naive" else []
                    env = {"MEMEX_BENCH_TREE": str(Path(args.before).resolve())} if kind == "before" else None
                    r = run([sys.executable, __file__, "--child", kind, str(zpath), *extra], env)
                    assert r.returncode == 0, (kind, r)
                    runs[kind].append(r)
                    shutil.rmtree(d / "out", ignore_errors=True)
            _cpu_table(n, runs)
            if args.no_naive:
                continue
            rate = {kind: n / statistics.median(r.wall for r in rs) for kind, rs in runs.items()}
            mb = zpath.stat().st_size / 2**20
            print(
                f"{n:>9} {mb:>8.1f} {rate['memex']:>12.0f} {rate['strict']:>13.0f} {rate['memex'] / rate['strict']:>8.2f}"
                f" {rate['naive']:>12.0f} {rate['memex'] / rate['naive']:>7.2f}"
                f" {max(r.rss_mib for r in runs['memex']):>10.0f} {max(r.rss_mib for r in runs['naive']):>10.0f}   (built in {built:.0f}s)",
                flush=True,
            )


def _cpu_table(n: int, runs: dict[str, list[Run]]) -> None:
    """CPU seconds (user + system of the child) and wall per contender, medians, and memex's ratio to strict in both.

    On a machine shared with other jobs the CPU figures are the comparable ones (wall includes waiting for a core).
    """
    cpu = {kind: statistics.median(r.cpu for r in rs) for kind, rs in runs.items()}
    wall = {kind: statistics.median(r.wall for r in rs) for kind, rs in runs.items()}
    line = "  ".join(
        f"{kind} {cpu[kind]:.2f} s CPU / {wall[kind]:.2f} s wall / {max(r.rss_mib for r in runs[kind]):.0f} MiB" for kind in runs
    )
    ratios = "  ".join(f"{kind}/strict {cpu['strict'] / cpu[kind]:.2f}x" for kind in runs if kind in ("before", "memex"))
    print(f"{n:>9} messages: {line}; in CPU (msg/s ratio): {ratios}", flush=True)


if __name__ == "__main__":
    main()
