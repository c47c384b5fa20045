#!/usr/bin/env bash
# Stops what `make run` (localstack/run-local.sh) leaves running (what
# `make emulator-stop` does), each by the pid its script recorded:
#   1. the webhook provider deploy-local.sh started on
#      127.0.0.1:${WEBHOOK_PROVIDER_PORT:-4599} (.run/webhook-provider-<port>.pid)
#   2. the emulator ministack.sh started on 127.0.0.1:${MINISTACK_PORT:-4566}
#      (localstack/ministack.sh stop), with the Lambda processes it runs
# A process on those ports that these scripts did not start is left alone.
set -euo pipefail

# shellcheck source=localstack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PORT="${WEBHOOK_PROVIDER_PORT:-4599}"
PROVIDER_PID="$RUN_DIR/webhook-provider-$PORT.pid"

pid=""
if [[ -f "$PROVIDER_PID" ]]; then read -r pid _ <"$PROVIDER_PID" || true; fi
if pid_is "$pid" webhook-provider; then
  stop_pid "$pid" webhook-provider
  echo "webhook provider (pid $pid) on 127.0.0.1:$PORT stopped"
elif port_open "$PORT"; then
  echo "127.0.0.1:$PORT is served by a process this script did not start; leaving it alone"
else
  echo "webhook provider is not running on 127.0.0.1:$PORT"
fi
rm -f "$PROVIDER_PID" "$RUN_DIR/webhook-provider-$PORT.secret"

"$MS" stop
