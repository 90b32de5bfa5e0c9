"""Every bad input gets one clear line and the right exit code, never "internal error" or a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memex import config as config_mod
from memex import registry
from memex.runner import poll
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, read_log, run_cli, write_config


def _one_line(err: str) -> bool:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    return len(lines) == 1 and "internal error" not in err and "Traceback" not in err


def test_relative_config_and_state_dir_work_from_the_config_folder(tmp_path: Path) -> None:
    """`--config config.toml` with `state_dir = "st"` and no [store]: the store goes under <config folder>/st/store."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=1)
    (tmp_path / "config.toml").write_text(f'state_dir = "st"\n[sources.imessage]\ntype = "imessage"\ndb = "{db}"\n')
    env = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    out = subprocess.run([sys.executable, "-m", "memex", "--config", "config.toml", "poll", "imessage"], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(list((tmp_path / "st" / "store" / "messages").rglob("*.json"))) == 3


@pytest.mark.parametrize(
    ("value", "says"),
    [('"a string"', 'an iMessage cursor is {"rowid": N}'), ('{"rowid": "abc"}', "rowid, changed and checked must be whole numbers"),
     ('{"foo": 1}', 'an iMessage cursor is {"rowid": N}'), ('{"rowid": -5}', "not negative"), ("rowid=5", "VALUE must be JSON")],
)  # fmt: skip
def test_a_cursor_given_by_hand_is_checked(tmp_path: Path, value: str, says: str) -> None:
    """Wrong shapes, types, negative positions and non-JSON exit 2 with one line naming what a valid cursor looks like; nothing is saved."""
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}})
    out = run_cli("cursor", "set", "imessage", value, config=cfg)
    assert out.returncode == 2 and says in out.stderr and _one_line(out.stderr), out.stderr
    assert not (tmp_path / "state" / "cursors.json").exists()


def test_moving_a_cursor_back_by_hand_asks_first_and_is_logged(tmp_path: Path) -> None:
    """Backward `cursor set` needs a yes (like reset): with no terminal to ask on, one line saying to pass --yes, exit 2
    (not click's bare `Aborted!`, exit 1); with --yes it is saved and logged as cursor.set.
    """
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")}})
    assert run_cli("cursor", "set", "imessage", '{"rowid": 50}', config=cfg).returncode == 0
    for stdin in ("n\n", ""):  # an answer on a pipe, or stdin closed: neither is a terminal
        refused = run_cli("cursor", "set", "imessage", '{"rowid": 10}', config=cfg, input=stdin)
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        assert _one_line(refused.stderr) and "moves the cursor of 'imessage' back (50 -> 10)" in refused.stderr
        assert refused.stderr.rstrip().endswith("pass --yes") and "Aborted" not in refused.stderr
    reset = run_cli("cursor", "reset", "imessage", config=cfg)
    assert reset.returncode == 2 and _one_line(reset.stderr) and "pass --yes" in reset.stderr
    assert json.loads(run_cli("cursor", "show", "imessage", "--json", config=cfg).stdout) == {"rowid": 50}
    assert run_cli("cursor", "set", "imessage", '{"rowid": 10}', "--yes", config=cfg).returncode == 0
    assert [e["positions_after"] for e in read_log(tmp_path / "state", "imessage") if e["event"] == "cursor.set"][-1] == {"rowid": 10}


