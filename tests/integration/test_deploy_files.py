"""The deployment files (docker/: Dockerfile, compose, Kubernetes, Slurm, helper scripts) checked against
the code they drive. Every ``nova-search`` command line in them is parsed by the real CLI (the typer app,
not a copied list of commands); every NOVA_* variable they use is read by something; GPUs are reserved
per worker; start-up order is right; no secret is written down; the Dockerfile keeps the house rules.
Fast: no container engine, no cluster, no database server (the helpers run against SQLite).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import typer.main
import yaml

from nova_search import cli
from nova_search.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "Dockerfile"
COMPOSE = DOCKER / "compose.yaml"
ENV_EXAMPLE = DOCKER / ".env.example"
K8S = DOCKER / "k8s"
K8S_FILES = sorted(K8S.glob("*.yaml"))
SBATCH_FILES = sorted((DOCKER / "slurm").glob("*.sbatch"))
BIN = DOCKER / "bin"
HELPERS = sorted(p for p in BIN.iterdir() if p.is_file())
GPU_SPEC = REPO / "studies" / "qwen3-8b-gpu.yaml"

#: NOVA_* variables read by the deployment's own scripts rather than by nova-search: name -> the file
#: that reads it (checked: the name must occur there).
SCRIPT_ENV = {
    # nova-with-secret builds NOVA_STORAGE from these (compose hands the password over as a file)
    "NOVA_DB_HOST": BIN / "nova-with-secret",
    "NOVA_DB_PORT": BIN / "nova-with-secret",
    "NOVA_DB_USER": BIN / "nova-with-secret",
    "NOVA_DB_NAME": BIN / "nova-with-secret",
    "NOVA_DB_PASSWORD_FILE": BIN / "nova-with-secret",
    # the spec the create step reads (compose's create service, the Kubernetes setup Job)
    "NOVA_SPEC": COMPOSE,
    # compose interpolation only (docker/.env): the image tag and where the dashboard is published
    "NOVA_IMAGE": COMPOSE,
    "NOVA_DASHBOARD_BIND": COMPOSE,
    "NOVA_DASHBOARD_PORT": COMPOSE,
    # the sbatch script: where the worker runs (Apptainer image or venv) and where its logs go
    "NOVA_SIF": DOCKER / "slurm" / "nova-worker.sbatch",
    "NOVA_VENV": DOCKER / "slurm" / "nova-worker.sbatch",
    "NOVA_ARTIFACTS_DIR": DOCKER / "slurm" / "nova-worker.sbatch",
}
#: the image's own executables: the CLI and the helpers copied from docker/bin
IMAGE_COMMANDS = {"nova-search"} | {p.name for p in HELPERS}
#: the image's name in compose (before interpolation) and in the Kubernetes manifests
K8S_IMAGE = "nova-search-worker"


# ---------------------------------------------------------------- the CLI, from the typer app


ROOT = typer.main.get_command(cli.app)


def _walk_commands(cmd: Any = ROOT) -> Iterator[Any]:
    yield cmd
    for sub in getattr(cmd, "commands", {}).values():
        yield from _walk_commands(sub)


def cli_envvars() -> set[str]:
    """Every environment variable an option or argument of any command (groups included) reads."""
    names: set[str] = set()
    for cmd in _walk_commands():
        for param in cmd.params:
            env = getattr(param, "envvar", None)
            names.update([env] if isinstance(env, str) else env or [])
    return names


def code_envvars() -> set[str]:
    """NOVA_* variables nova_search reads itself through os.environ or ``db._url.env_number`` (heartbeats,
    the retry window, the engine python)."""
    pattern = re.compile(r"""(?:environ(?:\.get\(|\[|\.setdefault\()|env_number\()\s*["'](NOVA_\w+)["']""")
    return {m for p in (REPO / "nova_search").rglob("*.py") for m in pattern.findall(p.read_text())}


def parse_nova(args: list[str], env: dict[str, str], where: str) -> tuple[str, dict[str, Any]]:
    """Parse ``nova-search ARGS`` with the real CLI, running nothing: each subcommand must exist, every
    option must be one of that command's, values must convert, and required arguments must be given or
    come from their variable in ``env`` (the container's environment). Returns the command path and the
    parsed parameters."""
    cmd, path, rest = ROOT, ["nova-search"], list(args)
    while hasattr(cmd, "commands"):
        assert rest, f"{where}: `{' '.join(path)}` needs a subcommand ({', '.join(sorted(cmd.commands))})"
        name = rest.pop(0)
        assert name in cmd.commands, (
            f"{where}: `{' '.join(path)}` has no subcommand {name!r} "
            f"(it has {', '.join(sorted(cmd.commands))})"
        )
        cmd = cmd.commands[name]
        path.append(name)
    with mock.patch.dict(os.environ, env, clear=True):
        try:
            ctx = cmd.make_context(" ".join(path), rest)
        except Exception as e:  # the CLI's own usage errors (typer may vendor click): report them
            message = e.format_message() if hasattr(e, "format_message") else str(e)
            raise AssertionError(f"{where}: `{shlex.join([*path, *rest])}`: {message}") from None
    return " ".join(path[1:]), dict(ctx.params)


# ---------------------------------------------------------------- finding command lines


SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash"}
SHELL_OPERATORS = {";", "&&", "||", "|", "&", "(", ")", ";;"}


def shell_invocations(script: str) -> list[list[str]]:
    """The ``nova-search`` command lines of a shell script: each simple command (between ; && || | and
    newlines, continuations joined) whose words include ``nova-search``, from the word after it. A
    forwarded ``"$@"`` is dropped: what it holds is not in the file."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        if line.lstrip().startswith("#") or not re.search(r"(^|\s)nova-search(\s|$)", line):
            continue
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        segment: list[str] = []
        for token in [*lex, ";"]:
            if token in SHELL_OPERATORS:
                if "nova-search" in segment:
                    found.append([t for t in segment[segment.index("nova-search") + 1 :] if t != "$@"])
                segment = []
            else:
                segment.append(token)
    return found


def shell_scripts(argv: list[str]) -> list[str]:
    """The scripts of ``sh -c SCRIPT`` anywhere in an argv (after a wrapper such as nova-with-secret)."""
    return [argv[i + 2] for i, a in enumerate(argv[:-2]) if a in SHELLS and argv[i + 1] == "-c"]


def argv_invocations(argv: list[str]) -> list[list[str]]:
    found = [argv[argv.index("nova-search") + 1 :]] if "nova-search" in argv else []
    for script in shell_scripts(argv):
        found += shell_invocations(script)
    return found


@dataclass
class Invocation:
    where: str
    args: list[str]
    env: dict[str, str]


# ---------------------------------------------------------------- the Dockerfile


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments and parser directives dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return out


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instr, args in dockerfile_instructions():
        if instr == "ENV":
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def dockerfile_exec(instr: str) -> list[str]:
    values = [args for i, args in dockerfile_instructions() if i == instr]
    assert values, f"the Dockerfile has no {instr}"
    form = json.loads(values[-1])  # exec form: a JSON array; shell form is not JSON and fails here
    assert isinstance(form, list) and all(isinstance(a, str) for a in form), f"{instr} must be a JSON array"
    return form


#: the environment the image documents for a worker at run time (see the Dockerfile's header)
RUNTIME_ENV = {"NOVA_STORAGE": "<secret>", "NOVA_STUDY": "<study>", "NOVA_GPUS": "0"}


def test_dockerfile_base_is_pinned_vllm_image() -> None:
    froms = [args.split()[0] for instr, args in dockerfile_instructions() if instr == "FROM"]
    assert froms, "no FROM"
    for image in froms:
        assert "$" not in image, f"FROM {image}: an ARG hides the tag from review"
        name, _, tag = image.rpartition("@")[0].rpartition(":") if "@" in image else image.rpartition(":")
        assert "/" not in tag and tag, f"FROM {image}: pin a tag (or a digest)"
        assert tag != "latest", f"FROM {image}: 'latest' is not a pin"
    assert froms[-1].startswith("vllm/vllm-openai:"), "the engine comes from vLLM's official image"


def test_dockerfile_runs_as_non_root_user() -> None:
    users = [args for instr, args in dockerfile_instructions() if instr == "USER"]
    assert users, "no USER: the worker would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"USER {users[-1]}"
    runs = " ".join(args for instr, args in dockerfile_instructions() if instr == "RUN")
    assert re.search(rf"useradd\b[^&;|]*\b{re.escape(user)}\b", runs), "the USER is created in the image"
    assert "chown" in runs, "the user owns the folders it writes (artifacts, caches)"
    # the Kubernetes pods that run the image run as that same user
    for _, doc in k8s_docs():
        spec = pod_spec(doc)
        if spec and any(c["image"] == K8S_IMAGE for c in containers(doc)):
            assert str(spec["securityContext"]["runAsUser"]) == user, doc["metadata"]["name"]


def test_dockerfile_installs_the_wheel_as_users_do_and_checks_it_can_migrate() -> None:
    """The image takes the path tests/integration/test_install.py takes: build the wheel, install it
    (never editable, never the source folder), then migrate a database from the installed package."""
    runs = [args for instr, args in dockerfile_instructions() if instr == "RUN"]
    install = next(r for r in runs if "pip wheel" in r)
    assert re.search(r"pip wheel [^&]*--no-deps -w (\S+) \.", install), install
    assert re.search(r"pip install [^&]*\S+/nova_search-\*\.whl", install), install
    assert " -e " not in install and "install ." not in install and "install --no-cache-dir ." not in install
    assert "nova-search db upgrade --storage sqlite:///" in install
    copies = [args for instr, args in dockerfile_instructions() if instr == "COPY"]
    # the wheel maps the top-level alembic/ into the package: the build needs it, the image uses the wheel's
    assert "alembic ./alembic" in copies, "the wheel is built with the migrations inside"


def test_dockerfile_entrypoint_is_the_worker_in_exec_form() -> None:
    entrypoint = dockerfile_exec("ENTRYPOINT")
    assert entrypoint == ["nova-search", "worker"]
    dockerfile_exec("CMD")  # exec form too


def test_dockerfile_has_no_remote_add_and_no_caches() -> None:
    instructions = dockerfile_instructions()
    for instr, args in instructions:
        assert not (instr == "ADD" and re.search(r"https?://", args)), f"ADD {args}: fetch with a pinned RUN"
    env = dockerfile_env()
    for instr, args in instructions:
        if instr != "RUN":
            continue
        if re.search(r"\bpip3? install\b", args):
            assert "--no-cache-dir" in args or env.get("PIP_NO_CACHE_DIR") == "1", f"RUN {args}: pip cache"
        if re.search(r"\bapt-get install\b", args):
            assert "--no-install-recommends" in args, f"RUN {args}"
            assert "rm -rf /var/lib/apt/lists" in args, f"RUN {args}: apt lists stay in the layer"


def test_dockerfile_bakes_in_no_secret_nor_storage() -> None:
    for instr, args in dockerfile_instructions():
        if instr in ("ENV", "ARG"):
            keys = [item.partition("=")[0] for item in shlex.split(args)]
            for key in keys:
                assert key != "NOVA_STORAGE" and "PASSWORD" not in key.upper(), f"{instr} {key}: at run time"
    assert any(i == "HEALTHCHECK" and a.split()[0] == "NONE" for i, a in dockerfile_instructions())


def test_dockerfile_copies_what_exists_and_dockerignore_lets_it_through() -> None:
    ignore = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines()]
    ignore = [ln for ln in ignore if ln and not ln.startswith("#")]
    assert ignore[0] == "*", ".dockerignore is an allowlist: everything out, then what the image needs"
    allowed = [ln[1:].rstrip("/") for ln in ignore if ln.startswith("!")]
    for instr, args in dockerfile_instructions():
        if instr != "COPY":
            continue
        words = [w for w in args.split() if not w.startswith("--")]
        for src in words[:-1]:
            assert (REPO / src).exists(), f"COPY {src}: not in the repository"
            assert any(src.rstrip("/") == a or src.startswith(a + "/") for a in allowed), (
                f"COPY {src}: excluded from the build context by .dockerignore"
            )
    scripts = json.dumps(
        __import__("tomllib").loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    )
    assert '"nova-search"' in scripts, "the ENTRYPOINT's console script is installed by pyproject"


def dockerfile_invocations() -> list[Invocation]:
    argv = dockerfile_exec("ENTRYPOINT") + dockerfile_exec("CMD")
    env = {**dockerfile_env(), **RUNTIME_ENV}
    return [Invocation("Dockerfile ENTRYPOINT+CMD", args, env) for args in argv_invocations(argv)]


# ---------------------------------------------------------------- compose


def env_example() -> dict[str, str]:
    """docker/.env.example as compose would read it once copied to docker/.env."""
    out = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


_INTERPOLATION = re.compile(r"\$\$|\$\{(\w+)(?::?([-?])([^}]*))?\}|\$(\w+)")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation ($$ is a literal $), recursively."""
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$$":
                return "$"
            name = m.group(1) or m.group(4)
            if name in env:
                return env[name]
            assert m.group(2) != "?", f"compose needs {name} (no default)"
            return m.group(3) if m.group(2) == "-" else ""

        return _INTERPOLATION.sub(sub, value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def compose() -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env_example())


def service_argv(service: dict[str, Any]) -> list[str]:
    def as_list(v: Any) -> list[str]:
        return shlex.split(v) if isinstance(v, str) else list(v or [])

    entrypoint = as_list(service["entrypoint"]) if "entrypoint" in service else None
    if entrypoint is None and service.get("image", "").startswith(K8S_IMAGE):
        entrypoint = dockerfile_exec("ENTRYPOINT")
    command = as_list(service["command"]) if "command" in service else []
    return (entrypoint or []) + command


def service_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def compose_invocations() -> list[Invocation]:
    out = []
    for name, service in compose()["services"].items():
        for args in argv_invocations(service_argv(service)):
            out.append(Invocation(f"compose service {name}", args, service_env(service)))
    return out


def worker_services() -> dict[str, dict[str, Any]]:
    found = {}
    for name, service in compose()["services"].items():
        if any(a[:1] == ["worker"] for a in argv_invocations(service_argv(service))):
            found[name] = service
    return found


def test_compose_parses_and_every_nova_service_runs_the_image() -> None:
    services = compose()["services"]
    for name, service in services.items():
        if name == "postgres":
            continue
        assert service["image"].startswith(K8S_IMAGE), f"{name}: the worker image"
        argv = service_argv(service)
        assert argv[0] in IMAGE_COMMANDS, f"{name}: {argv[0]} is not in the image"


def test_compose_postgres_is_pinned_healthchecked_and_password_from_a_secret() -> None:
    pg = compose()["services"]["postgres"]
    image, _, tag = pg["image"].rpartition(":")
    assert image == "postgres" and re.match(r"\d+(\.\d+)*", tag), f"pin postgres: {pg['image']}"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    env = service_env(pg)
    assert "POSTGRES_PASSWORD" not in env, "the password comes from a file, never a value"
    secret_file = env["POSTGRES_PASSWORD_FILE"]
    assert secret_file.startswith("/run/secrets/") and secret_file.rsplit("/", 1)[1] in pg["secrets"]
    assert any(v.startswith("pgdata:") for v in pg["volumes"]), "data on the named volume"
    assert "ports" not in pg, "PostgreSQL is reachable on the compose network only"


def test_compose_start_order() -> None:
    services = compose()["services"]

    def needs(name: str) -> dict[str, str]:
        return {k: v["condition"] for k, v in services[name]["depends_on"].items()}

    assert needs("migrate") == {"postgres": "service_healthy"}
    assert needs("create") == {"migrate": "service_completed_successfully"}
    assert needs("dashboard") == {"migrate": "service_completed_successfully"}
    for name in worker_services():
        assert needs(name) == {"create": "service_completed_successfully"}, name
    for one_off in ("migrate", "create"):
        assert services[one_off]["restart"] == "no", f"{one_off} runs once per `up`"


def test_compose_workers_reserve_one_distinct_gpu_each() -> None:
    workers = worker_services()
    assert len(workers) >= 2
    seen: list[str] = []
    for name, service in workers.items():
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert len(devices) == 1, name
        (device,) = devices
        assert device["driver"] == "nvidia" and "gpu" in device["capabilities"], name
        assert len(device["device_ids"]) == 1, f"{name}: one GPU per worker"
        seen += device["device_ids"]
        assert service_env(service)["NOVA_GPUS"] == "0", f"{name}: its one GPU is number 0 inside"
    assert len(set(seen)) == len(seen), f"two workers on one GPU: {seen}"
    for name, service in compose()["services"].items():
        if name not in workers:
            assert "deploy" not in service, f"{name} holds no GPU"


def test_compose_volumes_hold_artifacts_and_model_cache() -> None:
    data = compose()
    hf_home = dockerfile_env()["HF_HOME"]
    for name, service in worker_services().items():
        (args,) = [a for a in argv_invocations(service_argv(service)) if a[:1] == ["worker"]]
        _, params = parse_nova(args, service_env(service), name)
        mounts = dict(v.split(":")[1::-1] for v in service["volumes"])  # target -> volume
        assert mounts.get(params["artifacts_dir"]) == "artifacts", f"{name}: --artifacts-dir on the volume"
        assert mounts.get(hf_home) == "hf-cache", f"{name}: HF_HOME ({hf_home}) on the shared cache volume"
    assert {"artifacts", "hf-cache", "pgdata"} <= set(data["volumes"])


def test_compose_create_mounts_the_spec_read_only_and_it_exists() -> None:
    create = compose()["services"]["create"]
    assert "../studies:/studies:ro" in create["volumes"]
    spec = service_env(create)["NOVA_SPEC"]
    load_spec(REPO / "studies" / spec, [])
    (args,) = [a for a in argv_invocations(service_argv(create)) if a[:1] == ["create"]]
    assert args[1] == "/studies/$NOVA_SPEC" and "--study-name" in args


def test_compose_secret_wiring_and_dashboard_on_loopback() -> None:
    data = compose()
    for name, service in data["services"].items():
        if service_argv(service)[:1] != ["nova-with-secret"]:
            continue
        env = service_env(service)
        assert "NOVA_STORAGE" not in env, f"{name}: the URL is built from the secret, not written here"
        secret = env["NOVA_DB_PASSWORD_FILE"].removeprefix("/run/secrets/")
        assert secret in service["secrets"] and secret in data["secrets"], name
    for secret in data["secrets"].values():
        path = (DOCKER / secret["file"]).resolve().relative_to(REPO)
        ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=REPO)
        assert ignored.returncode == 0, f"{path} must be git-ignored"
    assert subprocess.run(["git", "check-ignore", "-q", "docker/.env"], cwd=REPO).returncode == 0
    (port,) = data["services"]["dashboard"]["ports"]
    assert port.startswith("127.0.0.1:"), f"the dashboard has no login: {port}"


def test_compose_dashboard_serves_the_workers_artifacts() -> None:
    data = compose()
    dash = data["services"]["dashboard"]
    folder = service_env(dash)["NOVA_ARTIFACTS_DIR"]
    worker = next(s for name, s in data["services"].items() if name.startswith("worker-"))
    argv = service_argv(worker)
    assert argv[argv.index("--artifacts-dir") + 1] == folder, "the folder the workers upload artifacts to"
    volumes = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in dash["volumes"]]
    assert f"artifacts:{folder}:ro" in volumes


# ---------------------------------------------------------------- Kubernetes


def k8s_docs() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p in K8S_FILES for d in yaml.safe_load_all(p.read_text()) if d is not None]


def kustomization() -> dict[str, Any]:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def study_config() -> dict[str, str]:
    (gen,) = [g for g in kustomization()["configMapGenerator"] if g["name"] == "nova-study"]
    return dict(lit.split("=", 1) for lit in gen["literals"])


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc["kind"] in ("Job", "Deployment", "StatefulSet", "DaemonSet"):
        return doc["spec"]["template"]["spec"]
    return None


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(doc) or {}
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def container_env(container: dict[str, Any]) -> dict[str, str]:
    config = study_config()
    env = {}
    for item in container.get("env", []):
        ref = item.get("valueFrom", {}).get("configMapKeyRef")
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif ref and ref["name"] == "nova-study":
            env[item["name"]] = config[ref["key"]]
        else:
            env[item["name"]] = f"<{item['name']} from a Secret>"
    return env


def container_argv(container: dict[str, Any]) -> list[str]:
    if "command" in container:
        return [*container["command"], *container.get("args", [])]
    assert container["image"] == K8S_IMAGE, f"{container['name']}: no command and not the worker image"
    return [*dockerfile_exec("ENTRYPOINT"), *container.get("args", dockerfile_exec("CMD"))]


def k8s_invocations() -> list[Invocation]:
    out = []
    for path, doc in k8s_docs():
        for c in containers(doc):
            if c["image"] != K8S_IMAGE:
                continue
            where = f"{path.name} {doc['kind']}/{doc['metadata']['name']} container {c['name']}"
            out += [Invocation(where, a, container_env(c)) for a in argv_invocations(container_argv(c))]
    return out


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for _, d in k8s_docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def test_k8s_manifests_parse_and_are_namespace_agnostic() -> None:
    docs = k8s_docs()
    assert docs
    for path, doc in docs:
        assert {"apiVersion", "kind"} <= set(doc), path.name
        if doc["kind"] != "Kustomization":
            assert "namespace" not in doc["metadata"], f"{path.name}: no namespace in the manifests"


def test_kustomization_lists_the_manifests_but_not_the_secret_example() -> None:
    resources = kustomization()["resources"]
    on_disk = {p.name for p in K8S_FILES} - {"kustomization.yaml", "secret.example.yaml"}
    assert set(resources) == on_disk
    assert "secret.example.yaml" not in resources, "applying it would overwrite the real Secret"
    (image,) = kustomization()["images"]
    assert image["name"] == K8S_IMAGE
    images = {c["image"] for _, d in k8s_docs() for c in containers(d)}
    assert images <= {K8S_IMAGE, compose()["services"]["postgres"]["image"]}, images
    assert kustomization()["generatorOptions"]["disableNameSuffixHash"] is True


def test_k8s_secret_is_a_placeholder_and_references_match_it() -> None:
    secret = k8s_object("Secret", "nova-db")
    keys = set(secret["stringData"])
    for value in secret["stringData"].values():
        assert "REPLACE_ME" in value, "the committed Secret holds placeholders only"
    config = study_config()
    for _, doc in k8s_docs():
        for c in containers(doc):
            for item in c.get("env", []):
                ref = item.get("valueFrom", {})
                if "secretKeyRef" in ref:
                    assert ref["secretKeyRef"]["name"] == "nova-db" and ref["secretKeyRef"]["key"] in keys
                if "configMapKeyRef" in ref:
                    assert ref["configMapKeyRef"]["name"] == "nova-study"
                    assert ref["configMapKeyRef"]["key"] in config


def test_k8s_spec_path_is_baked_into_the_image_and_valid() -> None:
    spec = study_config()["NOVA_SPEC"]
    assert spec.startswith("/opt/nova-search/studies/")
    assert any(i == "COPY" and a.split()[0] == "studies" for i, a in dockerfile_instructions())
    load_spec(REPO / "studies" / Path(spec).name, [])


def test_k8s_setup_job_migrates_then_creates() -> None:
    job = k8s_object("Job", "nova-setup")
    spec = pod_spec(job)
    (init,) = spec["initContainers"]
    (main,) = spec["containers"]
    assert [a[:2] for a in argv_invocations(container_argv(init))] == [["db", "upgrade"]]
    assert [a[:1] for a in argv_invocations(container_argv(main))] == [["create"]]
    assert spec["restartPolicy"] == "OnFailure"


def test_k8s_workers_are_an_indexed_job_with_one_gpu_per_pod() -> None:
    job = k8s_object("Job", "nova-worker")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"]
    pod = pod_spec(job)
    assert pod["restartPolicy"] == "Never", "podFailurePolicy and backoffLimitPerIndex need Never"
    assert spec["backoffLimitPerIndex"] >= 1
    rules = spec["podFailurePolicy"]["rules"]
    bad_input = {"containerName": "worker", "operator": "In", "values": [2]}
    assert {"action": "FailJob", "onExitCodes": bad_input} in rules, "bad input fails the Job, no crash loop"
    (worker,) = pod["containers"]
    assert worker["name"] == "worker"
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container_env(worker)["NOVA_GPUS"] == "0"
    (args,) = argv_invocations(container_argv(worker))
    assert args[0] == "worker"
    mounts = {m["mountPath"] for m in worker["volumeMounts"]}
    assert {"/dev/shm", dockerfile_env()["HF_HOME"]} <= mounts
    _, params = parse_nova(args, container_env(worker), "nova-worker")
    assert params["artifacts_dir"] in mounts and params["gpus"] == "0" and params["study"] == "qwen3-8b"
    for _, doc in k8s_docs():
        for c in containers(doc):
            gpu = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            assert gpu is None or c is worker or c["name"] == "worker", f"{c['name']} holds no GPU"


def test_kustomization_sets_parallelism_and_completions_together() -> None:
    (patch,) = [p for p in kustomization()["patches"] if p["target"]["name"] == "nova-worker"]
    ops = {op["path"]: op["value"] for op in yaml.safe_load(patch["patch"])}
    assert ops["/spec/parallelism"] == ops["/spec/completions"] >= 1


def test_k8s_postgres_and_dashboard() -> None:
    sts = k8s_object("StatefulSet", "nova-postgres")
    (pg,) = containers(sts)
    assert "pg_isready" in pg["readinessProbe"]["exec"]["command"]
    assert k8s_object("Service", "nova-postgres")["spec"]["ports"][0]["port"] == 5432
    (dash,) = containers(k8s_object("Deployment", "nova-dashboard"))
    assert container_argv(dash)[0] == "nova-dashboard"
    assert k8s_object("Service", "nova-dashboard")["spec"]["type"] == "ClusterIP"


# ---------------------------------------------------------------- Slurm


def sbatch_invocations() -> list[Invocation]:
    env = {"NOVA_STORAGE": "<from the environment>", "NOVA_STUDY": "<from the environment>"}
    return [
        Invocation(path.name, args, env)
        for path in SBATCH_FILES
        for args in shell_invocations(path.read_text())
    ]


@pytest.mark.parametrize("path", SBATCH_FILES, ids=lambda p: p.name)
def test_sbatch_syntax_and_directives(path: Path) -> None:
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = path.read_text()
    directives = re.findall(r"^#SBATCH\s+(\S+)", text, flags=re.MULTILINE)
    assert "--gres=gpu:1" in directives and any(d.startswith("--array=") for d in directives)
    first_command = next(ln for ln in text.splitlines()[1:] if ln.strip() and not ln.startswith("#"))
    assert text.index(first_command) > text.rindex("#SBATCH"), "sbatch stops reading at the first command"


@pytest.mark.parametrize("path", SBATCH_FILES, ids=lambda p: p.name)
def test_sbatch_fails_clearly_without_storage(path: Path, tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "NOVA_STUDY": "s", "CUDA_VISIBLE_DEVICES": "0"}
    r = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2
    assert "NOVA_STORAGE is not set" in r.stderr
    assert "PASSWORD" in r.stderr  # says what to export, with a placeholder


def test_sbatch_passes_slurms_gpu_to_the_worker() -> None:
    workers = [i for i in sbatch_invocations() if i.args[:1] == ["worker"]]
    assert workers
    for inv in workers:
        _, params = parse_nova(inv.args, inv.env, inv.where)
        assert params["gpus"] == "$CUDA_VISIBLE_DEVICES" and params["study"] == "$NOVA_STUDY"


# ---------------------------------------------------------------- every command line, every variable


def all_invocations() -> list[Invocation]:
    return dockerfile_invocations() + compose_invocations() + k8s_invocations() + sbatch_invocations()


def test_every_nova_search_command_line_parses_with_the_real_cli() -> None:
    invocations = all_invocations()
    found: dict[str, set[str]] = {}
    for inv in invocations:
        command, _ = parse_nova(inv.args, inv.env, inv.where)
        found.setdefault(inv.where.split()[0], set()).add(command)
    # the extraction itself must find the commands each deployment is built on
    assert found["Dockerfile"] == {"worker"}
    assert found["compose"] == {"db upgrade", "create", "worker"}
    assert {"db upgrade", "create", "worker"} <= found["setup-job.yaml"] | found["workers.yaml"]
    assert found["nova-worker.sbatch"] == {"worker"}


def test_a_wrong_command_line_is_caught() -> None:
    """The checker is not vacuous: unknown subcommands and options, bad values, a missing study fail."""
    bad = [
        (["wroker", "s"], {}),
        (["db", "migrate"], {}),
        (["worker", "s", "--gpu", "0"], {}),
        (["worker", "s", "--max-trials", "many"], {}),
        (["worker"], {}),
        (["create", "--study-name", "x"], {}),
    ]
    for args, env in bad:
        with pytest.raises(AssertionError):
            parse_nova(args, env, "example")
    assert parse_nova(["worker"], {"NOVA_STUDY": "s"}, "example")[1]["study"] == "s"


def deployment_files() -> list[Path]:
    return [
        DOCKERFILE,
        COMPOSE,
        ENV_EXAMPLE,
        REPO / ".dockerignore",
        *K8S_FILES,
        *SBATCH_FILES,
        *HELPERS,
    ]


def test_every_nova_variable_is_read_by_something() -> None:
    known = cli_envvars() | code_envvars() | set(SCRIPT_ENV)
    assert {"NOVA_STORAGE", "NOVA_GPUS", "NOVA_STUDY"} <= cli_envvars()
    assert {"NOVA_HEARTBEAT_INTERVAL", "NOVA_GRACE_PERIOD"} <= code_envvars()
    used: dict[str, set[str]] = {}
    for path in deployment_files():
        for name in re.findall(r"\bNOVA_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()):
            used.setdefault(name, set()).add(str(path.relative_to(REPO)))
    unknown = {name: files for name, files in used.items() if name not in known}
    assert not unknown, f"NOVA_* variables nothing reads (a typo, or add them to SCRIPT_ENV): {unknown}"
    for name, reader in SCRIPT_ENV.items():
        assert name in used, f"SCRIPT_ENV lists {name}, which no deployment file uses any more"
        assert name in reader.read_text(), f"{name}: {reader.name} does not read it"


# ---------------------------------------------------------------- no secret written down


_PLACEHOLDER = re.compile(
    r"""(\$\{?\w+(:?-[^}]*)?\}?|\$\(\w+\)|<[^>]+>|\*\*\*|REPLACE_ME|PASSWORD|PW|PASS)""", re.IGNORECASE
)
_URL_CREDENTIALS = re.compile(r"[a-z][a-z0-9+.-]*://([^:/@\s'\"]+):([^@\s'\"]+)@")
_PASSWORD_VALUE = re.compile(
    r"""(?i)\b[\w.-]*passw(or)?d[\w.-]*["']?\s*[=:]\s*["']?([^\s"'$()<{},]+)["']?\s*(\#.*)?$"""
)


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.fullmatch(value)) or value.startswith("/run/secrets/")


def _yaml_secrets(node: Any) -> Iterator[str]:
    """Password values in parsed YAML: a *password* key's value, or a Kubernetes env item
    ``{name: X_PASSWORD, value: ...}`` (the text scan cannot see flow mappings)."""
    if isinstance(node, dict):
        name = node.get("name")
        if isinstance(name, str) and "passw" in name.lower() and isinstance(node.get("value"), str):
            if not _is_placeholder(node["value"]):
                yield f"{name}: {node['value']}"
        for key, value in node.items():
            if isinstance(key, str) and "passw" in key.lower() and isinstance(value, str):
                if not _is_placeholder(value):
                    yield f"{key}: {value}"
            yield from _yaml_secrets(value)
    elif isinstance(node, list):
        for item in node:
            yield from _yaml_secrets(item)


def secrets_in(text: str) -> list[str]:
    """Literal passwords: in a URL's user:password@, as the value of a *password* key or variable, or
    (YAML) of a password env item. Placeholders ($VAR, ${VAR}, <...>, REPLACE_ME, PASSWORD) and
    secret-file paths are fine."""
    found = []
    try:
        for doc in yaml.safe_load_all(text):
            found += list(_yaml_secrets(doc))
    except yaml.YAMLError:
        pass  # not YAML (a script, the Dockerfile): the text patterns below still apply
    for m in _URL_CREDENTIALS.finditer(text):
        if not _PLACEHOLDER.fullmatch(m.group(2)):
            found.append(m.group(0))
    for line in text.splitlines():
        m = _PASSWORD_VALUE.search(line)
        if m and not _is_placeholder(m.group(2)):
            found.append(line.strip())
    return found


def test_the_secret_scanner_finds_literals_and_passes_placeholders() -> None:
    for leak in (
        "NOVA_STORAGE: postgresql+psycopg://nova:hunter2@db:5432/nova",
        "  POSTGRES_PASSWORD: hunter2",
        "password=s3cret",
        "- {name: POSTGRES_PASSWORD, value: 'correct-horse'}",
    ):
        assert secrets_in(leak), leak
    for fine in (
        "postgresql+psycopg://nova:$PW@nova-postgres:5432/nova",
        "postgresql+psycopg://USER:PASSWORD@HOST:5432/DB",
        "NOVA_STORAGE: postgresql+psycopg://nova:REPLACE_ME@nova-postgres:5432/nova",
        "POSTGRES_PASSWORD_FILE: /run/secrets/pg_password",
        "  password = f.read().rstrip()",
        '--from-literal=POSTGRES_PASSWORD="$PW"',
    ):
        assert not secrets_in(fine), fine


def test_no_secret_is_written_in_any_deployment_file() -> None:
    leaks = {str(p.relative_to(REPO)): secrets_in(p.read_text()) for p in [*deployment_files(), GPU_SPEC]}
    assert not {k: v for k, v in leaks.items() if v}, leaks
    for _, doc in k8s_docs():
        for c in containers(doc):
            for item in c.get("env", []):
                if "PASSWORD" in item["name"].upper() or item["name"] == "NOVA_STORAGE":
                    assert "valueFrom" in item, f"{c['name']}: {item['name']} from a Secret, never a value"


# ---------------------------------------------------------------- the helper scripts


@pytest.mark.parametrize("path", HELPERS, ids=lambda p: p.name)
def test_helpers_are_executable_and_well_formed(path: Path) -> None:
    assert os.access(path, os.X_OK), f"{path.name} is not executable (COPY --chmod sets it in the image too)"
    shebang = path.read_text().splitlines()[0]
    if "python" in shebang:
        compile(path.read_text(), str(path), "exec")
    else:
        assert shebang == "#!/bin/sh", f"{path.name}: POSIX sh (the image's /bin/sh)"
        r = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_inline_shell_snippets_are_valid_and_call_only_image_commands() -> None:
    argvs = [service_argv(s) for s in compose()["services"].values()]
    argvs += [container_argv(c) for _, d in k8s_docs() for c in containers(d) if c["image"] == K8S_IMAGE]
    scripts = [s for argv in argvs for s in shell_scripts(argv)]
    assert len(scripts) >= 3  # compose create, k8s create, k8s wait-for-study
    for script in scripts:
        r = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
        assert r.returncode == 0, f"{script}: {r.stderr}"
        for word in re.findall(r"(?<![\w/-])nova-[a-z-]+", script):
            assert word in IMAGE_COMMANDS, f"{script}: {word} is not in the image"


def run_helper(name: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    path = BIN / name
    argv = [sys.executable, str(path)] if "python" in path.read_text().splitlines()[0] else ["sh", str(path)]
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"], **env}
    )


def test_nova_with_secret_builds_the_url_from_the_password_file(tmp_path: Path) -> None:
    from sqlalchemy.engine import make_url

    secret = tmp_path / "pg_password"
    secret.write_text("p@ss:w/rd %x\n")
    show = [sys.executable, "-c", "import os; print(os.environ['NOVA_STORAGE'])"]
    env = {"NOVA_DB_PASSWORD_FILE": str(secret), "NOVA_DB_HOST": "db", "NOVA_DB_NAME": "studies"}
    r = run_helper("nova-with-secret", env, *show)
    assert r.returncode == 0, r.stderr
    url = make_url(r.stdout.strip())
    assert (url.drivername, url.username, url.password, url.host, url.port, url.database) == (
        "postgresql+psycopg",
        "nova",
        "p@ss:w/rd %x",
        "db",
        5432,
        "studies",
    )
    # a URL given outright wins; a missing file is a clear error, not a half-built URL
    r = run_helper("nova-with-secret", {**env, "NOVA_STORAGE": "sqlite:///x.db"}, *show)
    assert r.stdout.strip() == "sqlite:///x.db"
    r = run_helper("nova-with-secret", {"NOVA_DB_PASSWORD_FILE": str(tmp_path / "absent")}, *show)
    assert r.returncode == 2 and "missing, empty or unreadable" in r.stderr
    r = run_helper("nova-with-secret", {}, *show)
    assert r.returncode == 2 and "NOVA_STORAGE" in r.stderr


def python_helper(name: str) -> Any:
    """A Python helper of docker/bin loaded as a module, to call its main() in this process (fast)."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), str(BIN / name))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def call_helper(
    name: str,
    env: dict[str, str],
    *args: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str]:
    with monkeypatch.context() as m:
        for key in ("NOVA_STORAGE", "NOVA_STUDY"):
            m.delenv(key, raising=False)
        for key, value in env.items():
            m.setenv(key, value)
        m.setattr(sys, "argv", [name, *args])
        rc = python_helper(name).main()
    return rc, capsys.readouterr().err


def test_nova_study_exists_answers_for_the_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import optuna

    def exists(env: dict[str, str], *args: str) -> tuple[int, str]:
        return call_helper("nova-study-exists", env, *args, monkeypatch=monkeypatch, capsys=capsys)

    url = f"sqlite:///{tmp_path}/s.db"
    assert exists({"NOVA_STORAGE": url, "NOVA_STUDY": "s"})[0] == 1
    optuna.create_study(study_name="s", storage=url)
    assert exists({"NOVA_STORAGE": url, "NOVA_STUDY": "s"})[0] == 0
    assert exists({"NOVA_STORAGE": url, "NOVA_STUDY": "s"}, "other")[0] == 1
    assert exists({"NOVA_STUDY": "s"})[0] == 2
    rc, err = exists({"NOVA_STORAGE": "postgresql+psycopg://u:hunter2@127.0.0.1:1/x"}, "s")
    assert rc == 1 and "hunter2" not in err and "***" in err


def test_nova_dashboard_needs_the_storage(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = call_helper("nova-dashboard", {}, monkeypatch=monkeypatch, capsys=capsys)
    assert rc == 2 and "NOVA_STORAGE" in err
    env = {"NOVA_STORAGE": "sqlite:///x.db", "NOVA_ARTIFACTS_DIR": "/nonexistent/artifacts"}
    rc, err = call_helper("nova-dashboard", env, monkeypatch=monkeypatch, capsys=capsys)
    assert rc == 2 and "NOVA_ARTIFACTS_DIR" in err


# ---------------------------------------------------------------- the GPU spec


def test_gpu_spec_launches_the_vllm_cli() -> None:
    spec = load_spec(GPU_SPEC, [])
    assert spec.engine.command == ["vllm", "serve"]
    assert spec.engine.device == "cuda" and spec.engine.tensor_parallel_size == 1
    assert spec.sweep.concurrency == [1, 16, 64, 128]
    assert spec.model.vocab_size, "a hub id has no local config.json: the vocabulary size is given"
    assert spec.name == study_config()["NOVA_STUDY"] == env_example()["NOVA_STUDY"]


# ---------------------------------------------------------------- least privilege


def test_every_pod_runs_with_least_privilege() -> None:
    pods = [(p, d) for p, d in k8s_docs() if pod_spec(d)]
    assert pods
    for path, doc in pods:
        spec = pod_spec(doc)
        where = f"{path.name}: {doc['metadata']['name']}"
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec.get("automountServiceAccountToken") is False, where
        for c in containers(doc):
            sc = c.get("securityContext") or {}
            assert sc.get("allowPrivilegeEscalation") is False, f"{where}/{c['name']}"
            assert sc.get("capabilities") == {"drop": ["ALL"]}, f"{where}/{c['name']}"
            assert "memory" in (c.get("resources") or {}).get("limits", {}), (
                f"{where}/{c['name']}: no memory limit"
            )


def test_network_policies_fence_the_dashboard_and_the_database() -> None:
    policies = {d["metadata"]["name"]: d for _, d in k8s_docs() if d["kind"] == "NetworkPolicy"}
    dash = policies["nova-dashboard"]["spec"]
    assert dash["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "nova-dashboard"}
    assert dash["policyTypes"] == ["Ingress"] and dash["ingress"] == []  # nothing reaches the login-less UI
    pg = policies["nova-postgres"]["spec"]
    (rule,) = pg["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "nova-search"}}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 5432}]
    # nova's own pods carry the label the policy admits
    for _, doc in k8s_docs():
        spec = pod_spec(doc)
        if spec and any(c["image"] == K8S_IMAGE for c in containers(doc)):
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert labels["app.kubernetes.io/part-of"] == "nova-search"


def test_compose_workers_are_limited_and_unprivileged() -> None:
    services = compose()["services"]
    workers = {n: s for n, s in services.items() if n.startswith("worker-")}
    assert workers
    for name, svc in workers.items():
        assert svc["deploy"]["resources"]["limits"]["memory"], name
        assert svc["deploy"]["resources"]["limits"]["cpus"], name
    for name, svc in services.items():
        if name != "postgres":
            assert svc["cap_drop"] == ["ALL"] and "no-new-privileges:true" in svc["security_opt"], name
