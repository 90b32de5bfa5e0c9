"""The S3 endpoint the tests use speaks conditional writes the way S3 does."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError


def test_moto_server_refuses_second_create_with_412(s3_endpoint: str, s3_bucket: str) -> None:
    """A second PUT with If-None-Match: * on the same key is answered 412, which our dedup relies on."""
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.put_object(Bucket=s3_bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        client.put_object(Bucket=s3_bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"1"
