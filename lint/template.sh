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

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv/lint"
REQS="$ROOT/lint/requirements.txt"

die() { echo "template.sh: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

cmd_install() {
  local py="${PYTHON:-python3}"
  command -v "$py" >/dev/null || die "$py not found (set PYTHON=...)"
  if [[ ! -x "$VENV/bin/python" ]]; then
    echo "creating venv $VENV"
    mkdir -p "$(dirname "$VENV")"
    "$py" -m venv "$VENV"
  fi
  # Skip pip entirely when the pinned set is already installed exactly.
  local want
  want="$(grep -E '^[A-Za-z0-9_.-]+==' "$REQS" | sed 's/ .*//' | tr 'A-Z_.' 'a-z--' | sort)"
  if [[ "$("$VENV/bin/python" -m pip freeze --all 2>/dev/null | tr 'A-Z_.' 'a-z--' | sort | comm -13 - <(echo "$want"))" == "" ]]; then
    echo "template linters already installed in $VENV"
    return 0
  fi
  # Wheels only first (fast, no compiler); fall back to sdists where a platform has no wheel.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes --only-binary=:all: -r "$REQS" 2>/dev/null \
  || "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes -r "$REQS"
  echo "installed cfn-lint $(version cfn-lint), cfn-lint-serverless $(version cfn-lint-serverless), checkov $(version checkov) in $VENV"
}

version() { "$VENV/bin/python" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }

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
