"""``memex search``: rebuild speed against a same-run baseline, query latency, and what the index adds to a poll.

1. Rebuild: N generated records (varied words, senders, conversations, five years of dates) written straight into a
   file store in the real layout; ``memex index rebuild`` in a child process (the index removed before each round),
   alternated with a baseline child that only lists the same files, reads them and ``json.loads`` each. Ratio = the
   baseline's wall time over the rebuild's (1.0: as fast as reading); peak RSS per size shows whether memory is flat.
2. Query latency: 30 representative queries over the rebuilt index (single common/rare word, phrase, prefix,
   ``from:`` + word, a date range + word, ``in:``, ``has:attachment``, ``is:me``, ``--rank``, OR, parentheses,
   NOT, stemmed words such as ``meetings``, ``date:`` ranges, a filter ORed with a word, ...), each run
   ``--repeat`` times in this process after one warm-up; p50 and p95 over every run, and each query's median.
   Then the summaries (issue 34): ``--count``, ``--group-by sender|conversation|month`` and ``--output=threads``
   over every message and over a word, in this process, medians of ``--repeat`` runs; each against a baseline in
   the same run: the same answer counted in Python from the rows a plain SELECT returns (what a script without
   GROUP BY would do).
3. Incremental cost: a ``memex poll`` that stores 100 new iMessage messages, with ``search_index = true`` and with
   ``false``, alternated, medians of the wall times (each round on a fresh state folder whose index already holds
   the first 1,000 messages).

    python -m bench.search --messages 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Run, alternate, run, write_records
from memex.records import Message

WORDS = [f"w{n}" for n in range(20000)]  # a Zipf-like vocabulary: w0 is common, w19999 rare
REAL = ("lease", "lunch", "photos", "tomorrow", "meeting", "flight", "dinner", "birthday", "contract", "invoice")
BASELINE = """
import json, os, sys
n = 0
for folder, _dirs, files in os.walk(sys.argv[1]):
    for name in files:
        if name.endswith(".json"):
            with open(os.path.join(folder, name), "rb") as fh:
                json.loads(fh.read())
            n += 1
print(n)
"""
STEMMING = ["english"]  # search_stemming of the configs written (--stemming)
QUERIES = [
    ["w1"], ["w5"], ["lease"], ["w15000"], ["w19990"], ['"w1 w2"'], ['"lease w3"'], ["lea*"], ["w12*"],
    ["from:person7", "w1"], ["from:person7"], ["after:2023-01-01", "before:2023-02-01", "w2"], ["after:2024-06-01", "lunch"],
    ["in:group12"], ["in:group12", "dinner"], ["has:attachment", "photos"], ["is:me", "meeting"], ["source:bench", "flight"],
    ["--rank", "lease"], ["w3", "-w4"],
    ["w1", "OR", "lease"], ["from:person7", "OR", "from:person8"], ["(lunch", "OR", "dinner)", "from:person3"],
    ["(w5", "OR", "w6)", "AND", "NOT", "(w7", "OR", "w8)"], ["meetings"], ["birthdays", "OR", "flights"],
    ["--rank", "meetings"], ["date:2023..2024", "(lease", "OR", "contract)"], ["source:bench", "OR", "w19990"],
    ["not", "w1", "and", "lunch"],
]  # fmt: skip


def record(i: int, rng: random.Random) -> bytes:
    """One varied record (about 500 bytes)."""
    words = [WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)] for _ in range(rng.randint(3, 25))]
    if rng.random() < 0.2:
        words.insert(rng.randrange(len(words) + 1), rng.choice(REAL))
    when = 1577836800 + rng.randrange(5 * 365 * 86400)  # 2020..2024
    m = Message(source="bench", type="message", native_id=f"B{i:09d}-5E0C-4C4B-9F1A-6A0B1C2D3E4F",
                sent_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)), text=" ".join(words))  # fmt: skip
    group = rng.randrange(500)
    m.conversation = {"id": f"chat{group}", "name": f"group{group}", "participants": [f"+1555{group:06d}", "me"]}
    me = rng.random() < 0.3
    person = rng.randrange(200)
    m.sender = {"id": None if me else f"person{person}@example.com", "name": None if me else f"Person{person}", "is_me": me}
    if rng.random() < 0.05:
        m.attachments = [{"id": f"a{i}", "filename": f"IMG_{i}.jpg", "mime_type": "image/jpeg", "size": 1000}]
    return m.to_json()


def make_store(root: Path, n: int) -> None:
    """N varied records in the file store's layout, written directly (a fixture)."""
    rng = random.Random(23)
    write_records(root, ((f"B{i:09d}-5E0C-4C4B-9F1A-6A0B1C2D3E4F.json", record(i, rng)) for i in range(n)))


