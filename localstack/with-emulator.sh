#!/usr/bin/env bash
# Runs "$@" with the local AWS emulator reachable. If AWS_ENDPOINT_URL is set,
# that endpoint is used as is (LocalStack, or an emulator you started).
# Otherwise ministack is installed and started on 127.0.0.1:${MINISTACK_PORT:-4566} unless
# something already listens there.
#
# Usage: localstack/with-emulator.sh [--record FILE] COMMAND [ARG...]
#
# Every process started in the background meanwhile, here or by COMMAND (the
# emulator, deploy-local.sh's webhook provider), is recorded in LEDGER_STARTED
# and stopped by its pid when this script ends, whether COMMAND passes, fails or
# is interrupted (INT or TERM: COMMAND gets a TERM first); what was already
# running is left alone. The record is FILE with --record, kept afterwards for
# localstack/leftover_test.go, else a temporary file in .run/. Run by a COMMAND
# of another with-emulator.sh (LEDGER_STARTED set, no --record), it records
# into that one's file and stops nothing itself.
set -euo pipefail
# shellcheck source=localstack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

record=""
if [[ "${1:-}" == --record ]]; then
  record="${2:?--record needs a file}"
  [[ "$record" == /* ]] || record="$PWD/$record"
  shift 2
fi
(($# > 0)) || { usage >&2; exit 2; }

if [[ -n "${LEDGER_STARTED:-}" && -z "$record" ]]; then
  use_emulator start
  default_credentials
  exec "$@"
fi

mkdir -p "$RUN_DIR"
export LEDGER_STARTED="${record:-$RUN_DIR/started-$$}"
: >"$LEDGER_STARTED"
child=""
cleanup() {
  stop_recorded "$LEDGER_STARTED"
  if [[ -z "$record" ]]; then rm -f "$LEDGER_STARTED"; fi
}
# On INT or TERM: stops COMMAND, then the rest, then dies of the same signal.
interrupted() {
  trap - EXIT INT TERM
  if [[ -n "$child" ]]; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" || true
  fi
  cleanup
  kill -s "$1" $$
}
trap cleanup EXIT
trap 'interrupted INT' INT
trap 'interrupted TERM' TERM

use_emulator start
default_credentials
# In the background, so a TERM to this script is handled now, not when COMMAND
# ends; <&0 keeps its standard input.
"$@" <&0 &
child=$!
wait "$child"
