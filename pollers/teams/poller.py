"""Microsoft Teams chats (``type = "teams"``), through Microsoft Graph with a delegated login.

Keys: ``client_id`` (default: Microsoft's public "Microsoft Graph Command
Line Tools" app), ``tenant`` (default ``organizations``), ``authority``
(default ``https://login.microsoftonline.com``), ``graph_url`` (default
``https://graph.microsoft.com/v1.0``; national clouds and tests set both),
``timeout`` (seconds per request, default 30), ``page_size`` (1..50,
default 50) and ``overlap_seconds`` (default 60). ``memex auth SOURCE``
signs in once (:mod:`pollers.teams.auth`); polls refresh silently.

Each poll lists ``/me/chats`` (paged), then walks each chat's
``/me/chats/{id}/messages`` with ``$orderby=lastModifiedDateTime desc`` and
``$filter=lastModifiedDateTime gt <cursor - overlap>``, following
``@odata.nextLink`` to the end. Pages come newest first, so a chat's cursor
moves only in the batch that ends its walk: a poll stopped mid-walk (kill
-9, the deadline) is continued next time by creation time, below the oldest
message it stored (``$orderby=createdDateTime desc``, ``createdDateTime
lt``). Creation never moves, so a message changed between the two polls
(a reaction, an edit: its modification jumps above the stopped walk) is
still read and stored as an original; a modification-ordered resume never
met it, and the next poll took it for a stored message and wrote only
revisions of it. A chat not in the cursor (new, or first sync) is walked
from its start. With ``channels = true`` the joined
teams' channels follow (:mod:`pollers.teams.channels`).

Cursor: ``{"chats": {CHAT_ID: {"t": µs, "seen": ["MSGID@µs", ...]}}}``:
``t`` is the newest ``lastModifiedDateTime`` stored, ``seen`` the messages
modified within the overlap before it, so the overlap's re-reads are
skipped instead of counted as duplicates (a re-read message with a *new*
modification time is processed). A walk stopped mid-way leaves only where
to resume (``below``, :mod:`pollers.teams.cursor`). Positions: ``{"chats":
N, "modified": newest t in seconds, "read": items passed}``.

A message not stored before becomes its original record (as it is now:
edited text, deleted flag, reactions). A stored message seen again with a
new modification time becomes revisions of it (:func:`teams_render.revision_plan`):
``edit-<time>``, ``delete-<time>``, or ``reactions-<digest>``; the original
is never rewritten. Each revision is the whole message as it is now
(``Item.whole``): if its original is missing after all (a message changed
while the first walk was between its pages), the core stores it as the
original first (:meth:`memex.uploader.Uploader.put`). Inline images (``hostedContents``) are fetched and
stored content-addressed; file references stay metadata.

A chat that still fails after the retries the deadline allows keeps its
cursor; the other chats go on and the poll then fails with one line naming
it (exit 1).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from memex.plugin import AuthRequired, Batch, ConfigError, Conversation, Cursor, Deadline, Failure, Item, SourceConfig, SourceError
from pollers.teams import channels as teams_channels
from pollers.teams import history as teams_history
from pollers.teams import render
from pollers.teams.auth import CHANNEL_SCOPES, CHAT_SCOPES, DEFAULT_AUTHORITY, DEFAULT_CLIENT_ID, DEFAULT_TENANT, AuthSettings, Login
from pollers.teams.cursor import Walk, advanced, numbered, partial
from pollers.teams.graph import Gone, GraphUnavailable
from pollers.teams.session import DEFAULT_GRAPH, MAX_PAGE, Settings, TeamsSession, conv_path

# memex watch's delta polling: an idle poll is one request plus one per chat (and channel), so every 30 s is about
# 0.03 + chats/30 requests a second, far below the Teams service's per-app limits (docs/sources/teams.md)
WATCH_INTERVAL = 30


def _url_key(keys: Any, key: str, default: str) -> str:
    value: str = keys.text(key, default=default).rstrip("/")
    if not value.startswith("https://"):
        raise keys.error(key, f"must be an https:// URL, not {value!r}")
    return value


def make(source: SourceConfig) -> TeamsPoller:
    """Validate ``[sources.NAME]`` of type teams and build its poller (no network yet)."""
    keys = source.keys()
    client_id = keys.text("client_id", default=DEFAULT_CLIENT_ID)
    tenant = keys.text("tenant", default=DEFAULT_TENANT)
    if not client_id or not tenant or "/" in tenant:
        raise keys.error("tenant" if client_id else "client_id", "must be a non-empty ID or name without '/'")
    authority = _url_key(keys, "authority", DEFAULT_AUTHORITY)
    graph_url = _url_key(keys, "graph_url", DEFAULT_GRAPH)
    timeout = keys.number("timeout", default=30, minimum=1, maximum=600)
    page_size = keys.number("page_size", default=MAX_PAGE, minimum=1, maximum=MAX_PAGE)
    overlap = keys.number("overlap_seconds", default=60, minimum=0, maximum=86400)
    channels = keys.flag("channels", default=False)
    watch_interval = keys.number("watch_interval", default=WATCH_INTERVAL, minimum=1, maximum=3600)
    keys.finish()
    if source.state_dir is None:
        raise ConfigError(
            "a teams source needs the config's state_dir (its login is kept there)", path=source.path, key=f"sources.{source.name}"
        )
    settings = Settings(
        auth=AuthSettings(
            client_id=client_id,
            tenant=tenant,
            authority=authority,
            scopes=CHAT_SCOPES + (CHANNEL_SCOPES if channels else ()),
            timeout=float(timeout),
        ),
        graph_url=graph_url,
        timeout=float(timeout),
        page_size=page_size,
        overlap_us=overlap * 1_000_000,
        channels=channels,
    )
    poller = TeamsPoller(source.name, settings, Login(source.name, settings.auth, source.state_dir))
    poller.watch_interval_seconds = float(watch_interval)
    return poller


class TeamsPoller(TeamsSession):
    """Reads new and changed chat messages of the signed-in user."""

    whole_revisions = True  # each revision is the whole message as it is now: `memex verify --repair` may store a missing original from it
    watch_interval_seconds = float(WATCH_INTERVAL)  # memex watch polls this often (memex.source.Paced)

    def report(self) -> dict[str, Any]:
        """``retry_after_s``: a Retry-After (429, 503) this poll had no time left to wait: memex watch waits it out."""
        return {"retry_after_s": round(self.graph.retry_after, 1)} if self.graph.retry_after else {}

    def __init__(self, name: str, settings: Settings, login: Login, *, backoff: tuple[float, ...] | None = None) -> None:
        super().__init__(name, settings, login, backoff=backoff)
        self._queue: list[tuple[str, Conversation]] | None = None
        self._walk: Walk | None = None
        self._failed: list[str] = []

    def use_deadline(self, deadline: Deadline) -> None:
        """Bound every request, retry and Retry-After wait by the poll's deadline (:class:`memex.capabilities.Interruptible`)."""
        self.graph.deadline = deadline

    def authenticate(self, say: Any, ask: Any = None, open_browser: Any = None) -> str:
        """Sign in interactively (``memex auth``): the device-code flow (on any device: ``ask``/``open_browser`` unused)."""
        name: str = self.login.device_flow(say)
        return name

    def validate_cursor(self, cursor: Any) -> str | None:
        """What is wrong with a cursor given by hand or read from the cursor store, or None."""
        if _well_formed(cursor):
            return None
        return 'a Teams cursor is {"chats": {CHAT_ID: {"t": MICROSECONDS, "seen": [...]}}, "n": N} (channels optional)'

    def positions(self, cursor: Cursor) -> dict[str, int]:
        """``{"chats": chats walked, "modified": newest stored modification (epoch seconds), "read": records stored}`` (+ ``"channels"``).

        ``read`` counts every item a cursor has passed, so a poll that only continued an interrupted walk
        (its chat's ``t`` unchanged) still shows its cursor moving.
        """
        if cursor is not None and not _well_formed(cursor):
            return {}  # fetch refuses it with the line that says what to do
        chats = (cursor or {}).get("chats") or {}
        channels = (cursor or {}).get("channels") or {}
        newest = max((int(c.get("t", 0)) for c in (*chats.values(), *channels.values())), default=0)
        out = {"chats": len(chats), "modified": newest // 1_000_000, "read": int((cursor or {}).get("n", 0))}
        if self.settings.channels or channels:
            out["channels"] = len(channels)
        return out

    # -- the walk ------------------------------------------------------------
    def head(self) -> Cursor:
        """A live cursor at every chat's newest message now (``start = "now"``; see :mod:`pollers.teams.history`)."""
        return teams_history.head(self)

    def history(self, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
        """Every message created in ``[since, until)``, chat by chat (``memex backfill``; see :mod:`pollers.teams.history`)."""
        return teams_history.history(self, since, until, checkpoint)

    def _messages_url(self, chat_id: str, prev: dict[str, Any] | None) -> str:
        params: dict[str, Any] = {"$top": self.settings.page_size, "$orderby": "lastModifiedDateTime desc"}
        if prev is not None and prev.get("below"):  # an interrupted walk: the messages created before its last stored one
            low = int(prev["below"][0]) + 1  # by creation, which never moves: a message changed since is not skipped
            params["$orderby"] = "createdDateTime desc"
            params["$filter"] = f"createdDateTime lt {render.format_ts(-(-low // 1000) * 1000)}"
        elif prev is not None:
            since = max(0, int(prev.get("t", 0)) - self.settings.overlap_us)
            params["$filter"] = f"lastModifiedDateTime gt {render.format_ts(since)}"
        return self.graph.url(f"/me/chats/{conv_path(chat_id)}/messages?" + urlencode(params, safe="$:", quote_via=quote))

    def fetch(self, cursor: Cursor, limit: int) -> Batch:
        """The next page of the chat being walked; the batch ending a chat's walk carries its new cursor."""
        cursor = cursor or {"chats": {}}
        if not _well_formed(cursor):
            raise SourceError(
                f"{self.name}: the stored cursor is not a Teams cursor (hand-edited?); "
                f"`memex cursor reset {self.name}` reads everything again (duplicates are skipped)"
            )
        if self._queue is None:
            self.me()
            self._queue = [("chats", c) for c in self.chats()]
            if self.settings.channels:
                self._queue += [("channels", c) for c in teams_channels.channels(self)]
        while self._walk is not None or self._queue:
            if self._walk is None:
                kind, chat = self._queue.pop(0)
                prev = (cursor.get(kind) or {}).get(chat["id"])
                self._walk = Walk(chat=chat, next_url=self._first_url(kind, chat["id"] or "", prev), prev=prev, kind=kind,
                                   resume=kind == "chats" and bool((prev or {}).get("below")))  # fmt: skip
            walk = self._walk
            try:
                items = self._page(walk, cursor)
            except AuthRequired:
                raise
            except Gone:
                if walk.kind == "channels" and walk.prev is not None and walk.next_url == walk.prev.get("delta"):
                    walk.next_url = self._first_url("channels", walk.chat["id"] or "", None)  # delta token expired: sync again
                    continue
                self._failed.append(f"{walk.chat['id']} (Graph answered 410)")
                self._walk = None
                continue
            except SourceError as exc:  # this chat only: the others go on, its cursor stays
                self._failed.append(f"{walk.chat['id']} ({exc})")
                self._walk = None
                continue
            if walk.next_url is None:
                self._walk = None
                new = advanced(cursor, walk, self.settings.overlap_us)
                if items or new != cursor:
                    return numbered(cursor, items, new)
                continue
            if items:
                return numbered(cursor, items, partial(cursor, walk, self.settings.overlap_us))
        if self._failed:
            failed, self._failed = self._failed, []
            raise SourceError(f"{self.name}: {len(failed)} chat(s) not read this time, their cursors kept: {'; '.join(failed)[:600]}")
        return Batch(items=[], cursor=cursor)

    def _first_url(self, kind: str, conv_id: str, prev: dict[str, Any] | None) -> str:
        if kind == "chats":
            return self._messages_url(conv_id, prev)
        if prev is not None and isinstance(prev.get("delta"), str):
            return str(prev["delta"])
        return teams_channels.delta_url(self, self._teams[conv_id], conv_id)

    def _page(self, walk: Walk, cursor: Cursor) -> list[Item]:
        """Fetch the walk's next page and turn its messages into items (all at the unchanged cursor)."""
        assert walk.next_url is not None
        doc = self.graph.get(walk.next_url)
        values = doc.get("value") if isinstance(doc, dict) else None
        if not isinstance(values, list):
            raise GraphUnavailable(f"{self.name}: Graph answered a page without a value list")
        nxt = doc.get("@odata.nextLink")
        items: list[Item] = []
        for msg in values:
            if isinstance(msg, dict) and "@removed" in msg:
                continue  # a delta tombstone without the message: its deletion arrives as deletedDateTime
            stored = self._message(walk, msg, cursor)
            if stored and walk.kind == "chats":  # each item resumes right below itself (a poll stopped mid-page)
                at = partial(cursor, walk, self.settings.overlap_us)
                for item in stored:
                    item.cursor = at
            items.extend(stored)
            for reply in teams_channels.chain(self, msg) if isinstance(msg, dict) else ():
                items.extend(self._message(walk, reply, cursor))
        walk.next_url = nxt if isinstance(nxt, str) else None
        delta = doc.get("@odata.deltaLink")
        if walk.next_url is None and isinstance(delta, str):
            walk.delta = delta
        return items

    def _message(self, walk: Walk, msg: Any, cursor: Cursor) -> list[Item]:
        chat_id = walk.chat["id"] or ""
        failure = render.malformed(chat_id, msg, "lastModifiedDateTime")
        if failure is not None:
            return [Item(cursor=cursor, failure=failure)]
        mid: str = msg["id"]
        modified = render.parse_ts(msg["lastModifiedDateTime"])
        assert modified is not None  # malformed() checked it
        created = render.parse_ts(msg.get("createdDateTime"))
        prev = walk.prev
        at = modified  # the walk's order: by modification, a resumed walk by creation
        moved = False  # a resumed walk meets a message changed since the interrupted walk began
        if walk.resume and prev is not None:
            at = modified if created is None else created
            low, low_ids = prev["below"]
            if at > low or (at == low and mid in low_ids):
                return []  # stored by the interrupted walk
            moved = modified > int(prev.get("top", 0))
        if not moved:  # a moved message stays out of the cursor: the next poll reads it again, as a change
            walk.newest = max(walk.newest, modified)
            walk.seen[mid] = modified
        if walk.low is not None and at > walk.low:
            walk.ordered = False  # not newest first after all: no resume point can be trusted in this walk
        if walk.low is None or at < walk.low:
            walk.low, walk.low_ids = at, {mid}
        elif at == walk.low:
            walk.low_ids.add(mid)
        if prev is not None and f"{mid}@{modified}" in prev.get("seen", ()):
            return []  # the overlap's re-read of a message already handled
        if prev is not None and modified <= int(prev.get("t", 0)) - self.settings.overlap_us:
            return []  # unchanged since it was stored (a channel's reply chain comes back whole)
        try:
            message = render.render(self.name, walk.chat, msg, self._me)
        except Exception as exc:  # one odd message never blocks the chat
            import json

            ref = render.native_id(chat_id, mid)
            reason = f"cannot render ({type(exc).__name__})"
            return [Item(cursor=cursor, failure=Failure(native_id=ref, reason=reason, raw=json.dumps(msg).encode(), ref=ref))]
        known_ids = {s.rpartition("@")[0] for s in prev.get("seen", ())} if prev is not None else set()
        since = int(prev.get("t", 0)) - self.settings.overlap_us if prev is not None else None
        stored_before = since is not None and ((created is not None and created <= since) or mid in known_ids)
        if not stored_before:
            return [self.with_contents(Item(cursor=cursor, message=message), chat_id, msg)]
        out = []
        for kind, rid, when in render.revision_plan(msg, since or 0):
            rev = render.render(self.name, walk.chat, msg, self._me)
            item = Item(cursor=cursor, message=render.as_revision(rev, kind, rid, when), whole=True)  # Graph shows only the current state
            out.append(self.with_contents(item, chat_id, msg))
        return out


def _well_formed(cursor: Any) -> bool:
    """Whether a stored cursor has the shape this poller writes (:mod:`pollers.teams.cursor`)."""
    if not isinstance(cursor, dict) or not isinstance(cursor.get("n", 0), int):
        return False
    for kind in ("chats", "channels"):
        convs = cursor.get(kind, {})
        if not isinstance(convs, dict):
            return False
        for entry in convs.values():
            if not isinstance(entry, dict) or not isinstance(entry.get("t", 0), int) or not isinstance(entry.get("seen", []), list):
                return False
            if "below" in entry and not (
                isinstance(entry["below"], list) and len(entry["below"]) == 2 and isinstance(entry["below"][0], int)
            ):
                return False
    return True
