"""Feature versioning (KIP-584): the one home of what this broker supports and what is finalized.

Kafka's `server-common` `Feature`, `MetadataVersion`, `TransactionVersion`, `GroupVersion`,
`ShareVersion` and `StreamsVersion` name the features and their levels; here each is supported
only up to what kafka-compat builds:

| feature               | supported | default for a new cluster | Kafka 4.4 supports (default) |
| --------------------- | --------- | ------------------------- | ---------------------------- |
| `metadata.version`    | 7–33      | 33 (4.4-IV2)              | 7–33 (33)                    |
| `transaction.version` | 0–2       | 2                         | 0–2 (2)                      |
| `group.version`       | 0–1       | 1                         | 0–1 (1)                      |
| `share.version`       | 0–1       | 1                         | 0–2 (2)                      |
| `streams.version`     | 0–1       | 1                         | 0–1 (1)                      |

`kraft.version` and `eligible.leader.replicas.version` are KRaft's own and are not advertised.

Finalized levels are Kafka's FinalizedFeatureCache: `FeatureCache.finalized_level(name)` is what the
protocols gate on (group.version 0 turns ConsumerGroupHeartbeat/Describe off, share.version 0 the share
group APIs; transactions v2 and Streams groups will ask for theirs). A level of 0 means off and is not
listed, as Kafka lists none at 0.
Where they are kept: in a cluster the `/feature` znode (Kafka's ZooKeeper-mode JSON, version 2, the epoch
being the znode's version); on a single node `finalized-features.json` in the first log dir, the same JSON
with the epoch beside it. `validate_update` is Kafka's FeatureControlManager.updateFeatures, so the
controller of either answers UpdateFeatures with Kafka's errors and messages.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple

from ..json_file import write_json

log = logging.getLogger(__name__)

METADATA_VERSION = "metadata.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"

# MetadataVersion: level -> (release, did the metadata change at this level). Kafka 4's minimum is
# 3.3-IV3 (7); our schemas are Kafka 4.4's, whose level is 4.4-IV2 (33). Of Kafka 4.4's levels, 4.4-IV0 (31)
# changes no metadata (it bootstraps share.version 2, which stays capped below); 4.4-IV1 (32) lets ACL hosts be
# CIDR networks (security/authorizer.py); 4.4-IV2 (33) gates KRaft's controller unregistration
# (UnregisterController), which has no counterpart without KRaft controllers, as 3.7-IV0's registration.
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False), 10: ("3.5-IV1", False),
    11: ("3.5-IV2", True), 12: ("3.6-IV0", False), 13: ("3.6-IV1", True), 14: ("3.6-IV2", True),
    15: ("3.7-IV0", True), 16: ("3.7-IV1", False), 17: ("3.7-IV2", True), 18: ("3.7-IV3", False),
    19: ("3.7-IV4", False), 20: ("3.8-IV0", False), 21: ("3.9-IV0", False), 22: ("4.0-IV0", False),
    23: ("4.0-IV1", True), 24: ("4.0-IV2", False), 25: ("4.0-IV3", False), 26: ("4.1-IV0", False),
    27: ("4.1-IV1", False), 28: ("4.2-IV0", False), 29: ("4.2-IV1", False), 30: ("4.3-IV0", True),
    31: ("4.4-IV0", False), 32: ("4.4-IV1", True), 33: ("4.4-IV2", True),
}
MINIMUM_METADATA_VERSION = min(METADATA_VERSIONS)
LATEST_METADATA_VERSION = max(METADATA_VERSIONS)


class VersionRange(NamedTuple):
    min: int
    max: int

    def __str__(self) -> str:
        return f"{self.min}-{self.max}"


# What this broker supports (BrokerFeatures.supportedFeatures), advertised in ApiVersions v3+.
SUPPORTED: dict[str, VersionRange] = {
    METADATA_VERSION: VersionRange(MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION),
    TRANSACTION_VERSION: VersionRange(0, 2),     # 1: flexible records; 2: transactions v2 (KIP-890 part 2)
    GROUP_VERSION: VersionRange(0, 1),           # 1: KIP-848 consumer groups
    SHARE_VERSION: VersionRange(0, 1),           # 1: share groups (KIP-932); 2 is KIP-1222's ShareFetch v2
    STREAMS_VERSION: VersionRange(0, 1),         # 1: Streams groups (KIP-1071)
}

# What a new cluster finalizes: Kafka's Feature.defaultLevel at the latest metadata.version, capped at
# what is built (Kafka 4.4 would finalize share.version 2 too).
DEFAULTS: dict[str, int] = {
    METADATA_VERSION: LATEST_METADATA_VERSION,
    TRANSACTION_VERSION: 2,
    GROUP_VERSION: 1,
    SHARE_VERSION: 1,
    STREAMS_VERSION: 1,
}

# FeatureUpdate.UpgradeType's codes on the wire (UpdateFeatures v1+)
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
UPGRADE_TYPES = (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE)


def finalized_levels(stored: Mapping[str, int] | None) -> dict[str, int]:
    """The levels in force: the stored ones, or the defaults while nothing has been finalized yet.
    A feature absent from a stored map is at 0 (Kafka removes a feature finalized to 0)."""
    if stored is None:
        return {name: level for name, level in DEFAULTS.items() if level}
    return {name: level for name, level in stored.items() if level}


def incompatible(levels: Mapping[str, int]) -> dict[str, int]:
    """The finalized levels this broker cannot serve (Kafka's BrokerFeatures.incompatibleFeatures): a level
    outside its supported range; a feature it does not know at all is left to the broker that set it."""
    return {n: v for n, v in levels.items() if n in SUPPORTED and not SUPPORTED[n].min <= v <= SUPPORTED[n].max}


class FinalizedFeatures(NamedTuple):
    """Finalized levels (each above 0) and their epoch (-1: nothing finalized yet, the defaults apply)."""
    levels: Mapping[str, int]
    epoch: int


class FeatureCache:
    """Kafka's FinalizedFeatureCache: the levels a broker acts on, replaced whole on each change.

    Readers take `current` (one attribute read); `finalized_level(name)` is the gate the protocols use.
    Listeners (`add_listener(fn)`, fn(FinalizedFeatures)) are called after each change, on the thread
    that made it."""

    def __init__(self, stored: Mapping[str, int] | None = None, epoch: int = -1):
        self.current = FinalizedFeatures(finalized_levels(stored), epoch)
        self._listeners: list[Callable[[FinalizedFeatures], None]] = []
        self._changed = threading.Condition()

    def finalized_level(self, name: str) -> int:
        """The finalized level of a feature: 0 when it is off or unknown."""
        return self.current.levels.get(name, 0)

    @property
    def epoch(self) -> int:
        return self.current.epoch

    def add_listener(self, fn: Callable[[FinalizedFeatures], None]) -> None:
        self._listeners.append(fn)

    def update(self, stored: Mapping[str, int] | None, epoch: int) -> None:
        """New finalized levels (None: none finalized, the defaults apply). An older epoch than the one
        held is ignored (a watch firing late), unless the store went away (epoch -1)."""
        if epoch != -1 and epoch < self.current.epoch:
            return
        new = FinalizedFeatures(finalized_levels(stored), epoch)
        unsupported = incompatible(new.levels)
        if unsupported:
            # Kafka's broker exits on an incompatible finalized feature; we go on with what it says, loudly
            log.error("finalized features %s are outside what this broker supports (%s)", unsupported,
                      {n: str(SUPPORTED[n]) for n in unsupported})
        with self._changed:
            self.current = new
            self._changed.notify_all()
        for fn in list(self._listeners):
            try:
                fn(new)
            except Exception:
                log.exception("feature change listener failed")

    def wait_for_epoch(self, epoch: int, timeout_s: float) -> bool:
        """Block until the cache holds `epoch` or a later one (a thread, never the event loop)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.current.epoch >= epoch, timeout_s)


