"""OAuth2 sign-in for IMAP (``auth = "oauth2"``): the provider's login, and SASL XOAUTH2 or OAUTHBEARER.

Providers (``provider``):

* ``microsoft``: Microsoft 365 and Outlook.com through MSAL (:mod:`memex.oauth.microsoft`, as Teams):
  scope ``https://outlook.office.com/IMAP.AccessAsUser.All`` (MSAL adds ``offline_access``), ``tenant``
  (default ``common``: work, school and personal accounts), host ``outlook.office365.com``;
* ``google``: Gmail and Workspace through the installed-app flow (:mod:`memex.oauth.installed_app`):
  scope ``https://mail.google.com/``, host ``imap.gmail.com``;
* ``command``: ``token_cmd`` prints an access token (:mod:`memex.oauth.secret_cmd`).

``client_id`` is the user's own app registration (microsoft, google; see docs/sources/email.md). The SASL
mechanism is OAUTHBEARER (RFC 7628) when the server advertises ``AUTH=OAUTHBEARER``, else XOAUTH2; a server that
advertises neither is one line naming what it offers. When the server refuses a token that came from the
cache, the token is refreshed once and tried again; a refused fresh token is remembered as a refusal (polls stop
asking the identity provider until ``memex auth SOURCE``), except for ``token_cmd``, whose helper holds the login.
"""

from __future__ import annotations

import base64
import imaplib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from memex.plugin import AuthRequired, SourceError

PROVIDERS = ("microsoft", "google", "command")
MICROSOFT_SCOPE = "https://outlook.office.com/IMAP.AccessAsUser.All"
GOOGLE_SCOPE = "https://mail.google.com/"
DEFAULT_HOSTS = {"microsoft": "outlook.office365.com", "google": "imap.gmail.com"}
MICROSOFT_TENANT = "common"
GOOGLE_AUTH_URL = "https://accounts.google.com/o/oauth2/v2/auth"
GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"
OAUTH_KEYS = ("provider", "client_id", "client_secret", "tenant", "authority", "auth_url", "token_url", "token_cmd")


class Tokens(Protocol):
    """Where a source's access tokens come from."""

    def token_info(self, *, force_refresh: bool = False) -> tuple[str, bool]:
        """An access token and whether it is fresh from the provider (a refresh would not give another)."""
        ...

    def refused(self, why: str) -> None:
        """The server refused a fresh token: remember it (or not) as the provider's login dictates."""
        ...


@dataclass(frozen=True)
class OAuth:
    """A validated OAuth2 login of an imap source (what :func:`tokens` builds the provider from)."""

    provider: str
    client_id: str | None = None
    client_secret: str | None = None
    tenant: str = MICROSOFT_TENANT
    authority: str | None = None
    auth_url: str = GOOGLE_AUTH_URL
    token_url: str = GOOGLE_TOKEN_URL
    token_cmd: str | None = None


class CommandTokens:
    """Tokens from ``token_cmd``: run at each connection, nothing kept (the helper refreshes its own login)."""

    def __init__(self, source: str, command: str, timeout: Callable[[], float]) -> None:
        self.source, self.command, self.timeout = source, command, timeout

    def token_info(self, *, force_refresh: bool = False) -> tuple[str, bool]:
        """What ``token_cmd`` prints now (always as fresh as the helper makes it)."""
        from memex.plugin import TOKEN_CMD_TIMEOUT, run_token_cmd

        return run_token_cmd(self.source, self.command, min(TOKEN_CMD_TIMEOUT, self.timeout())), True

    def refused(self, why: str) -> None:
        """Nothing to remember: the helper, not memex, holds the login."""


def read_keys(keys: Any) -> OAuth:
    """The OAuth2 keys of an ``auth = "oauth2"`` imap section (``keys``: its :class:`memex.config.Keys`)."""
    provider = keys.text("provider", default=None)
    if provider not in PROVIDERS:
        raise keys.error("provider", f'auth = "oauth2" needs provider = "microsoft", "google" or "command", not {provider!r}')
    if provider == "command":
        token_cmd = keys.text("token_cmd", default=None)
        if not token_cmd:
            raise keys.error("token_cmd", 'provider = "command" needs token_cmd, a command that prints an access token')
        return OAuth(provider, token_cmd=token_cmd)
    client_id = keys.text("client_id", default=None)
    if not client_id:
        raise keys.error(
            "client_id", f"provider = {provider!r} needs client_id, your own app registration's ID (see docs/sources/email.md)"
        )
    if provider == "microsoft":
        tenant = keys.text("tenant", default=MICROSOFT_TENANT)
        if not tenant or "/" in tenant:
            raise keys.error(
                "tenant", "must be a tenant ID or name without '/' (common, organizations, consumers, contoso.onmicrosoft.com)"
            )
        authority = _https(keys, "authority", "https://login.microsoftonline.com")
        return OAuth(provider, client_id=client_id, tenant=tenant, authority=authority)
    secret = keys.text("client_secret", default=None)
    return OAuth(provider, client_id=client_id, client_secret=secret or None,
                 auth_url=_https(keys, "auth_url", GOOGLE_AUTH_URL), token_url=_https(keys, "token_url", GOOGLE_TOKEN_URL))  # fmt: skip


