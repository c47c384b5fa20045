#!/usr/bin/env bash
# Runs "$@" with the local AWS emulator reachable. If AWS_ENDPOINT_URL is set,
# that endpoint is used as is (LocalStack, or an emulator you started).
# Otherwise ministack is installed and started on 127.0.0.1:${MINISTACK_PORT:-4566} unless
# something already listens there, and stopped afterwards only if it was
# started here.
set -euo pipefail
# shellcheck source=localstack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

use_emulator start
if [[ $EMULATOR_STARTED == 1 ]]; then trap '"$MS" stop' EXIT; fi
default_credentials
"$@"
