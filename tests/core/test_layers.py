"""The import contract of ``make lint`` (``lint-imports``, ``[tool.importlinter]`` in pyproject.toml) can fail: on a
copy of the source tree with one import pointing up, and with one cycle, it exits non-zero naming the import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _copy(tmp_path: Path) -> Path:
    """The packages and the contract, copied (no caches) where a deliberate bad import can be added."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for package in ("memex", "pollers"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the copy: the copy's packages first on the path (before the editable install's)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.skipif(not LINT.exists(), reason="import-linter is in the test extras")
def test_lint_imports_passes_on_the_tree_and_fails_on_an_upward_import_and_on_a_cycle(tmp_path: Path) -> None:
    """The tree as committed keeps every contract; the same tree with ``memex.errors`` importing the CLI (an arrow
    up the layers) breaks the layers contract, and with two Messenger modules importing each other the acyclic one."""
    tree = _copy(tmp_path)
    clean = _lint(tree)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    _append(tree / "memex" / "errors.py", "import memex.cli.main  # deliberately upward")
    upward = _lint(tree)
    assert upward.returncode != 0
    assert "memex.errors -> memex.cli.main" in upward.stdout
    assert "imports point down BROKEN" in upward.stdout

    (tree / "memex" / "errors.py").write_text((ROOT / "memex" / "errors.py").read_text())
    _append(tree / "pollers" / "messenger" / "parse.py", "import pollers.messenger.poller  # deliberately a cycle")
    cycle = _lint(tree)
    assert cycle.returncode != 0
    assert "each other (at any depth) BROKEN" in cycle.stdout


def test_the_built_in_sources_import_from_memex_only_what_memex_plugin_offers() -> None:
    """Every ``memex`` import in ``pollers/`` (at the top or inside a function) is ``memex.plugin``: the built-in sources
    use the contract a stranger's plug-in gets (docs/plugins.md), and nothing a plug-in could not."""
    import ast

    outside: list[str] = []
    for path in sorted((ROOT / "pollers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            outside += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "memex" and n != "memex.plugin"]
    assert outside == []