# ---------------------------------------------------------------------------------------- updates

class FeatureUpdateError(Exception):
    """An update refused: Kafka's INVALID_UPDATE_VERSION with its message."""


def _invalid(feature: str, level: int, why: str) -> FeatureUpdateError:
    return FeatureUpdateError(f"Invalid update version {level} for feature {feature}. {why}")


def _not_supported(level: int, what: str, supported: VersionRange | None) -> str | None:
    """QuorumFeatures.reasonNotSupported: None when `what` supports `level`."""
    supported = supported or VersionRange(0, 0)
    if supported.min <= level <= supported.max:
        return None
    if supported.max == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {supported}"


def metadata_changed(a: int, b: int) -> bool:
    """MetadataVersion.checkIfMetadataChanged: some level in (low, high] changed the metadata."""
    low, high = min(a, b), max(a, b)
    return any(METADATA_VERSIONS.get(v, ("", True))[1] for v in range(low + 1, high + 1))


def validate_update(current: Mapping[str, int], updates: list[tuple[str, int, int]], node_id: int,
                    brokers: Mapping[int, Mapping[str, VersionRange]] | None = None) -> dict[str, int]:
    """Kafka's FeatureControlManager.updateFeatures: the levels after `updates`, [(feature, level,
    upgrade type)] in request order, or FeatureUpdateError for the first one refused (then none applies).
    `current`: the finalized levels (metadata.version included); `brokers`: each other broker's supported
    features, from its registration (a feature a broker lacks is supported there only at 0)."""
    proposed = dict(current)
    proposed.update({f: level for f, level, _ in updates})
    result = dict(current)
    for feature, level, upgrade_type in updates:
        if upgrade_type not in UPGRADE_TYPES:
            raise _invalid(feature, level, "The controller does not support the given upgrade type.")
        now = current.get(feature, 0)
        if level < 0:
            raise _invalid(feature, level, "A feature version cannot be less than 0.")
        reason = _not_supported(level, f"Local controller {node_id}", SUPPORTED.get(feature))
        for broker_id, supported in sorted((brokers or {}).items()):
            if reason is None and broker_id != node_id:
                reason = _not_supported(level, f"Broker {broker_id}", supported.get(feature))
        if reason is not None:
            raise _invalid(feature, level, reason)
        if level < now and upgrade_type == UPGRADE:
            raise _invalid(feature, level, "Can't downgrade the version of this feature without setting the "
                                           "upgrade type to either safe or unsafe downgrade.")
        if level > now and upgrade_type != UPGRADE:
            raise _invalid(feature, level, "Can't downgrade to a newer version.")
        if feature == METADATA_VERSION:
            if level < now and metadata_changed(now, level):
                why = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type == UNSAFE_DOWNGRADE
                       else "Refusing to perform the requested downgrade because it might delete metadata "
                            "information.")
                raise FeatureUpdateError(f"Unsupported metadata.version downgrade from {now} to {level}. {why}")
        elif feature not in SUPPORTED:
            raise _invalid(feature, level, f"Feature {feature} not found.")
        elif level >= 1 and proposed.get(METADATA_VERSION, 0) < MINIMUM_METADATA_VERSION:
            raise _invalid(feature, level, f"{feature} could not be set to {level} because it depends on "
                                           f"metadata.version={MINIMUM_METADATA_VERSION} "
                                           f"({METADATA_VERSIONS[MINIMUM_METADATA_VERSION][0]})")
        result[feature] = level
    return {f: v for f, v in result.items() if v}


