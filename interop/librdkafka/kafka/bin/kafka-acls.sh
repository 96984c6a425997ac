#!/usr/bin/env bash
# $KAFKA_PATH/bin/kafka-acls.sh for librdkafka's tests: see ../../kafka_acls.py.
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/../../kafka_acls.py" "$@"
