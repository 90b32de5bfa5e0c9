"""Running signal-cli: a child process watched while it runs, stopped when it hangs, outlives the poll, or waits.

Only one signal-cli may hold an account at a time. While another instance holds it (a running
``signal-cli daemon``, a bot, signal-cli-rest-api), signal-cli does not exit: it logs ``INFO
SignalAccount - Config file is in use by another instance, waiting…`` on stderr and blocks until the
lock is free (``SignalAccount.openFileChannel`` with ``waitForLock``); where it does not wait, it exits
with the same words. :func:`run` reads the child's stderr while it runs and stops it at that line.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

from memex.plugin import Deadline

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a signal-cli that must end
STARTUP = 30.0  # seconds signal-cli may take to start (a JVM) on top of its own timeout
WAITING = re.compile(rb"Config file is in use by another instance")
STDERR_KEPT = 1 << 16  # bytes of stderr read (the waiting line and any error come first)


@dataclass(frozen=True)
class Run:
    """How one signal-cli run ended: its exit code (None if it could not start), whether it was stopped, whether it
    said another instance holds the account (``busy``), the start of its stderr, and why it could not start."""

    code: int | None
    killed: bool
    busy: bool
    stderr: str
    start_error: str | None = None


def run(argv: list[str], out: int, deadline: Deadline, hang_after: float) -> Run:
    """Run ``argv`` with stdout to the file ``out``; stop it (its process group: SIGTERM, then SIGKILL) at ``deadline``,
    once it printed nothing for ``hang_after`` seconds (a hang), or as soon as its stderr says it waits for another
    instance's lock (it would block until that instance ends)."""
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            return Run(None, False, False, "", start_error=exc.strerror or type(exc).__name__)
        killed, busy = _wait(proc, out, err.fileno(), deadline, hang_after)
        text = os.pread(err.fileno(), STDERR_KEPT, 0)
    busy = busy or (not killed and proc.returncode != 0 and WAITING.search(text) is not None)
    return Run(proc.returncode, killed, busy, text.decode("utf-8", "replace"))


def _wait(proc: subprocess.Popen[bytes], out: int, err: int, deadline: Deadline, hang_after: float) -> tuple[bool, bool]:
    """Wait for ``proc``; returns (killed, busy)."""
    until = time.monotonic() + hang_after
    size = 0
    seen = b""  # stderr read so far (its start: the waiting line comes before anything is received)
    busy = False
    while True:
        if (grown := os.fstat(out).st_size) != size:  # still handing messages over: not hung
            size, until = grown, time.monotonic() + hang_after
        left = min(until - time.monotonic(), deadline.remaining())
        if deadline.stop.is_set():
            left = 0
        if len(seen) < STDERR_KEPT and os.fstat(err).st_size > len(seen):
            seen += os.pread(err, STDERR_KEPT - len(seen), len(seen))
            if WAITING.search(seen):
                busy = True
                left = 0
        try:
            proc.wait(timeout=max(0.0, min(left, 0.2)))
            return False, busy
        except subprocess.TimeoutExpired:
            if left > 0:
                continue
        for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        return True, busy
