#!/usr/bin/env bash
# External linters for the synthesized CloudFormation template: cfn-lint with the
# cfn-lint-serverless rules, and checkov. Both are pinned with hashes in lint/requirements.txt.
#
# Usage: lint/template.sh {install|run TEMPLATE}
#
#   install  create <repo>/.venv/lint (idempotent) and install the pinned, hash-checked linters
#   run      lint TEMPLATE with both tools; exit non-zero on any cfn-lint error or warning and on
#            any failed checkov check. Suppressions live in the CDK code (infra/linters.go) as
#            resource metadata, so the template itself says why a check does not apply.
#
# Environment:
#   PYTHON   interpreter used to create the venv (default python3)
set -euo pipefail

# shellcheck source=localstack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../localstack/lib.sh"
VENV="$ROOT/.venv/lint"
REQS="$ROOT/lint/requirements.txt"

cmd_install() {
  venv_create "$VENV"
  if venv_current "$VENV" "$REQS"; then
    echo "template linters already installed in $VENV"
    return 0
  fi
  venv_install "$VENV" "$REQS"
  echo "installed cfn-lint $(version cfn-lint), cfn-lint-serverless $(version cfn-lint-serverless), checkov $(version checkov) in $VENV"
}

version() { pip_version "$VENV" "$1"; }

cmd_run() {
  local template="${1:-}"
  [[ -f "$template" ]] || die "no template at '$template' (synthesize first)"
  [[ -x "$VENV/bin/cfn-lint" && -x "$VENV/bin/checkov" ]] || die "linters not installed; run: $0 install"
  local failed=0

  echo "== cfn-lint $(version cfn-lint) + cfn-lint-serverless $(version cfn-lint-serverless): $template"
  # Exit code is a bit mask (2 errors, 4 warnings, 8 informational); fail on errors and warnings.
  local rc=0
  "$VENV/bin/cfn-lint" --append-rules cfn_lint_serverless.rules -- "$template" || rc=$?
  if ((rc & 6)); then
    failed=1
  elif ((rc != 0 && rc != 8)); then
    echo "cfn-lint exited $rc" >&2
    failed=1
  else
    echo "cfn-lint: no errors or warnings"
  fi

  echo "== checkov $(version checkov): $template"
  # --framework cloudformation: the template only. Skipped checks (resource metadata) are listed
  # with their reasons in the output; only failed checks make the exit code non-zero.
  rc=0
  "$VENV/bin/checkov" --quiet --compact --framework cloudformation --file "$template" \
    --skip-download --download-external-modules false || rc=$?
  if ((rc != 0)); then
    failed=1
  else
    echo "checkov: no failed checks"
  fi
  return "$failed"
}

case "${1:-}" in
  install) cmd_install ;;
  run) shift; cmd_run "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
