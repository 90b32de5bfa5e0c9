"""IMAP against a real Dovecot on real-server misbehaviour: UIDs a FETCH leaves out, mailboxes that cannot be opened."""

from __future__ import annotations

import imaplib
import itertools
import os
import re
import time
from pathlib import Path

import pytest

from memex import config as memex_config
from memex.runner import poll
from memex.state.cursors import CursorStore
from pollers.email.imap import poller as imap
from pollers.email.imap import session as imap_session
from pollers.email.imap import utf7
from tests.conftest import read_log, run_cli, write_config
from tests.email.test_imap import PASSWORD_ENV, env_password, mail, no_backoff, records, setup, source_table
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server
from tests.servers.imap_proxy import imap_proxy

__all__ = ["dovecot_server", "env_password", "no_backoff"]  # fixtures


def drop_uid_once(uid: int) -> tuple[list[bytes], object]:
    """A rewrite that removes ``uid`` from the first UID FETCH asking for it (the server then answers OK without it)."""
    seen: list[bytes] = []

    def rewrite(line: bytes) -> bytes:
        m = re.match(rb"^(\S+ UID FETCH )([0-9:,]+)( .*)$", line, re.S)
        if m is None or seen:
            return line
        wanted: list[int] = []
        for piece in m.group(2).split(b","):
            lo, _, hi = piece.partition(b":")
            wanted.extend(range(int(lo), int(hi or lo) + 1))
        if uid not in wanted:
            return line
        seen.append(line)
        rest = b",".join(str(u).encode() for u in wanted if u != uid)
        return m.group(1) + rest + m.group(3)

    return seen, rewrite


