"""kafka-compat: a Kafka wire-protocol broker in Python."""
