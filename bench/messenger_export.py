"""Messenger export reading: messages per second and peak memory of the poller against a naive loop, in one run.

A zipped standard export of N messages in T threads (500 messages per ``message_N.json``, mojibake as
Facebook writes it, a 1 KiB photo stub per 100 messages) is read two ways, each in its own process:

- memex: the Messenger poller's ``fetch`` loop over the zip in place (every record rendered, every media
  stub hashed as the runner would before storing it); the store itself is left out (its cost is the
  file store's, measured by bench/throughput.py);
- naive: extract the zip to a folder, then ``json.load`` every file.

Run: .venv/bin/python bench/messenger_export.py [--messages N ...] (default 100000 and 1000000).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import run
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
    from memex.store.attachments import digest
    from pollers.messenger.poller import MessengerPoller

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
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        child_memex(args.child[1]) if args.child[0] == "memex" else child_naive(args.child[1], args.child[2])
        return
    print(f"{'messages':>9} {'zip MiB':>8} {'memex msg/s':>12} {'naive msg/s':>12} {'ratio':>6} {'memex MiB':>10} {'naive MiB':>10}")
    for n in args.messages:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            (d / "inbox").mkdir()
            zpath = d / "inbox" / "facebook-bench.zip"
            started = time.perf_counter()
            build(zpath, n, args.threads)
            built = time.perf_counter() - started
            me = run([sys.executable, __file__, "--child", "memex", str(zpath)])
            naive = run([sys.executable, __file__, "--child", "naive", str(zpath), str(d / "out")])
            assert me.returncode == 0 and naive.returncode == 0, (me, naive)
            mb = zpath.stat().st_size / 2**20
            print(
                f"{n:>9} {mb:>8.1f} {n / me.wall:>12.0f} {n / naive.wall:>12.0f} {(n / me.wall) / (n / naive.wall):>6.2f} "
                f"{me.rss_mib:>10.0f} {naive.rss_mib:>10.0f}   (built in {built:.0f}s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
