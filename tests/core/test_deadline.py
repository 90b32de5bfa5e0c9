"""--max-seconds and SIGTERM hold when a server hangs: the poll's deadline reaches the S3 clients and the IMAP poller.

The servers here accept the connection and never answer (``tests/servers/hang.py``), or are a real moto S3
behind the fault proxy that holds one PUT forever. Every bound asserted is the feature itself
(``--max-seconds`` plus the grace, or the grace after SIGTERM) with a few seconds' slack for process
start-up on a loaded machine; the naive clients take a minute or more.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memex import config as config_mod
from memex import deadline as deadline_mod
from memex import runner
from memex.deadline import GRACE, SAVE_SECONDS, Deadline, Interrupted
from pollers.email.imap import poller as imap
from tests.conftest import ROOT, FaultProxy, patience, read_log, s3_objects, write_config
from tests.email.test_maildir import deliver, mail, make_maildir
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server
from tests.servers.hang import FreezingProxy, HungServer

__all__ = ["dovecot_server"]  # the `dovecot` fixture

SLACK = 10.0  # process start-up and shutdown on a loaded 2-core machine (7 s seen at load 30); a request deaf to the deadline holds 60 s
MAILS = 12
IMAP_PASSWORD_ENV = "MEMEX_TEST_HANG_PASSWORD"


def maildir_source(tmp_path: Path) -> dict[str, Any]:
    """A Maildir with a few mails, as a source table."""
    root = make_maildir(tmp_path / "Maildir")
    for n in range(1, MAILS + 1):
        deliver(root, f"{1700000000 + n}.M{n}P1.host", mail(n))
    return {"type": "maildir", "path": str(root), "settle_seconds": 0}


def imap_source(port: int) -> dict[str, Any]:
    """An IMAP source on a loopback port."""
    return {"type": "imap", "host": "127.0.0.1", "port": port, "security": "none", "user": "me", "password_env": IMAP_PASSWORD_ENV}


@contextmanager
def memex_process(config: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``memex ARGS`` as a process; killed at the end whatever happened."""
    env = {k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}
    env[IMAP_PASSWORD_ENV] = "pw"
    proc = subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def finish(proc: subprocess.Popen[str], within: float) -> tuple[float, str]:
    """Wait for the process to end (failing past ``within`` seconds); its run time from now and its stderr."""
    started = time.monotonic()
    within = patience(within)
    try:
        _, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the poll was still running {within:.0f}s later") from None
    return time.monotonic() - started, err


def sigterm_when(server: HungServer, config: Path, source: str, what: str, ready: Callable[[], bool],
                 command: str = "poll") -> tuple[float, int, str]:  # fmt: skip
    """Poll (with a 300 s budget) or backfill, SIGTERM it once ``ready()``; how long it took to end after that, exit code, stderr."""
    args = ["--max-seconds", "300"] if command == "poll" else []
    with memex_process(config, command, source, *args) as proc:
        server.wait_for(what, lambda: ready() or proc.poll() is not None, 120)
        assert proc.poll() is None, f"memex ended before {what}: {proc.stderr.read() if proc.stderr else ''}"
        proc.send_signal(signal.SIGTERM)
        took, err = finish(proc, GRACE + SLACK + 60)
    assert proc.returncode is not None
    return took, proc.returncode, err


def poll_with_budget(config: Path, source: str, max_seconds: float, server: HungServer) -> tuple[float, int, str]:
    """Poll with ``--max-seconds``; its run time from its first connection to ``server`` (process start-up, which a
    loaded machine can stretch to seconds, is not the poll's), exit code and stderr. The time limit counts from the
    poll's start, before that connection, so the bound holds as well measured from there.
    """
    with memex_process(config, "poll", source, "--max-seconds", str(max_seconds)) as proc:
        server.wait_for("the poll to connect", lambda: server.accepted > 0 or proc.poll() is not None, 120)
        started = time.monotonic()
        _, err = finish(proc, max_seconds + GRACE + SLACK + 60)
    assert proc.returncode is not None
    return time.monotonic() - started, proc.returncode, err