def test_a_heartbeat_url_without_a_scheme_is_a_config_error_that_never_shows_the_url(tmp_path: Path) -> None:
    """`heartbeat_url = "hc-ping.com/<secret>"`: exit 2 naming the key (poll: its line; status: the source's CONFIG row);
    the secret is in no output."""
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "c.db"), "heartbeat_url": "hc-ping.com/SECRET-77"}})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 2 and "sources.imessage.heartbeat_url" in out.stderr and _one_line(out.stderr)
    assert "SECRET-77" not in out.stdout + out.stderr
    out = run_cli("status", config=cfg)
    assert out.returncode == 2 and out.stderr == "" and "CONFIG" in out.stdout and "sources.imessage.heartbeat_url" in out.stdout
    assert "SECRET-77" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    "args",
    [("backfill", "imessage"), ("cursor", "reset", "imessage", "--yes"), ("cursor", "set", "imessage", '{"rowid": 1}'), ("tail",),
     ("tail", "-f"), ("dashboard", "--once"), ("dashboard",)],
    ids=["backfill", "cursor-reset", "cursor-set", "tail", "tail-f", "dashboard-once", "dashboard"],
)  # fmt: skip
def test_an_unusable_state_folder_is_one_line_for_every_command(tmp_path: Path, args: tuple[str, ...]) -> None:
    """backfill, cursor set/reset, tail (-f) and dashboard (--once or live) on a state folder that cannot be created: one line
    naming what is in the way (the file where a folder of its path should be), exit 1."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "c.db")}}, state_dir=blocker / "state")
    out = run_cli(*args, config=cfg)
    assert out.returncode == 1 and f"{blocker}: is a file where memex needs a folder" in out.stderr and _one_line(out.stderr)


def test_a_folder_given_as_chat_db_says_so_without_the_full_disk_access_hint_on_linux(tmp_path: Path) -> None:
    """A directory as `db`: "is a folder, not chat.db; check `db`", and no macOS advice on Linux; backfill does not say "run again"."""
    cfg = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path)}})
    out = run_cli("poll", "imessage", config=cfg)
    assert out.returncode == 1 and "is a folder, not chat.db; check `db`" in out.stderr
    if sys.platform != "darwin":
        assert "Full Disk Access" not in out.stderr
    back = run_cli("backfill", "imessage", config=cfg)
    assert back.returncode == 1 and "is a folder" in back.stderr and "run the same command again" not in back.stderr


def test_a_disabled_source_named_on_the_command_line_is_skipped_with_a_line(tmp_path: Path) -> None:
    """`memex poll off` for `enabled = false`: one line saying so, exit 0, nothing polled."""
    cfg = write_config(tmp_path, {"off": {"type": "imessage", "db": str(tmp_path / "c.db"), "enabled": False}})
    out = run_cli("poll", "off", config=cfg)
    assert out.returncode == 0 and out.stderr.strip() == "memex: off: skipped: enabled = false in the config"
    assert read_log(tmp_path / "state", "off") == []


def test_debug_shows_the_traceback_of_an_internal_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An internal error is one line; with MEMEX_DEBUG=1 its traceback is logged too (for a bug report)."""
    monkeypatch.setitem(registry.BUILTIN, "fake", "tests.core.fake_poller:make")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"count": 3, "mode": "crash"}))
    cfg = config_mod.load(write_config(tmp_path, {"f": {"type": "fake", "spec": str(spec)}}))
    monkeypatch.delenv("MEMEX_DEBUG", raising=False)
    first = poll(cfg, "f")
    assert first.error is not None and first.error.startswith("internal error: KeyError at fake_poller.py")
    assert not [e for e in read_log(tmp_path / "state", "f") if e["event"] == "internal.traceback"]
    monkeypatch.setenv("MEMEX_DEBUG", "1")
    poll(cfg, "f")
    (tb,) = [e for e in read_log(tmp_path / "state", "f") if e["event"] == "internal.traceback"]
    assert "Traceback" in tb["traceback"] and "fake_poller.py" in tb["traceback"]


NOBODY = 65534


def _as_nobody(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``memex --config CONFIG ARGS`` as the unprivileged user ``nobody`` (uid 65534), off a terminal with stdin closed.

    Through ``setpriv`` where there is one, else by dropping to that user in the child before it starts python.
    """
    import shutil

    def drop() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    setpriv = shutil.which("setpriv")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if setpriv else []
    return subprocess.run([*prefix, sys.executable, "-m", "memex", "--config", str(config), *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, cwd=ROOT, preexec_fn=None if setpriv else drop)  # fmt: skip


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder every user can reach (pytest's own tmp folders are private to root); skips unless root can drop to ``nobody``."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run memex as another user (nobody) who cannot read the state folder")
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="memex-perm-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        probe = _as_nobody(folder / "none.toml", "--version")
        why = probe.stderr.strip()[-200:] if probe.returncode else ""
    except OSError as exc:
        why = f"{type(exc).__name__}: {exc.strerror}"
    if why:
        shutil.rmtree(folder)
        pytest.skip(f"nobody cannot run this checkout's python ({why})")
    yield folder
    shutil.rmtree(folder)


@pytest.mark.parametrize("args", [("backfill", "imessage"), ("tail",), ("dashboard", "--once"), ("status",), ("poll", "imessage")],
                         ids=["backfill", "tail", "dashboard-once", "status", "poll"])  # fmt: skip
def test_a_state_folder_of_another_user_is_one_line_naming_it_and_who_can(shared_folder: Path, args: tuple[str, ...]) -> None:
    """Run as a user who cannot read state_dir (root's, 0700): one line naming the folder, its owner and what to do, exit 1,
    never ``internal error: PermissionError``; a log file of another user inside a usable folder is one line naming the file.
    """
    state = shared_folder / "state"
    cfg = write_config(shared_folder, {"imessage": {"type": "imessage", "db": str(shared_folder / "chat.db")}}, state_dir=state)
    cfg.chmod(0o644)
    (state / "logs").mkdir(parents=True)
    (state / "logs" / "imessage.jsonl").write_text('{"event": "poll"}\n')
    state.chmod(0o700)
    out = _as_nobody(cfg, *args)
    assert (out.returncode, out.stdout) == (1, ""), out.stderr
    assert _one_line(out.stderr), out.stderr
    if args[0] == "status":  # it only reads, and names the folder it could not look into
        assert f"{state}: permission denied; run memex as the user that owns it" in out.stderr
        return
    assert f"{state}: cannot use the state folder: it is root's and this user (nobody) cannot read it" in out.stderr
    assert "run memex as root" in out.stderr
    if args[0] in ("tail", "dashboard"):
        os.chown(state, NOBODY, NOBODY)
        os.chown(state / "logs", NOBODY, NOBODY)
        (state / "logs" / "imessage.jsonl").chmod(0o600)  # still root's
        out = _as_nobody(cfg, *args)
        assert out.returncode == 1 and _one_line(out.stderr), out.stderr
        assert f"{state / 'logs' / 'imessage.jsonl'}: permission denied; run memex as the user that owns it" in out.stderr
