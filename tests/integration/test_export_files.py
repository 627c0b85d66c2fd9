"""The exports, as printed, through real validators from PyPI (the test extras; both work offline):
``kubernetes-validate`` (the Kubernetes API's own OpenAPI schemas, strict: an unknown field fails, for
the version pinned here) for ``--format k8s``, and the compose specification's schema through
``check-jsonschema --builtin-schema vendor.compose-spec`` for ``--format compose``. Each validator is
shown to reject a broken file first, so that a pass means something. The recorded tier runs the real
CLI on two recorded studies (one measured on the CPU, one on an H200) and validates what it prints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nova_search.results.export import export_launch
from nova_search.schema import WorkerTag
from tests.support.builders import launch_argv, level, trial

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: the Kubernetes version the manifests are checked against (a release clusters run today)
K8S_VERSION = "1.31.0"


def kubernetes_validate(path: Path) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "kubernetes-validate"), "-k", K8S_VERSION, "--strict", "--no-warn", str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def compose_validate(path: Path) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


#: (what, trial, export options): GPUs with a local model, a CPU study with a hub id, unknown device
CASES = [
    (
        "cuda-local-2gpu",
        trial(1, [level(4)], config={"tensor_parallel_size": 2}, worker=WorkerTag("n", (0, 1))),
        {"measured_on": "cuda"},
    ),
    (
        "cpu-hub",
        trial(2, [level(4)], argv=launch_argv(2, model=".nova/tiny-model", gpu_memory_utilization=0.3)),
        {"measured_on": "cpu", "model": "Qwen/Qwen3-8B"},
    ),
    ("unknown-device", trial(3, [level(4)], argv=launch_argv(3, model="gpt2")), {"name": "llm-a"}),
]


def test_the_validators_reject_a_broken_file(tmp_path: Path) -> None:
    _, t, opts = CASES[0]
    docs = list(yaml.safe_load_all(export_launch(t, "k8s", **opts)))
    docs[2]["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"  # a typo
    r = kubernetes_validate(write(tmp_path, "bad.yaml", yaml.safe_dump_all(docs)))
    assert r.returncode != 0 and "imagePullPolcy" in r.stdout + r.stderr
    compose = yaml.safe_load(export_launch(t, "compose", **opts))
    compose["services"]["vllm"]["helthcheck"] = compose["services"]["vllm"].pop("healthcheck")  # a typo
    r = compose_validate(write(tmp_path, "bad-compose.yaml", yaml.safe_dump(compose)))
    assert r.returncode != 0 and "helthcheck" in r.stdout + r.stderr


@pytest.mark.parametrize(("what", "t", "opts"), CASES, ids=[c[0] for c in CASES])
def test_exports_pass_the_validators_as_printed(tmp_path: Path, what: str, t, opts) -> None:
    k8s = write(tmp_path, f"{what}.yaml", export_launch(t, "k8s", **opts))
    r = kubernetes_validate(k8s)
    assert r.returncode == 0, r.stdout + r.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(k8s.read_text())]
    assert kinds == ["PersistentVolumeClaim", "Service", "Deployment"]
    assert r.stdout.count("passed for resource") == 3, r.stdout
    compose = write(tmp_path, f"{what}-compose.yaml", export_launch(t, "compose", **opts))
    r = compose_validate(compose)
    assert r.returncode == 0 and "ok -- validation done" in r.stdout, r.stdout + r.stderr


def nova_export(*args: str) -> str:
    r = subprocess.run(
        [str(BIN / "nova-search"), "export", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.recorded
def test_recorded_studies_export_valid_files(tmp_path: Path) -> None:
    studies = {
        "cpu": ("trained-cpu-run1", "trained-cpu", ["--concurrency", "4"]),
        "h200": ("h200-qwen3-8b", "h200-qwen3-8b", []),
    }
    for what, (name, folder, extra) in studies.items():
        storage = f"sqlite:///{REPO}/benchmarks/results/{folder}/study.db"
        common = [name, "--storage", storage, "--model", "Qwen/Qwen3-8B", *extra]
        k8s = write(tmp_path, f"{what}.yaml", nova_export(*common, "--format", "k8s"))
        r = kubernetes_validate(k8s)
        assert r.returncode == 0, r.stdout + r.stderr
        compose_text = nova_export(*common, "--format", "compose")
        r = compose_validate(write(tmp_path, f"{what}-compose.yaml", compose_text))
        assert r.returncode == 0, r.stdout + r.stderr
        gpu = "deploy" in yaml.safe_load(compose_text)["services"]["vllm"]
        assert gpu == (what == "h200"), f"{what}: a GPU reservation only for the GPU study"
