"""Poll throughput: a large chat.db polled into the file store and into a local S3 server.

Prints messages per second, client CPU and peak RSS for memex, next to a naive baseline measured in the
same run on the same rows (file store: one json.dump per row to a file, no fsync, no dedup, the median of
``--repeat`` alternated runs of each; S3: one plain put_object per row, no conditional header), and the peak
RSS for a history 10x smaller, to show memory does not grow with history size. One more row runs the same poll with
the file store's per-file flush (an fsync per object, what FUSE, NFS, SMB and overlay get) on the same disk: the
syncfs allow-list is emptied in that process only (``memex.state.flush.SYNCFS_PROVEN``). The memex rows keep the
search index (the default); ``--no-index`` adds the same poll with ``search_index = false``.
Run: .venv/bin/python bench/throughput.py [--messages 100000] [--file-only] [--repeat 3] [--per-file] [--no-index]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import FAKE_AWS, Run, moto_server, run
from pollers.imessage import samples as imessage_samples

NAIVE_FILE = """
import json, sqlite3, sys, pathlib
out = pathlib.Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
conn = sqlite3.connect(sys.argv[1])
for rowid, guid, text, date in conn.execute("SELECT ROWID, guid, text, date FROM message ORDER BY ROWID"):
    (out / (guid + ".json")).write_text(json.dumps({"native_id": guid, "text": text, "date": date}))
"""

NAIVE_S3 = """
import json, sqlite3, sys, boto3
client = boto3.client("s3", endpoint_url=sys.argv[2])
conn = sqlite3.connect(sys.argv[1])
for rowid, guid, text, date in conn.execute("SELECT ROWID, guid, text, date FROM message ORDER BY ROWID"):
    client.put_object(Bucket=sys.argv[3], Key="naive/" + guid + ".json", Body=json.dumps({"native_id": guid, "text": text, "date": date}))
"""


# memex's command line with no file system proven to flush on syncfs: every batch takes the per-file path.
PER_FILE_MAIN = """
import runpy, sys
import memex.state.flush
memex.state.flush.SYNCFS_PROVEN.clear()
sys.argv[0] = "memex"
runpy.run_module("memex", run_name="__main__")
"""


def memex_poll(d: Path, db: Path, store: str, name: str, *, per_file: bool = False, index: bool = True) -> Run:
    """Poll ``db`` into ``store`` until caught up, in one process with no time limit (``per_file``: an fsync per object;
    ``index=False``: with ``search_index = false``)."""
    cfg = d / f"{name}.toml"
    cfg.write_text(("" if index else "search_index = false\n") +
                   f'state_dir = "{d}/{name}-state"\n[store]\n{store}\n[sources.imessage]\ntype = "imessage"\ndb = "{db}"\n')  # fmt: skip
    memex = ["-c", PER_FILE_MAIN] if per_file else ["-m", "memex"]
    r = run([sys.executable, *memex, "--config", str(cfg), "poll", "imessage", "--max-seconds", "100000"])
    assert r.returncode == 0, f"memex poll failed ({name})"
    return r


def typical(runs: list[Run]) -> Run:
    """The run of median wall time (its CPU and RSS come with it)."""
    return sorted(runs, key=lambda r: r.wall)[len(runs) // 2]


def line(label: str, n: int, r: Run, base: Run | None = None) -> str:
    """One row of the table."""
    rate = n / r.wall
    ratio = f"{(n / r.wall) / (n / base.wall):>8.2f}" if base else f"{'':>8}"
    return f"{label:34}{rate:>10.0f}{r.cpu / n * 1000:>12.2f}{r.rss_mib:>10.1f}{ratio}"


class Rows(list[str]):
    """Table rows, each printed as soon as it is measured (a slow server shutdown cannot lose them)."""

    def append(self, row: str) -> None:
        """Print and keep ``row``."""
        print(row, flush=True)
        super().append(row)


def main() -> None:
    """Build the chat.db files, run every contender, print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--file-only", action="store_true", help="skip the S3 rows (moto start-up and its CPU)")
    parser.add_argument("--repeat", type=int, default=3, help="alternated naive/memex file runs; the median is shown")
    parser.add_argument("--per-file", action="store_true", help="add the per-file flush row (an fsync per object)")
    parser.add_argument("--no-index", action="store_true", help="add a row for the poll with search_index = false")
    args = parser.parse_args()
    n, small = args.messages, args.messages // 10
    import boto3

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        imessage_samples.build(d / "big.db", n, seed=1)
        imessage_samples.build(d / "small.db", small, seed=2)
        print(f"poll throughput, {n:,} messages (client process only; the S3 server is moto on the same 2 cores)")
        rows = Rows()
        rows.append(f"{'':34}{'msg/s':>10}{'CPU ms/msg':>12}{'RSS MiB':>10}{'vs base':>8}")
        naives, polls, per_files, no_index = [], [], [], []
        for i in range(args.repeat):  # alternated, so a file system that slows down mid-run slows all alike
            naives.append(run([sys.executable, "-c", NAIVE_FILE, str(d / "big.db"), str(d / f"naive{i}")]))
            polls.append(memex_poll(d, d / "big.db", f'url = "{d}/store{i}"', f"file{i}"))
            if args.per_file:
                per_files.append(memex_poll(d, d / "big.db", f'url = "{d}/per-file{i}"', f"per-file{i}", per_file=True))
            if args.no_index:
                no_index.append(memex_poll(d, d / "big.db", f'url = "{d}/no-index{i}"', f"no-index{i}", index=False))
            # Each run's files stay until the end: deleting them would slow the next run's file creation (bench._common).
        naive, poll = typical(naives), typical(polls)
        if args.repeat > 1:
            spread = ", ".join(f"{n / a.wall:.0f}/{n / b.wall:.0f}" for a, b in zip(naives, polls, strict=True))
            print(f"(median of {args.repeat} alternated runs; naive/memex msg/s per run: {spread})")
            if per_files:
                print(f"(fsync per object, msg/s per run: {', '.join(f'{n / r.wall:.0f}' for r in per_files)})")
        rows.append(line("file: naive json writes (base)", n, naive))
        rows.append(line("file: memex poll", n, poll, naive))
        if per_files:
            rows.append(line("file: memex poll, fsync per object", n, typical(per_files), naive))
        if no_index:
            rows.append(line("file: memex poll, no search index", n, typical(no_index), naive))
        small_run = memex_poll(d, d / "small.db", f'url = "{d}/store-small"', "file-small")
        rows.append(line(f"file: memex poll, {small:,} msgs", small, small_run))
        if args.file_only:
            return
        with moto_server() as url:
            boto3.client("s3", endpoint_url=url, **{k.lower(): v for k, v in FAKE_AWS.items() if k != "AWS_DEFAULT_REGION"},
                         region_name="us-east-1").create_bucket(Bucket="bench")  # fmt: skip
            s3_base = run([sys.executable, "-c", NAIVE_S3, str(d / "big.db"), url, "bench"])
            rows.append(line("s3: naive put_object loop (base)", n, s3_base))
            s3 = memex_poll(d, d / "big.db", f'url = "s3://bench/memex"\nendpoint_url = "{url}"', "s3")
            rows.append(line("s3: memex poll (If-None-Match)", n, s3, s3_base))


if __name__ == "__main__":
    main()
