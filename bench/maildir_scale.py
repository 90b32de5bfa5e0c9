"""Maildir at scale: `memex poll` draining a 100,000-mail folder vs a 10,000-mail one (issue 25: rate >= 0.8x).

Each size is a real Maildir (one file per mail in ``new/``, ~2 KB, unique Message-IDs) drained into the
file store by one ``memex poll`` (``--max-seconds`` large enough to finish), a fresh state and store per
round, kept until the run ends (deleting one round's files slows the next one's: :mod:`bench._common`);
rounds alternate small, large, small, large... and medians are reported. A poll that re-listed the folder
for every batch of 500 was quadratic (issue 25: 4x the mail took 5.7-8.3x the time); one listing per poll
makes the rate independent of the folder's size. Also printed: how long one listing takes at each size
(in process, ``MaildirPoller._list``), and how many ``getdents64`` calls a poll made when ``strace`` is
installed (``--strace``: one more run of the small size).

Run: .venv/bin/python bench/maildir_scale.py [--small 10000] [--large 100000] [--rounds 2]
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

from bench._common import run
from pollers.email.maildir.poller import MaildirPoller

ROOT = Path(__file__).resolve().parent.parent

BODY = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt. " * 18).encode()


def sample(i: int) -> bytes:
    """A plausible small mail (~2 KB) with its own Message-ID."""
    head = (
        f"From: Sender {i % 97} <s{i % 97}@example.com>\r\nTo: me@example.com\r\nSubject: scale {i}\r\n"
        f"Date: Tue, 01 Nov 2022 10:{i % 60:02d}:00 +0000\r\nMessage-ID: <scale-{i}@example.com>\r\n"
        "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
    )
    return head.encode() + BODY + b"\r\n"


def fill(root: Path, n: int) -> None:
    """A Maildir at ``root`` with ``n`` mails in new/ (delivered in order, so ctimes ascend)."""
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / "new" / f"{1_600_000_000 + i}.M{i}P1.scale").write_bytes(sample(i))


def config(d: Path, maildir: Path) -> Path:
    """A config: the file store and state in ``d``, the Maildir as source ``md`` (no settle wait)."""
    cfg = d / "config.toml"
    cfg.write_text(
        f'state_dir = "{d}/state"\n[store]\nurl = "file://{d}/store"\n'
        f'[sources.md]\ntype = "maildir"\npath = "{maildir}"\nsettle_seconds = 0\n'
    )
    return cfg


def drain(work: Path, maildir: Path, n: int) -> tuple[float, float]:
    """One poll draining the whole Maildir into a fresh store: (msg/s by wall, CPU ms per message)."""
    d = Path(tempfile.mkdtemp(dir=work))  # kept until the run ends: deleting it would slow the next round (bench._common)
    cfg = config(d, maildir)
    r = run([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "md", "--max-seconds", "100000"])
    assert r.returncode == 0, "the poll failed"
    stored = sum(1 for _ in (d / "store").rglob("*.json"))
    assert stored >= n, f"only {stored} of {n} records stored"
    return n / r.wall, r.cpu / n * 1000


def listing_ms(maildir: Path) -> float:
    """Median wall ms of one full listing of the folder (5 runs)."""
    poller = MaildirPoller("md", maildir, ("INBOX",), 0)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        poller._list("INBOX")
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def getdents(work: Path, maildir: Path) -> int | None:
    """How many getdents64 calls one poll of the Maildir makes (strace), or None without strace."""
    if shutil.which("strace") is None:
        return None
    d = Path(tempfile.mkdtemp(dir=work))
    try:
        cfg = config(d, maildir)
        out = d / "trace"
        cmd = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "md", "--max-seconds", "100000"]
        subprocess.run(["strace", "-f", "-c", "-e", "trace=getdents64", "-o", str(out), *cmd], cwd=ROOT, capture_output=True, check=True)
        for line in out.read_text().splitlines():
            if line.strip().endswith("getdents64"):
                return int(line.split()[3])
        return 0
    finally:
        shutil.rmtree(d)


def main() -> None:
    """Build both folders, alternate rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--strace", action="store_true", help="also count getdents64 calls of a poll (small size)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sizes = {"small": args.small, "large": args.large}
        dirs = {name: work / f"Maildir-{name}" for name in sizes}
        for name, n in sizes.items():
            fill(dirs[name], n)
        rates: dict[str, list[float]] = {name: [] for name in sizes}
        cpus: dict[str, list[float]] = {name: [] for name in sizes}
        for _ in range(args.rounds):
            for name, n in sizes.items():
                rate, cpu = drain(work, dirs[name], n)
                rates[name].append(rate)
                cpus[name].append(cpu)
        print(f"Maildir drain, median of {args.rounds} alternated rounds; load average {os.getloadavg()[0]:.2f}")
        print(f"{'':18}{'mails':>9}{'msg/s':>9}{'CPU ms/msg':>12}{'1 listing ms':>14}")
        for name, n in sizes.items():
            med = statistics.median(rates[name])
            print(f"{name:18}{n:>9,}{med:>9.0f}{statistics.median(cpus[name]):>12.3f}{listing_ms(dirs[name]):>14.1f}")
        ratio = statistics.median(rates["large"]) / statistics.median(rates["small"])
        print(f"rate large / small: {ratio:.2f} (goal >= 0.8); every round: small {rates['small']}, large {rates['large']}")
        if args.strace:
            print(f"getdents64 calls in one poll of {args.small:,} mails: {getdents(work, dirs['small'])}")


if __name__ == "__main__":
    main()
