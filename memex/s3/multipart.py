"""Create-only multipart uploads for large objects (attachments past :data:`MULTIPART_THRESHOLD`).

The stream is read one part at a time (memory stays one part whatever the file's size, and objects may
exceed the 5 GB of a single PUT). The upload is completed with ``If-None-Match: *``, so, as with every
other write of the store, an object that already exists is a duplicate, never overwritten: on 412 the
upload is aborted and False returned. Any failure aborts the upload, so no parts are left behind to bill.
Uses boto3's client (the lean client does single PUTs only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any, Protocol

from memex.errors import StoreError


class MultipartTarget(Protocol):
    """What a multipart upload needs of the S3 store (:class:`memex.s3.bucket.S3Bucket`)."""

    bucket: str

    @property
    def boto3_client(self) -> Any:
        """The boto3 S3 client."""

    def _key(self, key: str) -> str: ...

    def _boto(self, label: str, call: Callable[[], Any]) -> Any: ...


MULTIPART_THRESHOLD = 16 * 1024 * 1024
PART_SIZE = 16 * 1024 * 1024  # S3's minimum is 5 MiB for every part but the last


def put_new_multipart(store: MultipartTarget, key: str, open_body: Callable[[], IO[bytes]]) -> bool:
    """Upload ``open_body()`` to ``key`` in parts of :data:`PART_SIZE`, create-only; True if created, False if the key existed."""
    part_size = PART_SIZE
    from botocore.exceptions import BotoCoreError, ClientError

    client = store.boto3_client
    full = store._key(key)
    where = f"s3://{store.bucket}/{full}"
    try:
        upload = store._boto(f"{where}: start upload", lambda: client.create_multipart_upload(Bucket=store.bucket, Key=full))["UploadId"]
    except (ClientError, BotoCoreError) as exc:
        raise StoreError(f"{where}: upload refused ({_code(exc)}); check the bucket, credentials and endpoint") from None
    try:
        parts: list[dict[str, Any]] = []
        with open_body() as f:
            while chunk := f.read(part_size):
                number = len(parts) + 1

                def send(body: bytes = chunk, n: int = number) -> Any:
                    return client.upload_part(Bucket=store.bucket, Key=full, UploadId=upload, PartNumber=n, Body=body)

                out = store._boto(f"{where}: part {number}", send)
                parts.append({"ETag": out["ETag"], "PartNumber": number})
        store._boto(f"{where}: complete upload", lambda: client.complete_multipart_upload(
            Bucket=store.bucket, Key=full, UploadId=upload, MultipartUpload={"Parts": parts}, IfNoneMatch="*"))  # fmt: skip
        return True
    except ClientError as exc:
        _abort(store, client, full, upload)
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412:
            return False
        raise StoreError(f"{where}: upload refused ({_code(exc)}); check the bucket, credentials and endpoint") from None
    except BaseException:
        _abort(store, client, full, upload)
        raise


def _abort(store: MultipartTarget, client: Any, full: str, upload: str) -> None:
    try:
        client.abort_multipart_upload(Bucket=store.bucket, Key=full, UploadId=upload)
    except Exception:  # best effort: a bucket lifecycle rule should clean up what remains
        pass


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code") or exc.__class__.__name__)
