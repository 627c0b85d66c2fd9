"""vLLM's own serving benchmark (``vllm bench serve``), kept running between runs. Runs in the engine's
interpreter, not nova's: it imports only vLLM and the standard library.

Each line on stdin is a JSON list of ``vllm bench serve`` arguments, or ``{"args": [...], "env":
{...}}`` to set environment variables first (a new server's API key in OPENAI_API_KEY); each run
answers one JSON line on stdout: the benchmark's result (``vllm.benchmarks.serve.main``'s return
value, as ``--save-result`` would write it) plus ``client_cpu_s``, the worker's CPU seconds
(``time.process_time``) while the benchmark proper ran (its ready check, warmups and measured
requests; not the dataset's making), or ``{"error": ...}``. What the benchmark prints goes to stderr.
Importing vLLM takes 10-20 s on a small machine; a worker pays it once, so runs can be interleaved
with another client's runs without that cost in between.

It calls ``add_cli_args`` and ``main`` itself because the ``vllm`` console script of the CPU build
fails at start (it looks up the metadata of a distribution named ``vllm``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def main() -> None:
    import vllm.benchmarks.serve as serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    measured = serve.benchmark
    cpu: list[float] = []

    async def timed_benchmark(*args, **kwargs):  # main_async looks serve.benchmark up at call time
        t0 = time.process_time()
        try:
            return await measured(*args, **kwargs)
        finally:
            cpu.append(time.process_time() - t0)

    serve.benchmark = timed_benchmark

    out = sys.stdout
    sys.stdout = sys.stderr  # the benchmark's own report goes to stderr
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            parser = FlexibleArgumentParser()
            serve.add_cli_args(parser)
            cpu.clear()
            request = json.loads(line)
            if isinstance(request, dict):
                os.environ.update(request.get("env", {}))
                request = request["args"]
            result = serve.main(parser.parse_args(request))
            result.pop("generated_texts", None)
            result["client_cpu_s"] = cpu[-1] if cpu else None
            answer = json.dumps(result, default=str)
        except BaseException as e:  # noqa: BLE001 - reported to the caller, which decides
            answer = json.dumps({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        out.write(answer + "\n")
        out.flush()


if __name__ == "__main__":
    main()
