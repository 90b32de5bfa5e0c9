"""AWS Signature Version 4 for S3 and where a bucket is addressed: the lean client's signing (:mod:`memex.s3.lean`).

Pure functions and small frozen types, no I/O: the credentials being signed with, the endpoint a bucket is
reached at (path style for a custom endpoint, virtual-hosted on AWS), the key's URI encoding and the signer
with its per-day signing key cache.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from memex.errors import StoreError

SERVICE = "s3"
ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

_DNS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class Credentials:
    """One set of AWS credentials, frozen for the request being signed."""

    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:  # never print a secret by accident
        return f"Credentials(access_key={self.access_key[:4]}..., token={'yes' if self.token else 'no'})"


CredentialSource = Callable[[], Credentials]


@dataclass(frozen=True)
class Endpoint:
    """Where a bucket's objects are addressed: scheme, host (with a non-default port) and a path prefix."""

    scheme: str
    host: str
    port: int
    host_header: str
    base_path: str  # "" or "/<bucket>" (path style), never a trailing "/"


def encode_key(key: str) -> str:
    """URI-encode an object key for the request path and the canonical URI (SigV4 rules, '/' kept).

    Everything but ``A-Z a-z 0-9 - . _ ~`` and ``/`` is percent-encoded as UTF-8 bytes with upper-case
    hex, so the ``%`` of our own key escapes becomes ``%25``. S3 signs the path encoded once, exactly
    as it is sent.
    """
    return quote(key, safe="/~")


def endpoint_for(bucket: str, region: str, endpoint_url: str | None) -> Endpoint:
    """The endpoint a bucket is reached at: path style for a custom endpoint, virtual-hosted on AWS."""
    if endpoint_url:
        parts = urlsplit(endpoint_url)
        scheme = parts.scheme or "https"
        if scheme not in ("http", "https") or not parts.hostname:
            raise StoreError(f"{endpoint_url}: endpoint_url must be http://host[:port] or https://host[:port]")
        default = 443 if scheme == "https" else 80
        port = parts.port or default
        host = parts.hostname
        shown = f"[{host}]" if ":" in host else host
        header = shown if port == default else f"{shown}:{port}"
        base = parts.path.rstrip("/")
        return Endpoint(scheme, host, port, header, f"{base}/{encode_key(bucket)}")
    if _DNS_BUCKET.match(bucket):
        host = f"{bucket}.s3.{region}.amazonaws.com"
        return Endpoint("https", host, 443, host, "")
    host = f"s3.{region}.amazonaws.com"  # a bucket name with dots breaks the TLS wildcard: path style
    return Endpoint("https", host, 443, host, f"/{encode_key(bucket)}")


class Signer:
    """AWS Signature Version 4 for S3, with the signing key cached per (secret, date, region)."""

    def __init__(self, region: str, service: str = SERVICE) -> None:
        self.region = region
        self.service = service
        self._cached: tuple[str, str, bytes] | None = None  # (secret, yyyymmdd, key); replaced atomically

    def signing_key(self, secret: str, date: str) -> bytes:
        """kSigning = HMAC chain over date, region, service and ``aws4_request`` (cached for the day)."""
        cached = self._cached
        if cached is not None and cached[0] == secret and cached[1] == date:
            return cached[2]
        k = hmac.digest(("AWS4" + secret).encode(), date.encode(), "sha256")
        k = hmac.digest(k, self.region.encode(), "sha256")
        k = hmac.digest(k, self.service.encode(), "sha256")
        k = hmac.digest(k, b"aws4_request", "sha256")
        self._cached = (secret, date, k)
        return k

    def authorization(self, method: str, path: str, headers: Mapping[str, str], creds: Credentials, amz_date: str,
                      payload_hash: str, query: str = "") -> str:  # fmt: skip
        """The ``Authorization`` header value for a request whose every header in ``headers`` is signed.

        ``path`` is the URI-encoded path exactly as sent; ``headers`` must include ``host`` and ``x-amz-date``.
        """
        canon = sorted((k.lower(), " ".join(str(v).split())) for k, v in headers.items())
        signed = ";".join(k for k, _ in canon)
        canonical_request = "\n".join([method, path, query, "".join(f"{k}:{v}\n" for k, v in canon), signed, payload_hash])
        scope = f"{amz_date[:8]}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
        signature = hmac.new(self.signing_key(creds.secret_key, amz_date[:8]), to_sign.encode(), hashlib.sha256).hexdigest()
        return f"{ALGORITHM} Credential={creds.access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"

    def sign(self, method: str, endpoint: Endpoint, path: str, headers: dict[str, str], body: bytes, creds: Credentials,
             now: datetime | None = None, query: str = "") -> dict[str, str]:  # fmt: skip
        """Add ``host``, ``x-amz-date``, ``x-amz-content-sha256``, the token and ``Authorization`` to ``headers``."""
        amz_date = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
        payload_hash = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
        headers["host"] = endpoint.host_header
        headers["x-amz-date"] = amz_date
        headers["x-amz-content-sha256"] = payload_hash
        if creds.token:
            headers["x-amz-security-token"] = creds.token
        headers["Authorization"] = self.authorization(method, path, headers, creds, amz_date, payload_hash, query)
        return headers
