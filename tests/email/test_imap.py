"""The IMAP poller against a real Dovecot on loopback: cursors, resets, dedup, bad mail, flags, errors."""

from __future__ import annotations

import base64
import hashlib
import imaplib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from memex import config as memex_config
from memex.errors import ConfigError, SourceError
from memex.records import message_key
from memex.registry import make_poller
from memex.runner import poll
from memex.state.cursors import CursorStore
from pollers.email.imap import poller as imap
from pollers.email.imap import session as imap_session
from tests.conftest import assert_valid, file_objects, read_log, run_cli, s3_objects, write_config
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server, quote

__all__ = ["dovecot_server"]  # the `dovecot` fixture

PASSWORD_ENV = "MEMEX_TEST_IMAP_PASSWORD"


def mail(n: int | str, *, msgid: str | None = "auto", headers: str = "", body: str = "hello") -> bytes:
    """A small RFC 822 message; ``msgid=None`` leaves the Message-ID out."""
    lines = ["From: Alice <alice@example.com>", "To: bob@example.com", f"Subject: message {n}", "Date: Tue, 01 Nov 2022 10:00:00 +0000"]
    if msgid == "auto":
        lines.append(f"Message-ID: <m{n}@example.com>")
    elif msgid is not None:
        lines.append(f"Message-ID: {msgid}")
    if headers:
        lines.append(headers)
    return ("\r\n".join(lines) + f"\r\n\r\n{body} {n}\r\n").encode()


def source_table(server: Dovecot, user: str, **more: Any) -> dict[str, Any]:
    """A loopback imap source section for ``user`` (password from the environment)."""
    table: dict[str, Any] = {"type": "imap", "host": "127.0.0.1", "port": server.port, "security": "none", "user": user}
    table.update(more)
    if "password_cmd" not in table:
        table["password_env"] = PASSWORD_ENV
    return table


