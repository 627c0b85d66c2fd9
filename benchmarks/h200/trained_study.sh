#!/usr/bin/env bash
# Issue 17 on the H200: the GPU pair trained there, then the staged study on it
# (studies/trained-h200-speculative.yaml). One `device` call at a time (kind nvidia-h200; each within
# 30 s of the last, so /tmp and the worker survive between them), from the repository root:
#
#   bash benchmarks/h200/trained_study.sh install  # carry .gpu/p1 .gpu/install.sh .gpu/untar.py .gpu/manifest.txt
#   bash benchmarks/h200/trained_study.sh install && bash benchmarks/h200/trained_study.sh train
#                                                  # carry .gpu/p2 too; trains in about 6 minutes
#   STOP_AFTER=900 bash benchmarks/h200/trained_study.sh start   # the worker, in the background
#   bash benchmarks/h200/trained_study.sh watch 540  # until the worker is done or 540 s pass; collects
#   bash benchmarks/h200/trained_study.sh collect    # -> $OUT (at most 8 files)
#
# The pair is built into .gpu/trained (the spec's model path) and its report comes back with every
# collect. The storage is SQLite on the machine; every watch brings it back, so a machine given back
# between calls loses at most the trial that was running. A study that does not finish continues from
# the collected study.db, carried as .h200/trained-study.db (the pair must then be trained again: its
# plan is seeded, so the same plan on the same bundle gives the same corpus, tokenizer and schedule).
set -uo pipefail
OUT=${OUT:-/tmp/nova-out}
W=/tmp/nova-trained
mkdir -p "$OUT" "$W"
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export PYTHONUNBUFFERED=1 NOVA_ENGINE_PYTHON=python3 VLLM_CACHE_ROOT=$W/vllm-cache
STUDY=trained-h200-speculative
DB=$W/study.db
PAIR=.gpu/trained
nova() { python3 -m nova_search "$@"; }
running() { [ -f "$W/worker.pid" ] && kill -0 "$(cat "$W/worker.pid")" 2> /dev/null; }

case "${1:-}" in
  install)
    bash .gpu/install.sh
    ;;
  train)
    [ -f /tmp/site/.complete ] || { echo "bundle incomplete"; exit 1; }
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
      nproc | sed 's/^/cores: /'; } | tee "$W/machine.txt"
    start=$(date +%s)
    nova trained-model "$PAIR" --size gpu --corpus /tmp/site 2> "$W/train.log"
    rc=$?
    echo "trained-model: rc $rc in $(( $(date +%s) - start )) s"
    grep -E "time budget|step [0-9]+ loss" "$W/train.log" | tail -12
    cp "$PAIR/report.json" "$OUT/pair-report.json" 2> /dev/null
    gzip -c "$W/train.log" > "$OUT/train.log.gz"
    exit $rc
    ;;
  start)
    [ -f "$PAIR/report.json" ] || { echo "no pair at $PAIR: run train first"; exit 1; }
    if [ ! -f "$DB" ] && [ -f .h200/trained-study.db ]; then
      cp .h200/trained-study.db "$DB" && echo "continuing the study from the carried copy of its storage"
    fi
    n=$(nproc)   # the server on all but the last 4 cores, the load generator on those 4
    server_cpus="[$(seq -s, 0 $((n - 5)))]"
    setsid nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 1 \
      >> "$W/gpu.csv" 2> /dev/null < /dev/null &
    setsid python3 -m nova_search run studies/trained-h200-speculative.yaml --storage "sqlite:///$DB" --gpus 0 \
      --set "engine.cpus=$server_cpus" --set "sweep.client_cpus=$((n - 4))-$((n - 1))" \
      --stop-after "${STOP_AFTER:-100000}" > "$W/worker.log" 2>&1 < /dev/null &
    echo $! > "$W/worker.pid"
    date +%s > "$W/started"
    sleep 5
    tail -5 "$W/worker.log"
    ;;
  watch)
    limit=${2:-540}
    t0=$(date +%s)
    while running && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
      sleep 10
    done
    running && echo "worker still running after $limit s" || echo "worker done"
    echo "study time so far: $(( $(date +%s) - $(cat "$W/started") )) s"
    grep -E "trial [0-9]+ (COMPLETE|PRUNED|FAIL)|stage" "$W/worker.log" | tail -20
    tail -3 "$W/worker.log"
    bash "$0" collect > /dev/null
    echo "collected: $(ls "$OUT" | tr '\n' ' ')"
    ;;
  collect)
    cp "$DB" "$OUT/study.db"
    cp "$PAIR/report.json" "$OUT/pair-report.json" 2> /dev/null
    gzip -c "$W/gpu.csv" > "$OUT/gpu.csv.gz"
    { cat "$W/machine.txt"; cat "$W/worker.log"; } 2> /dev/null | gzip > "$OUT/worker.log.gz"
    nova status "$STUDY" --storage "sqlite:///$DB" > "$OUT/status.txt" 2>&1
    nova dump "$STUDY" --storage "sqlite:///$DB" -o "$OUT/study.json" 2>> "$OUT/status.txt"
    nova policy "$STUDY" --storage "sqlite:///$DB" --format json > "$OUT/policy.json" 2>> "$OUT/status.txt"
    tar -C "$W" -czf "$OUT/server-logs.tgz" artifacts 2> /dev/null
    tail -40 "$OUT/status.txt"
    ;;
  *)
    echo "usage: $0 install | train | start | watch [SECONDS] | collect" >&2
    exit 2
    ;;
esac
