"""Spec validation: every error is a SpecError that names the dotted path of the bad field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from nova_search.cli import app
from nova_search.errors import SpecError
from nova_search.measure.metrics import METRIC_NAMES
from nova_search.spec import (
    ConstraintSpec,
    EngineSpec,
    IntRange,
    StrChoices,
    apply_overrides,
    load_spec,
    parse_spec,
)


def minimal() -> dict[str, Any]:
    return {
        "name": "mini",
        "model": {"path": "some/model"},
        "sweep": {"concurrency": [1], "requests": 4},
        "objectives": [{"metric": "output_throughput", "direction": "maximize"}],
    }


def spec_error(raw: Any) -> str:
    with pytest.raises(SpecError) as ei:
        parse_spec(raw, "S")
    return str(ei.value)


# ---------------------------------------------------------------- valid specs


def test_minimal_spec_parses_with_defaults() -> None:
    spec = parse_spec(minimal())
    assert spec.name == "mini"
    assert spec.model.path == "some/model"
    assert spec.engine.device == "cuda"
    assert spec.engine.python is None and spec.engine.command is None
    assert spec.sweep.concurrency == [1]
    assert spec.sweep.requests == 4 and spec.sweep.duration_s is None
    assert spec.objectives[0].at == "best"
    assert spec.objectives[0].name == "output_throughput@best"
    assert spec.constraints == []
    assert spec.baselines == ["stock"]
    assert spec.sampler.name == "tpe"
    assert spec.space.speculative.methods() == ["none"]


def test_tiny_cpu_study_parses(tiny_raw: dict[str, Any]) -> None:
    spec = parse_spec(tiny_raw)
    assert spec.engine.device == "cpu"
    assert spec.engine.defaults.max_model_len == 2048
    assert spec.space.max_num_seqs == IntRange(low=4, high=32, log=True)
    assert spec.space.kv_cache_dtype == StrChoices(choices=["auto", "fp8"])
    assert spec.space.speculative.methods() == ["none", "ngram", "draft_model"]
    assert spec.space.speculative.prompt_lookup_min == 2
    assert spec.sweep.concurrency == [1, 4]
    (c,) = spec.constraints
    assert (c.metric, c.op, c.value, c.at) == ("ttft_p99_ms", "<=", 3000.0, 4)
    assert [o.name for o in spec.objectives] == ["output_throughput@best", "ttft_p99_ms@4"]


def test_sweep_levels_are_sorted() -> None:
    raw = minimal()
    raw["sweep"]["concurrency"] = [8, 1, 4]
    assert parse_spec(raw).sweep.concurrency == [1, 4, 8]


def test_spec_is_frozen() -> None:
    spec = parse_spec(minimal())
    with pytest.raises(ValidationError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]


# ---------------------------------------------------------------- unknown keys, types


@pytest.mark.parametrize(
    ("where", "path"),
    [
        (lambda r: r["space"].update(foo=1), "space.foo"),
        (lambda r: r.update(colour="blue"), "colour"),
        (lambda r: r["space"]["speculative"].update(bogus=1), "space.speculative.bogus"),
        (lambda r: r["engine"]["defaults"].update(max_seqs=4), "engine.defaults.max_seqs"),
        (lambda r: r["sweep"].update(request=3), "sweep.request"),
    ],
)
def test_unknown_keys_rejected_with_path(tiny_raw: dict[str, Any], where: Any, path: str) -> None:
    where(tiny_raw)
    msg = spec_error(tiny_raw)
    assert f"  {path}: unknown field" in msg
    assert msg.startswith("S: 1 invalid field(s)")


def test_strings_are_not_coerced_to_numbers(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["max_num_seqs"] = "8"
    msg = spec_error(tiny_raw)
    assert "space.max_num_seqs" in msg
    assert "valid integer" in msg
    assert "(got '8')" in msg


def test_several_errors_are_all_reported(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["foo"] = 1
    tiny_raw["workload"]["bar"] = 2
    msg = spec_error(tiny_raw)
    assert "2 invalid field(s)" in msg
    assert "space.foo" in msg and "workload.bar" in msg


def test_top_level_must_be_a_mapping() -> None:
    assert "top level must be a mapping" in spec_error([1, 2])


def test_missing_required_fields_named() -> None:
    raw = minimal()
    del raw["model"]
    del raw["objectives"]
    msg = spec_error(raw)
    assert "model: Field required" in msg
    assert "objectives: Field required" in msg


def test_bad_study_name_rejected() -> None:
    raw = minimal()
    raw["name"] = "has spaces/and slash"
    assert "  name:" in spec_error(raw)


# ---------------------------------------------------------------- ranges


def test_int_range_low_above_high(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["max_num_seqs"] = {"low": 32, "high": 4}
    msg = spec_error(tiny_raw)
    assert "space.max_num_seqs" in msg
    assert "low (32) must be <= high (4)" in msg


def test_int_log_range_needs_positive_low(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["max_num_seqs"] = {"low": 0, "high": 4, "log": True}
    msg = spec_error(tiny_raw)
    assert "space.max_num_seqs" in msg
    assert "log-scale range needs low > 0" in msg


def test_int_log_range_takes_no_step(tiny_raw: dict[str, Any]) -> None:
    # Optuna refuses step != 1 with log=True at the first suggest; the spec must refuse it first
    tiny_raw["space"]["max_num_seqs"] = {"low": 4, "high": 32, "log": True, "step": 4}
    msg = spec_error(tiny_raw)
    assert "space.max_num_seqs" in msg
    assert "log-scale range takes no step" in msg


@pytest.mark.parametrize("step", [0, -8])
def test_int_range_step_must_be_positive(tiny_raw: dict[str, Any], step: int) -> None:
    tiny_raw["space"]["max_num_batched_tokens"] = {"low": 512, "high": 4096, "step": step}
    msg = spec_error(tiny_raw)
    assert "space.max_num_batched_tokens.range.step" in msg


def test_int_range_with_step(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["max_num_batched_tokens"] = {"low": 512, "high": 4096, "step": 512}
    spec = parse_spec(tiny_raw)
    assert spec.space.max_num_batched_tokens == IntRange(low=512, high=4096, step=512)


def test_float_range_low_above_high(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["gpu_memory_utilization"] = {"low": 0.9, "high": 0.5}
    msg = spec_error(tiny_raw)
    assert "space.gpu_memory_utilization" in msg
    assert "must be <= high" in msg


def test_float_range_accepts_int_bounds(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["gpu_memory_utilization"] = {"low": 0.5, "high": 1}
    spec = parse_spec(tiny_raw)
    assert spec.space.gpu_memory_utilization.high == 1.0  # type: ignore[union-attr]


def test_empty_choices_rejected(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["kv_cache_dtype"] = {"choices": []}
    assert "space.kv_cache_dtype" in spec_error(tiny_raw)


def test_workload_lengths_must_be_positive(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["workload"]["input_len"] = 0
    assert "workload.input_len" in spec_error(tiny_raw)
    tiny_raw["workload"]["input_len"] = {"low": 64, "high": 32}
    assert "workload.input_len" in spec_error(tiny_raw)


# ---------------------------------------------------------------- sweep


@pytest.mark.parametrize(
    "window",
    [{"requests": 4, "duration_s": 10.0}, {}],
    ids=["both", "neither"],
)
def test_sweep_needs_exactly_one_window(window: dict[str, Any]) -> None:
    raw = minimal()
    raw["sweep"] = {"concurrency": [1], **window}
    msg = spec_error(raw)
    assert "sweep: give exactly one of requests or duration_s" in msg


def test_sweep_duration_alone_is_fine() -> None:
    raw = minimal()
    raw["sweep"] = {"concurrency": [2], "duration_s": 5.0}
    assert parse_spec(raw).sweep.duration_s == 5.0


@pytest.mark.parametrize("levels", [[1, 1], [0, 4], [], [-2]])
def test_sweep_levels_checked(levels: list[int]) -> None:
    raw = minimal()
    raw["sweep"]["concurrency"] = levels
    assert "sweep.concurrency" in spec_error(raw)


# ---------------------------------------------------------------- objectives, constraints


def test_objective_level_must_be_in_sweep(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["objectives"][0]["at"] = 8
    msg = spec_error(tiny_raw)
    assert "objectives.0.at" in msg
    assert "8 is not a level of sweep.concurrency [1, 4]" in msg


def test_constraint_level_must_be_in_sweep(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["constraints"] = ["ttft_p99_ms <= 500 at concurrency 16"]
    msg = spec_error(tiny_raw)
    assert "constraints.0.at" in msg
    assert "16 is not a level" in msg


def test_repeated_objectives_rejected(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["objectives"].append(dict(tiny_raw["objectives"][0]))
    assert "objectives repeat" in spec_error(tiny_raw)


def test_objective_unknown_metric_lists_valid_ones(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["objectives"][0]["metric"] = "throughput"
    msg = spec_error(tiny_raw)
    assert "objectives.0.metric" in msg
    assert "unknown metric 'throughput'" in msg
    assert "valid:" in msg and "output_throughput" in msg and "ttft_p99_ms" in msg


def test_objective_bad_direction(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["objectives"][0]["direction"] = "up"
    assert "objectives.0.direction" in spec_error(tiny_raw)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ttft_p99_ms <= 500 at concurrency 4", ("ttft_p99_ms", "<=", 500.0, 4)),
        ("output_throughput >= 120.5 at concurrency 8", ("output_throughput", ">=", 120.5, 8)),
        ("ttft_p99_ms<=500@4", ("ttft_p99_ms", "<=", 500.0, 4)),
        ("error_rate <= 0.01 @ 16", ("error_rate", "<=", 0.01, 16)),
        ("e2e_p90_ms <= 2e3", ("e2e_p90_ms", "<=", 2000.0, "every")),
        ("  itl_mean_ms <= 40  ", ("itl_mean_ms", "<=", 40.0, "every")),
        ("ttft_p50_ms <= 100 @every", ("ttft_p50_ms", "<=", 100.0, "every")),
        ("ttft_p50_ms <= 100 at concurrency every", ("ttft_p50_ms", "<=", 100.0, "every")),
    ],
)
def test_constraint_strings(text: str, expected: tuple[Any, ...]) -> None:
    c = ConstraintSpec.model_validate(text)
    assert (c.metric, c.op, c.value, c.at) == expected


def test_constraint_mapping_form_and_name() -> None:
    c = ConstraintSpec.model_validate({"metric": "ttft_p99_ms", "op": "<=", "value": 500.0, "at": 4})
    assert c.name == "ttft_p99_ms<=500@4"
    assert ConstraintSpec.model_validate("tpot_p99_ms <= 25.5").name == "tpot_p99_ms<=25.5@every"


@pytest.mark.parametrize(
    "text",
    [
        "ttft_p99_ms =< 500",
        "ttft_p99_ms == 500",
        "ttft_p99_ms <= fast",
        "<= 500",
        "ttft_p99_ms <= 5 @",
    ],
)
def test_unreadable_constraint_string(tiny_raw: dict[str, Any], text: str) -> None:
    tiny_raw["constraints"] = [text]
    msg = spec_error(tiny_raw)
    assert "constraints.0" in msg
    assert "cannot read condition" in msg
    assert "ttft_p99_ms <= 500 at concurrency 32" in msg  # the message shows the right form


def test_constraint_unknown_metric_lists_valid_ones(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["constraints"] = ["ttft_p98_ms <= 500"]
    msg = spec_error(tiny_raw)
    assert "constraints.0" in msg
    assert "unknown metric 'ttft_p98_ms'" in msg
    for name in ("ttft_p99_ms", "tpot_p50_ms", "output_throughput", "spec_acceptance_rate"):
        assert name in msg


def test_metric_names_are_numeric_fields_only() -> None:
    assert "concurrency" not in METRIC_NAMES
    assert "first_errors" not in METRIC_NAMES
    assert "spec_accepted_per_pos" not in METRIC_NAMES
    assert {"ttft_p99_ms", "output_throughput", "error_rate", "kv_cache_usage_peak"} <= set(METRIC_NAMES)


# ---------------------------------------------------------------- speculative space


@pytest.mark.parametrize("method", ["eagle", "eagle3", "dflash", "draft_model"])
def test_drafter_required_for_drafter_methods(tiny_raw: dict[str, Any], method: str) -> None:
    tiny_raw["space"]["speculative"] = {
        "method": {"choices": ["none", method]},
        "num_speculative_tokens": 3,
    }
    msg = spec_error(tiny_raw)
    assert "space.speculative" in msg
    assert f"drafters.{method} is required" in msg


def test_drafter_given_for_drafter_method_is_fine(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["speculative"] = {
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "drafters": {"eagle3": "org/eagle3-head"},
    }
    spec = parse_spec(tiny_raw)
    assert spec.space.speculative.drafters == {"eagle3": "org/eagle3-head"}
    assert spec.space.speculative.methods() == ["eagle3"]


def test_drafter_for_method_without_one_rejected(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["speculative"]["drafters"]["ngram"] = "x"
    msg = spec_error(tiny_raw)
    assert "drafters.ngram: only" in msg


def test_unknown_method_rejected(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["speculative"]["method"] = {"choices": ["none", "medusa"]}
    msg = spec_error(tiny_raw)
    assert "space.speculative" in msg and "'medusa' is not one of" in msg


def test_num_speculative_tokens_required_when_method_is_listed(tiny_raw: dict[str, Any]) -> None:
    del tiny_raw["space"]["speculative"]["num_speculative_tokens"]
    msg = spec_error(tiny_raw)
    assert "space.speculative" in msg
    assert "num_speculative_tokens is required" in msg


def test_num_speculative_tokens_not_needed_for_none_only(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["speculative"] = {"method": "none"}
    spec = parse_spec(tiny_raw)
    assert spec.space.speculative.num_speculative_tokens is None


# ---------------------------------------------------------------- engine


def test_engine_python_from_env_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = EngineSpec(python="/spec/python")
    assert engine.resolved_python() == "/spec/python"
    monkeypatch.setenv("NOVA_ENGINE_PYTHON", "/env/python")
    assert engine.resolved_python() == "/env/python"
    assert EngineSpec().resolved_python() == "/env/python"


def test_engine_python_unset_everywhere() -> None:
    assert EngineSpec().resolved_python() is None


def test_engine_command_ignores_python_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVA_ENGINE_PYTHON", "/env/python")
    assert EngineSpec(command=["vllm", "serve"]).resolved_python() is None


def test_engine_python_and_command_both_set(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["engine"]["python"] = "/usr/bin/python3"
    tiny_raw["engine"]["command"] = ["vllm", "serve"]
    msg = spec_error(tiny_raw)
    assert "engine" in msg and "not both" in msg


def test_engine_command_must_not_be_empty(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["engine"]["command"] = []
    assert "engine.command must not be empty" in spec_error(tiny_raw)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--api-key", "secret"], "--api-key"),
        (["--enforce-eager", "--port", "9000"], "--port"),
        (["--host", "0.0.0.0"], "--host"),
        (["--api-key=secret"], "--api-key"),
        (["--port=9000"], "--port"),
    ],
)
def test_extra_args_must_not_set_per_trial_flags(
    tiny_raw: dict[str, Any], args: list[str], flag: str
) -> None:
    tiny_raw["engine"]["extra_args"] = args
    msg = spec_error(tiny_raw)
    assert "engine" in msg
    assert f"extra_args must not set {flag}" in msg


def test_extra_args_with_lookalike_flags_are_fine(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["engine"]["extra_args"] = ["--hostname-override", "x", "--portable"]
    assert parse_spec(tiny_raw).engine.extra_args == ["--hostname-override", "x", "--portable"]


def test_engine_defaults_bounds(tiny_raw: dict[str, Any]) -> None:
    tiny_raw["engine"]["defaults"]["gpu_memory_utilization"] = 1.5
    assert "engine.defaults.gpu_memory_utilization" in spec_error(tiny_raw)


# ---------------------------------------------------------------- overrides


def test_apply_overrides_yaml_values_and_dotted_keys(tiny_raw: dict[str, Any]) -> None:
    out = apply_overrides(
        tiny_raw,
        [
            "sweep.concurrency=[1, 8]",
            "engine.defaults.gpu_memory_utilization=0.5",
            "space.enable_prefix_caching=true",
            "budget.n_trials=3",
            "name=renamed",
            "engine.extra_args=[--enforce-eager]",
        ],
    )
    assert out["sweep"]["concurrency"] == [1, 8]
    assert out["engine"]["defaults"]["gpu_memory_utilization"] == 0.5
    assert isinstance(out["engine"]["defaults"]["gpu_memory_utilization"], float)
    assert out["space"]["enable_prefix_caching"] is True
    assert out["budget"]["n_trials"] == 3
    assert out["name"] == "renamed"
    assert out["engine"]["extra_args"] == ["--enforce-eager"]
    # the input is left alone
    assert tiny_raw["sweep"]["concurrency"] == [1, 4]
    assert tiny_raw["space"]["enable_prefix_caching"] == {"choices": [True, False]}


def test_apply_overrides_creates_nested_maps() -> None:
    out = apply_overrides({"name": "x"}, ["engine.env.HF_HOME=/cache", "a.b.c=1"])
    assert out == {"name": "x", "engine": {"env": {"HF_HOME": "/cache"}}, "a": {"b": {"c": 1}}}


def test_apply_overrides_replaces_a_mapping_value() -> None:
    out = apply_overrides(
        {"space": {"max_num_seqs": {"low": 1, "high": 8}}}, ["space.max_num_seqs={choices: [4, 8]}"]
    )
    assert out["space"]["max_num_seqs"] == {"choices": [4, 8]}


def test_apply_overrides_later_wins() -> None:
    out = apply_overrides({}, ["budget.n_trials=3", "budget.n_trials=5"])
    assert out == {"budget": {"n_trials": 5}}


def test_apply_overrides_empty_value_is_empty_string() -> None:
    assert apply_overrides({}, ["storage="]) == {"storage": ""}


@pytest.mark.parametrize(
    ("item", "where"),
    [
        ("name.x=1", "name is not a mapping"),
        ("sweep.concurrency.x=1", "sweep.concurrency is not a mapping"),
    ],
)
def test_apply_overrides_non_mapping_intermediate(tiny_raw: dict[str, Any], item: str, where: str) -> None:
    with pytest.raises(SpecError, match=where):
        apply_overrides(tiny_raw, [item])


@pytest.mark.parametrize("item", ["sweep.requests", "=5", "  =5"])
def test_apply_overrides_needs_key_and_equals(item: str) -> None:
    with pytest.raises(SpecError, match=r"dotted\.key=value"):
        apply_overrides({}, [item])


def test_apply_overrides_bad_yaml() -> None:
    with pytest.raises(SpecError, match="--set sweep.concurrency: not valid YAML"):
        apply_overrides({}, ["sweep.concurrency=[1, 8"])


# ---------------------------------------------------------------- load_spec


def write(tmp_path: Path, raw: Any) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def test_load_spec_with_overrides(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    p = write(tmp_path, tiny_raw)
    spec = load_spec(p, ["sweep.concurrency=[1, 4, 8]", "budget.n_trials=2"])
    assert spec.sweep.concurrency == [1, 4, 8]
    assert spec.budget.n_trials == 2


def test_load_spec_override_error_is_validated_with_path(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    p = write(tmp_path, tiny_raw)
    with pytest.raises(SpecError) as ei:
        load_spec(p, ["sweep.concurrency=[1, 8]"])  # the second objective is at 4
    assert "objectives.1.at" in str(ei.value)
    assert str(p) in str(ei.value)


def test_load_spec_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "nope.yaml")


def test_load_spec_invalid_yaml(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(p)


def test_load_spec_top_level_not_mapping(tmp_path: Path) -> None:
    p = tmp_path / "list.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(SpecError, match="top level must be a mapping"):
        load_spec(p)


# ---------------------------------------------------------------- CLI


def test_cli_validate_bad_spec_exits_2_naming_the_field(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    tiny_raw["space"]["foo"] = 1
    p = write(tmp_path, tiny_raw)
    result = CliRunner().invoke(app, ["validate", str(p)])
    assert result.exit_code == 2
    assert "space.foo" in result.output
    assert "unknown field" in result.output
    assert result.stdout == ""  # the error goes to stderr only


def test_cli_validate_bad_override_exits_2(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    p = write(tmp_path, tiny_raw)
    result = CliRunner().invoke(app, ["validate", str(p), "--set", "space.max_num_seqs={low: 9, high: 2}"])
    assert result.exit_code == 2
    assert "space.max_num_seqs" in result.output


def test_cli_validate_good_spec_prints_it(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    p = write(tmp_path, tiny_raw)
    result = CliRunner().invoke(app, ["validate", str(p), "--set", "budget.n_trials=9"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    assert printed["name"] == "tiny-cpu"
    assert printed["budget"]["n_trials"] == 9
    assert printed["constraints"][0] == {
        "metric": "ttft_p99_ms",
        "op": "<=",
        "value": 3000.0,
        "at": 4,
    }


def test_cli_run_bad_spec_writes_nothing(tmp_path: Path, tiny_raw: dict[str, Any]) -> None:
    tiny_raw["sweep"]["duration_s"] = 10.0  # both requests and duration_s
    p = write(tmp_path, tiny_raw)
    db = tmp_path / "x.db"
    result = CliRunner().invoke(app, ["run", str(p), "--storage", f"sqlite:///{db}"])
    assert result.exit_code == 2
    assert "sweep" in result.output and "exactly one of requests or duration_s" in result.output
    assert not db.exists()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["spec.yaml"]


def test_the_method_field_documents_every_drafter_method() -> None:
    """The ``#:`` comment of space.speculative.method (shown in the README's spec reference) is
    written by hand: it must list SPEC_METHODS, in order, so a new method cannot go undocumented."""
    import nova_search.spec.space as space_module
    from nova_search.spec import SPEC_METHODS

    source = Path(space_module.__file__).read_text()
    (line,) = [ln for ln in source.splitlines() if ln.strip().startswith("#: the drafter:")]
    listed = line.split("#: the drafter:", 1)[1].split("(", 1)[0]
    assert [m.strip() for m in listed.split(",")] == list(SPEC_METHODS)


# ---------------------------------------------------------------- the bounded reader (issue 40, finding 6)


def yaml_error(text: str) -> str:
    from nova_search.spec.reader import read_yaml

    with pytest.raises(SpecError) as ei:
        read_yaml(text, "S")
    return str(ei.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "budget: {n_trials: 2}\nname: x\nbudget: {n_trials: 5}\n",
            "S: budget: given twice (line 1 and line 3)",
        ),
        ("sweep:\n  requests: 2\n  requests: 9\n", "S: sweep.requests: given twice (line 2 and line 3)"),
        ("env: {A: 1, 'A': 2}\n", "S: env.A: given twice"),
        ("l:\n  - {a: 1, a: 2}\n", "S: l.0.a: given twice"),
        ("budget:\n  n_trials: 2\n  <<: {n_trials: 5}\n", "S: budget: YAML merge keys (<<:, line 3)"),
        ("<<: {name: x}\n", "S: the top level: YAML merge keys"),
    ],
)
def test_a_key_given_twice_or_merged_is_refused_naming_it_and_its_lines(text: str, said: str) -> None:
    assert yaml_error(text).startswith(said)


def test_a_huge_integer_names_its_field_and_a_long_one_still_reads() -> None:
    from nova_search.spec.reader import read_yaml

    said = yaml_error("budget:\n  n_trials: " + "9" * 5000 + "\n")
    assert said.startswith("S: budget.n_trials: an integer of 5000 characters (line 2)")
    assert read_yaml("n: " + "9" * 40, "S") == {"n": int("9" * 40)}
    assert yaml_error("a: [1, -0x" + "f" * 60 + "]").startswith("S: a.1: an integer of 63 characters")


@pytest.mark.parametrize(
    "text",
    ["x: " + "[" * 20000 + "]" * 20000, "x: " + "{a: " * 20000 + "1" + "}" * 20000, "- " * 20000 + "1"],
)
def test_deep_nesting_is_refused_without_a_recursion_error(text: str) -> None:
    from nova_search.spec.reader import MAX_DEPTH, read_yaml

    assert "nested deeper than 64 levels" in yaml_error(text)
    ok = "x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert read_yaml(ok, "S") is not None


def test_a_date_that_is_not_one_names_its_field() -> None:
    assert yaml_error("when: 2024-13-45\n").startswith("S: when: '2024-13-45' is not a date (line 1)")


def test_set_reads_its_value_with_the_same_bounds() -> None:
    with pytest.raises(SpecError, match=r"^--set budget.n_trials: an integer of 5000 characters"):
        apply_overrides({}, ["budget.n_trials=" + "9" * 5000])
    with pytest.raises(SpecError, match=r"--set 'a..b=1': write it as dotted.key=value"):
        apply_overrides({}, ["a..b=1"])


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_spec_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    import os
    import threading

    path = tmp_path / "spec.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")
    said: list[str] = []

    def read() -> None:
        with pytest.raises(SpecError) as ei:
            load_spec(path)
        said.append(str(ei.value))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "the reader blocked"
    assert said and "not a regular file" in said[0], said


# ---------------------------------------------------------------- launchable at create (issue 40, finding 7)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"model": {"path": "a\x00b"}}, "model.path: the value holds a NUL byte"),
        ({"engine": {"env": {"A": "x\x00"}}}, "engine.env: the value of A holds a NUL byte"),
        ({"engine": {"env": {"A=B": "x"}}}, "engine.env: 'A=B' is not an environment variable name"),
        ({"model": {"path": "m", "served_name": "x" * 257}}, "model.served_name: is 257 characters long"),
        ({"model": {"path": "--trust-remote-code"}}, "model.path: '--trust-remote-code' starts with '-'"),
        ({"engine": {"cpus": [65535]}}, "engine.cpus: core 65535 is above 4095"),
        ({"engine": {"host": ""}}, "engine.host: '' is not an address to bind to"),
        ({"engine": {"command": ["", "serve"]}}, "engine.command.0: an empty element"),
        ({"engine": {"extra_args": ["x" * 40000]}}, "engine.extra_args: item 0 is 40000 characters long"),
    ],
)
def test_a_spec_that_could_never_launch_is_refused_naming_the_field(change: dict, said: str) -> None:
    raw = {**minimal(), **change}
    assert said in spec_error(raw)


def test_a_core_range_is_bounded_before_it_is_built() -> None:
    from nova_search.spec import parse_cores

    with pytest.raises(ValueError, match="core 100000000 is above 4095"):
        parse_cores("0-100000000")
    assert parse_cores("0-4095:4095") == [0, 4095]