def config(d: Path, store: Path, extra: str = "") -> Path:
    """A config for a file store (and ``extra`` lines: sources, search_index)."""
    cfg = d / "config.toml"
    cfg.write_text(f'state_dir = "{d / "state"}"\nsearch_stemming = "{STEMMING[0]}"\n{extra}[store]\nurl = "{store.as_uri()}"\n')
    return cfg


def generated(work: Path, n: int) -> tuple[Path, Path]:
    """The folder for size ``n`` under ``work`` and its store of ``n`` records (generated once, kept with ``--keep``)."""
    d = work / f"store-{n}"
    store = d / "store"
    if not store.exists():
        t = time.perf_counter()
        d.mkdir(parents=True, exist_ok=True)
        make_store(store, n)
        print(f"generated {n:,} records in {time.perf_counter() - t:.1f}s", flush=True)
    return d, store


def rebuild(work: Path, n: int, rounds: int) -> float:
    """Part 1 at size ``n``; the rebuild's peak RSS (MiB)."""
    d, store = generated(work, n)
    cfg = config(d, store)
    memex = [sys.executable, "-m", "memex", "--config", str(cfg)]
    wipe = ["rm", "-rf", str(d / "state" / "search")]
    run([sys.executable, "-c", BASELINE, str(store)])  # warm-up, untimed: the first round's rebuild no longer reads a cold store
    va, vb = alternate(
        "rebuild",
        [*memex, "index", "rebuild"],
        [sys.executable, "-c", BASELINE, str(store)],
        rounds,
        names=("rebuild", "baseline"),
        before=wipe,
    )
    run([*memex, "index", "rebuild"])  # leave a built index for the queries
    print(f"rebuild: {n:,} records: {n / va.wall:,.0f}/s (median {va.wall:.2f}s, cpu {va.cpu:.2f}s, peak RSS {va.rss_mib:.0f} MiB); "
          f"read+json.loads baseline {n / vb.wall:,.0f}/s ({vb.wall:.2f}s, cpu {vb.cpu:.2f}s); ratio {vb.wall / va.wall:.2f}x "
          f"(cpu {vb.cpu / va.cpu:.2f}x); "
          f"index file {(d / 'state' / 'search' / 'index.sqlite').stat().st_size / 2**20:.0f} MiB", flush=True)  # fmt: skip
    latency(d / "state", n)
    summaries(d / "state", n)
    return va.rss_mib


