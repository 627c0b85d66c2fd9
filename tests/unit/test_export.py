"""What to deploy, without storage: a trial's or the policy's launch, made deployable (no random
weights, no relative model path, rounded memory fractions, the measured device only, the served name
of the deployed model) and rendered as a vllm command, a compose service or Kubernetes manifests (a
volume claim, a Service and a Deployment), YAML without anchors. The validators' checks of the same
output are in tests/integration/test_export_files.py."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from nova_search.analysis.verdict import PolicyRange, Verdict
from nova_search.errors import NovaError, SpecError
from nova_search.knobs import EngineConfig
from nova_search.results.export import export_launch, export_study
from nova_search.results.launch import (
    Launch,
    deployable,
    device_of,
    launch_of_policy,
    launch_of_trial,
    split_launch,
)
from nova_search.results.manifests import IMAGES, render
from nova_search.results.trials import TrialResult
from nova_search.schema import WorkerTag
from tests.support.builders import launch_argv, level, study, trial


def test_split_launch_forms():
    assert split_launch(["py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--x", "1"]) == (
        ["py", "-m", "vllm.entrypoints.openai.api_server"],
        "/m",
        ["--x", "1"],
    )
    assert split_launch(["vllm", "serve", "/m", "--x", "1", "--no-y"]) == (
        ["vllm", "serve"],
        "/m",
        ["--x", "1", "--no-y"],
    )
    assert split_launch(["--x", "1"]) == ([], None, ["--x", "1"])


def test_vllm_format_is_vllm_serve_with_the_trials_flags_shell_quoted():
    argv = (
        "vllm",
        "serve",
        "/models/my model",
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":3}',
    )
    t = trial(0, [level(4)], argv=(*argv, "--host", "127.0.0.1", "--port", "1234"))
    text = export_launch(t, "vllm")
    assert text.startswith("# nova-search: trial 0 (search, COMPLETE), engine 0.11.0 on cuda\n")
    command = [line for line in text.splitlines() if not line.startswith("#")]
    assert shlex.split(command[0]) == list(argv)
    assert "--host" not in text and "1234" not in text and "'/models/my model'" in text


def test_dummy_weights_and_relative_paths_are_refused_unless_a_model_is_given():
    dummy = trial(1, [level(4)], argv=launch_argv(1, load_format="dummy"))
    with pytest.raises(SpecError, match=r"--model: trial 1 .* ran with --load-format dummy"):
        export_launch(dummy, "vllm")
    relative = trial(2, [level(4)], argv=launch_argv(2, model=".nova/tiny-model"))
    with pytest.raises(SpecError, match=r"relative to the worker's folder \('.nova/tiny-model'\)"):
        export_launch(relative, "k8s")
    text = export_launch(dummy, "vllm", model="Qwen/Qwen3-8B")
    assert "--load-format" not in text.splitlines()[-1] and " Qwen/Qwen3-8B " in text
    assert "# --load-format dummy dropped: the real weights load" in text
    assert "# model: Qwen/Qwen3-8B (the study measured /models/m)" in text
    as_is = export_launch(dummy, "vllm", as_measured=True)
    assert "--load-format dummy" in as_is and "WARNING: exported as measured: random weights" in as_is
    # hub ids and absolute paths are fine as they are
    for ok in ("Qwen/Qwen3-8B", "gpt2", "/models/m"):
        assert ok in export_launch(trial(3, [level(4)], argv=launch_argv(3, model=ok)), "vllm")


def test_memory_fractions_are_rounded_down():
    t = trial(4, [level(4)], argv=launch_argv(4, gpu_memory_utilization=0.8734567891234567))
    text = export_launch(t, "vllm")
    assert shlex.split(text.splitlines()[-1])[-2:] == ["--gpu-memory-utilization", "0.87"]
    assert "# --gpu-memory-utilization 0.87 (rounded down from 0.8734567891234567)" in text
    plain = export_launch(trial(5, [level(4)], argv=launch_argv(5, gpu_memory_utilization=0.9)), "vllm")
    assert (
        shlex.split(plain.splitlines()[-1])[-2:] == ["--gpu-memory-utilization", "0.9"]
        and "rounded" not in plain
    )


def test_compose_and_k8s_are_deployable():
    t = trial(1, [level(4)], config={"tensor_parallel_size": 2}, worker=WorkerTag("n", (0, 1)))
    compose = yaml.safe_load(export_launch(t, "compose"))
    svc = compose["services"]["vllm"]
    assert svc["image"] == "vllm/vllm-openai:v0.11.0"
    assert svc["command"][4:] == ["--model", "/models/m", "--served-model-name", "m", "--max-num-seqs", "16"]
    assert svc["volumes"] == [
        "huggingface:/root/.cache/huggingface",
        {"type": "bind", "source": "/models/m", "target": "/models/m", "read_only": True},
    ]
    assert compose["volumes"] == {"huggingface": {}}
    assert svc["environment"] == {
        "VLLM_API_KEY": "${VLLM_API_KEY:?set an API key}",
        "HF_TOKEN": "${HF_TOKEN:-}",
    }
    assert "ipc" not in svc and svc["healthcheck"]["test"][:2] == ["CMD", "python3"]
    assert "/health" in svc["healthcheck"]["test"][-1] and svc["healthcheck"]["start_period"]
    assert svc["cap_drop"] == ["ALL"] and svc["shm_size"]
    (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert dev == {"driver": "nvidia", "count": 2, "capabilities": ["gpu"]}
    k8s = export_launch(t, "k8s", name="llm", image="my/vllm:1")
    claim, service, deployment = yaml.safe_load_all(k8s)
    assert service["kind"] == "Service" and deployment["kind"] == "Deployment"
    assert claim["kind"] == "PersistentVolumeClaim" and claim["metadata"]["name"] == "llm-model"
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # one pod holds the claim
    # the Secret: the exact command that creates it, in the header, never a key in the file
    assert '#   kubectl create secret generic llm-api-key --from-literal=api-key="$VLLM_API_KEY"' in k8s
    assert "kind: Secret" not in k8s and "PersistentVolumeClaim llm-model" in k8s.split("apiVersion")[0]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    pod = deployment["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "my/vllm:1" and c["name"] == "llm"
    assert c["args"] == svc["command"]
    assert c["env"] == [
        {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm-api-key", "key": "api-key"}}},
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "llm-hf-token", "key": "token", "optional": True}},
        },
    ]
    assert (
        c["resources"]["limits"]["nvidia.com/gpu"] == 2 and c["resources"]["requests"]["nvidia.com/gpu"] == 2
    )
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {v["name"] for v in pod["volumes"]} == {"model", "dshm"}
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/models", "/dev/shm"}
    one = list(yaml.safe_load_all(export_launch(trial(2, [level(4)]), "k8s")))[2]
    assert one["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    # issue 53: a crashed server comes back (compose), a wedged one is restarted once started (k8s)
    assert svc["restart"] == "unless-stopped"
    assert c["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert c["livenessProbe"]["failureThreshold"] * c["livenessProbe"]["periodSeconds"] >= 120
    assert c["startupProbe"]["httpGet"]["path"] == "/health"  # holds liveness off while the model loads


def test_measurement_box_settings_are_said_in_the_header():
    """A knob the study fixed for its machine (engine.defaults, not searched: 0.05 of a small CPU box's
    memory), its extra_args, the cores it pinned and the env it set are named as measurement-box
    settings in every format's header (issue 53); a searched knob is not; an env value never shows."""
    argv = ("vllm", "serve", "/models/m", "--gpu-memory-utilization", "0.05", "--max-num-seqs", "16",
            "--enforce-eager", "--host", "h", "--port", "1")  # fmt: skip
    t = replace(trial(1, [level(4)]), argv=argv)
    spec = {
        "engine": {
            "device": "cpu",
            "defaults": {"gpu_memory_utilization": 0.05, "max_num_seqs": 16},
            "extra_args": ["--enforce-eager"],
            "cpus": [0, 1],
            "env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "HF_TOKEN": "${HF_TOKEN}"},
        },
        "space": {"max_num_seqs": {"low": 1, "high": 64}},
    }
    results = study(t, spec=spec)
    for fmt in ("vllm", "compose", "k8s"):
        exported = export_study(results, fmt, trial="1")
        header = "".join(line for line in exported.text.splitlines(keepends=True) if line.startswith("#"))
        assert "measurement-box setting: --gpu-memory-utilization 0.05 (on a CPU: the share of host" in header
        assert "--max-num-seqs" not in header  # searched: the study's answer, not the box's
        assert "measurement-box setting: --enforce-eager came from the study's engine.extra_args" in header
        assert "pinned each server to cores [0, 1]" in header
        assert "engine.env HF_TOKEN, VLLM_CPU_OMP_THREADS_BIND" in header and "${HF_TOKEN}" not in header


