#!/usr/bin/env bash
# librdkafka's own broker test suite (tests 0000-0999, quick mode) against a
# fresh kafka-compat broker.
#
# Builds the test runner from Debian's librdkafka source package (fetched with
# `apt-get source` into .cache/librdkafka, never committed; the build is kept
# there so a rerun only runs the tests), starts our broker on a free loopback
# port with the configuration the suite's "default" scenario expects, and runs
# every broker test not named in skip.txt. Prints one line per test and a
# closing "N passed, N failed, N skipped" line; exits non-zero when a test
# outside skip.txt fails.
#
#     bash interop/librdkafka/run.sh              # the whole suite
#     TESTS=0012 bash interop/librdkafka/run.sh   # one test (librdkafka's TESTS)
#
# Two passes, as the suite's scenarios/ ask: "default" (topics auto-created) and
# "noautocreate", each against a fresh broker with Kafka's ACL authorizer on
# (allow.everyone.if.no.acl.found=true, as a trivup cluster with ACLs runs), and a
# third, "sasl_ssl", where the broker has only a SASL_SSL listener asking for
# client certificates and the suite's SSL and SASL tests (and a few plain ones)
# log in with SCRAM-SHA-512 (security_setup.py makes the certificates and the
# SSL_* files trivup would). Tests that shell out to Kafka's kafka-topics.sh and
# kafka-acls.sh get KAFKA_PATH=interop/librdkafka/kafka, whose bin/ does the same
# over the Admin API (kafka_topics.py, kafka_acls.py).
#
# The tests that need several brokers (CLUSTER_TESTS: replication factor 3,
# transactions across brokers) run only in a last mode, "cluster": against
# `kafka-compat cluster` (ZooKeeper and three brokers), one fresh cluster per
# scenario they belong to. 0098's Java producer runs through KAFKA_PATH's
# bin/kafka-run-class.sh with the Java client jars interop/setup.sh fetched.
#
#     MODE=cluster bash interop/librdkafka/run.sh  # only the cluster mode
#     MODE=single bash interop/librdkafka/run.sh   # only the single-broker passes
#
# Environment: PARALLEL (concurrent tests, default 3), TEST_KAFKA_VERSION (the
# broker version the suite assumes when deciding what to test, default 3.9.1),
# KEEP=1 keeps the run directory (broker log, runner log, report).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="$ROOT/.cache/librdkafka"
PYTHON="${PYTHON:-python3}"
PARALLEL="${PARALLEL:-3}"
export TEST_KAFKA_VERSION="${TEST_KAFKA_VERSION:-3.9.1}"
export DEBIAN_FRONTEND=noninteractive

say() { printf '[librdkafka] %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- source: Debian's librdkafka source package -------------------------------
enable_deb_src() {
    # deb822 sources (Debian 12+) or a one-line sources.list: add the deb-src twin.
    if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return
    fi
    say "enabling deb-src"
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        sed -n 's/^Types: deb$/Types: deb-src/; p' "$f" \
            | as_root tee "/etc/apt/sources.list.d/kafka-compat-src-$(basename "$f")" >/dev/null
    done
    if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list \
            | as_root tee /etc/apt/sources.list.d/kafka-compat-src.list >/dev/null
    fi
    as_root apt-get update -qq
}

src_dir() { find "$CACHE" -maxdepth 1 -type d -name 'librdkafka-*' | sort | tail -n1; }

SRC="$(src_dir 2>/dev/null || true)"
if [ -z "$SRC" ]; then
    enable_deb_src
    mkdir -p "$CACHE"
    say "apt-get source librdkafka"
    (cd "$CACHE" && apt-get source -qq librdkafka >/dev/null 2>&1) \
        || (cd "$CACHE" && apt-get source librdkafka)
    SRC="$(src_dir)"
fi
TESTDIR="$SRC/tests"

# --- build deps (the source package's Build-Depends the tests need) ------------
BUILD_DEPS=(gcc g++ make pkg-config liblz4-dev libzstd-dev libssl-dev zlib1g-dev rapidjson-dev)
missing=()
for p in "${BUILD_DEPS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- build: the library and tests/test-runner, once ---------------------------
# The stamp names what the build was configured with, so a change here rebuilds.
BUILD_ID="configure --no-download --disable-gssapi --disable-curl; rapidjson"
if [ ! -x "$TESTDIR/test-runner" ] || [ "$(cat "$SRC/.kafka-compat-build" 2>/dev/null)" != "$BUILD_ID" ]; then
    say "building $(basename "$SRC") and its test runner (once; cached in .cache/)"
    start=$(date +%s)
    (
        cd "$SRC"
        rm -f tests/test-runner
        # No SASL/GSSAPI nor libcurl (OIDC): those tests are in skip.txt.
        ./configure --no-download --disable-gssapi --disable-curl >build.log 2>&1
        make -j"$(nproc)" libs >>build.log 2>&1
        make -C tests -j"$(nproc)" test-runner >>build.log 2>&1
    ) || { tail -n 40 "$SRC/build.log"; exit 1; }
    echo "$BUILD_ID" >"$SRC/.kafka-compat-build"
    say "built in $(( $(date +%s) - start ))s"
fi

# --- one pass: a fresh broker, then the runner for one test scenario -----------
RUN="$(mktemp -d "${TMPDIR:-/tmp}/librdkafka-run.XXXXXX")"
BROKER_PID=
stop_broker() {
    if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    BROKER_PID=
}
cleanup() {
    stop_broker
    if [ "${KEEP:-0}" = 1 ]; then say "run directory kept: $RUN"; else rm -rf "$RUN"; fi
}
trap cleanup EXIT

# skip.txt: "<test name>  <reason>"; the runner skips by test number.
TESTS_SKIP="$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/skip.txt" | cut -c1-4 | sort -u | paste -sd, -)"
export TESTS_SKIP PYTHON
# The tests that need three brokers: the single-broker passes skip them, the cluster mode runs only them.
CLUSTER_TESTS="0098,0101,0103,0107,0111"
MODE="${MODE:-all}"

