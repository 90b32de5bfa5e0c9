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
With ``auth = "oauth2"`` the source signs in with a token instead (``provider``,
``client_id``, ``tenant``, ...: :mod:`pollers.email.imap.oauth`); a server advertising
Gmail's ``X-GM-EXT-1`` is also asked for its IDs and labels (:mod:`pollers.email.imap.gmail`).

Cursor: ``{"mailboxes": {NAME: {"uidvalidity": V, "last_uid": U}}}``, with ``"holes"`` for UIDs the server
would not send (:mod:`pollers.email.imap.holes`); positions are ``{NAME: U}``. Each fetch EXAMINEs (read-only SELECT) the
mailboxes in sorted order and takes new UIDs from the first one that has
any, with ``UID SEARCH UID U+1:*`` (whose answer includes the highest UID
even when it is not above U, so UIDs <= U are dropped) and ``UID FETCH`` of
``BODY.PEEK[]`` (never sets \\Seen) for up to :data:`FETCH_CHUNK` UIDs per
command. A mailbox whose UIDVALIDITY changed is declared a reset: its cursor
restarts at UID 0 under the new UIDVALIDITY and the rescan is absorbed by
create-only, Message-ID keyed uploads.

Transient network failures after login (connection reset, timeout, a
server BYE) are retried with a fresh connection and backoff (see
:data:`pollers.email.imap.session.BACKOFF`, read at call time) within
:data:`pollers.email.imap.session.RETRY_BUDGET` seconds; failures to connect or
log in are reported at once (cron retries next minute). The connection and
the commands are :mod:`pollers.email.imap.session`'s, the reply parsing
:mod:`pollers.email.imap.wire`'s; ``memex verify`` lists and fetches again through
:mod:`pollers.email.imap.inventory`.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memex.plugin import Batch, ConfigError, Cursor, Item, SourceConfig, SourceError
from pollers.email.imap import utf7
from pollers.email.imap.holes import HOLE_TRIES, MAX_HOLES, box, given_up, holes_of, live, make_room
from pollers.email.imap.holes import problem as holes_problem
from pollers.email.imap.inventory import Inventory
from pollers.email.imap.oauth import DEFAULT_HOSTS, read_keys
from pollers.email.imap.session import MailboxError, Settings
from pollers.email.imap.wire import imap_day
from pollers.email.mail.render import sent_or, to_item

