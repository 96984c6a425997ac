"""ApiVersions: the table of what we implement, which every client reads first."""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.api_versions import ApiVersionsResponse
from .registry import handles


class ApiVersionsApi:
    def __init__(self, supported_versions: dict[int, tuple[int, int]]):
        self.set_supported_versions(supported_versions)

    def set_supported_versions(self, supported_versions: dict[int, tuple[int, int]]) -> None:
        """The table to advertise (a cluster member's holds the control APIs and its controller's too)."""
        self.api_keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                         for k, (lo, hi) in sorted(supported_versions.items())]

    @handles(18)
    def handle_api_versions(self, request):
        # Kafka checks the client software name and version only from v3 on; we accept any.
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=self.api_keys, throttle_time_ms=0)
