"""One S3 bucket and prefix: PUT (create-only with ``If-None-Match: *``), GET and HEAD through the lean client or boto3,
bounded by the poll's deadline. The object store (:mod:`memex.store.s3`) and the state (:mod:`memex.state.s3state`) both
build on it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from memex.deadline import NEVER, Deadline
from memex.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from memex.s3.lean import LeanS3


CLIENTS = ("lean", "boto3")  # the S3 request paths [store] client may name


def content_type(key: str) -> str:
    """The MIME type an object gets from its key's suffix."""
    if key.endswith(".json"):
        return "application/json"
    if key.endswith(".eml"):
        return "message/rfc822"
    return "application/octet-stream"


class S3Bucket:
    """An S3 (or S3-compatible) bucket and prefix, written with ``If-None-Match: *``.

    A 412 answer means the key exists: a duplicate. A 409 (a concurrent
    conditional write) is retried. Throttling, 5xx and connection errors are
    retried with exponential backoff (5 attempts). ``client="lean"`` (the
    default) sends hand-signed requests over one keep-alive connection per
    thread (:mod:`memex.s3.lean`) and uses boto3 only to find credentials and
    region; ``client="boto3"`` uses a boto3 client (botocore's standard retry
    mode). boto3 is imported on the first request only.
    """

    CONFLICT_RETRIES = 5

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        max_pool_connections: int = 10,
        max_attempts: int = 5,
        client: str = "lean",
        retry_base_delay: float = 1.0,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self.endpoint_url = endpoint_url
        self.region = region
        self.profile = profile
        self.max_pool_connections = max_pool_connections
        self.max_attempts = max_attempts
        if client not in CLIENTS:
            raise ConfigError(f"unknown S3 client {client!r}; use one of {', '.join(CLIENTS)}", key="store.client")
        self.kind = client
        self.retry_base_delay = retry_base_delay
        self._client: Any = None
        self._lean: LeanS3 | None = None
        self._lean_lock = threading.Lock()
        self.deadline: Deadline = NEVER

    def use_deadline(self, deadline: Deadline) -> None:
        """Bound every request by a poll's time limit and stop request (:mod:`memex.deadline`), on either client.

        The lean client caps its socket timeouts and backoffs and shuts a request's socket down when the
        poll must end; the boto3 client's calls are waited for no longer than that (a ``before-send`` hook
        stops botocore from starting another attempt).
        """
        self.deadline = deadline
        if self._lean is not None:
            self._lean.use_deadline(deadline)

    @property
    def lean(self) -> LeanS3:
        """The lean client, created (credentials and region resolved through boto3) on first use."""
        if self._lean is None:
            with self._lean_lock:
                if self._lean is None:
                    from memex.s3.lean import LeanS3, boto_credentials

                    credentials, region = boto_credentials(self.profile, self.region)
                    lean = LeanS3(self.bucket, credentials=credentials, region=region, endpoint_url=self.endpoint_url,
                                  max_attempts=self.max_attempts, retry_base_delay=self.retry_base_delay)  # fmt: skip
                    lean.use_deadline(self.deadline)
                    self._lean = lean
        return self._lean

    @property
    def client(self) -> Any:
        """The client requests go through, created on first use (boto3 imported then, never before).

        With ``client="boto3"`` it is the boto3 S3 client; with ``"lean"`` the :class:`~memex.s3.lean.LeanS3`.
        """
        if self.kind == "lean":
            return self.lean
        return self.boto3_client

    @property
    def boto3_client(self) -> Any:
        """A boto3 S3 client (also with ``client="lean"``, for what the lean client does not do: multipart uploads)."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            from memex.liblog import route_library_logs

            route_library_logs()  # botocore's and urllib3's warnings in memex's form

            session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
            self._client = session.client(
                "s3",
                endpoint_url=self.endpoint_url,
                config=Config(
                    retries={"mode": "standard", "max_attempts": self.max_attempts},
                    max_pool_connections=self.max_pool_connections,
                    connect_timeout=10,
                    read_timeout=60,
                ),
            )
            self._client.meta.events.register("before-send.s3", self._before_send)
        return self._client

    def _before_send(self, request: Any = None, **_kwargs: Any) -> None:
        """botocore hook: no attempt (first or retry) starts once the poll must end."""
        self.deadline.check(f"s3://{self.bucket}: request")

    def _boto(self, label: str, call: Callable[[], Any]) -> Any:
        """One boto3 call, waited for no longer than the poll's deadline or stop request allow."""
        return self.deadline.call(call, label)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_new(self, key: str, body: bytes) -> bool:
        """PUT with ``If-None-Match: *``; False on 412 (already there)."""
        return self._put(key, body, create_only=True)

    def put(self, key: str, body: bytes) -> None:
        """Unconditional PUT (an explicit rewrite)."""
        self._put(key, body, create_only=False)

    def _put(self, key: str, body: bytes, *, create_only: bool) -> bool:
        full = self._key(key)
        if self.kind == "lean":
            return self.lean.put(full, body, content_type(key), create_only=create_only)
        from botocore.exceptions import BotoCoreError, ClientError

        extra = {"IfNoneMatch": "*"} if create_only else {}
        label = f"s3://{self.bucket}/{full}: upload"
        for attempt in range(self.CONFLICT_RETRIES + 1):
            try:
                self._boto(
                    label, lambda: self.client.put_object(Bucket=self.bucket, Key=full, Body=body, ContentType=content_type(key), **extra)
                )
                return True
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                code = exc.response.get("Error", {}).get("Code", "")
                if create_only and (status == 412 or code == "PreconditionFailed"):
                    return False
                if status == 409 and attempt < self.CONFLICT_RETRIES:
                    self.deadline.sleep(0.05 * 2**attempt, label)
                    continue
                raise StoreError(
                    f"s3://{self.bucket}/{full}: upload refused ({code or status}); check the bucket, credentials and endpoint"
                ) from None
            except BotoCoreError as exc:
                raise StoreError(
                    f"s3://{self.bucket}/{full}: upload failed ({exc.__class__.__name__}); check the endpoint and network"
                ) from None
        raise AssertionError("unreachable")

    def get(self, key: str) -> bytes | None:
        """GET the object's bytes, or None on 404."""
        full = self._key(key)
        if self.kind == "lean":
            return self.lean.get(full)
        where = f"s3://{self.bucket}/{full}"
        body = none_if_missing(
            where, "read", lambda: self._boto(f"{where}: read", lambda: self.client.get_object(Bucket=self.bucket, Key=full)["Body"].read())
        )
        return None if body is None else bytes(body)

    def exists(self, key: str) -> bool:
        """HEAD the object: True if it exists."""
        full = self._key(key)
        if self.kind == "lean":
            return self.lean.head(full)
        where = f"s3://{self.bucket}/{full}"
        head = none_if_missing(
            where, "check", lambda: self._boto(f"{where}: check", lambda: self.client.head_object(Bucket=self.bucket, Key=full))
        )
        return head is not None

    def list_keys(self, prefix: str = "") -> Iterator[str]:
        """Every key under ``prefix`` (store-relative, in the bucket's order), listed a page at a time (:mod:`memex.s3.listing`)."""
        from memex.s3.listing import boto_keys, lean_keys

        full = self._key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        keys = lean_keys(self.lean, full) if self.kind == "lean" else boto_keys(self.client, self.bucket, full, self._call)
        cut = len(self.prefix) + 1 if self.prefix else 0
        for key in keys:
            yield key[cut:]

    def _call(self, fn: Callable[[], Any], label: str) -> Any:
        return self._boto(label, fn)


T = TypeVar("T")


def none_if_missing(where: str, what: str, call: Callable[[], T], hint: str = "") -> T | None:
    """Run one boto3 call: its answer, None if S3 said 404, or one StoreError line naming ``where`` and ``what``."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return None
        raise StoreError(f"{where}: {what} refused ({exc.response.get('Error', {}).get('Code')})") from None
    except BotoCoreError as exc:
        raise StoreError(f"{where}: {what} failed ({exc.__class__.__name__}){hint}") from None
