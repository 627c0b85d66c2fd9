#!/usr/bin/env bash
# The whole test suite, slow real-engine tests included. Installs what it needs first (scripts/setup.sh).
# PostgreSQL: NOVA_TEST_PG (default postgresql+psycopg://postgres@127.0.0.1:5432/test) must be reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
NOVA_ENGINE_PYTHON=$(bash scripts/setup.sh)
export NOVA_ENGINE_PYTHON
exec .venv/bin/python -m pytest -m "" -p no:cacheprovider "$@"
