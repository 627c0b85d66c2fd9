#!/usr/bin/env bash
# Issue 17: every drafter of the reference study booted and measured on the Qwen3-8B shape
# (studies/experiments/h200-qwen3-8b-drafters.yaml: the tuned stack, then EAGLE-3, DFlash, a draft model and n-gram,
# random weights), through study.sh (its header has the calls and what to carry). `start` first writes
# the drafter folders (benchmarks/gpu/make_drafters.py: .gpu/model -> .gpu/drafters).
set -uo pipefail
export SPEC=studies/experiments/h200-qwen3-8b-drafters.yaml W=/tmp/nova-drafters CARRIED=.h200/drafters-study.db
if [ "${1:-}" = start ]; then
  python3 -m benchmarks.gpu.make_drafters || exit 1
fi
exec bash "$(dirname "$0")/study.sh" "$@"
