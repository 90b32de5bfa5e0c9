"""Microsoft's identity platform through MSAL: device-code flow once, silent refresh after (Teams, IMAP).

``memex auth SOURCE`` runs :meth:`Login.device_flow`: it prints the
verification URL and the user code, waits for the user to approve, and
keeps MSAL's serialized token cache in ``<state_dir>/auth/<source>.msal.json``
(folder 0700, file 0600, replaced atomically). Cron polls only call
:meth:`Login.token`, which uses the cached access token or redeems the
refresh token silently; when there is no login, or the refresh token expired
or was revoked, it raises :class:`~memex.errors.AuthRequired`, whose one
line tells the user to run ``memex auth SOURCE`` again. A refusal for good
(``invalid_grant``, ...) is remembered (:mod:`memex.oauth.store`): later polls
fail with the same line without asking Microsoft again, until a sign-in.

The file cache (not the OS keyring through ``msal-extensions``) is chosen
because cron and systemd timers run without an unlocked desktop keyring on
Linux; the file sits beside the cursors, which are just as private. No
token, refresh token or MSAL error text (which may quote a request) ever
reaches a log or an error: errors carry only MSAL's error *code*.

MSAL is imported inside the methods, so building a poller (and idle polls
of other sources) never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memex.errors import AuthRequired, SourceError
from memex.oauth import store

DEFAULT_AUTHORITY = "https://login.microsoftonline.com"


@dataclass(frozen=True)
class AuthSettings:
    """Who signs in where: the app (client ID), the tenant, the authority host and the scopes asked for."""

    client_id: str
    tenant: str
    authority: str
    scopes: tuple[str, ...]
    timeout: float


def cache_path(state_dir: Path, source: str) -> Path:
    """Where a source's token cache lives."""
    return state_dir / "auth" / f"{source}.msal.json"


def _code(result: dict[str, Any] | None) -> str:
    """MSAL's error code, only if it looks like one (never its description, which may quote data)."""
    return store.safe_code((result or {}).get("error"))


