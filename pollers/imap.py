"""IMAP mailboxes (``type = "imap"``), through the standard library's imaplib.

Keys: ``host``, ``port`` (default 993 with ``security = "ssl"``, else 143),
``security`` (``"ssl"``, the default, ``"starttls"``, or ``"none"`` for a
loopback host only), ``user``, exactly one of ``password_cmd`` (a shell
command line whose stdout is the password) or ``password_env`` (the name of
an environment variable), ``mailboxes`` (names or globs, default
``["INBOX"]``) and ``timeout`` (seconds per network operation, default 30) and ``ca_file``
(a PEM CA certificate to trust instead of the system's, for a private or
self-signed server; TLS certificates are always verified).
The password is read when the poll connects and is never stored or logged.

Cursor: ``{"mailboxes": {NAME: {"uidvalidity": V, "last_uid": U}}}``;
positions are ``{NAME: U}``. Each fetch EXAMINEs (read-only SELECT) the
mailboxes in sorted order and takes new UIDs from the first one that has
any, with ``UID SEARCH UID U+1:*`` (whose answer includes the highest UID
even when it is not above U, so UIDs <= U are dropped) and ``UID FETCH`` of
``BODY.PEEK[]`` (never sets \\Seen) for up to :data:`FETCH_CHUNK` UIDs per
command. A mailbox whose UIDVALIDITY changed is declared a reset: its cursor
restarts at UID 0 under the new UIDVALIDITY and the rescan is absorbed by
create-only, Message-ID keyed uploads.

Transient network failures after login (connection reset, timeout, a
server BYE) are retried with a fresh connection and backoff (see
:data:`BACKOFF`, read at call time) within :data:`RETRY_BUDGET` seconds;
failures to connect or log in are reported at once (cron retries next
minute).
"""

from __future__ import annotations

import fnmatch
import imaplib
import ipaddress
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from memex.config import SourceConfig
from memex.deadline import NEVER, Deadline, Interrupted
from memex.errors import SourceError
from memex.source import Batch, Cursor, Item
from pollers import imap_utf7 as utf7
from pollers.email_render import sent_or, to_item

FETCH_CHUNK = 250  # UIDs per UID FETCH command
SEARCH_WINDOW = 20_000  # UIDs per UID SEARCH (its answer is one line; imaplib refuses lines over 1,000,000 bytes)
SEARCH_WINDOW_MAX = 80_000  # a window doubled over empty stretches stops here (80,000 10-digit UIDs < 1 MB)
BACKOFF: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)  # seconds between retries of a transient failure
RETRY_BUDGET = 40.0  # seconds a poll may spend retrying (the runner's default time budget is 50)
PASSWORD_CMD_TIMEOUT = 30.0
SECURITY = ("ssl", "starttls", "none")
T = TypeVar("T")

