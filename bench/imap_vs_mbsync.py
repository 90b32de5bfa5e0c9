"""IMAP: `memex poll` vs `mbsync` (isync) draining one mailbox of a local Dovecot (issue 25: >= 1.0x msg/s, <= 2x CPU/msg).

One throw-away Dovecot holds ``--messages`` mails (default 20,000; about 28 KiB on average, every tenth with
a ~75 KiB attachment; generated from a fixed seed, so every run reads the same bytes), written straight into
the user's Maildir as an MDA would and indexed by Dovecot before any timing (a warm-up SELECT and FETCH).
Then rounds alternate (``--rounds`` of each, medians reported):

- **A**: the real CLI, ``python -m memex --config CFG poll mail --max-seconds 100000``, with an ``imap`` source
  (``security = "none"``, loopback) and a file store, a fresh store and state per round; one poll drains the
  mailbox (the runner fetches batch after batch until caught up or out of time; the time limit is far away);
- **B**: ``mbsync -c RC bench`` with ``FSync yes``, ``SSLType None``, ``Sync Pull``, into a fresh Maildir.

Each round's wall time gives msg/s; its CPU is the child's own user+sys (``os.wait4``/GNU time: memex's
process alone, or mbsync alone), and the system (kernel) part of it is shown too, with the files each tool made a
mail (memex: the record, the ``.eml`` and attachments; mbsync: the mail). Dovecot's CPU (its process tree, from
/proc) serves both and is shown per message beside each. The load average is printed: the machine may be shared.

With ``--no-index`` a third memex row (**no-index**) runs this tree with ``search_index = false``: the same poll
without the search index (an informational row: the index is on by default). With ``--notmuch`` each mbsync round
is followed by ``notmuch new`` indexing its Maildir (a fresh database), and the row **+notmuch** is both together:
what the mail is searchable after, to set beside memex with its search index.

Every round's store or Maildir is kept until the run ends (about 2 GiB a round of all rows at 20,000 mails):
deleting one round's files would slow the next round's file creation (see :mod:`bench._common`). What creating a
file costs is printed at the start and the end; run again a few minutes after anything deleted many files.

Run: .venv/bin/python bench/imap_vs_mbsync.py [--messages 20000] [--rounds 3] [--before TREE] [--no-index] [--notmuch]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Run, creation_us, run
from bench.imap_ingest import fill
from tests.email.bench_mail import sample
from tests.servers import dovecot as dv

ROOT = Path(__file__).resolve().parent.parent


def warm(server: dv.Dovecot, user: str) -> int:
    """Have Dovecot index the new mail and read every message once (page cache warm); the message count.

    A read-write SELECT, as a mail client's: Dovecot moves the mail from ``new/`` to ``cur/`` and saves its index.
    Left in ``new/`` (only EXAMINE), every EXAMINE re-reads the whole folder: about 40 per memex poll here, and
    mbsync (which SELECTs) would move the mail in its first round, so the rounds after it would see another server.
    """
    conn = server.client(user)
    conn.select("INBOX")
    _, data = conn.uid("SEARCH", "ALL")
    uids = data[0].split()
    for start in range(0, len(uids), 1000):
        part = uids[start : start + 1000]
        conn.uid("FETCH", b"%s:%s" % (part[0], part[-1]), "(UID BODY.PEEK[])")
    conn.close()
    conn.logout()
    left = len(os.listdir(server.maildir(user) / "new"))
    assert left == 0, f"{left} mails still in new/ after a read-write SELECT"
    return len(uids)


def dovecot_cpu(server: dv.Dovecot) -> float:
    """CPU seconds of Dovecot's process tree so far: each live process's own and its reaped children's."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / tick)  # ppid; utime stime cutime cstime
    tree, total, grew = {server.proc.pid}, 0.0, True
    while grew:
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    for pid in tree:
        total += stats.get(pid, (0, 0.0))[1]
    return total


