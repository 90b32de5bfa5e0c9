"""``memex verify`` against same-run baselines: a file store vs ``find | xargs cat``, S3 (SeaweedFS) vs a parallel GET loop.

File store: N records generated straight on disk in the real layout (``messages/bench/<id>.json``, canonical record
JSON), verified by ``memex verify --json`` in a child process, alternated with ``find STORE -type f | xargs cat >
/dev/null``; the ratio is objects/s of verify over the baseline's (medians of the rounds). Peak RSS of verify at each
size shows whether memory stays flat. S3: M records PUT into a SeaweedFS bucket, verified with 16 workers, alternated
with a plain loop that lists the keys and GETs them with 16 threads (the same lean client, no checks).

    python -m bench.verify --objects 100000 --objects 1000000 --s3-objects 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench._common import FAKE_AWS, Run, alternate, write_records
from memex.records import Message

BASELINE_GET = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
from memex.config import StoreConfig
from memex.store import open_store
store = open_store(StoreConfig(url=sys.argv[1], endpoint_url=sys.argv[2]), max_pool_connections=16)
with ThreadPoolExecutor(16) as pool:
    n = sum(1 for body in pool.map(store.get, store.list_keys("")) if body is not None)
print(n)
"""


SUFFIX = "-5E0C-4C4B-9F1A-6A0B1C2D3E4F"


def record(i: int) -> bytes:
    """One record as a poll would store it (about 450 bytes)."""
    m = Message(source="bench", type="message", native_id=f"B{i:09d}{SUFFIX}", sent_at="2024-05-01T12:00:00Z",
                text=f"message number {i}, a short line of text as most chat messages are")  # fmt: skip
    m.conversation = {"id": "chat42", "name": "Climbing", "participants": ["+15550100", "sam@example.com"]}
    m.sender = {"id": "+15550100", "name": None, "is_me": False}
    return m.to_json()


def make_file_store(root: Path, n: int) -> None:
    """N records on disk in the file store's layout (0700 folders), written directly (no fsync: a benchmark fixture)."""
    head, tail = record(0).split(b"B000000000")
    write_records(root, ((f"B{i:09d}{SUFFIX}.json", head + f"B{i:09d}".encode() + tail) for i in range(n)))


def config(d: Path, url: str, endpoint: str | None = None) -> Path:
    """A config with no sources (the store's objects are checked; no source to compare)."""
    cfg = d / "config.toml"
    extra = f'endpoint_url = "{endpoint}"\n' if endpoint else ""
    cfg.write_text(f'state_dir = "{d / "state"}"\n[store]\nurl = "{url}"\n{extra}')
    return cfg


def verify_cmd(cfg: Path, workers: int | None = None) -> list[str]:
    """The verify child process."""
    return [sys.executable, "-m", "memex", "--config", str(cfg), "verify", "--json", *(["--workers", str(workers)] if workers else [])]


def rounds(label: str, n: int, a: list[str], b: list[str], count: int, env: dict[str, str] | None = None) -> tuple[Run, Run]:
    """Alternate ``a`` (verify) and ``b`` (baseline) ``count`` times; print each round; return the median runs."""
    va, vb = alternate(label, a, b, count, names=("verify", "baseline"), env=env)
    print(f"{label}: {n} objects: verify {n / va.wall:,.0f}/s (median {va.wall:.2f}s, cpu {va.cpu:.2f}s, peak RSS {va.rss_mib:.0f} MiB), "
          f"baseline {n / vb.wall:,.0f}/s (median {vb.wall:.2f}s); ratio {vb.wall / va.wall:.2f}x", flush=True)  # fmt: skip
    return va, vb


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, action="append", help="file-store sizes (repeatable; default 100000)")
    ap.add_argument("--s3-objects", type=int, default=0, help="SeaweedFS store size (0: skip S3)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="keep generated stores here (reused on the next run)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", flush=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memex-bench-verify-"))
    try:
        rss: dict[int, float] = {}
        for n in args.objects or [100000]:
            d = work / f"file-{n}"
            store = d / "store"
            if not store.exists():
                t = time.perf_counter()
                d.mkdir(parents=True, exist_ok=True)
                make_file_store(store, n)
                print(f"generated {n} objects in {time.perf_counter() - t:.1f}s", flush=True)
            cfg = config(d, store.as_uri())
            va, _ = rounds("file store", n, verify_cmd(cfg), ["sh", "-c", f"find '{store}' -type f | xargs cat > /dev/null"], args.rounds)
            rss[n] = va.rss_mib
        if len(rss) > 1:
            lo, hi = min(rss), max(rss)
            print(f"peak RSS: {rss[hi]:.0f} MiB at {hi} vs {rss[lo]:.0f} MiB at {lo}: {rss[hi] / rss[lo]:.2f}x", flush=True)
        if args.s3_objects:
            s3(work, args.s3_objects, args.rounds)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def s3(work: Path, m: int, count: int) -> None:
    """The SeaweedFS part."""
    from concurrent.futures import ThreadPoolExecutor

    from memex.config import StoreConfig
    from memex.store import open_store
    from tests.servers.seaweed import create_bucket, seaweed_server

    os.environ.update(FAKE_AWS)
    with seaweed_server(work / "seaweed") as endpoint:
        create_bucket(endpoint, "bench")
        url = "s3://bench/idx"
        store = open_store(StoreConfig(url=url, endpoint_url=endpoint), max_pool_connections=16)
        t = time.perf_counter()
        template = record(0)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: store.put_new(f"messages/bench/B{i:09d}{SUFFIX}.json", template.replace(b"B000000000", f"B{i:09d}".encode())),
                          range(m)))  # fmt: skip
        print(f"uploaded {m} objects in {time.perf_counter() - t:.1f}s", flush=True)
        cfg = config(work, url, endpoint)
        rounds("S3 (SeaweedFS)", m, verify_cmd(cfg, 16), [sys.executable, "-c", BASELINE_GET, url, endpoint], count, env=FAKE_AWS)


if __name__ == "__main__":
    main()
