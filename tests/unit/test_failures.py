"""Boot-failure classification from real vLLM log lines, and password masking of storage URLs."""

from __future__ import annotations

import pytest

from nova_search.db import mask as mask_url
from nova_search.engine.server import classify_failure

CPU_OOM = """\
(EngineCore_DP0 pid=4121) ERROR 11-30 05:40:12 [core.py:708] EngineCore failed to start.
Traceback (most recent call last):
  File "/opt/vllm/lib/python3.12/site-packages/vllm/v1/worker/cpu_worker.py", line 83, in init_device
    self.model_runner.warming_up_model()
ValueError: Available memory on node 0 (7.21 GiB) is less than desired CPU memory utilization \
(0.92, 14.35 GiB). Decrease the value of VLLM_CPU_KVCACHE_SPACE or gpu_memory_utilization.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""  # noqa: E501

CUDA_OOM = """\
  File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/linear.py", line 125, in forward
    return F.linear(input, self.weight, self.bias)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity \
of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB \
memory in use.
"""

FP8_CPU = """\
(EngineCore_DP0 pid=5011) ERROR 11-30 05:41:03 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=5011) ERROR 11-30 05:41:03 [core.py:708]   File "vllm/attention/backends/cpu_attn.py"
(EngineCore_DP0 pid=5011) ERROR 11-30 05:41:03 [core.py:708] RuntimeError: FP8 KV cache on CPU \
requires x86 with AVX-512 or AMX support.
"""  # noqa: E501

SUFFIX = """\
  File "/opt/vllm/lib/python3.12/site-packages/vllm/config/speculative.py", line 402, in __post_init__
    raise ImportError(
ImportError: Arctic Inference is required for suffix decoding. Install via \
`pip install arctic-inference==0.0.9`.
"""  # noqa: E501

BAD_CHOICE = """\
usage: api_server.py [-h] [--kv-cache-dtype {auto,bfloat16,fp8,fp8_e4m3,fp8_e5m2,fp8_inc}]
api_server.py: error: argument --kv-cache-dtype: invalid choice: 'fp4_nonsense' \
(choose from 'auto', 'bfloat16', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'fp8_inc')
"""

BUDGET = """\
pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig
  Value error, max_num_batched_tokens (512) is smaller than max_model_len (2048). This effectively \
limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. \
Please increase max_num_batched_tokens or decrease max_model_len.
"""  # noqa: E501

CRASH = """\
INFO 11-30 05:42:00 [api_server.py:1885] vLLM API server version 0.11.0
Traceback (most recent call last):
  File "/opt/vllm/lib/python3.12/site-packages/vllm/model_executor/models/llama.py", line 410, in load_weights
    param = params_dict[name]
            ~~~~~~~~~~~^^^^^^
KeyError: 'model.layers.0.mlp.gate_up_proj.weight'
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""  # noqa: E501


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (CPU_OOM, "oom"),
        (CUDA_OOM, "oom"),
        (FP8_CPU, "unsupported"),
        (SUFFIX, "unsupported"),
        (BAD_CHOICE, "unsupported"),
        (BUDGET, "unsupported"),
        (CRASH, "crash"),
    ],
    ids=["cpu-oom", "cuda-oom", "fp8-cpu", "suffix", "invalid-choice", "batched-tokens", "crash"],
)
def test_classify_real_logs(log: str, reason: str) -> None:
    assert classify_failure(log) == reason


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            "Available memory on node 0 (3 GiB) is less than desired CPU memory utilization (0.9)",
            "oom",
        ),
        ("CUDA out of memory. Tried to allocate 20.00 MiB", "oom"),
        (
            "RuntimeError: Worker failed with error 'Available memory on node 0 (17.66/23.54 GiB) on kv "
            "cache allocation is less than requested memory for kv (-0.63/0.0 GiB).'",
            "oom",
        ),
        ("FP8 KV cache on CPU requires x86 with AVX-512 or AMX", "unsupported"),
        ("Arctic Inference is required for suffix decoding", "unsupported"),
        ("argument --kv-cache-dtype: invalid choice: 'fp4_nonsense'", "unsupported"),
        ("max_num_batched_tokens (512) is smaller than max_model_len (2048)", "unsupported"),
        ("Segmentation fault (core dumped)", "crash"),
        ("", "crash"),
    ],
)
def test_classify_single_lines(line: str, reason: str) -> None:
    assert classify_failure(line) == reason


def test_oom_wins_over_a_value_error_in_the_same_log() -> None:
    # the CPU OOM is itself raised as a ValueError; memory is the reason, not the config
    assert "ValueError" in CPU_OOM
    assert classify_failure(CPU_OOM) == "oom"


def test_classification_ignores_case() -> None:
    assert classify_failure("cuda OUT OF MEMORY") == "oom"


def test_mask_url_hides_the_password() -> None:
    masked = mask_url("postgresql+psycopg://u:s3cret@h/db")
    assert "s3cret" not in masked
    assert masked == "postgresql+psycopg://u:***@h/db"


def test_mask_url_keeps_urls_without_password() -> None:
    assert mask_url("sqlite:///nova.db") == "sqlite:///nova.db"
    assert mask_url("postgresql+psycopg://u@h:5432/db") == "postgresql+psycopg://u@h:5432/db"


def test_mask_url_unparseable() -> None:
    masked = mask_url("not a url with s3cret")
    assert "s3cret" not in masked
    assert masked == "<unparseable storage URL>"
