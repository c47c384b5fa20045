#!/usr/bin/env bash
# Deploys the whole ledger stack to the local emulator (ministack or LocalStack).
#
# Usage: localstack/deploy-local.sh [-c key=value ...]
#
# With the emulator up (AWS_ENDPOINT_URL, or ministack answering on 127.0.0.1:${MINISTACK_PORT:-4566}):
#   1. builds the five functions for the host architecture (make build)
#   2. builds and starts the local webhook provider (cmd/webhook-provider) in the
#      background on 127.0.0.1:$WEBHOOK_PROVIDER_PORT: the emulator has no SMS
#      service, so the local stage sends SMS through the webhook transport to it.
#      It records every POST (--key-window 0) so tests see every send, and refuses (401)
#      any request without a valid Webhook-Signature under the stage's signing secret,
#      which it reads at every request from .run/webhook-provider-<port>.secret (step 6
#      writes it). A provider this script started earlier is reused; one it starts is left running, and
#      its pid recorded in $LEDGER_STARTED if set: with-emulator.sh (make test)
#      and a failed run-local.sh stop it when they end.
#   3. cdk bootstrap (idempotent)
#   4. cdk synth into .run/cdk.out-<stage>, skipped when nothing it depends on changed
#   5. cdk deploy of that assembly, outputs written to .run/outputs.json
#   6. creates (verifies) the SES sender identity in the emulator, writes the stack's
#      webhook signing secret (Secrets Manager, WebhookSecretArn) to the provider's secret
#      file (mode 0600; the value is never printed), and gives the digest bucket the Object
#      Lock configuration the template declares (the emulator's CloudFormation leaves it out)
#   7. prints the outputs and the exports ledgerctl reads (also in .run/<stage>.env)
# Re-running it updates the stack in place; an unchanged stack deploys in seconds.
# Extra arguments are passed to cdk synth as context (e.g. -c logLevel=debug).
#
# Environment:
#   LEDGER_STAGE           stage name (default local): stack resetledger-<stage>
#   WEBHOOK_PROVIDER_PORT  local webhook provider port (default 4599)
#   SES_FROM_ADDRESS       SES sender (default no-reply@ledger.example.test)
#   AWS_ENDPOINT_URL       emulator endpoint (default: ministack on 127.0.0.1:${MINISTACK_PORT:-4566})
#
# Files (.run/): outputs.json (outputs-<stage>.json for other stages), <stage>.env,
# cdk.out-<stage>/, webhook-provider-<port>.pid/.log/.secret, bin/, deploy-<stage>.log.
# Stop the provider and the emulator: make emulator-stop (localstack/stop-local.sh, with the
# same WEBHOOK_PROVIDER_PORT and MINISTACK_PORT).
set -euo pipefail

# shellcheck source=localstack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BIN_DIR="$RUN_DIR/bin"
STAGE="${LEDGER_STAGE:-local}"
STACK="resetledger-$STAGE"
PORT="${WEBHOOK_PROVIDER_PORT:-4599}"
SES_FROM="${SES_FROM_ADDRESS:-no-reply@ledger.example.test}"
OUTPUTS="$(outputs_file "$STAGE")"
CDK_OUT="$RUN_DIR/cdk.out-$STAGE"
PROVIDER_PID="$RUN_DIR/webhook-provider-$PORT.pid"
PROVIDER_LOG="$RUN_DIR/webhook-provider-$PORT.log"
PROVIDER_SECRET="$RUN_DIR/webhook-provider-$PORT.secret"
DEPLOY_LOG="$RUN_DIR/deploy-$STAGE.log"

# Runs "$@" with its output in the deploy log; shows the log's tail if it fails.
logged() {
  if ! "$@" >>"$DEPLOY_LOG" 2>&1; then
    echo "deploy-local.sh: failed: $*; last lines of $DEPLOY_LOG:" >&2
    tail -n 40 "$DEPLOY_LOG" >&2
    exit 1
  fi
}

mkdir -p "$RUN_DIR" "$BIN_DIR"
: >"$DEPLOY_LOG"

# Emulator.
use_emulator require
default_credentials
export AWS_DEFAULT_REGION="$AWS_REGION"
# The emulator's account for the static test credentials.
ACCOUNT="${LOCAL_ACCOUNT_ID:-000000000000}"

GOARCH_HOST="$(go env GOARCH)"
case "$GOARCH_HOST" in
  amd64) CDK_ARCH=x86_64 ;;
  arm64) CDK_ARCH=arm64 ;;
  *) die "host architecture $GOARCH_HOST: Lambda runs only x86_64 or arm64" ;;
