#!/usr/bin/env bash
# Issue 14's H200 study (studies/experiments/h200-qwen3-8b-confirm.yaml), through study.sh (its header has the calls
# and what to carry). It continues from $CARRIED (default .h200/confirm-study.db) when that is carried on
# the start call:
#   mkdir -p .h200 && cp benchmarks/results/h200-qwen3-8b-confirm/study.db .h200/confirm-study.db
# A second study of the same spec keeps its own storage: CARRIED=.h200/confirm2-study.db (results in
# benchmarks/results/h200-qwen3-8b-confirm-2/).
SPEC=studies/experiments/h200-qwen3-8b-confirm.yaml W=/tmp/nova-confirm CARRIED=${CARRIED:-.h200/confirm-study.db} \
  exec bash "$(dirname "$0")/study.sh" "$@"
