"""The S3 servers the tests use (moto, SeaweedFS) speak conditional writes the way S3 does."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError


def test_s3_server_refuses_second_create_with_412(any_s3: tuple[str, str]) -> None:
    """A second PUT with If-None-Match: * on the same key is answered 412, which our dedup relies on."""
    s3_endpoint, s3_bucket = any_s3  # moto, then SeaweedFS
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.put_object(Bucket=s3_bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        client.put_object(Bucket=s3_bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"1"
