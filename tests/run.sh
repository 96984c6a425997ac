#!/usr/bin/env bash
# The test command README gives: installs what the tests need on a fresh machine, then runs them.
#   bash tests/run.sh [pytest args...]
# Without arguments the whole suite runs as two pytest processes side by side: the JVM and Go
# suites (Spark 4.0 and 3.5, Kafka's own tools, the Go clients, Kafka Streams and Connect, the conformance
# suite beside Apache Kafka, the benchmark smoke runs with Kafka in them), which mostly wait on
# their JVMs and brokers, and everything else. With arguments, one pytest runs them as given.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE            # the generated codecs are large: cache their bytecode
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q -e '.[test]'
if [ -f interop/setup.sh ] && [ "${KAFKA_COMPAT_SKIP_SETUP:-}" != 1 ]; then
  bash interop/setup.sh
fi
if [ $# -gt 0 ]; then
  exec python3 -m pytest -q "$@"
fi

JVM_AND_GO=(interop/test_spark.py interop/test_spark35.py interop/test_kafka_tools.py interop/test_go_clients.py
            interop/test_kafka_streams.py interop/test_kafka_connect.py
            interop/test_conformance.py interop/test_conformance_groups.py interop/test_conformance_admin.py
            interop/test_conformance_cluster.py interop/test_conformance_security.py tests/test_bench_smoke.py
            tests/test_bench_scripts.py
            # moved from the main side to even the two out (.ci/durations.py: 40.6 against 21.2 minutes)
            interop/test_kafka_streams_protocol.py interop/test_transactions_v2.py interop/test_share_groups.py
            interop/test_cluster_clients.py)
out="$(mktemp -d)"
log="$out/jvm-and-go.log"
python3 -m pytest -q -rA -p no:cacheprovider --junitxml "$out/jvm-and-go.xml" "${JVM_AND_GO[@]}" >"$log" 2>&1 &
side=$!
ignore=()
for f in "${JVM_AND_GO[@]}"; do ignore+=(--ignore "$f"); done
status=0
python3 -m pytest -q --junitxml "$out/main.xml" "${ignore[@]}" || status=$?
side_status=0
wait "$side" || side_status=$?
echo
echo "=== the JVM and Go suites (${JVM_AND_GO[*]}), run beside the rest ==="
cat "$log"
python3 .ci/durations.py "$out/main.xml" "$out/jvm-and-go.xml" || true     # to balance the two sides
[ "$status" -eq 0 ] || exit "$status"
exit "$side_status"
