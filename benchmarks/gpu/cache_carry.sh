#!/usr/bin/env bash
# Does vLLM's compile cache carry from one H200 machine to the next? One server by hand, booted with
# confirm trial 10's flags (session 4: max_num_batched_tokens 4096, fp8 KV, capture size 128, sleep
# mode) on a cache that another machine wrote (its VLLM_CACHE_ROOT, tar.xz, about 4 MB; the study's
# own path, /tmp/nova-confirm/vllm-cache). Timed from launch to the first answer of /health; the log
# says whether the compiled graph was loaded or compiled again. A `device` call (kind nvidia-h200)
# after the bundle's install, from the repository root, carrying .gpu/model and the tarball:
#   bash .gpu/install.sh | tail -1 && timeout 180 bash benchmarks/gpu/cache_carry.sh .h200/vllm-cache.tar.xz
# Writes $OUT/carry.log (the server's log) and $OUT/carry.txt (benchmarks/results/h200-cache-carry/).
OUT=${OUT:-/tmp/nova-out}
mkdir -p "$OUT" /tmp/nova-confirm
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
export VLLM_CACHE_ROOT=/tmp/nova-confirm/vllm-cache VLLM_SERVER_DEV_MODE=1 CUDA_VISIBLE_DEVICES=0
tarball=${1:?usage: cache_carry.sh VLLM_CACHE_TAR_XZ}
rm -rf "$VLLM_CACHE_ROOT" && tar -C /tmp/nova-confirm -xJf "$tarball" || exit 1
{ echo "cache restored: $(du -sh "$VLLM_CACHE_ROOT" | cut -f1)"; ls "$VLLM_CACHE_ROOT/torch_compile_cache"; } \
  | tee "$OUT/carry.txt"
key=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
t0=$(date +%s)
setsid python3 -m vllm.entrypoints.openai.api_server --model .gpu/model --load-format dummy \
  --host 127.0.0.1 --port 8012 --api-key "$key" --served-model-name qwen3-8b --max-model-len 4096 \
  --enable-sleep-mode --gpu-memory-utilization 0.8635354614198283 --kv-cache-dtype fp8 \
  --no-enable-prefix-caching --max-num-batched-tokens 4096 --max-num-seqs 341 --no-enable-chunked-prefill \
  --max-cudagraph-capture-size 128 > "$OUT/carry.log" 2>&1 < /dev/null &
pid=$!
while kill -0 $pid 2> /dev/null && ! curl -sf 127.0.0.1:8012/health > /dev/null; do sleep 1; done
echo "up after $(( $(date +%s) - t0 )) s (alive: $(kill -0 $pid 2> /dev/null && echo yes || echo no))" \
  | tee -a "$OUT/carry.txt"
grep -E "Using cache directory|Directly load|Compiling a graph|init engine|torch.compile takes" "$OUT/carry.log" \
  | cut -c1-300 | tee -a "$OUT/carry.txt"
kill -- -$pid 2> /dev/null
sleep 4
echo "GPU after stop: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)" | tee -a "$OUT/carry.txt"
