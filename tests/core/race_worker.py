"""Worker processes for the cursor-store race tests (importable, so they run under spawn too)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memex.state.cursors import CursorStore


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


def s3_cas_worker(config_path: str, source: str, key: str, updates: int, barrier: Any) -> None:
    """Increment ``key`` in ``source``'s S3 cursor object ``updates`` times through S3CursorStore.update (If-Match)."""
    from memex import config
    from memex.errors import StateError
    from memex.state.s3state import S3CursorStore, open_state

    store = S3CursorStore(open_state(config.load(config_path)), retry_delay=0.05)
    barrier.wait(timeout=60)
    for _ in range(updates):
        for again in range(20):  # on a loaded machine one writer can lose 12 CAS rounds in a row: it says to try again
            try:
                store.update(source, lambda s: {**s, key: int(s.get(key, 0)) + 1})
                break
            except StateError as e:
                if "try again" not in str(e) or again == 19:
                    raise


def s3_naive_worker(config_path: str, source: str, key: str, updates: int, barrier: Any) -> None:
    """The same increments with GET + plain PUT (no If-Match): the idiom a CAS replaces."""
    from memex import config
    from memex.state.s3state import open_state

    state = open_state(config.load(config_path))
    barrier.wait(timeout=60)
    for _ in range(updates):
        raw = state.get(f"cursors/{source}.json")
        doc = json.loads(raw) if raw else {"format": 1, "source": source, "section": {}}
        doc["section"][key] = int(doc["section"].get(key, 0)) + 1
        state.put(f"cursors/{source}.json", json.dumps(doc).encode())


def host_worker(config_path: str, sources: list[str], rounds: int, barrier: Any) -> None:
    """One "host": poll every source ``rounds`` times in a row, each poll a full runner.poll (lease, cursor, store)."""
    from memex import config
    from memex.runner import poll

    cfg = config.load(config_path)
    barrier.wait(timeout=60)
    for _ in range(rounds):
        for name in sources:
            poll(cfg, name, max_seconds=60)
