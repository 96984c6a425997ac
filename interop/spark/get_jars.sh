#!/usr/bin/env bash
# Gathers Spark's Kafka connector jars into one directory for local runs of
# interop/test_spark.py and interop/spark/pipeline.py --jars, then prints the
# `export SPARK_KAFKA_JARS=...` line to use. Not run in CI; nothing it fetches
# goes into git (the default directory is under the ignored .cache/).
#
#     bash interop/spark/get_jars.sh [DEST]      # DEST defaults to .cache/spark-kafka-jars
#
# With Maven Central reachable, Spark fetches all of this itself:
#     spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0 ...
# Without it, the jars come from places we can reach:
#   spark-sql-kafka-0-10_2.13-4.0.0, spark-token-provider-kafka-0-10_2.13-4.0.0,
#   commons-pool2-2.12.0: the jars/ folder of the public GitHub repository
#   Nike-Inc/spark-expectations (a git dir named by $SPARK_EXPECTATIONS_GIT, or
#   a shallow clone made here);
#   kafka-clients 3.9.1 with lz4-java, snappy-java, zstd-jni: .cache/jvm/java/,
#   which interop/setup.sh fills.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:-$ROOT/.cache/spark-kafka-jars}"
CONNECTOR=(spark-sql-kafka-0-10_2.13-4.0.0 spark-token-provider-kafka-0-10_2.13-4.0.0 commons-pool2-2.12.0)
CLIENT=(kafka-clients lz4-java snappy-java zstd-jni)

say() { printf '[spark-jars] %s\n' "$*"; }
mkdir -p "$DEST"

missing=()
for j in "${CONNECTOR[@]}"; do [ -s "$DEST/$j.jar" ] || missing+=("$j"); done
if [ ${#missing[@]} -gt 0 ]; then
    git_dir="${SPARK_EXPECTATIONS_GIT:-}"
    if [ -z "$git_dir" ]; then
        git_dir="$ROOT/.cache/spark-expectations.git"
        if [ ! -d "$git_dir" ]; then
            say "cloning Nike-Inc/spark-expectations (bare, shallow) into $git_dir"
            git clone -q --bare --depth 1 https://github.com/Nike-Inc/spark-expectations.git "$git_dir"
        fi
    fi
    for j in "${missing[@]}"; do
        say "extracting jars/$j.jar"
        git --git-dir="$git_dir" show "HEAD:jars/$j.jar" > "$DEST/$j.jar.part"
        mv "$DEST/$j.jar.part" "$DEST/$j.jar"
    done
fi

[ -f "$ROOT/.cache/jvm/java/kafka-clients.jar" ] || bash "$ROOT/interop/setup.sh"
for j in "${CLIENT[@]}"; do cp -u "$ROOT/.cache/jvm/java/$j.jar" "$DEST/"; done

# a jar that is not a zip (an LFS pointer, a truncated download) fails loudly here, not inside Spark
for f in "$DEST"/*.jar; do
    python3 -c 'import sys, zipfile; sys.exit(not zipfile.is_zipfile(sys.argv[1]))' "$f" \
        || { say "not a jar: $f"; exit 1; }
done
say "jars in $DEST:"
ls -1 "$DEST" | sed 's/^/  /'
echo "export SPARK_KAFKA_JARS=$DEST"
