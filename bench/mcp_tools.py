"""``memex mcp``: every tool's latency at 100,000 messages, against the plain search measured in the same run.

The store and index are :mod:`bench.search`'s (N varied records in a file store, 500 conversations, 200 senders,
five years; ``memex index rebuild`` in a child process). Each tool is called in this process on the server's own
handler (:func:`memex.assistant.server.call`: argument checks, the read-only connection opened for the call, the
answer and its text rendering), once to warm up and then ``--repeat`` times; the median per call is printed with its
ratio to the baseline, the same ``memex search`` query (``w1``, 20 results) run through ``SearchIndex`` as the CLI
does. Then one round trip over stdio: ``memex mcp`` started as a subprocess and called with the SDK's client.
Goal: every tool at most 100 ms (the median).

    python bench/mcp_tools.py --messages 100000 --repeat 7 [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import run
from bench.search import config, generated

GOAL_MS = 100.0


def median_ms(fn: Any, repeat: int) -> float:
    """``fn()`` once to warm up, then ``repeat`` times: the median in milliseconds."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def prepare(work: Path, n: int) -> Path:
    """The store of ``n`` records and its index under ``work`` (made once; kept with ``--keep``); the config."""
    d, store = generated(work, n)
    cfg = config(d, store)
    if not (d / "state" / "search" / "index.sqlite").exists():
        r = run([sys.executable, "-m", "memex", "--config", str(cfg), "index", "rebuild"])
        assert r.returncode == 0, "memex index rebuild failed"
        print(f"index rebuilt in {r.wall:.1f}s", flush=True)
    return cfg


def in_process(cfg: Path, repeat: int) -> list[tuple[str, float]]:
    """Each tool's median over ``repeat`` calls on the server's handler, and the baseline's."""
    from memex import config as memex_config
    from memex.assistant.archive import Archive
    from memex.assistant.server import call
    from memex.search.index import SearchIndex
    from memex.search.query import parse

    c = memex_config.load(cfg)
    archive = Archive(c)

    def baseline() -> None:
        with SearchIndex.open(c.state_dir, create=False) as index:
            parse("w1").run(index.select, 20)

    def tool(name: str, args: dict[str, Any]) -> Any:
        def go() -> Any:
            result = call(archive, name, args)
            assert not result.is_error, (name, args, result.content)
            return result.structured_content

        return go

    first = tool("search", {"query": "w1"})()
    key = first["results"][0]["key"]
    page2 = first["next_cursor"]
    conv = tool("show_conversation", {"conversation": "chat12", "limit": 50})()["next_cursor"]
    cases = [
        ("baseline: memex search w1 (SearchIndex, 20 rows)", baseline),
        ("search w1", tool("search", {"query": "w1"})),
        ("search w1, page 2 (cursor)", tool("search", {"query": "w1", "cursor": page2})),
        ("search from:person7 w1", tool("search", {"query": "from:person7 w1"})),
        ("search in:group12 after:2023-01-01", tool("search", {"query": "in:group12 after:2023-01-01"})),
        ("search * (limit 100)", tool("search", {"query": "*", "limit": 100})),
        ("search lease rank=true", tool("search", {"query": "lease", "rank": True})),
        ("search has:attachment photos", tool("search", {"query": "has:attachment photos"})),
        ("show_message (key)", tool("show_message", {"message": key})),
        ("show_message (native ID)", tool("show_message", {"message": key.rsplit("/", 1)[1][: -len(".json")]})),
        ("show_conversation chat12, page 1 of 50", tool("show_conversation", {"conversation": "chat12", "limit": 50})),
        ("show_conversation chat12, page 2 (cursor)", tool("show_conversation", {"conversation": "chat12", "limit": 50, "cursor": conv})),
        ("counts by sender, *", tool("counts", {"by": "sender"})),
        ("counts by conversation, *", tool("counts", {"by": "conversation"})),
        ("counts by month, *", tool("counts", {"by": "month"})),
        ("counts by sender, lease", tool("counts", {"by": "sender", "query": "lease"})),
        ("index_status", tool("index_status", {})),
        ("index_status detailed=true (scans rows, lists the store)", tool("index_status", {"detailed": True})),
    ]
    return [(name, median_ms(fn, repeat)) for name, fn in cases]


def over_stdio(cfg: Path, repeat: int) -> tuple[float, float]:
    """``memex mcp`` as a subprocess with the SDK's client: seconds to start and initialise, median ms of a search."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memex", "--config", str(cfg), "mcp"],
                                   cwd=Path(__file__).resolve().parent.parent, env=dict(os.environ))  # fmt: skip
    out: list[float] = []

    async def go() -> None:
        t = time.perf_counter()
        with open(os.devnull, "w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                out.append(time.perf_counter() - t)
                await client.call_tool("search", {"query": "w1"})
                times = []
                for _ in range(repeat):
                    t = time.perf_counter()
                    result = await client.call_tool("search", {"query": "w1"})
                    times.append((time.perf_counter() - t) * 1000)
                    assert not result.is_error
                out.append(statistics.median(times))

    anyio.run(go)
    return out[0], out[1]


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--keep", type=Path, default=None, help="keep the generated store and index here (reused on the next run)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", flush=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memex-bench-mcp-"))
    try:
        cfg = prepare(work, args.messages)
        rows = in_process(cfg, args.repeat)
        base = rows[0][1]
        print(
            f"tools at {args.messages:,} messages, in process on the server's handler (median of {args.repeat}; goal <= {GOAL_MS:.0f} ms):"
        )
        for name, ms in rows:
            print(f"  {ms:8.1f} ms  {ms / base:5.1f}x baseline  {'ok ' if ms <= GOAL_MS else 'SLOW'}  {name}")
        start, trip = over_stdio(cfg, args.repeat)
        print(f"over stdio (memex mcp + the SDK's client): start and initialise {start:.2f}s; search w1 round trip median {trip:.1f} ms")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
