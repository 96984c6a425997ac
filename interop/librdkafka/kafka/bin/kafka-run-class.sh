#!/usr/bin/env bash
# $KAFKA_PATH/bin/kafka-run-class.sh for librdkafka's Java test helpers (its tests/java/run-class.sh puts
# their classes in $CLASSPATH): runs the class with the Java client jars interop/setup.sh keeps in .cache/jvm/java.
JARS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)/.cache/jvm/java"
exec java -cp "${CLASSPATH:+$CLASSPATH:}$JARS/*" "$@"
