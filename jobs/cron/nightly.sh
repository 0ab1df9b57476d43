#!/usr/bin/env bash
# Run the nightly neardup job for one night: take a lock so that two runs never
# overlap, run the job, and retry a failure that may succeed when retried.
#
#   jobs/cron/nightly.sh [RUN_ID [NEARDUP_RUN_OPTIONS...]]
#
# RUN_ID defaults to NEARDUP_RUN_ID, else yesterday's date in UTC
# (`date -u -d yesterday +%F`, e.g. 2026-11-21). Further arguments go to
# `neardup run` as they are (e.g. --dry-run).
#
# crontab line (cron runs with a short PATH: set PATH or NEARDUP in the crontab):
#   15 2 * * * /opt/neardup/jobs/cron/nightly.sh >> /var/log/neardup.log 2>&1
# with object-store credentials kept in a file of `export AWS_...=...` lines (mode 600):
#   15 2 * * * . /etc/neardup/store.env && /opt/neardup/jobs/cron/nightly.sh >> /var/log/neardup.log 2>&1
# Run ids are UTC dates while cron schedules in the machine's time zone: on a
# machine that is not on UTC, pick a time after midnight UTC (or set CRON_TZ=UTC
# where cron supports it).
#
# Environment:
#   NEARDUP               the binary [default: neardup on PATH]
#   NEARDUP_JOB           the job file [default: nightly.toml beside this script]
#   NEARDUP_RETRY_DELAYS  seconds to wait before each retry after exit code 1, one
#                         retry per number [default "30 120": at most 3 attempts];
#                         "" for no retry
#   NEARDUP_LOCK          the lock file [default: neardup-nightly-CHECKSUM.lock in
#                         TMPDIR or /tmp, one per job file]; give two job files that
#                         share a store the same lock
#   NEARDUP_LOCK_WAIT     seconds to wait for the lock [default 0: give up at once]
# Storage credentials (AWS_*, GOOGLE_*, AZURE_*) are passed on to neardup.
#
# Every line this script and neardup write to standard error is one JSON object.
# Exit code: neardup's last one. 0 the night is done; 1 it failed after the last
# retry, or another run holds the lock; 2 bad input or configuration (never
# retried); any other code (128+N: killed by signal N) is passed on, not retried.
set -euo pipefail

if [[ "${1-}" == -h || "${1-}" == --help ]]; then
  sed -n '2,/^set -euo pipefail$/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi

run_id="${1:-${NEARDUP_RUN_ID:-$(date -u -d yesterday +%F)}}"
[[ $# -gt 0 ]] && shift
bin="${NEARDUP:-neardup}"
job="${NEARDUP_JOB:-$(cd "$(dirname "$0")" && pwd)/nightly.toml}"
delays_text="${NEARDUP_RETRY_DELAYS-30 120}"
lock_wait="${NEARDUP_LOCK_WAIT:-0}"

json() {
  local s="$1"
  s="${s//\\/\\\\}" s="${s//\"/\\\"}" s="${s//$'\n'/\\n}" s="${s//$'\r'/\\r}" s="${s//$'\t'/\\t}"
  printf '"%s"' "$s"
}
# log LEVEL MESSAGE: one JSON object on standard error, like neardup's own lines.
log() {
  printf '{"time":%s,"level":%s,"source":"nightly.sh","run_id":%s,"message":%s}\n' \
    "$(json "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" "$(json "$1")" "$(json "$run_id")" "$(json "$2")" >&2
}

# Mistakes in how the script is called are exit code 2, like neardup's.
if [[ ! "$run_id" =~ ^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$ ]]; then
  log error "run id '$run_id' is not valid: use up to 128 letters, digits, '.', '_' and '-', not starting with '.' (e.g. 2026-11-21)"
  exit 2
fi
read -r -a delays <<<"$delays_text" || true
for d in "${delays[@]}"; do
  if [[ ! "$d" =~ ^[0-9]+$ ]]; then
    log error "NEARDUP_RETRY_DELAYS='$delays_text' must be whole numbers of seconds, e.g. \"30 120\""
    exit 2
  fi
done
if [[ ! "$lock_wait" =~ ^[0-9]+$ ]]; then
  log error "NEARDUP_LOCK_WAIT='$lock_wait' must be a whole number of seconds"
  exit 2
fi
if ! command -v "$bin" >/dev/null; then
  log error "no neardup binary '$bin' (put it on PATH, or set NEARDUP)"
  exit 2
fi
if [[ ! -f "$job" ]]; then
  log error "no job file '$job' (set NEARDUP_JOB)"
  exit 2
fi

# One lock per job file: its absolute path's checksum names the lock file.
job_abs="$(cd "$(dirname "$job")" && pwd)/$(basename "$job")"
lock="${NEARDUP_LOCK:-${TMPDIR:-/tmp}/neardup-nightly-$(printf '%s' "$job_abs" | cksum | cut -d' ' -f1).lock}"
if ! { exec 9>>"$lock"; } 2>/dev/null; then
  log error "cannot open the lock file '$lock' (set NEARDUP_LOCK)"
  exit 2
fi
# neardup inherits the descriptor: the lock is held until this script and the
# run it started have both ended, and through the waits between retries.
if ! flock -w "$lock_wait" 9; then
  log error "another run of '$job_abs' holds the lock '$lock'; not started"
  exit 1
fi

attempts=$((${#delays[@]} + 1))
attempt=1
while :; do
  log info "attempt $attempt of $attempts: $bin run $job_abs --run-id $run_id --log-format json${*:+ $*}"
  rc=0
  "$bin" run "$job_abs" --run-id "$run_id" --log-format json "$@" || rc=$?
  case "$rc" in
    0)
      log info "run $run_id done"
      exit 0
      ;;
    1)
      if ((attempt >= attempts)); then
        log error "run $run_id failed (exit code 1) after $attempts attempt(s)"
        exit 1
      fi
      delay="${delays[attempt - 1]}"
      log warn "run $run_id failed (exit code 1), which may succeed when retried: retrying in $delay s"
      sleep "$delay"
      attempt=$((attempt + 1))
      ;;
    2)
      log error "run $run_id stopped: bad input or configuration (exit code 2); not retried"
      exit 2
      ;;
    3)
      log warn "run $run_id done, but partial (exit code 3): input files were skipped, named in its summary.json (skipped_files); not retried"
      exit 3
      ;;
    *)
      log error "run $run_id ended with exit code $rc; not retried"
      exit "$rc"
      ;;
  esac
done
