"""UpdateFeatures (57): finalize feature levels (KIP-584), answered as Kafka 4's controller answers.

ALTER on the cluster first (CLUSTER_AUTHORIZATION_FAILED). v0's AllowDowngrade is a safe downgrade
(as Kafka's UpdateFeaturesRequest reads it, and ZooKeeper-mode Kafka applied it); v1+ name the
UpgradeType. Either every update applies or none: the first refused one fails the request with its
error (INVALID_UPDATE_VERSION) and Kafka's message. On success v0 and v1 list a result per feature;
v2 has none. The work is the feature manager's: a single node's LocalFeatureManager, or a cluster's
ZkFeatureManager, which hands it to the active controller (NOT_CONTROLLER elsewhere).
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.update_features import UpdateFeaturesResponse
from .auth_helper import ALTER, NO_AUTHORIZER, AuthHelper
from .features import SAFE_DOWNGRADE, UPGRADE, FeatureUpdateError
from .registry import handles

FAILED_FOR_ALL = "The update failed for all features since the following feature had an error: "


def _failed(code: int, message: str | None) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=code, error_message=message, results=[])


class UpdateFeaturesApi:
    def __init__(self, manager, auth: AuthHelper = NO_AUTHORIZER):
        """`manager`: an object with `async update_features([(feature, level, upgrade type)], validate_only)`
        raising FeatureUpdateError or KafkaError."""
        self.manager = manager
        self.auth = auth

    @handles(57)
    async def handle_update_features(self, request):
        req = request.body
        if not self.auth.authorize_cluster(request, ALTER):
            return _failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message)
        if request.api_version == 0:
            updates = [(u.feature, u.max_version_level, SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE)
                       for u in req.feature_updates]
        else:
            updates = [(u.feature, u.max_version_level, u.upgrade_type) for u in req.feature_updates]
        validate_only = request.api_version >= 1 and req.validate_only
        try:
            await self.manager.update_features(updates, validate_only)
        except FeatureUpdateError as e:
            return _failed(ErrorCode.INVALID_UPDATE_VERSION, FAILED_FOR_ALL + str(e))
        except KafkaError as e:
            return _failed(e.error_code, e.message)
        results = []
        if request.api_version <= 1:
            results = [UpdateFeaturesResponse.UpdatableFeatureResult(feature=f, error_code=ErrorCode.NONE,
                                                                     error_message=ErrorCode.NONE.name)
                       for f, _, _ in updates]
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                      results=results)
