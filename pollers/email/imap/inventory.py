"""``memex verify`` for IMAP (:class:`memex.capabilities.Inventoried`): the UIDs a cursor has passed, by native ID, and mails fetched again.

For each mailbox of the cursor the mailbox is EXAMINEd (read-only). If its UIDVALIDITY is no longer the cursor's,
its UIDs now name other mails (the mailbox was recreated or renumbered): it is reported
(:class:`~memex.source.Unchecked`) and nothing of it is listed or re-read; the next poll rescans it (a reset).
Otherwise the UIDs up to the cursor's ``last_uid`` (``UID SEARCH`` in windows, never past the cursor) are fetched in
chunks of :data:`HEADER_CHUNK` as ``BODY.PEEK[HEADER]`` only (never sets \\Seen, a few hundred bytes a mail): the
native ID is the Message-ID of that header block, parsed as a poll parses the whole mail (the header block is the
start of the mail, and the parser reads the headers from the start, so both agree). A mail without a Message-ID is
keyed by the hash of its bytes (:mod:`pollers.email.mail.render`), so those few are fetched whole.

``reread`` fetches mails by ref (the tail of an RFC 5092 IMAP URL, ``MAILBOX;UIDVALIDITY=V/;UID=U``) and renders
them as the poll does; a mailbox whose UIDVALIDITY is no longer the ref's is skipped (the second pass of
``--repair`` then reports it). Every exchange is checked against the UIDVALIDITY it expects, after a reconnect too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from memex.plugin import Cursor, Item, Listed, Unchecked
from pollers.email.imap import utf7
from pollers.email.imap.holes import HOLE_TRIES, holes_of
from pollers.email.imap.session import ImapSession, MailboxError
from pollers.email.imap.wire import parse_fetch, uid_set
from pollers.email.mail.headers import message_ids
from pollers.email.mail.headers import raw as raw_header
from pollers.email.mail.render import native_id_of, parse

HEADER_CHUNK = 500  # UIDs per UID FETCH of header blocks
REREAD_CHUNK = 100  # UIDs per UID FETCH of whole mails (as a poll's chunk, smaller: only what is missing)
_REF = re.compile(r"^(?P<mailbox>.*);UIDVALIDITY=(?P<validity>\d+)/;UID=(?P<uid>\d+)$", re.DOTALL)
T = TypeVar("T")


class Renumbered(Exception):
    """The mailbox's UIDVALIDITY is not the one expected: its UIDs name other mails now."""

    def __init__(self, mailbox: str, expected: int, found: int) -> None:
        super().__init__(mailbox)
        self.mailbox, self.expected, self.found = mailbox, expected, found

    def why(self) -> str:
        """One line for the report."""
        return (f"mailbox {utf7.decode(self.mailbox)!r}: its UIDVALIDITY is {self.found}, the cursor's {self.expected} (the "
                f"mailbox was recreated or renumbered, so its UIDs name other mails now); not compared: the next poll "
                f"rescans it")  # fmt: skip


def ref_of(mailbox: str, validity: int, uid: int) -> str:
    """Where a mail is: ``MAILBOX;UIDVALIDITY=V/;UID=U`` (RFC 5092)."""
    return f"{mailbox};UIDVALIDITY={validity}/;UID={uid}"