@pytest.fixture
def env_password(monkeypatch: pytest.MonkeyPatch) -> None:
    """The right password in the environment variable the sources name."""
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without sleeping (the backoff setting is read at call time)."""
    monkeypatch.setattr(imap_session, "BACKOFF", ())


def setup(tmp_path: Path, server: Dovecot, user: str, **more: Any) -> memex_config.Config:
    """A config with one imap source ``mail`` and a file store under ``tmp_path``."""
    path = write_config(tmp_path, {"mail": source_table(server, user, **more)})
    return memex_config.load(path)


def stored(cfg: memex_config.Config) -> dict[str, bytes]:
    """The message objects of the file store."""
    return file_objects(cfg.state_dir / "store")


def records(cfg: memex_config.Config) -> dict[str, dict[str, Any]]:
    """native id -> record of every stored message."""
    out = {}
    for key, body in stored(cfg).items():
        if key.endswith(".json"):
            doc = json.loads(body)
            out[doc["native_id"]] = doc
    return out


def test_new_mail_between_polls_is_stored_once_with_its_eml(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """Messages appended between polls are picked up by the next poll only, each with its raw .eml beside it."""
    user = dovecot.new_user()
    for i in range(3):
        dovecot.append(user, "INBOX", mail(i))
    cfg = setup(tmp_path, dovecot, user)
    first = poll(cfg, "mail")
    assert (first.status, first.new, first.dup) == ("ok", 3, 0)
    assert first.positions_after == {"INBOX": 3}
    for i in range(3, 5):
        dovecot.append(user, "INBOX", mail(i))
    second = poll(cfg, "mail")
    assert (second.new, second.dup, second.positions_after) == (2, 0, {"INBOX": 5})
    idle = poll(cfg, "mail")
    assert (idle.status, idle.new) == ("idle", 0)
    objects = stored(cfg)
    assert sorted(records(cfg)) == [f"m{i}@example.com" for i in range(5)]
    eml = objects[message_key("mail", "m4@example.com", ".eml")]
    assert eml.replace(b"\r\n", b"\n") == mail(4).replace(b"\r\n", b"\n")
    doc = records(cfg)["m4@example.com"]
    assert doc["sender"]["id"] == "alice@example.com"
    assert doc["extra"]["mailbox"] == "INBOX" and doc["extra"]["uid"] == 5
    assert doc["sent_at"] == "2022-11-01T10:00:00Z"


def naive_new_uids(conn: imaplib.IMAP4, mailbox: str, last_uid: int) -> list[int]:
    """A cursor that trusts `UID n:*` and ignores UIDVALIDITY (what many scripts do)."""
    conn.select(quote(mailbox), readonly=True)
    _, data = conn.uid("SEARCH", f"UID {last_uid + 1}:*")
    return [int(x) for x in data[0].split()]


def test_uidvalidity_change_is_logged_and_rescanned_without_loss(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """A recreated mailbox (new UIDVALIDITY) is rescanned: new mail stored, old mail a dup, the reset logged."""
    user = dovecot.new_user()
    for i in range(5):
        dovecot.append(user, "Work", mail(i))
    cfg = setup(tmp_path, dovecot, user, mailboxes=["Work"])
    assert poll(cfg, "mail").new == 5
    before = dovecot.uidvalidity(user, "Work")
    with dovecot.session(user) as conn:
        assert conn.delete(quote("Work"))[0] == "OK"
        assert conn.create(quote("Work"))[0] == "OK"
    dovecot.append(user, "Work", mail(0))  # already stored: UID 1 now
    dovecot.append(user, "Work", mail("new-a"))  # UID 2
    dovecot.append(user, "Work", mail("new-b"))  # UID 3
    after = dovecot.uidvalidity(user, "Work")
    assert after != before

    # The naive cursor (last UID 5, UIDVALIDITY ignored) sees nothing new: it would lose both messages.
    with dovecot.session(user) as conn:
        assert [u for u in naive_new_uids(conn, "Work", 5) if u > 5] == []

    result = poll(cfg, "mail")
    assert (result.status, result.new, result.dup) == ("ok", 2, 1)
    assert result.reset == f"Work: UIDVALIDITY changed from {before} to {after}; rescanning"
    assert result.positions_after == {"Work": 3}
    assert {"m0@example.com", "mnew-a@example.com", "mnew-b@example.com"} <= set(records(cfg))
    resets = [e for e in read_log(cfg.state_dir, "mail") if e["event"] == "source.reset"]
    assert len(resets) == 1 and resets[0]["positions_before"] == {"Work": 5}
    assert poll(cfg, "mail").status == "idle"


def test_uid_star_quirk_never_reingests_or_moves_back(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """When the highest UID is below the cursor, `UID n:*` still answers it; the poller drops it and stays put."""
    user = dovecot.new_user()
    for i in range(10):
        dovecot.append(user, "INBOX", mail(i))
    cfg = setup(tmp_path, dovecot, user)
    assert poll(cfg, "mail").positions_after == {"INBOX": 10}
    dovecot.append(user, "INBOX", mail(10))  # UID 11, then expunged with 8..10: highest UID 7, UIDNEXT 12
    with dovecot.session(user) as conn:
        conn.select("INBOX")
        conn.uid("STORE", "8:11", "+FLAGS", "(\\Deleted)")
        conn.expunge()
    with dovecot.session(user) as conn:
        assert naive_new_uids(conn, "INBOX", 10) == [7]  # the quirk: a naive loop re-ingests UID 7 and moves back to 7
    result = poll(cfg, "mail")
    assert (result.status, result.new, result.dup, result.error) == ("idle", 0, 0, None)
    assert CursorStore(cfg.state_dir).section("mail")["positions"] == {"INBOX": 10}


def test_same_message_in_two_mailboxes_is_one_object(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """The same Message-ID in INBOX and Sent is stored once; the second copy counts as a duplicate."""
    user = dovecot.new_user()
    dovecot.append(user, "INBOX", mail(1))
    dovecot.append(user, "Sent", mail(1))
    dovecot.append(user, "Sent", mail(2))
    cfg = setup(tmp_path, dovecot, user, mailboxes=["INBOX", "S*"])
    result = poll(cfg, "mail")
    assert (result.new, result.dup) == (2, 1)
    assert result.positions_after == {"INBOX": 1, "Sent": 2}
    assert sorted(k for k in stored(cfg) if k.endswith(".json")) == [
        "messages/mail/m1%40example.com.json",
        "messages/mail/m2%40example.com.json",
    ]


ODD_IDS = {
    "slash": ("<a/b/../../c@x>", "a/b/../../c@x"),
    "plus-eq": ("<a+b=c==@x>", "a+b=c==@x"),
    "quotes": ('<"odd local"@x>', '"odd local"@x'),
    "long": ("<" + "L" * 900 + "@x>", "L" * 900 + "@x"),
    "hash-like": ("<sha256:abc@x>", "<sha256:abc@x>"),
}


def test_odd_and_missing_message_ids_give_safe_keys(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """Message-IDs with '/', '+', '=', quotes or 900 characters, and none at all, each land under one safe key."""
    user = dovecot.new_user()
    for name, (header, _) in ODD_IDS.items():
        dovecot.append(user, "INBOX", mail(name, msgid=header))
    dovecot.append(user, "INBOX", mail("no-id", msgid=None))
    cfg = setup(tmp_path, dovecot, user)
    result = poll(cfg, "mail")
    assert (result.new, result.quarantined) == (len(ODD_IDS) + 1, 0)
    objects = stored(cfg)
    docs = records(cfg)
    for _, expected in ODD_IDS.values():
        assert expected in docs
    no_id = [d for d in docs.values() if d["extra"].get("id_from") == "raw_sha256"]
    assert len(no_id) == 1
    eml = objects[message_key("mail", no_id[0]["native_id"], ".eml")]
    assert no_id[0]["native_id"] == "sha256:" + hashlib.sha256(eml).hexdigest()
    for key in objects:
        assert key.startswith("messages/mail/")
        leaf = key[len("messages/mail/") :]
        assert "/" not in leaf and not leaf.startswith(".") and len(leaf) <= 200


def bad_corpus() -> dict[str, bytes]:
    """Mail that breaks naive parsers; each must still be stored."""
    big = base64.encodebytes(os.urandom(25 * 1024 * 1024))
    return {
        "broken-mime": mail(
            "broken-mime",
            headers='Content-Type: multipart/mixed; boundary="never-closed"',
            body="--never-closed\r\nContent-Type: text/plain\r\n\r\npart without end",
        ),
        "bad-charset": mail("bad-charset", headers="Content-Type: text/plain; charset=x-no-such-charset", body="caf\xe9"),
        "wrong-bytes": (mail("wrong-bytes", headers="Content-Type: text/plain; charset=utf-8").replace(b"hello", b"caf\xe9 \xff\xfe")),
        "8bit-headers": mail("8bit-headers")
        .replace(b"Subject: message 8bit-headers", b"Subject: r\xe9sum\xe9 \xff")
        .replace(b"Alice", b"Al\xc3\xafce"),
        "bad-date": mail("bad-date").replace(b"Date: Tue, 01 Nov 2022 10:00:00 +0000", b"Date: the 45th of Nevember, year zero"),
        "huge": (
            b"From: a@example.com\r\nMessage-ID: <mhuge@example.com>\r\nDate: Tue, 01 Nov 2022 10:00:00 +0000\r\n"
            b'Content-Type: multipart/mixed; boundary="b"\r\nMIME-Version: 1.0\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n'
            b'--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="big.bin"\r\n'
            b"Content-Transfer-Encoding: base64\r\n\r\n" + big.replace(b"\n", b"\r\n") + b"--b--\r\n"
        ),
    }


@pytest.mark.slow
def test_bad_mail_corpus_never_stops_the_mailbox(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """Broken MIME, unknown charsets, 8-bit headers, bad dates and a 25 MB attachment are all stored; mail after them too."""
    user = dovecot.new_user()
    corpus = bad_corpus()
    for raw in corpus.values():
        dovecot.append(user, "INBOX", raw)
    dovecot.append(user, "INBOX", mail("after"))
    cfg = setup(tmp_path, dovecot, user)
    result = poll(cfg, "mail")
    assert (result.status, result.new, result.quarantined, result.error) == ("ok", len(corpus) + 1, 0, None)
    assert result.positions_after == {"INBOX": len(corpus) + 1}
    docs = records(cfg)
    assert "mafter@example.com" in docs
    assert docs["mbad-date@example.com"]["sent_at"] is None
    assert "header Date: unparseable" in docs["mbad-date@example.com"]["extra"]["problems"]
    assert any("charset" in p for p in docs["mbad-charset@example.com"]["extra"]["problems"])
    assert "header Subject: raw 8-bit bytes" in docs["m8bit-headers@example.com"]["extra"]["problems"]
    huge = docs["mhuge@example.com"]
    assert huge["attachments"] == [
        {"id": "part2", "filename": "big.bin", "mime_type": "application/octet-stream", "size": 25 * 1024 * 1024}
    ]
    assert len(stored(cfg)[message_key("mail", "mhuge@example.com", ".eml")]) > 25 * 1024 * 1024
    assert len(assert_valid(stored(cfg))) == len(corpus) + 1  # broken mail still renders to memex.message/1


def flags(server: Dovecot, user: str) -> dict[int, bytes]:
    """UID -> FLAGS of every INBOX message."""
    with server.session(user) as conn:
        conn.select("INBOX", readonly=True)
        _, data = conn.uid("FETCH", "1:*", "(UID FLAGS)")
    out = {}
    for line in data:
        assert isinstance(line, bytes)
        uid = int(line.split(b"UID ")[1].split()[0].rstrip(b")"))
        out[uid] = line.split(b"FLAGS (")[1].split(b")")[0]
    return out


def test_polling_leaves_seen_flags_untouched(tmp_path: Path, dovecot: Dovecot, env_password: None) -> None:
    """Unread mail stays unread after a poll (EXAMINE + BODY.PEEK[]); a plain BODY[] fetch would have marked it."""
    user = dovecot.new_user()
    dovecot.append(user, "INBOX", mail(1))
    dovecot.append(user, "INBOX", mail(2), flags="(\\Seen)")
    dovecot.append(user, "INBOX", mail(3), flags="(\\Flagged)")
    before = flags(dovecot, user)
    assert b"\\Seen" not in before[1] and b"\\Seen" in before[2]
    cfg = setup(tmp_path, dovecot, user)
    assert poll(cfg, "mail").new == 3
    assert flags(dovecot, user) == before
    # The check can fail: a read-write SELECT with BODY[] marks the message as read.
    with dovecot.session(user) as conn:
        conn.select("INBOX")
        conn.uid("FETCH", "1", "(BODY[])")
    assert b"\\Seen" in flags(dovecot, user)[1]


def test_fetches_in_batches_not_one_round_trip_per_message(dovecot: Dovecot) -> None:
    """600 messages take a handful of IMAP commands (chunks of FETCH_CHUNK UIDs), not one per message."""
    user = dovecot.new_user()
    with dovecot.session(user) as conn:
        for i in range(600):
            conn.append("INBOX", None, None, mail(i))
    poller = imap.ImapPoller(
        "mail", imap_session.Settings("127.0.0.1", dovecot.port, "none", user, f"printf %s {PASSWORD}", None, ("INBOX",), 10.0)
    )
    cursor = None
    got = 0
    while True:
        batch = poller.fetch(cursor, 500)
        got += len(batch.items)
        if not batch.items and batch.cursor == cursor:
            break
        cursor = batch.cursor
    poller.close()
    assert got == 600
    assert poller.commands <= 12, poller.commands


def test_wrong_password_exits_1_with_clear_error_and_cursor_untouched(tmp_path: Path, dovecot: Dovecot) -> None:
    """The CLI reports a failed login in one line (exit 1), never shows the password, and leaves the cursor as it was."""
    user = dovecot.new_user()
    dovecot.append(user, "INBOX", mail(1))
    path = write_config(tmp_path, {"mail": source_table(dovecot, user)})
    ok = run_cli("poll", "mail", config=path, env={PASSWORD_ENV: PASSWORD})
    assert ok.returncode == 0, ok.stderr[-500:]
    cursors = tmp_path / "state" / "cursors.json"
    saved = cursors.read_bytes()
    dovecot.append(user, "INBOX", mail(2))
    wrong = "Wr0ng-pa55word-xyzzy"
    bad = run_cli("poll", "mail", config=path, env={PASSWORD_ENV: wrong})
    assert bad.returncode == 1
    assert wrong not in bad.stdout + bad.stderr
    assert f"login as {user!r} at 127.0.0.1:{dovecot.port} failed" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert cursors.read_bytes() == saved
    log = (tmp_path / "state" / "logs" / "mail.jsonl").read_text()
    assert wrong not in log and PASSWORD not in log


def test_cli_poll_into_s3(tmp_path: Path, dovecot: Dovecot, s3_endpoint: str, s3_bucket: str) -> None:
    """End to end through the CLI into S3 (moto server): records and .eml objects, then an idle second poll."""
    user = dovecot.new_user()
    for i in range(3):
        dovecot.append(user, "INBOX", mail(i))
    path = write_config(
        tmp_path,
        {"mail": source_table(dovecot, user, password_cmd=f"printf %s {PASSWORD}")},
        store={"url": f"s3://{s3_bucket}/px", "endpoint_url": s3_endpoint},
    )
    text = path.read_text().replace('password_env = "None"\n', "")
    path.write_text(text)
    done = run_cli("poll", "mail", config=path)
    assert done.returncode == 0, done.stderr[-500:]
    keys = sorted(s3_objects(s3_endpoint, s3_bucket, "px/"))
    expected = sorted(f"px/messages/mail/m{i}%40example.com{suffix}" for i in range(3) for suffix in (".json", ".eml"))
    assert keys == expected
    again = run_cli("poll", "mail", config=path)
    assert again.returncode == 0
    last = read_log(tmp_path / "state", "mail")[-1]
    assert (last["status"], last["new"]) == ("idle", 0)


def test_failing_password_cmd_names_its_status_not_its_output(tmp_path: Path, dovecot: Dovecot) -> None:
    """A password_cmd that fails is reported with its exit status; whatever it printed stays out of the error."""
    user = dovecot.new_user()
    path = write_config(tmp_path, {"mail": source_table(dovecot, user)})
    path.write_text(path.read_text().replace(f'password_env = "{PASSWORD_ENV}"', 'password_cmd = "echo leaked-secret-42; exit 3"'))
    result = poll(memex_config.load(path), "mail")
    assert result.status == "error" and result.exit_code == 1
    assert result.error is not None and "exit status 3" in result.error and "leaked-secret-42" not in result.error


def test_missing_password_env_names_the_variable(tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unset password_env variable gives an error naming it."""
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    user = dovecot.new_user()
    cfg = setup(tmp_path, dovecot, user)
    result = poll(cfg, "mail")
    assert result.exit_code == 1 and result.error is not None and PASSWORD_ENV in result.error


