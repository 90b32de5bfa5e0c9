"""Channels of the signed-in user's teams (``channels = true``): the list, and each channel's delta query.

``/me/joinedTeams`` then ``/teams/{id}/channels`` name the channels; each is
walked through ``/teams/{id}/channels/{id}/messages/delta?$top=50&$expand=replies``
(every reply chain, root post and replies, created or changed since the
``@odata.deltaLink`` kept as that channel's cursor). The walk itself is the
poller's: pages are followed by ``@odata.nextLink`` and the new deltaLink is
saved only in the batch that ends the walk. Native ID: channel ID + message
ID (replies have their own IDs, ``reply_to`` names the root post).
Replies past the 1000 Graph expands inline are read from ``replies@odata.nextLink``.

``memex backfill`` reads each channel through ``/messages?$expand=replies``
(:func:`history`: the whole channel, older than delta's eight months too);
``start = "now"`` positions each channel with a delta round that stores
nothing (:func:`head`). Permissions: ``Team.ReadBasic.All``, ``Channel.ReadBasic.All`` and
``ChannelMessage.Read.All`` (the last needs an admin's consent in most
tenants).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

from memex.plugin import Conversation
from pollers.teams import render
from pollers.teams.session import TeamsSession, conv_path

HEAD_SLACK_US = 60_000_000  # a head round reaches this far before Graph's clock (its frontends' clocks differ a little)


def channels(poller: TeamsSession) -> list[Conversation]:
    """Every channel of every joined team, as conversations named ``Team / Channel``; fills ``poller._teams``."""
    out: list[Conversation] = []
    graph = poller.graph
    for teams, _next, _delta in graph.pages(graph.url("/me/joinedTeams")):
        for team in teams:
            team_id = team.get("id")
            if not isinstance(team_id, str):
                continue
            for page, _n, _d in graph.pages(graph.url(f"/teams/{quote(team_id)}/channels")):
                for channel in page:
                    cid = channel.get("id")
                    if not isinstance(cid, str):
                        continue
                    poller._teams[cid] = team_id
                    name = f"{team.get('displayName') or team_id} / {channel.get('displayName') or cid}"
                    out.append(Conversation(id=cid, name=name, participants=[]))
    return out


def _channel_path(poller: TeamsSession, channel_id: str) -> str:
    return f"/teams/{quote(poller._teams[channel_id])}/channels/{conv_path(channel_id)}/messages"


def delta_url(poller: TeamsSession, team_id: str, channel_id: str, *, after: int | None = None) -> str:
    """The first request of a channel's delta round: every reply chain, with replies, in pages of ``page_size``.

    ``after`` (µs): only the chains created or changed after it (``$filter=lastModifiedDateTime gt``,
    the one filter Graph's channel delta takes).
    """
    params: dict[str, object] = {"$top": poller.settings.page_size, "$expand": "replies"}
    if after is not None:
        params["$filter"] = f"lastModifiedDateTime gt {render.format_ts(after)}"
    query = urlencode(params, safe="$:", quote_via=quote)
    return poller.graph.url(f"/teams/{quote(team_id)}/channels/{conv_path(channel_id)}/messages/delta?{query}")


def chain(poller: TeamsSession, root: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A channel post's replies: those expanded inline, then the pages ``replies@odata.nextLink`` names (past 1000)."""
    yield from (r for r in root.get("replies") or [] if isinstance(r, dict))
    more = root.get("replies@odata.nextLink")
    if isinstance(more, str):
        for page, _next, _delta in poller.graph.pages(more):
            yield from page


def history(poller: TeamsSession, channel: Conversation) -> Iterator[dict[str, Any]]:
    """Every post of a channel and every reply, through ``/messages?$expand=replies`` (all of it, not only delta's eight months).

    Graph documents no order for this list and no filter on it: the caller selects by creation time.
    """
    channel_id = channel["id"] or ""
    params = urlencode({"$top": poller.settings.page_size, "$expand": "replies"}, safe="$")
    for page, _next, _delta in poller.graph.pages(poller.graph.url(f"{_channel_path(poller, channel_id)}?{params}")):
        for root in page:
            yield root
            yield from chain(poller, root)


def head(poller: TeamsSession, channel: Conversation, graph_now: int | None) -> dict[str, Any]:
    """A channel's live cursor entry at its head now: a delta round that stores nothing and ends with the deltaLink.

    ``graph_now`` is Graph's clock (µs, the ``Date`` of its last answer; never this machine's). The round asks
    only for chains changed since a little before it (``$filter``); every message it returns goes into
    ``seen``, so a later round that brings one back unchanged skips it, while a change to it is a revision.
    Without a Graph time the round is a full one (every chain of the last eight months, read once).
    """
    overlap = poller.settings.overlap_us
    channel_id = channel["id"] or ""
    after = None if graph_now is None else graph_now - overlap - HEAD_SLACK_US
    seen: dict[str, int] = {}
    delta: str | None = None
    for page, _next, last in poller.graph.pages(delta_url(poller, poller._teams[channel_id], channel_id, after=after)):
        for root in page:
            for msg in (root, *chain(poller, root)):
                modified = render.parse_ts(msg.get("lastModifiedDateTime"))
                if isinstance(msg.get("id"), str) and modified is not None:
                    seen[msg["id"]] = max(seen.get(msg["id"], 0), modified)
        delta = last or delta
    t = after + overlap if after is not None else max(seen.values(), default=0)
    return {"t": t, "seen": sorted(f"{mid}@{at}" for mid, at in seen.items() if at > t - overlap), "delta": delta}
