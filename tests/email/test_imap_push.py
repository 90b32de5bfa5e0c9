"""IMAP push in ``memex watch`` against a real Dovecot: NOTIFY and IDLE, and the network faults a watcher must survive.

Every test runs ``memex watch`` as a process with the source's interval at an hour, so that only push (or the start
poll) can store a mail within the test's patience; the re-IDLE interval and the answer deadline are a second or two
(``push_renew``, ``timeout``) so that what takes minutes in life takes seconds here.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import read_log, run_cli, wait_until, write_config
from tests.core.test_watch import STORED_WITHIN, polls, started, stop, stored_ids, watching
from tests.email.test_imap import PASSWORD_ENV, mail
from tests.email.test_imap_oauth import account, idp, microsoft, oauth_dovecot, sign_in
from tests.email.test_imap_oauth import load as oauth_load
from tests.servers import dovecot as dovecot_servers
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server
from tests.servers.identity import IdentityServer
from tests.servers.imap_proxy import ImapProxy, imap_proxy

__all__ = ["account", "dovecot_server", "idp", "oauth_dovecot"]  # fixtures

FAST = {"interval": 3600, "timeout": 2, "push_renew": 1}  # only push stores within the test; dead within ~3 s


def push_config(tmp_path: Path, port: int, user: str, **more: Any) -> Path:
    """A config with imap source ``mail`` for ``user`` on ``port`` (Dovecot, or a proxy in front of it)."""
    table = {"type": "imap", "host": "127.0.0.1", "port": port, "security": "none", "user": user, "password_env": PASSWORD_ENV}
    return write_config(tmp_path, {"mail": {**table, **FAST, **more}})


def env() -> dict[str, str]:
    """The watcher's environment: the password in the variable the source names."""
    return {**{k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}, PASSWORD_ENV: PASSWORD}


def push_lines(folder: Path, **match: Any) -> list[dict[str, Any]]:
    """The source's ``watch.push`` lines (``folder``: the state folder) whose fields match ``match``."""
    return [e for e in read_log(folder, "mail") if e["event"] == "watch.push" and all(e.get(k) == v for k, v in match.items())]


def plan_line(state: Path) -> dict[str, Any]:
    """The listener's ``watch.push_plan`` line, once written."""
    return wait_until(lambda: next((e for e in read_log(state, "mail") if e["event"] == "watch.push_plan"), None), STORED_WITHIN,
                      "the push plan")  # fmt: skip


def up(state: Path, count: int) -> None:
    """Wait until ``count`` connections came up in all (the first, then reconnections)."""
    wait_until(lambda: len(push_lines(state, state="up")) >= count, STORED_WITHIN, f"{count} push connection(s) up")


def deliver_and_wait(server: Dovecot, user: str, state: Path, numbers: range) -> None:
    """APPEND mails ``numbers`` to INBOX and wait until each is stored."""
    for n in numbers:
        server.append(user, "INBOX", mail(n))
    want = {f"m{n}@example.com" for n in numbers}
    wait_until(lambda: want <= set(stored_ids(state)), STORED_WITHIN, f"mails {numbers} to be stored")


def once_each(state: Path, count: int) -> None:
    """Every stored mail is stored once, and the polls counted ``count`` new mails in all (no duplicate)."""
    ids = stored_ids(state)
    assert len(ids) == len(set(ids)) == count
    assert sum(e["new"] for e in polls(state, "mail")) == count


@contextmanager
def live(tmp_path: Path, port: int, user: str, **more: Any) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``memex watch mail`` on a push config (:func:`push_config`), once its start poll ran and its connection is up."""
    state = tmp_path / "state"
    with watching(push_config(tmp_path, port, user, **more), "mail", env=env()) as proc:
        started(state, "mail")
        up(state, 1)
        yield proc, state


@pytest.fixture
def proxy(dovecot: Dovecot) -> Iterator[ImapProxy]:
    """A TCP proxy in front of the session's Dovecot that the test can make misbehave."""
    with imap_proxy(dovecot.port) as p:
        yield p


