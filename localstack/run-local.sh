#!/usr/bin/env bash
# Runs the whole ledger locally and delivers one sample password-reset email
# through it (what `make run` does):
#   1. the emulator: ministack on 127.0.0.1:${MINISTACK_PORT:-4566} is installed and started unless
#      something answers there already (or AWS_ENDPOINT_URL is set); it is left running
#   2. localstack/deploy-local.sh: functions, webhook provider, cdk deploy, SES sender
#   3. publishes one sample email intent with `ledgerctl send` (sealed with the
#      stack's KMS key, as the account service's producer does)
#   4. waits until its ledger row is terminal (accepted, normally)
#   5. prints the email the emulator's SES captured and `ledgerctl explain`, the
#      row's evidence trail
#   6. waits for a signed digest to cover the row and prints `ledgerctl verify`
#      checking it against the digest bucket and the digest key
# Everything stays up afterwards; `make emulator-stop` (localstack/stop-local.sh)
# stops it all. If this script fails or is interrupted (INT, TERM), it stops
# what it started itself (the emulator, the webhook provider), by the pids it
# recorded, and leaves what was already running.
#
# Environment: as deploy-local.sh, plus SAMPLE_TO (recipient of the sample email;
# default an address at SES's mailbox simulator, accepted even in the SES sandbox).
set -euo pipefail

# shellcheck source=localstack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BIN_DIR="$RUN_DIR/bin"
STAGE="${LEDGER_STAGE:-local}"
PORT="${WEBHOOK_PROVIDER_PORT:-4599}"
OUTPUTS="$(outputs_file "$STAGE")"

mkdir -p "$RUN_DIR"
export LEDGER_STARTED="$RUN_DIR/started-$$"
: >"$LEDGER_STARTED"
on_exit() {
  local status=$?
  if ((status != 0)); then
    echo "run-local.sh: failed or interrupted; stopping what it started" >&2
    stop_recorded "$LEDGER_STARTED"
  fi
  rm -f "$LEDGER_STARTED"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

use_emulator start "starting the emulator (ministack)"

"$ROOT/localstack/deploy-local.sh"
# shellcheck disable=SC1090
source "$RUN_DIR/$STAGE.env"

step "building ledgerctl"
go build -C "$ROOT" -o "$BIN_DIR/" ./cmd/ledgerctl

CHALLENGE="sample-$(date -u +%Y%m%dT%H%M%S)-$RANDOM"
TO="${SAMPLE_TO:-success+$CHALLENGE@simulator.amazonses.com}"
step "publishing a sample email intent for challenge $CHALLENGE"
"$BIN_DIR/ledgerctl" send --challenge "$CHALLENGE" --channel email --to "$TO" --expires-in 15m

step "waiting for its ledger row to be terminal"
"$BIN_DIR/devstack" wait-row --outputs "$OUTPUTS" --timeout 60s "$CHALLENGE" email

echo
step "the email the emulator's SES captured"
"$BIN_DIR/devstack" emails --to "$TO" | sed 's/^/    /'

echo
step "ledgerctl explain $CHALLENGE"
"$BIN_DIR/ledgerctl" explain "$CHALLENGE"

echo
step "ledgerctl verify $CHALLENGE, against the signed digests (DIGEST_BUCKET, DIGEST_KEY_ARN)"
# The local stage digests every 5 s; until a digest covers the row, verify reports it pending
# (each finding is a line, its code first: docs/digests.md §7), and may report the digests stale
# if this stack was idle: both end once a digest covers the row.
for _ in $(seq 60); do
  verified="$("$BIN_DIR/ledgerctl" verify "$CHALLENGE" 2>&1)" && status=0 || status=$?
  if ! grep -q '^pending ' <<<"$verified"; then
    break
  fi
  sleep 1
done
sed 's/^/    /' <<<"$verified"
if ((status != 0)); then
  echo "run-local.sh: ledgerctl verify failed (exit $status)" >&2
  exit "$status"
fi
if grep -q '^pending ' <<<"$verified"; then
  echo "run-local.sh: no digest covered the row within 60 s (see the DigestFunction's log)" >&2
  exit 1
fi

# The ports, if not the defaults, for the stop command.
STOP_ENV="${MINISTACK_PORT:+MINISTACK_PORT=$MINISTACK_PORT }${WEBHOOK_PROVIDER_PORT:+WEBHOOK_PROVIDER_PORT=$PORT }"
cat <<EOF

The stack $LEDGER_STACK is running on $AWS_ENDPOINT_URL (done in $((SECONDS - T0))s).
  Use it:     source .run/$STAGE.env; .run/bin/ledgerctl --help     (or go run ./cmd/ledgerctl ...)
  Send more:  .run/bin/ledgerctl send --challenge <id> --channel email|sms --to <address>
  End to end: go test -count=1 -v ./e2e/
  SMS (webhook provider): curl -s http://127.0.0.1:$PORT/messages
  Stop it:    ${STOP_ENV}make emulator-stop     # the webhook provider and the emulator, if these scripts started them
EOF
