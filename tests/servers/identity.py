"""A stand-in identity provider on loopback: Microsoft's identity platform, Google's OAuth2 endpoints, and RFC 7662
token introspection for Dovecot's ``oauth2`` passdb.

It speaks the real formats at the HTTP boundary:

* Microsoft (over HTTPS, as MSAL insists): ``/{tenant}/v2.0/.well-known/openid-configuration`` (an unknown tenant
  gets 400 ``invalid_tenant``, AADSTS90002), ``/{tenant}/oauth2/v2.0/devicecode`` and ``/{tenant}/oauth2/v2.0/token``
  (device-code grant: ``authorization_pending`` until approved; refresh grant: a new access token and a rotated
  refresh token, or ``invalid_grant`` AADSTS700082 once revoked), with ``id_token`` and ``client_info`` as MSAL
  needs them;
* Google (HTTPS): ``/o/oauth2/v2/auth`` checks ``client_id``, ``redirect_uri`` (loopback only), ``response_type``,
  the S256 ``code_challenge`` and ``state``, then answers as Google does once the user approved: a 302 to
  ``redirect_uri?state=..&code=..&scope=..`` (or ``error=access_denied`` when ``deny`` is set); ``/token`` redeems
  the code once, only with the matching ``code_verifier``, ``redirect_uri`` and client secret, and refreshes
  (no new refresh token, as Google) or answers ``invalid_grant`` "Token has been expired or revoked.";
* introspection (plain HTTP, for Dovecot): ``POST /introspect`` with ``token=...`` answers
  ``{"active": true, "username": ..., "scope": ..., "exp": ..., "client_id": ...}`` for a live access token and
  ``{"active": false}`` otherwise (RFC 7662 §2.2), which Dovecot checks with ``active_attribute``.

Every token handed out is kept in :attr:`IdentityServer.issued` for canary scans; every request in :attr:`log`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.servers.graph import make_cert

TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"  # the tenant the stand-in's accounts live in
OID = "00000000-0000-0000-66f3-3332eca7ea81"
TENANTS = {TENANT, "common", "organizations", "consumers"}
MS_SCOPE = "https://outlook.office.com/IMAP.AccessAsUser.All"
GOOGLE_SCOPE = "https://mail.google.com/"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class Token:
    """One issued token: whose, for which scope and client, until when (``time.time()``), whether revoked."""

    kind: str  # "access" or "refresh"
    user: str
    scope: str
    client_id: str
    expires: float
    revoked: bool = False


class IdentityServer:
    """The stand-in's state, its two listeners (HTTPS for clients, HTTP for Dovecot's introspection) and controls."""

    def __init__(self, folder: Path, *, user: str, client_id: str = "client-imap", client_secret: str = "GOCSPX-secret") -> None:
        self.cert, key = make_cert(folder)
        self.user, self.client_id, self.client_secret = user, client_id, client_secret
        self.lock = threading.RLock()
        self.tokens: dict[str, Token] = {}
        self.codes: dict[str, dict[str, str]] = {}  # authorization code -> what it was issued for
        self.access_lifetime = 3600
        self.pending_polls = 1
        self.deny = False  # the user declines consent (Google: error=access_denied)
        self.scope_override: str | None = None  # issue tokens for this scope instead (a wrong permission)
        self.hang: threading.Event | None = None  # token requests wait for this (an identity provider that never answers)
        self.issued: list[str] = []
        self.log: list[dict[str, Any]] = []
        handler = type("H", (_Handler,), {"state": self})
        self.https = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, key)
        self.https.socket = ctx.wrap_socket(self.https.socket, server_side=True)
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        for server in (self.https, self.http):
            server.daemon_threads = True
        self.base = f"https://127.0.0.1:{self.https.server_address[1]}"
        self.introspection_url = f"http://127.0.0.1:{self.http.server_address[1]}/introspect"
        self.auth_url, self.token_url = f"{self.base}/o/oauth2/v2/auth", f"{self.base}/token"
        self._threads = [
            threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True) for s in (self.https, self.http)
        ]

    def __enter__(self) -> IdentityServer:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.hang is not None:
            self.hang.set()
        for server in (self.https, self.http):
            server.shutdown()
            server.server_close()
        for t in self._threads:
            t.join(timeout=10)

    # -- controls ----------------------------------------------------------------
    def reset(self, user: str) -> None:
        """A fresh account ``user`` signing in (tokens of earlier accounts stay as they were)."""
        with self.lock:
            self.user, self.access_lifetime, self.pending_polls, self.deny, self.scope_override = user, 3600, 1, False, None
            if self.hang is not None:
                self.hang.set()
            self.hang = None
            self.log.clear()

    def revoke(self) -> None:
        """The user revoked the app (or changed the password): every token of the account stops working."""
        with self.lock:
            for t in self.tokens.values():
                t.revoked = t.revoked or t.user == self.user

    def expire_access(self) -> None:
        """The account's access tokens expire now, though the client still thinks them valid (refresh tokens still work)."""
        with self.lock:
            for t in self.tokens.values():
                if t.kind == "access" and t.user == self.user:
                    t.expires = time.time() - 1

    def requests(self, contains: str = "") -> list[dict[str, Any]]:
        """The requests seen whose path contains ``contains``."""
        with self.lock:
            return [r for r in self.log if contains in r["path"]]

    def grants(self, grant: str) -> int:
        """How many token requests of ``grant`` type were made."""
        return sum(1 for r in self.requests("token") if r["form"].get("grant_type") == grant)

    def issue(self, scope: str, client_id: str, *, refresh: bool = True, user: str | None = None) -> dict[str, Any]:
        """A token answer (access and refresh token) as the token endpoints send it."""
        with self.lock:
            scope = self.scope_override or scope
            at, rt = "ya29.a0" + secrets.token_urlsafe(24), "1//0g" + secrets.token_urlsafe(32)
            now = time.time()
            self.tokens[at] = Token("access", user or self.user, scope, client_id, now + self.access_lifetime)
            answer: dict[str, Any] = {"access_token": at, "token_type": "Bearer", "expires_in": self.access_lifetime, "scope": scope}
            self.issued.append(at)
            if refresh:
                self.tokens[rt] = Token("refresh", user or self.user, scope, client_id, now + 90 * 86400)
                answer["refresh_token"] = rt
                self.issued.append(rt)
            return answer

    def live(self, token: str, kind: str) -> Token | None:
        """The token if it is of ``kind``, not revoked and not expired."""
        with self.lock:
            t = self.tokens.get(token)
            return t if t is not None and t.kind == kind and not t.revoked and t.expires > time.time() else None