def test_refused_connection_is_a_clear_error(tmp_path: Path, env_password: None) -> None:
    """A port nobody listens on gives 'connection refused' naming host and port, exit 1, no cursor."""
    from tests.conftest import free_port

    port = free_port()
    path = write_config(
        tmp_path,
        {"mail": {"type": "imap", "host": "127.0.0.1", "port": port, "security": "none", "user": "u", "password_env": PASSWORD_ENV}},
    )
    cfg = memex_config.load(path)
    result = poll(cfg, "mail")
    assert result.exit_code == 1 and result.error is not None
    assert f"connection to 127.0.0.1:{port} refused" in result.error
    assert CursorStore(cfg.state_dir).cursor("mail") is None


@pytest.mark.parametrize(
    ("table", "key", "words"),
    [
        ({"host": "imap.example.com", "security": "none"}, "security", "loopback"),
        ({"host": "127.0.0.1", "security": "tls"}, "security", "must be"),
        ({"host": "imap.example.com", "password_cmd": "x"}, "password_cmd", "exactly one"),
        ({"host": "imap.example.com", "password_env": None}, "password_cmd", "exactly one"),
        ({"host": "imap.example.com", "mailbox": ["INBOX"]}, "mailbox", "unknown key"),
        ({"host": "imap.example.com", "push": "always"}, "push", '"auto", "idle" or "off"'),
        ({"host": "imap.example.com", "push_renew": 1800}, "push_renew", "at most 1740"),
        ({"host": "imap.example.com", "push_connections": 1}, "push_connections", "at least 2"),
        ({"host": "imap.example.com", "push_mailboxes": []}, "push_mailboxes", "at least one"),
    ],
)
def test_config_mistakes_name_the_key(tmp_path: Path, table: dict[str, Any], key: str, words: str) -> None:
    """Bad imap settings are ConfigErrors naming the file and the key."""
    section = {"type": "imap", "user": "me", "password_env": "X", **table}
    section = {k: v for k, v in section.items() if v is not None}
    path = write_config(tmp_path, {"mail": section})
    with pytest.raises(ConfigError) as info:
        make_poller(memex_config.load(path).source("mail"))
    assert f"key 'sources.mail.{key}'" in str(info.value) and words in str(info.value) and str(path) in str(info.value)


