"""People at the size of a real address book: a person in a query against a plain search, and ``memex people``.

A store of ``--messages`` generated records (bench/search.py's, senders ``person0..199@example.com``) is indexed
once; a contacts file of ``--cards`` vCards (a name, a mobile number and an address each; the first 200 are the
senders, card 7 is "Anna Berg") is configured under ``[people]``. Each measure is a child ``memex`` process,
alternated with its baseline ``--rounds`` times after one untimed warm-up (which also fills the card cache), medians:

1. ``memex search from:"Anna Berg"``, ``with:anna-berg`` and ``memex people show anna-berg`` against the plain
   ``memex search w1`` (the issue's bound: at most 2x at 20,000 cards);
2. the same first search on a cold card cache (``<state_dir>/people`` removed before each round): what the first
   command after a change of the contacts file costs;
3. ``memex people`` (everyone listed, output to /dev/null) at ``--big-cards`` cards (the bound: 5 s at 200,000).

    python -m bench.people --cards 20000 --big-cards 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import alternate, run
from bench.search import config, generated


def write_cards(path: Path, n: int) -> None:
    """``n`` vCards 3.0: card 7 is Anna Berg (person7@example.com), the first 200 carry the store's senders."""
    with path.open("w") as fh:
        for i in range(n):
            name = "Anna Berg" if i == 7 else f"Given{i} Family{i}"
            fh.write(f"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:{name}\r\nN:Family{i};Given{i};;;\r\n"
                     f"TEL;TYPE=CELL:+49 170 {i:07d}\r\nEMAIL;TYPE=INTERNET:person{i}@example.com\r\nEND:VCARD\r\n")  # fmt: skip


def setup(work: Path, messages: int, cards: int) -> Path:
    """The store of ``messages`` records indexed, ``cards`` cards configured; the config's path."""
    d, store = generated(work, messages)
    vcf = d / f"contacts-{cards}.vcf"
    if not vcf.exists():
        write_cards(vcf, cards)
    folder = d / f"cards-{cards}"
    folder.mkdir(exist_ok=True)
    cfg = config(folder, store, "")
    cfg.write_text(cfg.read_text() + f'[people]\nvcards = ["{vcf}"]\nregion = "DE"\n')
    if not (folder / "state" / "search").exists():
        assert run([sys.executable, "-m", "memex", "--config", str(cfg), "index", "rebuild"]).returncode == 0
    return cfg


def queries(work: Path, messages: int, cards: int, rounds: int) -> None:
    """Parts 1 and 2 at ``cards`` cards."""
    cfg = setup(work, messages, cards)
    memex = [sys.executable, "-m", "memex", "--config", str(cfg)]
    plain = [*memex, "search", "w1"]
    print(f"\n{cards:,} cards, {messages:,} messages", flush=True)
    for label, cmd in (("from:\"Anna Berg\"", [*memex, "search", 'from:"Anna Berg"']), ("with:anna-berg", [*memex, "search", "with:anna-berg"]),
                       ("people show anna-berg", [*memex, "people", "show", "anna-berg"])):  # fmt: skip
        run(cmd)  # warm-up: the card cache filled
        person, base = alternate(label, cmd, plain, rounds, names=("person", "plain"))
        print(f"{label}: {person.wall:.3f}s vs plain search {base.wall:.3f}s: {person.wall / base.wall:.2f}x "
              f"(CPU {person.cpu:.3f}s vs {base.cpu:.3f}s: {person.cpu / base.cpu:.2f}x)", flush=True)  # fmt: skip
    cold, base = alternate("cold", [*memex, "search", 'from:"Anna Berg"'], plain, rounds, names=("cold", "plain"),
                           before=["rm", "-rf", str(cfg.parent / "state" / "people")])  # fmt: skip
    print(f'from:"Anna Berg" on a cold card cache: {cold.wall:.3f}s vs plain search {base.wall:.3f}s: {cold.wall / base.wall:.2f}x '
          f"(CPU {cold.cpu:.2f}s)")  # fmt: skip


def listing(work: Path, messages: int, cards: int, rounds: int) -> None:
    """Part 3: ``memex people`` at ``cards`` cards, warm and cold card cache."""
    cfg = setup(work, messages, cards)
    memex = [sys.executable, "-m", "memex", "--config", str(cfg)]
    shutil.rmtree(cfg.parent / "state" / "people", ignore_errors=True)  # cold: every card parsed
    first = run([*memex, "people"])
    print(
        f"\nmemex people, {cards:,} cards, cold card cache: {first.wall:.2f}s (CPU {first.cpu:.2f}s), peak RSS {first.rss_mib:.0f} MiB",
        flush=True,
    )
    warm, base = alternate("people", [*memex, "people"], [*memex, "search", "w1"], rounds, names=("people", "plain"))
    print(
        f"memex people, {cards:,} cards, warm: {warm.wall:.2f}s, CPU {warm.cpu:.2f}s (plain search {base.wall:.3f}s), peak RSS {warm.rss_mib:.0f} MiB"
    )


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--cards", type=int, default=20000)
    ap.add_argument("--big-cards", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="keep generated stores here (reused on the next run)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", flush=True)
    work = args.keep or Path(tempfile.mkdtemp(prefix="memex-bench-people-"))
    try:
        queries(work, args.messages, args.cards, args.rounds)
        listing(work, args.messages, args.big_cards, args.rounds)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
