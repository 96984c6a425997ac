"""The conformance scenarios on three brokers: our ZooKeeper cluster against Kafka 3.9's ZooKeeper cluster.

Kafka 3.9 is the last Kafka with ZooKeeper mode, and so the reference for our cluster's
answers (its znodes and controller are compared by interop/test_cluster.py). Each test
runs one scenario of the single-node modules through `cluster_pair`, connected to broker 0
of each cluster; topics are created with replication factor 3, every partition led by broker 0
on both sides (conformance.create). Groups and transactions are not compared here yet: their
coordinators sit on whichever broker leads their internal partition, and the pair talks to one broker.
"""
from __future__ import annotations

import test_conformance as single


def test_cluster_api_versions(cluster_pair):
    single.test_api_versions(cluster_pair)


def test_cluster_metadata(cluster_pair):
    single.test_metadata(cluster_pair)


def test_cluster_create_topics_errors(cluster_pair):
    single.test_create_topics_errors(cluster_pair)


def test_cluster_describe_topic_configs(cluster_pair):
    single.test_describe_topic_configs(cluster_pair)


def test_cluster_produce_errors(cluster_pair):
    single.test_produce_errors(cluster_pair)


def test_cluster_fetch(cluster_pair):
    single.test_fetch(cluster_pair)


def test_cluster_list_offsets(cluster_pair):
    single.test_list_offsets_sentinels_empty_topic(cluster_pair)
