"""IMAP against a real Dovecot behind a proxy that withholds one mail: the mailbox never wedges, the mail is never lost.

The proxy narrows each ``UID FETCH`` that asks for the withheld UID (Dovecot then answers without it) and, in the
Gmail case, turns the tagged ``OK`` into ``NO Some messages could not be FETCHed (Failure)``, as Gmail answers when it
cannot serve a mail. The UID becomes a hole of the cursor (:mod:`pollers.email.imap.holes`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.runner import poll
from memex.state.cursors import CursorStore
from pollers.email.imap import holes
from pollers.email.imap.holes import HOLE_TRIES
from tests.conftest import read_log, run_cli, write_config
from tests.email.test_imap import PASSWORD_ENV, env_password, mail, no_backoff, records, source_table
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server
from tests.servers.imap_proxy import ImapProxy, imap_proxy

__all__ = ["dovecot_server", "env_password", "no_backoff"]  # fixtures

GMAIL_NO = b"NO Some messages could not be FETCHed (Failure)"


class Withhold:
    """The proxy's rewrites: while ``on``, UID ``uid`` is taken out of every UID FETCH (and, ``gmail``, the answer is NO)."""

    def __init__(self, proxy: ImapProxy, uid: int, *, gmail: bool = False, also: tuple[int, ...] = ()) -> None:
        self.uid, self.gmail, self.on = uid, gmail, True
        self.others = set(also)  # more UIDs withheld the same way (not counted in ``asked``)
        self.asked = 0  # UID FETCH commands that asked for the UID (while withheld or not)
        self._tags: set[bytes] = set()
        proxy.rewrite = self.rewrite
        if gmail:
            proxy.respond = self.respond

    def rewrite(self, line: bytes) -> bytes:
        """Drop the UID from a UID FETCH set that names it."""
        m = re.match(rb"^(\S+) (UID FETCH )([0-9:,]+)( .*)$", line, re.S)
        if m is None:
            return line
        wanted: list[int] = []
        for piece in m.group(3).split(b","):
            lo, _, hi = piece.partition(b":")
            wanted.extend(range(int(lo), int(hi or lo) + 1))
        if self.uid not in wanted and not self.others & set(wanted):
            return line
        self.asked += self.uid in wanted
        if not self.on:
            return line
        rest = [u for u in wanted if u != self.uid and u not in self.others]
        if self.gmail:
            self._tags.add(m.group(1))
        if not rest:  # nothing else asked: a FETCH of a UID that does not exist answers OK with no data
            rest = [10**9 - 1]
        return m.group(1) + b" " + m.group(2) + b",".join(str(u).encode() for u in rest) + m.group(4)

    def respond(self, line: bytes) -> bytes:
        """Gmail's tagged NO after the mails it could send."""
        tag = line.split(b" ", 1)[0]
        if tag in self._tags and line[len(tag) :].startswith(b" OK"):
            self._tags.discard(tag)
            return tag + b" " + GMAIL_NO + b"\r\n"
        return line


def setup(tmp_path: Path, dovecot: Dovecot, user: str, port: int) -> Path:
    """A config with one imap source ``mail`` reaching Dovecot through the proxy at ``port``."""
    table = source_table(dovecot, user)
    table["port"] = port
    return write_config(tmp_path, {"mail": table})


def box(cfg: memex_config.Config) -> dict[str, Any]:
    """INBOX's entry of the saved cursor."""
    cursor = CursorStore(cfg.state_dir).section("mail")["cursor"]
    entry: dict[str, Any] = cursor["mailboxes"]["INBOX"]
    return entry


def warnings(cfg: memex_config.Config) -> list[str]:
    """The source.warning reasons logged so far."""
    return [e["reason"] for e in read_log(cfg.state_dir, "mail") if e["event"] == "source.warning"]


def test_a_withheld_uid_is_kept_as_a_hole_the_mailbox_moves_on_and_the_mail_comes_when_served(
    tmp_path: Path, dovecot: Dovecot, env_password: None
) -> None:
    """UID 2 withheld (OK without it): later mail is stored, UID 2 is kept as a hole, and is stored once served again."""
    user = dovecot.new_user()
    for i in range(1, 5):
        dovecot.append(user, "INBOX", mail(i))
    with imap_proxy(dovecot.port) as proxy:
        withhold = Withhold(proxy, 2)
        cfg = memex_config.load(setup(tmp_path, dovecot, user, proxy.port))
        first = poll(cfg, "mail")
        assert (first.status, first.new) == ("ok", 3)
        assert box(cfg) == {"uidvalidity": box(cfg)["uidvalidity"], "last_uid": 4, "holes": [{"uid": 2, "tries": 1}]}
        assert "UID 2 exists but the server sent no data for it" in warnings(cfg)[-1] and "try 1 of 5" in warnings(cfg)[-1]
        dovecot.append(user, "INBOX", mail(5))
        second = poll(cfg, "mail")  # still withheld: the new mail comes all the same, the hole counts a try
        assert (second.status, second.new) == ("ok", 1)
        assert box(cfg)["holes"] == [{"uid": 2, "tries": 2}] and box(cfg)["last_uid"] == 5
        withhold.on = False
        third = poll(cfg, "mail")
        assert (third.status, third.new) == ("ok", 1)
        assert "holes" not in box(cfg) and box(cfg)["last_uid"] == 5
        fourth = poll(cfg, "mail")  # no hole left: nothing asked again
        asked = withhold.asked
    assert (fourth.status, fourth.new) == ("idle", 0) and asked == 3
    assert sorted(records(cfg)) == [f"m{i}@example.com" for i in range(1, 6)]


