"""Listing a bucket's keys under a prefix: ``ListObjectsV2``, paginated, one page (up to 1,000 keys) in memory at a time.

Through the lean client (:mod:`memex.s3.lean`: the same signing, connection per thread, retries and deadline as
every other request; the XML page parsed with :mod:`xml.etree.ElementTree`) or through boto3's paginator (each page
waited for no longer than the deadline allows). Used by ``memex verify`` to walk the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from xml.etree import ElementTree

from memex.errors import StoreError

if TYPE_CHECKING:
    from memex.s3.lean import LeanS3

PAGE_KEYS = 1000
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def list_query(prefix: str, token: str | None, page_keys: int = PAGE_KEYS) -> str:
    """The canonical query of one ``ListObjectsV2`` page: parameters sorted by name, values encoded as SigV4 wants."""
    params = {"list-type": "2", "max-keys": str(page_keys), "prefix": prefix}
    if token is not None:
        params["continuation-token"] = token
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params.items()))


def parse_page(body: bytes, where: str) -> tuple[list[str], str | None]:
    """The keys of one ``ListBucketResult`` page and the continuation token of the next (None: the last page)."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        raise StoreError(f"{where}: listing answered with something that is not a ListObjectsV2 result; check the endpoint") from None
    ns = _NS if root.tag.startswith(_NS) else ""
    keys = [el.text or "" for el in root.iterfind(f"{ns}Contents/{ns}Key")]
    truncated = (root.findtext(f"{ns}IsTruncated") or "").strip().lower() == "true"
    token = root.findtext(f"{ns}NextContinuationToken") if truncated else None
    if truncated and not token:
        raise StoreError(f"{where}: listing is truncated but names no continuation token; check the endpoint")
    return keys, token


def lean_keys(lean: LeanS3, prefix: str, *, page_keys: int = 0) -> Iterator[str]:
    """Every key under ``prefix`` (full keys, in the bucket's order), one page at a time, through the lean client."""
    where = f"s3://{lean.bucket}/{prefix}"
    token: str | None = None
    while True:
        resp = lean._request("GET", "", b"", {}, where, "list", query=list_query(prefix, token, page_keys or PAGE_KEYS))
        if resp.status != 200:
            raise lean._refused(resp, where, "list")
        keys, token = parse_page(resp.body, where)
        yield from keys
        if token is None:
            return


def boto_keys(client: Any, bucket: str, prefix: str, call: Callable[[Callable[[], Any], str], Any], *,
              page_keys: int = 0) -> Iterator[str]:  # fmt: skip
    """Every key under ``prefix`` through a boto3 client; ``call(fn, label)`` bounds each page's request (a deadline)."""
    from botocore.exceptions import BotoCoreError, ClientError

    where = f"s3://{bucket}/{prefix}"
    token: str | None = None
    while True:
        args: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page_keys or PAGE_KEYS}
        if token is not None:
            args["ContinuationToken"] = token
        try:
            page = call(lambda: client.list_objects_v2(**args), f"{where}: list")  # noqa: B023 (called at once)
        except ClientError as exc:
            raise StoreError(f"{where}: list refused ({exc.response.get('Error', {}).get('Code')}); check the credentials "
                             "and their permissions (s3:ListBucket)") from None  # fmt: skip
        except BotoCoreError as exc:
            raise StoreError(f"{where}: list failed ({exc.__class__.__name__}); check the endpoint and network") from None
        for obj in page.get("Contents", []):
            yield obj["Key"]
        token = page.get("NextContinuationToken") if page.get("IsTruncated") else None
        if token is None:
            return
