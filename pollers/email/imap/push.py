"""IMAP push for ``memex watch``: NOTIFY (RFC 5465) where the server offers it, else IDLE (RFC 2177).

Keys of an imap source: ``push`` (``"auto"``, the default: NOTIFY when offered, else IDLE; ``"idle"``: IDLE
even where NOTIFY is offered; ``"off"``: polled on its interval only), ``push_mailboxes`` (the mailboxes IDLE
watches, default ``["INBOX"]``; NOTIFY watches every configured mailbox on one connection), ``push_connections``
(at most this many connections to the account at once, the poll's own included: default 5, below Gmail's 15),
``push_renew`` (seconds between re-issued IDLEs, default 300, at most 1740: servers may drop an IDLE after 30
minutes) and ``push_reopen`` (seconds an ``auth = "oauth2"`` connection is kept before it is reopened with a
fresh token, default 2700: access tokens live about an hour).

A connection only says *when*: every ``EXISTS`` (IDLE) or ``STATUS`` (NOTIFY) the server sends, and every
(re)connection, wakes the watcher, which runs the ordinary poll (:mod:`memex.push`). Each re-IDLE is also the
liveness check: the server must answer ``DONE`` and the new ``IDLE`` within the source's ``timeout``, or the
connection is taken for dead (a NAT that forgot it, a laptop that slept, a proxy that stopped forwarding) and
opened again, with backoff and jitter (:func:`memex.push.backoff`) while that fails.

Login, TLS and OAuth2 are the poll's own (:class:`pollers.email.session.ImapSession`); once logged in, the
connection's few commands (``NOTIFY SET``, ``IDLE``, ``DONE``) are written and read here on its socket, with a
deadline on every answer. imapclient's ``idle()``/``idle_check()`` were not used: it speaks no NOTIFY and would
log in, negotiate TLS and sign in with OAuth2 a second way beside the session's.
"""

from __future__ import annotations

import imaplib
import math
import re
import socket
import threading
import time
from typing import Any

from memex.plugin import Link, MemexError, backoff
from pollers.email.imap import utf7
from pollers.email.imap.session import ImapSession, PushSettings, Settings, cut, shutdown
from pollers.email.imap.wire import quote, reply_text, server_text

MODES = ("auto", "idle", "off")
MAX_RENEW = 1740  # 29 minutes: RFC 2177 lets a server log out a client idle for 30
_LITERAL = re.compile(rb"\{(\d+)\+?\}\r?\n$")
_EXISTS = re.compile(rb"^\* \d+ EXISTS", re.IGNORECASE)


def read_keys(keys: Any) -> PushSettings:
    """The push keys of an imap section (``keys``: its :class:`memex.config.Keys`)."""
    mode = keys.text("push", default="auto")
    if mode not in MODES:
        raise keys.error("push", f'must be "auto", "idle" or "off", not {mode!r}')
    boxes = keys.strings("push_mailboxes", default=["INBOX"])
    if not boxes or not all(boxes):
        raise keys.error("push_mailboxes", "must list at least one mailbox name")
    connections = keys.number("push_connections", default=5, minimum=2, maximum=50)
    renew = keys.number("push_renew", default=300, minimum=1, maximum=MAX_RENEW)
    reopen = keys.number("push_reopen", default=2700, minimum=1, maximum=3300)
    return PushSettings(mode, tuple(boxes), int(connections), float(renew), float(reopen))


class Dead(Exception):
    """The connection is gone or cannot be trusted (no answer within the deadline, BYE, closed, refused)."""


