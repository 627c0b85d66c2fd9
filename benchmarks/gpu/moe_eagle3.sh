#!/usr/bin/env bash
# The reference study's first result in shape (issue 43): the Qwen3-30B-A3B shape (a mixture of
# experts, dummy weights) with a random-weight EAGLE-3 head, k=3, at chosen acceptance lengths through
# vLLM's synthetic rejection sampling, against the same server without a drafter, over concurrency
# 1..512. In steps the `device` tool runs one call at a time from the repository root (each call
# within 30 s of the last, so /tmp survives), with the `make_bundle.sh keep_moe` bundle:
#
#   bash benchmarks/gpu/moe_eagle3.sh install          # carry .gpu/p1, then .gpu/p2, then .gpu/p3
#   bash benchmarks/gpu/moe_eagle3.sh run none 2.2 ... # per configuration: boot, sweep, stop -> $OUT
#
# A configuration is `none` (no drafter) or an acceptance length L (1 <= L <= k+1). Each is one server:
# cores 0-7, --max-num-seqs 512 (c=512 runs one wave), --max-model-len 4096; the load (`vllm bench
# serve`, random 512 in / 256 out, --ignore-eos, n = max(4c, 8), a new seed per level and window) on
# cores 8-15. LEVELS and WINDOWS override the sweep. Writes $OUT/<config>.jsonl (one row per level and
# window: output tok/s, TTFT and TPOT) and $OUT/<config>.log (boot time, vLLM's SpecDecoding lines).
# Before the sweep, one unrecorded wave per level (WARMUP=0 skips it): without it, the first run at c=8
# on the MoE shape had a mean TTFT of 1290 ms against 260 ms at c=32 (Triton compiling MoE kernels).
set -uo pipefail
OUT=${OUT:-/tmp/nova-out}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export PYTHONUNBUFFERED=1
PORT=8000
K=${K:-3}
LEVELS=${LEVELS:-"1 8 32 128 512"}
WINDOWS=${WINDOWS:-1}
MODEL=/tmp/qwen3-30b-a3b

prepare() {
  [ -f "$MODEL/config.json" ] && return 0
  mkdir -p "$MODEL"
  cp .gpu/model/* "$MODEL"/ 2> /dev/null
  cp benchmarks/gpu/qwen3-30b-a3b-config.json "$MODEL/config.json"
  python3 -m benchmarks.gpu.make_drafters --target "$MODEL" --out /tmp/moe-drafters > "$OUT/make.txt" 2>&1 \
    || { cat "$OUT/make.txt"; return 1; }
}

serve() {  # $1: none or an acceptance length
  local spec=()
  if [ "$1" != none ]; then
    spec=(--speculative-config "{\"method\":\"eagle3\",\"model\":\"/tmp/moe-drafters/eagle3\",\
\"num_speculative_tokens\":$K,\"rejection_sample_method\":\"synthetic\",\"synthetic_acceptance_length\":$1}")
  fi
  setsid taskset -c 0-7 python3 -m vllm.entrypoints.cli.main serve "$MODEL" --served-model-name moe \
    --load-format dummy --max-num-seqs 512 --max-model-len 4096 --host 127.0.0.1 --port "$PORT" \
    "${spec[@]}" > "/tmp/server-$1.log" 2>&1 < /dev/null &
  echo $! > /tmp/server.pid
  local start=$(date +%s)
  until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
    sleep 2
    kill -0 "$(cat /tmp/server.pid)" 2> /dev/null || return 1
    [ $(( $(date +%s) - start )) -gt 420 ] && return 1
  done
  echo "config $1: healthy after $(( $(date +%s) - start )) s" | tee -a "$OUT/$1.log"
}

stop() {
  kill -- -"$(cat /tmp/server.pid)" 2> /dev/null
  for _ in $(seq 30); do kill -0 "$(cat /tmp/server.pid)" 2> /dev/null || break; sleep 1; done
  kill -9 -- -"$(cat /tmp/server.pid)" 2> /dev/null
  sleep 2
}

warm() {  # one unrecorded wave per level: Triton's MoE kernels compile per batch size on first use
  local c
  for c in $LEVELS; do
    taskset -c 8-15 python3 -m vllm.entrypoints.cli.main bench serve --backend vllm \
      --base-url "http://127.0.0.1:$PORT" --model moe --tokenizer "$MODEL" --dataset-name random \
      --random-input-len 512 --random-output-len 64 --ignore-eos --num-prompts "$c" \
      --max-concurrency "$c" --seed 7 > /dev/null 2>&1
  done
}

sweep() {  # $1: config name
  local w c n seed=0
  for w in $(seq "$WINDOWS"); do
    for c in $LEVELS; do
      n=$(( 4 * c > 8 ? 4 * c : 8 )); seed=$(( seed + 1 ))
      taskset -c 8-15 python3 -m vllm.entrypoints.cli.main bench serve --backend vllm \
        --base-url "http://127.0.0.1:$PORT" --model moe --tokenizer "$MODEL" --dataset-name random \
        --random-input-len 512 --random-output-len 256 --ignore-eos --num-prompts "$n" \
        --max-concurrency "$c" --seed "$((1000 * w + seed))" --save-result --result-dir /tmp/res \
        --result-filename "$1-$c-$w.json" > "/tmp/bench-$1-$c-$w.txt" 2>&1 \
        || { tail -5 "/tmp/bench-$1-$c-$w.txt"; continue; }
      python3 - "$1" "$c" "$w" "/tmp/res/$1-$c-$w.json" >> "$OUT/$1.jsonl" << 'PY'
import json, sys
config, c, w, path = sys.argv[1:]
r = json.load(open(path))
keys = ("output_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "completed")
print(json.dumps({"config": config, "concurrency": int(c), "window": int(w), **{k: r.get(k) for k in keys}}))
PY
      tail -1 "$OUT/$1.jsonl"
    done
  done
}

case "${1:-}" in
  install)
    bash .gpu/install.sh | tee "$OUT/install.txt"
    ;;
  run)
    shift
    [ -f /tmp/site/.complete ] || { echo "bundle incomplete"; exit 1; }
    prepare || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt"
    for config in "$@"; do
      # BUDGET_S: start no configuration after this many seconds of the call (the device's 10 minutes)
      if [ "$SECONDS" -gt "${BUDGET_S:-100000}" ]; then echo "config $config: skipped (budget)"; continue; fi
      if serve "$config"; then
        [ "${WARMUP:-1}" = 1 ] && warm
        sweep "$config"
        curl -s "http://127.0.0.1:$PORT/metrics" \
          | grep -E "^vllm:spec_decode_num_(drafts|draft_tokens|accepted_tokens)_total" >> "$OUT/$config.log"
      else
        echo "config $config: boot failed" | tee -a "$OUT/$config.log"; tail -30 "/tmp/server-$config.log"
      fi
      grep -E "SpecDecoding|Avg Draft|Mean acceptance|KV cache|init engine|torch.compile" \
        "/tmp/server-$config.log" | tail -12 >> "$OUT/$config.log"
      stop
    done
    ;;
  *)
    echo "usage: $0 install | run CONFIG..." >&2; exit 2
    ;;
esac