def test_a_mail_gmail_never_serves_is_given_up_after_five_polls_and_reported(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """Gmail's NO for UID 3, for ever: every later mail is stored; after 5 polls it is given up, and status and verify show it."""
    user = dovecot.new_user()
    for i in range(1, 5):
        dovecot.append(user, "INBOX", mail(i))
    with imap_proxy(dovecot.port) as proxy:
        withhold = Withhold(proxy, 3, gmail=True)
        path = setup(tmp_path, dovecot, user, proxy.port)
        cfg = memex_config.load(path)
        env = {PASSWORD_ENV: PASSWORD}
        for n in range(1, HOLE_TRIES + 2):
            dovecot.append(user, "INBOX", mail(f"later{n}"))
            done = run_cli("poll", "mail", config=path, env=env)
            assert done.returncode == 0, done.stderr[-800:]
            assert "Traceback" not in done.stderr
        asked = withhold.asked
        status = run_cli("status", config=path, env=env)
        verify = run_cli("verify", "mail", "--json", config=path, env=env)
    assert asked == HOLE_TRIES  # once a poll, then no more
    assert box(cfg)["holes"] == [{"uid": 3, "tries": HOLE_TRIES}] and box(cfg)["last_uid"] == 4 + HOLE_TRIES + 1
    stored = sorted(records(cfg))
    assert "m3@example.com" not in stored and len(stored) == 3 + HOLE_TRIES + 1
    said = warnings(cfg)
    assert "it said: Some messages could not be FETCHed (Failure)" in said[0]
    assert sum("given up" in w for w in said) == 1
    assert "1 not sent by the server" in status.stdout, status.stdout
    report = json.loads(verify.stdout)["sources"]["mail"]
    assert verify.returncode == 0, verify.stderr
    assert any("UID 3: the server lists this mail but would not send it; given up" in why for why in report["unchecked"])


def test_a_withheld_uid_expunged_later_leaves_the_cursor(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """A hole whose mail is expunged is dropped from the cursor with a warning (nothing left to fetch)."""
    user = dovecot.new_user()
    for i in range(1, 4):
        dovecot.append(user, "INBOX", mail(i))
    with imap_proxy(dovecot.port) as proxy:
        Withhold(proxy, 2)
        cfg = memex_config.load(setup(tmp_path, dovecot, user, proxy.port))
        assert poll(cfg, "mail").new == 2
        with dovecot.session(user) as conn:
            conn.select("INBOX")
            conn.uid("STORE", "2", "+FLAGS", "(\\Deleted)")
            conn.expunge()
        assert poll(cfg, "mail").status == "idle"
    assert "holes" not in box(cfg) and box(cfg)["last_uid"] == 3
    assert "UID 2, which the server would not send, is gone from the mailbox" in warnings(cfg)[-1]


def test_a_cursor_with_holes_is_accepted_by_cursor_set_and_a_malformed_one_refused(tmp_path: Path, dovecot: Dovecot) -> None:
    """`memex cursor set` takes a hole list of the right shape and refuses holes above last_uid (exit 2, one line)."""
    user = dovecot.new_user()
    path = write_config(tmp_path, {"mail": source_table(dovecot, user)})
    good = {"mailboxes": {"INBOX": {"uidvalidity": 7, "last_uid": 9, "holes": [{"uid": 3, "tries": 2}]}}}
    done = run_cli("cursor", "set", "mail", json.dumps(good), "--yes", config=path)
    assert done.returncode == 0, done.stderr
    assert CursorStore(memex_config.load(path).state_dir).section("mail")["cursor"] == good
    bad = {"mailboxes": {"INBOX": {"uidvalidity": 7, "last_uid": 9, "holes": [{"uid": 12, "tries": 2}]}}}
    done = run_cli("cursor", "set", "mail", json.dumps(bad), "--yes", config=path)
    assert done.returncode == 2 and '"holes" must be a list' in done.stderr and "Traceback" not in done.stderr


def test_holes_are_bounded_a_full_list_stops_before_the_next_until_one_is_given_up(
    tmp_path: Path, dovecot: Dovecot, env_password: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With room for one hole, a second withheld UID stops the batch before it; once the first is given up it makes room."""
    monkeypatch.setattr(holes, "MAX_HOLES", 1)
    user = dovecot.new_user()
    for i in range(1, 6):
        dovecot.append(user, "INBOX", mail(i))
    with imap_proxy(dovecot.port) as proxy:
        Withhold(proxy, 2, also=(4,))
        cfg = memex_config.load(setup(tmp_path, dovecot, user, proxy.port))
        first = poll(cfg, "mail")
        assert first.new == 2 and box(cfg)["last_uid"] == 3 and box(cfg)["holes"] == [{"uid": 2, "tries": 1}]  # stopped before 4
        assert "stopped before it until those are fetched or given up" in warnings(cfg)[-1]
        for _ in range(HOLE_TRIES - 1):  # the 5th poll gives UID 2 up, which makes room for UID 4: the mailbox moves on
            poll(cfg, "mail")
    assert box(cfg)["last_uid"] == 5 and box(cfg)["holes"] == [{"uid": 4, "tries": 1}]
    assert any("UID 2, given up earlier, is no longer kept in the cursor" in w for w in warnings(cfg))
    assert sorted(records(cfg)) == ["m1@example.com", "m3@example.com", "m5@example.com"]
