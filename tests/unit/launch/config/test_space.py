"""The search-space grammar: every kind, every error, and the round trip through Optuna."""

from __future__ import annotations

import math

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config.space import check_in_space, parse_space, suggest, to_yaml


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"loguniform": [0.01, 1.0]}, FloatDistribution(0.01, 1.0, log=True), id="log"),
        pytest.param({"uniform": [0, 1]}, FloatDistribution(0.0, 1.0), id="uniform-ints"),
        pytest.param({"randint": [32, 256]}, IntDistribution(32, 256), id="randint"),
        pytest.param({"choice": ["relu", "sigmoid"]}, CategoricalDistribution(["relu", "sigmoid"]),
                     id="choice"),
        pytest.param(10, 10, id="constant-int"),
        pytest.param("relu", "relu", id="constant-str"),
        pytest.param(None, None, id="constant-null"),
    ],
)
def test_parse_each_kind(spec: object, expected: object) -> None:
    assert parse_space({"x": spec})["x"] == expected


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        pytest.param({"gauss": [0, 1]}, "space.x", "unknown distribution 'gauss'", id="unknown"),
        pytest.param({"uniform": [1, 0]}, "space.x.uniform", "low < high", id="low>high"),
        pytest.param({"uniform": [1, 1]}, "space.x.uniform", "low < high", id="empty"),
        pytest.param({"randint": [5, 5]}, "space.x.randint", "low < high", id="empty-int"),
        pytest.param({"loguniform": [0, 1]}, "space.x.loguniform", "low > 0", id="log-zero"),
        pytest.param({"loguniform": [-1, 1]}, "space.x.loguniform", "low > 0", id="log-neg"),
        pytest.param({"uniform": [0, "a"]}, "space.x.uniform", "finite numbers", id="not-number"),
        pytest.param({"uniform": [0, math.inf]}, "space.x.uniform", "finite", id="inf"),
        pytest.param({"uniform": [0]}, "space.x.uniform", "[low, high]", id="one-bound"),
        pytest.param({"uniform": 3}, "space.x.uniform", "[low, high]", id="scalar"),
        pytest.param({"randint": [1.5, 3]}, "space.x.randint", "integers", id="float-int"),
        pytest.param({"randint": [True, 3]}, "space.x.randint", "integers", id="bool-int"),
        pytest.param({"choice": []}, "space.x.choice", "non-empty", id="empty-choice"),
        pytest.param({"choice": [[1]]}, "space.x.choice", "numbers, strings", id="nested"),
        pytest.param({"choice": [1, 1]}, "space.x.choice", "distinct", id="dup-choice"),
        pytest.param({"uniform": [0, 1], "log": True}, "space.x", "exactly one key", id="two"),
        pytest.param([1, 2], "space.x", "constant or one of", id="list"),
    ],
)
def test_parse_errors_name_the_field(spec: object, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_space({"x": spec})
    assert info.value.field == field
    assert words in info.value.message


def test_space_must_be_a_mapping_with_identifier_names() -> None:
    with pytest.raises(ConfigError, match="^space: must be a mapping"):
        parse_space([1, 2])
    with pytest.raises(ConfigError, match="identifiers"):
        parse_space({"not valid": 1})


def test_suggest_samples_inside_the_space_and_passes_constants() -> None:
    space = parse_space({
        "lr": {"loguniform": [0.01, 1.0]}, "batch_size": {"randint": [32, 256]},
        "act": {"choice": ["relu", "sigmoid"]}, "m": {"uniform": [0.0, 0.9]}, "classes": 10,
    })
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        trial = study.ask()
        params = suggest(trial, space)
        assert 0.01 <= params["lr"] <= 1.0
        assert isinstance(params["batch_size"], int) and 32 <= params["batch_size"] <= 256
        assert params["act"] in ("relu", "sigmoid") and 0 <= params["m"] <= 0.9
        assert params["classes"] == 10 and "classes" not in trial.params
        study.tell(trial, 0.0)


def test_enqueued_values_come_back_as_given() -> None:
    space = parse_space({"lr": {"loguniform": [0.01, 1.0]}, "batch_size": {"randint": [32, 256]}})
    study = optuna.create_study()
    study.enqueue_trial({"lr": 0.1, "batch_size": 128})
    assert suggest(study.ask(), space) == {"lr": 0.1, "batch_size": 128}


def test_to_yaml_round_trips() -> None:
    raw = {"lr": {"loguniform": [0.01, 1.0]}, "m": {"uniform": [0.0, 0.9]},
           "b": {"randint": [1, 4]}, "a": {"choice": ["x", "y"]}, "c": 3}
    assert to_yaml(parse_space(raw)) == raw


@pytest.mark.parametrize(
    ("params", "field"),
    [
        pytest.param({"nope": 1}, "initial[0].nope", id="unknown-name"),
        pytest.param({"lr": 2.0}, "initial[0].lr", id="out-of-range"),
        pytest.param({"lr": "fast"}, "initial[0].lr", id="not-a-number"),
        pytest.param({"b": 2.5}, "initial[0].b", id="not-an-int"),
        pytest.param({"a": "z"}, "initial[0].a", id="not-a-choice"),
    ],
)
def test_check_in_space(params: dict, field: str) -> None:
    space = parse_space({"lr": {"loguniform": [0.01, 1.0]}, "b": {"randint": [1, 4]},
                         "a": {"choice": ["x", "y"]}})
    check_in_space({"lr": 0.1, "b": 2, "a": "x"}, space, "initial[0]")
    with pytest.raises(ConfigError) as info:
        check_in_space(params, space, "initial[0]")
    assert info.value.field == field



def test_a_quoted_number_in_a_fixed_configuration_is_named_as_a_string() -> None:
    """It said "'64' is outside the range [32, 256]"."""
    space = parse_space({"batch_size": {"randint": [32, 256]}})
    with pytest.raises(ConfigError) as info:
        check_in_space({"batch_size": "64"}, space, "initial[0]")
    assert str(info.value) == ("initial[0].batch_size: '64' is not a number (a string: write the "
                               "number without quotes); the range is [32, 256]")


def test_a_section_in_the_space_says_what_space_keys_are() -> None:
    """``--set space.trainer.gradient_clip_val=...`` said only "unknown distribution
    'gradient_clip_val'"."""
    with pytest.raises(ConfigError) as info:
        parse_space({"trainer": {"gradient_clip_val": {"uniform": [0, 1]}}})
    assert str(info.value).endswith("trainer is a section, not a hyperparameter: a space key "
                                    "names a model or data argument (space.lr), and trainer.* "
                                    "keys need a LightningCLI config")
