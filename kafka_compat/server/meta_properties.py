"""meta.properties, Kafka's record in each log dir of the cluster and node its data belongs to
(Kafka's MetaProperties): read, checked against this broker, written atomically.

A damaged file, or one naming another node, is refused with its path and never replaced: the data
may belong to another cluster. Version 1 is what a single node writes (KRaft's layout, node.id);
version 0 what a ZooKeeper-mode member writes (broker.id), as Kafka's ZooKeeper brokers did."""
from __future__ import annotations

import os
import re
import uuid
from base64 import urlsafe_b64encode

from kafka_compat.storage.checkpoint import write_atomically

from ..properties import parse_properties

FILE_NAME = "meta.properties"
_CLUSTER_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MAX_BYTES = 64 * 1024


class MetaPropertiesError(Exception):
    """A meta.properties this broker must not start on; the message says what to do."""


def new_cluster_id() -> str:
    """A random id as Kafka's Uuid.randomUuid().toString() prints it: URL-safe base64, no padding."""
    return urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read(directory: str, broker_id: int) -> dict[str, str]:
    """The directory's meta.properties, {} when it has none. It must name a cluster and this node."""
    path = os.path.join(directory, FILE_NAME)
    if not os.path.exists(path):
        return {}
    try:
        with open(path, "rb") as f:
            props = parse_properties(f.read(_MAX_BYTES).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise MetaPropertiesError(f"cannot read {path}: {e}; restore it, or remove it to give this data "
                                  f"directory a new cluster id") from None
    problems = []
    if not _CLUSTER_ID.fullmatch(props.get("cluster.id", "")):
        problems.append(f"no valid cluster.id ({props.get('cluster.id')!r})")
    node = props.get("node.id", props.get("broker.id"))
    if node is not None and node != str(broker_id):
        problems.append(f"node.id {node!r} does not match this broker's id {broker_id}")
    if problems:
        raise MetaPropertiesError(f"{path} is damaged or belongs elsewhere: {'; '.join(problems)}; restore it, "
                                  f"or remove it to give this data directory a new cluster id")
    return props


def write(directory: str, props: dict[str, str]) -> None:
    write_atomically(os.path.join(directory, FILE_NAME),
                     "".join(["#Written by kafka-compat\n", *(f"{k}={v}\n" for k, v in props.items())]))


def ensure_single_node(directory: str, broker_id: int) -> str:
    """The cluster id of a single node's data, drawn and written (version 1) on its first start."""
    props = read(directory, broker_id)
    if "cluster.id" not in props:
        props = {"version": "1", "cluster.id": new_cluster_id(), "node.id": str(broker_id)}
        write(directory, props)
    return props["cluster.id"]


def write_cluster_member(directories: list[str], broker_id: int, cluster_id: str) -> None:
    """Every log dir of a ZooKeeper-mode member names the cluster ZooKeeper holds (version 0)."""
    for directory in directories:
        write(directory, {"version": "0", "broker.id": str(broker_id), "cluster.id": cluster_id})
