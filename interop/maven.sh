#!/usr/bin/env bash
# Resolves the JVM peers from Maven Central into the ignored cache, one directory a set:
#     bash interop/maven.sh [SET...]          # no SET: every set below
# Each set is a list of coordinates. A throw-away pom naming them is written to
# .cache/maven/SET/pom.xml, and Maven copies their runtime dependencies, versions
# stripped from the file names, into .cache/jvm/SET/. Maven's own repository is
# .cache/m2, so a second run resolves nothing and takes a second or two a set.
# The reference broker (interop/reference.py), the tools, Streams, Connect, the Java
# clients and Spark's connector all come from here. Nothing it fetches goes into git.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
M2="$CACHE/m2"

# Pins: the newest 4.x on Maven Central, and 3.9.x for the older-client path and
# the ZooKeeper-mode reference broker. Spark's connector follows pyspark's version.
KAFKA=4.4.0
KAFKA3=3.9.1
# Spark 4.0.0: Maven Central lacks spark-token-provider-kafka-0-10_2.13 at 4.0.1 and 4.0.2.
SPARK=4.0.0
# Spark 3.5 (Scala 2.12, as pyspark 3.5's jars are): 3.5.7 is the newest 3.5.x connector on Maven
# Central; pyspark 3.5.8 and 3.5.9 are on PyPI, but their spark-sql-kafka-0-10_2.12 and
# spark-token-provider-kafka-0-10_2.12 are not ("Could not find artifact
# org.apache.spark:spark-sql-kafka-0-10_2.12:jar:3.5.8"), so pyspark is pinned to 3.5.7 too.
SPARK35=3.5.7
# Maven Central has no connect-file 4.4.0 ("Could not find artifact org.apache.kafka:connect-file:jar:4.4.0"):
# Connect's file connectors come from the newest release that has them.
CONNECT_FILE=4.3.1
SLF4J=2.0.17
LOG4J=2.24.3

declare -A SETS=(
    # the Java client, 3.9.x and 4.x (interop/java, interop/java4, interop/java_txn)
    [java]="org.apache.kafka:kafka-clients:$KAFKA3"
    [java4]="org.apache.kafka:kafka-clients:$KAFKA"
    # the KRaft reference broker with Kafka's tools, logging through log4j2 as Kafka 4 ships it
    [kafka]="org.apache.kafka:kafka_2.13:$KAFKA org.apache.kafka:kafka-tools:$KAFKA org.apache.kafka:kafka-storage:$KAFKA org.slf4j:slf4j-api:$SLF4J
             org.apache.logging.log4j:log4j-slf4j2-impl:$LOG4J org.apache.logging.log4j:log4j-core:$LOG4J"
    # the ZooKeeper-mode reference broker (Kafka 3.9 still had it), on Debian's ZooKeeper
    [kafka3]="org.apache.kafka:kafka_2.13:$KAFKA3 org.slf4j:slf4j-reload4j:1.7.36"
    # Kafka Streams and Kafka Connect 4.x
    [streams]="org.apache.kafka:kafka-streams:$KAFKA org.slf4j:slf4j-api:$SLF4J org.slf4j:slf4j-simple:$SLF4J"
    [connect]="org.apache.kafka:connect-runtime:$KAFKA org.apache.kafka:connect-file:$CONNECT_FILE
               org.apache.kafka:connect-json:$KAFKA org.slf4j:slf4j-api:$SLF4J org.slf4j:slf4j-simple:$SLF4J"
    # Spark Structured Streaming's Kafka source and sink, as --packages would fetch them
    [spark]="org.apache.spark:spark-sql-kafka-0-10_2.13:$SPARK"
    # the same for Spark 3.5 (driven from its own venv, .cache/venv/spark35: see interop/setup.sh)
    [spark35]="org.apache.spark:spark-sql-kafka-0-10_2.12:$SPARK35"
)

say() { printf '[maven] %s\n' "$*"; }

# Some poms (Spark's) declare repositories of their own that this machine cannot reach; a
# transfer error there fails the whole build. Point every repository but central at an empty
# local folder, so that a miss there is only a miss and Maven goes on to central.
SETTINGS="$CACHE/maven/settings.xml"
mkdir -p "$CACHE/maven"
cat >"$SETTINGS" <<EOF
<settings><mirrors><mirror>
  <id>central-only</id><mirrorOf>*,!central</mirrorOf><url>file://$CACHE/maven/no-repository</url>
</mirror></mirrors></settings>
EOF

pom() {    # pom NAME COORD... : a pom whose dependencies are the coordinates
    local name=$1; shift
    printf '<project xmlns="http://maven.apache.org/POM/4.0.0">\n  <modelVersion>4.0.0</modelVersion>\n'
    printf '  <groupId>kafka-compat.cache</groupId><artifactId>%s</artifactId><version>1</version>\n' "$name"
    printf '  <packaging>pom</packaging>\n  <dependencies>\n'
    local c g a v
    for c in "$@"; do
        IFS=: read -r g a v <<<"$c"
        printf '    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>\n' \
            "$g" "$a" "$v"
    done
    printf '  </dependencies>\n</project>\n'
}

resolve() {    # resolve NAME: fill .cache/jvm/NAME unless its stamp says it holds these coordinates
    local name=$1 coords
    read -r -a coords <<<"$(echo ${SETS[$name]})"
    local dir="$CACHE/jvm/$name" work="$CACHE/maven/$name"
    local want="${coords[*]}"
    if [ -f "$dir/.coords" ] && [ "$(cat "$dir/.coords")" = "$want" ]; then
        return 0
    fi
    say "resolving $name: $want"
    mkdir -p "$work"
    pom "$name" "${coords[@]}" >"$work/pom.xml"
    rm -rf "$dir.part"
    mvn -q -B -Dstyle.color=never -s "$SETTINGS" -f "$work/pom.xml" -Dmaven.repo.local="$M2" \
        dependency:copy-dependencies -DincludeScope=runtime -Dmdep.stripVersion=true \
        -DoutputDirectory="$dir.part"
    echo "$want" >"$dir.part/.coords"
    rm -rf "$dir"
    mv "$dir.part" "$dir"
}

command -v mvn >/dev/null 2>&1 || { say "no mvn: skipping the JVM peers"; exit 0; }
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(java java4 kafka kafka3 streams connect spark spark35)
for n in "${names[@]}"; do
    [ -n "${SETS[$n]:-}" ] || { say "no set named $n"; exit 2; }
    resolve "$n"
done
