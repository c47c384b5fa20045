# shellcheck shell=bash
# The shared parts of the scripts in localstack/ and lint/. Sourced, never run:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"            (from localstack/)
#   source "$(dirname "${BASH_SOURCE[0]}")/../localstack/lib.sh" (from lint/)
# It sets ROOT (the repository), RUN_DIR (<repo>/.run) and MS (ministack.sh),
# and defines the helpers below. It changes no shell options: each script sets
# its own `set -euo pipefail`, which also ends the help text usage prints.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="$ROOT/.run"
MS="$ROOT/localstack/ministack.sh"
# The script that sourced this file: its name prefixes die's messages and its
# header comment is its help text.
LIB_SCRIPT="${BASH_SOURCE[1]}"

die() { echo "$(basename "$LIB_SCRIPT"): $*" >&2; exit 1; }

# Prints the script's header comment (from line 2 to `set -euo`) without the '#'.
usage() {
  sed -n '2,/^set -euo/p' "$LIB_SCRIPT" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

# step prints a progress line with the seconds since the script started.
T0=$SECONDS
step() { printf '==> [%3ds] %s\n' $((SECONDS - T0)) "$*"; }

# port_open PORT [HOST]: true if something accepts TCP connections on
# HOST:PORT (default 127.0.0.1); no curl needed.
port_open() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# pid_is PID NAME: true if PID is a number, that process is alive and, where
# its command line can be read, the command line contains NAME (a guard
# against a reused pid).
pid_is() {
  local pid="$1" name="$2"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r "/proc/$pid/cmdline" ]]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$name" || return 1
  fi
}

# wait_exit PID TENTHS: waits up to TENTHS tenths of a second for PID to exit.
wait_exit() {
  local i
  for ((i = 0; i < $2; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
}

# Background processes. A script that starts one (ministack.sh start: the
# emulator; deploy-local.sh: the webhook provider) starts it with setsid, so its
# pid is also its process group, writes the pid to $RUN_DIR/<name>-<port>.pid
# and calls record_started. with-emulator.sh and run-local.sh set
# LEDGER_STARTED to a file for the run and stop_recorded what it lists when
# they end. Processes are only ever stopped by these recorded pids, never by name.

# record_started PID NAME PORT: appends "PID NAME PORT" to $LEDGER_STARTED, if set.
record_started() {
  if [[ -n "${LEDGER_STARTED:-}" ]]; then echo "$1 $2 $3" >>"$LEDGER_STARTED"; fi
}

# stop_pid PID NAME: if PID is still NAME (pid_is), sends SIGTERM to its
# process group (or to PID alone if it leads none), SIGKILL after 10 s.
stop_pid() {
  pid_is "$1" "$2" || return 0
  kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null || true
  wait_exit "$1" 100
  if kill -0 "$1" 2>/dev/null; then
    echo "$2 (pid $1) ignored SIGTERM for 10s; sending SIGKILL" >&2
    kill -KILL -- "-$1" 2>/dev/null || kill -KILL "$1" 2>/dev/null || true
    wait_exit "$1" 50
  fi
}

# stop_recorded FILE: stops every process FILE lists (record_started), the
# last started first, and removes its pid file if that still names it. FILE is
# kept: make test checks it afterwards (localstack/leftover_test.go).
stop_recorded() {
  [[ -s "$1" ]] || return 0
  local pid name port pid_file
  while read -r pid name port; do
    if pid_is "$pid" "$name"; then
      stop_pid "$pid" "$name"
      echo "$(basename "$LIB_SCRIPT"): stopped $name (pid $pid) on 127.0.0.1:$port"
    fi
    pid_file="$RUN_DIR/$name-$port.pid"
    if [[ "$(cut -d' ' -f1 "$pid_file" 2>/dev/null)" == "$pid" ]]; then rm -f "$pid_file"; fi
  done < <(tac "$1")
}

# outputs_file STAGE: where deploy-local.sh writes the stack outputs of STAGE.
outputs_file() {
  if [[ "$1" == local ]]; then echo "$RUN_DIR/outputs.json"; else echo "$RUN_DIR/outputs-$1.json"; fi
}

# use_emulator start [MESSAGE] | use_emulator require: unless AWS_ENDPOINT_URL
# is set, points the AWS_* variables at ministack on
# 127.0.0.1:${MINISTACK_PORT:-4566}. With start, ministack is installed and
# started there first if nothing answers (after a step line MESSAGE, if
# given; ministack.sh records its pid: record_started); with require, nothing
# answering is fatal.
use_emulator() {
  [[ -z "${AWS_ENDPOINT_URL:-}" ]] || return 0
  if ! "$MS" status >/dev/null 2>&1; then
    [[ "$1" == start ]] ||
      die "no emulator on 127.0.0.1:${MINISTACK_PORT:-4566}; start one with: localstack/ministack.sh install && localstack/ministack.sh start (or run localstack/run-local.sh)"
    if [[ -n "${2:-}" ]]; then step "$2"; fi
    "$MS" install
    "$MS" start
  fi
  eval "$("$MS" env)"
}

# default_credentials exports the region and the emulator's static test
# credentials unless they are set already.
default_credentials() {
  export AWS_REGION="${AWS_REGION:-us-east-1}"
  export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
}

# venv_create VENV: creates the virtualenv VENV with ${PYTHON:-python3} unless it exists.
venv_create() {
  local py="${PYTHON:-python3}"
  command -v "$py" >/dev/null || die "$py not found (set PYTHON=...)"
  if [[ ! -x "$1/bin/python" ]]; then
    echo "creating venv $1"
    mkdir -p "$(dirname "$1")"
    "$py" -m venv "$1"
  fi
}

# venv_current VENV REQS: true if every package pinned in REQS is installed in
# VENV at its pinned version (names and versions compared case-, '_'- and
# '.'-insensitively), so pip can be skipped.
venv_current() {
  local want
  want="$(grep -E '^[A-Za-z0-9_.-]+==' "$2" | sed 's/ .*//' | tr 'A-Z_.' 'a-z--' | sort)"
  [[ "$("$1/bin/python" -m pip freeze --all 2>/dev/null | tr 'A-Z_.' 'a-z--' | sort | comm -13 - <(echo "$want"))" == "" ]]
}

# venv_install VENV REQS: installs the hash-pinned REQS into VENV, wheels only
# first (fast, no compiler), then with sdists where a platform has no wheel.
venv_install() {
  "$1/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes --only-binary=:all: -r "$2" 2>/dev/null \
  || "$1/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes -r "$2"
}

# pip_version VENV PACKAGE: the installed version of PACKAGE, or nothing.
pip_version() { "$1/bin/python" -m pip show "$2" 2>/dev/null | sed -n 's/^Version: //p'; }
