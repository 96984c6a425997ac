"""Tiered storage's object-store side (Kafka's RemoteStorageManager), for S3 and S3-compatible stores.

Blocking: every call makes HTTP requests through boto3, so callers run it on worker threads, never
on the event loop. It knows segments and files, nothing of brokers.

Settings are those of the Aiven tiered-storage-for-apache-kafka S3 plugin, the widely used open-source
RSM, as the broker hands them over with its ``rsm.config.`` prefix stripped: ``storage.s3.bucket.name``,
``storage.s3.endpoint.url``, ``storage.s3.region``, ``storage.s3.path.style.access.enabled``,
``storage.aws.access.key.id``, ``storage.aws.secret.access.key`` (the AWS default chain when both are
unset), ``key.prefix``.

Object keys follow that plugin's layout,
``<key.prefix><topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>.<suffix>``, one object
per file: ``log`` (the segment), ``index``, ``timeindex``, ``snapshot`` (producer state at the segment's
end), ``leader-epoch-checkpoint`` and ``txnindex``. The segment is uploaded last but one, and a
``rsm-manifest`` last: a segment is whole in the bucket only when its manifest is there, and it is
visible to readers only once its COPY_SEGMENT_FINISHED metadata is written (remote_log_manager.py).
"""
from __future__ import annotations

import base64
import bisect
import json
import os
import struct
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from kafka_compat.configdef import BOOLEAN, HIGH, LOW, MEDIUM, PASSWORD, STRING, ConfigDef

# RemoteLogSegmentState ids
COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED = 0, 1, 2, 3
# RemotePartitionDeleteState ids
DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED, DELETE_PARTITION_FINISHED = 0, 1, 2

SUFFIXES = ("index", "timeindex", "snapshot", "leader-epoch-checkpoint", "txnindex", "log")
MANIFEST = "rsm-manifest"

RSM_CONFIG_DEF = (
    ConfigDef()
    .define("storage.s3.bucket.name", STRING, None, None, HIGH, "S3 bucket holding the segments.")
    .define("storage.s3.endpoint.url", STRING, None, None, LOW,
            "Endpoint of an S3-compatible store (SeaweedFS, MinIO, ...); unset for AWS.")
    .define("storage.s3.region", STRING, "us-east-1", None, MEDIUM, "Region of the bucket.")
    .define("storage.s3.path.style.access.enabled", BOOLEAN, None, None, LOW,
            "Path-style requests (bucket in the path) rather than virtual hosts.")
    .define("storage.aws.access.key.id", PASSWORD, None, None, MEDIUM, "Static credentials: the access key id.")
    .define("storage.aws.secret.access.key", PASSWORD, None, None, MEDIUM, "Static credentials: the secret.")
    .define("key.prefix", STRING, "", None, LOW, "Prefix of every object key.")
)


class RemoteStorageError(Exception):
    """The object store failed or refused (Kafka's RemoteStorageException)."""


def uuid_string(raw: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class RemoteLogSegmentMetadata:
    """One segment in remote storage, as RemoteLogSegmentMetadataRecord describes it."""

    topic: str
    topic_id: bytes
    partition: int
    segment_id: bytes
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_leader_epochs: dict[int, int]
    segment_size: int
    state: int = COPY_SEGMENT_STARTED
    txn_index_empty: bool = True
    broker_leader_epoch: int = -1
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, topic: str, topic_id: bytes, partition: int, **kwargs) -> "RemoteLogSegmentMetadata":
        return cls(topic, topic_id, partition, uuid.uuid4().bytes, **kwargs)


class _OffsetIndex:
    """A remote segment's offset index: sorted (relative offset, position) pairs, Kafka's 8-byte entries."""

    def __init__(self, data: bytes):
        count = len(data) // 8
        pairs = struct.unpack(f">{2 * count}i", data[:8 * count]) if count else ()
        offsets, positions = [], []
        for i in range(count):
            rel, pos = pairs[2 * i], pairs[2 * i + 1]
            if offsets and rel <= offsets[-1]:
                break          # the unused, zeroed tail of a preallocated index
            offsets.append(rel)
            positions.append(pos)
        self.offsets, self.positions = offsets, positions

    def position_for(self, relative: int) -> int:
        i = bisect.bisect_right(self.offsets, relative) - 1
        return self.positions[i] if i >= 0 else 0


