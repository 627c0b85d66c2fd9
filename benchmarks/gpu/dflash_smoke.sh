#!/usr/bin/env bash
# Does vLLM 0.26.0 boot and serve the DFlash drafter of benchmarks/gpu/make_drafters.py on the Qwen3-8B
# shape? One server by hand (not a nova stage), three greedy requests, the spec-decode counters, then
# the server stopped and the GPU read. A `device` call (kind nvidia-h200) after the bundle's install,
# from the repository root, carrying .gpu/model:
#   bash .gpu/install.sh | tail -1 && timeout 225 bash benchmarks/gpu/dflash_smoke.sh
# Writes $OUT/make.txt, $OUT/dflash.log, $OUT/metrics.txt (benchmarks/results/h200-dflash-smoke/).
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/nova-out}
mkdir -p "$OUT"
python3 -m benchmarks.gpu.make_drafters > "$OUT/make.txt" 2>&1 || { cat "$OUT/make.txt"; exit 1; }
t0=$(date +%s)
setsid python3 -m vllm.entrypoints.openai.api_server --model .gpu/model --load-format dummy \
  --host 127.0.0.1 --port 8011 --max-model-len 4096 --kv-cache-dtype fp8 --max-num-batched-tokens 8192 \
  --attention-backend TRITON_ATTN \
  --speculative-config '{"method":"dflash","model":".gpu/drafters/dflash","num_speculative_tokens":3}' \
  > "$OUT/dflash.log" 2>&1 < /dev/null &
pid=$!
while kill -0 $pid 2> /dev/null && ! curl -sf 127.0.0.1:8011/health > /dev/null; do sleep 2; done
echo "up after $(( $(date +%s) - t0 )) s (alive: $(kill -0 $pid 2> /dev/null && echo yes || echo no))"
for _ in 1 2 3; do
  curl -s 127.0.0.1:8011/v1/completions -H 'content-type: application/json' \
    -d '{"model":".gpu/model","prompt":"def fib(n):","max_tokens":64,"temperature":0}' | cut -c1-200
  echo
done
curl -s 127.0.0.1:8011/metrics \
  | grep -E "^vllm:spec_decode_num_(drafts|draft_tokens|accepted_tokens)_total" | tee "$OUT/metrics.txt"
kill -- -$pid 2> /dev/null
sleep 3
tail -5 "$OUT/dflash.log"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
