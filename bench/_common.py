"""Helpers shared by the benchmarks: timed child processes with their own peak memory, a moto server.

Rounds that write many files keep them until the run ends (the run's temporary folder), never deleting one round's
files before the next round: on ext4 without a journal (this project's 2-core machine: a Firecracker VM), a new
file's inode is searched past every inode freed in the last 60 s (360 s while its inode table block is still dirty),
each skip a buffer lookup (``recently_deleted`` in fs/ext4/ialloc.c; ``perf`` shows it as 80% of the CPU of
creating files). After a round deleted 40,000 files, creating one cost 0.3-0.6 ms instead of 30 us, and a tool
that makes two files a mail paid for it twice. :func:`creation_us` prints what creating a file costs now.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FAKE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class Run:
    """One child process: wall seconds, CPU seconds (user+sys) and peak RSS in MiB; ``system``: the kernel's share of ``cpu``."""

    wall: float
    cpu: float
    rss_mib: float
    returncode: int
    system: float = 0.0


def run(cmd: list[str], env: dict[str, str] | None = None) -> Run:
    """Run ``cmd``: wall and CPU seconds and peak RSS of the command itself.

    Peak RSS comes from GNU time when it is installed: ``wait4`` on a child of this process can report
    the size of this process (Linux carries the pre-exec high-water mark into ``ru_maxrss``).
    """
    gnu_time = shutil.which("time", path="/usr/bin:/bin")
    # Measure what cron runs: bytecode cached (a developer shell may set PYTHONDONTWRITEBYTECODE).
    full_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    full_env.update({**FAKE_AWS, **(env or {})})
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        prefix = [gnu_time, "-o", out.name, "-f", "%U %S %M"] if gnu_time else []
        start = time.perf_counter()
        proc = subprocess.Popen([*prefix, *cmd], env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if gnu_time:
            fields = out.read().split()
            user, system, rss_kib = fields[-3:]
            return Run(wall, float(user) + float(system), int(rss_kib) / 1024, code, float(system))
    rss = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / 1024 / 1024
    return Run(wall, usage.ru_utime + usage.ru_stime, rss, code, usage.ru_stime)


def alternate(label: str, a: list[str], b: list[str], rounds: int, *, names: tuple[str, str] = ("a", "b"),
              env: dict[str, str] | None = None, before: list[str] | None = None) -> tuple[Run, Run]:  # fmt: skip
    """``a`` and ``b`` alternated ``rounds`` times (``before`` run untimed ahead of each), each round printed under
    ``names``; the median runs of each (peak RSS: the highest). A failing command ends the benchmark naming ``label``.
    """
    ra: list[Run] = []
    rb: list[Run] = []
    for i in range(rounds):
        for cmd, out in ((a, ra), (b, rb)) if i % 2 == 0 else ((b, rb), (a, ra)):
            if before is not None:
                run(before)
            r = run(cmd, env)
            if r.returncode != 0:
                raise SystemExit(f"{label}: {cmd[:6]} exited {r.returncode}")
            out.append(r)
        print(f"  round {i + 1}: {names[0]} {ra[-1].wall:.2f}s, {names[1]} {rb[-1].wall:.2f}s", flush=True)
    return _medians(ra), _medians(rb)


def _medians(runs: list[Run]) -> Run:
    return Run(statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs), max(r.rss_mib for r in runs), 0)


def creation_us(folder: Path, files: int = 500) -> float:
    """Microseconds to create (and close) one empty file, timed over ``files`` new files in a new folder under ``folder``.

    The files stay (see the module's docstring): printed at a benchmark's start and end, it shows whether file
    creation was cheap for the whole run, or slowed by files deleted just before it (wait a few minutes, run again).
    """
    where = Path(tempfile.mkdtemp(dir=folder, prefix="creation-"))
    start = time.perf_counter()
    for i in range(files):
        os.close(os.open(where / str(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return (time.perf_counter() - start) / files * 1e6


def median(runs: list[Run], attr: str) -> float:
    """Median of one measure over runs."""
    return float(statistics.median(getattr(r, attr) for r in runs))


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 server on a free loopback port, in its own process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("moto server did not start") from None
            time.sleep(0.1)
    try:
        yield url
    finally:
        proc.terminate()  # a moto holding 100,000 objects can take a while to exit: wait, then kill
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def write_records(root: Path, records: Iterable[tuple[str, bytes]]) -> None:
    """``(file name, bytes)`` records written straight into a file store's ``messages/bench/`` (0700 folders, 0600
    files; no fsync: a benchmark fixture)."""
    folder = root / "messages" / "bench"
    folder.mkdir(parents=True, mode=0o700)
    for p in (root, root / "messages"):
        p.chmod(0o700)
    for name, body in records:
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, body)
        os.close(fd)
