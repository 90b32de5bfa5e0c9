"""Running memex on a real pseudo-terminal (``os.openpty``), as a person at a terminal would."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.conftest import ROOT, patience


def start_pty(
    *args: str, config: Path, cols: int = 200, rows: int = 50, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``memex ARGS`` with stdin, stdout and stderr on a new pty of ``cols`` x ``rows``; (the process, the pty's master)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    base = env if env is not None else dict(os.environ)
    full = {k: v for k, v in base.items() if k not in ("MEMEX_CONFIG", "MEMEX_DEBUG", "COLUMNS", "LINES", "NO_COLOR")}
    full.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), *args],
                            stdin=slave, stdout=slave, stderr=slave, env=full, cwd=ROOT, start_new_session=True)  # fmt: skip
    os.close(slave)
    return proc, master


def finish_pty(proc: subprocess.Popen[bytes], master: int, what: str) -> tuple[int, str]:
    """Read the pty until the process has closed it, then wait for it; (exit code, what it printed, CR LF as LF)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + patience(120)
    try:
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"{what} did not finish on the pty: {b''.join(chunks)[-2000:]!r}"
            ready, _, _ = select.select([master], [], [], left)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every copy of the terminal's other side is closed
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=patience(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def run_pty(*args: str, config: Path, cols: int = 200, rows: int = 50) -> tuple[int, str]:
    """Run ``memex ARGS`` on a pty of ``cols`` x ``rows`` to its end; (exit code, what it printed)."""
    proc, master = start_pty(*args, config=config, cols=cols, rows=rows)
    return finish_pty(proc, master, f"memex {' '.join(args)}")
