"""Gmail's IMAP extension: a server advertising X-GM-EXT-1 gets its IDs and labels kept in ``extra.gmail``
(a Gmail stand-in at the IMAP boundary in front of a real Dovecot, tests/servers/gmail.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memex import config as memex_config
from memex.runner import poll
from pollers.email.imap import gmail
from pollers.email.imap import poller as imap
from pollers.email.imap import session as imap_session
from pollers.email.imap.wire import parse_fetch
from tests.conftest import assert_valid, file_objects, write_config
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server
from tests.servers.gmail import MSGID_BASE, gmail_proxy

__all__ = ["dovecot_server"]  # the `dovecot` fixture


def mail(n: int) -> bytes:
    """A small mail with its own Message-ID."""
    return f"From: a@example.com\r\nTo: b@example.com\r\nSubject: gm {n}\r\nMessage-ID: <gm{n}@example.com>\r\n\r\nbody {n}\r\n".encode()


def records(folder: Path) -> dict[str, dict[str, Any]]:
    """Subject -> stored record."""
    return {r["extra"]["subject"]: r for r in assert_valid(file_objects(folder))}


def test_gmail_ids_and_labels_are_kept_in_extra(tmp_path: Path, dovecot: Dovecot) -> None:
    """Behind X-GM-EXT-1 every fetched mail (read ahead or not) carries X-GM-MSGID (decimal and hex), X-GM-THRID and
    its labels decoded (system labels, quoted labels, modified UTF-7, none), and the record conforms to the schema."""
    user = dovecot.new_user()
    for n in range(1, 6):
        dovecot.append(user, "INBOX", mail(n))
    with gmail_proxy(dovecot.port) as proxy:
        proxy.labels = {1: ["\\Inbox", "\\Important", "Work"], 2: ["Reisen & Urlaub", "Entwürfe"], 4: ["\\Sent"]}
        proxy.threads = {2: proxy.msgid(1)}
        table = {"type": "imap", "host": "127.0.0.1", "port": proxy.port, "security": "none", "user": user,
                 "password_cmd": f"printf %s {PASSWORD}"}  # fmt: skip
        cfg = memex_config.load(write_config(tmp_path, {"mail": table}))
        result = poll(cfg, "mail", batch_size=2)
        assert (result.status, result.new) == ("ok", 5), result.error
        assert any(b"X-GM-LABELS" in c for c in proxy.commands)
    got = records(cfg.state_dir / "store")
    first = got["gm 1"]["extra"]["gmail"]
    assert first == {"msgid": str(MSGID_BASE + 1), "msgid_hex": format(MSGID_BASE + 1, "x"), "thrid": str(MSGID_BASE + 1),
                     "labels": ["\\Inbox", "\\Important", "Work"]}  # fmt: skip
    assert got["gm 2"]["extra"]["gmail"]["thrid"] == first["msgid"]  # one conversation
    assert got["gm 2"]["extra"]["gmail"]["labels"] == ["Reisen & Urlaub", "Entwürfe"]
    assert got["gm 3"]["extra"]["gmail"]["labels"] == []
    assert all(r["extra"]["gmail"]["msgid"] == str(MSGID_BASE + r["extra"]["uid"]) for r in got.values())


def test_a_server_without_the_extension_is_asked_for_nothing_more(tmp_path: Path, dovecot: Dovecot) -> None:
    """Without X-GM-EXT-1 the FETCH asks only for UID, INTERNALDATE and BODY.PEEK[], and records have no ``gmail``."""
    user = dovecot.new_user()
    dovecot.append(user, "INBOX", mail(1))
    settings = imap_session.Settings("127.0.0.1", dovecot.port, "none", user, f"printf %s {PASSWORD}", None, ("INBOX",), 10.0)
    poller = imap.ImapPoller("mail", settings)
    try:
        first = poller.fetch(None, 10)
        (item,) = first.items + poller.fetch(first.cursor, 10).items
        assert not poller.gmail
        assert item.message is not None and "gmail" not in item.message.extra
    finally:
        poller.close()


def test_labels_that_read_like_fetch_items_never_move_the_uid() -> None:
    """A label whose text is ``UID 99`` (or holds a parenthesis) is a label: the UID and the literal stay right."""
    head = b'1 FETCH (X-GM-THRID 7 X-GM-MSGID 8 X-GM-LABELS ("UID 99" "a (b)" \\Inbox) UID 3 INTERNALDATE "01-Nov-2022 10:00:00 +0000" BODY[] {5}'
    found: dict[int, dict[str, Any]] = {}
    ((uid, raw, _),) = parse_fetch([(head, b"hello"), b")"], [3, 99], found)
    assert (uid, raw) == (3, b"hello")
    assert found[3]["labels"] == ["UID 99", "a (b)", "\\Inbox"] and found[3]["thrid"] == "7"
    assert gmail.advertised(("IMAP4REV1",), [b"[CAPABILITY IMAP4rev1 X-GM-EXT-1] Logged in"])


def test_all_mail_is_found_by_its_name_or_its_special_use_attribute(tmp_path: Path, dovecot: Dovecot) -> None:
    """``mailboxes = ["[Gmail]/All Mail"]`` matches that name although it reads as a glob, and ``["\\All"]`` finds
    the mailbox LIST marks \\All whatever its localised name; the other folders (labels) are not read."""
    user = dovecot.new_user()
    all_mail = "[Gmail].Alle Nachrichten"  # Dovecot's separator is "."; Gmail's is "/"
    dovecot.append(user, all_mail, mail(1))
    dovecot.append(user, "Work", mail(2))
    with gmail_proxy(dovecot.port) as proxy:
        proxy.special = {all_mail: "\\All"}
        for n, wanted in enumerate([all_mail, "\\All"]):
            settings = imap_session.Settings("127.0.0.1", proxy.port, "none", user, f"printf %s {PASSWORD}", None, (wanted,), 10.0)
            poller = imap.ImapPoller(f"mail{n}", settings)
            try:
                first = poller.fetch(None, 10)
                items = first.items + poller.fetch(first.cursor, 10).items
                assert [i.message.extra["mailbox"] for i in items if i.message is not None] == [all_mail], wanted
            finally:
                poller.close()
