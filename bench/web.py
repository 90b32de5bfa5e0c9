"""``memex serve``: time to the first byte of every page, search as you type, and the server's memory.

The store of N generated records (``bench.search.generated``: varied words, 200 senders, 500 conversations, five years
of dates) and its index (``memex index rebuild``), then ``memex serve`` started as a child process on loopback. Each
page is asked for ``--repeat`` times in turn (after one warm-up round) over HTTP/1.1 from this process; the time to
the first byte is from sending the request to reading the status line. The baseline, in the same run: a static file
(``/static/app.css``) from the same server (what serving anything costs: the floor). Search as you type: each word
of a list typed a letter at a time (``l``, ``le``, ``lea``, ...), each prefix asked of ``/search/results`` as the
page's script asks it (a prefix that is no query yet, ``from:``, answers 400 with the parser's line: timed too). Memory: the server's peak RSS (``VmHWM``) after every request.

    python bench/web.py --messages 100000 --repeat 20
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import run
from bench.search import config, generated

TYPED = ["lease", "meeting", "w12", "photos", "from:person7", "birthday", "contract", "w1999", "dinner", "invoice"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def first_byte(port: int, path: str, ok: tuple[int, ...] = (200,)) -> float:
    """Seconds from sending ``GET path`` to reading the status line (the body is read after, not timed)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.connect()
        t = time.perf_counter()
        conn.request("GET", path)
        resp = conn.getresponse()
        took = time.perf_counter() - t
        resp.read()
        assert resp.status in ok, (path, resp.status)
        return took
    finally:
        conn.close()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def pages(port: int, cfg: Path) -> dict[str, str]:
    """The addresses measured: one of each page, on real keys of this archive."""
    from memex import config as memex_config
    from memex.read import open_archive

    a = open_archive(memex_config.load(cfg))
    conv = a.conversations(limit=1)[0]
    hit = a.search("lease", limit=1).hits[0]
    person = a.people(limit=1)
    out = {
        "static file (baseline)": "/static/app.css",
        "conversations": "/",
        "conversations, one source": "/?source=bench",
        "a conversation (latest page)": f"/conversation/{conv.key}",
        "a conversation around a message": f"/conversation/{hit.conversation}?around={quote(hit.key, safe='')}",
        "a message": f"/message/{quote(hit.key, safe='')}",
        "search page (results and counts)": "/search?q=lease",
        "search page, rare word": "/search?q=w19990",
        "people": "/people",
        "timeline (a day)": "/timeline?day=2023-06-01",
        "timeline (a week)": "/timeline?day=2023-06-01&span=week",
        "sources": "/sources",
    }
    if person:
        out["a person"] = f"/person/{quote(person[0].id, safe='')}"
    a.close()
    return out


def rss_peak(pid: int) -> float:
    """The process's peak resident memory (MiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(work: Path, n: int, repeat: int) -> None:
    d, store = generated(work, n)
    cfg = config(d, store)
    if not (d / "state" / "search" / "index.sqlite").exists():
        r = run([sys.executable, "-m", "memex", "--config", str(cfg), "index", "rebuild"])
        assert r.returncode == 0, "memex index rebuild failed"
        print(f"index rebuilt in {r.wall:.1f}s", flush=True)
        r = run([sys.executable, "-m", "memex", "--config", str(cfg), "people"])
        print(f"memex people in {r.wall:.1f}s", flush=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        assert server.stdout is not None
        print(server.stdout.readline().strip(), flush=True)
        urls = pages(port, cfg)
        times: dict[str, list[float]] = {name: [] for name in urls}
        for path in urls.values():  # warm-up
            first_byte(port, path)
        for _ in range(repeat):
            for name, path in urls.items():
                times[name].append(first_byte(port, path))
        base = statistics.median(times["static file (baseline)"])
        print(f"\n{n:,} messages, {repeat} requests a page; time to first byte (ms):")
        print(f"{'page':<36} {'median':>8} {'p95':>8} {'x baseline':>11}")
        for name, values in times.items():
            med = statistics.median(values)
            print(f"{name:<36} {med * 1000:8.1f} {p95(values) * 1000:8.1f} {med / base:10.1f}x", flush=True)
        typed = [w[:i] for w in TYPED for i in range(1, len(w) + 1)]
        live: list[float] = []
        for _ in range(max(1, repeat // 5)):
            live += [first_byte(port, "/search/results?q=" + quote(prefix), (200, 400)) for prefix in typed]
        worst = sorted(live)[-3:]
        print(f"search as you type ({len(typed)} prefixes of {len(TYPED)} words, {len(live)} requests): median "
              f"{statistics.median(live) * 1000:.1f} ms, p95 {p95(live) * 1000:.1f} ms, slowest {[round(w * 1000, 1) for w in worst]} ms")  # fmt: skip
        every = [v for name, values in times.items() if name != "static file (baseline)" for v in values]
        print(f"every page: p95 {p95(every) * 1000:.1f} ms, slowest page's p95 {max(p95(v) for v in times.values()) * 1000:.1f} ms")
        print(f"server peak RSS: {rss_peak(server.pid):.0f} MiB", flush=True)
    finally:
        server.terminate()
        server.wait(30)


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, action="append", help="store sizes (repeatable; default 100000)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--keep", type=Path, default=None, help="keep generated stores here (reused on the next run)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", flush=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memex-bench-web-"))
    try:
        for n in args.messages or [100000]:
            measure(work, n, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