esac
step "emulator $AWS_ENDPOINT_URL, stage $STAGE, functions for $CDK_ARCH"

# 1. Functions, for the host: the emulator runs bootstrap as a local process.
step "building functions (make build ARCH=$GOARCH_HOST)"
logged make -C "$ROOT" --no-print-directory build ARCH="$GOARCH_HOST"

# 2. Local webhook provider and the helper.
step "building webhook provider and devstack helper"
logged go build -C "$ROOT" -o "$BIN_DIR/" ./cmd/webhook-provider ./e2e/devstack
provider_sum="$(sha256sum "$BIN_DIR/webhook-provider" | cut -d' ' -f1)"
running_pid=""
if [[ -f "$PROVIDER_PID" ]]; then
  read -r pid sum <"$PROVIDER_PID" || true
  if pid_is "${pid:-}" webhook-provider; then
    if [[ "${sum:-}" == "$provider_sum" ]]; then
      running_pid="$pid"
    else
      step "webhook provider binary changed; restarting it (pid $pid)"
      stop_pid "$pid" webhook-provider
    fi
  fi
fi
if [[ -n "$running_pid" ]]; then
  step "webhook provider already running on 127.0.0.1:$PORT (pid $running_pid)"
elif port_open "$PORT"; then
  step "127.0.0.1:$PORT is served by a process this script did not start; using it as the webhook provider (it must check signatures with $PROVIDER_SECRET)"
else
  rm -f "$PROVIDER_PID"
  setsid "$BIN_DIR/webhook-provider" --addr "127.0.0.1:$PORT" --key-window 0 --secret-file "$PROVIDER_SECRET" </dev/null >>"$PROVIDER_LOG" 2>&1 &
  pid=$!
  echo "$pid $provider_sum" >"$PROVIDER_PID"
  record_started "$pid" webhook-provider "$PORT"
  for _ in $(seq 50); do port_open "$PORT" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  port_open "$PORT" || { tail -n 20 "$PROVIDER_LOG" >&2; die "webhook provider did not start (log $PROVIDER_LOG)"; }
  step "webhook provider started on 127.0.0.1:$PORT (pid $pid, log $PROVIDER_LOG)"
fi

# 3. CDK CLI and bootstrap.
if [[ ! -x "$ROOT/node_modules/.bin/cdk" ]]; then
  step "installing the pinned CDK CLI (make node_modules)"
  logged make -C "$ROOT" --no-print-directory node_modules
fi
CDK="$ROOT/node_modules/.bin/cdk"
step "cdk bootstrap aws://$ACCOUNT/$AWS_REGION"
# From the repository root: no cdk.json there, so bootstrap does not synth the app.
(cd "$ROOT" && logged "$CDK" bootstrap "aws://$ACCOUNT/$AWS_REGION")

