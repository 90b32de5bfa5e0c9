"""A stand-in for Microsoft Graph and the Microsoft identity platform, over HTTPS on loopback.

It speaks the real formats at the HTTP boundary, taken from Microsoft's
documentation and MSAL's source:

* identity: ``/{tenant}/v2.0/.well-known/openid-configuration`` (OpenID
  discovery, which MSAL reads), ``/{tenant}/oauth2/v2.0/devicecode``
  (``device_code``, ``user_code``, ``verification_uri``, ``interval``,
  ``message``) and ``/{tenant}/oauth2/v2.0/token`` for the device-code and
  refresh-token grants (``authorization_pending``, ``invalid_grant`` with
  AADSTS codes; ``access_token``, ``refresh_token``, ``id_token``,
  ``client_info``);
* Graph v1.0: ``/me/chats`` (``$top``, ``$expand=members``, paged),
  ``/me/chats/{id}/messages`` (``$top`` <= 50, ``$orderby=lastModifiedDateTime
  desc``, ``$filter=lastModifiedDateTime gt X`` only together with that
  ``$orderby``, ``@odata.nextLink`` with a ``$skiptoken``), and
  ``/chats/{id}/messages/{id}/hostedContents/{id}/$value``; chatMessage
  objects with the documented field names; 401 ``InvalidAuthenticationToken``;
* channels: ``/me/joinedTeams``, ``/teams/{id}/channels``, the delta query
  (``$top``, ``$expand=replies``, ``$filter=lastModifiedDateTime gt X``: reply
  chains created or changed after X), the channel list
  ``/teams/{id}/channels/{id}/messages`` (root posts, ``$expand=replies``; past
  ``max_replies`` a ``replies@odata.nextLink`` to ``.../messages/{id}/replies``),
  and the hostedContents of channel posts and replies. Channel message bodies keep
  the ``https://graph.microsoft.com/v1.0`` image links Graph writes; chat bodies
  are rewritten to this server;
* every answer's ``Date`` header is the server's (simulated) clock.

Faults are injected per request (:meth:`GraphServer.fault`): a status with
headers (429 + Retry-After), or a hang until released.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
ME = "8ea0e38b-efb3-4757-924a-5f94061cf8c2"
EPOCH = dt.datetime(2026, 1, 5, 9, 0, 0, tzinfo=dt.UTC)


def make_cert(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (also the CA bundle the clients trust) and its key."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "graph-cert.pem", folder / "graph-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def iso(when: dt.datetime) -> str:
    """Graph's timestamp form: milliseconds and Z."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


@dataclass
class Fault:
    """One injected fault: requests whose path contains ``match`` get ``status`` (or hang) ``times`` times."""

    match: str
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1
    hang: threading.Event | None = None  # wait on this (then drop the connection) instead of answering
    after: int = 0  # let this many matching requests through first
    hits: int = 0


@dataclass
class Chat:
    """A chat and its messages (by id)."""

    doc: dict[str, Any]
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)


