"""The OAuth2 installed-app flow: authorization code with PKCE and a loopback redirect (Google's way for Gmail).

Google's device flow does not grant Gmail's scope (``https://mail.google.com/``), so ``memex auth SOURCE`` runs
the flow RFC 8252 describes for native apps, as google-auth-oauthlib's ``InstalledAppFlow`` does:

1. a PKCE pair (RFC 7636: a 64-character random verifier, its S256 challenge) and a random ``state``;
2. a one-shot HTTP listener on ``127.0.0.1`` and a free port; the authorization address (with
   ``redirect_uri=http://127.0.0.1:PORT/``, ``access_type=offline``, ``prompt=consent`` so a refresh token is
   granted) is printed, and the browser, once the user approves, is sent back to the listener with ``code`` and
   ``state``;
3. without a browser on this machine (``memex auth SOURCE --no-browser``) nothing listens: the user opens the
   address anywhere, the browser then fails to load ``http://127.0.0.1:PORT/?code=...``, and the user pastes that
   address back;
4. the code is redeemed at the token endpoint with the verifier (and the client secret, which Google issues to
   desktop clients and does not treat as confidential).

The login (refresh token, access token, expiry) is kept in ``<state_dir>/auth/<source>.oauth2.json`` (0600,
:mod:`memex.oauth.store`). :meth:`InstalledApp.token_info` hands out the cached access token while it has more
than :data:`REFRESH_MARGIN` seconds left, else redeems the refresh token silently. A refusal for good
(``invalid_grant``) is remembered. The HTTP calls go through ``requests`` (already there for MSAL), so a
corporate CA set in ``REQUESTS_CA_BUNDLE`` is honoured as for Microsoft.

Why not google-auth-oauthlib itself: it covers only the loopback half (its console flow was removed with
Google's out-of-band redirect), brings google-auth, requests-oauthlib and oauthlib, and its refresh errors carry
the provider's whole answer; the protocol steps are the few lines below, each named after its RFC section.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memex.errors import AuthRequired, SourceError
from memex.oauth import store

REFRESH_MARGIN = 300.0  # seconds before expiry an access token is refreshed (MSAL uses the same)
SIGN_IN_TIMEOUT = 300.0  # seconds `memex auth` waits for the browser to come back
Say = Callable[[str], None]
Ask = Callable[[str], str]


@dataclass(frozen=True)
class AppSettings:
    """One installed-app registration: its client ID (and secret), the provider's endpoints and the scopes."""

    client_id: str
    client_secret: str | None
    auth_url: str
    token_url: str
    scopes: tuple[str, ...]
    timeout: float
    extra_params: tuple[tuple[str, str], ...] = (("access_type", "offline"), ("prompt", "consent"))


def login_path(state_dir: Path, source: str) -> Path:
    """Where a source's installed-app login lives."""
    return store.auth_dir(state_dir) / f"{source}.oauth2.json"