def test_loopback_names_are_recognised() -> None:
    """security = "none" is allowed for 127.0.0.0/8, ::1 and localhost only."""
    assert all(imap.is_loopback(h) for h in ("127.0.0.1", "127.8.9.10", "::1", "localhost"))
    assert not any(imap.is_loopback(h) for h in ("10.0.0.1", "imap.example.com", "::2", "128.0.0.1"))


def test_head_and_history(dovecot: Dovecot) -> None:
    """head() sits at the newest UID; history() walks every mailbox and resumes after a checkpoint."""
    user = dovecot.new_user()
    dovecot.append(user, "INBOX", mail(1))
    dovecot.append(user, "INBOX", mail(2).replace(b"01 Nov 2022", b"05 Nov 2022"))
    dovecot.append(user, "Sent", mail(3))
    poller = imap.ImapPoller(
        "mail", imap_session.Settings("127.0.0.1", dovecot.port, "none", user, f"printf %s {PASSWORD}", None, ("*",), 10.0)
    )
    try:
        head = poller.head()
        assert poller.positions(head) == {"INBOX": 2, "Sent": 1}
        assert poller.fetch(head, 10).items == []
        walked = list(poller.history(None, None, None))
        assert [i.message.native_id for i in walked if i.message] == ["m1@example.com", "m2@example.com", "m3@example.com"]
        resumed = list(poller.history(None, None, walked[0].cursor))
        assert [i.cursor for i in resumed] == [i.cursor for i in walked[1:]]
        from datetime import UTC, datetime

        window = list(poller.history(datetime(2022, 11, 3, tzinfo=UTC), datetime(2022, 11, 6, tzinfo=UTC), None))
        assert [i.message.native_id for i in window if i.message] == ["m2@example.com"]
    finally:
        poller.close()


