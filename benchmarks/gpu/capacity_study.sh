#!/usr/bin/env bash
# Issue 51, item 5: capacity at the SLO, cost and J/token of stock, tuned and n-gram on the Qwen3-8B shape
# on one H100 (studies/experiments/h100-qwen3-8b-capacity.yaml), through study.sh (its header has the
# calls and what to carry: the bundle's parts and .gpu/model). `start` splits the cores this process may
# run on between the server (first half: engine.cpus) and the load generator (second half:
# sweep.client_cpus); the spec's 0-7 / 8-15 are the 16-core node's split.
#   bash benchmarks/gpu/capacity_study.sh install                 # carry .gpu/p1 .gpu/install.sh .gpu/untar.py .gpu/manifest.txt
#   bash benchmarks/gpu/capacity_study.sh install | tail -3 && bash benchmarks/gpu/capacity_study.sh start \
#     && bash benchmarks/gpu/capacity_study.sh watch 500          # + .gpu/p2 .gpu/model
#   bash benchmarks/gpu/capacity_study.sh watch 560               # until the worker is done; collects each time
# A study that did not finish continues from the committed storage (CARRIED), in a later session.
set -uo pipefail
export SPEC=studies/experiments/h100-qwen3-8b-capacity.yaml W=/tmp/nova-capacity
export CARRIED=${CARRIED:-benchmarks/results/h100-qwen3-8b-capacity/study.db}
if [ "${1:-}" = start ]; then
  read -r server client < <(python3 -c 'import os
c = sorted(os.sched_getaffinity(0)); h = len(c) // 2
print(",".join(map(str, c[:h])), ",".join(map(str, c[h:])))')
  echo "cores: server $server, load generator $client"
  shift
  set -- start --set "engine.cpus=[$server]" --set "sweep.client_cpus=[$client]" "$@"
fi
exec bash "$(dirname "$0")/study.sh" "$@"
