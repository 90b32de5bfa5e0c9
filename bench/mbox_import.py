"""mbox import: `memex poll` of a Takeout-shaped mbox vs a Maildir poll of the same mails (issue 33: rate >= 0.8x).

The mails are the IMAP benchmark's (``tests/email/bench_mail.py``: about 28 KiB on average, half text + HTML, every
tenth with a 50-100 KB attachment). The mbox is shaped like Google Takeout's ``All mail Including Spam and
Trash.mbox``: ``From <id>@xxx Tue Nov 01 10:00:00 +0000 2022`` separators, ``X-GM-THRID`` and ``X-Gmail-Labels``
in front of each CRLF mail, ``From `` body lines quoted. The Maildir holds the same mails, one file each in ``new/``.
Each round drains both into a fresh file store and state with one ``memex poll`` (search index on, as by default);
rounds alternate mbox, Maildir, ...; medians are printed with the ratio, the CPU per mail and each poll's peak RSS
(the mbox reader holds one 1 MiB chunk and the current mail, whatever the file's size).

Run: .venv/bin/python bench/mbox_import.py [--mails 100000] [--rounds 2] [--mbox-only] [--no-index]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import run
from tests.email.bench_mail import sample


def build(work: Path, n: int, maildir_too: bool = True) -> tuple[Path, Path]:
    """The Takeout-shaped mbox and the Maildir of the same ``n`` mails (``maildir_too=False``: the mbox only)."""
    box = work / "Takeout" / "Mail" / "All mail Including Spam and Trash.mbox"
    box.parent.mkdir(parents=True)
    maildir = work / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    with box.open("wb") as out:
        for i in range(n):
            raw = sample(i)
            if maildir_too:
                (maildir / "new" / f"{1_600_000_000 + i}.M{i}P1.bench").write_bytes(raw)
            quoted = b"\n".join(b">" + ln if ln.lstrip(b">").startswith(b"From ") else ln for ln in raw.split(b"\n"))
            gid = 1_700_000_000_000_000_000 + i
            out.write(f"From {gid}@xxx Tue Nov 01 10:00:00 +0000 2022\n".encode())
            out.write(f"X-GM-THRID: {gid - i % 7}\r\nX-Gmail-Labels: Inbox,Opened,Category Updates\r\n".encode())
            out.write(quoted + b"\n")
    return box, maildir


def drain(work: Path, kind: str, path: Path, n: int, index: bool = True) -> tuple[float, float, float]:
    """One poll draining ``path`` into a fresh store: (msg/s by wall, CPU ms per mail, peak RSS MiB)."""
    d = Path(tempfile.mkdtemp(dir=work))  # kept until the run ends (bench._common: deleting slows the next round)
    cfg = d / "config.toml"
    cfg.write_text(
        f'state_dir = "{d}/state"\nsearch_index = {str(index).lower()}\n[store]\nurl = "file://{d}/store"\n[sources.src]\ntype = "{kind}"\npath = "{path}"\nsettle_seconds = 0\n'
    )
    r = run([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "src", "--max-seconds", "100000"])
    assert r.returncode == 0, f"the {kind} poll failed"
    stored = sum(1 for _ in (d / "store" / "messages").rglob("*.json"))
    assert stored == n, f"{kind}: {stored} of {n} records stored"
    return n / r.wall, r.cpu / n * 1000, r.rss_mib


def main() -> None:
    """Build both, alternate rounds, print the table and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mails", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mbox-only", action="store_true", help="poll only the mbox (its rate and peak RSS at this size)")
    parser.add_argument("--no-index", action="store_true", help="polls with search_index = false (the readers alone)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        box, maildir = build(work, args.mails, not args.mbox_only)
        size_mib = box.stat().st_size / 2**20
        rows: dict[str, list[tuple[float, float, float]]] = {"mbox": [], "maildir": []}
        for _ in range(args.rounds):
            rows["mbox"].append(drain(work, "mbox", box, args.mails, not args.no_index))
            if not args.mbox_only:
                rows["maildir"].append(drain(work, "maildir", maildir, args.mails, not args.no_index))
        print(f"{args.mails:,} mails, mbox {size_mib:,.0f} MiB, search index {'off' if args.no_index else 'on'}; median of {args.rounds} alternated rounds; "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")  # fmt: skip
        print(f"{'':10}{'msg/s':>9}{'CPU ms/msg':>12}{'peak RSS MiB':>14}")
        for name, got in ((k, v) for k, v in rows.items() if v):
            print(f"{name:10}{statistics.median(g[0] for g in got):>9.0f}{statistics.median(g[1] for g in got):>12.3f}"
                  f"{max(g[2] for g in got):>14.1f}")  # fmt: skip
        if args.mbox_only:
            return
        ratio = statistics.median(g[0] for g in rows["mbox"]) / statistics.median(g[0] for g in rows["maildir"])
        print(f"rate mbox / maildir: {ratio:.2f} (goal >= 0.8); every round: mbox {[round(g[0]) for g in rows['mbox']]}, "
              f"maildir {[round(g[0]) for g in rows['maildir']]}")  # fmt: skip


if __name__ == "__main__":
    main()
