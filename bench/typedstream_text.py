"""attributedBody decoding: microseconds per blob through pytypedstream (the baseline) and through
``decode_attributed_body`` (fast path first), in the same run, on the same blobs.

The blobs are the attributedBody column of the sample chat.db rows that bench/throughput.py polls, and,
for each folder given on the command line, every file in it (e.g. real blobs kept outside the repo). For
each set it prints how many blobs take the fast path, and checks that every blob gives the same string or
the same ValueError both ways (exit 1 if not).
Run: .venv/bin/python bench/typedstream_text.py [FOLDER ...]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pollers.imessage import samples as imessage_samples
from pollers.imessage.typedstream import _decode_fast, _decode_slow, decode_attributed_body

SAMPLE_ROWS = 3000
RUNS = 5


def outcome(decode: Callable[[bytes], str], blob: bytes) -> str | tuple[str, str]:
    """The string, or the ValueError's text."""
    try:
        return decode(blob)
    except ValueError as exc:
        return ("ValueError", str(exc))


def us_per_blob(decode: Callable[[bytes], str], blobs: list[bytes]) -> float:
    """Median over RUNS passes of wall microseconds per blob."""
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for blob in blobs:
            try:
                decode(blob)
            except ValueError:
                pass
        times.append((time.perf_counter() - start) / len(blobs) * 1e6)
    return statistics.median(times)


def report(label: str, blobs: list[bytes]) -> bool:
    """Print one row for ``blobs``; False if any blob decodes differently through the two paths."""
    fast = sum(_decode_fast(blob) is not None for blob in blobs)
    differ = sum(outcome(_decode_slow, blob) != outcome(decode_attributed_body, blob) for blob in blobs)
    slow_us = us_per_blob(_decode_slow, blobs)
    new_us = us_per_blob(decode_attributed_body, blobs)
    print(f"{label:34}{len(blobs):>7}{fast:>7}{slow_us:>12.1f}{new_us:>12.1f}{slow_us / new_us:>9.1f}{differ:>8}", flush=True)
    return differ == 0


def main() -> int:
    """Time the sample blobs and each folder given; exit 1 if any blob differs."""
    bodies = (row.get("attributedBody") for row in imessage_samples.rows(SAMPLE_ROWS))
    blobs = [body for body in bodies if isinstance(body, bytes)]
    print(f"{'blobs':34}{'count':>7}{'fast':>7}{'slow us':>12}{'new us':>12}{'speedup':>9}{'differ':>8}")
    same = report("sample chat.db rows", blobs)
    for folder in sys.argv[1:]:
        files = sorted(p for p in Path(folder).iterdir() if p.is_file())
        same = report(folder[-34:], [p.read_bytes() for p in files]) and same
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
