"""What checking every record against the published schema costs a poll, with fastjsonschema and with jsonschema.

A chat.db of ``--messages`` rows is polled into a file store (the poll's CPU per message, validation included); the
stored records are read back and checked in this process by the core's check (fastjsonschema, compiled once) and
by jsonschema's Draft 2020-12 validator, in alternated rounds (medians). Prints microseconds per record and the
share of a poll's CPU each validator would take, plus the one-off costs a storing poll pays: importing the
validator and compiling the schema (an idle poll pays neither).
Run: .venv/bin/python bench/schema_cost.py [--messages 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import run
from pollers.imessage import samples as imessage_samples


def per_record(check: Callable[[Any], Any], docs: list[dict[str, Any]]) -> float:
    """CPU seconds per record to check every one of ``docs`` (CPU, not wall: the machine may be shared)."""
    start = time.process_time()
    for doc in docs:
        check(doc)
    return (time.process_time() - start) / len(docs)


def import_ms(module: str, rounds: int) -> float:
    """Median milliseconds importing ``module`` adds to a storing poll (-X importtime, after what a poll has imported
    already; wall time, so a loaded machine inflates it)."""
    out = []
    code = f"import memex.runner, memex.uploader, memex.store.files; import {module}"
    for _ in range(rounds):
        res = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
        last = [line for line in res.stderr.splitlines() if line.rstrip().endswith(f"| {module}")][-1]
        out.append(int(last.split("|")[1]) / 1000)
    return statistics.median(out)


def main() -> None:
    """Poll, read back, time both validators, print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import fastjsonschema
    import jsonschema

    from memex.schema import problem, schema

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        imessage_samples.build(d / "chat.db", args.messages, seed=3)
        polls = []
        for i in range(args.rounds):
            cfg = d / f"c{i}.toml"
            cfg.write_text(
                f'state_dir = "{d}/s{i}"\n[store]\nurl = "{d}/store{i}"\n[sources.imessage]\ntype = "imessage"\ndb = "{d}/chat.db"\n'
            )
            r = run([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage", "--max-seconds", "100000"])
            assert r.returncode == 0, "memex poll failed"
            polls.append(r.cpu)
        store = d / "store0"
        docs = [json.loads(p.read_bytes()) for top in ("messages", "revisions") for p in (store / top).rglob("*.json")]
    poll_us = statistics.median(polls) / args.messages * 1e6
    reference = jsonschema.Draft202012Validator(schema())
    fast: list[float] = []
    slow: list[float] = []
    for _ in range(args.rounds):  # alternated, so a machine that gets busier slows both alike
        fast.append(per_record(problem, docs))
        slow.append(per_record(lambda doc: next(reference.iter_errors(doc), None), docs))
    compile_ms = []
    for _ in range(args.rounds):
        start = time.process_time()
        fastjsonschema.compile(schema(), use_formats=False)
        compile_ms.append((time.process_time() - start) * 1000)
    f_us, s_us = statistics.median(fast) * 1e6, statistics.median(slow) * 1e6
    base = poll_us - f_us  # the poll without the core's check
    print(f"schema check cost, {args.messages:,} iMessage rows -> {len(docs):,} records; CPU time; load average {os.getloadavg()[0]:.1f}")
    print(f"poll CPU per message (check included)      {poll_us:8.1f} us (median of {args.rounds} polls)")
    print(f"fastjsonschema (the core's check)          {f_us:8.1f} us/record  {f_us / poll_us:6.1%} of a poll's CPU")
    print(f"jsonschema Draft202012Validator            {s_us:8.1f} us/record  {s_us / (base + s_us):6.1%} of a poll's CPU"
          f"  ({s_us / f_us:.0f}x fastjsonschema)")  # fmt: skip
    print(f"once per storing poll (an idle one pays neither): import fastjsonschema {import_ms('fastjsonschema', args.rounds):.1f} ms, compile "
          f"{statistics.median(compile_ms):.1f} ms; import jsonschema {import_ms('jsonschema', args.rounds):.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
