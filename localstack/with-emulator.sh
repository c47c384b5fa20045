#!/usr/bin/env bash
# Runs "$@" with the local AWS emulator reachable. If AWS_ENDPOINT_URL is set,
# that endpoint is used as is (LocalStack, or an emulator you started).
# Otherwise ministack is installed and started on 127.0.0.1:${MINISTACK_PORT:-4566} unless
# something already listens there, and stopped afterwards only if it was
# started here.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MS="$ROOT/localstack/ministack.sh"

if [[ -z "${AWS_ENDPOINT_URL:-}" ]]; then
  started=0
  if ! "$MS" status >/dev/null 2>&1; then
    "$MS" install
    "$MS" start
    started=1
  fi
  if [[ $started == 1 ]]; then trap '"$MS" stop' EXIT; fi
  eval "$("$MS" env)"
fi
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
"$@"
