"""The bad-input table's harness: one row is one bad input run through the real CLI, with the one line it must get.

Each area of the safety issue keeps its rows in its own ``tests/core/test_bad_inputs_<area>.py`` as a list of
``Case`` and parametrizes one test over them with ``run_case``. Across every row the harness asserts what holds for
all of them: the exit code, a fragment of the one expected line, no "internal error" and no traceback, no escape
sequence reaching the output raw, and nothing outside the configured paths written or changed in mode.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT, write_config

# What a terminal would act on: ESC, CSI (C1), and every other C0/C1 control but tab and newline.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass
class Case:
    """One bad input: how to make it, the command line, the exit code and a fragment of the one line expected.

    ``setup(tmp)`` prepares the world inside ``tmp`` and returns the config path (or None for no ``--config``);
    the default writes an iMessage source over a missing chat.db. ``owned`` names the paths (relative to ``tmp``)
    that the command may create or change; everything else under ``tmp`` must be left as it was. ``stream`` is where
    the line is expected ("stderr" or "stdout"); ``lines`` how many non-empty lines that stream may hold. ``wrap``:
    a command the CLI runs under (``setpriv ...`` for a root without its permission override).
    """

    id: str
    args: tuple[str, ...]
    code: int
    says: str
    setup: Callable[[Path], Path | None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    owned: tuple[str, ...] = ("state", "store")
    stream: str = "stderr"
    lines: int = 1
    input: str | None = None
    wrap: tuple[str, ...] = ()


def default_setup(tmp: Path) -> Path:
    """A config with one iMessage source over a chat.db that does not exist yet."""
    return write_config(tmp, {"imessage": {"type": "imessage", "db": str(tmp / "chat.db")}})


def _snapshot(tmp: Path, owned: tuple[str, ...]) -> dict[str, tuple[int, int, int]]:
    """Every path under ``tmp`` outside the owned ones: (mode, size, mtime_ns)."""
    keep = [tmp / o for o in owned]
    out: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(tmp):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in keep]
        for name in [*dirnames, *filenames]:
            path = here / name
            if path in keep:
                continue
            st = path.lstat()
            size = 0 if stat.S_ISDIR(st.st_mode) else st.st_size
            out[path.relative_to(tmp).as_posix()] = (st.st_mode, size, 0 if stat.S_ISDIR(st.st_mode) else st.st_mtime_ns)
    st = tmp.lstat()
    out["."] = (st.st_mode, 0, 0)
    return out


def run_case(case: Case, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run one row and assert what every row must hold; return the finished process for row-specific checks."""
    setup = case.setup or default_setup
    config = setup(tmp)
    before = _snapshot(tmp, (*case.owned, "config.toml"))
    cmd = [*case.wrap, sys.executable, "-m", "memex"]
    if config is not None:
        cmd += ["--config", str(config)]
    env = {k: v for k, v in os.environ.items() if k not in ("MEMEX_CONFIG", "MEMEX_DEBUG")}
    env.setdefault("HOME", str(tmp / "home"))
    env.update(case.env)
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(cmd + list(case.args), capture_output=True, text=True, timeout=120, env=env, cwd=tmp,
                         input=case.input if case.input is not None else "")  # fmt: skip
    text = out.stderr if case.stream == "stderr" else out.stdout
    where = f"[{case.id}] exit {out.returncode}\nstdout: {out.stdout[-2000:]}\nstderr: {out.stderr[-2000:]}"
    assert out.returncode == case.code, where
    assert case.says in text, where
    assert "internal error" not in out.stdout + out.stderr and "Traceback" not in out.stdout + out.stderr, where
    assert len([ln for ln in text.splitlines() if ln.strip()]) <= case.lines, where
    assert not RAW_CONTROL.search(out.stdout + out.stderr), where
    after = _snapshot(tmp, (*case.owned, "config.toml"))
    changed = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not changed, f"[{case.id}] changed outside the configured paths: {changed}"
    return out