def test_export_errors():
    with pytest.raises(SpecError, match="valid: vllm, compose, k8s"):
        export_launch(trial(0, [level(4)]), "helm")
    with pytest.raises(NovaError, match="no launch argv"):
        export_launch(TrialResult(number=7, state="PRUNED"), "vllm")


def _policy(*ranges: PolicyRange, schedule=None) -> Verdict:
    return Verdict("output_throughput", True, "0", None, (), (), tuple(ranges), schedule, "")


def _range(lo, hi, choice, t, k=None):
    return PolicyRange(
        lo, hi, choice, t.key, t.study, t.number, "ngram" if k else "none", k, t.deployable_argv, ()
    )


def test_the_policy_export_names_its_source_and_asks_for_a_concurrency_when_it_switches():
    tuned = trial(0, [level(4)], argv=launch_argv(0))
    spec = trial(
        1,
        [level(4)],
        argv=launch_argv(1, speculative_config='{"method":"ngram","num_speculative_tokens":3}'),
        config=EngineConfig.from_dict({"speculative": {"method": "ngram", "num_speculative_tokens": 3}}),
    )
    r = study(tuned, spec)
    one = launch_of_policy(r, _policy(_range(1, None, "tuned", tuned)))
    assert "the tuned configuration at every concurrency (trial 0)" in one.source
    switching = _policy(_range(1, 16, "speculative", spec, 3), _range(17, None, "tuned", tuned))
    with pytest.raises(SpecError, match=r"--concurrency: .*\(1-16: ngram k=3 \(trial 1\); 17-inf: tuned"):
        launch_of_policy(r, switching)
    assert launch_of_policy(r, switching, concurrency=8).flags == launch_of_trial(spec).flags
    assert launch_of_policy(r, switching, concurrency=64).flags == launch_of_trial(tuned).flags
    scheduled = launch_of_policy(r, _policy(*switching.policy, schedule=((1, 16, 3), (17, 1024, 0))))
    text = render(deployable(scheduled), "vllm")
    assert '"num_speculative_tokens_per_batch_size":[[1,16,3],[17,1024,0]]' in text
    assert "one server" in text.splitlines()[0]


