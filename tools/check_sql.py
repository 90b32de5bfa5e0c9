"""Fail when SQL naming the search index's tables appears outside the two places allowed to hold it.

The index's SQL lives in the read model (``memex/read/``) and the index's writer (``memex/search/``'s ``index``,
``build``, ``bulk``, ``join`` and ``schema``, and ``query``, the compiler of the query language the read model runs).
Any other module of ``memex/`` that writes a statement naming one of the index's tables (``SELECT ... FROM messages``,
``JOIN links``, ``INSERT INTO revisions``, ...) would be a third copy of the archive's reading: this check, run by
``make lint``, names each such string (file and line) and exits 1. The tables are read from the schema itself
(:func:`memex.search.schema.schema`), so a table added there is checked too.

Usage: ``python tools/check_sql.py [ROOT]`` (ROOT: the repository, by default this file's parent's parent).
Only string literals are read (a docstring or a comment may name a table); SQL keywords are matched in capitals,
as memex writes them.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ALLOWED = ("memex/read/", "memex/search/index.py", "memex/search/build.py", "memex/search/bulk.py", "memex/search/join.py",
           "memex/search/schema.py", "memex/search/query.py")  # fmt: skip
_DEFINED = re.compile(r"CREATE (?:VIRTUAL )?(?:TABLE|VIEW) IF NOT EXISTS (\w+)")


def index_tables(root: Path) -> list[str]:
    """The tables and views of the index, as the schema module of ``root`` defines them."""
    sys.path.insert(0, str(root))
    try:
        from memex.search.schema import schema
    finally:
        sys.path.pop(0)
    return sorted(set(_DEFINED.findall(schema("english"))))


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each string literal of ``tree`` but docstrings, with its line (an f-string's literal parts joined by ``?``)."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docs.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "?" for v in node.values]
            yield node.lineno, "".join(parts)
            for v in node.values:
                docs.add(id(v))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def violations(root: Path, tables: list[str] | None = None) -> list[str]:
    """``path:line: ...`` for each string of ``root/memex`` outside :data:`ALLOWED` naming an index table in SQL."""
    names = tables if tables is not None else index_tables(root)
    sql = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(" + "|".join(map(re.escape, names)) + r")\b")
    out = []
    for path in sorted((root / "memex").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(ALLOWED):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        seen: set[tuple[int, str]] = set()
        for line, text in sorted(_strings(tree)):
            for found in sql.finditer(text):
                if (line, found.group(1)) not in seen:
                    seen.add((line, found.group(1)))
                    out.append(f"{rel}:{line}: SQL on the index's table {found.group(1)!r}; the index is read through memex/read/ "
                               "(and written by memex/search/index.py, build.py, bulk.py): move the statement there")  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    """Print each violation; 1 when there is one, else 0."""
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    found = violations(root)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
