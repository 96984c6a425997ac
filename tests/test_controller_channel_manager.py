"""The controller's per-broker senders: idle only once every queued request is answered (a controller shutting
down its own broker waits for that, so the UpdateMetadata naming the new leaders reaches the other brokers)."""
from __future__ import annotations

import concurrent.futures
import time

from kafka_compat.controller.controller_channel_manager import ControllerChannelManager
from kafka_compat.zk.zk_data import BrokerInfo


def until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_channel_is_idle_only_once_every_broker_answered_what_was_queued():
    answers: dict[int, list[concurrent.futures.Future]] = {1: [], 2: []}

    def send(broker, api_key, api_version, body):
        future = concurrent.futures.Future()
        answers[broker.id].append(future)
        return future

    channel = ControllerChannelManager(0, send)
    channel.startup([BrokerInfo(1, ()), BrokerInfo(2, ())])
    try:
        idle_at_start = channel.idle()
        handled = []
        for broker_id in (1, 2):
            channel.send_request(broker_id, 6, 8, "update", callback=handled.append)
            channel.send_request(broker_id, 6, 8, "update again", callback=handled.append)
        assert until(lambda: len(answers[1]) == 1 and len(answers[2]) == 1)
        answers[1][0].set_result("ok 1")
        assert until(lambda: len(answers[1]) == 2)
        waiting_for_both = not channel.idle()
        answers[1][1].set_result("ok 1 again")
        answers[2][0].set_result("ok 2")
        assert until(lambda: len(answers[2]) == 2)
        waiting_for_one = not channel.idle()
        answers[2][1].set_result("ok 2 again")
        assert until(channel.idle)
    finally:
        channel.shutdown()
    assert idle_at_start and waiting_for_both and waiting_for_one
    assert sorted(handled) == ["ok 1", "ok 1 again", "ok 2", "ok 2 again"]
