"""ApiVersions: the table of what we implement, which every client reads first.

From v3 the answer also carries the features (KIP-584): the supported ranges and the finalized
levels with their epoch, from the broker's FeatureCache (server/features.py). As Kafka's
ApiVersionsResponse: below v4 a supported feature whose minimum is 0 is left out (older clients
cannot read it, KAFKA-17492), and a finalized level of 0 is never listed.

From v5 (KIP-1242) a client may name the cluster and the node it means to reach: both or neither, else
INVALID_REQUEST; when either is not this broker's, REBOOTSTRAP_REQUIRED, so a client whose bootstrap
address now leads to another cluster or node learns it before it sends anything else.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from ..protocol.errors import ErrorCode
from ..protocol.messages.api_versions import ApiVersionsResponse
from .features import SUPPORTED, FeatureCache
from .registry import handles

NO_NODE_ID = -1

# Kafka's rule for the client software name and version (ApiVersionsRequest.isValid, v3+).
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

_SUPPORTED_V4 = [ApiVersionsResponse.SupportedFeatureKey(name=n, min_version=r.min, max_version=r.max)
                 for n, r in SUPPORTED.items()]
_SUPPORTED_V3 = [f for f in _SUPPORTED_V4 if f.min_version > 0]


class ApiVersionsApi:
    def __init__(self, supported_versions: dict[int, tuple[int, int]], features: FeatureCache | None = None,
                 identity: Callable[[], tuple[str | None, int]] | None = None):
        """`identity`: () -> (cluster id, node id) of this broker, for v5's check (None: nothing is checked)."""
        self.set_supported_versions(supported_versions)
        self.features = features if features is not None else FeatureCache()
        self.identity = identity
        self._finalized: tuple = (None, [])       # (the FinalizedFeatures they were built from, their keys)

    def set_supported_versions(self, supported_versions: dict[int, tuple[int, int]]) -> None:
        """The table to advertise (a cluster member's holds the control APIs and its controller's too)."""
        self.api_keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                         for k, (lo, hi) in sorted(supported_versions.items())]

    def _finalized_keys(self, current) -> list:
        built, keys = self._finalized
        if built is not current:
            keys = [ApiVersionsResponse.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v)
                    for n, v in current.levels.items() if v]
            self._finalized = (current, keys)
        return keys

    @handles(18)
    def handle_api_versions(self, request):
        body = request.body
        if request.api_version >= 3 and not (SOFTWARE_NAME_VERSION.fullmatch(body.client_software_name or "")
                                             and SOFTWARE_NAME_VERSION.fullmatch(body.client_software_version or "")):
            # as Kafka: INVALID_REQUEST and no table; the client tells its user what it sent
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
        if request.api_version >= 5:
            error = self._check_target(body.cluster_id, body.node_id)
            if error:
                return ApiVersionsResponse(error_code=error, api_keys=[], throttle_time_ms=0)
        if request.api_version < 3:
            return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=self.api_keys, throttle_time_ms=0)
        if request.connection is not None:
            # who the client says it is: client telemetry (KIP-714) matches subscriptions on it
            request.connection.client_software = (body.client_software_name, body.client_software_version)
        current = self.features.current
        return ApiVersionsResponse(
            error_code=ErrorCode.NONE, api_keys=self.api_keys, throttle_time_ms=0,
            supported_features=_SUPPORTED_V4 if request.api_version >= 4 else _SUPPORTED_V3,
            finalized_features_epoch=current.epoch, finalized_features=self._finalized_keys(current))

    def _check_target(self, cluster_id: str | None, node_id: int) -> int:
        """ApiVersionsRequest.isValid's v5 rule, then KafkaApis' clusterIdOrNodeIdIsInvalid."""
        if (cluster_id is None) != (node_id == NO_NODE_ID):
            return ErrorCode.INVALID_REQUEST
        if cluster_id is None or self.identity is None:
            return ErrorCode.NONE
        ours, node = self.identity()
        return ErrorCode.NONE if (cluster_id, node_id) == (ours, node) else ErrorCode.REBOOTSTRAP_REQUIRED
