"""Signal through a running signal-cli daemon (pollers/signal/daemon.py), against a stand-in that speaks its JSON-RPC
over a UNIX socket and HTTP (tests/signal/daemon_standin.py), in polls and under ``memex watch``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Gate, read_log, run_cli, wait_until, write_config
from tests.core.test_watch import STORED_WITHIN, stop, watching
from tests.signal import signal_standin as sc
from tests.signal.daemon_standin import free_port
from tests.signal.test_signal import T0, stored


class Standin:
    """The daemon stand-in as a process the test can kill and start again."""

    def __init__(self, folder: Path, mode: str) -> None:
        self.folder, self.mode = folder, mode
        folder.mkdir(parents=True, exist_ok=True)
        self.socket = str(folder / "socket")
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and wait until it listens."""
        (self.folder / "daemon.ready").unlink(missing_ok=True)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.signal.daemon_standin", str(self.folder), "--socket", self.socket,
                                      "--http", str(self.port), "--mode", self.mode], cwd=ROOT)  # fmt: skip
        wait_until(lambda: (self.folder / "daemon.ready").exists(), STORED_WITHIN, "the daemon stand-in to listen")

    def kill(self) -> None:
        """SIGKILL it (its socket is left behind, as a crashed daemon leaves it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def calls(self) -> list[str]:
        """The methods called so far."""
        path = self.folder / "calls.log"
        return path.read_text().split() if path.exists() else []


@contextmanager
def daemon(tmp_path: Path, mode: str = "manual") -> Iterator[Standin]:
    """A running stand-in (killed at the end)."""
    standin = Standin(tmp_path / "sc", mode)
    standin.start()
    try:
        yield standin
    finally:
        standin.kill()


def config(tmp_path: Path, address: str, **keys: Any) -> Path:
    """A config with signal source ``sig`` receiving through the daemon at ``address`` (no signal-cli executable)."""
    table = {"type": "signal", "account": sc.ACCOUNT, "executable": str(tmp_path / "no-signal-cli"), "daemon": address,
             "receive_timeout": 1, **keys}  # fmt: skip
    return write_config(tmp_path, {"sig": table})


def polls(tmp_path: Path) -> list[dict[str, Any]]:
    """The source's poll lines."""
    return [e for e in read_log(tmp_path / "state", "sig") if e["event"] == "poll"]


def texts(tmp_path: Path) -> list[str]:
    """The stored messages' texts, sorted."""
    return sorted(str(r.get("text")) for r in stored(tmp_path).values())


@pytest.mark.parametrize("via", ["unix", "http"])
def test_a_poll_receives_through_the_daemon_and_names_groups_by_its_list(tmp_path: Path, via: str) -> None:
    """``receive`` on the daemon (socket or HTTP) brings each message once, acknowledged by it; ``listGroups`` names a
    group; the poll line says ``receive: ok``, never ``busy``."""
    with daemon(tmp_path) as d:
        address = f"unix:{d.socket}" if via == "unix" else f"http://127.0.0.1:{d.port}"
        cfg = config(tmp_path, address)
        sc.groups(d.folder, {sc.GROUP: "Climbing"})
        group = {"groupId": sc.GROUP, "revision": 3, "type": "DELIVER"}
        sc.queue(d.folder, sc.message(sc.ALICE, T0, "one"), sc.message(sc.ALICE, T0 + 1, "two", groupInfo=group))
        out = run_cli("poll", "sig", config=cfg)
        assert out.returncode == 0, out.stderr
        assert run_cli("poll", "sig", config=cfg).returncode == 0
        assert "receive" in d.calls() and "listGroups" in d.calls()
    assert texts(tmp_path) == ["one", "two"]
    assert len(sc.acked(d.folder)) == 2
    lines = polls(tmp_path)
    assert [(e["receive"], e["new"]) for e in lines] == [("ok", 2), ("ok", 0)]
    grouped = next(r for r in stored(tmp_path).values() if r.get("text") == "two")
    assert "Climbing" in json.dumps(grouped)


def test_a_daemon_that_is_down_is_one_clear_error_and_loses_nothing(tmp_path: Path) -> None:
    """No daemon at the socket: exit 1 with one line naming the address and how to start it; started, it delivers."""
    standin = Standin(tmp_path / "sc", "manual")
    cfg = config(tmp_path, f"unix:{standin.socket}")
    sc.queue(standin.folder, sc.message(sc.ALICE, T0, "waited"))
    out = run_cli("poll", "sig", config=cfg)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "--receive-mode=manual" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    standin.start()
    try:
        assert run_cli("poll", "sig", config=cfg).returncode == 0
    finally:
        standin.kill()
    assert texts(tmp_path) == ["waited"]


