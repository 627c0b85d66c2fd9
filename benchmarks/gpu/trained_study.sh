#!/usr/bin/env bash
# Issue 17 on the H200: the GPU pair trained there, then the staged study on it
# (studies/experiments/trained-h200-speculative.yaml: tune, then ngram, draft_model and eagle3 on the tuned stack,
# concurrency 1-256), through study.sh (its header has the calls and what to carry), with one more step
# between install and start:
#   bash benchmarks/gpu/trained_study.sh install | tail -3 && bash benchmarks/gpu/trained_study.sh train
#       # + .gpu/p2; about 6 minutes: the corpus is the bundle's /tmp/site, the pair goes to .gpu/trained
# `start` pins the server to all but the machine's last 4 cores and the load generator to those 4
# (read with nproc there). A study continued in a later session needs the pair trained again: its plan
# is seeded, and the report's key says whether it is the same build.
set -uo pipefail
# SPEC picks the study: the staged one (default), or studies/experiments/trained-h200-drafters.yaml, the drafter stage
# alone, paired with the tuned baseline (for a session of its own: train, then 4 trials)
export SPEC=${SPEC:-studies/experiments/trained-h200-speculative.yaml} W=/tmp/nova-trained
export CARRIED=${CARRIED:-.h200/$(basename "$SPEC" .yaml).db}
export EXTRA=.gpu/trained/report.json
OUT=${OUT:-/tmp/nova-out}
here=$(dirname "$0")
case "${1:-}" in
  train)
    [ -f /tmp/site/.complete ] || { echo "bundle incomplete"; exit 1; }
    mkdir -p "$W" "$OUT"
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
    start=$(date +%s)
    python3 -m nova_search trained-model .gpu/trained --size gpu --corpus /tmp/site --engine-python python3 \
      2> "$W/train.log"
    rc=$?
    echo "trained-model: rc $rc in $(( $(date +%s) - start )) s"
    grep -E "time budget|step [0-9]+ loss" "$W/train.log" | tail -12
    cp .gpu/trained/report.json "$OUT/pair-report.json" 2> /dev/null
    gzip -c "$W/train.log" > "$OUT/train.log.gz"
    exit $rc
    ;;
  start)
    [ -f .gpu/trained/report.json ] || { echo "no pair in .gpu/trained: run train first"; exit 1; }
    n=$(nproc)
    exec bash "$here/study.sh" start --set "engine.cpus=[$(seq -s, 0 $((n - 5)))]" \
      --set "sweep.client_cpus=$((n - 4))-$((n - 1))"
    ;;
esac
exec bash "$here/study.sh" "$@"
