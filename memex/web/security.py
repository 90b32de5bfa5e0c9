"""What keeps ``memex serve`` safe from a hostile web page and a hostile mail: hosts, the token, headers, methods.

A server on loopback is reachable from every page the user's browser opens. So every request passes
:class:`Guard` (a plain ASGI middleware, the outermost layer) before any route sees it:

* **Host** must name the server (``127.0.0.1``, ``localhost``, ``[::1]``, the bound address, ``--allow-host``
  names): a page on ``evil.example`` whose name was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name,
  and is answered 421 with no data.
* **Read-only methods**: GET and HEAD only; anything else is 405. No route writes, and none could be reached by a
  form another page submits.
* **The token** (``--token``; required off loopback): on every request, as ``Authorization: Bearer TOKEN`` or the
  cookie set by opening ``/?token=TOKEN`` once (HttpOnly, SameSite=Strict, so another site's page never sends it).
* **Headers on every response**: a strict Content-Security-Policy (scripts, styles, images and fetches from this
  origin only; no plug-ins, no ``<base>``, no framing by another page), ``nosniff``, ``no-referrer``, no caching,
  ``Cross-Origin-Resource-Policy: same-origin`` and ``Cross-Origin-Opener-Policy: same-origin``; no CORS header
  is ever sent, so another origin's script cannot read an answer.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
TOKEN_FILE = "web-token"
COOKIE = "memex_token"

# Pages: this origin only, no inline script, no plug-ins, never framed by another page.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; media-src 'self'; connect-src 'self'; "
    "frame-src 'self'; form-action 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
# A mail's sanitised HTML, shown in a sandboxed frame of a page of this server: no script at all, its inline styles,
# images only from this server (its own attachments) or inline data; nothing remote until the user asks.
MAIL_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'self'; sandbox allow-popups allow-popups-to-escape-sandbox"
)
# The same after "load remote content" for that message: remote images, styles and fonts, still no script.
MAIL_CSP_REMOTE = (
    "default-src 'none'; style-src 'unsafe-inline' https: http:; img-src 'self' data: https: http:; font-src https: http:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-popups allow-popups-to-escape-sandbox"
)
COMMON_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), interest-cohort=()"),
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address given to ``--host``) is this machine only."""
    import ipaddress

    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port, lower case (``[::1]:8080`` is ``[::1]``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names a request may carry: loopback's, the bound address (unless a wildcard), and ``extra``."""
    names = set(LOOPBACK_NAMES) | {name.lower() for name in extra}
    if bound not in ("0.0.0.0", "::", ""):
        names.add(f"[{bound}]" if ":" in bound and not bound.startswith("[") else bound.lower())
    return frozenset(names)


def load_or_make_token(state_dir: Path) -> tuple[str, bool]:
    """The server's token from ``<state_dir>/web-token`` (0600), made on first use; whether it was made now.

    A new token is shown once by the caller; afterwards it is only in that file (delete it to make a new one).
    """
    import secrets

    from memex.state.files import ensure_private_dir, write_new

    path = state_dir / TOKEN_FILE
    try:
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        token = ""
    if token:
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
        return token, False
    ensure_private_dir(state_dir)
    token = secrets.token_urlsafe(32)
    write_new(str(path), token.encode("ascii") + b"\n", 0o600, sync=True)
    return token, True


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return ""


def _cookie(scope: Scope, name: str) -> str:
    for part in _header(scope, b"cookie").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


class Guard:
    """The ASGI middleware in front of every route: Host, method and token checks, and the security headers."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], token: str | None = None) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse what must not reach a route; add the headers to every response that does (and to refusals)."""
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        if host_name(_header(scope, b"host")) not in self.hosts:
            await _plain(send, 421, "This server answers only to its own names (Host header refused).")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, "memex serve is read-only: GET and HEAD only.", allow=b"GET, HEAD")
            return
        set_cookie = b""
        if self.token is not None:
            offered = _bearer(scope) or _cookie(scope, COOKIE)
            from_query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1")).get("token", [""])[0]
            if from_query and hmac.compare_digest(from_query.encode(), self.token.encode()):
                set_cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict".encode()
                if scope.get("scheme") == "https":
                    set_cookie += b"; Secure"
                await _plain(send, 303, "Signed in.", location=scope["path"].encode() or b"/", cookie=set_cookie)
                return
            if not (offered and hmac.compare_digest(offered.encode(), self.token.encode())):
                await _plain(send, 401, "A token is required: open this address with ?token=TOKEN (memex serve printed it).")
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _STRIPPED]
                if not any(k.lower() == b"content-security-policy" for k, _ in headers):
                    headers.append((b"content-security-policy", PAGE_CSP.encode()))
                headers.extend(COMMON_HEADERS)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


# Never sent, whatever a route or a library adds: no CORS, no server banner.
_STRIPPED = frozenset({b"access-control-allow-origin", b"access-control-allow-credentials", b"access-control-allow-methods",
                       b"access-control-allow-headers", b"access-control-expose-headers", b"server"})  # fmt: skip


def _bearer(scope: Scope) -> str:
    auth = _header(scope, b"authorization")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


async def _plain(send: Send, status: int, text: str, *, allow: bytes = b"", location: bytes = b"", cookie: bytes = b"") -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-security-policy", PAGE_CSP.encode()), *COMMON_HEADERS]
    if allow:
        headers.append((b"allow", allow))
    if location:
        headers.append((b"location", location))
    if cookie:
        headers.append((b"set-cookie", cookie))
    body = text.encode() + b"\n"
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
