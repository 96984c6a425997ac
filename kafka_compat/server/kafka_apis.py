"""KafkaApis: the dispatch table from API key to handler, built from handler objects.

The composition root builds one object per API family with the collaborators it
needs (ReplicaManager, MetadataCache, coordinators) and hands them here; this
module only routes a decoded request to the method that answers it.
"""
from __future__ import annotations

from ..protocol.frames import Request
from ..protocol.messages import APIS
from .registry import CloseConnection, Handler, marked_handlers


def stable_max(api_key: int, max_version: int, unstable_api_versions: bool) -> int:
    """Kafka's unstable.api.versions.enable: an API whose schema marks its latest version unstable is
    served and advertised up to the one before, unless the setting is on (as Kafka's ApiVersionManager)."""
    info = APIS.get(api_key)
    if not unstable_api_versions and info is not None and info.latest_unstable and max_version >= info.max_version:
        return info.max_version - 1
    return max_version


class KafkaApis:
    def __init__(self, handler_objects, unstable_api_versions: bool = False) -> None:
        self.handlers: dict[int, Handler] = {}
        for obj in handler_objects:
            for name, mark in marked_handlers(type(obj)):
                if mark.api_key in self.handlers:
                    raise ValueError(f"API key {mark.api_key} is handled twice")
                self.handlers[mark.api_key] = Handler(
                    mark.api_key, mark.min_version, stable_max(mark.api_key, mark.max_version, unstable_api_versions),
                    getattr(obj, name))

    def supported_versions(self) -> dict[int, tuple[int, int]]:
        return {k: (h.min_version, h.max_version) for k, h in sorted(self.handlers.items())}

    def handle(self, request: Request, connection):
        """The response body, an awaitable of it, or None (no response: acks=0, or the connection closed)."""
        request.connection = connection
        try:
            return self.handlers[request.api_key].fn(request)
        except CloseConnection:
            connection.close()
            return None


def supported_versions(handler_classes, unstable_api_versions: bool = False) -> dict[int, tuple[int, int]]:
    """The table ApiVersions advertises, from the handler classes alone."""
    out = {}
    for cls in handler_classes:
        for _, mark in marked_handlers(cls):
            out[mark.api_key] = (mark.min_version, stable_max(mark.api_key, mark.max_version, unstable_api_versions))
    return dict(sorted(out.items()))