FETCH_CHUNK = 250  # UIDs per UID FETCH command
SECURITY = ("ssl", "starttls", "none")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback name or address (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def make(source: SourceConfig) -> ImapPoller:
    """Validate ``[sources.NAME]`` of type imap and build its poller (no network yet)."""
    keys = source.keys()
    auth = keys.text("auth", default="password")
    if auth not in ("password", "oauth2"):
        raise keys.error("auth", f'must be "password" or "oauth2", not {auth!r}')
    oauth = read_keys(keys) if auth == "oauth2" else None
    default_host = DEFAULT_HOSTS.get(oauth.provider) if oauth is not None else None
    host = keys.text("host", default=default_host) if default_host else keys.text("host")
    if not host:
        raise keys.error("host", "must not be empty")
    security = keys.text("security", default="ssl")
    if security not in SECURITY:
        raise keys.error("security", f'must be "ssl", "starttls" or "none", not {security!r}')
    if security == "none" and not is_loopback(host):
        what = "the access token" if oauth is not None else "the password"
        raise keys.error("security", f'"none" sends {what} in clear text; it is allowed only for a loopback host, not {host!r}')
    port = keys.number("port", default=993 if security == "ssl" else 143, minimum=1, maximum=65535)
    user = keys.text("user")
    password_cmd = keys.text("password_cmd", default=None)
    password_env = keys.text("password_env", default=None)
    if oauth is not None:
        if password_cmd is not None or password_env is not None:
            raise keys.error(
                "password_cmd" if password_cmd is not None else "password_env",
                'auth = "oauth2" signs in with a token, not a password: remove it',
            )
        if oauth.provider != "command" and source.state_dir is None:
            raise keys.error("auth", "an OAuth2 login is kept in the config's state_dir: set state_dir")
    elif (password_cmd is None) == (password_env is None):
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
    from pollers.email.imap.push import read_keys as read_push_keys

    push = read_push_keys(keys)
    keys.finish()
    ca = str(ca_file) if ca_file is not None else None
    settings = Settings(
        host, port, security, user, password_cmd, password_env, tuple(mailboxes), float(timeout), ca, oauth, source.state_dir
    )
    settings = replace(settings, push=None if push.mode == "off" else push)  # memex watch's IDLE or NOTIFY
    return ImapPoller(source.name, settings)


class ImapPoller(Inventory):
    """Reads new UIDs of the configured mailboxes, one mailbox per fetch (and lists them for ``memex verify``)."""

    def __init__(self, name: str, settings: Settings, *, backoff: tuple[float, ...] | None = None) -> None:
        super().__init__(name, settings, backoff=backoff)
        self.fetch_chunk = FETCH_CHUNK
        self._caught_up: set[str] = set()
        self._failed: dict[str, str] = {}  # mailbox -> why it could not be read in this poll
        self._warnings: list[str] = []  # for the next batch returned
        self._retried: set[str] = set()  # mailboxes whose holes this poll asked for again (once a poll)
        self._unserved: dict[str, int] = {}  # mailbox -> holes given up, for the poll line
        me = user.lower() if "@" in (user := settings.user) else None
        self.me = frozenset([me] if me else [])

    def authenticate(self, say: Callable[[str], None], ask: Callable[[str], str] | None = None,
                     open_browser: Callable[[str], object] | None = None) -> str:  # fmt: skip
        """Sign in interactively (``memex auth``) for ``auth = "oauth2"``; returns who signed in.

        Microsoft: the device-code flow. Google: the loopback redirect, or with ``ask`` the pasted address.
        """
        oauth = self.settings.oauth
        key = f"sources.{self.name}.auth"
        if oauth is None:
            raise ConfigError('this source signs in with a password (auth = "password"): there is nothing to sign in to', key=key)
        if oauth.provider == "command":
            raise ConfigError("token_cmd's helper holds this login: sign in with that helper", key=key)
        tokens = self.tokens()
        if oauth.provider == "microsoft":
            who: str = tokens.device_flow(say)
            if "@" in who and who.lower() != self.settings.user.lower():
                say(f"note: signed in as {who} but `user` is {self.settings.user}: the server refuses the login unless "
                    f"{who} may open that mailbox (a shared mailbox); otherwise run `memex auth {self.name}` again as {self.settings.user}")  # fmt: skip
            return who
        tokens.sign_in(say, ask, open_browser)
        return self.settings.user

    def listener(self) -> Any:
        """``memex watch``'s IDLE or NOTIFY connections (:mod:`pollers.email.imap.push`), or None with ``push = "off"``."""
        if self.settings.push is None:
            return None
        from pollers.email.imap.push import ImapListener

        return ImapListener(self.name, self.settings, self.settings.push)

    # -- the Poller interface ----------------------------------------------
    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand, or None.

        ``{"mailboxes": {NAME: {"uidvalidity": V, "last_uid": U}}}``, each mailbox optionally with ``"holes"``
        (:mod:`pollers.email.imap.holes`).
        """
        boxes = cursor.get("mailboxes") if isinstance(cursor, dict) and set(cursor) == {"mailboxes"} else None
        if not isinstance(boxes, dict):
            return 'an IMAP cursor is {"mailboxes": {"INBOX": {"uidvalidity": V, "last_uid": U}}}'
        for name, st in boxes.items():
            if not isinstance(st, dict) or set(st) - {"holes"} != {"uidvalidity", "last_uid"}:
                return f'mailbox {name!r} must be {{"uidvalidity": V, "last_uid": U}} (and optionally "holes")'
            if any(type(st[k]) is not int or st[k] < 0 for k in ("uidvalidity", "last_uid")):
                return f"mailbox {name!r}: uidvalidity and last_uid must be whole numbers, not negative"
            if "holes" in st and (why := holes_problem(name, st)) is not None:
                return why
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
        early = self._collect_ahead()  # the first chunk of this batch, fetched while the last one was stored
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
            holes = holes_of(known)
            if known is None:
                state["mailboxes"][mailbox] = {"uidvalidity": validity, "last_uid": 0}
            self._unserved[mailbox] = len(given_up(holes))
            if mailbox not in self._retried and live(holes):
                self._retried.add(mailbox)  # once a poll: a hole refused again counts one try
                return self._retry_holes(mailbox, validity, last, holes, state)
            if uidnext is not None and uidnext <= last + 1:
                found: list[int] = []
            else:
                found = self._search(last + 1, uidnext, want=limit)
            uids, following = found[:limit], found[limit : limit + min(limit, self.fetch_chunk)]
            if not uids:
                self._caught_up.add(mailbox)
                if known is None:
                    return Batch(items=[], cursor=state)
                continue
            ready: list[tuple[int, bytes, datetime | None]] | None = None
            if early is not None and early[0].key == (mailbox, validity) and uids[: len(early[0].uids)] == early[0].uids:
                # Exactly the UIDs this batch starts with (the search after the cursor found them again): use that answer.
                ready, head = early[1], early[0].uids
            else:
                head = []
            chunks = ([head] if head else []) + _chunks(uids[len(head) :], self.fetch_chunk)
            items: list[Item] = []
            warnings: list[str] = []
            took = early[2] if ready is not None and early is not None else 0.0
            for index, chunk in enumerate(chunks):
                if ready is not None:  # fetched ahead: the answer is here
                    fetched, ready = ready, None
                elif (sent := self._collect_ahead()) is not None and sent[0].uids == chunk:  # sent while the chunk before was rendered
                    _, fetched, took = sent
                else:
                    if items and self._deadline.remaining() < 2 * took + 1:
                        # Another chunk would likely run past the poll's end, and nothing fetched after it is
                        # stored: hand over what arrived (the rest next poll), so a slow server still moves on.
                        return Batch(items=items, cursor=state, warnings=warnings)
                    began = time.monotonic()
                    fetched = self._fetch_raw(chunk)
                    took = time.monotonic() - began
                refused = self._still_listed(chunk, {uid for uid, _, _ in fetched})
                # The server left these out (OK without them, or NO), yet a fresh search still lists them: each becomes
                # a hole of the cursor (asked for again on the next polls) and the mailbox moves on past it.
                fit, evicted = make_room(holes, len(refused))
                warnings += [self._evicted(mailbox, uid) for uid in evicted]
                stop_at = refused[fit] if fit < len(refused) else None
                if stop_at is not None:  # every kept hole is still being retried: stop before the one that does not fit
                    fetched = [f for f in fetched if f[0] < stop_at]
                    refused = refused[:fit]
                else:
                    # Overlap: the next chunk (of this batch, else of the next one) is read while this one is
                    # rendered and stored; only if it would likely end before the poll's time does.
                    after = chunks[index + 1] if index + 1 < len(chunks) else following
                    if after and self._deadline.remaining() >= 2 * took + 1:
                        self._fetch_ahead(after, (mailbox, validity))
                for uid in refused:
                    holes[uid] = 1
                    warnings.append(self._refused(mailbox, uid, 1))
                    self._retried.add(mailbox)  # a new hole is first asked for again by the next poll
                self.refusal = None
                here = {uid: (raw, internal) for uid, raw, internal in fetched}
                for uid in sorted(here.keys() | set(refused)):
                    state = {"mailboxes": {**state["mailboxes"], mailbox: box(validity, uid, {h: t for h, t in holes.items() if h <= uid})}}
                    if uid in here:
                        items.append(self._item(mailbox, validity, uid, *here[uid], state))
                if stop_at is not None:
                    warnings.append(
                        f"{mailbox}: UID {stop_at} exists but the server sent no data for it, and {MAX_HOLES} UIDs it would not "
                        "send are being asked for again already; stopped before it until those are fetched or given up"
                    )
                    return Batch(items=items, cursor=state, warnings=warnings)
            # UIDs left out of FETCH answers and not kept as holes were confirmed expunged by a fresh search; move past them.
            boxes = dict(state["mailboxes"])
            boxes[mailbox] = box(validity, uids[-1], holes)
            self._unserved[mailbox] = len(given_up(holes))
            return Batch(items=items, cursor={"mailboxes": boxes}, warnings=warnings)
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

    def _retry_holes(self, mailbox: str, validity: int, last: int, holes: dict[int, int], state: dict[str, Any]) -> Batch:
        """Ask for the mailbox's holes again: the ones served are stored, gone ones dropped, refused ones count a try."""
        asked = live(holes)
        fetched = self._fetch_raw(asked)
        refused = set(self._still_listed(asked, {uid for uid, _, _ in fetched}))
        items: list[Item] = []
        warnings: list[str] = []
        for uid, raw, internal in fetched:
            del holes[uid]
            state = {"mailboxes": {**state["mailboxes"], mailbox: box(validity, last, holes)}}
            items.append(self._item(mailbox, validity, uid, raw, internal, state))
        for uid in asked:
            if uid in refused:
                holes[uid] += 1
                warnings.append(self._refused(mailbox, uid, holes[uid]))
            elif uid in holes:
                del holes[uid]
                warnings.append(f"{mailbox}: UID {uid}, which the server would not send, is gone from the mailbox (expunged); not stored")
        self.refusal = None
        self._unserved[mailbox] = len(given_up(holes))
        return Batch(items=items, cursor={"mailboxes": {**state["mailboxes"], mailbox: box(validity, last, holes)}}, warnings=warnings)

    def _refused(self, mailbox: str, uid: int, tries: int) -> str:
        """The warning for a UID the server would not send on its ``tries``-th poll."""
        said = f" (it said: {self.refusal})" if self.refusal else ""
        if tries >= HOLE_TRIES:
            return (f"{mailbox}: UID {uid} exists but the server has not sent it in {tries} polls{said}; given up: polls no longer "
                    "ask for it, `memex status` counts it and `memex verify` lists it (see docs/sources/email.md#holes)")  # fmt: skip
        return (f"{mailbox}: UID {uid} exists but the server sent no data for it{said}; moved on past it and kept it in the "
                f"cursor as a hole, asked for again on the next polls (try {tries} of {HOLE_TRIES})")  # fmt: skip

    def _evicted(self, mailbox: str, uid: int) -> str:
        """The warning for a given-up hole dropped from the cursor to make room for a new one."""
        return (f"{mailbox}: UID {uid}, given up earlier, is no longer kept in the cursor ({MAX_HOLES} UIDs the server would "
                "not send are kept at most); `memex verify` still finds it missing if the server lists it")  # fmt: skip

    def report(self) -> dict[str, Any]:
        """Fields of the poll line: ``unserved``, the mails the server has not sent in :data:`HOLE_TRIES` polls (memex status)."""
        count = sum(self._unserved.values())
        return {"unserved": count} if count else {}

    def _item(self, mailbox: str, validity: int, uid: int, raw: bytes, internal: datetime | None, cursor: Cursor) -> Item:
        """One fetched mail as its item: the record (with mailbox, UID, UIDVALIDITY, arrival time) and its ``.eml``.

        The poll, the backfill and ``memex verify --repair`` (:meth:`reread`) all render through here, so they agree.
        """
        extra: dict[str, Any] = {**_mailbox_extra(mailbox), "uid": uid, "uidvalidity": validity}
        if internal is not None:
            extra["received_at"] = internal.strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.gmail and (found := self.gmail_fields(mailbox, uid)):
            extra["gmail"] = found
        return to_item(raw, self.name, cursor, ref=f"{mailbox} UID {uid}", me=self.me, extra=extra)

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
            criteria.append(f"SENTSINCE {imap_day(since - timedelta(days=1))}")
        if until is not None:
            criteria.append(f"SENTBEFORE {imap_day(until + timedelta(days=2))}")
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
                    got = self._in(m, lambda: self._fetch_raw(c))
                    if self.refusal is not None:  # a backfill has no cursor to keep a hole in: fail, as before holes
                        said, self.refusal = self.refusal, None
                        raise SourceError(f"source {self.name!r}: UID FETCH refused by {self._where()} ({said})")
                    return got

                for uid, raw, internal in self._retrying("UID FETCH", get):
                    point = {"mailbox": mailbox, "uidvalidity": validity, "uid": uid}
                    item = self._item(mailbox, validity, uid, raw, internal, point)
                    when = sent_or(item.message, internal)
                    if when is not None and ((since is not None and when < since) or (until is not None and when >= until)):
                        continue
                    yield item


def _chunks(uids: list[int], size: int) -> list[list[int]]:
    """``uids`` in consecutive runs of at most ``size``."""
    return [uids[start : start + size] for start in range(0, len(uids), size)]


def _mailbox_extra(mailbox: str) -> dict[str, str]:
    """``extra.mailbox`` for display (modified UTF-7 decoded) and, when that differs, ``mailbox_imap`` as the server names it."""
    shown = utf7.decode(mailbox)
    return {"mailbox": shown} if shown == mailbox else {"mailbox": shown, "mailbox_imap": mailbox}
