#!/usr/bin/env bash
# The main job: a small real study of vLLM (CPU build) serving the tiny local model, stored in SQLite
# (./nova.db). Installs what it needs first (scripts/setup.sh). Extra arguments go to `nova-search run`.
set -euo pipefail
cd "$(dirname "$0")/.."
NOVA_ENGINE_PYTHON=$(bash scripts/setup.sh)
export NOVA_ENGINE_PYTHON
exec .venv/bin/nova-search run studies/tiny-cpu.yaml --study-name "tiny-cpu-$(date +%Y%m%d-%H%M%S)" "$@"