def test_notify_stores_a_mail_within_seconds_though_the_interval_is_an_hour(tmp_path: Path, dovecot: Dovecot) -> None:
    """Dovecot offers NOTIFY: one connection watches every mailbox, and a mail in either is stored by a push poll."""
    user = dovecot.new_user()
    dovecot.append(user, "Archive", mail("old"))
    config = push_config(tmp_path, dovecot.port, user, mailboxes=["INBOX", "Archive"], push_renew=300)
    state = tmp_path / "state"
    with watching(config, "mail", env=env()) as proc:
        started(state, "mail")
        plan = plan_line(state)
        assert plan["how"] == "notify" and plan["mailboxes"] == ["Archive", "INBOX"] and plan["connections"] == 1
        up(state, 1)
        dovecot.append(user, "Archive", mail(1))
        deliver_and_wait(dovecot, user, state, range(2, 4))
        wait_until(lambda: "m1@example.com" in stored_ids(state), STORED_WITHIN, "the Archive mail")
        shown = run_cli("status", config=config, env=env())
        row = next(ln for ln in shown.stdout.splitlines() if ln.startswith("mail "))
        assert "MODE" in shown.stdout and " push " in row and "s after it arrived" in row, shown.stdout
        stop(proc)
    shown = run_cli("status", config=config, env=env())
    assert "MODE" not in shown.stdout, shown.stdout  # the watcher stopped: cron (or nothing) polls it now
    once_each(state, 4)
    start_line = next(e for e in read_log(state, "mail") if e["event"] == "watch.start")
    assert start_line["mode"] == "push"
    assert {e["trigger"] for e in polls(state, "mail") if e["new"]} <= {"start", "push"}
    assert any(e["trigger"] == "push" and e["new"] and e["waited_s"] >= 0 for e in polls(state, "mail"))


def test_idle_watches_the_live_mailboxes_within_the_connection_cap(tmp_path: Path, dovecot: Dovecot) -> None:
    """With ``push = "idle"``, one IDLE connection per push mailbox, never more than the cap less the poll's own."""
    user = dovecot.new_user()
    for box in ("A", "B", "C"):
        dovecot.append(user, box, mail(f"old-{box}"))
    config = push_config(tmp_path, dovecot.port, user, push="idle", mailboxes=["INBOX", "A", "B", "C"],
                         push_mailboxes=["INBOX", "A", "B", "C"], push_connections=3)  # fmt: skip
    state = tmp_path / "state"
    with watching(config, "mail", env=env()) as proc:
        plan = plan_line(state)
        assert plan["how"] == "idle" and plan["connections"] == 2 and plan["mailboxes"] == ["A", "B"]
        up(state, 2)
        dovecot.append(user, "B", mail(1))
        wait_until(lambda: len(stored_ids(state)) >= 4, STORED_WITHIN, "the old mails and the one pushed by IDLE on B")
        stop(proc)
    capped = [e for e in read_log(state, "mail") if e["event"] == "watch.push_capped"]
    assert capped and capped[0]["mailboxes"] == ["C", "INBOX"]
    assert len(push_lines(state, state="up")) == 2
    once_each(state, 4)


def test_a_server_refusing_the_notify_it_offers_is_watched_with_idle(tmp_path: Path, dovecot: Dovecot, proxy: ImapProxy) -> None:
    """A server that advertises NOTIFY but answers ``NOTIFY SET`` with BAD (here: the proxy garbles the command) is
    said so once (``watch.push_notify_refused``) and watched with IDLE on INBOX; a mail is pushed in."""
    proxy.rewrite = lambda line: line.replace(b" NOTIFY SET ", b" NOTIFY BOGUS ")
    user = dovecot.new_user()
    with live(tmp_path, proxy.port, user) as (proc, state):
        deliver_and_wait(dovecot, user, state, range(1, 2))
        stop(proc)
    refused = [e for e in read_log(state, "mail") if e["event"] == "watch.push_notify_refused"]
    assert len(refused) == 1 and "NOTIFY SET refused" in refused[0]["reason"]
    assert plan_line(state)["how"] == "idle"
    once_each(state, 1)


