#!/usr/bin/env bash
# Where the time goes: a sampling profile (Linux perf) of one neardup command,
# as a flat table of the hottest functions.
#
#   bash bench/perf/profile.sh OUT.txt neardup-args...
#   bash bench/perf/profile.sh target/profile-fingerprint.txt \
#       fingerprint --input ../shared/data/heybox_articles.parquet --output /tmp/fp --overwrite
#
# Profiles the release binary (built if needed). Needs `perf` (Debian's
# linux-perf) and kernel.perf_event_paranoid <= 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$1"
shift
cargo build --release --bin neardup >&2
binary="${CARGO_TARGET_DIR:-target}/release/neardup"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
perf record -F 1999 -o "$data/perf.data" -- "$binary" "$@" -q >&2
{
  echo "# perf record -F 1999 -- neardup $* (release build, commit $(git rev-parse --short HEAD))"
  perf report -i "$data/perf.data" --stdio --no-children --sort symbol --percent-limit 0.5 2>/dev/null | grep -v '^$'
} > "$out"
echo "wrote $out" >&2