def latency(state: Path, n: int, repeat: int = 5) -> None:
    """Part 2: the queries' latency over the index in ``state``."""
    from memex.search.index import SearchIndex
    from memex.search.query import parse
    from memex.search.schema import STEM

    index = SearchIndex.open(state, create=False)
    every: list[float] = []
    rows = []
    for args in QUERIES:
        rank = args[0] == "--rank"
        q = parse(" ".join(args[1:] if rank else args), stemmed=STEM in index.tables)
        found = len(q.run(index.select, 20, rank=rank))  # warm-up
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            q.run(index.select, 20, rank=rank)
            times.append((time.perf_counter() - t) * 1000)
        every += times
        rows.append((" ".join(args), found, statistics.median(times)))
    index.close()
    every.sort()
    p50, p95 = every[len(every) // 2], every[min(len(every) - 1, int(len(every) * 0.95))]
    print(f"queries over {n:,} messages: p50 {p50:.1f} ms, p95 {p95:.1f} ms ({len(every)} runs of {len(QUERIES)} queries)")
    for text, found, med in rows:
        print(f"  {med:7.1f} ms  {found:3d} results  {text}")


def direct(work: Path, n: int) -> None:
    """Part 2 alone (``--latency-only``): the same N records added straight into an index in this process (batches
    of 20,000, FTS5's segments merged at the end, as a rebuild leaves them), no store written; then the queries."""
    import json

    from memex.search.index import SearchIndex

    state = work / f"direct-{n}"
    path = state / "search" / "index.sqlite"
    if not path.exists():
        t = time.perf_counter()
        rng = random.Random(23)
        with SearchIndex(path, stemming=STEMMING[0]) as index:
            for start in range(0, n, 20000):
                index.add((f"messages/bench/B{i:09d}.json", json.loads(record(i, rng))) for i in range(start, min(n, start + 20000)))
            for t_ in index.tables:
                index.db.execute(f"INSERT INTO {t_}({t_}) VALUES('optimize')")
        print(f"indexed {n:,} records in this process in {time.perf_counter() - t:.0f}s; index file "
              f"{path.stat().st_size / 2**20:.0f} MiB", flush=True)  # fmt: skip
    latency(state, n)


SUMMARIES = [("count *", "*", None), ("count w5", "w5", None), ("group-by sender *", "*", "sender"),
             ("group-by conversation *", "*", "conversation"), ("group-by month *", "*", "month"),
             ("group-by month lease", "lease", "month"), ("threads *", "*", "threads"), ("threads lease", "lease", "threads")]  # fmt: skip
_BASELINE_COLUMN = {None: "1", "sender": "m.sender_id", "conversation": "m.thread", "month": "substr(m.sent_at, 1, 7)",
                    "threads": "m.thread"}  # fmt: skip


def summaries(state: Path, n: int, repeat: int = 5) -> None:
    """Part 2b: --count, --group-by and --output=threads over the index in ``state``, each against the Python count."""
    from collections import Counter

    from memex.read import conversations as conv
    from memex.search.index import SearchIndex
    from memex.search.query import parse

    index = SearchIndex.open(state, create=False)

    def timed(fn: object) -> float:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1000

    print(f"summaries over {n:,} messages (medians of {repeat}; baseline: the rows of a plain SELECT counted in Python):")
    for name, text, by in SUMMARIES:
        q = parse(text)
        if by is None:
            ours = timed(lambda q=q: conv.count(index.db, q))
        elif by == "threads":
            ours = timed(lambda q=q: conv.threads(index.db, q, 20))
        else:
            ours = timed(lambda q=q, by=by: conv.group_counts(index.db, q, by, 20))
        sql, params = q.matching(_BASELINE_COLUMN[by])
        base = timed(lambda sql=sql, params=params: Counter(r[0] for r in index.db.execute(sql, params)).most_common(20))
        print(f"  {ours:8.1f} ms  (baseline {base:8.1f} ms: {base / ours:5.2f}x)  {name}", flush=True)
    index.close()


def incremental(work: Path, rounds: int) -> None:
    """Part 3: a poll storing 100 messages with and without the index."""
    from pollers.imessage import samples

    d = work / "poll"
    d.mkdir(parents=True, exist_ok=True)
    db = d / "seed.db"
    db.unlink(missing_ok=True)  # a kept work folder (--keep) holds the last run's
    samples.build(db, 1000, seed=5)
    ready: dict[str, Path] = {}
    for flag in ("true", "false"):
        root = d / flag
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        shutil.copy(db, root / "chat.db")
        cfg = config(root, root / "store", f'search_index = {flag}\n[sources.imessage]\ntype = "imessage"\ndb = "{root / "chat.db"}"\n')
        assert run([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage"]).returncode == 0
        shutil.rmtree(d / f"{flag}.seed", ignore_errors=True)
        shutil.copytree(root, d / f"{flag}.seed")
        ready[flag] = cfg

    def fresh(flag: str) -> list[str]:
        root = d / flag
        code = (f"import shutil, sys; sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r}); "
                f"shutil.rmtree({str(root)!r}); shutil.copytree({str(d / (flag + '.seed'))!r}, {str(root)!r}); "
                f"from pollers.imessage import samples; from pathlib import Path; samples.append(Path({str(root / 'chat.db')!r}), 100, seed=6)")  # fmt: skip
        return [sys.executable, "-c", code]

    poll = {flag: [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage"] for flag, cfg in ready.items()}
    with_index: list[Run] = []
    without: list[Run] = []
    for i in range(rounds * 2):
        for flag in ("true", "false") if i % 2 == 0 else ("false", "true"):
            assert run(fresh(flag)).returncode == 0
            r = run(poll[flag])
            assert r.returncode == 0
            (with_index if flag == "true" else without).append(r)
    a, b = statistics.median(r.wall for r in with_index), statistics.median(r.wall for r in without)
    ca, cb = statistics.median(r.cpu for r in with_index), statistics.median(r.cpu for r in without)
    print(f"poll storing 100 messages: with the index {a * 1000:.0f} ms (cpu {ca * 1000:.0f} ms), without {b * 1000:.0f} ms "
          f"(cpu {cb * 1000:.0f} ms), medians of {len(without)}; wall +{(a / b - 1) * 100:.1f}%, cpu +{(ca / cb - 1) * 100:.1f}%",
          flush=True)  # fmt: skip


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, action="append", help="store sizes (repeatable; default 100000)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="keep generated stores here (reused on the next run)")
    ap.add_argument("--latency-only", action="store_true", help="only the queries' latency, over an index built in process")
    ap.add_argument("--stemming", choices=("english", "none"), default="english", help="search_stemming (index size, poll cost)")
    args = ap.parse_args()
    STEMMING[0] = args.stemming
    print(f"search_stemming = {args.stemming!r}")
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", flush=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memex-bench-search-"))
    try:
        if args.latency_only:
            for n in args.messages or [100000]:
                direct(work, n)
            return
        rss = {n: rebuild(work, n, args.rounds) for n in args.messages or [100000]}
        if len(rss) > 1:
            lo, hi = min(rss), max(rss)
            print(f"peak RSS: {rss[hi]:.0f} MiB at {hi:,} vs {rss[lo]:.0f} MiB at {lo:,}: {rss[hi] / rss[lo]:.2f}x", flush=True)
        incremental(work, args.rounds)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
