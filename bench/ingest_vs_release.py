"""This tree against a previous release and mbsync, in one run: the IMAP drain of ``bench/imap_vs_mbsync.py``.

The previous tree is a git ref (``--ref``: a release tag, a commit, ``main``) exported with ``git archive`` into a
temporary folder (the repository is not touched: no worktree, no checkout) and run with this venv's Python, its own
packages first (``bench/imap_vs_mbsync.py --before``). One run alternates, round after round, this tree with the
search index (**memex**), the previous tree (**before**), this tree with ``search_index = false`` (**no-index**),
mbsync and mbsync followed by ``notmuch new`` (**+notmuch**), then prints the medians and the ratios, ``memex /
before`` first: a change that costs ingest speed shows there. With ``--stages`` the CPU of each stage of a poll
(``bench/ingest_stages.py``: fetch, render, records, store, index) follows, this tree beside the previous one.

Run: .venv/bin/python bench/ingest_vs_release.py --ref REF [--messages 5000] [--rounds 3] [--stages]
(``make bench-ingest [BEFORE=REF]``; BEFORE defaults to the last release tag, else 8b5ddbb: docs/benchmarks.md)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def export(ref: str, into: Path) -> Path:
    """The tree of ``ref`` written into ``into`` (``git archive``); exits naming the ref when git cannot find it."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref], capture_output=True, check=False)
    if archive.returncode != 0:
        sys.exit(f"git archive {ref}: {archive.stderr.decode(errors='replace').strip()} (give --ref a tag, commit or branch)")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    """Export the previous tree, run the alternated drain (and with ``--stages`` the stage table), print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help="the previous release: a git tag, commit or branch")
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each row (alternated)")
    parser.add_argument("--stages", action="store_true", help="also the CPU of each stage, this tree beside the previous")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memex-release-") as tmp:
        before = export(args.ref, Path(tmp))
        print(f"previous tree: {args.ref} ({_describe(args.ref)})", flush=True)
        drain = [sys.executable, str(ROOT / "bench" / "imap_vs_mbsync.py"), "--messages", str(args.messages),
                 "--rounds", str(args.rounds), "--before", str(before), "--no-index", "--notmuch"]  # fmt: skip
        code = subprocess.run(drain, check=False).returncode
        if code == 0 and args.stages:
            stages = [sys.executable, str(ROOT / "bench" / "ingest_stages.py"), "--messages", str(min(args.messages, 2000)),
                      "--rounds", str(args.rounds), "--before", str(before)]  # fmt: skip
            code = subprocess.run(stages, check=False).returncode
    sys.exit(code)


def _describe(ref: str) -> str:
    """``ref``'s commit, short, and its subject line."""
    out = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %s", ref], capture_output=True, text=True, check=False)
    return out.stdout.strip()[:100] or "?"


if __name__ == "__main__":
    main()
