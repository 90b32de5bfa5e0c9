"""memex's conformance kit on this plug-in, as docs/plugins.md shows it (memex's own tests run this file too)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import memex_jsonl

from memex.conformance import check_poll, check_poller, sample_config


def write_lines(path: Path, numbers: Iterable[int]) -> None:
    """Messages ``numbers`` appended to a .jsonl file."""
    with path.open("a") as f:
        for i in numbers:
            f.write(f'{{"id": "m-{i}", "at": "2025-01-01T10:00:00Z", "text": "line {i}"}}\n')


def test_the_plugin_keeps_every_promise(tmp_path: Path) -> None:
    """Drain, resume, deterministic, copy, caught up, new messages, head; then memex's own poll twice."""
    folder = tmp_path / "logs"
    folder.mkdir()
    write_lines(folder / "a.jsonl", range(8))
    shutil.copytree(folder, tmp_path / "copy")
    cfg = sample_config(tmp_path / "cfg", "jsonl", name="j", path=folder)
    other = sample_config(tmp_path / "cfg2", "jsonl", name="j", path=tmp_path / "copy")
    added = iter(range(8, 100))
    ran = check_poller(lambda: memex_jsonl.make(cfg.source("j")), expected=8,
                       add=lambda n: write_lines(folder / "a.jsonl", [next(added) for _ in range(n)]),
                       copy=lambda: memex_jsonl.make(other.source("j")))  # fmt: skip
    assert ran == ["drain", "resume", "deterministic", "copy", "caught-up", "still", "new", "head"]
    check_poll(other, "j", expected=8)
