#!/usr/bin/env bash
# The tests, in tiers by cost (the markers in pyproject.toml). Installs what it needs first (scripts/setup.sh).
#   bash scripts/test.sh [PYTEST ARGS]        unit, stand-in and PostgreSQL tests (minutes)
#   bash scripts/test.sh --all [PYTEST ARGS]  every tier: adds the real vLLM engine, headless Chromium and
#                                             the committed results under benchmarks/results/ (CI, .ci/run)
# PostgreSQL: NOVA_TEST_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/test) must be reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
all=false
tier=(-m "not engine and not browser and not recorded")
if [ "${1:-}" = "--all" ]; then
  shift
  all=true
  tier=(-m "")
fi
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
exec .venv/bin/python -m pytest "${tier[@]}" -p no:cacheprovider "$@"