def _cpu_trial(number: int = 6) -> TrialResult:
    """A trial measured the way a CPU study runs: a share of host memory, eager mode, served as 'tiny'."""
    argv = launch_argv(number, gpu_memory_utilization=0.3)
    return trial(number, [level(4)], argv=(*argv[:-4], "--enforce-eager", *argv[-4:]))


def test_a_cpu_study_exports_for_the_cpu_and_is_never_sent_to_a_gpu():
    t = _cpu_trial()
    for fmt in ("vllm", "compose", "k8s"):
        with pytest.raises(
            SpecError, match=r"--device cuda: trial 6 .* was measured on cpu; .* --enforce-eager"
        ):
            export_launch(t, fmt, measured_on="cpu", device="cuda")
    text = export_launch(t, "compose", measured_on="cpu")
    assert text.startswith("# nova-search: trial 6 (search, COMPLETE), engine 0.11.0 on cpu\n")
    svc = yaml.safe_load(text)["services"]["vllm"]
    assert svc["image"] == f"{IMAGES['cpu']}:v0.11.0" and "deploy" not in svc  # no GPU reservation
    # measured on the CPU, deployed on the CPU: its flags mean what they meant when measured
    assert svc["command"][-3:] == ["--gpu-memory-utilization", "0.3", "--enforce-eager"]
    *_, deployment = yaml.safe_load_all(export_launch(t, "k8s", measured_on="cpu", device="cpu"))
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    assert c["image"].startswith(IMAGES["cpu"] + ":")
    assert not any("nvidia" in k for part in c["resources"].values() for k in part)
    with pytest.raises(SpecError, match=r"--device 'tpu': valid: cuda, cpu"):
        deployable(launch_of_trial(t, device="cpu"), device="tpu")


