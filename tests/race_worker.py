"""Worker processes for the cursor-store race tests (importable, so they run under spawn too)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memex.cursors import CursorStore


def _bump(section: dict[str, Any]) -> dict[str, Any]:
    section["count"] = int(section.get("count", 0)) + 1
    return section


def locked_worker(state_dir: str, name: str, updates: int, barrier: Any) -> None:
    """Increment this worker's own section ``updates`` times through CursorStore.update."""
    store = CursorStore(Path(state_dir), lock_timeout=60)
    barrier.wait(timeout=60)
    for _ in range(updates):
        store.update(name, _bump)


def naive_worker(state_dir: str, name: str, updates: int, barrier: Any) -> None:
    """The idiom memex replaced: load the whole file, change own section, write temp, rename; no lock."""
    path = Path(state_dir) / "cursors.json"
    barrier.wait(timeout=60)
    for i in range(updates):
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            doc = {"format": 1, "sources": {}}
        section = doc["sources"].setdefault(name, {})
        section["count"] = int(section.get("count", 0)) + 1
        tmp = path.with_name(f".cursors.{os.getpid()}.{i}.tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