STORES = [pytest.param("lean", id="lean"), pytest.param("boto3", id="boto3")]


@pytest.mark.parametrize("client", STORES)
def test_hung_s3_endpoint_ends_the_poll_at_max_seconds(tmp_path: Path, client: str) -> None:
    """S3 accepts and never answers: the poll exits 1 within --max-seconds + grace, one line naming the time limit."""
    max_seconds = 15.0  # long enough for a loaded machine to import boto3 and send its first request before the limit
    with HungServer() as server:
        cfg = write_config(tmp_path, {"md": maildir_source(tmp_path)},
                           store={"url": "s3://bucket/p", "endpoint_url": f"http://127.0.0.1:{server.port}", "client": client})  # fmt: skip
        elapsed, code, err = poll_with_budget(cfg, "md", max_seconds, server)
        assert server.received > 0  # the request went out and hung
    assert elapsed < max_seconds + GRACE + SLACK, f"ran {elapsed:.1f}s"
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1 and "no answer before the poll's time limit" in err
    last = read_log(tmp_path / "state", "md")[-1]
    assert last["stopped"] == "deadline" and last["status"] == "error"
    assert not (tmp_path / "state" / "cursors.json").exists() or "cursor" not in json.loads(
        (tmp_path / "state" / "cursors.json").read_text()
    )["sources"].get("md", {})


@pytest.mark.parametrize("client", STORES)
def test_sigterm_ends_a_poll_stuck_in_an_s3_request_within_seconds(tmp_path: Path, client: str) -> None:
    """SIGTERM while a PUT hangs (budget 300 s): the poll ends within the grace, exit 0, summary ``stopped=signal``."""
    with HungServer() as server:
        cfg = write_config(tmp_path, {"md": maildir_source(tmp_path)},
                           store={"url": "s3://bucket/p", "endpoint_url": f"http://127.0.0.1:{server.port}", "client": client})  # fmt: skip
        took, code, err = sigterm_when(server, cfg, "md", "the PUT to reach the hung server", lambda: server.received > 0)
    assert took < GRACE + SLACK, f"ended {took:.1f}s after SIGTERM"
    assert code == 0, err
    last = read_log(tmp_path / "state", "md")[-1]
    assert last["stopped"] == "signal" and last["new"] == 0