def test_a_black_holed_connection_is_found_dead_within_its_deadline_and_reopened(tmp_path: Path, dovecot: Dovecot,
                                                                                  proxy: ImapProxy) -> None:  # fmt: skip
    """The proxy stops forwarding without closing, and a mail arrives that the dead connection never reports: the next
    re-IDLE gets no answer within ``timeout``, the connection is declared dead (``watch.push`` down, with the reason)
    and opened again, and the poll after the reconnection stores that mail; the next one is pushed in."""
    user = dovecot.new_user()
    with live(tmp_path, proxy.port, user) as (proc, state):
        assert proxy.blackhole() >= 1
        dovecot.append(user, "INBOX", mail(1))  # its EXISTS goes into the black hole
        down = wait_until(lambda: push_lines(state, state="down"), STORED_WITHIN, "the dead connection to be noticed")
        assert "no answer to DONE within 2s" in down[0]["reason"] or "no answer to IDLE" in down[0]["reason"]
        up(state, 2)
        wait_until(lambda: "m1@example.com" in stored_ids(state), STORED_WITHIN, "the mail the dead connection missed")
        deliver_and_wait(dovecot, user, state, range(2, 3))
        stop(proc)
    once_each(state, 2)


def test_a_server_that_drops_idle_clients_never_drops_the_watcher(tmp_path: Path, dovecot: Dovecot, proxy: ImapProxy) -> None:
    """The server (here the proxy, on a 3 s clock instead of 30 minutes) drops a client silent that long: the re-IDLE
    every ``push_renew`` (1 s) keeps the connection, so it never goes down, and a mail long after is pushed in."""
    user = dovecot.new_user()
    proxy.idle_limit = 3.0
    config = push_config(tmp_path, proxy.port, user)
    state = tmp_path / "state"
    with watching(config, "mail", env=env()) as proc:
        up(state, 1)
        heard = proxy.lines
        # ten more client lines: five re-IDLEs (DONE, IDLE) a second apart, longer than the server's limit
        wait_until(lambda: proxy.lines >= heard + 10, STORED_WITHIN, "five re-IDLEs")
        deliver_and_wait(dovecot, user, state, range(1, 2))
        stop(proc)
    assert proxy.dropped == 0 and not push_lines(state, state="down")
    once_each(state, 1)


def test_a_dropped_idle_connection_is_reopened_and_nothing_is_missed(tmp_path: Path, dovecot: Dovecot, proxy: ImapProxy) -> None:
    """A re-IDLE slower than the server's limit: the server's BYE ends the connection, the watcher opens it again and
    polls (what came meanwhile), and mails delivered around the drop are stored once each."""
    user = dovecot.new_user()
    proxy.idle_limit = 1.0
    config = push_config(tmp_path, proxy.port, user, push_renew=60)
    state = tmp_path / "state"
    with watching(config, "mail", env=env()) as proc:
        up(state, 1)
        down = wait_until(lambda: push_lines(state, state="down"), STORED_WITHIN, "the BYE to end the connection")
        assert "BYE" in down[0]["reason"]
        proxy.idle_limit = None
        deliver_and_wait(dovecot, user, state, range(1, 3))
        stop(proc)
    once_each(state, 2)


def test_the_server_restarted_under_the_watcher_loses_nothing(tmp_path: Path) -> None:
    """Dovecot stops and starts again: the connection goes down, is reopened with backoff, and mails delivered while it
    was down and after are stored once each."""
    server = dovecot_servers.start()
    try:
        user = server.new_user()
        config = push_config(tmp_path, server.port, user)
        state = tmp_path / "state"
        with watching(config, "mail", env=env()) as proc:
            up(state, 1)
            deliver_and_wait(server, user, state, range(1, 2))
            dovecot_servers.restart(server)
            server.append(user, "INBOX", mail(2))  # while the watcher may still be reconnecting
            up(state, 2)
            deliver_and_wait(server, user, state, range(3, 4))
            wait_until(lambda: "m2@example.com" in stored_ids(state), STORED_WITHIN, "the mail delivered during the restart")
            stop(proc)
        assert push_lines(state, state="down")
        once_each(state, 3)
    finally:
        dovecot_servers.stop(server)


