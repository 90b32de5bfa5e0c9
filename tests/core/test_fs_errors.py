"""The environment's faults in words (memex.fs_errors), and what `memex status` shows after a poll met one.

The bad-input table (tests/core/test_bad_inputs_environment.py) runs each fault through the CLI on real file systems;
here: the translation of the errors no test can make on demand (a disk quota, a failing disk, SQLite's names), the
path it names, and a source whose store filled up showing FAILING with that line, then recovering.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from pathlib import Path

import pytest

from memex.error_lines import internal_error
from memex.fs_errors import CAUSES, EnvironmentFault, at_path, explain, in_the_way
from tests.conftest import run_cli
from tests.core.test_bad_inputs_environment import config, fill, mount_tmpfs, need_mount, unmount_below


@pytest.mark.parametrize("code", sorted(CAUSES), ids=[errno.errorcode[c] for c in sorted(CAUSES)])
def test_each_cause_is_one_line_naming_the_path_the_cause_and_the_fix(tmp_path: Path, code: int) -> None:
    """ENOSPC, EDQUOT, EROFS, EACCES, EPERM, ENOTDIR, EISDIR, ELOOP, ENAMETOOLONG, EIO: path, cause, remedy; one line,
    and the runner's failure line is that line, never "internal error"."""
    path = tmp_path / "state" / "cursors.json"
    path.parent.mkdir()
    path.write_text("{}")
    fault = explain(OSError(code, os.strerror(code), str(path)))
    assert isinstance(fault, EnvironmentFault)
    cause, fix = CAUSES[code]
    assert str(fault) == f"{path}: {cause}; {fix}" and "\n" not in str(fault)
    assert internal_error(OSError(code, os.strerror(code), str(path))) == str(fault)


def test_an_unknown_errno_or_an_unnamed_file_stays_an_internal_error() -> None:
    """Only the environment's causes are translated: ECONNRESET is no disk's fault, and an OSError naming no file
    cannot name the path (the places acting on a descriptor name it with at_path)."""
    assert explain(OSError(errno.ECONNRESET, "reset", "/x")) is None
    bare = OSError(errno.ENOSPC, "No space left on device")
    assert explain(bare) is None and "internal error" in internal_error(bare)
    at_path(bare, "/somewhere/file")
    assert str(explain(bare)).startswith("/somewhere/file: no space left")


def test_the_path_named_is_the_one_in_the_way(tmp_path: Path) -> None:
    """ENOTDIR names the file standing where a folder must be; ELOOP the looping link; EACCES on a file not made the
    nearest folder there is (the one that refused it); a temp file's full disk its folder."""
    (tmp_path / "blocker").write_text("x")
    deep = tmp_path / "blocker" / "state" / "logs" / "a.jsonl"
    with pytest.raises(OSError) as caught:
        deep.parent.mkdir(parents=True)
    assert explain(caught.value) is not None and explain(caught.value).path == str(tmp_path / "blocker")  # type: ignore[union-attr]
    assert in_the_way(deep).path == str(tmp_path / "blocker")  # type: ignore[union-attr]
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    with pytest.raises(OSError) as caught:
        (tmp_path / "a" / "x").write_text("x")
    assert explain(caught.value).path == str(tmp_path / "a")  # type: ignore[union-attr]
    refused = OSError(errno.EACCES, "Permission denied", str(tmp_path / "store" / ".memex-tmp"))  # mkdir in a folder it cannot write
    assert explain(refused).path == str(tmp_path)  # type: ignore[union-attr]
    tmp = tmp_path / "store" / ".memex-tmp" / ".obj.1.2.3.tmp"
    assert explain(OSError(errno.ENOSPC, "full", str(tmp))).path == str(tmp.parent)  # type: ignore[union-attr]


def test_sqlite_names_a_full_disk_or_a_readonly_file_by_the_path_given() -> None:
    """SQLite's errors carry no path: SQLITE_FULL with the index's path is a full disk there; a foreign error is not translated."""
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
    assert str(explain(full, "/s/search/index.sqlite")).startswith("/s/search/index.sqlite: no space left")
    assert explain(full) is None
    other = sqlite3.OperationalError("no such table")
    other.sqlite_errorname = "SQLITE_ERROR"  # type: ignore[attr-defined]
    assert explain(other, "/s/search/index.sqlite") is None


def test_a_store_that_fills_up_shows_failing_with_the_line_then_recovers(tmp_path: Path) -> None:
    """A poll that stored, then one on a full store: exit 1 with the one line, `memex status` shows the source FAILING
    with that line (never OK), nothing lost: once space is freed the next poll stores the rest."""
    need_mount()
    try:
        _fill_up_and_recover(tmp_path)
    finally:
        unmount_below(tmp_path)


def _fill_up_and_recover(world: Path) -> None:
    store = world / "store"
    mount_tmpfs(store, kib=1024)
    cfg = config(world)
    assert run_cli("poll", "md", config=cfg).returncode == 0
    for n in range(3, 6):
        (world / "md" / "new" / f"m{n}").write_bytes(b"Subject: x\nMessage-ID: <n%d@example.com>\n\n" % n + b"lorem " * 2000)
    filler = fill(store)
    out = run_cli("poll", "md", config=cfg)
    assert out.returncode == 1 and "no space left on the disk holding it" in out.stderr, out.stderr
    assert "internal error" not in out.stderr
    row = json.loads(run_cli("status", "--json", config=cfg).stdout)[0]
    assert row["state"] == "FAILING" and "no space left on the disk holding it" in row["last_error"], row
    filler.unlink()
    assert run_cli("poll", "md", config=cfg).returncode == 0
    assert json.loads(run_cli("status", "--json", config=cfg).stdout)[0]["state"] == "OK"
    assert len(list((store / "messages").rglob("*.json"))) >= 6


def test_a_backfill_into_a_full_store_stops_at_the_first_fault_instead_of_failing_every_message(tmp_path: Path) -> None:
    """40 messages, a full store, two upload threads: the backfill stops at once (the items in flight fail, the rest are
    left for the next run), so stderr holds a few lines, not one per message; exit 1 naming the disk."""
    need_mount()
    try:
        mount_tmpfs(tmp_path / "store", full=True)
        cfg = config(tmp_path)
        for n in range(3, 40):
            (tmp_path / "md" / "new" / f"m{n}").write_bytes(b"Subject: x\nMessage-ID: <b%d@example.com>\n\n" % n + b"lorem " * 100)
        out = run_cli("backfill", "md", "--workers", "2", config=cfg)
        assert out.returncode == 1 and "no space left on the disk holding it" in out.stderr, out.stderr
        failed = [ln for ln in out.stderr.splitlines() if '"backfill.item_failed"' in ln]
        assert 1 <= len(failed) <= 2, out.stderr
    finally:
        unmount_below(tmp_path)
