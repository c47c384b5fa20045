#!/usr/bin/env bash
# Mutation score of the project's core packages, measured with gremlins
# (github.com/go-gremlins/gremlins, pinned below): the tool draws its own
# mutants (conditionals negated and moved across their boundary, arithmetic
# swapped, increments inverted, signs inverted), runs each package's own
# tests against each one, and a mutant the tests still pass on is a survivor.
#
# It never mutates the working tree: it exports MUTATE_REF (default HEAD,
# so uncommitted changes are not measured) with git archive into a temporary
# directory, runs there, and removes it afterwards. gremlins itself copies
# that directory again for each worker.
#
# Usage: bench/mutate/mutate.sh            (make mutate runs it with the emulator up)
#        bench/mutate/mutate.sh --summary  (the summary of the runs in MUTATE_OUT again)
#   MUTATE_PKGS     packages, default pkg/intentseal, pkg/digest, pkg/ledger,
#                   the packages of internal/usecase but assemble, and internal/dynamostore
#   MUTATE_WORKERS  mutants tested at once, default 1 (each runs go test)
#   MUTATE_TIMEOUT_COEFFICIENT  a mutant's test run may take this many times the
#                   unmutated run (coverage included) before it counts as TIMED OUT, default 3
#   MUTATE_OUT      where the logs, JSON results and summary go, default .run/mutate
#
# internal/dynamostore's tests need the emulator (about 15 s a run): it runs in a
# pass of its own, last, with LEDGER_REQUIRE_EMULATOR=1 so a test that cannot
# reach the emulator fails instead of skipping, and is left out, saying so,
# when nothing answers on AWS_ENDPOINT_URL (default http://127.0.0.1:$MINISTACK_PORT).
#
# Prints per package and in all: killed, lived (survivors), not covered,
# timed out, not viable, the efficacy (killed / (killed + lived), gremlins'
# figure), the mutant coverage ((killed + lived + timed out) / all but not viable) and
# the score ((killed + timed out) / all but not viable); then every survivor
# with its source line. gremlins runs only the mutated package's tests (a
# mutant only sim/ or internal/handler would catch survives here), and
# reports conditions in a tagless switch as not covered whether or not a
# test reaches them (go-gremlins/gremlins issue 298).
set -euo pipefail

GREMLINS_MODULE=github.com/go-gremlins/gremlins/cmd/gremlins
GREMLINS_VERSION=v0.6.0

repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
pkgs=${MUTATE_PKGS:-pkg/intentseal pkg/digest pkg/ledger internal/usecase/claim internal/usecase/dispatch internal/usecase/reconcile internal/usecase/expire internal/usecase/evidence internal/usecase/resolve internal/usecase/sending internal/usecase/pacing internal/usecase/admission internal/dynamostore}
workers=${MUTATE_WORKERS:-1}
coefficient=${MUTATE_TIMEOUT_COEFFICIENT:-3}
out=${MUTATE_OUT:-$repo/.run/mutate}
[[ "$out" == /* ]] || out="$PWD/$out"
endpoint=${AWS_ENDPOINT_URL:-http://127.0.0.1:${MINISTACK_PORT:-4566}}

# count STATUS LOG: the mutants of LOG in STATUS.
count() { grep -c "^ *$1 " "$2" || true; }

# row NAME KILLED LIVED UNCOVERED TIMEDOUT NOTVIABLE
row() {
  awk -v p="$1" -v k="$2" -v l="$3" -v n="$4" -v t="$5" -v v="$6" 'BEGIN {
    a = k + l + n + t
    e = (k + l) ? sprintf("%.1f%%", 100 * k / (k + l)) : "-"
    c = a ? sprintf("%.1f%%", 100 * (k + l + t) / a) : "-"
    s = a ? sprintf("%.1f%%", 100 * (k + t) / a) : "-"
    printf "%-18s %6d %6d %8d %7d %6d %9s %9s %7s\n", p, k, l, n, t, v, e, c, s }'
}

# summary: the table and the survivors of every package whose log is in $out.
summary() {
  local log pkg commit k l n t v tk=0 tl=0 tn=0 tt=0 tv=0
  printf '%-18s %6s %6s %8s %7s %6s %9s %9s %7s\n' package killed lived uncov timeout unviab efficacy coverage score
  for log in "$out"/*.log; do
    [[ -e "$log" ]] || continue
    pkg=$(sed -n 's/^mutate: package //p' "$log")
    [[ -n "$pkg" ]] || continue
    k=$(count KILLED "$log") l=$(count LIVED "$log") n=$(count 'NOT COVERED' "$log")
    t=$(count 'TIMED OUT' "$log") v=$(count 'NOT VIABLE' "$log")
    row "$pkg" "$k" "$l" "$n" "$t" "$v"
    tk=$((tk + k)) tl=$((tl + l)) tn=$((tn + n)) tt=$((tt + t)) tv=$((tv + v))
  done
  row all "$tk" "$tl" "$tn" "$tt" "$tv"
  echo
  echo "survivors (LIVED: the package's own tests pass with this mutant), file:line:column, mutant, the line:"
  for log in "$out"/*.log; do
    pkg=$(sed -n 's/^mutate: package //p' "$log")
    commit=$(sed -n 's/^mutate: commit //p' "$log")
    [[ -n "$pkg" ]] || continue
    echo "$pkg (commit $commit):"
    { grep '^ *LIVED ' "$log" || true; } | while read -r _ kind _ at; do
      local file=${at%%:*} rest=${at#*:}
      printf '  %s:%s %s: %s\n' "$file" "$rest" "$kind" \
        "$(git -C "$repo" show "$commit:$pkg/$file" | sed -n "${rest%%:*}p" | sed 's/^[[:space:]]*//')"
    done
  done
}

if [[ "${1:-}" == --summary ]]; then
  summary
  exit 0
fi

commit=$(git -C "$repo" rev-parse --verify "${MUTATE_REF:-HEAD}^{commit}")
tree=$(mktemp -d "${TMPDIR:-/tmp}/resetledger-mutate.XXXXXX")
cleanup() { chmod -R u+w "$tree" 2>/dev/null || true; rm -rf "$tree"; }
trap cleanup EXIT
mkdir -p "$out" "$tree/src"
git -C "$repo" archive "$commit" | tar -x -C "$tree/src"

GOBIN="$tree/bin" go install "$GREMLINS_MODULE@$GREMLINS_VERSION"
gremlins="$tree/bin/gremlins"

emulator_up() {
  local hostport=${endpoint#*://}
  hostport=${hostport%%/*}
  (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null
}

rm -f "$out"/*.log "$out"/*.json "$out/summary.txt"
echo "mutate: commit $commit, gremlins $GREMLINS_VERSION, workers $workers, timeout coefficient $coefficient"
for pkg in $pkgs; do
  log="$out/${pkg//\//-}.log"
  rm -f "$log"
  env_extra=()
  if [[ "$pkg" == internal/dynamostore ]]; then
    if ! emulator_up; then
      echo "mutate: $pkg left out: no emulator answers on $endpoint (make mutate starts one)"
      continue
    fi
    env_extra=(LEDGER_REQUIRE_EMULATOR=1 AWS_ENDPOINT_URL="$endpoint")
  fi
  echo "mutate: $pkg ..."
  start=$(date +%s)
  if ! (cd "$tree/src" && env "${env_extra[@]}" nice "$gremlins" unleash \
      --workers "$workers" --timeout-coefficient "$coefficient" \
      --output "$out/${pkg//\//-}.json" "./$pkg") >"$log.part" 2>&1; then
    echo "mutate: gremlins failed on $pkg; its log:"
    cat "$log.part"
    exit 1
  fi
  { echo "mutate: package $pkg"; echo "mutate: commit $commit"; cat "$log.part"; } >"$log"
  rm -f "$log.part"
  echo "mutate: $pkg done in $(($(date +%s) - start)) s"
done

summary | tee "$out/summary.txt"
echo "mutate: logs and JSON results in $out"