# 4. Synth, unless its inputs are unchanged.
CONTEXT=(
  -c "stage=$STAGE" -c "arch=$CDK_ARCH" -c deletionProtection=false -c pitr=false
  -c "sesFromAddress=$SES_FROM" -c smsTransport=webhook -c "webhookUrl=http://127.0.0.1:$PORT/send"
  # The local provider records every request: it honors no Idempotency-Key.
  -c webhookKeyWindow=0s
  # Poison intents reach the DLQ after 2 receives 30 s apart instead of 5 x 3 min.
  -c intentVisibilityTimeout=30s -c maxReceiveCount=2
  # Every function logs its AWS calls; the end-to-end test checks them against the roles.
  -c logAwsCalls=true
  # Nobody is paged from the emulator: its alarms are deployed without a topic.
  -c requireAlarmTopic=false
  # The emulator enforces no IAM, and the local tests publish intents with its static test
  # credentials: the one stage that may leave producerArns unset (every other stage's synth fails).
  -c localStage=true
  # The emulator's CloudFormation rejects metric-math alarms (the email bounce and complaint rates).
  -c mathAlarms=false
  # The emulator's CloudFormation has no provisioner for AWS::Backup::BackupSelection (it refuses
  # the template as an unrecognized resource type): the local stage has no backup plan, vault or
  # vault key. The ledger table's ResourcePolicy is accepted (and not enforced: the emulator has no IAM).
  -c backup=false
  # The emulator's CloudFormation has no provisioner for AWS::Lambda::ResourcePolicy either: the
  # operator function's invokers get AWS::Lambda::Permission allows, without the Denies (the
  # emulator enforces no IAM anyway; the Denies are proven by infra's boundary tests).
  -c operatorDenies=false
  # SMS goes through the webhook here, so the stack creates no End User Messaging SMS configuration
  # set and no protect configuration (AWS::SMSVOICE::*, which the emulator cannot provision: its
  # CloudFormation refuses the template). A local stage that sets smsTransport=sms must also name
  # both, -c smsConfigurationSet=<prefix>-sms-local -c smsProtectConfigurationId=<id>, so the stack
  # creates neither. Dispatch's own country allow-list (smsAllowedCountries) applies here too.
  # The stage deploys the provider-events route, so a held fallback SMS waits after the email is
  # accepted for a permanent bounce to hand over to it (the emulator's SES publishes no events; the
  # end-to-end test publishes them to the topic). 30 s instead of production's 2 min keeps that
  # test short; it must not be 0 while the route is deployed: a 0 wait suppresses the SMS at
  # acceptance, before any bounce can arrive.
  -c fallbackDeliveryWait=30s
  # The end-to-end test of the send limits (e2e/limits_test.go) sends more SMS to Canadian numbers
  # than the per-country cap allows: 20 per 10 minutes here instead of 200 an hour keeps that test
  # short, and the rest of the suite, whose SMS go to US numbers, far below it.
  -c limitSmsCountry=20/10m
  # A digest per 5 s of stream records instead of per 5 min: the end-to-end test (e2e/digest_test.go)
  # waits for the digests of the rows it wrote.
  -c digestInterval=5s
  "$@"
)
inputs_hash="$(
  cd "$ROOT" && {
    printf '%s\n' "${CONTEXT[@]}"
    # infra and every package of this module it imports: the domain's states and trigger rule, the
    # settings' declarations, the store's attribute names and the metric names shape the template.
    sha256sum $(go list -deps -f '{{if and .Module .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}} {{end}}{{end}}' ./infra) \
      infra/cdk.json go.mod go.sum package-lock.json dist/*/bootstrap
  } | sha256sum | cut -d' ' -f1
)"
if [[ -f "$CDK_OUT/manifest.json" && "$(cat "$CDK_OUT/.inputs-hash" 2>/dev/null)" == "$inputs_hash" ]]; then
  step "cdk synth skipped: template in $CDK_OUT is up to date"
else
  step "cdk synth -> $CDK_OUT"
  rm -rf "$CDK_OUT"
  (cd "$ROOT/infra" && logged "$CDK" synth --quiet -o "$CDK_OUT" "${CONTEXT[@]}")
  echo "$inputs_hash" >"$CDK_OUT/.inputs-hash"
fi

# 5. Deploy the pre-synthesized assembly.
step "cdk deploy $STACK"
(cd "$ROOT/infra" && logged "$CDK" deploy --app "$CDK_OUT" --require-approval never --outputs-file "$OUTPUTS" "$STACK")

# 6. The SES sender must be a verified identity in the emulator; the provider checks every request
#    against the stack's webhook signing secret.
step "SES sender identity $SES_FROM"
logged "$BIN_DIR/devstack" ses-identity "$SES_FROM"
step "webhook signing secret -> $PROVIDER_SECRET"
logged "$BIN_DIR/devstack" webhook-secret --outputs "$OUTPUTS" --out "$PROVIDER_SECRET"
# The emulator's CloudFormation creates the digest bucket without its ObjectLockConfiguration; the
# digest function's locked PutObject needs it. On AWS the template has created it already.
step "digest bucket Object Lock"
logged "$BIN_DIR/devstack" digest-lock --outputs "$OUTPUTS" --template "$CDK_OUT/$STACK.template.json"

# 7. Outputs.
"$BIN_DIR/devstack" outputs-env --outputs "$OUTPUTS" >"$RUN_DIR/$STAGE.env"
echo "export AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL AWS_REGION=$AWS_REGION AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY" >>"$RUN_DIR/$STAGE.env"
step "deployed $STACK in $((SECONDS - T0))s"
echo
echo "Outputs ($OUTPUTS):"
sed -n 's/^ *"\([A-Za-z]*\)": "\(.*\)",\{0,1\}$/  \1 = \2/p' "$OUTPUTS"
echo
echo "Webhook provider: http://127.0.0.1:$PORT/messages (log $PROVIDER_LOG)"
echo "Captured email:   $AWS_ENDPOINT_URL/_ministack/ses/messages"
echo "For ledgerctl:    source $RUN_DIR/$STAGE.env"
