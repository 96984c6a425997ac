"""GetTelemetrySubscriptions and PushTelemetry (KIP-714): thin handlers over the ClientMetricsManager.

A client is matched by what it told the broker about itself: its client id (request header), its
software name and version (ApiVersions v3+) and its address. Neither API is authorized, as in Kafka.
"""
from __future__ import annotations

from ..protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsResponse
from ..protocol.messages.push_telemetry import PushTelemetryResponse
from .client_metrics_manager import ACCEPTED_COMPRESSION_TYPES, ClientMetricsManager
from .registry import handles


def client_labels(request) -> dict[str, str]:
    """The match parameters of the client that sent ``request`` (those it presented)."""
    conn = request.connection
    labels = {"client_id": request.client_id or ""}
    software = getattr(conn, "client_software", None)
    if software:
        labels["client_software_name"], labels["client_software_version"] = software
    peer = getattr(conn, "peer", None)
    if isinstance(peer, tuple) and len(peer) >= 2:
        labels["client_source_address"], labels["client_source_port"] = str(peer[0]), str(peer[1])
    return labels


class ClientTelemetryApi:
    def __init__(self, manager: ClientMetricsManager):
        self.manager = manager

    @handles(71)
    def handle_get_telemetry_subscriptions(self, request):
        code, inst = self.manager.get_subscriptions(request.body.client_instance_id, client_labels(request))
        if code:
            return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=code)
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=code, client_instance_id=inst.instance_id,
            subscription_id=inst.subscription_id, accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
            push_interval_ms=inst.push_interval_ms, telemetry_max_bytes=self.manager.telemetry_max_bytes,
            delta_temporality=True, requested_metrics=list(inst.metrics))

    @handles(72)
    def handle_push_telemetry(self, request):
        b = request.body
        code = self.manager.push(b.client_instance_id, client_labels(request), b.subscription_id, b.terminating,
                                 b.compression_type, b.metrics)
        return PushTelemetryResponse(throttle_time_ms=0, error_code=code)
