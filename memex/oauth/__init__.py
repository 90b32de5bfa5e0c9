"""Signing in with OAuth2, for any source whose service wants a delegated login (source-agnostic).

Three ways to hold a login, each kept in ``<state_dir>/auth/`` (folder 0700, files 0600, replaced atomically):

* :mod:`memex.oauth.microsoft`: Microsoft's identity platform through MSAL (device-code flow once, silent
  refresh after), MSAL's serialized token cache in ``<source>.msal.json``. Teams and IMAP (Microsoft 365,
  Outlook.com) share it.
* :mod:`memex.oauth.installed_app`: an OAuth2 authorization-code flow with PKCE and a loopback redirect
  (RFC 8252, the installed-app flow Google asks for), with a paste-the-address path for machines without a
  browser; refresh token and access token in ``<source>.oauth2.json``.
* :mod:`memex.oauth.secret_cmd`: a command the user already has (mutt's ``mutt_oauth2.py``, oama, pizauth) prints
  an access token; memex keeps nothing.

A refresh that the identity provider refuses for good (``invalid_grant``: revoked, expired, password changed,
consent withdrawn) is remembered (:mod:`memex.oauth.store`, ``<source>.signin-needed.json``): every later poll
fails at once with the same one line ("... run `memex auth SOURCE` to sign in again", exit 1, state AUTH in
``memex status``) without asking the identity provider again, until ``memex auth SOURCE`` succeeds.

No token, refresh token, client secret or identity-provider error text (which may quote a request) reaches a
log, an error or a stored object: errors carry the provider's error *code* only.
"""
