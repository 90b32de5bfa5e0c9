"""``memex search`` against ``notmuch search`` from the command line: the same real mails indexed by both.

The corpus of ``tests/email/test_search_vs_notmuch.py`` (every test mail with a Message-ID, one Maildir) is indexed
by ``notmuch new`` and by a memex poll; then for each query, ``--runs`` runs of ``memex search QUERY`` (the console
script, as a user types it; ``--install regular`` (the default) runs it as a regular install does, ``dev`` from this
venv's editable install, whose finder alone costs more than notmuch's whole search) and of ``notmuch search QUERY`` are alternated, output to /dev/null, and the medians of
their wall times compared: ratio = memex's median over notmuch's (the goal: <= 3x). Also the in-process search of
the same queries (parse and run on an open index), to show what of the command's time is start-up.

    python -m bench.search_vs_notmuch --runs 21
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import run_cli, write_config
from tests.email.notmuch_corpus import make_maildir, notmuch_index

QUERIES = ["test", "from:mikel", "from:barry OR from:jamis", "(test OR netscape) AND (from:doug OR from:mikel)",
           '"mail delivery"', "deliv*", "date:2009..2010", "subject:hello", "messages", "not (netscape or apache)"]  # fmt: skip


SCRIPT = """#!{python}
import re
import sys
from memex.cli.entry import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def installed(work: Path) -> str:
    """A ``memex`` as a regular (not editable) install runs it: a fresh venv whose site-packages puts memex and its
    dependencies on ``sys.path`` by a plain ``.pth`` (no editable finder to import), and pip's console script."""
    import site
    import venv

    venv.create(work / "venv", with_pip=False)
    lib = next((work / "venv" / "lib").glob("python3*")) / "site-packages"
    deps = [p for p in site.getsitepackages() if p.startswith(sys.prefix)]
    (lib / "memex-bench.pth").write_text("\n".join([str(Path(__file__).resolve().parent.parent), *deps]) + "\n")
    script = work / "venv" / "bin" / "memex"
    script.write_text(SCRIPT.format(python=work / "venv" / "bin" / "python"))
    script.chmod(0o755)
    return str(script)


def wall(cmd: list[str], env: dict[str, str]) -> float:
    """Seconds ``cmd`` took, its output thrown away."""
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> None:
    """Index the corpus with both, time each query alternately, print the medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21, help="runs of each command per query (alternated)")
    ap.add_argument("--install", choices=("regular", "dev"), default="regular",
                    help="regular: memex as pip installs it (default); dev: this venv's editable install")  # fmt: skip
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memex-bench-notmuch-"))
    dev = shutil.which("memex", path=str(Path(sys.executable).parent)) or "memex"
    memex = installed(work) if args.install == "regular" else dev
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; {args.install} install: {memex}", flush=True)
    try:
        maildir = make_maildir(work)
        nm_env = notmuch_index(work, maildir)
        cfg = write_config(work, {"mail": {"type": "maildir", "path": str(maildir), "settle_seconds": 0}})
        assert run_cli("poll", "mail", config=cfg).returncode == 0
        env = {k: v for k, v in os.environ.items() if k not in ("MEMEX_CONFIG", "MEMEX_DEBUG", "PYTHONDONTWRITEBYTECODE")}
        ratios, mine_all, theirs_all = [], [], []
        print(f"{len(list((maildir / 'cur').iterdir()))} mails; medians of {args.runs} alternated runs per query")
        for query in QUERIES:
            mine_cmd = [memex, "--config", str(cfg), "search", "-n", "1000", query]
            theirs_cmd = ["notmuch", "search", "--output=messages", query]
            wall(mine_cmd, env), wall(theirs_cmd, nm_env)  # warm-up: page cache, bytecode
            mine, theirs = [], []
            for i in range(args.runs):
                pair = [(mine, mine_cmd, env), (theirs, theirs_cmd, nm_env)]
                for times, cmd, e in pair if i % 2 == 0 else pair[::-1]:
                    times.append(wall(cmd, e))
            a, b = statistics.median(mine), statistics.median(theirs)
            ratios.append(a / b)
            mine_all += mine
            theirs_all += theirs
            print(f"  memex {a * 1000:6.1f} ms  notmuch {b * 1000:6.1f} ms  {a / b:4.2f}x  {query}", flush=True)
        a, b = statistics.median(mine_all), statistics.median(theirs_all)
        print(f"all queries: memex {a * 1000:.1f} ms, notmuch {b * 1000:.1f} ms: {a / b:.2f}x (per query {min(ratios):.2f}x to "
              f"{max(ratios):.2f}x)")  # fmt: skip
        in_process(work / "state", args.runs)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def in_process(state: Path, runs: int) -> None:
    """The same queries parsed and run on an open index: the search itself, without start-up."""
    from memex.search.index import SearchIndex
    from memex.search.query import parse

    with SearchIndex.open(state, create=False) as index:
        times = []
        for query in QUERIES:
            for _ in range(runs):
                t = time.perf_counter()
                parse(query).run(index.select, 1000)
                times.append(time.perf_counter() - t)
    print(f"in process: median {statistics.median(times) * 1000:.2f} ms over {len(times)} runs")


if __name__ == "__main__":
    main()