def test_a_uid_the_fetch_leaves_out_is_never_skipped(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """FETCH answers OK without UID 2 (it exists): it is kept as a hole of the cursor, logged, and fetched by the next poll."""
    user = dovecot.new_user()
    for i in range(1, 5):
        dovecot.append(user, "INBOX", mail(i))
    with imap_proxy(dovecot.port) as proxy:
        seen, rewrite = drop_uid_once(2)
        proxy.rewrite = rewrite  # type: ignore[assignment]
        cfg = setup(tmp_path, dovecot, user, port=proxy.port)
        first = poll(cfg, "mail")
        assert seen, "the proxy never narrowed a FETCH: the test did not exercise the gap"
        second = poll(cfg, "mail")
    assert (first.status, first.new, first.dup) == ("ok", 3, 0)  # past the gap, which the cursor keeps
    assert (second.status, second.new, second.dup) == ("ok", 1, 0)  # the next poll asked again and got UID 2
    assert sorted(records(cfg)) == [f"m{i}@example.com" for i in range(1, 5)]
    assert CursorStore(cfg.state_dir).section("mail")["positions"] == {"INBOX": 4}
    assert "holes" not in CursorStore(cfg.state_dir).section("mail")["cursor"]["mailboxes"]["INBOX"]
    warnings = [e for e in read_log(cfg.state_dir, "mail") if e["event"] == "source.warning"]
    assert len(warnings) == 1 and "INBOX: UID 2 exists but the server sent no data" in warnings[0]["reason"]


def test_an_expunged_uid_left_out_of_the_fetch_is_passed(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """A UID expunged between SEARCH and FETCH is confirmed gone by a fresh search and passed: no wedge."""
    user = dovecot.new_user()
    for i in range(1, 4):
        dovecot.append(user, "INBOX", mail(i))

    def expunge_then_fetch(line: bytes) -> bytes:
        if b" UID FETCH " in line and not expunged:
            with dovecot.session(user) as conn:
                conn.select("INBOX")
                conn.uid("STORE", "2", "+FLAGS", "(\\Deleted)")
                conn.expunge()
            expunged.append(True)
        return line

    expunged: list[bool] = []
    with imap_proxy(dovecot.port) as proxy:
        proxy.rewrite = expunge_then_fetch
        cfg = setup(tmp_path, dovecot, user, port=proxy.port)
        result = poll(cfg, "mail")
    assert expunged and (result.status, result.new) == ("ok", 2)
    assert result.positions_after == {"INBOX": 3}
    assert sorted(records(cfg)) == ["m1@example.com", "m3@example.com"]


def test_a_mailbox_that_cannot_be_opened_does_not_stop_the_others(tmp_path: Path, dovecot: Dovecot) -> None:
    """Archive (sorted first) is missing: INBOX is still polled and stored, the CLI exits 1 naming Archive, once per poll."""
    user = dovecot.new_user()
    for i in range(1, 3):
        dovecot.append(user, "INBOX", mail(i))
    path = write_config(tmp_path, {"mail": source_table(dovecot, user, mailboxes=["Archive", "INBOX"])})
    done = run_cli("poll", "mail", config=path, env={PASSWORD_ENV: PASSWORD})
    assert done.returncode == 1, done.stderr[-800:]
    assert "mailbox 'Archive' cannot be opened" in done.stderr and "the other mailboxes were polled" in done.stderr
    assert "Traceback" not in done.stderr
    cfg = memex_config.load(path)
    assert sorted(records(cfg)) == ["m1@example.com", "m2@example.com"]
    assert CursorStore(cfg.state_dir).section("mail")["positions"] == {"INBOX": 2}
    warnings = [e for e in read_log(cfg.state_dir, "mail") if e["event"] == "source.warning"]
    assert ["Archive" in w["reason"] for w in warnings] == [True]


BIG = 200_000


def write_big_maildir(server: Dovecot, user: str, count: int) -> None:
    """``count`` tiny messages written straight into Dovecot's Maildir (APPEND would take far too long), owned by its user."""
    root = server.maildir(user)
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    cur = root / "cur"
    for i in range(1, count + 1):
        path = cur / f"1700000000.M{i}P1.test:2,S"
        path.write_bytes(b"Message-ID: <b%d@example.com>\r\nSubject: b%d\r\n\r\nx\r\n" % (i, i))
        os.chown(path, server.uid, server.gid)
    for folder in (root.parent, root, *(root / sub for sub in ("cur", "new", "tmp"))):
        os.chown(folder, server.uid, server.gid)


def test_a_mailbox_of_200000_messages_is_polled_in_bounded_search_windows(dovecot: Dovecot) -> None:
    """200,000 messages: a whole-mailbox UID SEARCH answer is over imaplib's 1,000,000-byte line limit; windows are not."""
    user = dovecot.new_user()
    write_big_maildir(dovecot, user, BIG)
    with dovecot.session(user) as conn:
        conn.select("INBOX", readonly=True)
        with pytest.raises(imaplib.IMAP4.error, match="got more than"):
            conn.uid("SEARCH", "UID 1:*")  # what the poller used to send: the answer cannot even be read
    poller = imap.ImapPoller(
        "mail", imap_session.Settings("127.0.0.1", dovecot.port, "none", user, f"printf %s {PASSWORD}", None, ("INBOX",), 60.0)
    )
    try:
        began = time.monotonic()
        batch = poller.fetch({"mailboxes": {}}, 100)
        first_batch_seconds = time.monotonic() - began
        assert [i.message.native_id for i in batch.items if i.message][:2] == ["b1@example.com", "b2@example.com"]
        assert len(batch.items) == 100 and batch.cursor["mailboxes"]["INBOX"]["last_uid"] == 100
        near_end = {"mailboxes": {"INBOX": {**batch.cursor["mailboxes"]["INBOX"], "last_uid": BIG - 30}}}
        tail = poller.fetch(near_end, 100)
        assert [i.message.native_id for i in tail.items if i.message] == [f"b{i}@example.com" for i in range(BIG - 29, BIG + 1)]
        assert poller.head()["mailboxes"]["INBOX"]["last_uid"] == BIG
        searches_before = poller.commands
        walked = list(
            itertools.islice(
                poller.history(
                    None, None, {"mailbox": "INBOX", "uidvalidity": tail.cursor["mailboxes"]["INBOX"]["uidvalidity"], "uid": BIG - 3}
                ),
                10,
            )
        )
        assert [i.message.native_id for i in walked if i.message] == [f"b{i}@example.com" for i in range(BIG - 2, BIG + 1)]
        assert poller.commands > searches_before
        print(f"200,000-message mailbox: first batch of 100 in {first_batch_seconds:.2f}s")
    finally:
        poller.close()


def test_mailbox_names_in_modified_utf7_are_shown_decoded(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """A mailbox named Entwürfe (Entw&APw-rfe on the wire), configured as typed or by glob, is polled and shown decoded."""
    user = dovecot.new_user()
    dovecot.append(user, "Entw&APw-rfe", mail(1))
    for index, patterns in enumerate((["Entwürfe"], ["Entw*"])):
        (tmp_path / str(index)).mkdir()
        cfg = setup(tmp_path / str(index), dovecot, user, mailboxes=patterns)
        result = poll(cfg, "mail")
        assert (result.status, result.new) == ("ok", 1), result.error
        doc = records(cfg)["m1@example.com"]
        assert doc["extra"]["mailbox"] == "Entwürfe" and doc["extra"]["mailbox_imap"] == "Entw&APw-rfe"
    assert utf7.decode("&U,BTFw-") == "台北" and utf7.encode("A&B") == "A&-B"
