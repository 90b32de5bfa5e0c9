"""A lean S3 client for the hot path: create-only PUT, overwrite PUT and GET.

botocore spends about 1.2-1.8 ms of CPU per request in its pipeline (parameter
validation, endpoint rules, event hooks, urllib3). Three operations on small
objects need none of that, so this module signs requests itself (AWS
Signature Version 4, :mod:`memex.s3.sigv4`) and sends them over one
persistent connection per thread, each request
sent in one write and its answer parsed by :mod:`memex.s3.connection`. boto3 is still
used for what it does well: finding the credentials (environment, shared
files, profiles, SSO, instance roles) and the region; it is imported when the
first request is made, never when a store is opened.

What it does: ``x-amz-content-sha256`` is the real SHA-256 of the body (S3
rejects a body that does not match it), ``If-None-Match: *`` for create-only
writes, the session token when the credentials carry one, path-style URLs for
a custom endpoint and virtual-hosted URLs for AWS (path style for bucket names
with dots), retries with exponential backoff and full jitter for 5xx, 429,
timeouts and connection errors. What it does not do: multipart uploads (one
PUT takes up to 5 GB; our objects are JSON records and mail of at most tens
of MB), ``Expect: 100-continue``, presigning, or anything else (a listing is built on
:meth:`LeanS3._request` in :mod:`memex.s3.listing`).
"""

from __future__ import annotations

import functools
import http.client
import random
import re
import socket
import ssl
import threading
from dataclasses import dataclass

from memex.deadline import NEVER, Deadline
from memex.errors import StoreError
from memex.s3.connection import Connection
from memex.s3.sigv4 import Credentials, CredentialSource, Signer, encode_key, endpoint_for

MAX_ATTEMPTS = 5
CONFLICT_RETRIES = 5
MAX_BACKOFF = 20.0
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
ERROR_BODY_LIMIT = 64 * 1024

_CODE = re.compile(rb"<Code>([^<]{1,128})</Code>")
_REGION = re.compile(rb"<Region>([a-z0-9-]{1,64})</Region>")
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_CONN_ERRORS = (OSError, http.client.HTTPException)


@dataclass
class Response:
    """A complete response: status, the headers we use, and the body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def code(self) -> str:
        """S3's error ``<Code>`` (empty if the body has none)."""
        m = _CODE.search(self.body[:ERROR_BODY_LIMIT])
        return m.group(1).decode("ascii", "replace") if m else ""

    def region_hint(self) -> str | None:
        """The region S3 says the bucket is in (redirect header or ``<Region>`` of the error body)."""
        hint = self.headers.get("x-amz-bucket-region")
        if hint:
            return hint
        m = _REGION.search(self.body[:ERROR_BODY_LIMIT])
        return m.group(1).decode("ascii") if m else None