def test_transient_errors_are_retried_then_reported(dovecot: Dovecot) -> None:
    """A connection that breaks mid-session is reopened and the fetch retried; with no retries left it is a SourceError."""
    user = dovecot.new_user()
    dovecot.append(user, "INBOX", mail(1))
    poller = imap.ImapPoller(
        "mail",
        imap_session.Settings("127.0.0.1", dovecot.port, "none", user, f"printf %s {PASSWORD}", None, ("INBOX",), 10.0),
        backoff=(0.0,),
    )
    try:
        poller.head()
        assert poller._conn is not None
        poller._conn.sock.shutdown(socket.SHUT_RDWR)  # the network drops the session under us
        batch = poller.fetch({"mailboxes": {}}, 10)  # retried on a fresh connection
        assert [i.message.native_id for i in batch.items if i.message] == ["m1@example.com"]
        poller.backoff = ()
        assert poller._conn is not None
        poller._conn.sock.shutdown(socket.SHUT_RDWR)
        with pytest.raises(SourceError, match="after 1 attempt"):
            poller.fetch(batch.cursor, 10)
    finally:
        poller.close()


def test_retries_stop_at_the_runners_deadline(dovecot: Dovecot) -> None:
    """With the poll's deadline already reached, a broken connection is reported at once instead of retried past it."""
    user = dovecot.new_user()
    dovecot.append(user, "INBOX", mail(1))
    poller = imap.ImapPoller(
        "mail",
        imap_session.Settings("127.0.0.1", dovecot.port, "none", user, f"printf %s {PASSWORD}", None, ("INBOX",), 10.0),
        backoff=(0.0, 0.0),
    )
    try:
        poller.head()
        poller.set_deadline(time.monotonic() - 1)
        assert poller._conn is not None
        poller._conn.sock.shutdown(socket.SHUT_RDWR)
        with pytest.raises(SourceError, match="after 1 attempt"):
            poller.fetch({"mailboxes": {}}, 10)
    finally:
        poller.close()
