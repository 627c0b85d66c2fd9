#!/usr/bin/env bash
# Issue 50: the reference study's second result (gemma-4-31B-it + DFlash, k=15) measured by nova on one
# H100 (studies/experiments/h100-gemma-4-31b-dflash.yaml: stock, tuned, DFlash at two synthetic
# acceptance lengths), through study.sh (its header has the calls and what to carry). The bundle is the
# 3-part one (`make_bundle.sh keep_moe`, nova's packages in EXTRA_PKGS) that the Qwen3-30B-A3B study used.
# `start` first writes the target folder (benchmarks/gpu/gemma4_target.py: the Gemma-4-31B config beside
# .gpu/model's tokenizer padded to 262,144 ids -> .gpu/gemma-4-31b) and the DFlash drafter
# (make_drafters.py, z-lab's layout -> .gpu/gemma-4-31b-drafters/dflash), then reads both with the
# machine's vLLM (benchmarks/gpu/gemma4_check.py: seconds, where a bad config would cost a boot), says
# whether FlashAttention 4 could run (it needs the cutlass DSL; the spec uses Triton either way), and
# splits the cores this process may run on between the server (first half) and the load generator.
# The calls, in order, each within 30 s of the last (benchmarks/results/h100-gemma-4-31b-dflash/PLAN.md):
#   bash benchmarks/gpu/gemma4_dflash_study.sh install    # carry .gpu/p1 .gpu/install.sh .gpu/untar.py .gpu/manifest.txt
#   bash benchmarks/gpu/gemma4_dflash_study.sh install    # carry .gpu/p2
#   bash benchmarks/gpu/gemma4_dflash_study.sh install | tail -3 && STOP_AFTER=850 \
#     bash benchmarks/gpu/gemma4_dflash_study.sh start && EXTRA=/tmp/nova-gemma/machine.txt \
#     bash benchmarks/gpu/gemma4_dflash_study.sh watch 480                     # carry .gpu/p3 .gpu/model
#   EXTRA=/tmp/nova-gemma/machine.txt bash benchmarks/gpu/gemma4_dflash_study.sh watch 560   # until done
# A study that did not finish continues from the committed storage (CARRIED) in a later session.
# GEMMA_LAYERS=N (a multiple of 6) runs the labelled fallback instead: the same shape with N layers, as
# its own study (name and results folder with -L<N>), from a copy of the spec written under W; pass it on
# every call. GEMMA_KEEP_MODEL_TYPE=1 writes the config as gemma4_text (gemma4_target.py says when).
set -uo pipefail
SPEC=studies/experiments/h100-gemma-4-31b-dflash.yaml W=/tmp/nova-gemma
results=benchmarks/results/h100-gemma-4-31b-dflash
if [ -n "${GEMMA_LAYERS:-}" ]; then
  mkdir -p "$W"
  sed -e "s/^name: h100-gemma-4-31b-dflash/name: h100-gemma-4-31b-L${GEMMA_LAYERS}-dflash/" \
    -e "s/served_name: gemma-4-31b/served_name: gemma-4-31b-L${GEMMA_LAYERS}/" "$SPEC" > "$W/spec-L${GEMMA_LAYERS}.yaml"
  SPEC=$W/spec-L${GEMMA_LAYERS}.yaml results=benchmarks/results/h100-gemma-4-31b-L${GEMMA_LAYERS}-dflash
fi
export SPEC W
export CARRIED=${CARRIED:-$results/study.db}
if [ "${1:-}" = start ]; then
  [ -f /tmp/site/.complete ] || { echo "bundle incomplete"; exit 1; }
  target=.gpu/gemma-4-31b drafters=.gpu/gemma-4-31b-drafters
  python3 -m benchmarks.gpu.gemma4_target --tokenizer .gpu/model --out "$target" \
    ${GEMMA_LAYERS:+--layers "$GEMMA_LAYERS"} ${GEMMA_KEEP_MODEL_TYPE:+--keep-model-type} || exit 1
  python3 -m benchmarks.gpu.make_drafters --target "$target" --out "$drafters" || exit 1
  if PYTHONPATH=/tmp/site python3 -c "import cutlass" 2> /dev/null; then
    echo "cutlass DSL found: FlashAttention 4 could serve this model; the spec still runs Triton"
  else
    echo "no cutlass DSL: FlashAttention 4 cannot run here; every trial runs TRITON_ATTN (the spec's)"
  fi
  PYTHONPATH=/tmp/site:$PWD python3 -m benchmarks.gpu.gemma4_check "$target" "$drafters/dflash" \
    2>&1 | grep -v -e ' INFO ' -e ' WARNING ' -e 'incorrect regex pattern'
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gemma4_check failed: not starting the study"; exit 1; }
  read -r server client < <(python3 -c 'import os
c = sorted(os.sched_getaffinity(0)); h = len(c) // 2
print(",".join(map(str, c[:h])), ",".join(map(str, c[h:])))')
  echo "cores: server $server, load generator $client"
  shift
  set -- start --set "engine.cpus=[$server]" --set "sweep.client_cpus=[$client]" "$@"
fi
exec bash "$(dirname "$0")/study.sh" "$@"
