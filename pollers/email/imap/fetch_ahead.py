"""The next chunk's ``UID FETCH``, read by a helper thread while the poll renders and stores the chunk before it.

:class:`Ahead` is sent and collected by :class:`pollers.email.imap.session.ImapSession` (``_fetch_ahead`` and
``_collect_ahead``), which owns the connection and its deadline.
"""

from __future__ import annotations

import imaplib
import threading
import time
from typing import Any

from pollers.email.imap.wire import FETCH_ITEMS, uid_set


class Ahead:
    """A ``UID FETCH`` already sent, whose answer a helper thread reads while the poll renders and stores what came before.

    Only the poller's own next command may use the connection after it: :meth:`ImapSession._collect_ahead` waits for
    the answer (bounded by the poll's deadline) before anything else is sent.
    """

    def __init__(self, conn: imaplib.IMAP4, uids: list[int], key: tuple[str, int], items: str = FETCH_ITEMS) -> None:
        self.conn, self.uids, self.key, self.items = conn, uids, key, items  # key: (mailbox, UIDVALIDITY) the UIDs belong to
        self.began = self.ended = time.monotonic()
        self._done = threading.Event()
        self._answer: tuple[str, list[Any]] | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._read, name="memex-imap-fetch-ahead", daemon=True).start()

    def _read(self) -> None:
        try:
            self._answer = self.conn.uid("FETCH", uid_set(self.uids), self.items)
        except BaseException as exc:  # handed to whoever waits for the answer
            self._error = exc
        finally:
            self.ended = time.monotonic()
            self._done.set()

    def done(self) -> bool:
        """Whether the answer has been read (or the read failed)."""
        return self._done.is_set()

    def answer(self) -> tuple[str, list[Any]]:
        """Wait for the answer; the read's own error is raised here."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._answer is not None
        return self._answer
