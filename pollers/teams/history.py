"""``memex backfill`` and ``start = "now"`` for Teams: whole chat (and channel) histories by creation time, and the head.

History walks the chats in sorted ID order and each chat's messages with
``$orderby=createdDateTime desc`` (``$filter=createdDateTime lt <until>``
when ``--until`` is given: the only operator Graph supports on that
property), stopping at the first message created before ``--since``. Each
message is stored as it is now (its original record; the live poll stores
later changes as revisions). Checkpoint: ``{"chat": ID, "created": µs,
"id": MSGID}`` of the last message yielded; a resumed walk skips the chats
before ``chat`` and, in it, the messages at or above that point.

With ``channels = true`` the channels follow, in sorted ID order, each read
whole (:func:`pollers.teams.channels.history`; Graph offers neither an order
nor a filter there, so every post and reply is read and those created in
``[since, until)`` are kept). Checkpoint ``{"channel": ID}``: a resumed walk
skips every chat and the channels before it, and reads that channel again
from its start (what it had stored comes back as duplicates, nothing is
skipped: a position inside an unordered list would not survive new posts).

The head is every chat's newest message now and, with channels, each
channel's deltaLink from a round that stores nothing (:func:`pollers.teams.channels.head`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode

from memex.plugin import Cursor, Item
from pollers.teams import channels as teams_channels
from pollers.teams import render
from pollers.teams.session import TeamsSession, conv_path

_MS = 1000
HEAD_PAGE = 50  # Graph's largest page of chat messages: head() remembers every message modified within the overlap as seen


def _chat_path(chat_id: str) -> str:
    return f"/me/chats/{conv_path(chat_id)}/messages?"


def history(poller: TeamsSession, since: datetime | None, until: datetime | None, checkpoint: Cursor) -> Iterator[Item]:
    """Every message created in ``[since, until)`` of every chat, newest first within a chat, after ``checkpoint``."""
    lo = None if since is None else int(since.timestamp() * 1_000_000)
    hi = None if until is None else int(until.timestamp() * 1_000_000)
    start: tuple[str, int, str] | None = None
    if checkpoint and "channel" in checkpoint:
        yield from _channels(poller, lo, hi, str(checkpoint["channel"]))
        return
    if checkpoint:
        start = (str(checkpoint["chat"]), int(checkpoint["created"]), str(checkpoint["id"]))
    poller.me()
    yield from _chats(poller, lo, hi, start, checkpoint)
    if poller.settings.channels:
        yield from _channels(poller, lo, hi, None)


def _chats(poller: TeamsSession, lo: int | None, hi: int | None, start: tuple[str, int, str] | None, mark: Cursor) -> Iterator[Item]:
    """The chats' messages; one without an ``id`` or a valid ``createdDateTime`` is quarantined at the last mark (whatever the window)."""
    for chat in sorted(poller.chats(), key=lambda c: c["id"] or ""):
        chat_id = chat["id"] or ""
        if start is not None and chat_id < start[0]:
            continue
        params: dict[str, Any] = {"$top": poller.settings.page_size, "$orderby": "createdDateTime desc"}
        upper = hi
        if start is not None and chat_id == start[0]:
            upper = start[1] + 1 if upper is None else min(upper, start[1] + 1)  # created <= the checkpoint's time
        if upper is not None:  # Graph compares at ms precision: ask for a superset, bound exactly below
            params["$filter"] = f"createdDateTime lt {render.format_ts(-(-upper // _MS) * _MS)}"
        url = poller.graph.url(_chat_path(chat_id) + urlencode(params, safe="$:", quote_via=quote))
        done = False
        for page, _next, _delta in poller.graph.pages(url):
            for msg in page:
                failure = render.malformed(chat_id, msg, "createdDateTime")
                if failure is not None:
                    yield Item(cursor=mark, failure=failure)
                    continue
                created, mid = render.parse_ts(msg["createdDateTime"]) or 0, str(msg["id"])
                if lo is not None and created < lo:
                    done = True
                    break
                if hi is not None and created >= hi:
                    continue
                if start is not None and chat_id == start[0] and (created, mid) >= (start[1], start[2]):
                    continue
                mark = {"chat": chat_id, "created": created, "id": mid}
                message = render.render(poller.name, chat, msg, poller.me())
                yield poller.with_contents(Item(cursor=mark, message=message), chat_id, msg)
            if done:
                break


def _channels(poller: TeamsSession, lo: int | None, hi: int | None, start: str | None) -> Iterator[Item]:
    poller.me()
    for channel in sorted(teams_channels.channels(poller), key=lambda c: c["id"] or ""):
        channel_id = channel["id"] or ""
        if start is not None and channel_id < start:
            continue
        mark = {"channel": channel_id}
        for msg in teams_channels.history(poller, channel):
            failure = render.malformed(channel_id, msg, "createdDateTime")
            if failure is not None:
                yield Item(cursor=mark, failure=failure)
                continue
            created = render.parse_ts(msg["createdDateTime"]) or 0
            if (lo is not None and created < lo) or (hi is not None and created >= hi):
                continue
            message = render.render(poller.name, channel, msg, poller.me())
            yield poller.with_contents(Item(cursor=mark, message=message), channel_id, msg)


def head(poller: TeamsSession) -> Cursor:
    """A live cursor at every chat's newest modification now: polls from it store only later changes."""
    chats: dict[str, Any] = {}
    for chat in poller.chats():
        chat_id = chat["id"] or ""
        params = {"$top": HEAD_PAGE, "$orderby": "lastModifiedDateTime desc"}  # the newest, and those within the overlap
        doc = poller.graph.get(poller.graph.url(_chat_path(chat_id) + urlencode(params, safe="$:", quote_via=quote)))
        values = doc.get("value") if isinstance(doc, dict) else None
        newest = [render.parse_ts(m.get("lastModifiedDateTime")) for m in values or [] if isinstance(m, dict)]
        stamps = [t for t in newest if t is not None]
        top = max(stamps, default=0)
        seen = [f"{m.get('id')}@{t}" for m, t in zip(values or [], newest, strict=False)
                if t is not None and isinstance(m, dict) and t > top - poller.settings.overlap_us]  # fmt: skip
        chats[chat_id] = {"t": top, "seen": sorted(seen)}
    if not poller.settings.channels:
        return {"chats": chats}
    convs = teams_channels.channels(poller)  # also a request whose Date is Graph's clock now
    now = _graph_now(poller.graph.date)
    return {"chats": chats, "channels": {c["id"] or "": teams_channels.head(poller, c, now) for c in convs}}


def _graph_now(date: str | None) -> int | None:
    """Graph's clock from an HTTP ``Date`` header, in µs (None when absent or unreadable)."""
    if not date:
        return None
    try:
        return int(parsedate_to_datetime(date).timestamp()) * 1_000_000
    except (TypeError, ValueError):
        return None