def test_a_watcher_stopped_like_a_sleeping_laptop_catches_up_when_continued(tmp_path: Path, dovecot: Dovecot,
                                                                          proxy: ImapProxy) -> None:  # fmt: skip
    """SIGSTOP (a laptop's sleep) while mails arrive, long enough that the server drops the silent connection (the
    proxy's idle limit, 1 s, stands in for the minutes a real sleep lasts), then SIGCONT: the watcher finds its
    connection gone, opens it again, and the poll after the reconnection brings every mail in, once."""
    user = dovecot.new_user()
    with live(tmp_path, proxy.port, user) as (proc, state):
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            proxy.idle_limit = 1.0  # only now: awake, the watcher's re-IDLE every second would race it
            for n in range(1, 4):
                dovecot.append(user, "INBOX", mail(n))
            wait_until(lambda: proxy.dropped >= 1, STORED_WITHIN, "the server to drop the sleeping watcher's connection")
            proxy.idle_limit = None
            assert stored_ids(state) == []
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_until(lambda: len(stored_ids(state)) >= 3, STORED_WITHIN, "the mails that came during the sleep")
        up(state, 2)  # the dropped connection was opened again
        deliver_and_wait(dovecot, user, state, range(4, 5))
        stop(proc)
    assert push_lines(state, state="down")
    once_each(state, 4)


def test_a_cron_poll_at_the_same_moment_as_a_push_poll_stores_each_mail_once(tmp_path: Path, dovecot: Dovecot) -> None:
    """A cron ``memex poll`` started with each delivery races the push poll: the run lock lets one run; the other says
    skipped (or finds nothing new), and each mail is stored once."""
    user = dovecot.new_user()
    with live(tmp_path, dovecot.port, user) as (proc, state):
        cron: list[subprocess.CompletedProcess[str]] = []
        for n in range(1, 6):
            dovecot.append(user, "INBOX", mail(n))
            cron.append(run_cli("poll", "mail", config=tmp_path / "config.toml", env=env()))
        wait_until(lambda: len(stored_ids(state)) >= 5, STORED_WITHIN, "every mail")
        stop(proc)
    assert all(c.returncode == 0 for c in cron)
    once_each(state, 5)


def test_an_oauth2_connection_is_reopened_with_a_fresh_token_before_the_old_one_is_refused(
    tmp_path: Path, idp: IdentityServer, oauth_dovecot: Dovecot, account: str
) -> None:
    """Signed in with OAuth2 (Microsoft, at the identity stand-in), the push connection is reopened every
    ``push_reopen`` seconds (2 here): after the access token expired under the open connection, the reopening finds it
    refused, refreshes it once and signs in again; no ``down`` line, and the next mail is pushed in."""
    cfg = oauth_load(tmp_path, microsoft(oauth_dovecot, idp, account, interval=3600, timeout=10, push_renew=1, push_reopen=2))
    sign_in(cfg)
    state = tmp_path / "state"
    env = {**{k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}, "REQUESTS_CA_BUNDLE": str(idp.cert)}
    with watching(cfg.path, "mail", env=env) as proc:
        started(state, "mail")
        up(state, 1)
        idp.expire_access()  # the token the connection signed in with is no longer good; the client still holds it valid
        wait_until(lambda: idp.grants("refresh_token") >= 1 and len(push_lines(state, state="up")) >= 2, STORED_WITHIN,
                   "the connection reopened with a refreshed token")  # fmt: skip
        oauth_dovecot.append(account, "INBOX", mail(1))
        wait_until(lambda: stored_ids(state) == ["m1@example.com"], STORED_WITHIN, "the mail after the refresh")
        stop(proc)
    assert not push_lines(state, state="down")
    once_each(state, 1)