# ----------------------------------------------------------------------------------- single node

FEATURES_FILE = "finalized-features.json"


class LocalFeatureStore:
    """A single node's finalized features: `finalized-features.json` in the first log dir, the /feature
    znode's JSON (version 2, status enabled) with the epoch beside it, replaced atomically (temporary
    file, fsync, rename, fsync of the directory)."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, FEATURES_FILE)

    def read(self) -> tuple[dict[str, int] | None, int]:
        """(levels, epoch); (None, -1) when nothing was written yet. A damaged file is an error: the
        broker must not run on levels it cannot know."""
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return None, -1
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read {self.path}: {e}") from e
        try:
            levels = {str(n): int(v["max_version_level"]) for n, v in data["features"].items()}
            epoch = int(data["epoch"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"{self.path} is damaged: {e!r}") from e
        return levels, epoch

    def write(self, levels: Mapping[str, int], epoch: int) -> None:
        write_json(self.path, {"version": 2, "status": 1, "epoch": epoch, "features": {
            n: {"max_version_level": v} for n, v in sorted(levels.items()) if v}}, 0o644)


class LocalFeatureManager:
    """A single node is its own controller: UpdateFeatures validates, writes the file, then the cache."""

    def __init__(self, store: LocalFeatureStore, cache: FeatureCache, node_id: int):
        self.store = store
        self.cache = cache
        self.node_id = node_id
        self._lock = threading.Lock()

    def startup(self) -> None:
        """Load the finalized levels; a new data directory finalizes the defaults (as formatting does)."""
        levels, epoch = self.store.read()
        if levels is None:
            levels, epoch = dict(DEFAULTS), 0
            self.store.write(levels, epoch)
        unsupported = incompatible(levels)
        if unsupported:     # as Kafka's broker, which will not run with features it cannot serve
            raise ValueError(f"{self.store.path} finalizes {unsupported}, which this broker does not support "
                             f"({ {n: str(SUPPORTED[n]) for n in unsupported} }); downgrade them with the broker "
                             f"that finalized them first")
        self.cache.update(levels, epoch)

    async def update_features(self, updates: list[tuple[str, int, int]], validate_only: bool) -> None:
        """Apply (or with validate_only only check) the updates; FeatureUpdateError when refused."""
        await asyncio.to_thread(self._update, updates, validate_only)

    def _update(self, updates: list[tuple[str, int, int]], validate_only: bool) -> None:
        with self._lock:
            current = {METADATA_VERSION: LATEST_METADATA_VERSION, **self.cache.current.levels}
            levels = validate_update(current, updates, self.node_id)
            if validate_only:
                return
            epoch = self.cache.epoch + 1
            self.store.write(levels, epoch)
            self.cache.update(levels, epoch)
