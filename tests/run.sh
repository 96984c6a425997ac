#!/usr/bin/env bash
# The test command README gives: installs what the tests need on a fresh machine, then runs them.
#   bash tests/run.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE            # the generated codecs are large: cache their bytecode
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q -e '.[test]'
if [ -f interop/setup.sh ] && [ "${KAFKA_COMPAT_SKIP_SETUP:-}" != 1 ]; then
  bash interop/setup.sh
fi
exec python3 -m pytest -q "$@"
