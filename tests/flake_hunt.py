"""The flake hunt: run every timing-sensitive test many times, idle and under CPU load, and count failures.

A test is timing-sensitive when its body races something against work in progress: it sends a signal or
kills a process, uses the test hold (``Gate``), sets a time limit (``--max-seconds``, ``max_seconds``), runs
``memex watch`` or starts threads. They are found by reading the test files (no list to keep in step).

    python tests/flake_hunt.py [--rounds 20] [--load both|idle|busy] [-n JOBS] [--list]

Each round runs all of them once (``pytest -n JOBS``); ``--load busy`` runs the same rounds with one busy
process per core beside them (``stress-ng --cpu N`` if installed, else Python busy loops). It prints one line per
round and a summary, keeps the output of failed rounds under ``.flake-hunt/``, and exits 1 if any round failed.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder (tests/) comes first on sys.path, and the package tests/signal/ would stand in
# for the standard library's signal module (subprocess then fails to stop the load: no attribute SIGTERM).
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse  # noqa: E402
import ast  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RACY = (
    "os.kill",
    "signal.",
    "SIGKILL",
    "SIGTERM",
    "SIGINT",
    "Gate(",
    "max-seconds",
    "max_seconds",
    '"watch"',
    "Thread(",
    "Process(",
    "Barrier(",
    "interrupt_when",
    "popen_cli(",
)


def _racy_helpers(sources: list[str]) -> set[str]:
    """Names of module-level helper functions (in any test file or conftest) that race, directly or through another helper."""
    bodies: dict[str, str] = {}
    for source in sources:
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("test_"):
                bodies[node.name] = ast.get_source_segment(source, node) or ""
    racy = {name for name, body in bodies.items() if any(mark in body for mark in RACY)}
    while True:
        more = {name for name, body in bodies.items() if name not in racy and any(f"{r}(" in body for r in racy)}
        if not more:
            return racy
        racy |= more


def timing_sensitive() -> list[str]:
    """Node ids of every test whose body, or a helper it calls, sends a signal, kills, holds, sets a time limit, watches or starts threads."""
    files = sorted(path for path in (ROOT / "tests").rglob("test_*.py") if path.name != "test_mutants.py")
    # the mutant table runs other tests against broken copies; it is not a race itself
    sources = {path: path.read_text() for path in files}
    helpers = _racy_helpers([*sources.values(), (ROOT / "tests" / "conftest.py").read_text()])
    found: list[str] = []
    for path, source in sources.items():
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                body = ast.get_source_segment(source, node) or ""
                if any(mark in body for mark in RACY) or any(f"{h}(" in body for h in helpers):
                    found.append(f"{path.relative_to(ROOT)}::{node.name}")
    return found


def load_start() -> list[subprocess.Popen[bytes]]:
    """One busy process per core: stress-ng if installed, else Python loops."""
    cores = os.cpu_count() or 1
    if shutil.which("stress-ng"):
        return [subprocess.Popen(["stress-ng", "--cpu", str(cores), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]


def load_stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop the busy processes."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(30)


def main() -> int:
    """Run the rounds; exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--load", choices=["both", "idle", "busy"], default="both")
    parser.add_argument("-n", "--jobs", default="auto", help="pytest-xdist workers per round (default: auto)")
    parser.add_argument("--list", action="store_true", help="print the tests the hunt runs and exit")
    args = parser.parse_args()
    tests = timing_sensitive()
    if args.list:
        print("\n".join(tests))
        return 0
    out = ROOT / ".flake-hunt"
    out.mkdir(exist_ok=True)
    failed = 0
    loads = ["idle", "busy"] if args.load == "both" else [args.load]
    print(f"flake hunt: {len(tests)} timing-sensitive tests, {args.rounds} rounds each {' and '.join(loads)}", flush=True)
    for load in loads:
        busy = load_start() if load == "busy" else []
        try:
            for n in range(1, args.rounds + 1):
                started = time.monotonic()
                tests = timing_sensitive()  # read again each round: the tree may have changed (a pull between rounds)
                cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", args.jobs, *tests]
                run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                last = (run.stdout.strip().splitlines() or ["(no output)"])[-1]
                if run.returncode != 0:
                    failed += 1
                    (out / f"{load}-{n}.log").write_text(run.stdout + run.stderr)
                print(
                    f"{load} round {n}: {'ok' if run.returncode == 0 else 'FAILED'} in {time.monotonic() - started:.0f}s: {last}",
                    flush=True,
                )
        finally:
            load_stop(busy)
    print(f"flake hunt: {failed} failed round(s) of {args.rounds * len(loads)}" + (f"; logs in {out}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
