"""An IMAP account's session: the connection, logging in, retrying, and the commands the poller sends.

:class:`ImapSession` holds one connection (opened on first use, with the password read
then) and runs every exchange under the poll's deadline (:meth:`ImapSession._io`).
Transient network failures after login (connection reset, timeout, a server BYE) are
retried with a fresh connection and backoff (:data:`BACKOFF`, read at call time) within
:data:`RETRY_BUDGET` seconds. The poller (:mod:`pollers.email.imap.poller`) builds on it; the next chunk's
``UID FETCH`` read by a helper thread while the poll renders is :mod:`pollers.email.imap.fetch_ahead`'s.
"""

from __future__ import annotations

import imaplib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from memex.plugin import NEVER, Deadline, Interrupted, SourceError
from pollers.email.imap import utf7
from pollers.email.imap.fetch_ahead import Ahead
from pollers.email.imap.oauth import OAuth
from pollers.email.imap.wire import (
    FETCH_ITEMS,
    GMAIL_FETCH_ITEMS,
    ints,
    list_entry,
    parse_fetch,
    quote,
    reply_text,
    select_mailboxes,
    server_text,
    uid_set,
    untagged_int,
)

SEARCH_WINDOW = 20_000  # UIDs per UID SEARCH (its answer is one line; imaplib refuses lines over 1,000,000 bytes)
SEARCH_WINDOW_MAX = 80_000  # a window doubled over empty stretches stops here (80,000 10-digit UIDs < 1 MB)
BACKOFF: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)  # seconds between retries of a transient failure
RETRY_BUDGET = 40.0  # seconds a poll may spend retrying (the runner's default time budget is 50)
PASSWORD_CMD_TIMEOUT = 30.0
T = TypeVar("T")


# OpenSSL's reasons when a TLS handshake meets a server that speaks plain IMAP ("* OK ..." read as a TLS record)
PLAINTEXT_REPLIES = frozenset({"WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE", "UNKNOWN_PROTOCOL",
                               "HTTP_REQUEST", "UNEXPECTED_RECORD"})  # fmt: skip


@dataclass(frozen=True)
class PushSettings:
    """The push keys of an imap source (`push`, `push_mailboxes`, `push_connections`, `push_renew`, `push_reopen`):
    read by :func:`pollers.email.imap.push.read_keys`, used by the push connections of that module."""

    mode: str = "auto"
    mailboxes: tuple[str, ...] = ("INBOX",)
    connections: int = 5
    renew: float = 300.0
    reopen: float = 2700.0


@dataclass(frozen=True)
class Settings:
    """A validated ``[sources.NAME]`` of type imap."""

    host: str
    port: int
    security: str
    user: str
    password_cmd: str | None
    password_env: str | None
    mailboxes: tuple[str, ...]
    timeout: float
    ca_file: str | None = None  # PEM file of the CA to trust instead of the system's (a private or self-signed server)
    oauth: OAuth | None = None  # auth = "oauth2": the provider's login (pollers.email.imap.oauth); None: the password
    state_dir: Path | None = None  # where an OAuth2 login is kept
    push: PushSettings | None = None  # memex watch's IDLE or NOTIFY (pollers.email.imap.push); None: polled on the interval


class MailboxError(SourceError):
    """One mailbox cannot be read (refused EXAMINE, no UIDVALIDITY); the others are polled all the same."""


