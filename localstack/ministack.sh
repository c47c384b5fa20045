#!/usr/bin/env bash
# Local AWS emulator (ministack) for tests, without Docker.
#
# Usage: localstack/ministack.sh {install|start|stop|status|env}
#
#   install  create <repo>/.venv/ministack (idempotent) and install the pinned,
#            hash-checked ministack from localstack/requirements.txt
#   start    start ministack in the background on 127.0.0.1:${MINISTACK_PORT:-4566}
#            (no-op, exit 0, if something already answers on that port) and wait
#            for /_ministack/health (up to ${MINISTACK_START_TIMEOUT:-60} s); its pid
#            is also recorded in $LEDGER_STARTED, if set (see with-emulator.sh)
#   stop     stop the instance this script started on that port (pid file), wait for exit
#   status   print whether the port answers and whether this script owns it
#            (exit 0 if healthy, 1 if not)
#   env      print the AWS_* exports that point SDKs/CLIs at the emulator:
#              eval "$(localstack/ministack.sh env)"
#
# Environment:
#   MINISTACK_PORT           port (default 4566)
#   MINISTACK_START_TIMEOUT  seconds to wait for health (default 60)
#   PYTHON                   interpreter used to create the venv (default python3)
#   LOG_LEVEL                ministack log level (default INFO)
#
# State lives only in memory (ministack's PERSIST_STATE/S3_PERSIST are forced to 0).
# Files: <repo>/.run/ministack-<port>.pid, <repo>/.run/ministack-<port>.log,
#        <repo>/.run/ministack-<port>.tmp/ (ministack's TMPDIR: Lambda code cache, its own pid file).
set -euo pipefail

# shellcheck source=localstack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VENV="$ROOT/.venv/ministack"
REQS="$ROOT/localstack/requirements.txt"
PORT="${MINISTACK_PORT:-4566}"
HOST="127.0.0.1"
PID_FILE="$RUN_DIR/ministack-$PORT.pid"
LOG_FILE="$RUN_DIR/ministack-$PORT.log"
TMP_DIR="$RUN_DIR/ministack-$PORT.tmp"
HEALTH_URL="http://$HOST:$PORT/_ministack/health"
TIMEOUT="${MINISTACK_START_TIMEOUT:-60}"

# True if the health endpoint answers 200 with ministack's JSON.
healthy() {
  "$VENV/bin/python" - "$HEALTH_URL" <<'PY' 2>/dev/null
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 and "services" in json.load(r) else 1)
except Exception:
    sys.exit(1)
PY
}

# Prints the pid from our pid file if that process is alive and is ministack.
owned_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  pid_is "$pid" ministack || return 1
  echo "$pid"
}

cmd_install() {
  venv_create "$VENV"
  if venv_current "$VENV" "$REQS"; then
    echo "ministack $(pip_version "$VENV" ministack) already installed in $VENV"
    return 0
  fi
  venv_install "$VENV" "$REQS"
  echo "installed ministack $(pip_version "$VENV" ministack) in $VENV"
}

cmd_start() {
  if port_open "$PORT" "$HOST"; then
    if pid="$(owned_pid)"; then
      echo "ministack already running on $HOST:$PORT (pid $pid, started by this script)"
    else
      echo "something already answers on $HOST:$PORT; not starting ministack"
    fi
    return 0
  fi
  [[ -x "$VENV/bin/ministack" ]] || die "ministack is not installed; run: $0 install"
  mkdir -p "$RUN_DIR" "$TMP_DIR"
  rm -f "$PID_FILE"
  # GATEWAY_PORT/BIND_HOST: listen address. PERSIST_STATE/S3_PERSIST=0: in-memory.
  # AWS_ENDPOINT_URL: handed to provided.* Lambda bootstraps so they call back here.
  # TMPDIR: keeps ministack's own pid file and Lambda code cache per port, under .run/.
  # setsid: own session/process group so stop can signal the whole group.
  env \
    GATEWAY_PORT="$PORT" \
    BIND_HOST="$HOST" \
    PERSIST_STATE=0 \
    S3_PERSIST=0 \
    LOCALSTACK_PERSISTENCE=0 \
    LAMBDA_EXECUTOR=local \
    MINISTACK_REGION="${AWS_REGION:-us-east-1}" \
    AWS_ENDPOINT_URL="http://$HOST:$PORT" \
    AWS_ACCESS_KEY_ID=test \
    AWS_SECRET_ACCESS_KEY=test \
    AWS_DEFAULT_REGION="${AWS_REGION:-us-east-1}" \
    TMPDIR="$TMP_DIR" \
    LOG_LEVEL="${LOG_LEVEL:-INFO}" \
    setsid "$VENV/bin/ministack" </dev/null >"$LOG_FILE" 2>&1 &
  local pid=$!
  echo "$pid" >"$PID_FILE"
  record_started "$pid" ministack "$PORT"
  local deadline=$((SECONDS + TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      echo "ministack exited during startup; last log lines ($LOG_FILE):" >&2
      tail -n 40 "$LOG_FILE" >&2 || true
      exit 1
    fi
    if healthy; then
      echo "ministack started on http://$HOST:$PORT (pid $pid, log $LOG_FILE)"
      return 0
    fi
    sleep 0.5
  done
  echo "ministack did not become healthy within ${TIMEOUT}s; last log lines ($LOG_FILE):" >&2
  tail -n 40 "$LOG_FILE" >&2 || true
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  rm -f "$PID_FILE"
  exit 1
}

cmd_stop() {
  local pid
  if ! pid="$(owned_pid)"; then
    rm -f "$PID_FILE"
    if port_open "$PORT" "$HOST"; then
      echo "$HOST:$PORT is served by a process this script did not start; leaving it alone"
    else
      echo "ministack is not running on $HOST:$PORT"
    fi
    return 0
  fi
  # Signals the process group (ministack + its Lambda bootstrap subprocesses).
  stop_pid "$pid" ministack
  rm -f "$PID_FILE"
  echo "ministack (pid $pid) on $HOST:$PORT stopped"
}

cmd_status() {
  local pid="" owner="not started by this script"
  if pid="$(owned_pid)"; then owner="pid $pid, started by this script"; fi
  if port_open "$PORT" "$HOST"; then
    if [[ -x "$VENV/bin/python" ]] && healthy; then
      echo "ministack healthy on http://$HOST:$PORT ($owner)"
    else
      echo "something answers on $HOST:$PORT ($owner); /_ministack/health not OK"
    fi
    return 0
  fi
  echo "nothing listening on $HOST:$PORT"
  return 1
}

cmd_env() {
  echo "export AWS_ENDPOINT_URL=http://$HOST:$PORT AWS_REGION=${AWS_REGION:-us-east-1} AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
