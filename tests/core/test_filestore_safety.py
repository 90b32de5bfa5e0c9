"""The file store: private under any umask, refuses a store others can write to, and makes durable what it counts."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memex.errors import ConfigError
from memex.store.files import FileStore
from tests.conftest import ROOT, need_strace, need_syncfs, write_config


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root.parent)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")] if p.is_dir()}


def test_every_store_folder_is_private_under_umask_000(tmp_path: Path) -> None:
    """A poll run with umask 000 creates the store root, messages/ and every folder below 0700 (mkdir -p would give 0777)."""
    from pollers.imessage import samples as imessage_samples

    db = tmp_path / "chat.db"
    imessage_samples.build(db, 5, seed=3)
    store = tmp_path / "deep" / "er" / "store"
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, store={"url": store.as_uri()})
    code = ("import os, sys, runpy; os.umask(0); sys.argv = ['memex', '--config', sys.argv[1], 'poll', 'imessage']; "
            "runpy.run_module('memex', run_name='__main__')")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    modes = _modes(tmp_path / "deep")
    assert modes and set(modes.values()) == {0o700}, modes


def test_a_store_folder_other_users_can_write_is_refused(tmp_path: Path) -> None:
    """A group- or world-writable store (root or a folder in it) stops the poll with one line naming it and the fix."""
    root = tmp_path / "store"
    (root / "messages").mkdir(parents=True)
    os.chmod(root, 0o700)
    os.chmod(root / "messages", 0o777)
    with pytest.raises(ConfigError, match=r"messages: store folder is writable by other users \(mode 0777\).*chmod 700"):
        FileStore(root).put_new("messages/s/a.json", b"{}")
    assert not (root / "messages" / "s").exists()


def test_an_object_found_already_there_is_made_durable_before_it_is_counted_past(tmp_path: Path) -> None:
    """put_new meeting an existing name (a killed poll or a backfill wrote it) fsyncs that file and its folder at the next sync.

    Checked with strace: the sync after the duplicate opens and fsyncs the existing object.
    """

    need_strace()
    root = tmp_path / "store"
    first = FileStore(root)
    first.put_new("messages/s/a.json", b"{}")
    first.sync()  # the earlier writer's commit (put_new links at sync)
    script = (
        "import sys; from pathlib import Path; from memex.store.files import FileStore\n"
        "s = FileStore(Path(sys.argv[1])); assert s.put_new('messages/s/a.json', b'{}') is False; print('SYNC', flush=True); s.sync()\n"
    )
    out = subprocess.run(["strace", "-f", "-e", "trace=openat,fsync", "-o", str(tmp_path / "trace"), sys.executable, "-c", script, str(root)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    trace = (tmp_path / "trace").read_text().splitlines()
    opened = [ln for ln in trace if "openat(" in ln and "messages/s/a.json" in ln]
    assert opened, "the existing object was never opened for an fsync"
    fd = opened[-1].rsplit("=", 1)[1].strip()
    assert any(f"fsync({fd})" in ln for ln in trace[trace.index(opened[-1]) :])


def joined(trace: list[str]) -> list[str]:
    """An ``strace -f`` trace with each call interrupted by another thread's (``<unfinished ...>``, later
    ``<... fsync resumed>``) put back together on one line, where it returned (what counts for ordering).
    """
    waiting: dict[str, str] = {}  # pid -> the start of its unfinished call
    out = []
    for line in trace:
        pid, _, rest = line.partition(" ")
        if line.endswith(" <unfinished ...>"):
            waiting[pid] = line[: -len(" <unfinished ...>")]
        elif m := re.match(r"\s*<\.\.\. \w+ resumed>(.*)$", rest):
            out.append(waiting.pop(pid, line) + m.group(1))
        else:
            out.append(line)
    return out


def _ordering_violations(trace: list[str]) -> list[str]:
    """Read an ``strace -f -y`` trace of a poll; name every way a cursor save could pass an object not yet durable.

    An object's bytes count as durable once, after its temp file was opened, an ``fsync`` of it or a ``syncfs`` ran;
    its name once an ``fsync`` of its folder ran after the link. Every ``cursors.json`` rename must come after both for
    every object linked before it, and no name may be linked before its bytes are durable.
    """

    temps: dict[str, bool] = {}  # temp file -> its bytes flushed since it was opened
    undurable_names: dict[str, str] = {}  # linked object -> its folder, until that folder is fsynced
    problems = []
    for line in joined(trace):
        if m := re.search(r'openat\(AT_FDCWD[^,]*, "([^"]*\.memex-tmp/[^"]*\.tmp)", [^)]*O_CREAT', line):
            temps[m.group(1)] = False
        elif re.search(r"\bsyncfs\(.*\) += 0$", line):
            temps = dict.fromkeys(temps, True)
        elif m := re.search(r"\bf(?:data)?sync\(\d+<([^>]*)>\) += 0$", line):
            path = m.group(1)
            if path in temps:
                temps[path] = True
            undurable_names = {n: d for n, d in undurable_names.items() if d != path}
        elif m := re.search(r'\blink(?:at)?\((?:AT_FDCWD[^,]*, )?"([^"]*)", (?:AT_FDCWD[^,]*, )?"([^"]*)"(?:, 0)?\) = 0', line):
            tmp, name = m.groups()
            if not temps.get(tmp, False):
                problems.append(f"{name} linked before its bytes were flushed")
            undurable_names[name] = str(Path(name).parent)
        elif re.search(r'rename(?:at2?)?\(.*"[^"]*cursors\.json"', line) and " = 0" in line:
            problems.extend(f"cursor saved while {n} was not durable" for n in undurable_names)
    return problems


def test_a_cursor_never_passes_an_object_that_is_not_durable(tmp_path: Path) -> None:
    """A poll into the file store, traced with strace: every object's bytes are flushed before its name appears,
    and its folder entry is fsynced before cursors.json is renamed into place (a crash at any syscall therefore
    never leaves the cursor past an object a power loss could take away). The trace must show objects linked
    and a cursor saved, so the check cannot pass by observing nothing.
    """

    from pollers.imessage import samples as imessage_samples

    need_strace()
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 1200, seed=5)
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, store={"url": (tmp_path / "store").as_uri()})
    trace_file = tmp_path / "trace"
    cmd = ["strace", "-f", "-y", "-qq", "-s", "4096", "-e", "trace=openat,linkat,link,rename,renameat,renameat2,fsync,fdatasync,syncfs",
           "-o", str(trace_file), sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage", "--max-seconds", "600"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    trace = trace_file.read_text().splitlines()
    assert sum(bool(re.search(r"\blink(?:at)?\(.*/messages/", ln)) for ln in trace) >= 1200, "the trace shows no objects linked"
    assert any(re.search(r'rename.*cursors\.json"', ln) for ln in trace), "the trace shows no cursor saved"
    assert _ordering_violations(trace) == []


@pytest.mark.parametrize("syscall", ["syncfs", "link", "fsync"])
def test_a_poll_killed_inside_a_group_commit_loses_nothing(tmp_path: Path, syscall: str) -> None:
    """strace injects SIGKILL at the second batch's syncfs, link or folder fsync (inside the group commit, before the
    cursor moves): the saved cursor covers only objects whose names are there, and a clean rerun stores every message
    exactly once.
    """
    import json

    from pollers.imessage import samples as imessage_samples

    need_strace()
    if syscall == "syncfs":
        need_syncfs(tmp_path)
    db = tmp_path / "chat.db"
    total = 6000  # more than one group commit (COMMIT_ITEMS = 5000), however fast the machine
    imessage_samples.build(db, total, seed=7)
    store = tmp_path / "store"
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}}, store={"url": store.as_uri()})
    # A budget no loaded machine under strace exhausts: the default 50 s once ended the poll before the 5100th link.
    poll = [sys.executable, "-m", "memex", "--config", str(cfg), "poll", "imessage", "--max-seconds", "600"]
    when = {"syncfs": "2", "link": "5100", "fsync": "8"}[syscall]  # inside the second group commit
    killed = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", f"inject={syscall}:signal=KILL:when={when}", *poll],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert killed.returncode != 0, "the injected SIGKILL never fired"
    cursors = tmp_path / "state" / "cursors.json"
    stored = {p.name for p in (store / "messages" / "imessage").iterdir()} if (store / "messages" / "imessage").exists() else set()
    if cursors.exists():
        rowid = json.loads(cursors.read_text())["sources"]["imessage"]["cursor"]["rowid"]
        assert len(stored) >= rowid, f"cursor at {rowid} but only {len(stored)} objects have names"
    again = subprocess.run(poll, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 0, again.stderr
    assert len(list((store / "messages" / "imessage").iterdir())) == total
    assert json.loads(cursors.read_text())["sources"]["imessage"]["cursor"]["rowid"] == total