class Inventory(ImapSession):
    """The UIDs a cursor has passed, listed by native ID, and mails fetched again by ref (mixed into the poller)."""

    if TYPE_CHECKING:  # what the poller provides

        def _item(self, mailbox: str, validity: int, uid: int, raw: bytes, internal: datetime | None, cursor: Cursor) -> Item: ...

    def inventory(self, cursor: Cursor) -> Iterator[Listed | Unchecked]:
        """``Listed(native ID, ref)`` of every mail up to each mailbox's ``last_uid`` in the cursor, mailbox by mailbox."""
        boxes: dict[str, Any] = (cursor or {}).get("mailboxes") or {}
        for mailbox in sorted(boxes):
            last, validity = int(boxes[mailbox].get("last_uid", 0)), int(boxes[mailbox].get("uidvalidity", 0))
            yield from _holes(mailbox, holes_of(boxes[mailbox]))
            if last <= 0:
                continue
            self._selected = None  # EXAMINE again: the UIDVALIDITY is checked before anything is listed
            try:
                uids = self._retrying("UID SEARCH", partial(self._within, mailbox, validity, partial(self._search, 1, last + 1)))
                for start in range(0, len(uids), HEADER_CHUNK):
                    chunk = uids[start : start + HEADER_CHUNK]
                    heads = self._retrying("UID FETCH", partial(self._within, mailbox, validity, partial(self._fetch_headers, chunk)))
                    whole: list[int] = []
                    for uid, header in heads:
                        try:
                            ids = message_ids(raw_header(parse(header), "Message-ID"))
                        except Exception:  # a header block the parser cannot take: the whole mail decides, as in a poll
                            ids = []
                        if ids:
                            yield Listed(ids[0], ref_of(mailbox, validity, uid))
                        else:
                            whole.append(uid)
                    if whole:  # keyed by the hash of the whole mail
                        mails = self._retrying("UID FETCH", partial(self._within, mailbox, validity, partial(self._fetch_raw, whole)))
                        for uid, raw, _ in mails:
                            yield Listed(native_id_of(parse(raw), raw), ref_of(mailbox, validity, uid))
            except Renumbered as exc:
                yield Unchecked(exc.why())
            except MailboxError as exc:
                yield Unchecked(f"{exc}; its mails up to the cursor were not compared")

    def reread(self, refs: list[str]) -> Iterator[Item]:
        """The items of the mails at ``refs``, fetched again and rendered as a poll renders them; mails gone are skipped."""
        groups: dict[tuple[str, int], set[int]] = {}
        for ref in refs:
            found = _REF.match(ref)
            if found is not None:
                groups.setdefault((found["mailbox"], int(found["validity"])), set()).add(int(found["uid"]))
        for (mailbox, validity), uids in sorted(groups.items()):
            self._selected = None
            ordered = sorted(uids)
            try:
                for start in range(0, len(ordered), REREAD_CHUNK):
                    chunk = ordered[start : start + REREAD_CHUNK]
                    mails = self._retrying("UID FETCH", partial(self._within, mailbox, validity, partial(self._fetch_raw, chunk)))
                    for uid, raw, internal in mails:
                        yield self._item(mailbox, validity, uid, raw, internal, None)
            except (Renumbered, MailboxError):
                continue  # its UIDs name other mails now (or it is gone): never stored under the old ones' names

    def _within(self, mailbox: str, validity: int, operation: Callable[[], T]) -> T:
        """Run ``operation`` with ``mailbox`` selected (again, after a reconnect), if its UIDVALIDITY is still ``validity``."""
        if self._conn is None or self._selected != mailbox:
            now, _ = self._examine(mailbox)
            if now != validity:
                self._selected = None
                raise Renumbered(mailbox, validity, now)
        return operation()

    def _fetch_headers(self, uids: list[int]) -> list[tuple[int, bytes]]:
        """``(uid, header block)`` of ``uids`` in the selected mailbox, in one UID FETCH (never sets \\Seen)."""
        conn = self._connect()
        self.commands += 1
        data = self._fetched(conn, self._io("UID FETCH", lambda: conn.uid("FETCH", uid_set(uids), "(UID BODY.PEEK[HEADER])")))
        return [(uid, header) for uid, header, _ in parse_fetch(data, uids)]


def _holes(mailbox: str, holes: dict[int, int]) -> Iterator[Unchecked]:
    """One line per UID the server would not send (a hole of the cursor, :mod:`pollers.email.imap.holes`)."""
    for uid in sorted(holes):
        tries = holes[uid]
        if tries >= HOLE_TRIES:
            state = (f"given up after {tries} polls: polls no longer ask for it (lower its tries below {HOLE_TRIES} with "
                     "`memex cursor set` to have them ask again)")  # fmt: skip
        else:
            state = f"asked for again by the next polls (try {tries} of {HOLE_TRIES})"
        yield Unchecked(f"mailbox {utf7.decode(mailbox)!r} UID {uid}: the server lists this mail but would not send it; {state}")
