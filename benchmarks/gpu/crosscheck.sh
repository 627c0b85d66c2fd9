#!/usr/bin/env bash
# The H200 cross-check (issue 16), in steps the `device` tool can run one call at a time from the
# repository root (each call within 30 s of the last, so /tmp and the server survive between them):
#
#   bash benchmarks/gpu/crosscheck.sh install     # carry .gpu/p1 (then again with .gpu/p2): the bundle
#   bash benchmarks/gpu/crosscheck.sh serve       # carry .gpu/model: vLLM 0.26.0 on cores 0-7, detached
#   bash benchmarks/gpu/crosscheck.sh measure     # nova vs vllm bench serve on cores 8-15 -> $OUT
#                                                  (every run's requests in $OUT/requests.tar)
#
# The server: the Qwen3-8B shape with dummy weights (.gpu/model, made by .gpu/make_bundle.sh), no API
# key, max_num_seqs 512 (the c=512 shape runs one full wave), max_model_len 4096 (2048-token prompts),
# API_SERVERS front-end processes (default 4). FIRST_PAIR=K numbers a later call's pairs from K, so
# its ABBA order and seeds continue an earlier call's.
set -uo pipefail
OUT=${OUT:-/tmp/nova-out}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export PYTHONUNBUFFERED=1
PORT=8000
case "${1:-}" in
  install)
    bash .gpu/install.sh | tee "$OUT/install.txt"
    ;;
  serve)
    bash .gpu/install.sh | tail -1
    [ -f /tmp/site/.complete ] || { echo "bundle incomplete"; exit 1; }
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
    nproc | sed 's/^/cores: /' | tee -a "$OUT/gpu.txt"
    # which cores share a physical core: the server on 0-7 and the clients on 8-15 only stay apart
    # if no client core is a hyperthread sibling of a server core
    lscpu | grep -E '^(Model name|Thread|Core|Socket|NUMA node)' | tee -a "$OUT/gpu.txt"
    for c in 0 7 8 15; do
      echo "cpu$c siblings: $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"
    done | tee -a "$OUT/gpu.txt"
    cp -r .gpu/model /tmp/model
    # API_SERVERS front-end processes (vLLM's --api-server-count, default 4): with one, the API
    # server's own CPU sets the pace at c=512 (README, "Split or not"), not the GPU
    launch() {
      setsid taskset -c 0-7 python3 -m vllm.entrypoints.cli.main serve /tmp/model \
        --served-model-name qwen3-8b --load-format dummy --max-num-seqs 512 --max-model-len 4096 \
        --api-server-count "$1" --host 127.0.0.1 --port "$PORT" > /tmp/server.log 2>&1 < /dev/null &
      echo $! > /tmp/server.pid
    }
    healthy() {  # until /health answers; 1 when the server died or 400 s passed
      local start=$(date +%s)
      until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
        sleep 2
        kill -0 "$(cat /tmp/server.pid)" 2> /dev/null || return 1
        [ $(( $(date +%s) - start )) -gt 400 ] && return 1
      done
      echo "healthy after $(( $(date +%s) - start )) s with --api-server-count $2" | tee "$OUT/serve.txt"
      echo "$2" > /tmp/api_servers
    }
    n=${API_SERVERS:-4}
    launch "$n"
    if ! healthy "$n" "$n"; then
      tail -40 /tmp/server.log; cp /tmp/server.log "$OUT/server-failed.log"
      [ "$n" = 1 ] && exit 1
      echo "--api-server-count $n failed: falling back to 1" | tee "$OUT/serve.txt"
      kill -- -"$(cat /tmp/server.pid)" 2> /dev/null; sleep 5
      launch 1
      healthy 1 1 || { tail -50 /tmp/server.log; exit 1; }
    fi
    cp /tmp/server.log "$OUT/server-boot.log"
    ;;
  measure)
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null || { echo "no server"; tail -30 /tmp/server.log; exit 1; }
    python3 -m benchmarks.gpu.crosscheck_h200 --url "http://127.0.0.1:$PORT" --model qwen3-8b \
      --tokenizer /tmp/model --client-cpus 8-15 --pairs "${PAIRS:-3}" --budget-s "${BUDGET_S:-420}" \
      --out "$OUT/crosscheck-h200" ${SHAPES:+--shapes "$SHAPES"} ${PROCESSES:+--processes "$PROCESSES"} \
      --first-pair "${FIRST_PAIR:-0}" --api-servers "$(cat /tmp/api_servers 2> /dev/null || echo 1)"
    rc=$?
    # the device returns at most 8 files a call: every run's request rows travel as one tar
    if [ -d "$OUT/crosscheck-h200/requests" ]; then
      tar cf "$OUT/requests.tar" -C "$OUT/crosscheck-h200" requests && rm -r "$OUT/crosscheck-h200/requests"
    fi
    tail -c 200000 /tmp/server.log > "$OUT/server.log"
    exit $rc
    ;;
  *)
    echo "usage: bash benchmarks/gpu/crosscheck.sh install|serve|measure" >&2
    exit 2
    ;;
esac
