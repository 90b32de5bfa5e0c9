"""The guide's example plug-in (examples/memex-jsonl), built and installed as its own package into a fresh virtual
environment, then used through the real ``memex`` CLI of that environment: poll, status, show, verify, cursor set.

memex itself reaches the fresh environment through a ``.pth`` line adding this test run's environment (memex is not
installed again: that would download its dependencies), so what the test proves is the plug-in side: the entry
point declared in the example's pyproject.toml is found by a memex that never heard of it.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT, file_objects, write_config

EXAMPLE = ROOT / "examples" / "memex-jsonl"


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the example installed into it by pip (from a copy: the build writes files)."""
    root = tmp_path_factory.mktemp("plugin-venv")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()  # fmt: skip
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    Path(purelib, "memex-under-test.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in ours))
    source = root / "memex-jsonl"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return python


def memex(python: Path, *args: str, cwd: Path, flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """The fresh environment's ``python [FLAGS] -m memex ARGS``, from ``cwd`` (never the repository: memex comes from the .pth)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MEMEX_CONFIG", "PYTHONPATH")}
    return subprocess.run([str(python), *flags, "-m", "memex", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def test_the_example_plugin_installs_and_polls_from_a_fresh_environment(fresh_python: Path, tmp_path: Path) -> None:
    """Installed by pip, the example is found by its entry point: a poll stores every line (a bad one quarantined),
    the next is idle, status lists it, show prints a record, verify finds the store whole, cursor set checks shapes."""
    folder = tmp_path / "logs"
    folder.mkdir()
    lines = [{"id": f"m-{i}", "at": f"2025-03-01T09:{i:02d}:00Z", "chat": "Family", "from": "Anna" if i % 2 else "me",
              "text": f"line {i}"} for i in range(6)]  # fmt: skip
    (folder / "2025-03.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines) + "not json\n")
    cfg = write_config(tmp_path, {"notes": {"type": "jsonl", "path": str(folder)}})
    found = subprocess.run([str(fresh_python), "-c", "import memex_jsonl, memex; print(memex_jsonl.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert found.returncode == 0 and "site-packages" in found.stdout and str(ROOT) not in found.stdout, found.stderr

    first = memex(fresh_python, "--config", str(cfg), "poll", "notes", cwd=tmp_path)
    assert (first.returncode, first.stdout) == (0, ""), first.stderr
    records = {k: json.loads(v) for k, v in file_objects(tmp_path / "state" / "store").items() if k.endswith(".json")}
    assert {r["native_id"] for r in records.values()} == {f"m-{i}" for i in range(6)}
    assert all(r["source"] == "notes" and r["schema"] == "memex.message/1" for r in records.values())
    assert len(file_objects(tmp_path / "state" / "store", "quarantine/")) >= 1  # the line that is not JSON, with its bytes

    second = memex(fresh_python, "--config", str(cfg), "poll", "notes", cwd=tmp_path, flags=("-X", "importtime"))
    assert second.returncode == 0, second.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in second.stderr.splitlines() if line.startswith("import time:")}
    assert "memex_jsonl.poller" in imported and "importlib.metadata" not in imported  # found by the lean scan (memex.registry)
    polls = [json.loads(x) for x in (tmp_path / "state" / "logs" / "notes.jsonl").read_text().splitlines()]
    assert [p["status"] for p in polls if p.get("event") == "poll"] == ["ok", "idle"]

    status = memex(fresh_python, "--config", str(cfg), "status", "--json", cwd=tmp_path)
    assert status.returncode == 0 and "notes" in status.stdout, status.stderr
    show = memex(fresh_python, "--config", str(cfg), "show", "messages/notes/m-3.json", "--json", cwd=tmp_path)
    assert show.returncode == 0 and json.loads(show.stdout)["record"]["text"] == "line 3", show.stderr
    verify = memex(fresh_python, "--config", str(cfg), "verify", "notes", cwd=tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    refused = memex(fresh_python, "--config", str(cfg), "cursor", "set", "notes", '{"rowid": 3}', cwd=tmp_path)
    assert refused.returncode == 2 and 'a jsonl cursor is {"files"' in refused.stderr, refused.stderr
