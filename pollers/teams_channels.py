"""Channels of the signed-in user's teams (``channels = true``): the list, and each channel's delta query.

``/me/joinedTeams`` then ``/teams/{id}/channels`` name the channels; each is
walked through ``/teams/{id}/channels/{id}/messages/delta?$top=50&$expand=replies``
(every reply chain, root post and replies, created or changed since the
``@odata.deltaLink`` kept as that channel's cursor). The walk itself is the
poller's: pages are followed by ``@odata.nextLink`` and the new deltaLink is
saved only in the batch that ends the walk. Native ID: channel ID + message
ID (replies have their own IDs, ``reply_to`` names the root post).
Permissions: ``Team.ReadBasic.All``, ``Channel.ReadBasic.All`` and
``ChannelMessage.Read.All`` (the last needs an admin's consent in most
tenants).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

from memex.records import Conversation

if TYPE_CHECKING:
    from pollers.teams import TeamsPoller


def channels(poller: TeamsPoller) -> list[Conversation]:
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


def delta_url(poller: TeamsPoller, team_id: str, channel_id: str) -> str:
    """The first request of a channel's delta round: every reply chain, with replies, in pages of ``page_size``."""
    params = urlencode({"$top": poller.settings.page_size, "$expand": "replies"}, safe="$")
    return poller.graph.url(f"/teams/{quote(team_id)}/channels/{quote(channel_id, safe=':@;')}/messages/delta?{params}")