def memex_round(
    work: Path, server: dv.Dovecot, user: str, n: int, tree: Path | None = None, *, index: bool = True
) -> tuple[Run, float, int]:
    """One `memex poll` draining the mailbox into a fresh file store and state; (the child's run, Dovecot CPU s, files made).

    ``tree``: run the memex of that source tree instead (``python -m memex`` started in it finds its packages first).
    ``index=False``: with ``search_index = false`` (no search index kept), to show what the index costs.
    """
    d = Path(tempfile.mkdtemp(dir=work))  # kept until the run ends (module docstring)
    cfg = d / "config.toml"
    cfg.write_text(
        ("" if index else "search_index = false\n") + f'state_dir = "{d}/state"\n[store]\nurl = "file://{d}/store"\n'
        f'[sources.mail]\ntype = "imap"\nhost = "127.0.0.1"\nport = {server.port}\nsecurity = "none"\n'
        f'user = "{user}"\npassword_env = "BENCH_IMAP_PASSWORD"\nmailboxes = ["INBOX"]\n'
    )
    before = dovecot_cpu(server)
    with contextlib.chdir(tree or ROOT):
        command = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "mail", "--max-seconds", "100000"]
        r = run(command, env={"BENCH_IMAP_PASSWORD": dv.PASSWORD})
    spent = dovecot_cpu(server) - before
    assert r.returncode == 0, f"memex poll exited {r.returncode}; see {d}/state/logs/mail.jsonl"
    files = [f for f in (d / "store").rglob("*") if f.is_file() and ".memex-tmp" not in f.parts]
    stored = sum(1 for f in files if f.suffix == ".eml")
    assert stored == n, f"memex stored {stored} of {n} mails"
    return r, spent, len(files)


def mbsync_round(work: Path, server: dv.Dovecot, user: str, n: int, *, notmuch: bool = False) -> tuple[Run, float, int, Run | None]:
    """One `mbsync` pulling the mailbox into a fresh Maildir (FSync yes); (the child's run, Dovecot CPU s, files made,
    and with ``notmuch`` the run of ``notmuch new`` indexing that Maildir afterwards into a fresh database)."""
    d = Path(tempfile.mkdtemp(dir=work))  # kept until the run ends (module docstring)
    (d / "mail").mkdir()
    rc = d / "mbsyncrc"
    rc.write_text(
        f"FSync yes\n\nIMAPAccount bench\nHost 127.0.0.1\nPort {server.port}\nUser {user}\nPass {dv.PASSWORD}\n"
        "SSLType None\nAuthMechs LOGIN\n\nIMAPStore bench-far\nAccount bench\n\n"
        f"MaildirStore bench-near\nPath {d}/mail/\nInbox {d}/mail/INBOX\n\n"
        "Channel bench\nFar :bench-far:\nNear :bench-near:\nPatterns INBOX\nSync Pull\nCreate Near\nSyncState *\n"
    )
    rc.chmod(0o600)
    before = dovecot_cpu(server)
    r = run(["mbsync", "-q", "-c", str(rc), "bench"])
    spent = dovecot_cpu(server) - before
    assert r.returncode == 0, f"mbsync exited {r.returncode}: run it by hand with {rc}"
    got = sum(len(os.listdir(d / "mail" / "INBOX" / sub)) for sub in ("cur", "new"))
    assert got == n, f"mbsync stored {got} of {n} mails"
    if not notmuch:
        return r, spent, got, None
    config = d / "notmuch-config"
    config.write_text(f"[database]\npath={d}/mail\n[new]\ntags=inbox;unread\n[search]\nexclude_tags=\n")
    indexed = run(["notmuch", "new", "--quiet"], env={"NOTMUCH_CONFIG": str(config)})
    assert indexed.returncode == 0, f"notmuch new exited {indexed.returncode}: run it with NOTMUCH_CONFIG={config}"
    return r, spent, got, indexed


