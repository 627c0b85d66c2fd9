#!/usr/bin/env bash
# One nova study on a GPU node (the `device` tool's H100 or H200), one call at a time (each call within
# 30 s of the last, so /tmp and the worker survive between them), from the repository root. The
# wrappers beside it name the study: confirm_study.sh (issue 14), trained_study.sh (issue 17, the
# trained pair), drafters_study.sh (issue 17, every drafter on the Qwen3-8B shape),
# qwen3_30b_eagle3_study.sh (issue 49, the reference's Qwen3-30B-A3B + EAGLE-3 on an H100),
# gemma4_dflash_study.sh (issue 50, the reference's Gemma-4-31B + DFlash on an H100). Set by them:
#   SPEC     the spec (studies/....yaml)      W        the work folder on the machine (the spec's
#   CARRIED  a storage to continue from                artifacts_dir is W/artifacts)
#   EXTRA    files to collect beside the storage (at most 1: the tool returns 8 files a call)
#
#   bash .../X_study.sh install                  # carry .gpu/p1 .gpu/install.sh .gpu/untar.py .gpu/manifest.txt
#   bash .../X_study.sh install | tail -3 && STOP_AFTER=1000 bash .../X_study.sh start   # + .gpu/p2 .gpu/model
#   bash .../X_study.sh watch 540                # until the worker is done or 540 s pass; then collects
#                                                # (and packs the cache once the worker is done, EXTRA unset)
#   bash .../X_study.sh collect                  # -> $OUT: storage, dump, policy, status, logs
#   bash .../X_study.sh cache                    # -> $OUT/vllm-cache.tar.xz: the node's compile cache
#
# The storage is SQLite on the machine (W/study.db). Every `watch` ends by collecting it, so each
# call's reply holds the storage as it stood: a machine given back between two calls loses at most
# the trial that was running. A study that does not finish continues in a later session from the
# collected study.db, carried as CARRIED. vLLM's compile cache is keyed the same on every GPU of a kind, so it
# can go along too (a boot that loads it: 87 s, against 115 s compiling; benchmarks/results/h200-cache-carry):
# `cache` after the last watch, then its file carried beside the storage as CARRIED's name with
# -vllm-cache.tar.xz for .db (.h200/confirm-study-vllm-cache.tar.xz), or named by CACHE_CARRIED;
# `start` unpacks it.
set -uo pipefail
: "${SPEC:?set by the wrapper}" "${W:?set by the wrapper}" "${CARRIED:?set by the wrapper}"
OUT=${OUT:-/tmp/nova-out}
mkdir -p "$OUT" "$W"
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export PYTHONUNBUFFERED=1 NOVA_ENGINE_PYTHON=python3 VLLM_CACHE_ROOT=$W/vllm-cache
STUDY=$(sed -n 's/^name: *//p' "$SPEC")
DB=$W/study.db
CACHE_CARRIED=${CACHE_CARRIED:-${CARRIED%.db}-vllm-cache.tar.xz}
nova() { python3 -m nova_search "$@"; }
running() { [ -f "$W/worker.pid" ] && kill -0 "$(cat "$W/worker.pid")" 2> /dev/null; }

case "${1:-}" in
  install)
    bash .gpu/install.sh
    ;;
  start)
    shift
    [ -f /tmp/site/.complete ] || { echo "bundle incomplete"; exit 1; }
    if [ ! -f "$DB" ] && [ -f "$CARRIED" ]; then
      cp "$CARRIED" "$DB" && echo "continuing the study from the carried copy of its storage"
    fi
    bash "$0" restore
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
      nproc | sed 's/^/cores: /'
      free -g; } | tee -a "$W/machine.txt"
    setsid nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 1 \
      >> "$W/gpu.csv" 2> /dev/null < /dev/null &
    setsid python3 -m nova_search run "$SPEC" --storage "sqlite:///$DB" --gpus 0 \
      --stop-after "${STOP_AFTER:-100000}" "$@" > "$W/worker.log" 2>&1 < /dev/null &
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
    grep -E "trial [0-9]+ (COMPLETE|PRUNED|FAIL)|leader|let go|stage" "$W/worker.log" | tail -20
    tail -3 "$W/worker.log"
    bash "$0" collect > /dev/null
    # a finished worker's watch packs the compile cache too (the 8th file), so no later call has to
    # reach the machine within 30 s for it
    if ! running && [ -z "${EXTRA:-}" ]; then bash "$0" cache > /dev/null; fi
    echo "collected: $(ls "$OUT" | tr '\n' ' ')"
    ;;
  collect)
    cp "$DB" "$OUT/study.db"
    gzip -c "$W/gpu.csv" > "$OUT/gpu.csv.gz"
    { cat "$W/machine.txt"; cat "$W/worker.log"; } 2> /dev/null | gzip > "$OUT/worker.log.gz"
    nova status "$STUDY" --storage "sqlite:///$DB" > "$OUT/status.txt" 2>&1
    # dump's own "wrote <file>" line is not a status; its errors are
    nova dump "$STUDY" --storage "sqlite:///$DB" -o "$OUT/study.json" 2>&1 | grep -v '^wrote ' >> "$OUT/status.txt"
    nova policy "$STUDY" --storage "sqlite:///$DB" --format json > "$OUT/policy.json" 2>> "$OUT/status.txt"
    tar -C "$W" -czf "$OUT/server-logs.tgz" artifacts 2> /dev/null
    [ -n "${EXTRA:-}" ] && cp "$EXTRA" "$OUT/" 2> /dev/null
    tail -40 "$OUT/status.txt"
    ;;
  restore)
    if [ ! -d "$VLLM_CACHE_ROOT" ] && [ -f "$CACHE_CARRIED" ]; then
      tar -C "$W" -xJf "$CACHE_CARRIED" && echo "compile cache from $CACHE_CARRIED: $(du -sh "$VLLM_CACHE_ROOT" | cut -f1)"
    fi
    ;;
  cache)
    running && echo "note: the worker is still running; the cache may be mid-write"
    tar -C "$W" -I "xz -T0" -cf "$OUT/vllm-cache.tar.xz" vllm-cache && ls -la "$OUT/vllm-cache.tar.xz"
    ;;
  *)
    echo "usage: $0 install | start [nova run flags] | watch [SECONDS] | collect | cache" >&2
    exit 2
    ;;
esac
