#!/usr/bin/env bash
# Start a neardup cluster on this machine: one scheduler and N executors,
# for trying --cluster runs. Stops them all on Ctrl-C (or SIGTERM).
#
#   jobs/local-cluster.sh [EXECUTORS]          # default 2
#   neardup dedup --cluster df://127.0.0.1:50050 -i sample_data/news.parquet -o /tmp/out
#
# Environment:
#   NEARDUP           the binary [default: neardup on PATH, else target/debug/neardup]
#   NEARDUP_PORT      the scheduler's port [default 50050]; executor i (1..N)
#                     listens on PORT+10i+1 (Arrow Flight) and PORT+10i+2 (gRPC)
#   NEARDUP_WORK      folder for logs and executors' shuffle files [default: a new temp folder]
#   NEARDUP_LOG       log level of the processes [default: warn]
# Storage credentials (AWS_*, GOOGLE_*, AZURE_*) are passed on to every process.
set -euo pipefail

executors="${1:-2}"
port="${NEARDUP_PORT:-50050}"
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${NEARDUP:-$(command -v neardup || echo "$here/target/debug/neardup")}"
work="${NEARDUP_WORK:-$(mktemp -d -t neardup-cluster.XXXXXX)}"
[[ -x "$bin" ]] || { echo "local-cluster.sh: no neardup binary at '$bin' (build it, or set NEARDUP)" >&2; exit 2; }
[[ "$executors" =~ ^[1-9][0-9]*$ ]] || { echo "local-cluster.sh: EXECUTORS must be a positive number, not '$executors'" >&2; exit 2; }
mkdir -p "$work"

pids=()
stop() {
  trap - EXIT INT TERM
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

wait_for_port() {
  for _ in $(seq 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
      echo "local-cluster.sh: a process exited before listening on port $1; see $work/*.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "local-cluster.sh: nothing listens on port $1 after 30 s; see $work/*.log" >&2
  exit 1
}

"$bin" scheduler --port "$port" 2>"$work/scheduler.log" &
pids+=($!)
wait_for_port "$port"
for i in $(seq "$executors"); do
  flight=$((port + 10 * i + 1)) grpc=$((port + 10 * i + 2))
  "$bin" executor --scheduler "127.0.0.1:$port" --port "$flight" --grpc-port "$grpc" \
    --work-dir "$work/executor-$i" 2>"$work/executor-$i.log" &
  pids+=($!)
  wait_for_port "$flight"
  wait_for_port "$grpc"
done
# Executors register with the scheduler on their first heartbeat.
sleep 2
# A process that could not bind its port (another program listening there) has exited by now.
for pid in "${pids[@]}"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "local-cluster.sh: a cluster process exited at start (a port in use?); see $work/*.log" >&2
    exit 1
  fi
done
# One line only: a reader that stops after it must not cut the script short.
echo "cluster ready: df://127.0.0.1:$port ($executors executors; logs in $work); stop it with Ctrl-C"
wait -n "${pids[@]}"
echo "local-cluster.sh: a cluster process exited; stopping the others (see $work/*.log)" >&2
exit 1
