"""What the topic handlers (CreateTopics, CreatePartitions, DeleteTopics, Alter/DescribeConfigs,
Metadata's auto-creation) ask of the broker's admin manager, in either mode.

A single node's LocalController answers at once; a ZooKeeper cluster's ZkAdminManager must talk to
ZooKeeper, which blocks, so its calls are coroutines (the ZooKeeper work runs in a thread) and it
says so with `asynchronous = True`. The handlers are written once, as coroutines that `await
resolved(...)` every admin call: a ZooKeeper broker returns that coroutine to KafkaApis, while a
single node runs it to the end on the spot with `run_now` (no call suspends, so nothing changes for
it). The methods both provide:

    create_topic(name, partitions=-1, replication_factor=-1, configs=None, validate_only=False[, assignments])
        -> an object with .topic_id (None when validate_only)
    delete_topic(name); create_partitions(name, count, validate_only=False[, assignments])
    set_topic_configs(name, configs, validate_only=False); topic_configs(name) -> dict
    log_config(topic) -> LogConfig (synchronous); check_configs(configs) (synchronous)

`assignments` (explicit replica placement) is passed to an asynchronous manager only: a single
node places every replica on itself.
"""
from __future__ import annotations

import inspect
from collections.abc import Coroutine
from typing import Any


def is_asynchronous(admin: Any) -> bool:
    return bool(getattr(admin, "asynchronous", False))


async def resolved(value: Any) -> Any:
    """`value`, awaited if it is awaitable."""
    return await value if inspect.isawaitable(value) else value


def run_now(coro: Coroutine) -> Any:
    """Run a coroutine that never suspends to its end, here; its result (or its exception)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("an admin call of a synchronous admin manager suspended")


def respond(admin: Any, coro: Coroutine) -> Any:
    """What a handler returns: the coroutine for an asynchronous admin manager, else its result now."""
    return coro if is_asynchronous(admin) else run_now(coro)
