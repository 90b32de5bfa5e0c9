"""Compare-and-swap on single S3 objects, through either client of :class:`~memex.s3.bucket.S3Bucket`.

Two operations, enough to build cursors and leases on S3 (:mod:`memex.state.s3state`, :mod:`memex.state.s3lease`):

- :func:`get_versioned`: the object's bytes with its ETag, its ``Last-Modified`` and the server's ``Date``
  (both read off the S3 server's clock, so that lease expiry never trusts the host's clock);
- :func:`put_if`: PUT with ``If-Match: <etag>`` (or ``If-None-Match: *`` to create), answering the new ETag, or
  None when the condition failed (412) or a concurrent conditional write won (409).
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from memex.errors import StoreError

if TYPE_CHECKING:
    from memex.s3.bucket import S3Bucket

JSON = "application/json"


@dataclass(frozen=True)
class Versioned:
    """One read of an object: bytes, ETag, and two instants on the server's clock (epoch seconds)."""

    body: bytes
    etag: str
    last_modified: float
    server_now: float

    @property
    def age(self) -> float:
        """Seconds since the object was last written, by the server's clock (never negative)."""
        return max(0.0, self.server_now - self.last_modified)


def _http_time(value: Any) -> float:
    """An HTTP date header (or a datetime) as epoch seconds; 0.0 when absent or unreadable."""
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    try:
        return parsedate_to_datetime(str(value)).timestamp()
    except (TypeError, ValueError, IndexError):
        return 0.0


def get_versioned(store: S3Bucket, key: str) -> Versioned | None:
    """GET ``key`` under the store's prefix with its version headers; None if there is no such object."""
    full = store._key(key)
    if store.kind == "lean":
        resp = store.lean.get_response(full)
        if resp is None:
            return None
        h = resp.headers
        return Versioned(resp.body, h.get("etag", ""), _http_time(h.get("last-modified")), _http_time(h.get("date")))
    from memex.s3.bucket import none_if_missing

    def read() -> tuple[dict[str, Any], bytes]:
        out = store.client.get_object(Bucket=store.bucket, Key=full)
        return out, bytes(out["Body"].read())

    got = none_if_missing(f"s3://{store.bucket}/{full}", "read", read, "; check the endpoint and network")
    if got is None:
        return None
    out, body = got
    date = out.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    return Versioned(body, str(out.get("ETag", "")), _http_time(out.get("LastModified")), _http_time(date))


def put_if(store: S3Bucket, key: str, body: bytes, *, etag: str | None) -> str | None:
    """Write ``key`` only if it is still at ``etag`` (None: only if it does not exist); the new ETag, or None."""
    full = store._key(key)
    if store.kind == "lean":
        return store.lean.put_if(full, body, JSON, etag=etag)
    from botocore.exceptions import BotoCoreError, ClientError

    condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
    try:
        out = store.client.put_object(Bucket=store.bucket, Key=full, Body=body, ContentType=JSON, **condition)
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = exc.response.get("Error", {}).get("Code", "")
        if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
            return None
        raise StoreError(
            f"s3://{store.bucket}/{full}: conditional write refused ({code or status}); check the bucket and credentials"
        ) from None
    except BotoCoreError as exc:
        raise StoreError(
            f"s3://{store.bucket}/{full}: conditional write failed ({exc.__class__.__name__}); check the endpoint and network"
        ) from None
    return str(out.get("ETag", ""))