class _Retryable(Exception):
    """One attempt failed in a way worth another try (after a backoff)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LeanS3:
    """PUT (create-only or overwrite) and GET of one bucket's objects, safe to share between threads."""

    def __init__(self, bucket: str, *, credentials: CredentialSource, region: str, endpoint_url: str | None = None,
                 max_attempts: int = MAX_ATTEMPTS, retry_base_delay: float = 1.0, connect_timeout: float = CONNECT_TIMEOUT,
                 read_timeout: float = READ_TIMEOUT, ssl_context: ssl.SSLContext | None = None) -> None:  # fmt: skip
        self.bucket = bucket
        self.region = region
        self.endpoint = endpoint_for(bucket, region, endpoint_url)
        self.credentials = credentials
        self.signer = Signer(region)
        self.max_attempts = max(1, max_attempts)
        self.retry_base_delay = retry_base_delay
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._ssl = ssl_context
        self._local = threading.local()
        self.deadline: Deadline = NEVER  # a poll's time limit and stop request (memex.deadline); none by default

    def use_deadline(self, deadline: Deadline) -> None:
        """Bound every request, timeout and retry by ``deadline``; a stop request cuts a request in flight short."""
        self.deadline = deadline

    # -- the operations --------------------------------------------------------------------------------------------
    def put(self, key: str, body: bytes, content_type: str, *, create_only: bool) -> bool:
        """PUT ``key``; with ``create_only``, ``If-None-Match: *`` and False on 412 (it exists). True when stored."""
        where = f"s3://{self.bucket}/{key}"
        headers = {"content-type": content_type}
        if create_only:
            headers["if-none-match"] = "*"
        for conflict in range(CONFLICT_RETRIES + 1):
            resp = self._request("PUT", key, body, headers, where, "upload")
            if resp.status == 200:
                return True
            if resp.status == 412 and create_only:
                return False
            if resp.status == 409 and conflict < CONFLICT_RETRIES:  # a concurrent conditional write: try again
                self._sleep(0.05 * 2**conflict, f"{where}: upload")
                continue
            raise self._refused(resp, where, "upload")
        raise AssertionError("unreachable")

    def get(self, key: str) -> bytes | None:
        """GET ``key``'s bytes; None if S3 says there is no such key."""
        where = f"s3://{self.bucket}/{key}"
        resp = self._request("GET", key, b"", {}, where, "read")
        if resp.status == 200:
            return resp.body
        if resp.status == 404 and resp.code() in ("NoSuchKey", ""):
            return None
        raise self._refused(resp, where, "read")

    def head(self, key: str) -> bool:
        """HEAD ``key``: True if it exists, False on 404."""
        where = f"s3://{self.bucket}/{key}"
        resp = self._request("HEAD", key, b"", {}, where, "check")
        if resp.status == 200:
            return True
        if resp.status == 404:
            return False
        raise self._refused(resp, where, "check")

    def get_response(self, key: str) -> Response | None:
        """GET ``key`` with its headers (``etag``, ``last-modified``, the server's ``date``); None on 404."""
        where = f"s3://{self.bucket}/{key}"
        resp = self._request("GET", key, b"", {}, where, "read")
        if resp.status == 200:
            return resp
        if resp.status == 404 and resp.code() in ("NoSuchKey", ""):
            return None
        raise self._refused(resp, where, "read")

    def put_if(self, key: str, body: bytes, content_type: str, *, etag: str | None) -> str | None:
        """Compare-and-swap PUT: ``If-Match: etag`` (or ``If-None-Match: *`` when ``etag`` is None).

        Returns the new ETag, or None when the condition failed (412) or a concurrent conditional write
        won (409): the caller re-reads and decides. A retried attempt whose first response was lost meets
        412 too, so callers must recognise their own write on the re-read.
        """
        where = f"s3://{self.bucket}/{key}"
        condition = {"if-none-match": "*"} if etag is None else {"if-match": etag}
        resp = self._request("PUT", key, body, {"content-type": content_type, **condition}, where, "conditional write")
        if resp.status == 200:
            return resp.headers.get("etag", "")
        if resp.status in (409, 412):
            return None
        raise self._refused(resp, where, "conditional write")

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    # -- one request, retried ----------------------------------------------------------------------------------------
    def _request(self, method: str, key: str, body: bytes, extra: dict[str, str], where: str, what: str, query: str = "") -> Response:
        """One request, retried; ``query`` is the canonical (sorted, encoded) query string, if any (a listing)."""
        path = f"{self.endpoint.base_path}/{encode_key(key)}"
        label = f"{where}: {what}"
        reason = ""
        for attempt in range(self.max_attempts):
            if attempt:
                self._sleep(min(random.random() * 2 ** (attempt - 1), MAX_BACKOFF), label)
            headers = dict(extra)
            if body or method == "PUT":
                headers["content-length"] = str(len(body))
            try:
                creds = self.credentials()
            except StoreError:
                raise
            except Exception as exc:
                raise StoreError(
                    f"{where}: cannot get AWS credentials ({exc.__class__.__name__}); check the profile and the AWS configuration"
                ) from None
            self.signer.sign(method, self.endpoint, path, headers, body, creds, query=query)
            try:
                resp = self._send(method, f"{path}?{query}" if query else path, body, headers, label)
            except _Retryable as exc:
                self.deadline.check(label)  # cut short by the poll's end, not a network fault: no retry
                reason = exc.reason
                continue
            if resp.status in _RETRY_STATUS and attempt + 1 < self.max_attempts:
                continue
            return resp  # a final answer, or the last of the retried ones (the caller turns it into an error)
        raise StoreError(f"{where}: {what} failed ({reason}); check the endpoint and network")

    def _send(self, method: str, path: str, body: bytes, headers: dict[str, str], label: str) -> Response:
        """One attempt on this thread's connection; a stale keep-alive connection is reopened once, at once.

        The socket's timeout is capped to the poll's time left, and a stop request (or the deadline
        passing) shuts the socket down mid-request (:meth:`memex.deadline.Deadline.guard`).
        """
        for fresh in (False, True):
            conn, reused = self._connection(force_new=fresh, label=label)
            try:
                conn.sock.settimeout(self.deadline.timeout(self.read_timeout, label))
                with self.deadline.guard(functools.partial(conn.sock.shutdown, socket.SHUT_RDWR)):
                    answer = conn.exchange(method, path, headers, body)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                self.deadline.check(label)
                if reused and not fresh:
                    continue  # the server closed an idle connection: the request never reached it, or is safe to repeat
                raise _Retryable(exc.__class__.__name__) from None
            except _CONN_ERRORS as exc:
                self.close()
                raise _Retryable(exc.__class__.__name__) from None
            if answer.will_close:
                self.close()
            else:
                self._local.used = True
            return Response(answer.status, answer.headers, answer.body)
        raise AssertionError("unreachable")

    def _connection(self, *, force_new: bool, label: str) -> tuple[Connection, bool]:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None and not force_new:
            return conn, bool(getattr(self._local, "used", False))
        if conn is not None:
            conn.close()
        ep = self.endpoint
        try:
            conn = Connection.open(ep.scheme, ep.host, ep.port, self.deadline.timeout(self.connect_timeout, label), self._ssl)
        except _CONN_ERRORS as exc:
            raise _Retryable(exc.__class__.__name__) from None
        self._local.conn = conn
        self._local.used = False
        return conn, False

    def _refused(self, resp: Response, where: str, what: str) -> StoreError:
        """The one-line error for a final answer that is neither success nor an expected miss."""
        code = resp.code()
        if resp.status in (301, 307) or code in ("AuthorizationHeaderMalformed", "PermanentRedirect", "IncorrectEndpoint"):
            hint = resp.region_hint()
            if hint and hint != self.region:
                return StoreError(f"{where}: {what} refused ({code or resp.status}): wrong region {self.region!r}, S3 says the "
                                  f"bucket is in {hint!r}; set region = {hint!r} in [store]")  # fmt: skip
            return StoreError(f"{where}: {what} refused ({code or resp.status}): the bucket is not at this endpoint/region "
                              f"({self.region!r}); check [store] region and endpoint_url")  # fmt: skip
        if resp.status == 403:
            return StoreError(f"{where}: {what} refused ({code or 403}); check the credentials and their permissions on the bucket")
        return StoreError(f"{where}: {what} refused ({code or resp.status}); check the bucket, credentials and endpoint")

    def _sleep(self, seconds: float, label: str) -> None:
        """A retry's backoff, within the poll's time left (raises :class:`~memex.deadline.Interrupted` rather than overrun)."""
        if self.retry_base_delay > 0:
            self.deadline.sleep(seconds * self.retry_base_delay, label)
        else:
            self.deadline.check(label)


def boto_credentials(profile: str | None, region: str | None) -> tuple[CredentialSource, str]:
    """Resolve credentials and region the way boto3 does; returns a per-request source of frozen credentials.

    Refreshable credentials (SSO, assumed roles, instance roles) stay refreshable: each call asks botocore for
    the current frozen set, which it refreshes shortly before expiry. boto3 is imported here, not before.
    """
    import boto3
    from botocore.exceptions import BotoCoreError

    from memex.liblog import route_library_logs

    route_library_logs()

    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
        found = session.get_credentials()
    except BotoCoreError as exc:
        raise StoreError(
            f"cannot resolve AWS credentials ({exc.__class__.__name__}); check [store] profile and the AWS configuration"
        ) from None
    if found is None:
        raise StoreError("no AWS credentials found (environment, ~/.aws/credentials, profile or instance role); configure them")
    source = found

    def current() -> Credentials:
        frozen = source.get_frozen_credentials()
        return Credentials(frozen.access_key, frozen.secret_key, frozen.token or None)

    return current, session.region_name or "us-east-1"
