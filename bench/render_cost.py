"""Email rendering alone: CPU microseconds and msg/s of ``to_item`` (raw mail to record), this tree vs another.

Two corpora: the real public test mails (``tests/email/data/``, 71 mails of every shape) and ``--bench-mails`` mails
of ``bench/imap_vs_mbsync.py`` (28 KiB on average: plain text, text + HTML alternatives, every tenth with an
attachment). Each round is a fresh child process per tree (``--before TREE``: e.g. ``git archive main pollers memex``
unpacked), which renders its corpus once untimed and then ``--repeat`` times timed (CPU: the process's own
user+sys over the timed passes; no start-up, no I/O). Rounds alternate this tree and the other (the order flips each
round); the medians are printed with their ratio, and the load average (the machine may be shared).

Run: .venv/bin/python bench/render_cost.py --before /tmp/main-tree [--rounds 5] [--bench-mails 400]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _write(path: Path, mails: list[bytes]) -> None:
    path.write_bytes(b"".join(struct.pack(">I", len(m)) + m for m in mails))


def _read(path: Path) -> list[bytes]:
    data, mails, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">I", data, pos)
        mails.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return mails


def child(tree: Path, corpus: Path, repeat: int) -> None:
    """Render ``corpus`` with the renderer of ``tree``; print CPU seconds, wall seconds and messages as JSON."""
    sys.path.insert(0, str(tree))
    from pollers.email.mail.render import to_item

    mails = _read(corpus)
    for raw in mails:  # warm: imports, regex caches, codecs
        to_item(raw, "bench", None, ref="bench")
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        for raw in mails:
            to_item(raw, "bench", None, ref="bench")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"cpu": cpu, "wall": wall, "n": len(mails) * repeat}))


def _round(tree: Path, corpus: Path, repeat: int) -> dict[str, float]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), str(corpus), str(repeat)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=tree).stdout
    got: dict[str, float] = json.loads(out)
    return got


def main() -> None:
    """Build both corpora, alternate the two trees' rounds on each, print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other source tree (holding pollers/ and memex/)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each tree (alternated)")
    parser.add_argument("--bench-mails", type=int, default=400)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.email.bench_mail import sample

    data = ROOT / "tests" / "email" / "data"
    real = [p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file() and not p.name.lower().startswith(("readme", "license"))]
    corpora = {"test mails": (real, 40), f"bench mails ({args.bench_mails})": ([sample(i) for i in range(args.bench_mails)], 2)}
    trees = {"this tree": ROOT, "before": args.before.resolve()}
    loads = [os.getloadavg()[0]]
    print(f"email rendering (to_item), median of {args.rounds} alternated rounds; {os.cpu_count()} cores")
    print(f"{'corpus':24}{'tree':11}{'CPU us/msg':>11}{'msg/s':>9}   every round (CPU us/msg)")
    with tempfile.TemporaryDirectory(prefix="memex-render-") as tmp:
        for label, (mails, repeat) in corpora.items():
            corpus = Path(tmp) / "corpus"
            _write(corpus, mails)
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
            for i in range(args.rounds):
                order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
                for name, tree in order:
                    runs[name].append(_round(tree, corpus, repeat))
                loads.append(os.getloadavg()[0])
            med = {}
            for name, got in runs.items():
                per = [r["cpu"] / r["n"] * 1e6 for r in got]
                rate = statistics.median(r["n"] / r["wall"] for r in got)
                med[name] = statistics.median(per)
                print(f"{label:24}{name:11}{med[name]:>11.1f}{rate:>9,.0f}   {', '.join(f'{x:.1f}' for x in per)}")
            print(f"{label:24}this tree / before: {med['this tree'] / med['before']:.2f}x the CPU per message")
    print(f"load average {min(loads):.2f}-{max(loads):.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
