"""A fast stand-in *engine* for coordination tests: launched by nova-search exactly as vLLM is
(``engine.command: [python, -m, tests.support.fake_engine]``), it takes vLLM's argv (the model, then
flags), answers on --host/--port with the API key from VLLM_API_KEY, and serves the stand-in's
OpenAI streaming API. Unknown vLLM flags are accepted and ignored.

Environment knobs: FAKE_ENGINE_BOOT_S (seconds before it listens, default 0.2), FAKE_ENGINE_ITL_S
(default 0.002), FAKE_ENGINE_CHILD=1 (also spawn a child process in the same group, like vLLM's
engine core, to prove group teardown), FAKE_ENGINE_REFUSE=FLAG (exit 1 at boot, with an error in its
log, when FLAG is in its argv: a configuration the engine cannot run), FAKE_ENGINE_SLOW_WITH=FLAG (4
times the delays when FLAG is in its argv: a configuration that is plainly worse).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

from tests.support.standin import StandinOptions, _serve


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="fake_engine")
    p.add_argument("model")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    args, _ignored = p.parse_known_args(argv)
    given = sys.argv[1:] if argv is None else argv
    refuse = os.environ.get("FAKE_ENGINE_REFUSE") or None
    if refuse and refuse in given:
        print(f"ValueError: fake engine refuses {refuse}", file=sys.stderr, flush=True)
        sys.exit(1)
    time.sleep(float(os.environ.get("FAKE_ENGINE_BOOT_S") or "0.2"))
    if os.environ.get("FAKE_ENGINE_CHILD") == "1":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    slow = os.environ.get("FAKE_ENGINE_SLOW_WITH") or None
    factor = 4.0 if slow and slow in given else 1.0
    options = StandinOptions(
        model=args.served_model_name or args.model,
        api_key=os.environ.get("VLLM_API_KEY"),
        ttft_s=0.005 * factor,
        itl_s=float(os.environ.get("FAKE_ENGINE_ITL_S") or "0.002") * factor,
    )
    asyncio.run(_serve(options, args.host, args.port, False))


if __name__ == "__main__":
    main()