class ImapSession:
    """One IMAP account: a connection opened on first use, its exchanges bounded by the poll's deadline and retried."""

    def __init__(self, name: str, settings: Settings, *, backoff: tuple[float, ...] | None = None) -> None:
        self.name = name
        self.settings = settings
        self.backoff = backoff
        self.commands = 0  # IMAP commands sent (round trips), for the benchmark
        self._conn: imaplib.IMAP4 | None = None
        self._selected: str | None = None
        self._names: list[str] | None = None
        self._retry_deadline: float | None = None
        self._deadline: Deadline = NEVER
        self._ahead: Ahead | None = None  # a UID FETCH in flight on the connection (see Ahead)
        self.refusal: str | None = None  # what the server said when it last refused part of a UID FETCH (NO), for the warning
        self._tokens: Any = None  # auth = "oauth2": where access tokens come from (built on first use)
        self.gmail = False  # the server advertised X-GM-EXT-1: fetches ask for Gmail's IDs and labels too
        self._gm: dict[tuple[str, int], dict[str, Any]] = {}  # (mailbox, UID) -> its Gmail fields, until rendered

    # -- connection --------------------------------------------------------
    def _where(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def tokens(self) -> Any:
        """The OAuth2 token source of an ``auth = "oauth2"`` source (:func:`pollers.email.imap.oauth.tokens`)."""
        if self._tokens is None:
            from pollers.email.imap.oauth import tokens

            assert self.settings.oauth is not None
            remaining = lambda: self._deadline.timeout(PASSWORD_CMD_TIMEOUT, f"source {self.name!r}: token_cmd")  # noqa: E731
            self._tokens = tokens(self.name, self.settings.oauth, self.settings.state_dir, self.settings.timeout, remaining)
        return self._tokens

    def _password(self) -> str:
        from memex.plugin import password

        s = self.settings
        return password(self.name, s.password_env, s.password_cmd, PASSWORD_CMD_TIMEOUT)

    def _io(self, what: str, call: Callable[[], T]) -> T:
        """One exchange with the server, waited for no longer than the poll's deadline or stop request allow.

        When the poll must end first, the connection is shut down (so the exchange ends) and
        :class:`~memex.deadline.Interrupted` is raised; the exchange's own errors propagate unchanged.
        """
        return self._deadline.call(call, f"source {self.name!r}: {what} at {self._where()}", abandon=self._abandon)

    def _abandon(self) -> None:
        """Forget the connection an exchange is stuck on and shut its socket, which ends that exchange.

        Only the socket: closing imaplib's file object would wait for the stuck reader's buffer lock.
        """
        conn, self._conn = self._conn, None
        self._selected = None
        self._ahead = None
        if conn is not None:
            cut(conn)

    def _open(self, timeout: float) -> imaplib.IMAP4:
        s = self.settings
        if s.security == "ssl":
            import ssl

            context = ssl.create_default_context(cafile=s.ca_file)
            return imaplib.IMAP4_SSL(s.host, s.port, ssl_context=context, timeout=timeout)
        conn = imaplib.IMAP4(s.host, s.port, timeout=timeout)
        if s.security == "starttls":
            import ssl

            conn.starttls(ssl.create_default_context(cafile=s.ca_file))
        return conn

    def _connect(self) -> imaplib.IMAP4:
        if self._ahead is not None:
            self._collect_ahead()  # the connection is free only once that answer is read; unused, it is dropped
        if self._conn is not None:
            return self._conn
        s = self.settings
        if s.oauth is not None:
            # A remembered refusal or a failed refresh stops here, before connecting; a refresh never outlasts the poll.
            tokens = self.tokens()
            password, token = "", self._deadline.call(tokens.token_info, f"source {self.name!r}: refreshing the OAuth2 login")
        else:
            password, token = self._password(), None
        try:
            timeout = self._deadline.timeout(s.timeout, f"source {self.name!r}: connecting to {self._where()}")
            conn = self._io("connecting", lambda: self._open(timeout))
        except TimeoutError:
            self._deadline.check(f"source {self.name!r}: connecting to {self._where()}")  # the poll's time ran out first
            raise SourceError(f"source {self.name!r}: connecting to {self._where()} timed out after {s.timeout:g}s") from None
        except ConnectionRefusedError:
            raise SourceError(
                f"source {self.name!r}: connection to {self._where()} refused; is the server up and the port right?"
            ) from None
        except OSError as exc:
            if type(exc).__name__ == "SSLCertVerificationError":
                why = getattr(exc, "verify_message", None) or "not trusted"
                raise SourceError(
                    f"source {self.name!r}: the TLS certificate of {self._where()} was refused ({why}); if the server uses "
                    "a private or self-signed CA, set ca_file to its certificate (PEM)"
                ) from None
            if s.security == "ssl" and getattr(exc, "reason", None) in PLAINTEXT_REPLIES:
                raise SourceError(
                    f'source {self.name!r}: {self._where()} answered in plain text, not TLS (security = "ssl" expects TLS from '
                    f'the first byte): set port = 993 for ssl, or security = "starttls" for this port (usually 143)'
                ) from None
            reason = exc.strerror or type(exc).__name__
            raise SourceError(f"source {self.name!r}: cannot connect to {self._where()} ({reason})") from None
        except imaplib.IMAP4.error as exc:
            raise SourceError(f"source {self.name!r}: {self._where()} refused the session ({server_text(exc)})") from None
        try:
            self.commands += 1
            if token is not None:
                from pollers.email.imap.oauth import login

                answer = self._io("login", lambda: login(conn, self.name, s.user, s.host, s.port, tokens, token))
            else:
                answer = self._io("login", lambda: conn.login(s.user, password))[1]
        except Interrupted:
            cut(conn)
            raise
        except SourceError:
            shutdown(conn)
            raise
        except imaplib.IMAP4.error as exc:
            shutdown(conn)
            raise SourceError(
                f"source {self.name!r}: login as {s.user!r} at {self._where()} failed ({server_text(exc)}); check the user and the password"
            ) from None
        except OSError as exc:
            shutdown(conn)
            raise SourceError(f"source {self.name!r}: connection to {self._where()} lost during login ({type(exc).__name__})") from None
        from pollers.email.imap import gmail

        self.gmail = gmail.advertised(tuple(conn.capabilities), answer)
        self._conn = conn
        self._selected = None
        return conn

    def close(self) -> None:
        """Log out and close the connection."""
        conn, self._conn = self._conn, None
        self._selected = None
        ahead, self._ahead = self._ahead, None
        if conn is not None:
            if ahead is not None and not ahead.done():  # mid-answer: no goodbye can be said on it
                cut(conn)
                shutdown(conn)
                return
            try:
                if self._deadline.reason is not None:
                    raise Interrupted(self._deadline.reason, "logout")  # no time left to wait for a goodbye
                self._deadline.call(conn.logout, "logout", abandon=lambda: cut(conn))
            except Exception:
                shutdown(conn)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._selected = None
        ahead, self._ahead = self._ahead, None
        if conn is not None:
            if ahead is not None and not ahead.done():
                cut(conn)  # its reader holds the buffer lock a close needs: end the read first
            shutdown(conn)

    def set_deadline(self, deadline: float) -> None:
        """Cap the retry budget at the runner's deadline (``--max-seconds``): see memex.capabilities.DeadlineAware."""
        self._retry_deadline = min(time.monotonic() + RETRY_BUDGET, deadline)

    def use_deadline(self, deadline: Deadline) -> None:
        """Bound every exchange, retry and backoff by the poll's deadline and stop request (memex.capabilities.Interruptible)."""
        self._deadline = deadline
        if deadline.at is not None:
            self.set_deadline(deadline.at)

    def _retrying(self, what: str, operation: Callable[[], T]) -> T:
        """Run ``operation``; on a transient failure reconnect and retry with backoff within the poll's budget."""
        delays = BACKOFF if self.backoff is None else self.backoff
        if self._retry_deadline is None:
            self._retry_deadline = time.monotonic() + RETRY_BUDGET
        attempt = 0
        while True:
            try:
                return operation()
            except (imaplib.IMAP4.abort, OSError) as exc:  # a network failure a fresh connection may cure
                self._drop()
                label = f"source {self.name!r}: {what} at {self._where()}"
                self._deadline.check(label)  # cut short by the poll's end, not a network fault: no retry
                if attempt >= len(delays) or time.monotonic() + delays[attempt] > self._retry_deadline:
                    kind = "timed out" if isinstance(exc, TimeoutError) else f"failed ({type(exc).__name__})"
                    raise SourceError(
                        f"source {self.name!r}: {what} at {self._where()} {kind} after {attempt + 1} attempt(s); the next poll resumes"
                    ) from None
                self._deadline.sleep(delays[attempt], label)
                attempt += 1

    def _cmd(self, conn: imaplib.IMAP4, what: str, typ_data: tuple[str, list[Any]]) -> list[Any]:
        typ, data = typ_data
        if typ != "OK":
            raise SourceError(f"source {self.name!r}: {what} refused by {self._where()} ({reply_text(data)})")
        return data

    # -- mailboxes ---------------------------------------------------------
    def _mailbox_names(self) -> list[str]:
        """The configured mailboxes (globs expanded with LIST), sorted and unique.

        A name matches itself even where it reads as a glob (Gmail's ``[Gmail]/All Mail``), and a special-use
        attribute (RFC 6154: ``\\All``, ``\\Sent``, ...) matches the mailboxes LIST marks with it, whatever
        their localised names.
        """
        if self._names is not None:
            return self._names
        patterns = self.settings.mailboxes
        if not any(ch in p for p in patterns for ch in "*?[\\"):
            self._names = sorted({p if utf7.decode(p) != p else utf7.encode(p) for p in patterns})
            return self._names

        def listing() -> list[tuple[str, frozenset[str]]]:
            conn = self._connect()
            self.commands += 1
            data = self._cmd(conn, "LIST", self._io("LIST", lambda: conn.list('""', "*")))
            return [e for e in (list_entry(d) for d in data) if e is not None]

        self._names = select_mailboxes(self._retrying("LIST", listing), patterns)
        return self._names

    def _examine(self, mailbox: str) -> tuple[int, int | None]:
        """EXAMINE (read-only SELECT) ``mailbox``; return its UIDVALIDITY and UIDNEXT (if sent)."""
        conn = self._connect()
        self.commands += 1
        typ, data = self._io("EXAMINE", lambda: conn.select(quote(mailbox), readonly=True))
        if typ != "OK":
            self._selected = None
            raise MailboxError(
                f"source {self.name!r}: mailbox {utf7.decode(mailbox)!r} cannot be opened at {self._where()} ({reply_text(data)}); "
                "check `mailboxes` in the source's config section"
            )
        self._selected = mailbox
        validity = untagged_int(conn, "UIDVALIDITY")
        if validity is None:
            raise MailboxError(f"source {self.name!r}: {self._where()} sent no UIDVALIDITY for {mailbox!r}; cannot keep a cursor")
        return validity, untagged_int(conn, "UIDNEXT")

    def _search(self, first: int, uidnext: int | None = None, want: int | None = None, criteria: str = "") -> list[int]:
        """UIDs >= ``first`` in the selected mailbox matching ``criteria``, searched in bounded UID windows.

        One ``UID SEARCH`` over a whole big mailbox answers in one line, and imaplib
        refuses lines over 1,000,000 bytes (about 145,000 UIDs): so the range up to
        UIDNEXT is searched window by window (:data:`SEARCH_WINDOW` UIDs, doubled
        over empty stretches up to :data:`SEARCH_WINDOW_MAX`, whose answer stays
        well under the limit), stopping once ``want`` UIDs are found. Without a
        UIDNEXT the server is asked for ``first:*`` (and the highest UID it
        returns below ``first`` is dropped).
        """
        if uidnext is None:
            return sorted(u for u in self._search_range(f"{first}:*", criteria) if u >= first)
        found: list[int] = []
        window = SEARCH_WINDOW
        start = first
        while start < uidnext and (want is None or len(found) < want):
            end = min(uidnext - 1, start + window - 1)
            got = sorted(u for u in self._search_range(f"{start}:{end}", criteria) if start <= u <= end)
            found.extend(got)
            window = SEARCH_WINDOW if got else min(SEARCH_WINDOW_MAX, window * 2)
            start = end + 1
        return found

    def _search_range(self, uid_range: str, criteria: str) -> list[int]:
        conn = self._connect()
        self.commands += 1
        query = f"UID {uid_range}" + (f" {criteria}" if criteria else "")
        data = self._cmd(conn, "UID SEARCH", self._io("UID SEARCH", lambda: conn.uid("SEARCH", query)))
        return ints(data)

    def _fetch_raw(self, uids: list[int]) -> list[tuple[int, bytes, datetime | None]]:
        """``(uid, raw bytes, INTERNALDATE)`` of ``uids`` in the selected mailbox, in one UID FETCH."""
        conn = self._connect()
        self.commands += 1
        items = GMAIL_FETCH_ITEMS if self.gmail else FETCH_ITEMS
        data = self._fetched(conn, self._io("UID FETCH", lambda: conn.uid("FETCH", uid_set(uids), items)))
        return self._parse(data, uids, self._selected or "")

    def _parse(self, data: list[Any], uids: list[int], mailbox: str) -> list[tuple[int, bytes, datetime | None]]:
        """:func:`parse_fetch`, keeping each UID's Gmail fields for :meth:`gmail_fields` when the server is Gmail."""
        if not self.gmail:
            return parse_fetch(data, uids)
        found: dict[int, dict[str, Any]] = {}
        fetched = parse_fetch(data, uids, found)
        self._gm.update(((mailbox, uid), f) for uid, f in found.items())
        return fetched

    def gmail_fields(self, mailbox: str, uid: int) -> dict[str, Any] | None:
        """The Gmail fields fetched with ``uid`` of ``mailbox`` (once; None when there were none)."""
        return self._gm.pop((mailbox, uid), None)

    def _fetched(self, conn: imaplib.IMAP4, typ_data: tuple[str, list[Any]]) -> list[Any]:
        """The data of a ``UID FETCH`` answer; a ``NO`` keeps what the server did send (the rest is checked by the caller).

        Gmail answers ``NO Some messages could not be FETCHed (Failure)`` after sending every mail it could: those
        are kept, and each UID it left out is looked up again (:meth:`_still_listed`) like one left out of an ``OK``.
        """
        typ, data = typ_data
        if typ == "NO":
            self.refusal = reply_text(data)
            sent: list[Any] = conn.untagged_responses.pop("FETCH", [])  # imaplib leaves them there after a NO
            return sent
        return self._cmd(conn, "UID FETCH", typ_data)

    def _fetch_ahead(self, uids: list[int], key: tuple[str, int]) -> None:
        """Send the ``UID FETCH`` of ``uids`` (of mailbox and UIDVALIDITY ``key``) now; :meth:`_collect_ahead` takes its answer."""
        conn = self._connect()
        self.commands += 1
        self._ahead = Ahead(conn, uids, key, GMAIL_FETCH_ITEMS if self.gmail else FETCH_ITEMS)

    def _collect_ahead(self) -> tuple[Ahead, list[tuple[int, bytes, datetime | None]], float] | None:
        """The fetch sent ahead, its ``(uid, raw bytes, INTERNALDATE)`` and seconds it took, or None when none is in flight.

        Waits for the answer within the poll's deadline; a network failure propagates as from any exchange.
        """
        ahead, self._ahead = self._ahead, None
        if ahead is None or ahead.conn is not self._conn:
            return None
        try:
            answer = self._io("UID FETCH", ahead.answer)
        except BaseException:
            if not ahead.done():  # a stop before or during the wait: cut the socket, or its reader holds the
                self._abandon()  # connection's buffer lock until the socket times out and a close waits for it
            raise
        data = self._fetched(ahead.conn, answer)
        return ahead, self._parse(data, ahead.uids, ahead.key[0]), ahead.ended - ahead.began

    def _still_listed(self, asked: list[int], got: set[int]) -> list[int]:
        """The UIDs of ``asked`` missing from ``got`` that a fresh ``UID SEARCH`` says still exist, by UID.

        Servers (Gmail among them) can answer a UID FETCH with OK and no data for
        a message that is there; only UIDs the server confirms gone may be passed as gone.
        """
        missing = [u for u in asked if u not in got]
        if not missing:
            return []
        conn = self._connect()
        self.commands += 1
        data = self._cmd(conn, "UID SEARCH", self._io("UID SEARCH", lambda: conn.uid("SEARCH", f"UID {uid_set(missing)}")))
        return sorted(set(ints(data)) & set(missing))

    def _in(self, mailbox: str, operation: Callable[[], T]) -> T:
        """Run ``operation`` with ``mailbox`` selected (again, after a reconnect)."""
        if self._conn is None or self._selected != mailbox:
            self._examine(mailbox)
        return operation()


def cut(conn: imaplib.IMAP4) -> None:
    """Shut a connection's socket down (from any thread): a read blocked on it returns at once."""
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except Exception:
        pass


def shutdown(conn: imaplib.IMAP4) -> None:
    """Close a connection without a goodbye to the server, ignoring any error."""
    try:
        conn.shutdown()
    except Exception:
        pass
