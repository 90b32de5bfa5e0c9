"""The S3 object store: the bucket's create-only PUTs (:mod:`memex.s3.bucket`), with streamed attachments."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from memex.s3.bucket import S3Bucket


class S3Store(S3Bucket):
    """An S3 bucket and prefix as an :class:`~memex.store.objects.ObjectStore`: create-only writes, durable once answered."""

    def put_new_stream(self, key: str, open_body: Callable[[], IO[bytes]], size: int) -> bool:
        """Create ``key`` from a stream, create-only; False if it exists.

        Up to :data:`~memex.s3.multipart.MULTIPART_THRESHOLD` bytes go as one PUT; anything larger as a
        multipart upload read part by part (memory stays one part, objects may exceed 5 GB), made create-only by
        ``If-None-Match: *`` on the completion.
        """
        from memex.s3.multipart import MULTIPART_THRESHOLD, put_new_multipart

        if size > MULTIPART_THRESHOLD:
            return put_new_multipart(self, key, open_body)
        with open_body() as f:
            body = f.read()
        return self.put_new(key, body)

    def replace_damaged(self, key: str, body: bytes) -> None:
        """Replace an object found damaged (``memex verify --repair``): one PUT, which S3 makes visible whole or not at all."""
        self.put(key, body)

    def sync(self) -> None:
        """Nothing to do: a PUT that returned is durable."""