def _https(keys: Any, key: str, default: str) -> str:
    value: str = keys.text(key, default=default).rstrip("/")
    if not value.startswith("https://"):
        raise keys.error(key, f"must be an https:// URL, not {value!r}")
    return value


def tokens(source: str, oauth: OAuth, state_dir: Path | None, timeout: float, remaining: Callable[[], float]) -> Any:
    """The token source of ``oauth``: an MSAL login, an installed-app login, or ``token_cmd``."""
    if oauth.provider == "command":
        assert oauth.token_cmd is not None
        return CommandTokens(source, oauth.token_cmd, remaining)
    assert state_dir is not None and oauth.client_id is not None
    if oauth.provider == "microsoft":
        from memex.plugin import AuthSettings, Login

        assert oauth.authority is not None
        return Login(source, AuthSettings(oauth.client_id, oauth.tenant, oauth.authority, (MICROSOFT_SCOPE,), timeout), state_dir)
    from memex.plugin import AppSettings, InstalledApp

    settings = AppSettings(oauth.client_id, oauth.client_secret, oauth.auth_url, oauth.token_url, (GOOGLE_SCOPE,), timeout)
    return InstalledApp(source, settings, state_dir)


# -- SASL ------------------------------------------------------------------
def mechanism(capabilities: tuple[str, ...] | list[str]) -> str | None:
    """OAUTHBEARER when advertised, else XOAUTH2 when advertised, else None."""
    caps = {c.upper() for c in capabilities}
    return next((m for m in ("OAUTHBEARER", "XOAUTH2") if f"AUTH={m}" in caps), None)


def initial_response(mech: str, user: str, token: str, host: str, port: int) -> bytes:
    """The client's first SASL message: XOAUTH2 (Google's form) or OAUTHBEARER (RFC 7628 §3.1)."""
    if mech == "XOAUTH2":
        return f"user={user}\x01auth=Bearer {token}\x01\x01".encode()
    gs2_user = user.replace("=", "=3D").replace(",", "=2C")
    return f"n,a={gs2_user},\x01host={host}\x01port={port}\x01auth=Bearer {token}\x01\x01".encode()


def authenticate(conn: imaplib.IMAP4, mech: str, user: str, token: str, host: str, port: int) -> tuple[str | None, list[Any]]:
    """AUTHENTICATE with ``token``: (None, the server's OK answer), or (its refusal as a short line (no token in it), []).

    A refusal comes as a continuation carrying a JSON status (RFC 7628 §3.2.2; XOAUTH2 alike), answered with the
    dummy response (``\\x01`` for OAUTHBEARER, empty for XOAUTH2), then ``NO``.
    """
    said: list[str] = []

    def step(challenge: bytes) -> bytes:
        if not said:
            said.append("")
            return initial_response(mech, user, token, host, port)
        said.append(_status(challenge))
        return b"\x01" if mech == "OAUTHBEARER" else b""

    try:
        _, answer = conn.authenticate(mech, step)
    except imaplib.IMAP4.error as exc:
        from pollers.email.imap.wire import server_text

        status = next((s for s in said[1:] if s), "")
        return server_text(exc) + (f"; status {status}" if status else ""), []
    return None, list(answer or [])


def _status(challenge: bytes) -> str:
    """The ``status`` of a SASL error challenge, only if it looks like a code (the JSON may echo more)."""
    try:
        doc = json.loads(challenge or b"{}")
    except ValueError:
        try:
            doc = json.loads(base64.b64decode(challenge))
        except ValueError:
            return ""
    status = doc.get("status") if isinstance(doc, dict) else None
    return status if isinstance(status, str) and status.replace("_", "").isalnum() and len(status) < 40 else ""


def login(conn: imaplib.IMAP4, name: str, user: str, host: str, port: int, source: Tokens, first: tuple[str, bool]) -> list[Any]:
    """Sign ``conn`` in with the source's token ``first`` (refreshed once if a cached one is refused); the OK answer.

    Raises SourceError when the server offers no OAuth2 mechanism or is unavailable, AuthRequired when it refuses.
    """
    mech = mechanism(tuple(conn.capabilities))
    where = f"{host}:{port}"
    if mech is None:
        offered = " ".join(sorted(c[5:] for c in conn.capabilities if c.upper().startswith("AUTH="))) or "none"
        raise SourceError(
            f"source {name!r}: {where} does not offer OAuth2 sign-in (AUTH=XOAUTH2 or AUTH=OAUTHBEARER; it offers: {offered}); "
            'check host and port, or use auth = "password"'
        )
    token, fresh = first
    refusal, answer = authenticate(conn, mech, user, token, host, port)
    if refusal is not None and not fresh and "UNAVAILABLE" not in refusal.upper():
        token, fresh = source.token_info(force_refresh=True)
        refusal, answer = authenticate(conn, mech, user, token, host, port)
    if refusal is None:
        return answer
    if "UNAVAILABLE" in refusal.upper():
        raise SourceError(f"source {name!r}: {where} could not check the token now ({refusal}); the next poll tries again")
    why = (f"{where} refused the OAuth2 token for {user!r} ({mech}: {refusal}); check that `user` is the account that "
           "signed in and that the app registration has the IMAP permission")  # fmt: skip
    if isinstance(source, CommandTokens):
        raise SourceError(f"source {name!r}: {why} (the token came from token_cmd)")
    source.refused(why)
    raise AuthRequired(name, why)
