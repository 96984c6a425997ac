"""Streams groups (KIP-1071): Kafka Streams' own group protocol, with the task assignment on the broker."""