_UID_RE = re.compile(rb"UID (\d+)")
_DATE_RE = re.compile(rb'INTERNALDATE "([^"]+)"')
_LIST_RE = re.compile(rb'^\((?P<flags>[^)]*)\) (?P<delim>"(?:[^"\\]|\\.)*"|NIL) (?P<name>.*)$')


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback name or address (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def quote(name: str) -> str:
    """A mailbox name as an IMAP quoted string."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


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


def make(source: SourceConfig) -> ImapPoller:
    """Validate ``[sources.NAME]`` of type imap and build its poller (no network yet)."""
    keys = source.keys()
    host = keys.text("host")
    if not host:
        raise keys.error("host", "must not be empty")
    security = keys.text("security", default="ssl")
    if security not in SECURITY:
        raise keys.error("security", f'must be "ssl", "starttls" or "none", not {security!r}')
    if security == "none" and not is_loopback(host):
        raise keys.error("security", f'"none" sends the password in clear text; it is allowed only for a loopback host, not {host!r}')
    port = keys.number("port", default=993 if security == "ssl" else 143, minimum=1, maximum=65535)
    user = keys.text("user")
    password_cmd = keys.text("password_cmd", default=None)
    password_env = keys.text("password_env", default=None)
    if (password_cmd is None) == (password_env is None):
        raise keys.error("password_cmd", "set exactly one of password_cmd (a command printing the password) or password_env")
    mailboxes = keys.strings("mailboxes", default=["INBOX"])
    if not mailboxes or not all(mailboxes):
        raise keys.error("mailboxes", "must list at least one non-empty mailbox name or glob")
    timeout = keys.number("timeout", default=30, minimum=1, maximum=600)
    ca_file = keys.path("ca_file", default=None)
    if ca_file is not None and security == "none":
        raise keys.error("ca_file", 'is for TLS; it has no effect with security = "none"')
    if ca_file is not None and not Path(ca_file).is_file():
        raise keys.error("ca_file", f"{ca_file}: no such file (the PEM certificate of the CA to trust)")
    keys.finish()
    ca = str(ca_file) if ca_file is not None else None
    settings = Settings(host, port, security, user, password_cmd, password_env, tuple(mailboxes), float(timeout), ca)
    return ImapPoller(source.name, settings)


class _Transient(Exception):
    """A network failure after login that a fresh connection may cure."""


class MailboxError(SourceError):
    """One mailbox cannot be read (refused EXAMINE, no UIDVALIDITY); the others are polled all the same."""


class ImapPoller:
    """Reads new UIDs of the configured mailboxes, one mailbox per fetch."""

    def __init__(self, name: str, settings: Settings, *, backoff: tuple[float, ...] | None = None) -> None:
        self.name = name
        self.settings = settings
        self.backoff = backoff
        self.fetch_chunk = FETCH_CHUNK
        self.commands = 0  # IMAP commands sent (round trips), for the benchmark
        self._conn: imaplib.IMAP4 | None = None
        self._selected: str | None = None
        self._names: list[str] | None = None
        self._caught_up: set[str] = set()
        self._failed: dict[str, str] = {}  # mailbox -> why it could not be read in this poll
        self._warnings: list[str] = []  # for the next batch returned
        self._retry_deadline: float | None = None
        self._deadline: Deadline = NEVER
        me = user.lower() if "@" in (user := settings.user) else None
        self.me = frozenset([me] if me else [])

    # -- connection --------------------------------------------------------
    def _where(self) -> str:
        return f"{self.settings.host}:{self.settings.port}"

    def _password(self) -> str:
        s = self.settings
        if s.password_env is not None:
            value = os.environ.get(s.password_env)
            if not value:
                raise SourceError(f"source {self.name!r}: environment variable {s.password_env} (password_env) is not set or empty")
            return value
        assert s.password_cmd is not None
        try:
            done = subprocess.run(s.password_cmd, shell=True, capture_output=True, timeout=PASSWORD_CMD_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SourceError(f"source {self.name!r}: password_cmd did not finish within {PASSWORD_CMD_TIMEOUT:g}s") from None
        if done.returncode != 0:
            raise SourceError(
                f"source {self.name!r}: password_cmd failed with exit status {done.returncode}; "
                "run it by hand to see why (its output is not shown here)"
            )
        password = done.stdout.decode("utf-8", "replace").strip()
        if not password:
            raise SourceError(f"source {self.name!r}: password_cmd printed nothing; it must print the password on stdout")
        return password

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
        if conn is not None:
            _cut(conn)

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
        if self._conn is not None:
            return self._conn
        s = self.settings
        password = self._password()
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
            reason = exc.strerror or type(exc).__name__
            raise SourceError(f"source {self.name!r}: cannot connect to {self._where()} ({reason})") from None
        except imaplib.IMAP4.error as exc:
            raise SourceError(f"source {self.name!r}: {self._where()} refused the session ({_server_text(exc)})") from None
        try:
            self.commands += 1
            self._io("login", lambda: conn.login(s.user, password))
        except Interrupted:
            _cut(conn)
            raise
        except imaplib.IMAP4.error as exc:
            _shutdown(conn)
            raise SourceError(
                f"source {self.name!r}: login as {s.user!r} at {self._where()} failed ({_server_text(exc)}); check the user and the password"
            ) from None
        except OSError as exc:
            _shutdown(conn)
            raise SourceError(f"source {self.name!r}: connection to {self._where()} lost during login ({type(exc).__name__})") from None
        self._conn = conn
        self._selected = None
        return conn

    def close(self) -> None:
        """Log out and close the connection."""
        conn, self._conn = self._conn, None
        self._selected = None
        if conn is not None:
            try:
                if self._deadline.reason is not None:
                    raise Interrupted(self._deadline.reason, "logout")  # no time left to wait for a goodbye
                self._deadline.call(conn.logout, "logout", abandon=lambda: _cut(conn))
            except Exception:
                _shutdown(conn)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._selected = None
        if conn is not None:
            _shutdown(conn)

    def set_deadline(self, deadline: float) -> None:
        """Cap the retry budget at the runner's deadline (``--max-seconds``): see memex.source.DeadlineAware."""
        self._retry_deadline = min(time.monotonic() + RETRY_BUDGET, deadline)

    def use_deadline(self, deadline: Deadline) -> None:
        """Bound every exchange, retry and backoff by the poll's deadline and stop request (memex.source.Interruptible)."""
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
            except (_Transient, imaplib.IMAP4.abort, OSError) as exc:
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
            raise SourceError(f"source {self.name!r}: {what} refused by {self._where()} ({_text(data)})")
        return data

    # -- mailboxes ---------------------------------------------------------
    def _mailbox_names(self) -> list[str]:
        """The configured mailboxes (globs expanded with LIST), sorted and unique."""
        if self._names is not None:
            return self._names
        patterns = self.settings.mailboxes
        if not any(ch in p for p in patterns for ch in "*?["):
            self._names = sorted({p if utf7.decode(p) != p else utf7.encode(p) for p in patterns})
            return self._names

        def listing() -> list[str]:
            conn = self._connect()
            self.commands += 1
            data = self._cmd(conn, "LIST", self._io("LIST", lambda: conn.list('""', "*")))
            return [n for n in (_parse_list(d) for d in data) if n is not None]

        available = self._retrying("LIST", listing)
        chosen = {n for n in available for p in patterns if fnmatch.fnmatchcase(n, p) or fnmatch.fnmatchcase(utf7.decode(n), p)}
        self._names = sorted(chosen)
        return self._names

    def _examine(self, mailbox: str) -> tuple[int, int | None]:
        """EXAMINE (read-only SELECT) ``mailbox``; return its UIDVALIDITY and UIDNEXT (if sent)."""
        conn = self._connect()
        self.commands += 1
        typ, data = self._io("EXAMINE", lambda: conn.select(quote(mailbox), readonly=True))
        if typ != "OK":
            self._selected = None
            raise MailboxError(
                f"source {self.name!r}: mailbox {utf7.decode(mailbox)!r} cannot be opened at {self._where()} ({_text(data)}); "
                "check `mailboxes` in the source's config section"
            )
        self._selected = mailbox
        validity = _untagged_int(conn, "UIDVALIDITY")
        if validity is None:
            raise MailboxError(f"source {self.name!r}: {self._where()} sent no UIDVALIDITY for {mailbox!r}; cannot keep a cursor")
        return validity, _untagged_int(conn, "UIDNEXT")

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
        return _ints(data)

    def _fetch_raw(self, uids: list[int]) -> list[tuple[int, bytes, datetime | None]]:
        """``(uid, raw bytes, INTERNALDATE)`` of ``uids`` in the selected mailbox, in one UID FETCH."""
        conn = self._connect()
        self.commands += 1
        data = self._cmd(
            conn, "UID FETCH", self._io("UID FETCH", lambda: conn.uid("FETCH", _uid_set(uids), "(UID INTERNALDATE BODY.PEEK[])"))
        )
        wanted = set(uids)
        out: dict[int, tuple[bytes, datetime | None]] = {}
        pending: tuple[bytes, bytes] | None = None
        for element in data:
            if isinstance(element, tuple):
                pending = (element[0], element[1])
                head = element[0]
            elif isinstance(element, bytes) and pending is not None:
                head = pending[0] + element  # UID or INTERNALDATE may come after the literal
            else:
                continue
            if pending is None:
                continue
            m = _UID_RE.search(head)
            if m is None:
                continue
            uid = int(m.group(1))
            if uid in wanted and uid not in out:
                d = _DATE_RE.search(head)
                out[uid] = (pending[1], _internaldate(d.group(1)) if d else None)
                pending = None
        return [(u, *out[u]) for u in sorted(out)]

    def _first_gap(self, asked: list[int], got: set[int]) -> int | None:
        """The lowest UID of ``asked`` missing from ``got`` that a fresh ``UID SEARCH`` says still exists, or None.

        Servers (Gmail among them) can answer a UID FETCH with OK and no data for
        a message that is there; only UIDs the server confirms gone may be passed.
        """
        missing = [u for u in asked if u not in got]
        if not missing:
            return None
        conn = self._connect()
        self.commands += 1
        data = self._cmd(conn, "UID SEARCH", self._io("UID SEARCH", lambda: conn.uid("SEARCH", f"UID {_uid_set(missing)}")))
        still = sorted(set(_ints(data)) & set(missing))
        return still[0] if still else None

    def _in(self, mailbox: str, operation: Callable[[], T]) -> T:
        """Run ``operation`` with ``mailbox`` selected (again, after a reconnect)."""
        if self._conn is None or self._selected != mailbox:
            self._examine(mailbox)
        return operation()

    # -- the Poller interface ----------------------------------------------
    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand, or None: ``{"mailboxes": {NAME: {"uidvalidity": V, "last_uid": U}}}``."""
        boxes = cursor.get("mailboxes") if isinstance(cursor, dict) and set(cursor) == {"mailboxes"} else None
        if not isinstance(boxes, dict) or not boxes:
            return 'an IMAP cursor is {"mailboxes": {"INBOX": {"uidvalidity": V, "last_uid": U}}}'
        for name, st in boxes.items():
            if not isinstance(st, dict) or set(st) != {"uidvalidity", "last_uid"}:
                return f'mailbox {name!r} must be {{"uidvalidity": V, "last_uid": U}}'
            if any(type(v) is not int or v < 0 for v in st.values()):
                return f"mailbox {name!r}: uidvalidity and last_uid must be whole numbers, not negative"
        return None

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """``{mailbox: last UID}``."""
        if not cursor:
            return {}
        return {name: int(st.get("last_uid", 0)) for name, st in (cursor.get("mailboxes") or {}).items()}

    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """New messages of the first mailbox (in sorted order) that has any, up to ``limit``."""
        batch = self._retrying("fetch", lambda: self._fetch_once(cursor, limit))
        batch.warnings[:0], self._warnings = self._warnings, []
        return batch

    def _fetch_once(self, cursor: Cursor, limit: int) -> Batch:
        state: dict[str, Any] = {"mailboxes": dict((cursor or {}).get("mailboxes") or {})}
        for mailbox in self._mailbox_names():
            if mailbox in self._caught_up:
                continue
            try:
                validity, uidnext = self._examine(mailbox)
            except MailboxError as exc:
                # One mailbox that cannot be opened never blocks the others: skip it now, fail the poll at the end.
                self._failed[mailbox] = str(exc)
                self._caught_up.add(mailbox)
                self._warnings.append(str(exc))
                continue
            known = state["mailboxes"].get(mailbox)
            if known is not None and int(known["uidvalidity"]) != validity:
                old = known["uidvalidity"]
                state["mailboxes"][mailbox] = {"uidvalidity": validity, "last_uid": 0}
                return Batch(items=[], cursor=state, reset=f"{mailbox}: UIDVALIDITY changed from {old} to {validity}; rescanning")
            last = int(known["last_uid"]) if known else 0
            if known is None:
                state["mailboxes"][mailbox] = {"uidvalidity": validity, "last_uid": 0}
            if uidnext is not None and uidnext <= last + 1:
                uids: list[int] = []
            else:
                uids = self._search(last + 1, uidnext, want=limit)[:limit]
            if not uids:
                self._caught_up.add(mailbox)
                if known is None:
                    return Batch(items=[], cursor=state)
                continue
            items: list[Item] = []
            took = 0.0
            for start in range(0, len(uids), self.fetch_chunk):
                if items and self._deadline.remaining() < 2 * took + 1:
                    # Another chunk would likely run past the poll's end, and nothing fetched after it is
                    # stored: hand over what arrived (the rest next poll), so a slow server still moves on.
                    return Batch(items=items, cursor=state)
                began = time.monotonic()
                chunk = uids[start : start + self.fetch_chunk]
                fetched = self._fetch_raw(chunk)
                took = time.monotonic() - began
                gap = self._first_gap(chunk, {uid for uid, _, _ in fetched})
                if gap is not None:
                    # The server answered OK without this UID, yet a fresh search still lists it: stop right
                    # before it (the cursor never passes a message not stored); the next poll asks again.
                    fetched = [f for f in fetched if f[0] < gap]
                for uid, raw, internal in fetched:
                    boxes = dict(state["mailboxes"])
                    boxes[mailbox] = {"uidvalidity": validity, "last_uid": uid}
                    state = {"mailboxes": boxes}
                    extra: dict[str, Any] = {**_mailbox_extra(mailbox), "uid": uid, "uidvalidity": validity}
                    if internal is not None:
                        extra["received_at"] = internal.strftime("%Y-%m-%dT%H:%M:%SZ")
                    items.append(to_item(raw, self.name, state, ref=f"{mailbox} UID {uid}", me=self.me, extra=extra))
                if gap is not None:
                    warning = f"{mailbox}: UID {gap} exists but the server sent no data for it; stopped before it, retried next poll"
                    return Batch(items=items, cursor=state, warnings=[warning])
            # UIDs left out of FETCH answers were confirmed expunged by a fresh search; move past them.
            boxes = dict(state["mailboxes"])
            boxes[mailbox] = {"uidvalidity": validity, "last_uid": uids[-1]}
            return Batch(items=items, cursor={"mailboxes": boxes})
        self._caught_up.clear()
        if self._failed:
            failed, self._failed = self._failed, {}
            if len(failed) == 1:
                raise SourceError(next(iter(failed.values())) + "; the other mailboxes were polled")
            names = ", ".join(repr(n) for n in sorted(failed))
            raise SourceError(
                f"source {self.name!r}: {len(failed)} mailboxes could not be read ({names}); the other mailboxes were "
                "polled; the source.warning lines of its log give each reason"
            )
        return Batch(items=[], cursor=state)

    def head(self) -> Cursor:
        """A cursor at each mailbox's newest UID now (UIDNEXT - 1)."""

        def once() -> Cursor:
            boxes: dict[str, Any] = {}
            for mailbox in self._mailbox_names():
                validity, uidnext = self._examine(mailbox)
                if uidnext is None:
                    found = self._search(1)
                    last = found[-1] if found else 0
                else:
                    last = max(0, uidnext - 1)
                boxes[mailbox] = {"uidvalidity": validity, "last_uid": last}
            return {"mailboxes": boxes}

        return self._retrying("head", once)

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Messages sent in ``[since, until)``, mailbox by mailbox (sorted), in UID order.

        The server narrows by day (SENTSINCE / SENTBEFORE, with a day's
        slack for time zones); the exact bound is applied to the parsed Date
        header, or to INTERNALDATE when the header is unusable. Checkpoint:
        ``{"mailbox", "uidvalidity", "uid"}`` of the last item yielded; a
        mailbox whose UIDVALIDITY changed since is walked again from its
        start (dedup absorbs it).
        """
        names = self._mailbox_names()
        start_index, after_uid, old_validity = 0, 0, None
        if checkpoint:
            if checkpoint.get("mailbox") in names:
                start_index = names.index(checkpoint["mailbox"])
                after_uid = int(checkpoint.get("uid", 0))
                old_validity = checkpoint.get("uidvalidity")
            else:
                start_index = sum(1 for n in names if n < str(checkpoint.get("mailbox", "")))
        criteria = []
        if since is not None:
            criteria.append(f"SENTSINCE {_imap_day(since - timedelta(days=1))}")
        if until is not None:
            criteria.append(f"SENTBEFORE {_imap_day(until + timedelta(days=2))}")
        search = " ".join(criteria)
        for index in range(start_index, len(names)):
            mailbox = names[index]
            validity, uidnext = self._retrying("EXAMINE", lambda m=mailbox: self._examine(m))  # type: ignore[misc]
            floor = after_uid if index == start_index and old_validity == validity else 0

            def search_box(m: str = mailbox, n: int | None = uidnext, f: int = floor) -> list[int]:
                return self._in(m, lambda: self._search(f + 1, n, criteria=search))

            found = self._retrying("UID SEARCH", search_box)
            uids = [u for u in found if u > floor]
            for start in range(0, len(uids), self.fetch_chunk):
                chunk = uids[start : start + self.fetch_chunk]

                def get(m: str = mailbox, c: list[int] = chunk) -> list[tuple[int, bytes, datetime | None]]:
                    return self._in(m, lambda: self._fetch_raw(c))

                for uid, raw, internal in self._retrying("UID FETCH", get):
                    point = {"mailbox": mailbox, "uidvalidity": validity, "uid": uid}
                    extra: dict[str, Any] = {**_mailbox_extra(mailbox), "uid": uid, "uidvalidity": validity}
                    if internal is not None:
                        extra["received_at"] = internal.strftime("%Y-%m-%dT%H:%M:%SZ")
                    item = to_item(raw, self.name, point, ref=f"{mailbox} UID {uid}", me=self.me, extra=extra)
                    when = sent_or(item.message, internal)
                    if when is not None and ((since is not None and when < since) or (until is not None and when >= until)):
                        continue
                    yield item


def _cut(conn: imaplib.IMAP4) -> None:
    """Shut a connection's socket down (from any thread): a read blocked on it returns at once."""
    try:
        conn.sock.shutdown(socket.SHUT_RDWR)
    except Exception:
        pass


def _mailbox_extra(mailbox: str) -> dict[str, str]:
    """``extra.mailbox`` for display (modified UTF-7 decoded) and, when that differs, ``mailbox_imap`` as the server names it."""
    shown = utf7.decode(mailbox)
    return {"mailbox": shown} if shown == mailbox else {"mailbox": shown, "mailbox_imap": mailbox}


def _shutdown(conn: imaplib.IMAP4) -> None:
    try:
        conn.shutdown()
    except Exception:
        pass


def _text(data: Any) -> str:
    """A server reply as one short line."""
    if isinstance(data, list | tuple):
        data = b" ".join(d if isinstance(d, bytes) else str(d).encode() for d in data if d is not None)
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return " ".join(str(data).split())[:200]


def _server_text(exc: BaseException) -> str:
    return _text(exc.args[0] if exc.args else type(exc).__name__)


def _untagged_int(conn: imaplib.IMAP4, name: str) -> int | None:
    _, values = conn.response(name)
    for value in values or []:
        if value is None:
            continue
        text = value.decode() if isinstance(value, bytes) else str(value)
        try:
            return int(text.strip().split()[0])
        except (ValueError, IndexError):
            continue
    return None


def _ints(data: list[Any]) -> list[int]:
    out: list[int] = []
    for line in data:
        if isinstance(line, bytes):
            out.extend(int(x) for x in line.split() if x.isdigit())
    return out


def _uid_set(uids: list[int]) -> str:
    """A compact UID set: ``1:5,7,9:12``."""
    parts: list[str] = []
    run_start = prev = uids[0]
    for u in uids[1:]:
        if u == prev + 1:
            prev = u
            continue
        parts.append(f"{run_start}:{prev}" if prev != run_start else str(run_start))
        run_start = prev = u
    parts.append(f"{run_start}:{prev}" if prev != run_start else str(run_start))
    return ",".join(parts)


def _internaldate(value: bytes) -> datetime | None:
    try:
        return datetime.strptime(value.decode(), "%d-%b-%Y %H:%M:%S %z").astimezone(UTC)
    except ValueError:
        return None


def _imap_day(dt: datetime) -> str:
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    return f"{dt.day}-{months[dt.month - 1]}-{dt.year}"


def _parse_list(line: Any) -> str | None:
    """The mailbox name of one LIST reply line, or None for \\Noselect or unparseable lines."""
    if isinstance(line, tuple):  # name sent as a literal
        head, name_bytes = line[0], line[1]
        if b"\\noselect" in head.lower():
            return None
        return str(name_bytes.decode("utf-8", "replace"))
    if not isinstance(line, bytes):
        return None
    m = _LIST_RE.match(line)
    if m is None:
        return None
    if b"\\noselect" in m.group("flags").lower() or b"\\nonexistent" in m.group("flags").lower():
        return None
    name = m.group("name")
    if name.startswith(b'"') and name.endswith(b'"'):
        name = re.sub(rb"\\(.)", rb"\1", name[1:-1])
    return name.decode("utf-8", "replace")
