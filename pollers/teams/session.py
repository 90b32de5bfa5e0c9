"""What every part of the Teams source shares: its settings, its login and Graph client, the chat list, inline images.

:class:`TeamsSession` is the signed-in account's view of Graph. The live poll
(:mod:`pollers.teams.poller`), the channel walks (:mod:`pollers.teams.channels`) and
history and head (:mod:`pollers.teams.history`) all work through it, so none
of them needs to import another that imports it.

Inline images (``hostedContents``) are fetched from ``graph_url`` only: the
``src`` a message body gives is rebased onto ``graph_url`` (its path after the
API version), and a body without one gets the documented path for a chat
message, a channel post or a channel reply. The token never goes elsewhere.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from memex.plugin import Conversation, Item
from pollers.teams import render
from pollers.teams.auth import AuthSettings, Login
from pollers.teams.graph import Graph, NotFound

DEFAULT_GRAPH = "https://graph.microsoft.com/v1.0"
MAX_PAGE = 50  # Graph's largest $top for chat and channel messages


@dataclass(frozen=True)
class Settings:
    """A validated ``[sources.NAME]`` of type teams."""

    auth: AuthSettings
    graph_url: str
    timeout: float
    page_size: int
    overlap_us: int
    channels: bool = False


def conv_path(chat_id: str) -> str:
    """A chat ID as a path segment (its ``:``, ``@`` and ``;`` stay, as Graph's own links write them)."""
    return quote(chat_id, safe=":@;")


class TeamsSession:
    """The signed-in account's Graph: settings, login, HTTP client, its user ID, chats, and the channels' teams."""

    def __init__(self, name: str, settings: Settings, login: Login, *, backoff: tuple[float, ...] | None = None) -> None:
        self.name = name
        self.settings = settings
        self.login = login
        self.graph = Graph(settings.graph_url, self._token, timeout=settings.timeout, source=name, backoff=backoff)
        self._me: str | None = None
        self._teams: dict[str, str] = {}  # channel id -> team id (filled by teams_channels.channels)

    def _token(self, force: bool) -> str:
        return self.login.token(force_refresh=force)

    def close(self) -> None:
        """Close the HTTP session."""
        self.graph.close()

    def me(self) -> str | None:
        """The signed-in user's ID (read from the login once)."""
        if self._me is None:
            self._me = self.login.user_id()
        return self._me

    def chats(self) -> list[Conversation]:
        """Every chat of the signed-in user (``/me/chats`` with members, all pages)."""
        params = urlencode({"$top": MAX_PAGE, "$expand": "members"}, safe="$")
        out: list[Conversation] = []
        for page, _next, _delta in self.graph.pages(self.graph.url(f"/me/chats?{params}")):
            for chat in page:
                cid = chat.get("id")
                if not isinstance(cid, str) or not cid:
                    continue
                members = [m for m in chat.get("members") or [] if isinstance(m, dict)]
                people = [
                    str(m.get("email") or m.get("userId") or m.get("displayName"))
                    for m in members
                    if m.get("email") or m.get("userId") or m.get("displayName")
                ]
                name = chat.get("topic") if isinstance(chat.get("topic"), str) else None
                if name is None and chat.get("chatType") == "oneOnOne":
                    others = [m.get("displayName") for m in members if m.get("userId") != self._me and m.get("displayName")]
                    name = others[0] if others else None
                out.append(Conversation(id=cid, name=name, participants=people))
        return out

    def hosted_url(self, conv_id: str, msg: dict[str, Any], hosted: str, src: str | None) -> str:
        """Where an inline image's bytes are, always under ``graph_url`` (see the module's docstring)."""
        if src is not None:
            path = urlsplit(src).path
            version, sep, rest = path.lstrip("/").partition("/")
            if sep and version and f"/hostedContents/{hosted}/" in f"/{rest}":
                query = urlsplit(src).query
                return self.graph.url(f"/{rest}" + (f"?{query}" if query else ""))
        mid = quote(str(msg.get("id")))
        team = self._teams.get(conv_id)
        if team is None:
            where = f"/chats/{conv_path(conv_id)}/messages/{mid}"
        else:
            where = f"/teams/{quote(team)}/channels/{conv_path(conv_id)}/messages"
            root = msg.get("replyToId")
            where += f"/{quote(str(root))}/replies/{mid}" if isinstance(root, str) and root else f"/{mid}"
        return self.graph.url(f"{where}/hostedContents/{quote(hosted)}/$value")

    def with_contents(self, item: Item, conv_id: str, msg: dict[str, Any]) -> Item:
        """Fetch the inline images an item's record lists and hand their bytes to the runner."""
        assert item.message is not None
        html = item.message.extra.get("html") or ""
        sources = render.hosted_content_urls(html)
        for index, att in enumerate(item.message.attachments):
            if not att["id"].startswith("hostedContents/"):
                continue
            hosted = att["id"].split("/", 1)[1]
            try:
                data = self.graph.get(self.hosted_url(conv_id, msg, hosted, sources.get(hosted)), binary=True)
            except NotFound:
                att["missing"] = True
                continue
            item.contents.append(_content(index, data))
        return item


def _content(index: int, data: bytes) -> Any:
    from memex.plugin import Content

    return Content(index=index, open=lambda: io.BytesIO(data))