def test_a_poll_killed_after_the_daemon_handed_over_keeps_the_messages_in_the_spool(tmp_path: Path) -> None:
    """The daemon acknowledges what ``receive`` returns: the poll writes it to the spool (synced) before it renders,
    so a poll killed mid-store (SIGKILL at its 2nd message) loses nothing; the next poll, to which the daemon has
    nothing more to give, stores the rest from the spool, each message once."""
    with daemon(tmp_path) as d:
        cfg = config(tmp_path, f"unix:{d.socket}")
        sc.queue(d.folder, *(sc.message(sc.ALICE, T0 + i, f"m{i}") for i in range(5)))
        gate = Gate(tmp_path, 2)
        proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(cfg), "poll", "sig"], cwd=ROOT, env=gate.env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        gate.wait_held(proc)
        proc.kill()
        proc.wait(10)
        assert len(sc.acked(d.folder)) == 5  # the daemon will never hand them over again
        assert run_cli("poll", "sig", config=cfg).returncode == 0
    assert texts(tmp_path) == [f"m{i}" for i in range(5)]


def test_a_daemon_in_its_default_mode_is_warned_about_and_what_it_pushes_is_kept(tmp_path: Path) -> None:
    """A daemon receiving on its own refuses ``receive``: each poll warns once (``--receive-mode=manual``), exits 0;
    under the watcher, the messages it pushes to the listener's connection are spooled and stored."""
    with daemon(tmp_path, "on-start") as d:
        cfg = config(tmp_path, f"unix:{d.socket}", interval=3600)
        out = run_cli("poll", "sig", config=cfg)
        assert out.returncode == 0, out.stderr
        warnings = [e for e in read_log(tmp_path / "state", "sig") if e["event"] == "source.warning"]
        assert len(warnings) == 1 and "--receive-mode=manual" in warnings[0]["reason"]
        assert polls(tmp_path)[-1]["receive"] == "daemon-mode"
        with watching(cfg, "sig") as proc:
            wait_until(lambda: any(e["event"] == "watch.push" and e.get("state") == "up" for e in read_log(tmp_path / "state", "sig")),
                       STORED_WITHIN, "the listener to connect")  # fmt: skip
            sc.queue(d.folder, sc.message(sc.ALICE, T0, "pushed"))
            wait_until(lambda: texts(tmp_path) == ["pushed"], STORED_WITHIN, "the pushed message to be stored")
            stop(proc)


@pytest.mark.parametrize("via", ["unix", "http"])
def test_the_watcher_stores_within_seconds_and_survives_the_daemon_killed_and_restarted(tmp_path: Path, via: str) -> None:
    """Under ``memex watch`` (interval an hour) the listener subscribes (the socket's ``subscribeReceive``, or the HTTP
    event stream): a message is stored within seconds; the daemon killed (SIGKILL) and started again is reconnected
    with backoff, and what was queued while it was down is stored; a cron poll beside the watcher leaves the receiving
    to it; each message once."""
    with daemon(tmp_path) as d:
        address = f"unix:{d.socket}" if via == "unix" else f"http://127.0.0.1:{d.port}"
        cfg = config(tmp_path, address, interval=3600)
        with watching(cfg, "sig") as proc:
            state = tmp_path / "state"
            up = lambda n: len([e for e in read_log(state, "sig") if e["event"] == "watch.push" and e.get("state") == "up"]) >= n  # noqa: E731
            wait_until(lambda: up(1), STORED_WITHIN, "the listener to connect")
            sc.queue(d.folder, sc.message(sc.ALICE, T0, "first"))
            wait_until(lambda: texts(tmp_path) == ["first"], STORED_WITHIN, "the first message")
            assert run_cli("poll", "sig", config=cfg).returncode == 0
            assert polls(tmp_path)[-1]["receive"] in ("listener", "ok")
            d.kill()
            sc.queue(d.folder, sc.message(sc.ALICE, T0 + 1, "while down"))
            wait_until(lambda: any(e["event"] == "watch.push" and e.get("state") == "down" for e in read_log(state, "sig")),
                       STORED_WITHIN, "the listener to see the daemon gone")  # fmt: skip
            d.start()
            wait_until(lambda: up(2), STORED_WITHIN, "the listener to reconnect")
            sc.queue(d.folder, sc.message(sc.ALICE, T0 + 2, "after"))
            wait_until(lambda: len(texts(tmp_path)) == 3, STORED_WITHIN, "every message")
            stop(proc)
    assert texts(tmp_path) == ["after", "first", "while down"]
    assert sum(e["new"] for e in polls(tmp_path)) == 3
    assert not (tmp_path / "state" / "spool" / "sig" / "listening").exists()  # the watcher's mark is gone with it


@pytest.mark.parametrize("address", ["ftp://127.0.0.1:21", "tcp:7583", "unix:", "http://127.0.0.1:8080/api"])
def test_a_daemon_address_memex_cannot_use_is_a_config_error_naming_the_key(tmp_path: Path, address: str) -> None:
    """``daemon`` must be ``unix:PATH``, ``tcp:HOST:PORT`` or ``http://HOST:PORT``: anything else is exit 2 with one line
    naming the file and the key, before anything runs."""
    out = run_cli("poll", "sig", config=config(tmp_path, address))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "sources.sig.daemon" in out.stderr and "unix:/path/to/socket" in out.stderr