def main() -> None:
    """Fill the Dovecot, alternate memex and mbsync rounds, print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each tool (alternated)")
    parser.add_argument("--before", type=Path, help="also time the memex of this source tree (e.g. a checkout of main), same rounds")
    parser.add_argument("--no-index", action="store_true", help="also time this memex with search_index = false (row no-index)")
    parser.add_argument("--notmuch", action="store_true", help="also index each mbsync Maildir with notmuch new (row +notmuch)")
    args = parser.parse_args()
    for tool, package in (("mbsync", "isync"), ("notmuch", "notmuch")):
        if (tool == "mbsync" or args.notmuch) and shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed: apt-get install {package}")
    n = args.messages
    server = dv.start()
    try:
        with tempfile.TemporaryDirectory(prefix="memex-bench-") as tmp:
            work = Path(tmp)
            user = server.new_user()
            size = fill(server, user, n, sample)
            assert warm(server, user) == n
            rounds: dict[str, list[tuple[Run, float, int]]] = {"memex": [], "mbsync": []}
            for name, wanted in (("before", args.before is not None), ("no-index", args.no_index), ("+notmuch", args.notmuch)):
                if wanted:
                    rounds[name] = []
            loads = [os.getloadavg()[0]]
            creation = [creation_us(work)]
            for _ in range(args.rounds):
                rounds["memex"].append(memex_round(work, server, user, n))
                r, spent, made, indexed = mbsync_round(work, server, user, n, notmuch=args.notmuch)
                rounds["mbsync"].append((r, spent, made))
                if indexed is not None:
                    both = Run(r.wall + indexed.wall, r.cpu + indexed.cpu, max(r.rss_mib, indexed.rss_mib), 0, r.system + indexed.system)
                    rounds["+notmuch"].append((both, spent, made))
                if args.before is not None:
                    rounds["before"].append(memex_round(work, server, user, n, args.before))
                if args.no_index:
                    rounds["no-index"].append(memex_round(work, server, user, n, index=False))
                loads.append(os.getloadavg()[0])
            creation.append(creation_us(work))
        print(f"IMAP drain of {n:,} mails ({size / n / 1024:.1f} KiB average, {size / 2**20:,.0f} MiB) from one local Dovecot,")
        print(f"median of {args.rounds} alternated rounds each; {os.cpu_count()} cores, load average {min(loads):.2f}-{max(loads):.2f};")
        print(f"creating a file took {creation[0]:.0f} us at the start, {creation[1]:.0f} us at the end (rounds keep their files)")
        print(
            f"{'':9}{'msg/s':>9}{'CPU ms/msg':>12}{'of it sys':>11}{'files/msg':>11}{'Dovecot ms/msg':>16}{'MiB/s':>8}   every round (msg/s)"
        )
        med: dict[str, tuple[float, float]] = {}
        for name, got in rounds.items():
            rates = [n / r.wall for r, _, _ in got]
            cpu = statistics.median(r.cpu / n * 1000 for r, _, _ in got)
            system = statistics.median(r.system / n * 1000 for r, _, _ in got)
            files = statistics.median(f / n for _, _, f in got)
            dove = statistics.median(s / n * 1000 for _, s, _ in got)
            rate = statistics.median(rates)
            med[name] = (rate, cpu)
            shown = ", ".join(f"{x:,.0f}" for x in rates)
            print(f"{name:9}{rate:>9,.0f}{cpu:>12.3f}{system:>11.3f}{files:>11.2f}{dove:>16.3f}{rate * size / n / 2**20:>8.1f}   {shown}")
        speed = med["memex"][0] / med["mbsync"][0]
        cost = med["memex"][1] / med["mbsync"][1]
        print(f"memex / mbsync: {speed:.2f}x the msg/s (goal >= 1.0), {cost:.2f}x the CPU per message (goal <= 2.0)")
        for label, mine, theirs in (("memex / before", "memex", "before"), ("before / mbsync", "before", "mbsync"),
                                    ("no-index / mbsync", "no-index", "mbsync"), ("memex / mbsync+notmuch", "memex", "+notmuch"),
                                    ("before / mbsync+notmuch", "before", "+notmuch")):  # fmt: skip
            if mine in med and theirs in med:
                (rate, cpu), (base_rate, base_cpu) = med[mine], med[theirs]
                print(f"{label}: {rate / base_rate:.2f}x the msg/s, {cpu / base_cpu:.2f}x the CPU per message")
    finally:
        dv.stop(server)


if __name__ == "__main__":
    main()
