"""The IMAP poller reads the next chunk while the current one is rendered and stored: what it may use of that read."""

from __future__ import annotations

from pollers.email.imap import poller as imap
from pollers.email.imap import session as imap_session
from tests.servers.dovecot import PASSWORD, Dovecot, dovecot_server

__all__ = ["dovecot_server"]  # the `dovecot` fixture


def mail(n: int) -> bytes:
    """A small message with its own Message-ID."""
    head = f"From: Alice <alice@example.com>\r\nTo: bob@example.com\r\nSubject: overlap {n}\r\nMessage-ID: <overlap{n}@example.com>\r\n"
    return (head + f"\r\nbody {n}\r\n").encode()


def poller_with(dovecot: Dovecot, count: int) -> imap.ImapPoller:
    """A poller (chunks of 3 UIDs) of a fresh user whose INBOX holds ``count`` mails."""
    user = dovecot.new_user()
    with dovecot.session(user) as conn:
        for i in range(count):
            conn.append("INBOX", None, None, mail(i))
    settings = imap_session.Settings("127.0.0.1", dovecot.port, "none", user, f"printf %s {PASSWORD}", None, ("INBOX",), 10.0)
    poller = imap.ImapPoller("mail", settings)
    poller.fetch_chunk = 3
    return poller


def uids(batch: object) -> list[int]:
    """The UIDs of a batch's items, in order."""
    return [item.message.extra["uid"] for item in batch.items if item.message is not None]  # type: ignore[attr-defined]


def test_the_first_chunk_of_the_next_batch_is_read_ahead_and_used(dovecot: Dovecot) -> None:
    """After a batch with more mail left, the next chunk's FETCH is already sent; the next fetch uses it, no UID lost or twice."""
    poller = poller_with(dovecot, 12)
    try:
        first = poller.fetch(None, 5)
        assert uids(first) == [1, 2, 3, 4, 5]
        assert poller._ahead is not None and poller._ahead.uids == [6, 7, 8]  # sent while batch 1 is stored
        sent = poller.commands
        second = poller.fetch(first.cursor, 5)
        assert uids(second) == [6, 7, 8, 9, 10]
        # EXAMINE, SEARCH, the FETCH of 9-10 and the read-ahead of 11-12: 6-8 were not asked for again.
        assert poller.commands - sent == 4, poller.commands - sent
        third = poller.fetch(second.cursor, 5)
        assert uids(third) == [11, 12]
        assert poller._ahead is None  # nothing left to read ahead
    finally:
        poller.close()


def test_a_read_ahead_is_used_only_for_the_uids_right_after_the_cursor(dovecot: Dovecot) -> None:
    """A fetch from another cursor (a poll that stopped mid-batch) gets the UIDs after that cursor, never the chunk read ahead."""
    poller = poller_with(dovecot, 12)
    try:
        first = poller.fetch(None, 5)
        assert poller._ahead is not None and poller._ahead.uids == [6, 7, 8]
        stopped_at = first.items[1].cursor  # the runner stored UIDs 1 and 2 only
        again = poller.fetch(stopped_at, 5)
        assert uids(again) == [3, 4, 5, 6, 7]
        rest = poller.fetch(again.cursor, 5)
        assert uids(rest) == [8, 9, 10, 11, 12]
    finally:
        poller.close()


def test_closing_with_a_read_ahead_in_flight_ends_the_session(dovecot: Dovecot) -> None:
    """A poll that ends (time limit, stop) with a chunk still being read closes without waiting for it, and a new session works."""
    poller = poller_with(dovecot, 8)
    first = poller.fetch(None, 3)
    assert uids(first) == [1, 2, 3] and poller._ahead is not None
    poller.close()
    assert poller._ahead is None and poller._conn is None
    again = poller.fetch(first.cursor, 5)
    assert uids(again) == [4, 5, 6, 7, 8]
    poller.close()
