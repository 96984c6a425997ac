"""ApiVersions: the table of what we implement, which every client reads first."""
from __future__ import annotations

import re

from ..protocol.errors import ErrorCode
from ..protocol.messages.api_versions import ApiVersionsResponse
from .registry import handles

# Kafka's rule for the client software name and version (ApiVersionsRequest.isValid, v3+).
SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiVersionsApi:
    def __init__(self, supported_versions: dict[int, tuple[int, int]]):
        self.set_supported_versions(supported_versions)

    def set_supported_versions(self, supported_versions: dict[int, tuple[int, int]]) -> None:
        """The table to advertise (a cluster member's holds the control APIs and its controller's too)."""
        self.api_keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                         for k, (lo, hi) in sorted(supported_versions.items())]

    @handles(18)
    def handle_api_versions(self, request):
        body = request.body
        if request.api_version >= 3 and not (SOFTWARE_NAME_VERSION.fullmatch(body.client_software_name or "")
                                             and SOFTWARE_NAME_VERSION.fullmatch(body.client_software_version or "")):
            # as Kafka: INVALID_REQUEST and no table; the client tells its user what it sent
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
        if request.api_version >= 3 and request.connection is not None:
            # who the client says it is: client telemetry (KIP-714) matches subscriptions on it
            request.connection.client_software = (body.client_software_name, body.client_software_version)
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=self.api_keys, throttle_time_ms=0)
