#!/usr/bin/env bash
# Issue 49: the reference study's first result (Qwen3-30B-A3B + EAGLE-3, k=3) measured by nova on one
# H100 (studies/experiments/h100-qwen3-30b-a3b-eagle3.yaml: stock, tuned, EAGLE-3 at two synthetic
# acceptance lengths), through study.sh (its header has the calls and what to carry). The bundle is
# `make_bundle.sh keep_moe` (vLLM's MoE kernels: three parts). `start` first writes the target folder
# (the Qwen3-30B-A3B config beside the bundle's tokenizer: .gpu/model -> .gpu/qwen3-30b-a3b) and the
# EAGLE-3 folder (make_drafters.py -> .gpu/qwen3-30b-a3b-drafters), and splits the cores this process
# may run on (read here, at run time) between the server (first half: engine.cpus) and the load
# generator (second half: sweep.client_cpus); the spec's 0-7 / 8-15 are the 16-core node's split.
#   bash benchmarks/gpu/qwen3_30b_eagle3_study.sh install     # carry .gpu/p1 .gpu/install.sh .gpu/untar.py .gpu/manifest.txt
#   bash benchmarks/gpu/qwen3_30b_eagle3_study.sh install     # the same with .gpu/p2
#   bash benchmarks/gpu/qwen3_30b_eagle3_study.sh install | tail -3 && bash benchmarks/gpu/qwen3_30b_eagle3_study.sh start \
#     && bash benchmarks/gpu/qwen3_30b_eagle3_study.sh watch 500                 # + .gpu/p3 .gpu/model
#   bash benchmarks/gpu/qwen3_30b_eagle3_study.sh watch 560   # until the worker is done; collects each time
# A study that did not finish continues from the committed storage (CARRIED), in a later session.
set -uo pipefail
export SPEC=studies/experiments/h100-qwen3-30b-a3b-eagle3.yaml W=/tmp/nova-moe
export CARRIED=${CARRIED:-benchmarks/results/h100-qwen3-30b-a3b-eagle3/study.db}
if [ "${1:-}" = start ]; then
  target=.gpu/qwen3-30b-a3b
  mkdir -p "$target"
  cp .gpu/model/* "$target"/ && cp benchmarks/gpu/qwen3-30b-a3b-config.json "$target/config.json" || exit 1
  python3 -m benchmarks.gpu.make_drafters --target "$target" --out .gpu/qwen3-30b-a3b-drafters || exit 1
  read -r server client < <(python3 -c 'import os
c = sorted(os.sched_getaffinity(0)); h = len(c) // 2
print(",".join(map(str, c[:h])), ",".join(map(str, c[h:])))')
  echo "cores: server $server, load generator $client"
  shift
  set -- start --set "engine.cpus=[$server]" --set "sweep.client_cpus=[$client]" "$@"
fi
exec bash "$(dirname "$0")/study.sh" "$@"
