"""Where a poll's CPU goes, by stage, in this tree and a previous one: an IMAP drain and a Maildir poll of the same mails.

The mails are ``bench/imap_vs_mbsync.py``'s (``tests.email.bench_mail.sample``: ~28 KiB on average, half with an HTML
alternative, every tenth with an attachment). One throw-away Dovecot holds ``--messages`` of them; a Maildir holds the
same files. Each round runs ``memex poll`` (search index on, file store, fresh store and state) of each tree under
:mod:`bench.stage_timer`, the trees alternated, first over IMAP and then over the Maildir; the table gives the
median CPU milliseconds a mail of each stage (``fetch``, ``render``, ``records``, ``store``, ``index``, ``other``)
and of the whole process, and the ratio of this tree to the ``--before`` tree. The stage timer's wrappers cost a
little themselves (a few microseconds a call), alike in both trees: compare the trees, not these figures with
``bench/imap_vs_mbsync.py``'s.

Run: .venv/bin/python bench/ingest_stages.py --before TREE [--messages 2000] [--rounds 3] [--no-maildir] [--no-imap] [--no-index]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.imap_ingest import fill
from bench.imap_vs_mbsync import warm
from tests.email.bench_mail import sample
from tests.servers import dovecot as dv

ROOT = Path(__file__).resolve().parent.parent
TIMER = Path(__file__).resolve().parent / "stage_timer.py"
ORDER = ("fetch", "render", "records", "store", "index", "other")


def poll(work: Path, tree: Path, source: str, *, index: bool = True) -> dict[str, float]:
    """One timed ``memex poll mail`` of ``tree`` with the source table ``source``; CPU seconds by stage and ``total``."""
    d = Path(tempfile.mkdtemp(dir=work))  # kept until the run ends (bench._common: deleting slows file creation)
    cfg = d / "config.toml"
    cfg.write_text(("" if index else "search_index = false\n") + f'state_dir = "{d}/state"\n[store]\nurl = "file://{d}/store"\n'
                   f"[sources.mail]\n{source}")  # fmt: skip
    out = d / "stages.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["BENCH_IMAP_PASSWORD"] = dv.PASSWORD
    with contextlib.chdir(tree):
        command = [sys.executable, str(TIMER), str(out), str(tree), "--", "--config", str(cfg), "poll", "mail",
                   "--max-seconds", "100000"]  # fmt: skip
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    assert done.returncode == 0, f"memex poll of {tree} exited {done.returncode}: {done.stderr.decode()[-2000:]}"
    got = json.loads(out.read_text())
    for stage in got.get("missing", []):  # timed as 0 and left in "other": say so rather than show a false saving
        print(f"warning: {tree} has none of the functions of stage {stage!r} (bench/stage_timer.py STAGES)", file=sys.stderr)
    stages = dict(got["stages"])
    stages["other"] = got["cpu"] - sum(stages.values())
    stages["total"] = got["cpu"]
    return stages


def table(title: str, n: int, rounds: dict[str, list[dict[str, float]]]) -> None:
    """Print the median CPU ms a mail of each stage of each tree, and this tree's ratio to the one before."""
    print(title)
    names = list(rounds)
    print(f"{'stage':10}" + "".join(f"{name:>14}" for name in names) + (f"{'ratio':>8}" if len(names) == 2 else ""))
    for stage in (*ORDER, "total"):
        values = [statistics.median(r[stage] for r in rounds[name]) / n * 1000 for name in names]
        ratio = f"{values[0] / values[1]:>8.2f}" if len(values) == 2 and values[1] > 0.0005 else ""
        print(f"{stage:10}" + "".join(f"{v:>14.3f}" for v in values) + ratio)


def main() -> None:
    """Fill a Dovecot and a Maildir, alternate the trees' timed polls, print the stage tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="the previous tree (a checkout) to set beside this one")
    parser.add_argument("--no-imap", action="store_true", help="time the Maildir poll only")
    parser.add_argument("--no-maildir", action="store_true", help="time the IMAP drain only")
    parser.add_argument("--no-index", action="store_true", help="poll with search_index = false (what the index costs is left out)")
    args = parser.parse_args()
    n = args.messages
    trees = {"this tree": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="memex-stages-") as tmp:
        work = Path(tmp)
        results: list[tuple[str, dict[str, list[dict[str, float]]]]] = []
        if not args.no_imap:
            server = dv.start()
            try:
                user = server.new_user()
                fill(server, user, n, sample)
                assert warm(server, user) == n
                source = (f'type = "imap"\nhost = "127.0.0.1"\nport = {server.port}\nsecurity = "none"\nuser = "{user}"\n'
                          'password_env = "BENCH_IMAP_PASSWORD"\nmailboxes = ["INBOX"]\n')  # fmt: skip
                got: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
                for _ in range(args.rounds):
                    for name, tree in trees.items():
                        got[name].append(poll(work, tree, source, index=not args.no_index))
                    loads.append(os.getloadavg()[0])
                results.append((f"IMAP drain of {n:,} mails from a local Dovecot", got))
            finally:
                dv.stop(server)
        if not args.no_maildir:
            maildir = work / "Maildir"
            for sub in ("cur", "new", "tmp"):
                (maildir / sub).mkdir(parents=True)
            for i in range(n):
                (maildir / "cur" / f"{1_600_000_000 + i}.M{i}P1.bench:2,S").write_bytes(sample(i))
            source = f'type = "maildir"\npath = "{maildir}"\nsettle_seconds = 0\n'
            got = {name: [] for name in trees}
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    got[name].append(poll(work, tree, source, index=not args.no_index))
                loads.append(os.getloadavg()[0])
            results.append((f"Maildir poll of the same {n:,} mails", got))
    print(f"CPU ms a mail by stage, median of {args.rounds} alternated rounds; {os.cpu_count()} cores, "
          f"load average {min(loads):.2f}-{max(loads):.2f}")  # fmt: skip
    for title, got in results:
        table(title, n, got)


if __name__ == "__main__":
    main()
