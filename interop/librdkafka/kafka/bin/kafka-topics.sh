#!/usr/bin/env bash
# $KAFKA_PATH/bin/kafka-topics.sh for librdkafka's tests: see ../../kafka_topics.py.
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/../../kafka_topics.py" "$@"
