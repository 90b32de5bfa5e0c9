"""``memex search`` against ``notmuch search`` from the command line: the same real mails indexed by both.

The corpus of ``tests/email/test_search_vs_notmuch.py`` (every test mail with a Message-ID, one Maildir) is indexed
by ``notmuch new`` and by a memex poll; then for each query, ``--runs`` runs of ``memex search QUERY`` (the console
script, as a user types it; ``--install regular`` (the default) runs it as a regular install does, ``dev`` from this
venv's editable install, whose finder alone costs more than notmuch's whole search) and of ``notmuch search QUERY`` are alternated, output to /dev/null, and the medians of
their wall (and CPU) times compared: ratio = memex's median over notmuch's (the goal: <= 3x); the same Python
interpreter running nothing is timed alongside, the floor any Python command starts from, and the same search
through click (``--debug`` sends it there: the way every search went before the plain path). Also the in-process search of
the same queries (parse and run on an open index), to show what of the command's time is start-up.

Through the server (issue 42 §4): the same search while a read socket listens (:func:`memex.read.socket.serve_socket`,
what ``memex watch`` and ``memex serve`` run, here in this process: its CPU is not in the command's); the other memex
rows run with ``MEMEX_NO_SERVER=1``. And the forms (``--json``, ``-n 5``, ``--``) of one query without a server,
each against the plain form (the goal: within 10%).

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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import run_cli, write_config
from tests.email.notmuch_corpus import make_maildir, notmuch_index

QUERIES = ["test", "from:mikel", "from:barry OR from:jamis", "(test OR netscape) AND (from:doug OR from:mikel)",
           '"mail delivery"', "deliv*", "date:2009..2010", "subject:hello", "messages", "not (netscape or apache)"]  # fmt: skip


SCRIPT = """#!{python}
import re
import sys
from memex_thin import main
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


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds ``cmd`` took, wall and CPU (user + system), its output thrown away."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Index the corpus with both, time each query alternately, print the medians and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21, help="runs of each command per query (alternated)")
    ap.add_argument("--install", choices=("regular", "dev"), default="regular",
                    help="regular: memex as pip installs it (default); dev: this venv's editable install")  # fmt: skip
    ap.add_argument("--forms-only", action="store_true", help="only the forms of one search, without a server")
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
        if args.forms_only:
            forms(memex, cfg, {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"} | {"MEMEX_NO_SERVER": "1"}, args.runs)
            return
        served = {
            k: v for k, v in os.environ.items() if k not in ("MEMEX_CONFIG", "MEMEX_DEBUG", "PYTHONDONTWRITEBYTECODE", "MEMEX_NO_SERVER")
        }
        env = {**served, "MEMEX_NO_SERVER": "1"}
        ratios: list[float] = []
        every: dict[str, list[tuple[float, float]]] = {"memex": [], "notmuch": [], "python": [], "click": [], "server": []}
        server = _server(cfg)
        floor = [str(Path(memex).with_name("python")), "-c", "pass"]
        print(f"{len(list((maildir / 'cur').iterdir()))} mails; medians of {args.runs} alternated runs per query (wall, cpu)")
        for query in QUERIES:
            cmds = {"memex": ([memex, "--config", str(cfg), "search", "-n", "1000", query], env),
                    "notmuch": (["notmuch", "search", "--output=messages", query], nm_env), "python": (floor, env),
                    "click": ([memex, "--config", str(cfg), "--debug", "search", "-n", "1000", query], env),
                    "server": ([memex, "--config", str(cfg), "search", "-n", "1000", query], served)}  # fmt: skip
            for cmd, e in cmds.values():
                wall(cmd, e)  # warm-up: page cache, bytecode
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
            for i in range(args.runs):
                for name in list(cmds) if i % 2 == 0 else list(cmds)[::-1]:
                    times[name].append(wall(*cmds[name]))
            for k, v in times.items():
                every[k] += v
            a, b, sv = (statistics.median(w for w, _ in times[k]) for k in ("memex", "notmuch", "server"))
            ca, cb = (statistics.median(c for _, c in times[k]) for k in ("memex", "notmuch"))
            ratios.append(a / b)
            print(f"  memex {a * 1000:6.1f} ms (cpu {ca * 1000:5.1f})  notmuch {b * 1000:6.1f} ms (cpu {cb * 1000:5.1f})  "
                  f"{a / b:5.2f}x  through the server {sv * 1000:6.1f} ms {sv / b:5.2f}x  {query}", flush=True)  # fmt: skip
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in every.items()}
        (a, ca), (b, cb), (p, cp), (k, ck), (sv, cs) = med["memex"], med["notmuch"], med["python"], med["click"], med["server"]
        print(f"all queries: memex {a * 1000:.1f} ms (cpu {ca * 1000:.1f}), notmuch {b * 1000:.1f} ms (cpu {cb * 1000:.1f}): "
              f"{a / b:.2f}x wall, {ca / cb:.2f}x cpu (per query {min(ratios):.2f}x to {max(ratios):.2f}x); "
              f"the same Python doing nothing: {p * 1000:.1f} ms (cpu {cp * 1000:.1f}), {p / b:.2f}x notmuch; "
              f"the same search through click (--debug, the path before): {k * 1000:.1f} ms (cpu {ck * 1000:.1f}), {k / b:.2f}x; "
              f"through the server: {sv * 1000:.1f} ms (cpu {cs * 1000:.1f}, the command's), {sv / b:.2f}x notmuch")  # fmt: skip
        server.close()
        forms(memex, cfg, env, args.runs)
        in_process(work / "state", args.runs)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _server(cfg: Path) -> Any:
    """The read socket of ``cfg``'s archive, served from this process (what ``memex watch`` runs)."""
    from memex import config as memex_config
    from memex.cli.find import render_line
    from memex.read.archive import Archive
    from memex.read.socket import serve_socket

    loaded = memex_config.load(cfg)
    return serve_socket(Archive(loaded, follow_people=True), loaded.state_dir, render_line)


FORMS = {"plain": ["test"], "--json": ["--json", "test"], "-n 5": ["-n", "5", "test"], "--": ["--", "test"]}


def forms(memex: str, cfg: Path, env: dict[str, str], runs: int) -> None:
    """Each form of one search without a server, alternated, against the plain form (the goal: within 10%); CPU too,
    the steadier figure on a loaded machine."""
    cmds = {name: [memex, "--config", str(cfg), "search", *words] for name, words in FORMS.items()}
    for cmd in cmds.values():
        wall(cmd, env)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for i in range(runs * 2):
        for name in list(cmds) if i % 2 == 0 else list(cmds)[::-1]:
            times[name].append(wall(cmds[name], env))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    pw, pc = med["plain"]
    shown = ", ".join(f"{k} {w * 1000:.1f} ms ({w / pw:.2f}x; cpu {c * 1000:.1f} ms, {c / pc:.2f}x)" for k, (w, c) in med.items())
    print(f"forms without a server (medians of {runs * 2}): {shown}", flush=True)


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
