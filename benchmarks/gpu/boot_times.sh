#!/usr/bin/env bash
# Boot times of vLLM 0.26.0 on one H200 (issue 14, item 3): what the compile cache saves, and what makes
# it miss. One server at a time, the Qwen3-8B shape with dummy weights (.gpu/model), on cores 0-7; each
# boot is timed from launch to the first answer of /health, and its log's own timings are kept.
#
#   bash benchmarks/gpu/crosscheck.sh install      # carry .gpu/p1 (then again with .gpu/p2): the bundle
#   bash benchmarks/gpu/boot_times.sh               # carry .gpu/model too -> $OUT/boots.jsonl, logs
#
# The boots, in order, on one fresh compile cache (VLLM_CACHE_ROOT):
#   cold      max_num_seqs 64, nothing cached yet
#   seqs128   max_num_seqs 128: vLLM's default CUDA-graph sizes follow max_num_seqs (up to
#             min(2 x max_num_seqs, 512)) and the sizes are part of the compile cache's key
#   seqs128-capture128   the same, with --max-cudagraph-capture-size 128 (cold's sizes, set explicitly)
#   seqs256-capture128   max_num_seqs 256, --max-cudagraph-capture-size 128
# BOOTS="cold seqs128" runs a subset; LIMIT_S (default 480) starts no boot after that many seconds.
set -uo pipefail
OUT=${OUT:-/tmp/nova-out}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
export PYTHONUNBUFFERED=1 VLLM_CACHE_ROOT=/tmp/vllm-cache
PORT=8000
[ -f /tmp/site/.complete ] || { echo "bundle incomplete: run crosscheck.sh install first"; exit 1; }
[ -d /tmp/model ] || cp -r .gpu/model /tmp/model
rm -rf "$VLLM_CACHE_ROOT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

flags_of() {
  case "$1" in
    cold) echo "--max-num-seqs 64" ;;
    seqs128) echo "--max-num-seqs 128" ;;
    seqs128-capture128) echo "--max-num-seqs 128 --max-cudagraph-capture-size 128" ;;
    seqs256-capture128) echo "--max-num-seqs 256 --max-cudagraph-capture-size 128" ;;
    *) echo "unknown boot $1" >&2; return 1 ;;
  esac
}

t_start=$(date +%s)
for boot in ${BOOTS:-cold seqs128 seqs128-capture128 seqs256-capture128}; do
  if [ $(( $(date +%s) - t_start )) -gt "${LIMIT_S:-480}" ]; then
    echo "limit reached: $boot not booted"; break
  fi
  flags=$(flags_of "$boot") || exit 2
  log="$OUT/boot-$boot.log"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086  # the flags are words
  setsid taskset -c 0-7 python3 -m vllm.entrypoints.cli.main serve /tmp/model --served-model-name qwen3-8b \
    --load-format dummy --max-model-len 4096 --max-num-batched-tokens 8192 $flags \
    --host 127.0.0.1 --port "$PORT" > "$log" 2>&1 < /dev/null &
  pid=$!
  ok=1
  until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
    sleep 0.5
    if ! kill -0 "$pid" 2> /dev/null; then ok=0; break; fi
  done
  t1=$(date +%s.%N)
  kill -- -"$pid" 2> /dev/null
  for _ in $(seq 60); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
  kill -9 -- -"$pid" 2> /dev/null
  sleep 3
  python3 - "$boot" "$flags" "$t0" "$t1" "$ok" "$log" >> "$OUT/boots.jsonl" << 'EOF'
import json, re, sys
boot, flags, t0, t1, ok, log = sys.argv[1:]
text = open(log, errors="replace").read()
def last(pattern):
    found = re.findall(pattern, text)
    return float(found[-1]) if found else None
print(json.dumps({
    "boot": boot, "flags": flags, "healthy": ok == "1", "boot_s": round(float(t1) - float(t0), 1),
    "torch_compile_s": last(r"torch\.compile took ([\d.]+) s in total"),
    "compile_cache_hit": "Directly load the compiled graph" in text,
    "graph_capture_s": last(r"Graph capturing finished in ([\d.]+) secs"),
    "graph_capture_gib": last(r"Graph capturing finished in [\d.]+ secs, took ([\d.]+) GiB"),
    "init_engine_s": last(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+)"),
    "model_loading_s": last(r"Model loading took [\d.]+ GiB (?:memory )?and ([\d.]+) seconds"),
    "capture_sizes": (re.findall(r"cudagraph_capture_sizes['\"]?: ?(\[[\d, ]*\])", text) or [None])[-1],
}))
EOF
  tail -1 "$OUT/boots.jsonl"
done
du -sh "$VLLM_CACHE_ROOT" 2> /dev/null | tee -a "$OUT/gpu.txt"
