#!/usr/bin/env bash
# The tests, in tiers by cost (the markers in pyproject.toml). Installs what it needs first (scripts/setup.sh).
#   bash scripts/test.sh [PYTEST ARGS]        unit, stand-in and PostgreSQL tests (minutes)
#   bash scripts/test.sh --all [PYTEST ARGS]  every tier: adds the fault-injection suite, the real vLLM
#                                             engine, headless Chromium and the committed results under
#                                             benchmarks/results/ (CI, .ci/run)
# PostgreSQL: NOVA_TEST_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/test) must be reachable.
# A plain `pytest` runs the default tier as well (pyproject's addopts), in one process; `pytest --all`
# every tier (tests/conftest.py). Each run below passes its own -m, which takes the place of addopts' one.
#
# Up to three pytest runs, each given PYTEST ARGS (a -m of yours takes the tier's place in each):
#   1. the tests marked serial, alone: they bound a timing (a schedule's lag, a CPU-bound client), and
#      other tests running beside them would be what they measure;
#   2. the rest of the default tier (with --all, the faults, browser and recorded tiers too) on
#      NOVA_TEST_WORKERS pytest-xdist workers (default 3, or -n N; 0: all in one process). Most of these
#      tests wait (stand-in engines booting, heartbeats, grace periods, worker subprocesses): three at a
#      time keep 2 cores busy, not overloaded. Each worker counts only its own stand-in engines and keeps
#      a file of tests sharing a module fixture (tests/conftest.py); every database is a fresh one
#      (nova_search/testing/pg.py), every port a free one;
#   3. --all (or a -m of yours): the engine tier, one test at a time (vLLM on the CPU takes the cores:
#      the engine on core 0, its load generator on core 1).
# The exit status is the first failing run's (pytest's 1 failed, 2 interrupted, ...); a run that selects no
# test (pytest's 5) is no failure unless none of them ran any test.
set -euo pipefail
cd "$(dirname "$0")/.."
all=false
if [ "${1:-}" = "--all" ]; then
  shift
  all=true
fi
# a -m of the caller's replaces the tier, a -n sets NOVA_TEST_WORKERS (the serial tests stay alone);
# every other argument goes to each run as given
user_tier=""
workers=${NOVA_TEST_WORKERS:-3}
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n | --numprocesses)
      [ $# -ge 2 ] || { echo "test.sh: $1 needs a number of workers" >&2; exit 4; }
      workers=$2
      shift 2
      ;;
    -n* | --numprocesses=*)
      workers=${1#-n}
      workers=${workers#--numprocesses=}
      shift
      ;;
    -m)
      [ $# -ge 2 ] || { echo "test.sh: -m needs a marker expression" >&2; exit 4; }
      user_tier=$2
      shift 2
      ;;
    -m*)
      user_tier=${1#-m}
      shift
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
case "$workers" in
  '' | *[!0-9]*)
    echo "test.sh: the number of workers (NOVA_TEST_WORKERS or -n) must be a whole number (0: none, all in one process), not '$workers'" >&2
    exit 4
    ;;
esac

NOVA_ENGINE_PYTHON=$(bash scripts/setup.sh)
export NOVA_ENGINE_PYTHON
# Chromium renders the dashboard's study page in the browser test (--all only). Only this command
# installs it, and only as root (CI is root): without root the browser test is skipped and says why.
if $all && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
  && [ "$(id -u)" -eq 0 ]; then
  echo "[test] chromium (apt-get; the dashboard test renders the study page with it)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq chromium >/dev/null 2>&1 \
    || { apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 && apt-get -o DPkg::Lock::Timeout=300 install -y -qq chromium >&2; }
fi

# PgBouncer (Debian's package) fronts a throwaway server in the PgBouncer test (--all only: the faults
# tier); the same rule as Chromium: installed as root (CI), else that test is skipped and says why.
if $all && ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ] && [ "$(id -u)" -eq 0 ]; then
  echo "[test] pgbouncer (apt-get; the PgBouncer test runs the fleet simulation through it)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq pgbouncer >/dev/null 2>&1 \
    || { apt-get -o DPkg::Lock::Timeout=300 update -qq >&2 && apt-get -o DPkg::Lock::Timeout=300 install -y -qq pgbouncer >&2; }
fi

heavy="engine or browser or recorded"  # --all only
alone="engine"                         # one test at a time
if [ -n "$user_tier" ]; then
  tier="($user_tier)"
elif $all; then
  tier=""
else
  tier="not ($heavy) and not faults"  # the faults tier waits on workers like the default tier: --all runs it beside it
fi
# "A and B" where A may be empty
both() { if [ -n "$1" ]; then echo "$1 and $2"; else echo "$2"; fi; }

status=0
ran_any=false
# run LABEL PYTEST-ARGS...: one pytest run; remembers the first failure, stops at an interruption
run() {
  local label=$1 rc=0
  shift
  echo "[test] $label" >&2
  .venv/bin/python -m pytest -p no:cacheprovider "$@" "${args[@]}" || rc=$?
  case $rc in
    0) ran_any=true ;;
    5) echo "[test] $label: no test selected" >&2 ;;
    *)
      ran_any=true
      if [ "$status" -eq 0 ]; then status=$rc; fi
      # interrupted, internal error, usage error: the next runs would say the same
      if [ "$rc" -ge 2 ]; then exit "$rc"; fi
      ;;
  esac
}

run "serial (timing) tests, alone" -m "$(both "$tier" "serial and not ($heavy)")"
# the parallel run: without --all the default tier; with it (or a -m of yours) everything but the engine tier
if $all || [ -n "$user_tier" ]; then parallel="not serial and not ($alone)"; else parallel="not serial and not ($heavy)"; fi
if [ "$workers" -gt 0 ]; then
  run "default tier, $workers workers" -n "$workers" --dist loadgroup -m "$(both "$tier" "$parallel")"
else
  run "default tier" -m "$(both "$tier" "$parallel")"
fi
if $all || [ -n "$user_tier" ]; then
  run "engine tier, one at a time" -m "$(both "$tier" "($alone)")"
fi
if ! $ran_any; then
  echo "[test] no test selected" >&2
  exit 5
fi
exit "$status"