class Login:
    """One source's MSAL public-client application and its persisted token cache."""

    def __init__(self, source: str, settings: AuthSettings, state_dir: Path) -> None:
        self.source = source
        self.settings = settings
        self.state_dir = state_dir
        self.path = cache_path(state_dir, source)
        self._app: Any = None
        self._cache: Any = None
        self._loaded: str | None = None  # the cache file's text when it was read

    # -- MSAL objects, built on first use ----------------------------------
    def _application(self, *, signing_in: bool = False) -> Any:
        if self._app is not None:
            return self._app
        if not signing_in and not self.path.exists():  # never signed in: say so, without asking a network that may be down
            raise AuthRequired(self.source, "not signed in to Microsoft")
        import msal

        from memex.liblog import route_library_logs

        route_library_logs()

        cache = msal.SerializableTokenCache()
        try:
            data = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            data = None
        except (OSError, UnicodeDecodeError) as exc:
            from memex.fs_errors import explain

            fault = explain(exc)  # a state folder that is a file, another user's: that, not "sign in again"
            if fault is not None:
                raise fault from None
            raise SourceError(f"{self.path}: cannot read the token cache ({type(exc).__name__}); run `memex auth {self.source}`") from None
        self._loaded = data
        if data:
            try:
                cache.deserialize(data)
            except ValueError:
                raise AuthRequired(self.source, f"the token cache {self.path} is corrupt") from None
        authority = f"{self.settings.authority.rstrip('/')}/{self.settings.tenant}"
        try:
            self._app = msal.PublicClientApplication(
                self.settings.client_id,
                authority=authority,
                token_cache=cache,
                instance_discovery=False,  # the authority is the configured one; no lookup at login.microsoftonline.com
                timeout=self.settings.timeout,
            )
        except ValueError:
            raise SourceError(
                f"{self.source}: the authority {authority} did not answer as a Microsoft identity platform; check `authority` and `tenant`"
            ) from None
        except OSError as exc:
            then = "then poll again (the login is kept)" if data else f"then run `memex auth {self.source}` (no one has signed in yet)"
            raise SourceError(
                f"{self.source}: cannot reach the authority {authority} ({type(exc).__name__}); check the network, {then}"
            ) from None
        self._cache = cache
        return self._app

    def _save(self, *, sign_in: bool = False) -> None:
        """Write the cache if MSAL changed it (:func:`memex.oauth.store.save`).

        A poll's refresh is written only if the file is still what the poll
        read (compare-and-swap under a lock): a ``memex auth`` that signed in
        meanwhile is never overwritten by the stale login a running poll holds.
        """
        if self._cache is None or not self._cache.has_state_changed:
            return
        text = self._cache.serialize()
        if store.save(self.path, text, expect=self._loaded, sign_in=sign_in):
            self._loaded = text
        self._cache.has_state_changed = False

    # -- what the CLI and the poller call -----------------------------------
    def device_flow(self, say: Callable[[str], None]) -> str:
        """Run the device-code flow interactively: ``say`` the URL and code, wait for approval, keep the login.

        Returns the signed-in account's user name. Raises SourceError with
        MSAL's error code when the flow is refused, expires or is declined.
        """
        app = self._application(signing_in=True)
        flow = app.initiate_device_flow(scopes=list(self.settings.scopes))
        if "user_code" not in flow:
            raise SourceError(f"{self.source}: the device-code flow could not start ({_code(flow)}); check client_id and tenant")
        say(str(flow.get("message") or f"Open {flow.get('verification_uri')} and enter the code {flow['user_code']}"))
        result = app.acquire_token_by_device_flow(flow)
        if "access_token" not in result:
            raise SourceError(f"{self.source}: sign-in did not complete ({_code(result)}); run `memex auth {self.source}` again")
        self._save(sign_in=True)
        store.clear_refusal(self.state_dir, self.source)
        claims = result.get("id_token_claims") or {}
        return str(claims.get("preferred_username") or claims.get("name") or "your account")

    def account(self) -> dict[str, Any]:
        """The cached account (the first, if several); AuthRequired when nobody has signed in."""
        accounts = self._application().get_accounts()
        if not accounts:
            raise AuthRequired(self.source, "not signed in to Microsoft")
        account: dict[str, Any] = accounts[0]
        return account

    def user_id(self) -> str | None:
        """The signed-in user's object ID (``from.user.id`` of their own messages)."""
        local = self.account().get("local_account_id")
        return str(local) if local else None

    def token(self, *, force_refresh: bool = False) -> str:
        """An access token from the cache or a silent refresh; AuthRequired if the login is gone."""
        return self.token_info(force_refresh=force_refresh)[0]

    def token_info(self, *, force_refresh: bool = False) -> tuple[str, bool]:
        """An access token and whether it came from Microsoft just now (False: from the cache).

        A remembered refusal raises AuthRequired before anything is asked; a refusal for good
        (``invalid_grant``, ...) is remembered here.
        """
        store.check_refusal(self.state_dir, self.source)
        app = self._application()
        account = self.account()
        try:
            result = app.acquire_token_silent_with_error(list(self.settings.scopes), account=account, force_refresh=force_refresh)
        except OSError as exc:
            raise SourceError(f"{self.source}: cannot reach the authority to refresh the login ({type(exc).__name__})") from None
        self._save()
        if not result or "access_token" not in result:
            why = "the Microsoft login expired or was revoked" if result else "the Microsoft login has no usable refresh token"
            if result:
                why += f" ({_code(result)})"
                if _code(result) in store.FOR_GOOD:
                    store.remember_refusal(self.state_dir, self.source, why)
            raise AuthRequired(self.source, why)
        token: str = result["access_token"]
        return token, result.get("token_source") == "identity_provider"

    def refused(self, why: str) -> None:
        """Remember that the service refused a token fresh from Microsoft: polls stop asking until a sign-in."""
        store.remember_refusal(self.state_dir, self.source, why)
