#!/usr/bin/env bash
# The test command: sets up everything the tests need, then runs them all.
#   bash tests/run.sh            # every test
#   bash tests/run.sh banded     # only tests whose name matches
#
# Needs: cargo and python3. An independent Parquet reader (pyarrow) and a real
# S3-compatible server for the object-storage tests (moto) are installed into
# a cached virtual environment on first use.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${NEARDUP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/neardup/venv}"
if ! "$venv/bin/python" -c "import pyarrow, moto, boto3" 2>/dev/null; then
  echo "tests/run.sh: setting up $venv (pyarrow, moto)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check pyarrow "moto[server]" boto3
fi
export NEARDUP_PYTHON="$venv/bin/python"

cargo test --locked "$@"
