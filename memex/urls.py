"""The URLs and names a config may give, checked at load: ``file://`` store URLs, S3 buckets, endpoints.

Each check returns the normalised value or raises :class:`~memex.errors.ConfigError` naming the file, the key and
the fix, so a wrong URL is exit 2 at load instead of a write somewhere unexpected or a connection failure at poll time.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from memex.errors import ConfigError

# S3's bucket naming rules (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3 to 63 lowercase
# letters, digits, dots and hyphens, starting and ending with a letter or digit, no two dots in a row, not an IP address.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+")
_BUCKET_RESERVED = (("xn--", "sthree-", "amzn-s3-demo-"), ("-s3alias", "--ol-s3", ".mrap", "--x-s3"))


def file_url(url: str, *, path: Path | None, key: str) -> str:
    """``file:///abs`` or ``file://localhost/abs`` as ``file:///abs``; any other host or a relative path is refused.

    ``file://~/x`` would be host ``~`` and path ``/x``: memex would write to ``/x``, so it is an error, not a guess.
    """
    parts = urlsplit(url)
    fix = "write file:///absolute/path (three slashes), or a plain path (relative to the config file's folder)"
    if parts.netloc not in ("", "localhost"):
        raise ConfigError(f"a file:// URL cannot name a host ({parts.netloc!r}); {fix}", path=path, key=key)
    if not url.lower().startswith("file://") or not parts.path.startswith("/"):
        raise ConfigError(f"a file: URL must start with file:/// and name an absolute path; {fix}", path=path, key=key)
    if parts.query or parts.fragment:
        raise ConfigError(f"a file:// URL cannot have a query or fragment ('?' or '#'); {fix}", path=path, key=key)
    return Path(unquote(parts.path)).as_uri()


def s3_url(url: str, *, path: Path | None, key: str, what: str) -> str:
    """``s3://bucket/prefix`` with a bucket S3 accepts; ``what`` says what the URL is for (in the error)."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not url.startswith("s3://") or not parts.netloc:
        raise ConfigError(f"must be s3://bucket/prefix ({what})", path=path, key=key)
    bucket_name(parts.netloc, path=path, key=key)
    if parts.query or parts.fragment:
        raise ConfigError("an s3:// URL cannot have a query or fragment ('?' or '#'); write s3://bucket/prefix", path=path, key=key)
    return url


def bucket_name(bucket: str, *, path: Path | None, key: str) -> str:
    """``bucket`` if it follows S3's naming rules, else a ConfigError saying which rule it breaks."""
    rules = "3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit"
    if not _BUCKET.fullmatch(bucket):
        raise ConfigError(f"{bucket!r} is not a valid S3 bucket name ({rules}); fix the bucket name", path=path, key=key)
    if ".." in bucket or ".-" in bucket or "-." in bucket or _IPV4.fullmatch(bucket):
        raise ConfigError(f"{bucket!r} is not a valid S3 bucket name (no '..', '.-', '-.', and not an IP address)", path=path, key=key)
    if bucket.startswith(_BUCKET_RESERVED[0]) or bucket.endswith(_BUCKET_RESERVED[1]):
        raise ConfigError(f"{bucket!r} is not a valid S3 bucket name (a prefix or suffix S3 reserves)", path=path, key=key)
    return bucket


def endpoint_url(url: str, *, path: Path | None, key: str) -> str:
    """An S3 endpoint: ``http://`` or ``https://`` with a host and, if any, a numeric port."""
    parts = urlsplit(url)
    fix = "write it like https://s3.example.com or http://127.0.0.1:9000"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"must be an http:// or https:// URL with a host; {fix}", path=path, key=key)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise ConfigError(f"its port is not a number from 1 to 65535; {fix}", path=path, key=key) from None
    if any(c.isspace() for c in url) or parts.query or parts.fragment:
        raise ConfigError(f"must be a plain URL (no spaces, query or fragment); {fix}", path=path, key=key)
    return url