# run_pass NAME SCENARIO AUTO_CREATE PROTOCOL [BROKER-PROPERTIES]: a fresh broker with
# the settings of the suite's scenarios/SCENARIO.json (topic auto-creation on or
# off, 4 partitions) listening with PROTOCOL, and the runner restricted to that
# scenario's tests (and to $PASS_TESTS when set).
SECURITY="$RUN/security"
AUTHORIZER=(-o authorizer.class.name=kafka.security.authorizer.AclAuthorizer -o allow.everyone.if.no.acl.found=true)
run_pass() {
    local name=$1 scenario=$2 auto_create=$3 protocol=$4 properties=${5:-} dir="$RUN/$1" port
    mkdir -p "$dir"
    local bootstrap skip="$TESTS_SKIP,$CLUSTER_TESTS"
    if [ "$protocol" = CLUSTER ]; then
        protocol=PLAINTEXT skip="$TESTS_SKIP"
        start_cluster "$dir" "$auto_create"
        bootstrap="$CLUSTER_BOOTSTRAP"
    else
        port="$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
        (cd "$ROOT" && PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m kafka_compat serve \
            ${properties:+"$properties"} --listeners "$protocol://127.0.0.1:$port" --log-dirs "$dir/data" \
            -o auto.create.topics.enable="$auto_create" -o num.partitions=4 "${AUTHORIZER[@]}" \
            >"$dir/broker.log" 2>&1) &
        BROKER_PID=$!
        for _ in $(seq 300); do
            (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
            kill -0 "$BROKER_PID" 2>/dev/null || { cat "$dir/broker.log"; exit 1; }
            sleep 0.1
        done
        bootstrap="127.0.0.1:$port"
    fi
    {
        echo "bootstrap.servers=$bootstrap"
        echo "# A Python broker on a shared 2-core machine: give the suite's waits room."
        echo "test.timeout.multiplier=3"
        [ "$protocol" = PLAINTEXT ] || cat "$SECURITY/client.conf"
    } >"$dir/test.conf"
    [ "$protocol" = PLAINTEXT ] || "$PYTHON" "$HERE/security_setup.py" user "$SECURITY" "$bootstrap"
    say "pass $name (scenario $scenario): kafka-compat on $protocol://$bootstrap, $PARALLEL tests at a time"
    local rc=0
    (
        cd "$TESTDIR"
        export LD_LIBRARY_PATH="../src:../src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export RDKAFKA_TEST_CONF="$dir/test.conf" TEST_REPORT="$dir/report.json" TESTS_SKIP="$skip" \
            BROKERS="$bootstrap" KAFKA_PATH="$HERE/kafka" KAFKA_JARS="$RUN/libs" RDKAFKA_GITVER="$(basename "$SRC")"
        [ -z "${PASS_TESTS:-}" ] || export TESTS="$PASS_TESTS"
        # shellcheck disable=SC1091
        [ "$protocol" = PLAINTEXT ] || . "$SECURITY/ssl.env"
        unset CI  # the runner caps itself at 3 concurrent tests when CI is set
        # -Q quick mode, -E no sockem (network fault injection), -L no broker-less tests.
        exec ./test-runner -Q -E -L -p"$PARALLEL" -s "$scenario"
    ) >"$dir/runner.log" 2>&1 || rc=$?
    echo "$rc" >"$dir/rc"
    stop_broker
}

# start_cluster DIR AUTO_CREATE: `kafka-compat cluster` (ZooKeeper and brokers 0-2 in racks RACK0-2 with
# the rack-aware replica selector, as 0101 expects) in the background; sets CLUSTER_BOOTSTRAP once every
# broker is up.
start_cluster() {
    local dir=$1 auto_create=$2
    (cd "$ROOT" && PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m kafka_compat cluster --brokers 3 \
        --data-dir "$dir/data" -o auto.create.topics.enable="$auto_create" -o num.partitions=4 \
        -o default.replication.factor=3 -b 0:broker.rack=RACK0 -b 1:broker.rack=RACK1 -b 2:broker.rack=RACK2 \
        -o replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector \
        >"$dir/broker.log" 2>&1) &
    BROKER_PID=$!
    for _ in $(seq 1200); do
        grep -q '^bootstrap.servers=' "$dir/broker.log" 2>/dev/null && break
        kill -0 "$BROKER_PID" 2>/dev/null || { cat "$dir/broker.log"; exit 1; }
        sleep 0.1
    done
    CLUSTER_BOOTSTRAP="$(sed -n 's/^bootstrap.servers=//p' "$dir/broker.log")"
    [ -n "$CLUSTER_BOOTSTRAP" ] || { cat "$dir/broker.log"; exit 1; }
}

# Tests of $CLUSTER_TESTS in ${TESTS:-all of them} (the cluster mode's selection).
cluster_selection() {
    local t out=()
    for t in ${CLUSTER_TESTS//,/ }; do case ",${TESTS:-$CLUSTER_TESTS}," in *",$t,"*) out+=("$t");; esac; done
    (IFS=,; echo "${out[*]}")
}

# The SASL_SSL pass: the SSL and SASL tests, and some plain ones to see ordinary traffic over SASL_SSL.
SECURE_TESTS="0097,0135,0012,0013,0022,0030"
secure=0
for t in ${SECURE_TESTS//,/ }; do case ",${TESTS:-$SECURE_TESTS}," in *",$t,"*) secure=1;; esac; done

start=$(date +%s)
"$PYTHON" "$HERE/security_setup.py" files "$SECURITY"
passes=()
if [ "$MODE" != cluster ]; then
    run_pass default default true PLAINTEXT
    run_pass noautocreate noautocreate false PLAINTEXT
    passes+=("$RUN/default" "$RUN/noautocreate")
    if [ "$secure" = 1 ]; then
        PASS_TESTS="${TESTS:-$SECURE_TESTS}" run_pass sasl_ssl default true SASL_SSL "$SECURITY/broker.properties"
        passes+=("$RUN/sasl_ssl")
    fi
fi
selected="$(cluster_selection)"
if [ "$MODE" != single ] && [ -n "$selected" ]; then
    # 0098's Java producer: tests/java/Makefile compiles against $KAFKA_JARS/kafka-clients-*.jar
    mkdir -p "$RUN/libs"
    [ ! -f "$ROOT/.cache/jvm/java/kafka-clients.jar" ] \
        || ln -sf "$ROOT/.cache/jvm/java/kafka-clients.jar" "$RUN/libs/kafka-clients-3.9.1.jar"
    PASS_TESTS="$selected" run_pass cluster_default default true CLUSTER
    PASS_TESTS="$selected" run_pass cluster_noautocreate noautocreate false CLUSTER
    passes+=("$RUN/cluster_default" "$RUN/cluster_noautocreate")
fi
say "suite ran in $(( $(date +%s) - start ))s (TEST_KAFKA_VERSION=$TEST_KAFKA_VERSION)"

"$PYTHON" "$HERE/report.py" "$HERE/skip.txt" "${passes[@]}"
