"""The layering `make lint` enforces, each contract shown failing on a deliberate violation.

- ``lint-imports`` (pyproject.toml's ``[tool.importlinter]``): imports point down the layers of docs/development.md and
  no two modules import each other; the read model and ``memex mcp`` import no index writer, not even through another
  module; the read commands (search, show, people) none themselves;
- ``tools/check_sql.py``: SQL naming the index's tables only in the read model (``memex/read/``) and the index's
  writer and query compiler (``memex/search/``).

Each violation is made in a copy of the package in a temporary folder; the working tree is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, patience

sys.path.insert(0, str(ROOT / "tools"))
import check_sql  # a script (tools/), not a package

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy(tmp: Path) -> Path:
    """The packages and pyproject.toml copied into ``tmp`` (no byte-code)."""
    for package in ("memex", "pollers"):  # the contracts cover both (pollers: no cycles)
        shutil.copytree(ROOT / package, tmp / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    return tmp


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the copy, before the installed tree
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=patience(120))


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e '.[test]')")
def test_the_import_contracts_hold_and_break_on_a_writer_imported_by_a_reader(tmp_path: Path) -> None:
    """The contracts are kept by the tree as it is; a read command importing the index's writer, and the read model
    importing the runner through a module of its own, each break one, named with the import's chain."""
    root = _copy(tmp_path)
    kept = _lint_imports(root)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    show = root / "memex" / "cli" / "show.py"
    show.write_text(show.read_text() + "\nfrom memex.search.index import SearchIndex  # noqa\n")
    broken = _lint_imports(root)
    assert broken.returncode == 1 and "memex.cli.show is not allowed to import memex.search.index" in broken.stdout, broken.stdout
    show.write_text(show.read_text().replace("\nfrom memex.search.index import SearchIndex  # noqa\n", "\n"))
    (root / "memex" / "read" / "helper.py").write_text("import memex.runner\n")
    snippets = root / "memex" / "read" / "snippets.py"
    snippets.write_text(snippets.read_text() + "\nimport memex.read.helper  # noqa\n")
    indirect = _lint_imports(root)
    assert indirect.returncode == 1 and "memex.read is not allowed to import memex.runner" in indirect.stdout, indirect.stdout


def test_the_index_sql_lives_in_the_read_model_and_the_writer_only(tmp_path: Path) -> None:
    """tools/check_sql.py finds nothing in the tree as it is; a front end holding a statement on an index table
    (plain or an f-string) is named by file and line, and the script exits 1; a docstring naming a table is not SQL."""
    assert check_sql.violations(ROOT) == []
    tables = check_sql.index_tables(ROOT)
    assert {"messages", "links", "revisions", "sources", "fts", "fts_stem", "fts_source"} <= set(tables)
    root = _copy(tmp_path)
    find = root / "memex" / "cli" / "find.py"
    find.write_text(find.read_text() + '\n\ndef _peek(db, t):\n    """Reads FROM messages, says the docstring."""\n'
                    '    return db.execute(f"SELECT key FROM {t} JOIN links l ON l.id = {t}.id").fetchall()\n'
                    '\n\nX = "SELECT count(*) FROM messages WHERE deleted = 0"\n')  # fmt: skip
    found = check_sql.violations(root, tables)
    lines = len(find.read_text().splitlines())
    assert found == [
        f"memex/cli/find.py:{lines - 3}: " + found[0].split(": ", 1)[1],
        f"memex/cli/find.py:{lines}: " + found[1].split(": ", 1)[1],
    ]
    assert "'links'" in found[0] and "'messages'" in found[1]
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "check_sql.py"), str(root)], capture_output=True, text=True,
                         timeout=patience(60))  # fmt: skip
    assert out.returncode == 1 and out.stdout.count("memex/cli/find.py:") == 2, out.stdout


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (pip install -e '.[test]')")
def test_lint_imports_fails_on_an_upward_import_and_on_a_cycle(tmp_path: Path) -> None:
    """With ``memex.errors`` importing the CLI (an arrow up the layers) the layers contract breaks, naming the import;
    with two Messenger modules importing each other the acyclic one does."""
    root = _copy(tmp_path)
    _append(root / "memex" / "errors.py", "import memex.cli.main  # deliberately upward")
    upward = _lint_imports(root)
    assert upward.returncode != 0
    assert "memex.errors -> memex.cli.main" in upward.stdout and "imports point down BROKEN" in upward.stdout, upward.stdout

    (root / "memex" / "errors.py").write_text((ROOT / "memex" / "errors.py").read_text())
    _append(root / "pollers" / "messenger" / "parse.py", "import pollers.messenger.poller  # deliberately a cycle")
    cycle = _lint_imports(root)
    assert cycle.returncode != 0
    assert "each other (at any depth) BROKEN" in cycle.stdout, cycle.stdout


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