class S3RemoteStorageManager:
    """copy / fetch / delete of segment files in one bucket (thread-safe: boto3 clients are)."""

    def __init__(self, props: dict[str, Any]):
        config = RSM_CONFIG_DEF.parse({k: v for k, v in props.items() if k in RSM_CONFIG_DEF})
        bucket = config["storage.s3.bucket.name"]
        if not bucket:
            raise ValueError("rsm.config.storage.s3.bucket.name must be set with remote.log.storage.system.enable")
        key_id, secret = config["storage.aws.access.key.id"], config["storage.aws.secret.access.key"]
        if (key_id is None) != (secret is None):
            raise ValueError("rsm.config.storage.aws.access.key.id and rsm.config.storage.aws.secret.access.key "
                             "must be defined together")
        import boto3
        from botocore.config import Config
        s3 = {}
        if config["storage.s3.path.style.access.enabled"] is not None:
            s3["addressing_style"] = "path" if config["storage.s3.path.style.access.enabled"] else "virtual"
        kwargs = {}
        if key_id is not None:
            kwargs = {"aws_access_key_id": key_id.value, "aws_secret_access_key": secret.value}
        self.bucket = bucket
        self.prefix = config["key.prefix"] or ""
        self._client = boto3.session.Session().client(
            "s3", endpoint_url=config["storage.s3.endpoint.url"], region_name=config["storage.s3.region"],
            config=Config(s3=s3, retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5,
                          read_timeout=30, max_pool_connections=20,
                          # checksums only where S3 requires them: the trailing-checksum (aws-chunked) uploads
                          # botocore makes of files otherwise stall on some S3-compatible servers (SeaweedFS)
                          request_checksum_calculation="when_required",
                          response_checksum_validation="when_required"), **kwargs)
        # no `Expect: 100-continue` on uploads of files: some S3-compatible servers (SeaweedFS) answer it in a way
        # urllib3 cannot parse, and the upload stalls
        from botocore.handlers import add_expect_header
        self._client.meta.events.unregister("before-call.s3", add_expect_header)
        self._indexes: dict[bytes, _OffsetIndex] = {}
        self._lock = threading.Lock()

    # -- keys ---------------------------------------------------------------------------
    def key(self, m: RemoteLogSegmentMetadata, suffix: str) -> str:
        return (f"{self.prefix}{m.topic}-{uuid_string(m.topic_id)}/{m.partition}/"
                f"{m.start_offset:020d}-{uuid_string(m.segment_id)}.{suffix}")

    def _call(self, what: str, fn, **kwargs):
        try:
            return fn(Bucket=self.bucket, **kwargs)
        except Exception as exc:          # botocore's ClientError, connection and timeout errors
            raise RemoteStorageError(f"{what} {kwargs.get('Key', '')}: {exc}") from exc

    # -- RemoteStorageManager -------------------------------------------------------------
    def copy_log_segment_data(self, m: RemoteLogSegmentMetadata, files: dict[str, str | bytes]) -> None:
        """Upload a segment's files (``files``: suffix -> path or bytes; a missing one goes up empty), the
        segment itself last but the manifest."""
        sizes = {}
        for suffix in SUFFIXES:
            body = files.get(suffix, b"")
            if isinstance(body, str):
                try:
                    with open(body, "rb") as f:
                        self._call("upload", self._client.put_object, Key=self.key(m, suffix), Body=f)
                    sizes[suffix] = os.path.getsize(body)
                    continue
                except FileNotFoundError:
                    body = b""
            self._call("upload", self._client.put_object, Key=self.key(m, suffix), Body=body)
            sizes[suffix] = len(body)
        manifest = {"start_offset": m.start_offset, "end_offset": m.end_offset, "sizes": sizes}
        self._call("upload", self._client.put_object, Key=self.key(m, MANIFEST), Body=json.dumps(manifest).encode())

    def fetch_index(self, m: RemoteLogSegmentMetadata, suffix: str) -> bytes:
        return self._call("fetch", self._client.get_object, Key=self.key(m, suffix))["Body"].read()

    def fetch_log_segment(self, m: RemoteLogSegmentMetadata, start: int, end: int | None = None) -> bytes:
        """Bytes [start, end) of the segment (to its end when ``end`` is None)."""
        if end is not None and end <= start:
            return b""
        rng = f"bytes={start}-" if end is None else f"bytes={start}-{end - 1}"
        return self._call("fetch", self._client.get_object, Key=self.key(m, "log"), Range=rng)["Body"].read()

    def position_for(self, m: RemoteLogSegmentMetadata, offset: int) -> int:
        """Where in the segment the last indexed batch at or before ``offset`` starts (the offset index,
        fetched once per segment and kept)."""
        with self._lock:
            index = self._indexes.get(m.segment_id)
        if index is None:
            index = _OffsetIndex(self.fetch_index(m, "index"))
            with self._lock:
                if len(self._indexes) > 1024:
                    self._indexes.clear()
                self._indexes[m.segment_id] = index
        return index.position_for(offset - m.start_offset)

    def delete_log_segment_data(self, m: RemoteLogSegmentMetadata) -> None:
        keys = [{"Key": self.key(m, s)} for s in (MANIFEST, *SUFFIXES)]
        result = self._call("delete", self._client.delete_objects, Delete={"Objects": keys, "Quiet": True})
        if result.get("Errors"):
            raise RemoteStorageError(f"delete {m.topic}-{m.partition} {m.start_offset}: {result['Errors'][:3]}")
        with self._lock:
            self._indexes.pop(m.segment_id, None)

    def close(self) -> None:
        self._client.close()