class Reader:
    """Lines from a logged-in connection's socket, each read within a deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def line(self, timeout: float) -> bytes:
        """The next response line (literals included); TimeoutError when none came within ``timeout`` seconds."""
        end = time.monotonic() + timeout
        out = b""
        while True:
            at = self.buf.find(b"\n")
            while at < 0:
                self._more(end)
                at = self.buf.find(b"\n")
            part, self.buf = self.buf[: at + 1], self.buf[at + 1 :]
            out += part
            literal = _LITERAL.search(part)
            if literal is None:
                return out
            size = int(literal.group(1))
            while len(self.buf) < size:
                self._more(end)
            out, self.buf = out + self.buf[:size], self.buf[size:]

    def _more(self, end: float) -> None:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        data = self.sock.recv(65536)
        if not data:
            raise Dead("the server closed the connection")
        self.buf += data


class ImapListener:
    """The push connections of one imap source (:class:`memex.push.Listener`)."""

    def __init__(self, name: str, settings: Settings, push: PushSettings) -> None:
        self.name = name
        self.settings = settings
        self.push = push
        self._lock = threading.Lock()
        self._socks: set[imaplib.IMAP4] = set()
        self._stopping = False
        self._tag = 0

    # -- the Listener interface --------------------------------------------
    def listen(self, link: Link) -> None:
        """Find how to watch (NOTIFY or IDLE, which mailboxes), then keep each connection up until the stop."""
        channels = self._plan(link)
        if channels is None:
            return
        threads = [threading.Thread(target=self._channel, args=(link, key, boxes, notify), daemon=True,
                                    name=f"push-{self.name}-{index}")
                   for index, (key, boxes, notify) in enumerate(channels)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(1.0)

    def close(self) -> None:
        """Cut every open connection (a read blocked on one returns at once)."""
        with self._lock:
            self._stopping = True
            conns = list(self._socks)
        for conn in conns:
            cut(conn)

    # -- planning ----------------------------------------------------------
    def _plan(self, link: Link) -> list[tuple[str, tuple[str, ...], bool]] | None:
        """The connections to keep: ``(key, mailboxes, notify)``; None when asked to stop first.

        One connection asks the server what it offers and which mailboxes the config names (LIST, for globs); it is
        tried again with backoff while the server cannot be reached.
        """
        attempt = 0
        while not link.stop.is_set():
            session = ImapSession(self.name, self.settings)
            try:
                conn = self._open(session)
                try:
                    names = session._mailbox_names()
                    offered = capabilities(conn)
                    if self.push.mode == "auto" and "NOTIFY" in offered and (refusal := notify_refusal(conn, names)):
                        link.log.warning("watch.push_notify_refused", reason=refusal, fallback="idle")
                        offered = offered - {"NOTIFY"}
                finally:
                    self._forget(conn)
                    session.close()
                break
            except (OSError, imaplib.IMAP4.error, MemexError, Dead) as exc:
                if link.stop.is_set():
                    return None
                wait = backoff(attempt)
                attempt += 1
                link.down("plan", describe(exc), wait)
                if link.sleep(wait):
                    return None
        else:
            return None
        if self.push.mode == "auto" and "NOTIFY" in offered:
            link.log.info("watch.push_plan", how="notify", mailboxes=[utf7.decode(n) for n in names], connections=1)
            return [("notify", tuple(names), True)]
        wanted = set(self.push.mailboxes)
        live = [n for n in names if n in wanted or utf7.decode(n) in wanted]
        unknown = sorted(wanted - {n for n in live} - {utf7.decode(n) for n in live})
        if unknown:
            link.log.warning("watch.push_unknown", mailboxes=unknown,
                             reason="push_mailboxes names mailboxes the source does not poll (`mailboxes`); not watched")  # fmt: skip
        cap = self.push.connections - 1  # one connection is left for the poll itself
        watched, over = live[:cap], live[cap:]
        link.log.info("watch.push_plan", how="idle", mailboxes=[utf7.decode(n) for n in watched], connections=len(watched),
                      interval_only=[utf7.decode(n) for n in names if n not in watched])  # fmt: skip
        if over:
            link.log.warning("watch.push_capped", mailboxes=[utf7.decode(n) for n in over], connections=self.push.connections,
                             reason="more push_mailboxes than push_connections - 1 allows; these are polled on the interval")  # fmt: skip
        return [(f"idle {utf7.decode(n)}", (n,), False) for n in watched]

    # -- one connection ----------------------------------------------------
    def _channel(self, link: Link, key: str, boxes: tuple[str, ...], notify: bool) -> None:
        """Keep connection ``key`` up until the stop: open, listen, and after any failure open again with backoff."""
        attempt = 0
        how = "notify" if notify else "idle"
        while not link.stop.is_set():
            session = ImapSession(self.name, self.settings)
            conn: imaplib.IMAP4 | None = None
            try:
                conn = self._open(session)
                reader = Reader(conn.sock)
                if notify:
                    self._command(conn, reader, "NOTIFY SET (mailboxes (" + " ".join(quote(b) for b in boxes)
                                  + ") (MessageNew MessageExpunge))", link)  # fmt: skip
                else:
                    typ, data = conn.select(quote(boxes[0]), readonly=True)
                    if typ != "OK":
                        raise Dead(f"EXAMINE {utf7.decode(boxes[0])!r} refused ({reply_text(data)})")
                tag = self._idle(conn, reader, link)
                link.up(key, how=how, mailboxes=[utf7.decode(b) for b in boxes])
                attempt = 0
                link.wake("connected")  # whatever came while this connection was not listening
                self._listen(conn, reader, tag, link)
                link.closed(key)  # reopened on purpose (a fresh OAuth2 token): at once, no backoff
            except (OSError, imaplib.IMAP4.error, MemexError, Dead) as exc:
                if link.stop.is_set() or self._stopping:
                    link.closed(key)
                    break
                wait = backoff(attempt)
                attempt += 1
                link.down(key, describe(exc), wait)
                link.sleep(wait)
            finally:
                if conn is not None:
                    self._forget(conn)
                    shutdown(conn)
        link.closed(key)

    def _listen(self, conn: imaplib.IMAP4, reader: Reader, tag: str, link: Link) -> None:
        """Wait in IDLE, waking the watcher on news and re-issuing IDLE every ``push_renew`` seconds.

        Returns when asked to stop, or when an OAuth2 connection is due to be reopened; raises :class:`Dead`
        when the server leaves an answer out past the deadline, says BYE, or closes the connection.
        """
        opened = time.monotonic()
        reopen_at = opened + self.push.reopen if self.settings.oauth is not None else math.inf
        renew_at = opened + self.push.renew
        while not link.stop.is_set():
            now = time.monotonic()
            if now >= renew_at:
                self._done(conn, reader, tag, link)
                if time.monotonic() >= reopen_at:
                    return
                tag = self._idle(conn, reader, link)
                renew_at = time.monotonic() + self.push.renew
                continue
            try:
                line = reader.line(renew_at - now)
            except TimeoutError:
                continue
            except (Dead, OSError):
                if link.stop.is_set():
                    return
                raise
            if line.startswith(tag.encode() + b" "):
                raise Dead(f"the server ended IDLE ({reply_text(line)})")
            self._untagged(line, link)

    def _untagged(self, line: bytes, link: Link) -> None:
        """Wake the watcher for news (EXISTS, STATUS); a BYE is the end of the connection."""
        upper = line[:40].upper()
        if upper.startswith(b"* BYE"):
            raise Dead(f"the server said BYE ({reply_text(line)})")
        if _EXISTS.match(line) or upper.startswith(b"* STATUS"):
            link.wake("new")

    def _idle(self, conn: imaplib.IMAP4, reader: Reader, link: Link) -> str:
        """Send IDLE and wait (within the timeout) for the server's go-ahead; returns the command's tag."""
        tag = self._send(conn, "IDLE")
        end = time.monotonic() + self.settings.timeout
        while True:
            line = self._line(reader, end, "IDLE")
            if line.startswith(b"+"):
                return tag
            if line.startswith(tag.encode() + b" "):
                raise Dead(f"IDLE refused ({reply_text(line)})")
            self._untagged(line, link)

    def _done(self, conn: imaplib.IMAP4, reader: Reader, tag: str, link: Link) -> None:
        """End an IDLE and wait (within the timeout) for its tagged answer: the liveness check."""
        conn.sock.settimeout(self.settings.timeout)
        conn.sock.sendall(b"DONE\r\n")
        end = time.monotonic() + self.settings.timeout
        while True:
            line = self._line(reader, end, "DONE")
            if line.startswith(tag.encode() + b" "):
                if not line[len(tag) + 1 :].upper().startswith(b"OK"):
                    raise Dead(f"IDLE ended with {reply_text(line)}")
                return
            self._untagged(line, link)

    def _command(self, conn: imaplib.IMAP4, reader: Reader, command: str, link: Link) -> None:
        """Send ``command`` and wait (within the timeout) for its tagged OK."""
        tag = self._send(conn, command)
        end = time.monotonic() + self.settings.timeout
        while True:
            line = self._line(reader, end, command.split()[0])
            if line.startswith(tag.encode() + b" "):
                if not line[len(tag) + 1 :].upper().startswith(b"OK"):
                    raise Dead(f"{command.split()[0]} refused ({reply_text(line)})")
                return
            self._untagged(line, link)

    def _line(self, reader: Reader, end: float, what: str) -> bytes:
        """The next line, which must come before ``end`` or the connection is dead."""
        try:
            return reader.line(max(0.0, end - time.monotonic()))
        except TimeoutError:
            raise Dead(f"no answer to {what} within {self.settings.timeout:g}s") from None

    def _send(self, conn: imaplib.IMAP4, command: str) -> str:
        with self._lock:
            self._tag += 1
            tag = f"MXP{self._tag}"
        conn.sock.settimeout(self.settings.timeout)
        conn.sock.sendall(f"{tag} {command}\r\n".encode())
        return tag

    def _open(self, session: ImapSession) -> imaplib.IMAP4:
        """A logged-in connection, remembered so that :meth:`close` can cut it."""
        conn = session._connect()
        with self._lock:
            self._socks.add(conn)
            stopping = self._stopping
        if stopping:
            cut(conn)
            raise Dead("stopping")
        return conn

    def _forget(self, conn: imaplib.IMAP4) -> None:
        with self._lock:
            self._socks.discard(conn)


def notify_refusal(conn: imaplib.IMAP4, names: list[str]) -> str | None:
    """Why the server refuses ``NOTIFY SET`` for ``names`` though it offers NOTIFY (then IDLE is used), or None.

    Tried on the planning connection, which is closed after: a server whose NOTIFY does not take these mailboxes (a
    name it cannot watch, a NOTIFY that is only advertised) is found before any push connection depends on it.
    """
    spec = "(mailboxes (" + " ".join(quote(n) for n in names) + ") (MessageNew MessageExpunge))"
    try:
        typ, data = conn.xatom("NOTIFY", "SET " + spec)
    except imaplib.IMAP4.abort:
        raise
    except imaplib.IMAP4.error as exc:  # BAD
        typ, data = "BAD", [server_text(exc).encode()]
    if typ == "OK":
        conn.xatom("NOTIFY", "NONE")
        return None
    return f"NOTIFY SET refused ({reply_text(data)}); watching with IDLE instead"


def capabilities(conn: imaplib.IMAP4) -> frozenset[str]:
    """What the server offers once logged in (CAPABILITY again: many servers offer more after login)."""
    _typ, data = conn.capability()
    words = b" ".join(d for d in data if isinstance(d, bytes)).decode("ascii", "replace").upper().split()
    return frozenset(words) | frozenset(str(c).upper() for c in conn.capabilities)


def describe(exc: BaseException) -> str:
    """One short line for why a connection failed."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:200]
