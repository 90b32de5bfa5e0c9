"""Signing in to Microsoft Graph for a Teams source: which app, tenant and scopes.

The sign-in itself (MSAL's device-code flow once, silent refresh after, the token cache
``<state_dir>/auth/<source>.msal.json``, the remembered refusal) is
:mod:`memex.oauth.microsoft`'s, shared with the IMAP source's Microsoft login.
"""

from __future__ import annotations

from memex.plugin import DEFAULT_AUTHORITY, AuthSettings, Login, cache_path

__all__ = [
    "CHANNEL_SCOPES",
    "CHAT_SCOPES",
    "DEFAULT_AUTHORITY",
    "DEFAULT_CLIENT_ID",
    "DEFAULT_TENANT",
    "AuthSettings",
    "Login",
    "cache_path",
]

# Microsoft Graph Command Line Tools: a public client registered by Microsoft, multi-tenant, device flow enabled.
DEFAULT_CLIENT_ID = "14d82eec-204b-4c2f-b7e8-296a70dab67e"
DEFAULT_TENANT = "organizations"  # work or school accounts (Teams chats are not readable for personal accounts)
CHAT_SCOPES = ("Chat.Read",)
CHANNEL_SCOPES = ("Team.ReadBasic.All", "Channel.ReadBasic.All", "ChannelMessage.Read.All")
