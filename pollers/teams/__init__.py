"""Microsoft Teams (``type = "teams"``): chats and channels through Microsoft Graph with a delegated login.

``poller`` walks chats, ``channels`` channel messages; ``auth`` signs in (MSAL), ``graph`` speaks HTTP with
throttling, ``session`` and ``history`` walk pages, ``cursor`` keeps the walk's place, ``render`` makes records.
"""

from __future__ import annotations

from pollers.teams.poller import make

__all__ = ["make"]