def _aad_error(code: str, number: int, text: str) -> dict[str, Any]:
    return {"error": code, "error_description": f"AADSTS{number}: {text} Trace ID: 0000 Correlation ID: 0000",
            "error_codes": [number], "timestamp": "2026-01-05 09:00:00Z", "trace_id": "0000", "correlation_id": "0000"}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    state: IdentityServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self, form: dict[str, str]) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self.state.lock:
            self.state.log.append({"method": self.command, "path": parts.path, "query": query, "form": form})
        return parts.path, query

    def do_GET(self) -> None:
        s = self.state
        path, query = self._record({})
        segments = path.strip("/").split("/")
        if path.endswith("/v2.0/.well-known/openid-configuration"):
            tenant = segments[0]
            if tenant not in TENANTS:
                self._send(400, _aad_error("invalid_tenant", 90002, f"Tenant '{tenant}' not found."))
                return
            base = f"{s.base}/{tenant}"
            self._send(200, {"token_endpoint": f"{base}/oauth2/v2.0/token", "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                             "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode", "issuer": f"{s.base}/{TENANT}/v2.0",
                             "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                             "scopes_supported": ["openid", "profile", "email", "offline_access"]})  # fmt: skip
            return
        if path == "/o/oauth2/v2/auth":
            self._authorize(query)
            return
        self._send(404, {"error": "not_found"})

    def _authorize(self, q: dict[str, str]) -> None:
        """Google's consent screen, already approved (or declined): a 302 back to the loopback redirect."""
        s = self.state
        redirect = q.get("redirect_uri", "")
        if q.get("client_id") != s.client_id or not redirect.startswith("http://127.0.0.1:") or q.get("response_type") != "code":
            self._send(400, {"error": "invalid_request"})  # Google shows an error page and never redirects
            return
        if q.get("code_challenge_method") != "S256" or len(q.get("code_challenge", "")) != 43:
            self._send(400, {"error": "invalid_request"})
            return
        if s.deny:
            answer = {"error": "access_denied", "state": q.get("state", "")}
        else:
            code = "4/0A" + secrets.token_urlsafe(30)
            with s.lock:
                s.codes[code] = {"challenge": q["code_challenge"], "redirect_uri": redirect, "scope": q.get("scope", "")}
                s.issued.append(code)
            answer = {"state": q.get("state", ""), "code": code, "scope": q.get("scope", "")}
        self._send(302, headers={"Location": f"{redirect}?{urlencode(answer)}"})

    def do_POST(self) -> None:
        s = self.state
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        path, _ = self._record(form)
        if s.hang is not None and "token" in path:
            s.hang.wait(60)
        if path == "/introspect":
            t = s.live(form.get("token", ""), "access")
            with s.lock:
                s.log[-1]["answer"] = t is not None
            self._send(200, {"active": True, "username": t.user, "scope": t.scope, "client_id": t.client_id, "exp": int(t.expires),
                             "token_type": "Bearer"} if t is not None else {"active": False})  # fmt: skip
            return
        if path == "/token":
            self._google_token(form)
            return
        tenant = path.strip("/").split("/")[0]
        if tenant not in TENANTS:
            self._send(400, _aad_error("invalid_tenant", 90002, f"Tenant '{tenant}' not found."))
        elif path.endswith("/oauth2/v2.0/devicecode"):
            code = "GXQ4B7ZPM"
            self._send(200, {"user_code": code, "device_code": "DAQABAAEAAAD--dc-" + secrets.token_hex(8), "verification_uri": "https://microsoft.com/devicelogin",
                             "expires_in": 900, "interval": 1, "message": f"To sign in, use a web browser to open the page https://microsoft.com/devicelogin and enter the code {code} to authenticate."})  # fmt: skip
        elif path.endswith("/oauth2/v2.0/token"):
            self._microsoft_token(form)
        else:
            self._send(404, {"error": "not_found"})

    def _ms_answer(self, form: dict[str, str]) -> dict[str, Any]:
        s = self.state
        scopes = [x for x in form.get("scope", "").split() if x.startswith("https://")]
        answer = s.issue(" ".join(scopes) or MS_SCOPE, form.get("client_id", ""))
        claims = {"aud": form.get("client_id"), "iss": f"{s.base}/{TENANT}/v2.0", "iat": int(time.time()), "nbf": int(time.time()),
                  "exp": int(time.time()) + 3600, "name": "Megan Bowen", "oid": OID, "preferred_username": s.user, "sub": "s", "tid": TENANT, "ver": "2.0"}  # fmt: skip
        answer["id_token"] = ".".join([_b64url(b'{"alg":"RS256","typ":"JWT"}'), _b64url(json.dumps(claims).encode()), _b64url(b"sig")])
        answer["client_info"] = _b64url(json.dumps({"uid": OID, "utid": TENANT}).encode())
        answer["ext_expires_in"] = answer["expires_in"]
        return answer

    def _microsoft_token(self, form: dict[str, str]) -> None:
        s = self.state
        grant = form.get("grant_type")
        if form.get("client_id") != s.client_id:
            self._send(400, _aad_error("unauthorized_client", 700016, "Application was not found in the directory."))
        elif grant == "urn:ietf:params:oauth:grant-type:device_code":
            with s.lock:
                pending = s.pending_polls > 0
                s.pending_polls -= 1
            if pending:
                self._send(400, _aad_error("authorization_pending", 70016, "Authorization is pending. Continue polling."))
            else:
                self._send(200, self._ms_answer(form))
        elif grant == "refresh_token":
            if s.live(form.get("refresh_token", ""), "refresh") is None:
                self._send(400, _aad_error("invalid_grant", 700082, "The refresh token has expired due to inactivity."))
            else:
                self._send(200, self._ms_answer(form))
        else:
            self._send(400, _aad_error("unsupported_grant_type", 70003, "The app requested an unsupported grant type."))

    def _google_token(self, form: dict[str, str]) -> None:
        s = self.state
        grant = form.get("grant_type")
        if form.get("client_id") != s.client_id or form.get("client_secret") != s.client_secret:
            self._send(401, {"error": "invalid_client", "error_description": "Unauthorized"})
            return
        if grant == "authorization_code":
            with s.lock:
                issued = s.codes.pop(form.get("code", ""), None)  # a code is redeemed once
            verifier = form.get("code_verifier", "")
            challenge = _b64url(hashlib.sha256(verifier.encode()).digest())
            if issued is None or issued["challenge"] != challenge or issued["redirect_uri"] != form.get("redirect_uri"):
                self._send(400, {"error": "invalid_grant", "error_description": "Bad Request"})
                return
            self._send(200, s.issue(issued["scope"], s.client_id))
        elif grant == "refresh_token":
            rt = s.live(form.get("refresh_token", ""), "refresh")
            if rt is None:
                self._send(400, {"error": "invalid_grant", "error_description": "Token has been expired or revoked."})
                return
            self._send(200, s.issue(rt.scope, s.client_id, refresh=False))
        else:
            self._send(400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type: " + str(grant)})
