"""The file store's batch flush: one syncfs only on file systems proven to flush on it, an fsync per object elsewhere.

A FUSE file system returns 0 from syncfs(2) without flushing anything, so a store on one (sshfs, gocryptfs, rclone
mount) must fsync every object before its name appears. Checked with strace on a real FUSE mount (bindfs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memex.state.flush import PER_FILE, SYNCFS, SYNCFS_PROVEN, fs_type, plan_for
from tests.conftest import ROOT, need_strace, read_log, write_config
from tests.core.test_filestore_safety import _ordering_violations, joined

FUSE_MAGIC = 0x65735546
TRACED = "openat,syncfs,fsync,fdatasync,link,linkat,rename,renameat,renameat2"


@pytest.fixture
def fuse_dir(tmp_path: Path) -> Iterator[Path]:
    """A real FUSE mount (bindfs of a folder under ``tmp_path``), unmounted afterwards; skipped where FUSE is missing."""
    if shutil.which("bindfs") is None:
        pytest.skip("bindfs is not installed (apt-get install bindfs fuse3): no FUSE mount to test the per-file flush on")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("/dev/fuse is missing (a container without FUSE): no FUSE mount to test the per-file flush on")
    under, mount = tmp_path / "under", tmp_path / "fuse"
    under.mkdir(mode=0o700)
    mount.mkdir(mode=0o700)
    out = subprocess.run(["bindfs", str(under), str(mount)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"bindfs could not mount a FUSE file system here ({out.stderr.strip()[-200:]})")
    try:
        yield mount
    finally:
        unmount = shutil.which("fusermount3") or shutil.which("fusermount")
        subprocess.run([unmount, "-u", str(mount)] if unmount else ["umount", str(mount)], capture_output=True, timeout=60)


def _kernel_type(path: Path) -> int:
    """The file system type of ``path`` as stat(1) reads it (to check memex's own statfs call against)."""
    return int(subprocess.run(["stat", "-f", "-c", "%t", str(path)], capture_output=True, text=True, check=True).stdout, 16)


def _traced_poll(tmp_path: Path, store: Path, messages: int) -> tuple[list[str], Path]:
    """Poll ``messages`` iMessage rows into a file store at ``store`` under strace; the trace's lines and the state folder."""
    from pollers.imessage import samples as imessage_samples

    need_strace()
    db = tmp_path / "chat.db"
    imessage_samples.build(db, messages, seed=11)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, store={"url": store.as_uri()})
    trace = tmp_path / "trace"
    cmd = ["strace", "-f", "-y", "-qq", "-s", "4096", "-e", f"trace={TRACED}", "-o", str(trace),
           sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage", "--max-seconds", "600"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "MEMEX_DEBUG": "1"})
    assert out.returncode == 0, out.stderr
    lines = joined(trace.read_text().splitlines())
    linked = [ln for ln in lines if re.search(r"\blink(?:at)?\(.*/messages/imessage/.* = 0$", ln)]
    assert len(linked) == messages, f"the trace shows {len(linked)} objects linked, not {messages}"
    return lines, tmp_path / "state"


def _temp_fsyncs(trace: list[str]) -> int:
    """How many fsyncs of the store's temp files the trace shows (the per-file flush)."""
    return sum(bool(re.search(r"\bf(?:data)?sync\(\d+<[^>]*/\.memex-tmp/[^>]*\.tmp>\) += 0$", ln)) for ln in trace)


def test_a_store_on_fuse_fsyncs_every_object_before_its_name_and_never_calls_syncfs(tmp_path: Path, fuse_dir: Path) -> None:
    """A poll into a file store on a real FUSE mount (bindfs), traced: no syncfs at all (FUSE returns 0 from it without
    flushing), every object's temp file is fsynced before its name is linked, every folder before the cursor moves,
    and the poll's log says once which flush it chose (``store.flush``: fsync per file, fuse; a debug event, so
    only with ``--debug``).
    """
    assert fs_type(fuse_dir) == _kernel_type(fuse_dir) == FUSE_MAGIC
    trace, state = _traced_poll(tmp_path, fuse_dir / "store", 300)
    assert not [ln for ln in trace if re.search(r"\bsyncfs\(", ln)], "syncfs was called on a FUSE file system"
    assert _temp_fsyncs(trace) >= 300
    assert _ordering_violations(trace) == []
    flushes = [e for e in read_log(state, "imessage") if e["event"] == "store.flush"]
    assert [(e["method"], e["fs"], e["level"]) for e in flushes] == [(PER_FILE, "fuse", "debug")]


def test_a_store_on_a_proven_file_system_flushes_each_batch_with_one_syncfs(tmp_path: Path) -> None:
    """On a file system in the allow-list (the test folder if it is ext4/xfs/btrfs, else /dev/shm's tmpfs), the fast
    path runs: syncfs, no fsync per object, and still no name before its bytes are flushed.
    """
    where = next((p for p in (tmp_path, Path("/dev/shm")) if p.is_dir() and fs_type(p) in SYNCFS_PROVEN), None)
    if where is None:
        pytest.skip("neither the test folder nor /dev/shm is on a file system proven to flush on syncfs")
    assert fs_type(where) == _kernel_type(where)
    with tempfile.TemporaryDirectory(dir=where) as folder:
        trace, state = _traced_poll(tmp_path, Path(folder) / "store", 300)
    assert [ln for ln in trace if re.search(r"\bsyncfs\(.*\) += 0$", ln)]
    assert _temp_fsyncs(trace) == 0
    assert _ordering_violations(trace) == []
    flushes = [e for e in read_log(state, "imessage") if e["event"] == "store.flush"]
    assert [(e["method"], e["fs"]) for e in flushes] == [(SYNCFS, plan_for(fs_type(where))[1])]


@pytest.mark.parametrize(
    ("kind", "method"),
    [
        pytest.param(0xEF53, SYNCFS, id="ext4"),
        pytest.param(0x58465342, SYNCFS, id="xfs"),
        pytest.param(0x9123683E, SYNCFS, id="btrfs"),
        pytest.param(0x01021994, SYNCFS, id="tmpfs"),
        pytest.param(FUSE_MAGIC, PER_FILE, id="fuse"),
        pytest.param(0x6969, PER_FILE, id="nfs"),
        pytest.param(0xFF534D42, PER_FILE, id="cifs"),
        pytest.param(0xFE534D42, PER_FILE, id="smb2"),
        pytest.param(0x794C7630, PER_FILE, id="overlay"),
        pytest.param(0x2FC12FC1, PER_FILE, id="zfs"),
        pytest.param(0x12345678, PER_FILE, id="unknown-type"),
        pytest.param(None, PER_FILE, id="no-statfs"),
    ],
)
def test_only_file_systems_proven_to_flush_on_syncfs_get_it(kind: int | None, method: str) -> None:
    """The allow-list: ext2/3/4, xfs, btrfs and tmpfs get one syncfs per batch; FUSE, NFS, SMB, overlay, ZFS, any
    type not listed and a system without statfs (macOS) get an fsync (F_FULLFSYNC) per object.
    """
    assert plan_for(kind)[0] == method
