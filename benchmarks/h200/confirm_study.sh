#!/usr/bin/env bash
# Issue 14's H200 study (studies/h200-qwen3-8b-confirm.yaml), one `device` call at a time (kind
# nvidia-h200; each call within 30 s of the last, so /tmp and the worker survive between them), from the
# repository root:
#
#   bash benchmarks/h200/confirm_study.sh install   # carry .gpu/p1 .gpu/install.sh .gpu/untar.py .gpu/manifest.txt
#   bash benchmarks/h200/confirm_study.sh install   # carry .gpu/p2 and .gpu/model too
#   STOP_AFTER=1100 bash benchmarks/h200/confirm_study.sh start  # the worker, in the background; it
#                                                   # starts no trial after STOP_AFTER s (carry .h200 to continue)
#   bash benchmarks/h200/confirm_study.sh watch 560 # until the worker is done or 560 s pass (repeat), then
#                                                   # collect
#   bash benchmarks/h200/confirm_study.sh collect   # -> $OUT: study.db, dump, status, worker log, GPU samples
#
# The storage is SQLite on the machine (/tmp/nova-confirm/study.db). Every `watch` ends by collecting it,
# so each call's reply holds the storage as it stood: a machine given back between two calls (a call
# more than 30 s after the last) loses at most the trial that was running, not the trials it completed.
# A study that does not finish in one session continues in the next from the collected study.db,
# carried as .h200/confirm-study.db. At most 6 files reach $OUT per call (the tool returns 8).
set -uo pipefail
OUT=${OUT:-/tmp/nova-out}
W=/tmp/nova-confirm
mkdir -p "$OUT" "$W"
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export PYTHONUNBUFFERED=1 NOVA_ENGINE_PYTHON=python3 VLLM_CACHE_ROOT=$W/vllm-cache
STUDY=h200-qwen3-8b-confirm
DB=$W/study.db
nova() { python3 -m nova_search "$@"; }
running() { [ -f "$W/worker.pid" ] && kill -0 "$(cat "$W/worker.pid")" 2> /dev/null; }

case "${1:-}" in
  install)
    bash .gpu/install.sh
    ;;
  start)
    [ -f /tmp/site/.complete ] || { echo "bundle incomplete"; exit 1; }
    if [ ! -f "$DB" ] && [ -f .h200/confirm-study.db ]; then
      cp .h200/confirm-study.db "$DB" && echo "continuing the study from the carried copy of its storage"
    fi
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
      nproc | sed 's/^/cores: /'
      free -g; } | tee "$W/machine.txt"
    setsid nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 1 \
      >> "$W/gpu.csv" 2> /dev/null < /dev/null &
    setsid python3 -m nova_search run studies/h200-qwen3-8b-confirm.yaml --storage "sqlite:///$DB" --gpus 0 \
      --stop-after "${STOP_AFTER:-100000}" > "$W/worker.log" 2>&1 < /dev/null &
    echo $! > "$W/worker.pid"
    date +%s > "$W/started"
    sleep 5
    tail -5 "$W/worker.log"
    ;;
  watch)
    limit=${2:-560}
    t0=$(date +%s)
    while running && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
      sleep 10
    done
    running && echo "worker still running after $limit s" || echo "worker done"
    echo "study time so far: $(( $(date +%s) - $(cat "$W/started") )) s"
    grep -E "trial [0-9]+ (COMPLETE|PRUNED|FAIL)|leader|let go" "$W/worker.log" | tail -20
    tail -3 "$W/worker.log"
    bash "$0" collect > /dev/null
    echo "collected: $(ls "$OUT" | tr '\n' ' ')"
    ;;
  collect)
    cp "$DB" "$OUT/study.db"
    gzip -c "$W/gpu.csv" > "$OUT/gpu.csv.gz"
    { cat "$W/machine.txt"; cat "$W/worker.log"; } 2> /dev/null | gzip > "$OUT/worker.log.gz"
    nova status "$STUDY" --storage "sqlite:///$DB" > "$OUT/status.txt" 2>&1
    nova dump "$STUDY" --storage "sqlite:///$DB" --format json > "$OUT/study.json" 2>> "$OUT/status.txt"
    tar -C "$W" -czf "$OUT/server-logs.tgz" artifacts 2> /dev/null
    cat "$OUT/status.txt" | tail -40
    ;;
  *)
    echo "usage: $0 install | start | watch [SECONDS] | collect" >&2
    exit 2
    ;;
esac
