"""A real S3-compatible server on loopback (moto's), for the tests of a trials' storage.

with s3_server("checkpoints") as s3:
    s3.uri("planner")      # s3://checkpoints/planner?endpoint_override=127.0.0.1:PORT&scheme=http
    s3.keys                # the credentials, for the environment of `plan run` and the nodes
    s3.stored("planner/")  # the keys the bucket holds under a prefix
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

KEYS = {
    "AWS_ACCESS_KEY_ID": "moto-test-id",
    "AWS_SECRET_ACCESS_KEY": "moto-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass
class S3:
    client: Any
    bucket: str
    endpoint: str  # host:port
    keys: dict[str, str]

    def uri(self, prefix: str, bucket: str | None = None) -> str:
        where = f"s3://{bucket or self.bucket}/{prefix}"
        return f"{where}?endpoint_override={self.endpoint}&scheme=http"

    def stored(self, prefix: str = "") -> list[str]:
        listed = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for o in listed.get("Contents", [])]


@contextmanager
def s3_server(bucket: str) -> Iterator[S3]:
    """moto's S3 server on 127.0.0.1 (a port of its own) with `bucket` made; stopped on exit."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        client = boto3.client(
            "s3",
            endpoint_url=f"http://{host}:{port}",
            region_name=KEYS["AWS_DEFAULT_REGION"],
            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        )
        client.create_bucket(Bucket=bucket)
        yield S3(client, bucket, f"{host}:{port}", dict(KEYS))
    finally:
        server.stop()
