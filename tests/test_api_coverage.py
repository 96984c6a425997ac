"""What a broker listener advertises, held against Kafka 4.4's: every API its broker listener serves
(our schemas are Kafka 4.4's, `listeners=broker`), at Kafka 4.4's highest version, except the five
that exist only for KRaft's own quorum. So at least Kafka 4.3's maxima too: 4.4 raised five of them
(ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3, StreamsGroupHeartbeat v1, StreamsGroupDescribe v1)
and lowered none.

The APIs still open are listed here with the issue that builds them; the test fails as soon as the
advertised set moves either way, so the list is kept true (issue 35's ApiVersions criterion).
"""
from __future__ import annotations

from kafka_compat.protocol.messages import APIS
from kafka_compat.server.broker import advertised_api_versions

KRAFT_QUORUM_ONLY = {55: "DescribeQuorum", 64: "UnregisterBroker", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
                     94: "UnregisterController"}

# api key -> (what is missing, the issue that builds it)
STILL_OPEN = {
    78: ("ShareFetch v2: KIP-1222's renew acknowledgements and record-limit acquisition", 34),
    79: ("ShareAcknowledge v2: KIP-1222's renew acknowledgements", 34),
}

# Kafka 4.3's highest versions of the APIs Kafka 4.4 raised: what is advertised never falls below them
KAFKA_4_3_MAXIMA = {18: 4, 28: 5, 42: 2, 88: 0, 89: 0}


def broker_listener_apis() -> dict[int, int]:
    """Kafka 4.4's broker-listener APIs with the highest version it advertises: one below the schema's where
    the schema marks its latest version unstable (InitProducerId v6), as unstable.api.versions.enable is off."""
    return {k: info.max_version - info.latest_unstable for k, info in APIS.items()
            if "broker" in info.listeners and k not in KRAFT_QUORUM_ONLY}


def test_every_broker_api_of_kafka_4_4_is_advertised_at_its_highest_version_but_the_open_ones():
    advertised = advertised_api_versions()
    short = {k for k, top in broker_listener_apis().items() if advertised.get(k, (0, -1))[1] != top}
    assert short == set(STILL_OPEN), {k: (APIS[k].name, advertised.get(k)) for k in short ^ set(STILL_OPEN)}


def test_kafka_4_4_raised_five_maxima_and_they_are_served():
    advertised = advertised_api_versions()
    for k, top in KAFKA_4_3_MAXIMA.items():
        assert APIS[k].max_version == top + 1, APIS[k].name
        assert advertised[k][1] == top + 1, APIS[k].name


def test_nothing_beyond_kafka_4_4_and_no_kraft_quorum_api_is_advertised():
    advertised = advertised_api_versions()
    assert not set(advertised) & set(KRAFT_QUORUM_ONLY)
    for k, (lo, hi) in advertised.items():
        assert hi <= APIS[k].max_version, APIS[k].name


def test_an_unstable_latest_version_is_advertised_only_with_unstable_api_versions_enable():
    from kafka_compat.server.kafka_config import BrokerConfig
    unstable = [k for k, info in APIS.items() if info.latest_unstable]
    assert unstable == [22]                                           # InitProducerId v6 (KIP-939)
    assert advertised_api_versions(BrokerConfig({}))[22] == (0, 5)
    assert advertised_api_versions(BrokerConfig({"unstable.api.versions.enable": "true"}))[22] == (0, 6)