class GraphServer:
    """The server's state, its thread, and helpers that act as Teams users would."""

    def __init__(self, folder: Path, *, client_id: str = "client-abc") -> None:
        self.cert, key = make_cert(folder)
        self.client_id = client_id
        self.lock = threading.RLock()
        self.now = EPOCH
        self.chats: dict[str, Chat] = {}
        self.hosted: dict[tuple[str, str, str], bytes] = {}
        self.access: dict[str, dt.datetime] = {}
        self.refresh: set[str] = set()
        self.pending_polls = 1  # device-code token polls answered authorization_pending before approval
        self.access_lifetime = 3600
        self.faults: list[Fault] = []
        self.log: list[dict[str, Any]] = []
        self.issued: list[str] = []  # every token handed out (for canary checks)
        self.teams: dict[str, dict[str, Any]] = {}  # team id -> joinedTeams entry
        self.channels: dict[str, Chat] = {}  # channel id -> its messages (roots and replies)
        self.channel_team: dict[str, str] = {}
        self.seq = 0  # a change counter: delta tokens are positions in it
        self.changed: dict[tuple[str, str], int] = {}  # (conversation, message id) -> seq of its last change
        self.max_replies = 1000  # replies expanded inline per channel post (Graph's limit); the rest via replies@odata.nextLink
        self.next_link_base: str | None = None  # hand out message nextLinks under another base URL (a hostile or broken server)
        handler = type("H", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.graph = f"{self.base}/v1.0"
        self.issuer = f"{self.base}/{TENANT}/v2.0"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> GraphServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        for f in self.faults:
            if f.hang is not None:
                f.hang.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    # -- acting as Teams users ------------------------------------------------
    def tick(self, seconds: float = 1.0) -> str:
        """Advance the server's clock; return the new time in Graph's form."""
        with self.lock:
            self.now += dt.timedelta(seconds=seconds)
            return iso(self.now)

    def add_chat(self, chat_id: str, *, topic: str | None = None, chat_type: str = "group", members: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
        """Create a chat (``members``: (user id, display name))."""
        with self.lock:
            self.chats[chat_id] = Chat({
                "id": chat_id, "topic": topic, "createdDateTime": iso(self.now), "lastUpdatedDateTime": iso(self.now),
                "chatType": chat_type, "webUrl": f"https://teams.microsoft.com/l/chat/{chat_id}/0", "tenantId": TENANT,
                "members": [{"@odata.type": "#microsoft.graph.aadUserConversationMember", "id": _b64url(uid.encode()),
                             "roles": ["owner"], "displayName": name, "userId": uid, "email": f"{name.split()[0].lower()}@contoso.com",
                             "tenantId": TENANT} for uid, name in members],
            })  # fmt: skip

    def post(self, chat_id: str, text: str, *, user: tuple[str, str] = (ME, "Megan Bowen"), html: bool = False, step: float = 1.0,
             images: dict[str, bytes] | None = None, files: list[dict[str, Any]] | None = None, reply_to: str | None = None,
             reply_root: str | None = None) -> str:  # fmt: skip
        """Post a message as ``user`` ``step`` seconds after the last change (``reply_root``: a channel reply); return its id."""
        team = self.channel_team.get(chat_id)
        with self.lock:
            when = self.tick(step)
            mid = str(int(self.now.timestamp() * 1000))
            content = text
            if images:
                html = True
                for hid, data in images.items():
                    self.hosted[(chat_id, mid, hid)] = data
                    where = f"teams/{team}/channels/{chat_id}" if team else f"chats/{chat_id}"
                    where += f"/messages/{reply_root}/replies" if reply_root else "/messages"
                    content += (f'<img src="https://graph.microsoft.com/v1.0/{where}/{mid}/hostedContents/{hid}/$value"'
                                ' width="67" height="63" style="vertical-align:bottom">')  # fmt: skip
            attachments = list(files or [])
            if reply_to:
                attachments.append({"id": reply_to, "contentType": "messageReference", "contentUrl": None, "content": None,
                                    "name": None, "thumbnailUrl": None, "teamsAppId": None})  # fmt: skip
            self._touch(chat_id, mid)
            self._conv(chat_id).messages[mid] = {
                "id": mid, "replyToId": reply_root, "etag": mid, "messageType": "message", "createdDateTime": when,
                "lastModifiedDateTime": when, "lastEditedDateTime": None, "deletedDateTime": None, "subject": None,
                "summary": None, "chatId": None if team else chat_id, "importance": "normal", "locale": "en-us", "webUrl": None,
                "channelIdentity": {"teamId": team, "channelId": chat_id} if team else None, "policyViolation": None, "eventDetail": None,
                "from": {"application": None, "device": None, "user": {"@odata.type": "#microsoft.graph.teamworkUserIdentity", "id": user[0],
                         "displayName": user[1], "userIdentityType": "aadUser", "tenantId": TENANT}},
                "body": {"contentType": "html" if html else "text", "content": content},
                "attachments": attachments, "mentions": [], "reactions": [], "messageHistory": [],
            }  # fmt: skip
            return mid

    def _conv(self, conv_id: str) -> Chat:
        return self.channels[conv_id] if conv_id in self.channels else self.chats[conv_id]

    def _touch(self, conv_id: str, mid: str) -> None:
        self.seq += 1
        self.changed[(conv_id, mid)] = self.seq

    def add_channel(self, team_id: str, channel_id: str, *, team_name: str = "Contoso", name: str = "General") -> None:
        """A joined team (created on first use) and one of its channels."""
        with self.lock:
            self.teams.setdefault(team_id, {"id": team_id, "displayName": team_name, "description": None, "isArchived": False,
                                            "tenantId": TENANT, "channels": []})  # fmt: skip
            self.teams[team_id]["channels"].append({"id": channel_id, "createdDateTime": iso(self.now), "displayName": name,
                                                    "description": None, "email": "", "webUrl": None, "membershipType": "standard"})  # fmt: skip
            self.channels[channel_id] = Chat({"id": channel_id})
            self.channel_team[channel_id] = team_id

    def system(self, chat_id: str, new_name: str) -> str:
        """A system message: the chat was renamed (``from`` null, ``eventDetail``)."""
        with self.lock:
            when = self.tick()
            mid = str(int(self.now.timestamp() * 1000))
            self._touch(chat_id, mid)
            self.chats[chat_id].messages[mid] = {
                "id": mid, "replyToId": None, "etag": mid, "messageType": "systemEventMessage", "createdDateTime": when,
                "lastModifiedDateTime": when, "lastEditedDateTime": None, "deletedDateTime": None, "subject": None,
                "summary": None, "chatId": chat_id, "importance": "normal", "locale": "en-us", "webUrl": None,
                "channelIdentity": None, "policyViolation": None, "from": None,
                "body": {"contentType": "html", "content": "<systemEventMessage/>"},
                "attachments": [], "mentions": [], "reactions": [], "messageHistory": [],
                "eventDetail": {"@odata.type": "#microsoft.graph.chatRenamedEventMessageDetail", "chatId": chat_id,
                                "chatDisplayName": new_name, "initiator": {"application": None, "device": None,
                                "user": {"id": ME, "displayName": None, "userIdentityType": "aadUser"}}},
            }  # fmt: skip
            return mid

    def edit(self, chat_id: str, mid: str, text: str) -> None:
        """Edit a message (``lastEditedDateTime`` and ``lastModifiedDateTime`` move)."""
        with self.lock:
            when = self.tick()
            m = self._conv(chat_id).messages[mid]
            self._touch(chat_id, mid)
            m["body"] = {"contentType": m["body"]["contentType"], "content": text}
            m["lastEditedDateTime"] = m["lastModifiedDateTime"] = when

    def delete(self, chat_id: str, mid: str) -> None:
        """Delete a message (soft delete: ``deletedDateTime`` set, body emptied)."""
        with self.lock:
            when = self.tick()
            m = self._conv(chat_id).messages[mid]
            self._touch(chat_id, mid)
            m["deletedDateTime"] = m["lastModifiedDateTime"] = when
            m["body"] = {"contentType": "html", "content": ""}

    def react(
        self, chat_id: str, mid: str, reaction: str = "like", *, user: tuple[str, str] = ("u-2", "Adele Vance"), remove: bool = False
    ) -> None:
        """Add (or remove) a reaction: only ``reactions`` and ``lastModifiedDateTime`` change."""
        with self.lock:
            when = self.tick()
            m = self._conv(chat_id).messages[mid]
            self._touch(chat_id, mid)
            if remove:
                m["reactions"] = [r for r in m["reactions"] if not (r["reactionType"] == reaction and r["user"]["user"]["id"] == user[0])]
                action = "reactionRemoved"
            else:
                m["reactions"].append({"reactionType": reaction, "displayName": reaction.capitalize(), "reactionContentUrl": None,
                                       "createdDateTime": when, "user": {"application": None, "device": None,
                                       "user": {"@odata.type": "#microsoft.graph.teamworkUserIdentity", "id": user[0],
                                                "displayName": None, "userIdentityType": "aadUser"}}})  # fmt: skip
                action = "reactionAdded"
            m["messageHistory"].append({"modifiedDateTime": when, "actions": action,
                                        "reaction": {"reactionType": reaction, "displayName": reaction.capitalize(),
                                                     "createdDateTime": when, "user": {"user": {"id": user[0]}}}})  # fmt: skip
            m["lastModifiedDateTime"] = when

    def fault(self, match: str, status: int = 500, *, times: int = 1, headers: dict[str, str] | None = None,
              hang: threading.Event | None = None, after: int = 0) -> Fault:  # fmt: skip
        """Inject a fault for requests whose path contains ``match``."""
        f = Fault(match=match, status=status, headers=dict(headers or {}), times=times, hang=hang, after=after)
        with self.lock:
            self.faults.append(f)
        return f

    def revoke(self) -> None:
        """The user's sessions are revoked: every access and refresh token stops working."""
        with self.lock:
            self.access.clear()
            self.refresh.clear()

    def expire_access(self) -> None:
        """Every access token expires now (refresh tokens still work)."""
        with self.lock:
            self.access.clear()

    def requests(self, contains: str = "") -> list[dict[str, Any]]:
        """The logged requests whose path contains ``contains``."""
        with self.lock:
            return [r for r in self.log if contains in r["path"]]

    # -- identity ---------------------------------------------------------------
    def tokens(self) -> dict[str, Any]:
        """A token response as the v2.0 token endpoint sends it."""
        at, rt = "eyJ0eXAi" + secrets.token_urlsafe(24), "0.AXoA" + secrets.token_urlsafe(32)
        now = int(dt.datetime.now(dt.UTC).timestamp())
        claims = {"aud": self.client_id, "iss": self.issuer, "iat": now, "nbf": now, "exp": now + 3600, "name": "Megan Bowen",
                  "oid": ME, "preferred_username": "megan@contoso.com", "sub": "s-" + ME, "tid": TENANT, "ver": "2.0"}  # fmt: skip
        id_token = ".".join([_b64url(b'{"alg":"RS256","typ":"JWT"}'), _b64url(json.dumps(claims).encode()), _b64url(b"sig")])
        with self.lock:
            self.access[at] = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self.access_lifetime)
            self.refresh.add(rt)
            self.issued += [at, rt]
        return {"token_type": "Bearer", "scope": "Chat.Read openid profile offline_access", "expires_in": self.access_lifetime,
                "ext_expires_in": self.access_lifetime, "access_token": at, "refresh_token": rt, "id_token": id_token,
                "client_info": _b64url(json.dumps({"uid": ME, "utid": TENANT}).encode())}  # fmt: skip


def _aad_error(code: str, number: int, text: str) -> dict[str, Any]:
    return {"error": code, "error_description": f"AADSTS{number}: {text}\r\nTrace ID: 0000\r\nCorrelation ID: 0000\r\nTimestamp: 2026-01-05 09:00:00Z",
            "error_codes": [number], "timestamp": "2026-01-05 09:00:00Z", "trace_id": "0000", "correlation_id": "0000"}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    server_state: GraphServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header: the simulated clock the messages are stamped with (Graph's clock, as a client sees it)."""
        from email.utils import format_datetime

        return format_datetime(self.server_state.now, usegmt=True)

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _fault(self, path: str) -> bool:
        s = self.server_state
        with s.lock:
            fault = next((f for f in s.faults if f.match in path and f.hits < f.after + f.times), None)
            if fault is not None:
                fault.hits += 1
                if fault.hits <= fault.after:
                    fault = None
        if fault is None:
            return False
        if fault.hang is not None:
            fault.hang.wait(60)
            self.close_connection = True
            return True
        body = {"error": {"code": "TooManyRequests" if fault.status == 429 else "ServiceUnavailable", "message": "Injected fault.",
                          "innerError": {"date": "2026-01-05T09:00:00", "request-id": "0000", "client-request-id": "0000"}}}  # fmt: skip
        self._send(fault.status, body, fault.headers)
        return True

    def do_GET(self) -> None:
        s = self.server_state
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        with s.lock:
            s.log.append({"method": "GET", "path": path, "query": query, "headers": dict(self.headers.items()), "at": time.monotonic()})
        if self._fault(path):
            return
        if path == f"/{TENANT}/v2.0/.well-known/openid-configuration":
            base = f"{s.base}/{TENANT}"
            self._send(200, {"token_endpoint": f"{base}/oauth2/v2.0/token", "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                             "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode", "issuer": s.issuer,
                             "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
                             "jwks_uri": f"{base}/discovery/v2.0/keys", "response_modes_supported": ["query", "fragment", "form_post"],
                             "subject_types_supported": ["pairwise"], "id_token_signing_alg_values_supported": ["RS256"],
                             "scopes_supported": ["openid", "profile", "email", "offline_access"], "tenant_region_scope": "NA",
                             "userinfo_endpoint": "https://graph.microsoft.com/oidc/userinfo"})  # fmt: skip
            return
        if not path.startswith("/v1.0/"):
            self._send(404, {"error": "not_found"})
            return
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        with s.lock:
            valid = token in s.access and s.access[token] > dt.datetime.now(dt.UTC)
        if not valid:
            self._send(401, {"error": {"code": "InvalidAuthenticationToken", "message": "Access token has expired or is not yet valid.",
                                       "innerError": {"date": "2026-01-05T09:00:00", "request-id": "0000", "client-request-id": "0000"}}},
                       {"WWW-Authenticate": 'Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize"'})  # fmt: skip
            return
        self._graph(path[len("/v1.0") :], query)

    def _graph(self, path: str, query: dict[str, str]) -> None:
        s = self.server_state
        parts = path.strip("/").split("/")
        with s.lock:
            if parts == ["me", "chats"]:
                chats = [c.doc for c in s.chats.values()]
                top = min(int(query.get("$top", 20)), 50)
                start = int(base64.b64decode(query["$skiptoken"]).decode()) if "$skiptoken" in query else 0
                page = [dict(c) if query.get("$expand") == "members" else {k: v for k, v in c.items() if k != "members"}
                        for c in chats[start : start + top]]  # fmt: skip
                body: dict[str, Any] = {
                    "@odata.context": "https://graph.microsoft.com/v1.0/$metadata#chats",
                    "@odata.count": len(page),
                    "value": page,
                }
                if start + top < len(chats):
                    q = {**query, "$skiptoken": base64.b64encode(str(start + top).encode()).decode()}
                    body["@odata.nextLink"] = f"{s.graph}/me/chats?{urlencode(q)}"
                self._send(200, body)
                return
            if parts == ["me", "joinedTeams"]:
                value = [{k: v for k, v in t.items() if k != "channels"} for t in s.teams.values()]
                self._send(
                    200, {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#teams", "@odata.count": len(value), "value": value}
                )
                return
            if len(parts) == 3 and parts[0] == "teams" and parts[2] == "channels" and parts[1] in s.teams:
                value = s.teams[parts[1]]["channels"]
                self._send(200, {"@odata.context": f"https://graph.microsoft.com/v1.0/$metadata#teams('{parts[1]}')/channels",
                                 "@odata.count": len(value), "value": value})  # fmt: skip
                return
            if len(parts) == 6 and parts[0] == "teams" and parts[2] == "channels" and parts[4:] == ["messages", "delta"]:
                self._delta(parts[1], parts[3], query)
                return
            if (
                len(parts) >= 9
                and parts[0] == "teams"
                and parts[2] == "channels"
                and parts[-3] == "hostedContents"
                and parts[-1] == "$value"
            ):
                # .../messages/{id}/hostedContents/{hid}/$value, or .../messages/{root}/replies/{id}/hostedContents/{hid}/$value
                data = s.hosted.get((parts[3], parts[-4], parts[-2]))
                if data is None:
                    self._send(404, {"error": {"code": "NotFound", "message": "Hosted content not found."}})
                else:
                    self._send(200, data, ctype="image/png")
                return
            if len(parts) == 5 and parts[0] == "teams" and parts[2] == "channels" and parts[4] == "messages":
                self._channel_list(parts[1], parts[3], query)
                return
            if len(parts) == 7 and parts[0] == "teams" and parts[2] == "channels" and parts[4] == "messages" and parts[6] == "replies":
                self._replies(parts[1], parts[3], parts[5], query)
                return
            if len(parts) == 4 and parts[:2] == ["me", "chats"] and parts[3] == "messages":
                self._messages(parts[2], query)
                return
            if len(parts) == 7 and parts[0] == "chats" and parts[2] == "messages" and parts[4] == "hostedContents" and parts[6] == "$value":
                data = s.hosted.get((parts[1], parts[3], parts[5]))
                if data is None:
                    self._send(404, {"error": {"code": "NotFound", "message": "Hosted content not found."}})
                else:
                    self._send(200, data, ctype="image/png")
                return
        self._send(404, {"error": {"code": "NotFound", "message": "Resource not found."}})

    def _messages(self, chat_id: str, query: dict[str, str]) -> None:
        s = self.server_state
        chat = s.chats.get(chat_id)
        if chat is None:
            self._send(404, {"error": {"code": "NotFound", "message": "Chat not found."}})
            return
        top = self._page_size(query)
        if top is None:
            return
        order = query.get("$orderby", "lastModifiedDateTime desc")
        key = order.split(" ")[0]
        if order not in ("lastModifiedDateTime desc", "createdDateTime desc"):
            self._send(
                400, {"error": {"code": "BadRequest", "message": "Only descending order by lastModifiedDateTime or createdDateTime."}}
            )
            return

        def order(m: dict[str, Any]) -> tuple[str, str]:  # a malformed message (no id, no timestamp) sorts last, as null does
            return (m.get(key) or "", m.get("id") or "")

        msgs = sorted(chat.messages.values(), key=order, reverse=True)
        flt = query.get("$filter")
        if flt and flt.startswith(key):  # $filter is ignored unless $orderby names the same property
            for clause in flt.split(" and "):
                prop, op, value = clause.split(" ", 2)
                assert prop == key and op in (("gt", "lt") if key == "lastModifiedDateTime" else ("lt",)), clause
                bound = _parse(value)
                msgs = [m for m in msgs if m.get(key) and (_parse(m[key]) > bound) == (op == "gt") and _parse(m[key]) != bound]
        if "$skiptoken" in query:
            last = tuple(json.loads(base64.b64decode(query["$skiptoken"]).decode()))
            msgs = [m for m in msgs if order(m) < last]
        page = msgs[:top]
        body: dict[str, Any] = {"@odata.context": f"https://graph.microsoft.com/v1.0/$metadata#chats('{chat_id}')/messages",
                                "@odata.count": len(page), "value": [json.loads(json.dumps(m)) for m in page]}  # fmt: skip
        for m in body["value"]:
            if m["body"]["contentType"] == "html":
                m["body"]["content"] = m["body"]["content"].replace("https://graph.microsoft.com/v1.0", s.graph)
        if len(msgs) > top:
            token = base64.b64encode(json.dumps(list(order(page[-1]))).encode()).decode()
            body["@odata.nextLink"] = (
                f"{s.next_link_base or s.graph}/me/chats/{chat_id}/messages?{urlencode({**query, '$skiptoken': token})}"
            )
        self._send(200, body)

    def _page_size(self, query: dict[str, str]) -> int | None:
        """``$top`` (default 20); above 50 Graph answers 400 (sent here, None returned)."""
        top = int(query.get("$top", 20))
        if top > 50:
            self._send(
                400, {"error": {"code": "BadRequest", "message": "Invalid page size requested. Valid page size is between 1 and 50."}}
            )
            return None
        return top

    def _channel(self, team_id: str, channel_id: str) -> Chat | None:
        s = self.server_state
        channel = s.channels.get(channel_id)
        if channel is None or s.channel_team.get(channel_id) != team_id:
            self._send(404, {"error": {"code": "NotFound", "message": "Channel not found."}})
            return None
        return channel

    @staticmethod
    def _replies_of(channel: Chat, root_id: str) -> list[dict[str, Any]]:
        return [json.loads(json.dumps(r)) for r in sorted(channel.messages.values(), key=lambda m: m["id"]) if r["replyToId"] == root_id]

    def _with_replies(self, channel: Chat, root: dict[str, Any], team_id: str, channel_id: str) -> dict[str, Any]:
        """A root post with ``replies`` expanded: up to ``max_replies``, then a ``replies@odata.nextLink``."""
        s = self.server_state
        doc = json.loads(json.dumps(root))
        replies = self._replies_of(channel, root["id"])
        doc["replies"] = replies[: s.max_replies]
        if len(replies) > s.max_replies:
            token = base64.b64encode(str(s.max_replies).encode()).decode()
            doc["replies@odata.nextLink"] = (
                f"{s.graph}/teams/{team_id}/channels/{channel_id}/messages/{root['id']}/replies?{urlencode({'$skiptoken': token})}"
            )
        return doc

    def _delta(self, team_id: str, channel_id: str, query: dict[str, str]) -> None:
        """A channel's delta round: reply chains (root + replies) changed after the token's position, oldest root first.

        ``$filter=lastModifiedDateTime gt X`` (first request only) keeps the chains with a message modified after X;
        the filter rides in the skip token, as Graph encodes the first request's parameters into its tokens.
        """
        s = self.server_state
        channel = self._channel(team_id, channel_id)
        if channel is None:
            return
        if "$skiptoken" in query:
            since, top, offset, after = json.loads(base64.b64decode(query["$skiptoken"]).decode())
        elif "$deltatoken" in query:
            (since,), top, offset, after = json.loads(base64.b64decode(query["$deltatoken"]).decode()), 50, 0, None
        else:
            since, top, offset, after = 0, min(int(query.get("$top", 50)), 50), 0, None
            if "$filter" in query:
                prop, op, after = query["$filter"].split(" ", 2)
                assert (prop, op) == ("lastModifiedDateTime", "gt"), query["$filter"]
        roots = sorted((m for m in channel.messages.values() if not m["replyToId"]), key=lambda m: m["id"])

        def chain_seq(root: dict[str, Any]) -> int:
            return max([s.changed.get((channel_id, root["id"]), 0)] + [s.changed.get((channel_id, r["id"]), 0)
                       for r in channel.messages.values() if r["replyToId"] == root["id"]])  # fmt: skip

        changed = [r for r in roots if chain_seq(r) > since]
        if after is not None:
            bound = _parse(after)
            changed = [
                r for r in changed if any(_parse(m["lastModifiedDateTime"]) > bound for m in [r, *self._replies_of(channel, r["id"])])
            ]
        page = [self._with_replies(channel, root, team_id, channel_id) for root in changed[offset : offset + top]]
        body: dict[str, Any] = {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection(chatMessage)", "value": page}
        base = f"{s.graph}/teams/{team_id}/channels/{channel_id}/messages/delta"
        if offset + top < len(changed):
            token = base64.b64encode(json.dumps([since, top, offset + top, after]).encode()).decode()
            body["@odata.nextLink"] = f"{base}?{urlencode({'$skiptoken': token})}"
        else:
            body["@odata.deltaLink"] = f"{base}?{urlencode({'$deltatoken': base64.b64encode(json.dumps([s.seq]).encode()).decode()})}"
        self._send(200, body)

    def _channel_list(self, team_id: str, channel_id: str, query: dict[str, str]) -> None:
        """``GET /teams/{id}/channels/{id}/messages``: root posts newest first, ``$top`` <= 50, ``$expand=replies``."""
        s = self.server_state
        channel = self._channel(team_id, channel_id)
        if channel is None:
            return
        top = self._page_size(query)
        if top is None:
            return
        roots = sorted((m for m in channel.messages.values() if not m["replyToId"]), key=lambda m: m["id"], reverse=True)
        offset = int(base64.b64decode(query["$skiptoken"]).decode()) if "$skiptoken" in query else 0
        page = roots[offset : offset + top]
        if query.get("$expand") == "replies":
            value = [self._with_replies(channel, root, team_id, channel_id) for root in page]
        else:
            value = [json.loads(json.dumps(root)) for root in page]
        body: dict[str, Any] = {"@odata.context": f"https://graph.microsoft.com/v1.0/$metadata#teams('{team_id}')/channels('{channel_id}')/messages",
                                "@odata.count": len(value), "value": value}  # fmt: skip
        if offset + top < len(roots):
            q = {**query, "$skiptoken": base64.b64encode(str(offset + top).encode()).decode()}
            body["@odata.nextLink"] = f"{s.graph}/teams/{team_id}/channels/{channel_id}/messages?{urlencode(q)}"
        self._send(200, body)

    def _replies(self, team_id: str, channel_id: str, root_id: str, query: dict[str, str]) -> None:
        """``GET .../messages/{id}/replies``: a post's replies, ``$top`` <= 50 (default 20), paged by ``$skiptoken``."""
        s = self.server_state
        channel = self._channel(team_id, channel_id)
        if channel is None:
            return
        replies = self._replies_of(channel, root_id)
        top = min(int(query.get("$top", 20)), 50)
        offset = int(base64.b64decode(query["$skiptoken"]).decode()) if "$skiptoken" in query else 0
        value = replies[offset : offset + top]
        body: dict[str, Any] = {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection(chatMessage)",
                                "@odata.count": len(value), "value": value}  # fmt: skip
        if offset + top < len(replies):
            q = {**query, "$skiptoken": base64.b64encode(str(offset + top).encode()).decode()}
            body["@odata.nextLink"] = f"{s.graph}/teams/{team_id}/channels/{channel_id}/messages/{root_id}/replies?{urlencode(q)}"
        self._send(200, body)

    def do_POST(self) -> None:
        s = self.server_state
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        path = urlsplit(self.path).path
        with s.lock:
            s.log.append({"method": "POST", "path": path, "query": {}, "headers": dict(self.headers.items()), "form": form})
        if self._fault(path):
            return
        if path == f"/{TENANT}/oauth2/v2.0/devicecode":
            self._send(200, {"user_code": "GXQ4B7ZPM", "device_code": "DAQABAAEAAAD--dc-" + secrets.token_hex(8),
                             "verification_uri": "https://microsoft.com/devicelogin", "expires_in": 900, "interval": 1,
                             "message": "To sign in, use a web browser to open the page https://microsoft.com/devicelogin and enter the code GXQ4B7ZPM to authenticate."})  # fmt: skip
            return
        if path != f"/{TENANT}/oauth2/v2.0/token":
            self._send(404, {"error": "not_found"})
            return
        grant = form.get("grant_type")
        if form.get("client_id") != s.client_id:
            self._send(400, _aad_error("unauthorized_client", 700016, "Application not found in the directory."))
        elif grant == "urn:ietf:params:oauth:grant-type:device_code":
            with s.lock:
                pending = s.pending_polls > 0
                s.pending_polls -= 1
            if pending:
                self._send(
                    400,
                    _aad_error("authorization_pending", 70016, "OAuth 2.0 device flow error. Authorization is pending. Continue polling."),
                )
            else:
                self._send(200, s.tokens())
        elif grant == "refresh_token":
            with s.lock:
                ok = form.get("refresh_token") in s.refresh
            if ok:
                self._send(200, s.tokens())
            else:
                self._send(400, _aad_error("invalid_grant", 700082, "The refresh token has expired due to inactivity."))
        else:
            self._send(400, _aad_error("unsupported_grant_type", 70003, "The app requested an unsupported grant type."))


def _parse(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


Handler = Callable[..., None]
