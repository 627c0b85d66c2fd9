#!/usr/bin/env bash
# One time slot of the H200 study (issue 8), run by the `device` tool from the repository root:
#   1. bring the offline vLLM bundle's parts in (.gpu/install.sh; it unpacks once all parts are there);
#   2. continue the study `h200-qwen3-8b` in /tmp/nova-h200/study.db with nova-search itself driving
#      every trial, starting no trial after STOP_AFTER seconds so the slot ends cleanly;
#   3. copy the storage, the worker's log and the server logs to $OUT, so a later slot (or a fresh
#      machine, via a carried .h200/study.db) continues the same study and nothing is lost.
# Usage: STOP_AFTER=400 bash benchmarks/gpu/run_slot.sh
set -uo pipefail
OUT=${OUT:-/tmp/nova-out}
mkdir -p "$OUT" /tmp/nova-h200
bash .gpu/install.sh | tee "$OUT/install.txt"
[ -f /tmp/site/.complete ] || { echo "bundle incomplete: no study run in this slot"; exit 0; }
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export NOVA_ENGINE_PYTHON=python3 PYTHONUNBUFFERED=1
DB=/tmp/nova-h200/study.db
if [ ! -f "$DB" ] && [ -f .h200/study.db ]; then
  cp .h200/study.db "$DB" && echo "continuing the study from the carried copy of its storage"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
du -sh ~/.cache/vllm 2>/dev/null | sed 's/^/compile cache: /'
start=$(date +%s)
python3 -m nova_search run studies/experiments/h200-qwen3-8b.yaml --storage "sqlite:///$DB" --gpus 0 \
  --stop-after "${STOP_AFTER:-400}" 2>&1 | tee "$OUT/worker.log"
rc=${PIPESTATUS[0]}
echo "slot: nova-search exited $rc after $(( $(date +%s) - start )) s"
cp "$DB" "$OUT/study.db"
tar -C /tmp/nova-h200 -czf "$OUT/artifacts.tgz" artifacts 2>/dev/null || true
python3 -m nova_search status h200-qwen3-8b --storage "sqlite:///$DB" 2>&1 | tail -30
exit 0