def test_sigterm_during_a_hung_put_saves_the_progress_before_it(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> None:
    """A real S3 holds the 7th PUT forever; SIGTERM ends the poll within seconds, the cursor covers the 3 mails stored.

    The next poll stores the rest; every mail is stored exactly once.
    """
    release = threading.Event()
    with FaultProxy(s3_endpoint) as proxy:

        def rule(method: str, _key: str) -> str | None:
            if method == "PUT" and proxy.puts == 7:
                release.wait(120)  # the .eml of the 4th mail: never answered while the poll runs
            return None

        proxy.rule = rule
        cfg = write_config(tmp_path, {"md": maildir_source(tmp_path)}, store={"url": f"s3://{s3_bucket}/p", "endpoint_url": proxy.url})
        try:
            with memex_process(cfg, "poll", "md", "--max-seconds", "300") as proc:
                deadline = time.monotonic() + 60
                while proxy.puts < 7:
                    assert time.monotonic() < deadline and proc.poll() is None, "the poll never reached the 7th PUT"
                    time.sleep(0.05)
                proc.send_signal(signal.SIGTERM)
                took, err = finish(proc, GRACE + SLACK + 60)
        finally:
            release.set()
        assert took < GRACE + SLACK and proc.returncode == 0, err
        first = read_log(tmp_path / "state", "md")[-1]
        assert (first["stopped"], first["new"]) == ("signal", 3)
        cursor = json.loads((tmp_path / "state" / "cursors.json").read_text())["sources"]["md"]["cursor"]
        assert first["positions_after"] == {"INBOX": cursor["folders"]["INBOX"]["ctime_ns"]}
        with memex_process(cfg, "poll", "md") as proc:
            _, err = finish(proc, 60)
        assert proc.returncode == 0, err
    second = read_log(tmp_path / "state", "md")[-1]
    assert (first["new"] + second["new"], second["dup"]) == (MAILS, 0)
    records = [json.loads(b)["native_id"] for k, b in s3_objects(s3_endpoint, s3_bucket, "p/messages/").items() if k.endswith(".json")]
    assert sorted(records) == sorted(f"m{n}@example.com" for n in range(1, MAILS + 1))


def test_hung_imap_server_ends_the_poll_at_max_seconds(tmp_path: Path) -> None:
    """An IMAP server that accepts and never greets: exit 1 within --max-seconds + grace, one clear line."""
    max_seconds = 15.0  # long enough for a loaded machine to import boto3 and send its first request before the limit
    with HungServer() as server:
        cfg = write_config(tmp_path, {"mail": imap_source(server.port)})
        elapsed, code, err = poll_with_budget(cfg, "mail", max_seconds, server)
        assert server.accepted > 0
    assert elapsed < max_seconds + GRACE + SLACK, f"ran {elapsed:.1f}s"
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "no answer before the poll's time limit" in err and "127.0.0.1" in err


def test_sigterm_ends_a_poll_waiting_on_a_hung_imap_server_within_seconds(tmp_path: Path) -> None:
    """SIGTERM while the IMAP server says nothing (budget 300 s, socket timeout 30 s): ended within the grace, exit 0."""
    with HungServer() as server:
        cfg = write_config(tmp_path, {"mail": imap_source(server.port)})
        took, code, err = sigterm_when(server, cfg, "mail", "the poll to connect", lambda: server.accepted > 0)
    assert took < GRACE + SLACK, f"ended {took:.1f}s after SIGTERM"
    assert code == 0, err
    assert read_log(tmp_path / "state", "mail")[-1]["stopped"] == "signal"


def test_hung_s3_state_ends_the_poll_soon_after_max_seconds(tmp_path: Path) -> None:
    """With cursors and leases on S3 (state_url) and that S3 hung, the poll exits 1 within max-seconds + the saving time."""
    max_seconds = 15.0  # long enough for a loaded machine to import boto3 and send its first request before the limit
    with HungServer() as server:
        cfg = write_config(tmp_path, {"md": maildir_source(tmp_path)}, state_url="s3://bucket/state",
                           store={"url": "s3://bucket/p", "endpoint_url": f"http://127.0.0.1:{server.port}"})  # fmt: skip
        elapsed, code, err = poll_with_budget(cfg, "md", max_seconds, server)
        assert server.received > 0
    assert elapsed < max_seconds + SAVE_SECONDS + GRACE + SLACK, f"ran {elapsed:.1f}s"
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "leases/md.json" in err and "no answer from the state server" in err  # the state's own deadline, not the poll's stop


def test_sigterm_ends_a_backfill_stuck_on_a_hung_s3_within_seconds(tmp_path: Path) -> None:
    """A backfill's uploads all hang: SIGTERM ends it within the grace with exit 130 (stopped, the same command continues)."""
    with HungServer() as server:
        cfg = write_config(tmp_path, {"md": maildir_source(tmp_path)},
                           store={"url": "s3://bucket/p", "endpoint_url": f"http://127.0.0.1:{server.port}"})  # fmt: skip
        took, code, err = sigterm_when(server, cfg, "md", "the uploads to hang", lambda: server.received > 0, command="backfill")
    assert took < GRACE + SLACK, f"ended {took:.1f}s after SIGTERM"
    assert code == 130, err
    state = json.loads((tmp_path / "state" / "cursors.json").read_text())["sources"]["md"]["backfill"]
    assert state["status"] == "stopped" and state["done"] == 0


@pytest.mark.parametrize("how", ["max-seconds", "stop"])
def test_imap_server_hung_mid_fetch(tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Real Dovecot goes silent at the 2nd UID FETCH of a session: the poll ends at max-seconds + grace (an error, nothing
    stored in the whole budget) or within the grace of a stop request (stopped=signal); the next poll stores every mail once.
    """
    from tests.email.test_imap import mail as imap_mail

    monkeypatch.setattr(imap, "FETCH_CHUNK", 4)
    monkeypatch.setenv(IMAP_PASSWORD_ENV, PASSWORD)
    user = dovecot.new_user()
    for n in range(1, 11):
        dovecot.append(user, "INBOX", imap_mail(n))
    with FreezingProxy(dovecot.port, b"UID FETCH", after=2) as proxy:
        cfg = config_mod.load(write_config(tmp_path, {"mail": {**imap_source(proxy.port), "user": user}}))
        stop = threading.Event()
        results: list[runner.PollResult] = []
        budget = 4.0 if how == "max-seconds" else 300.0
        worker = threading.Thread(target=lambda: results.append(runner.poll(cfg, "mail", max_seconds=budget, stop=stop)))
        started = time.monotonic()
        worker.start()
        assert proxy.frozen.wait(60), "the poll never reached its 2nd UID FETCH"
        if how == "stop":
            started = time.monotonic()
            stop.set()
        worker.join(budget + GRACE + SLACK + 60 if how == "max-seconds" else GRACE + SLACK + 60)
        took = time.monotonic() - started
        assert not worker.is_alive(), "the poll is still waiting on the hung server"
        first = results[0]
        if how == "max-seconds":
            assert took < budget + GRACE + SLACK, f"ran {took:.1f}s"
            assert (first.status, first.exit_code, first.stopped) == ("error", 1, "deadline")
            assert "UID FETCH" in (first.error or "") and "no answer before the poll's time limit" in (first.error or "")
        else:
            assert took < GRACE + SLACK, f"ended {took:.1f}s after the stop request"
            assert (first.exit_code, first.stopped) == (0, "signal")
        proxy.freeze_on = None
        second = runner.poll(cfg, "mail", max_seconds=60)
    assert (first.new + second.new, second.dup, second.status) == (10, 0, "ok")


def test_deadline_caps_timeouts_and_backoffs() -> None:
    """A socket timeout never exceeds the time left plus the grace; a backoff that would pass the end raises at once."""
    d = Deadline(time.monotonic() + 1.0, grace=0.5)
    assert d.timeout(60, "x") <= 1.5 and d.timeout(0.2, "x") == 0.2
    started = time.monotonic()
    with pytest.raises(Interrupted) as caught:
        d.sleep(5, "upload to s3://b/k")
    assert caught.value.reason == "deadline" and time.monotonic() - started < 0.5
    assert "upload to s3://b/k: no answer before the poll's time limit" in str(caught.value)
    stop = threading.Event()
    d = Deadline(None, stop)
    threading.Timer(0.1, stop.set).start()
    with pytest.raises(Interrupted) as caught:
        d.sleep(30, "x")
    assert caught.value.reason == "signal"
    assert deadline_mod.NEVER.timeout(60, "x") == 60


def test_guard_cuts_a_blocked_call_after_the_grace_and_call_stops_waiting() -> None:
    """A stop request shuts a blocked socket within the grace; ``call`` stops waiting for a stuck function just as soon."""
    import socket

    stop = threading.Event()
    d = Deadline(None, stop, grace=0.3)
    with HungServer() as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        threading.Timer(0.2, stop.set).start()
        started = time.monotonic()
        with d.guard(lambda: sock.shutdown(socket.SHUT_RDWR)):
            assert sock.recv(10) == b""  # returns only because the guard shut it down
        assert 0.4 < time.monotonic() - started < 5
        sock.close()
    never = threading.Event()
    d = Deadline(time.monotonic() + 0.2, grace=0.3)
    started = time.monotonic()
    with pytest.raises(Interrupted):
        d.call(lambda: never.wait(30), "a stuck call")
    assert time.monotonic() - started < 5
    d.close()
