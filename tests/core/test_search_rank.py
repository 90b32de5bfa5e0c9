"""``memex search --rank``: the best matches by FTS5 alone are ranked first (no join per match), and the answer is
the same as ranking every match, whether the window holds it or the query's conditions send it to the full ranking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memex.search.index import SearchIndex
from memex.search.query import RANK_WINDOW, parse


def _records() -> list[tuple[str, dict[str, Any]]]:
    """900 messages with 'lease', message i with i other words (the shorter, the better it ranks); the best-ranked
    100 deleted, the worst-ranked 300 from another source."""
    out = []
    for i in range(900):
        source = "other" if i >= 600 else "chat"
        doc = {"source": source, "native_id": f"n{i}", "text": "lease " + " ".join(f"w{j % 50}" for j in range(i)),
               "sent_at": f"2024-01-{1 + i % 28:02d}T10:{i % 60:02d}:00Z", "deleted": i < 100}  # fmt: skip
        out.append((f"messages/{source}/k{i:04d}.json", doc))
    return out


@pytest.mark.parametrize("query", ["lease", "lease source:other", "lease is:deleted", "lease -w1", "lease after:2024-01-10"])
def test_a_ranked_search_answers_as_ranking_every_match(tmp_path: Path, query: str) -> None:
    """For limits below, at and above the window, ``Query.run`` ranked returns exactly the rows of the query that
    ranks every match; the window is used when it holds the answer ('lease': the deleted best third is filtered
    out and the next are in it) and left for the full ranking when it cannot ('source:other': all rank last)."""
    with SearchIndex(tmp_path / "index.sqlite") as index:
        index.add(_records())
        q = parse(query)
        calls: list[str] = []

        def select(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
            calls.append(sql)
            return [tuple(r) for r in index.select(sql, params)]

        for limit in (5, 20, 100, RANK_WINDOW + 50):
            calls.clear()
            full = [tuple(r) for r in index.select(*q.sql(limit, rank=True))]
            assert q.run(select, limit, rank=True) == full, (query, limit)
            windowed = ".rowid IN (SELECT rowid FROM (SELECT rowid, bm25(" in calls[0]
            if query == "lease" and limit <= 100:
                assert windowed and len(calls) == 1  # answered from the window
            if query == "lease source:other" and limit <= 100:
                assert windowed and len(calls) == 2  # the window held too few: every match ranked