def _b64url(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier (RFC 7636 §4.1: 43-128 unreserved characters, here 64) and its S256 challenge (§4.2)."""
    import hashlib

    verifier = _b64url(os.urandom(48))
    return verifier, _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


class InstalledApp:
    """One source's installed-app login: sign in (loopback or pasted address), then silent refreshes."""

    def __init__(self, source: str, settings: AppSettings, state_dir: Path) -> None:
        self.source = source
        self.settings = settings
        self.state_dir = state_dir
        self.path = login_path(state_dir, source)

    # -- HTTP --------------------------------------------------------------
    def _token_request(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """POST ``form`` (plus the client's credentials) to the token endpoint; the status and the JSON answer."""
        from memex import http_client

        form = {**form, "client_id": self.settings.client_id}
        if self.settings.client_secret:
            form["client_secret"] = self.settings.client_secret
        try:
            resp = http_client.post(
                self.settings.token_url, data=form, timeout=self.settings.timeout, headers={"Accept": "application/json"}
            )
        except http_client.request_errors() as exc:
            raise SourceError(f"{self.source}: cannot reach the token endpoint {self.settings.token_url} ({type(exc).__name__})") from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise SourceError(
                f"{self.source}: {self.settings.token_url} answered {resp.status_code} without an OAuth2 JSON body; check token_url"
            )
        return resp.status_code, body

    # -- sign-in ---------------------------------------------------------------
    def sign_in(self, say: Say, ask: Ask | None = None, open_browser: Callable[[str], object] | None = None) -> str:
        """Run the flow interactively: loopback redirect, or (``ask`` given) the pasted address; keep the login.

        ``say`` is called once per line (the CLI shows each with its control characters escaped).

        Returns "your account" (the token endpoint does not say whose; the source knows its user).
        """
        from urllib.parse import urlencode

        from memex.oauth.loopback import Listener, free_port

        verifier, challenge = pkce_pair()
        state = _b64url(os.urandom(24))
        listener = Listener() if ask is None else None
        port = listener.port if listener is not None else free_port()
        redirect = f"http://127.0.0.1:{port}/"
        params = {"client_id": self.settings.client_id, "redirect_uri": redirect, "response_type": "code",
                  "scope": " ".join(self.settings.scopes), "state": state, "code_challenge": challenge,
                  "code_challenge_method": "S256", **dict(self.settings.extra_params)}  # fmt: skip
        url = f"{self.settings.auth_url}?{urlencode(params)}"
        try:
            if listener is not None:
                say("Open this address in a browser on this machine and approve memex's access:")
                say(url)
                if open_browser is not None:
                    open_browser(url)
                answer = listener.wait(SIGN_IN_TIMEOUT)
                if answer is None:
                    raise SourceError(
                        f"{self.source}: the browser did not come back within {SIGN_IN_TIMEOUT:g}s; run `memex auth {self.source}` again"
                    )
            else:
                assert ask is not None
                say("Open this address in a browser on any machine and approve memex's access:")
                say(url)
                say("The browser then fails to load a page at http://127.0.0.1:...; copy that whole address from its address bar.")
                answer = ask("Paste the address here").strip()
        finally:
            if listener is not None:
                listener.close()
        code = self._code_from(answer, state, redirect)
        status, body = self._token_request(
            {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "code_verifier": verifier}
        )
        if status != 200 or "access_token" not in body:
            raise SourceError(
                f"{self.source}: the code was not accepted ({store.safe_code(body.get('error'))}); run `memex auth {self.source}` again"
            )
        if not body.get("refresh_token"):
            raise SourceError(f"{self.source}: no refresh token was granted, so polls could not refresh the login; revoke memex's access "
                              f"in the account's security settings and run `memex auth {self.source}` again")  # fmt: skip
        self._keep(body, None, sign_in=True)
        store.clear_refusal(self.state_dir, self.source)
        return "your account"

    def _code_from(self, answer: str, state: str, redirect: str) -> str:
        """The authorization code of the redirected address, after checking it is this sign-in's (RFC 6749 §4.1.2, §10.12)."""
        from urllib.parse import parse_qs, urlsplit

        parts = urlsplit(answer)
        if not answer.startswith(redirect.rstrip("/")) or not parts.query:
            raise SourceError(
                f"{self.source}: that is not the address the browser was sent to (it starts with {redirect}); run `memex auth {self.source}` again"
            )
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if "error" in query:
            raise SourceError(
                f"{self.source}: sign-in was refused ({store.safe_code(query['error'])}); run `memex auth {self.source}` again"
            )
        if query.get("state") != state:
            raise SourceError(
                f"{self.source}: the address belongs to another sign-in (its state differs); run `memex auth {self.source}` again"
            )
        if not query.get("code"):
            raise SourceError(f"{self.source}: the address carries no code; run `memex auth {self.source}` again")
        return query["code"]

    def _keep(self, body: dict[str, Any], old: dict[str, Any] | None, *, sign_in: bool, expect: str | None = None) -> None:
        """Write the login from a token answer (a refresh keeps the old refresh token unless a new one came)."""
        doc = {
            "version": 1,
            "client_id": self.settings.client_id,
            "token_url": self.settings.token_url,
            "scope": str(body.get("scope") or " ".join(self.settings.scopes)),
            "refresh_token": body.get("refresh_token") or (old or {}).get("refresh_token"),
            "access_token": body["access_token"],
            "expires_at": time.time() + float(body.get("expires_in") or 3600),
        }
        store.save(self.path, json.dumps(doc, sort_keys=True), expect=expect, sign_in=sign_in)

    # -- polls ---------------------------------------------------------------
    def token(self, *, force_refresh: bool = False) -> str:
        """An access token, cached or refreshed silently; AuthRequired when the login is missing or gone."""
        return self.token_info(force_refresh=force_refresh)[0]

    def token_info(self, *, force_refresh: bool = False) -> tuple[str, bool]:
        """An access token and whether it came from the provider just now (False: the cached one)."""
        store.check_refusal(self.state_dir, self.source)
        text = store.read(self.path)
        if text is None:
            raise AuthRequired(self.source, "not signed in")
        try:
            doc = json.loads(text)
            refresh, access, expires = str(doc["refresh_token"]), str(doc["access_token"]), float(doc["expires_at"])
        except (ValueError, KeyError, TypeError):
            raise AuthRequired(self.source, f"the login file {self.path} is corrupt") from None
        if doc.get("client_id") != self.settings.client_id or doc.get("token_url") != self.settings.token_url:
            raise AuthRequired(self.source, "the login was made for another client_id or token_url")
        if not force_refresh and expires - REFRESH_MARGIN > time.time():
            return access, False
        status, body = self._token_request({"grant_type": "refresh_token", "refresh_token": refresh})
        if status == 200 and isinstance(body.get("access_token"), str):
            self._keep(body, doc, sign_in=False, expect=text)
            return body["access_token"], True
        code = store.safe_code(body.get("error"))
        if status in (400, 401) and code in store.FOR_GOOD:
            why = f"the login expired or was revoked ({code})"
            store.remember_refusal(self.state_dir, self.source, why)
            raise AuthRequired(self.source, why)
        raise SourceError(f"{self.source}: refreshing the login failed ({status} {code}); the next poll tries again")

    def refused(self, why: str) -> None:
        """Remember that the service refused a token fresh from the provider: polls stop asking until a sign-in."""
        store.remember_refusal(self.state_dir, self.source, why)