def test_an_unknown_device_is_said_loudly():
    text = export_launch(trial(1, [level(4)]), "vllm")
    assert "# WARNING: the study does not say which device it measured on: exported for cuda" in text
    assert "WARNING" not in export_launch(trial(1, [level(4)]), "vllm", measured_on="cuda")


def test_device_of_reads_the_spec():
    assert device_of(study(trial(0, [level(4)]))) is None  # no spec: unknown
    assert device_of(replace(study(trial(0, [level(4)])), spec={"engine": {"device": "cpu"}})) == "cpu"
    assert device_of(replace(study(trial(0, [level(4)])), spec={"engine": {}})) == "cuda"  # the default


def test_model_replaces_the_served_name():
    t = trial(3, [level(4)], argv=launch_argv(3, model=".nova/tiny-model", load_format="dummy"))
    text = export_launch(t, "vllm", model="Qwen/Qwen3-8B")
    argv = shlex.split(text.splitlines()[-1])
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert argv.count("--served-model-name") == 1
    assert argv[argv.index("--served-model-name") + 1] == "Qwen/Qwen3-8B" and "m" not in argv
    assert "# --served-model-name Qwen/Qwen3-8B (the study served m)" in text
    # no --model: the measured name stays (it names the measured model)
    kept = shlex.split(export_launch(trial(4, [level(4)]), "vllm").splitlines()[-1])
    assert kept[kept.index("--served-model-name") + 1] == "m"


def test_yaml_has_no_anchors_and_names_are_checked():
    t = trial(1, [level(4)])
    for fmt in ("compose", "k8s"):
        text = export_launch(t, fmt)
        assert not re.search(r"[&*]id\d", text), text  # PyYAML's anchors and aliases
    with pytest.raises(SpecError, match=r"--name 'My_LLM': lower-case letters"):
        export_launch(t, "k8s", name="My_LLM")
    launch = Launch(model="gpt2", flags=(), gpus=1, engine_version=None, source="x", device="cuda")
    assert render(launch, "vllm", name="Not A Name").endswith("vllm serve gpt2\n")  # no name in a command


# ---------------------------------------------------------------- injection (issue 40, finding 1)

#: a Pod that a model path tries to slip into the k8s export as a document of its own
POD = (
    "---\napiVersion: v1\nkind: Pod\nmetadata: {name: evil}\nspec: {hostPID: true, containers: "
    "[{name: x, image: busybox, securityContext: {privileged: true}}]}"
)


def _source_vllm_export(text: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """``source`` the vllm export in bash with ``vllm`` stubbed: (the argv each ``vllm`` call got, the
    files the script made in ``tmp_path``/run)."""
    run = tmp_path / "run"
    run.mkdir()
    script = tmp_path / "export.sh"
    script.write_text(text)
    stub = 'vllm() { printf "%s\\0" "$@" >> calls; printf "\\1" >> calls; }\n'
    subprocess.run(["bash", "-c", stub + f"source {shlex.quote(str(script))}"], cwd=run, timeout=30)
    calls = (run / "calls").read_bytes().decode().split("\x01") if (run / "calls").exists() else []
    made = sorted(p.name for p in run.iterdir() if p.name != "calls")
    return [c for c in calls if c], made


@pytest.mark.parametrize(
    "where",
    ["model path", "engine version", "--model", "served name"],
)
def test_a_newline_and_a_command_never_run_when_the_vllm_export_is_sourced(tmp_path, where):
    """The payload of the issue: ``./m`` + newline + ``touch ...``: sourcing the export (``vllm``
    stubbed) calls ``vllm`` once with the whole value as one word, and runs no ``touch``."""
    payload = "./m\ntouch INJECTED\n$(touch INJECTED2)\r`touch INJECTED3`"
    model, version, option, served = "/models/m", "0.11.0", None, "m"
    if where == "model path":
        model = payload
    elif where == "engine version":
        version = "0.26.0\ntouch INJECTED"
    elif where == "--model":
        option = payload
    else:
        served = payload
    argv = list(launch_argv(1, model=model))
    argv[argv.index("--served-model-name") + 1] = served
    t = replace(trial(1, [level(4)], argv=tuple(argv)), engine_version=version)
    text = export_launch(t, "vllm", model=option, as_measured=option is None)
    header = text[: text.index("\nvllm serve ")].split("\n")
    assert all(line.startswith("# ") for line in header), text  # the header is comments only
    calls, made = _source_vllm_export(text, tmp_path)
    assert made == [], text  # no injected command ran
    assert len(calls) == 1, calls
    words = calls[0].split("\0")
    assert words[0] == "serve" and (payload in words or where == "engine version")


def test_a_yaml_document_in_a_path_stays_a_string_in_k8s_and_compose():
    """A path that carries ``---`` and a privileged Pod: the k8s export is still three documents (the
    claim, the Service, the Deployment), compose one service; the path is one argument."""
    path = "/models/m\n" + POD + "\n#"
    t = replace(trial(1, [level(4)], argv=launch_argv(1, model=path)), engine_version="0.26.0\n" + POD)
    k8s = export_launch(t, "k8s", as_measured=True)
    docs = list(yaml.safe_load_all(k8s))
    assert [d["kind"] for d in docs] == ["PersistentVolumeClaim", "Service", "Deployment"], k8s
    assert "hostPID" not in yaml.safe_dump(docs[:2]) and all(
        line.startswith("#") or not line.startswith("kind: Pod") for line in k8s.splitlines()
    )
    container = docs[2]["spec"]["template"]["spec"]["containers"][0]
    assert f"/models/{Path(path).name}" in container["args"]
    assert set(docs[2]["spec"]["template"]["spec"]) == {
        "automountServiceAccountToken", "securityContext", "containers", "volumes",
    }  # fmt: skip
    compose_text = export_launch(t, "compose", as_measured=True)
    compose = list(yaml.safe_load_all(compose_text))
    assert len(compose) == 1 and set(compose[0]) == {"services", "volumes"}, compose_text
    assert list(compose[0]["services"]) == ["vllm"]
    (bind,) = [v for v in compose[0]["services"]["vllm"]["volumes"] if isinstance(v, dict)]
    assert bind["source"] == path and bind["read_only"] is True


def test_interpolation_in_compose_and_k8s_keeps_a_dollar_literal():
    """docker compose interpolates ``$VAR`` / ``${VAR}`` in every value and Kubernetes ``$(VAR)`` in
    args: a model path ``/m/$(VLLM_API_KEY)`` must not become the API key on the command line."""
    t = trial(1, [level(4)], argv=launch_argv(1, model="/m/$(VLLM_API_KEY)${HOME}"))
    compose = yaml.safe_load(export_launch(t, "compose"))["services"]["vllm"]
    assert "/models/$$(VLLM_API_KEY)$${HOME}" in compose["command"]
    k8s = list(yaml.safe_load_all(export_launch(t, "k8s")))
    args = k8s[2]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "/models/$$(VLLM_API_KEY)${HOME}" in args


def test_a_colon_in_the_model_path_cannot_add_a_compose_mount():
    t = trial(1, [level(4)], argv=launch_argv(1, model="/etc:/models/x:rw,/m"))
    svc = yaml.safe_load(export_launch(t, "compose"))["services"]["vllm"]
    binds = [v for v in svc["volumes"] if isinstance(v, dict)]
    assert binds == [
        {"type": "bind", "source": "/etc:/models/x:rw,/m", "target": "/models/m", "read_only": True}
    ]


def test_a_path_that_names_no_folder_is_refused_naming_model():
    with pytest.raises(SpecError, match="--model: '/models/..' names no folder"):
        export_launch(trial(1, [level(4)], argv=launch_argv(1, model="/models/..")), "k8s")


def test_a_stored_token_flag_is_masked_in_every_export():
    """A study stored before the spec refused ``--hf-token VALUE`` in extra_args: no export prints it,
    and the flag is dropped (its masked value would not run): HF_TOKEN comes from the environment."""
    argv = (
        *launch_argv(1)[:-4],
        "--hf_token",
        "hf_storedsecret",
        "--api-key=k3y",
        "--host",
        "h",
        "--port",
        "1",
    )
    t = trial(1, [level(4)], argv=argv)
    for fmt in ("vllm", "compose", "k8s"):
        text = export_launch(t, fmt)
        assert "hf_storedsecret" not in text and "k3y" not in text, text
        assert "--hf_token" not in text and "--api-key=" not in text, text  # dropped, and said so
        assert "# --hf-token, --api-key dropped" in text
