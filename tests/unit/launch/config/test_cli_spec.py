"""A config that tunes a LightningCLI project as it is (lightning_hpo.launch.config.cli_spec): which
configs are in that mode, the ``cli``/``config`` fields and inline sections, the Trainer
arguments the launcher owns, the ``fit`` command line of a trial, and the retrain command the
launcher prints (:func:`fit_command`, which looks for the project's file on temporary folders).
No torch.

Through parse_config: tests/unit/launch/config/test_config.py; the stored config compared:
tests/unit/launch/config/test_changes.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config.cli_spec import (
    DEFAULT_CLI,
    OWNED_TRAINER,
    SECTIONS,
    CliSpec,
    cli_args,
    fit_command,
    format_value,
    is_cli_config,
    parse_cli,
)

LENET = "lightning_hpo.builtin.models.LeNet"
DIGITS = "lightning_hpo.builtin.data.DigitsDataModule"


def _error(raw: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_cli(raw)
    assert "\n" not in str(info.value)
    return info.value


# ------------------------------------------------------------------------------------------
# Which configs build their trials through a LightningCLI.


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"cli": "main:cli_main"}, id="cli"),
        pytest.param({"cli": None}, id="cli-null"),  # `cli:` written, left empty: the default
        pytest.param({"config": "config.yaml"}, id="config-str"),
        pytest.param({"config": ["a.yaml", "b.yaml"]}, id="config-list"),
        pytest.param({"model": {"class_path": LENET}}, id="model-class-path"),
        pytest.param({"data": {"class_path": DIGITS}}, id="data-class-path"),
        pytest.param({"model": {"name": "lenet"}, "data": {"class_path": DIGITS}},
                     id="registry-model-class-path-data"),
        pytest.param({"model": {"class_path": LENET, "init_args": {"lr": 0.1}},
                      "data": {"name": "digits"}}, id="class-path-model-registry-data"),
    ],
)
def test_a_config_with_cli_config_or_a_class_path_is_a_cli_config(raw: dict[str, Any]) -> None:
    assert is_cli_config(raw) is True


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({}, id="empty"),
        pytest.param({"model": {"name": "lenet"}}, id="registry-name"),
        pytest.param({"model": "lenet", "data": "digits"}, id="bare-names"),
        pytest.param({"model": {"name": "lenet", "width": 3}, "data": {"name": "digits"}},
                     id="registry-args"),
        pytest.param({"model": "package.module:Class"}, id="class-by-registry-path"),
        pytest.param({"model": {"name": "lenet"}, "optimizer": "torch.optim.SGD"},
                     id="optimizer-alone"),  # refused by parse_config, with the CLI form
        pytest.param({"model": {"name": "lenet"}, "trainer": {"callbacks": []}},
                     id="callbacks-alone"),
        pytest.param({"model": ["class_path"]}, id="class-path-in-a-list"),
        pytest.param({"space": {"class_path": {"choice": [1, 2]}}}, id="class-path-elsewhere"),
    ],
)
def test_a_registry_config_is_not_a_cli_config(raw: dict[str, Any]) -> None:
    assert is_cli_config(raw) is False


# ------------------------------------------------------------------------------------------
# cli: the entry point.


def test_the_entry_defaults_to_lightnings_own_cli() -> None:
    assert DEFAULT_CLI == "lightning.pytorch.cli:LightningCLI"
    assert parse_cli({}) == CliSpec(DEFAULT_CLI, (), {})
    assert parse_cli({"cli": None, "config": "c.yaml"}).entry == DEFAULT_CLI
    assert CliSpec() == CliSpec(DEFAULT_CLI, (), {})


@pytest.mark.parametrize(
    "entry", ["main:cli_main", "my_project.train:cli_main", "pkg.sub.mod:MyCLI",
              "main:Holder.build", "_private:_cli"],
)
def test_a_module_colon_name_entry_is_kept(entry: str) -> None:
    assert parse_cli({"cli": entry}).entry == entry


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("main", id="no-colon"),
        pytest.param(":x", id="no-module"),
        pytest.param("main:", id="no-name"),
        pytest.param("a b:c", id="space-in-module"),
        pytest.param("main:cli main", id="space-in-name"),
        pytest.param("my-project:cli", id="dash-in-module"),
        pytest.param("1main:cli", id="module-starts-with-digit"),
        pytest.param("pkg..mod:cli", id="empty-module-part"),
        pytest.param("main:cli:x", id="two-colons"),
        pytest.param("", id="empty"),
        pytest.param(3, id="int"),
        pytest.param(["main:cli"], id="list"),
        pytest.param({"main": "cli"}, id="mapping"),
    ],
)
def test_a_bad_entry_is_a_cli_error(entry: Any) -> None:
    error = _error({"cli": entry})
    assert error.field == "cli"
    assert error.message.startswith(f"is {entry!r}, but must be 'module:name'")
    assert "main:cli_main" in error.message  # an example of what works


@pytest.mark.parametrize(("entry", "hint"), [
    ("main.py:cli_main", "(main:cli_main)"),
    ("src/shop/cli.py:main", "(src.shop.cli:main)"),
    ("main.py", "(main:cli_main)"),
])
def test_a_file_named_as_the_entry_points_to_the_module(entry: str, hint: str) -> None:
    error = _error({"cli": entry})
    assert error.field == "cli"
    assert error.message == f"is {entry!r}: name the module, not the file {hint}"


# ------------------------------------------------------------------------------------------
# config: the `fit --config` files.


@pytest.mark.parametrize(
    ("value", "files"),
    [
        pytest.param("config.yaml", ("config.yaml",), id="str"),
        pytest.param(["config.yaml"], ("config.yaml",), id="list-of-one"),
        pytest.param(["base.yaml", "sub/over.yaml", "base.yaml"],
                     ("base.yaml", "sub/over.yaml", "base.yaml"), id="list-in-order"),
        pytest.param(None, (), id="null"),
        pytest.param([], (), id="empty-list"),
    ],
)
def test_the_config_files_are_kept_in_order(value: Any, files: tuple[str, ...]) -> None:
    assert parse_cli({"config": value}).files == files


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty-str"),
        pytest.param(["a.yaml", ""], id="empty-item"),
        pytest.param(3, id="int"),
        pytest.param([1], id="list-of-int"),
        pytest.param(["a.yaml", None], id="null-item"),
        pytest.param({"path": "a.yaml"}, id="mapping"),
        pytest.param([["a.yaml"]], id="nested-list"),
        pytest.param(True, id="bool"),
    ],
)
def test_a_bad_config_value_is_a_config_error(value: Any) -> None:
    error = _error({"config": value})
    assert error.field == "config"
    assert error.message.startswith(f"is {value!r}, but must be a file path or a list of them")


# ------------------------------------------------------------------------------------------
# The inline sections: passed through to the CLI as they are, but what the launcher owns.


def test_the_sections_are_passed_through_as_given() -> None:
    raw = {
        "study": "s", "metric": "val_loss", "space": {"model.init_args.lr": 0.1},
        "model": {"class_path": LENET, "init_args": {"lr": 0.1, "momentum": 0.9}},
        "data": {"class_path": DIGITS, "init_args": {"batch_size": 64}},
        "trainer": {"gradient_clip_val": 1.0, "callbacks": [
            {"class_path": "lightning.pytorch.callbacks.LearningRateMonitor"}]},
        "optimizer": {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.1}},
        "lr_scheduler": {"class_path": "torch.optim.lr_scheduler.StepLR",
                         "init_args": {"step_size": 3}},
    }
    spec = parse_cli(raw)
    assert spec.sections == {key: raw[key] for key in SECTIONS}
    assert list(spec.sections) == list(SECTIONS)  # the CLI's order
    assert SECTIONS == ("model", "data", "trainer", "optimizer", "lr_scheduler")
    # What is not a CLI section stays out (study, metric, space: the launcher's).
    assert set(spec.sections) <= set(SECTIONS)


def test_the_sections_are_copies() -> None:
    model = {"class_path": LENET}
    spec = parse_cli({"model": model})
    spec.sections["model"]["init_args"] = {"lr": 1.0}
    assert model == {"class_path": LENET}


def test_sections_left_out_or_null_are_not_passed() -> None:
    assert parse_cli({"cli": "main:cli_main", "model": None, "trainer": None}).sections == {}


@pytest.mark.parametrize("key", ["optimizer", "lr_scheduler"])
def test_an_optimizer_or_scheduler_may_be_a_class_path_alone(key: str) -> None:
    spec = parse_cli({key: "torch.optim.Adam"})
    assert spec.sections == {key: "torch.optim.Adam"}


@pytest.mark.parametrize(
    ("key", "value"),
    [("model", LENET), ("data", "digits"), ("trainer", ["csv"]), ("optimizer", 3),
     ("lr_scheduler", ["torch.optim.lr_scheduler.StepLR"]), ("model", True)],
    ids=["model-str", "data-str", "trainer-list", "optimizer-int", "scheduler-list",
         "model-bool"],
)
def test_a_section_that_is_not_a_mapping_is_named(key: str, value: Any) -> None:
    error = _error({"config": "c.yaml", key: value})
    assert error.field == key
    assert error.message == f"must be a mapping (the CLI's {key} section), got {value!r}"


@pytest.mark.parametrize("key", ["model", "data"])
def test_a_registry_name_is_refused_in_cli_mode(key: str) -> None:
    error = _error({"cli": "main:cli_main", key: {"name": "lenet"}})
    assert error.field == f"{key}.name"
    assert error.message.startswith("is a registry name, but this config builds trials "
                                    "through a LightningCLI")
    assert "class_path" in error.message  # what to give instead


@pytest.mark.parametrize("key", sorted(OWNED_TRAINER))
def test_every_trainer_argument_the_launcher_owns_is_refused_with_the_reason(key: str) -> None:
    error = _error({"cli": "main:cli_main", "trainer": {"gradient_clip_val": 1.0, key: 1}})
    assert error.field == f"trainer.{key}"
    assert error.message == f"is set by the launcher: {OWNED_TRAINER[key]}"


def test_the_owned_trainer_arguments_are_real_trainer_arguments() -> None:
    """Every owned key is an argument of Lightning's Trainer (a typo would own nothing)."""
    import inspect

    from lightning.pytorch import Trainer

    params = set(inspect.signature(Trainer.__init__).parameters)
    assert set(OWNED_TRAINER) <= params
    assert all(reason and "\n" not in reason for reason in OWNED_TRAINER.values())
    # What the launcher decides but a tune config may set: not owned.
    assert not {"max_epochs", "logger", "callbacks", "precision"} & set(OWNED_TRAINER)


@pytest.mark.parametrize("logger", ["csv", "tensorboard"])
def test_the_launchers_logger_and_max_epochs_are_not_passed_to_the_cli(logger: str) -> None:
    spec = parse_cli({"trainer": {"logger": logger, "max_epochs": 9,
                                  "gradient_clip_val": 0.5}})
    assert spec.sections == {"trainer": {"gradient_clip_val": 0.5}}
    # A trainer section with nothing else left is not passed at all.
    assert parse_cli({"trainer": {"logger": logger, "max_epochs": 9}}).sections == {}


@pytest.mark.parametrize(
    "logger",
    [
        pytest.param({"class_path": "lightning.pytorch.loggers.WandbLogger",
                      "init_args": {"project": "shop"}}, id="mapping"),
        pytest.param([{"class_path": "lightning.pytorch.loggers.CSVLogger"}], id="list"),
        pytest.param(False, id="false"),
    ],
)
def test_a_cli_logger_of_the_project_is_kept(logger: Any) -> None:
    spec = parse_cli({"trainer": {"logger": logger, "max_epochs": 9}})
    assert spec.sections == {"trainer": {"logger": logger}}


def test_the_trainer_given_is_not_changed() -> None:
    trainer = {"logger": "csv", "max_epochs": 9, "benchmark": True}
    raw = {"trainer": trainer}
    assert parse_cli(raw).sections == {"trainer": {"benchmark": True}}
    assert trainer == {"logger": "csv", "max_epochs": 9, "benchmark": True}


def test_the_module_example() -> None:
    spec = parse_cli({"cli": "main:cli_main", "config": "config.yaml",
                      "trainer": {"gradient_clip_val": 1.0}})
    assert (spec.entry, spec.files, spec.sections) == (
        "main:cli_main", ("config.yaml",), {"trainer": {"gradient_clip_val": 1.0}})


# ------------------------------------------------------------------------------------------
# The fit command line of a trial.


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param("relu", "relu", id="str"),
        pytest.param("torch.optim.Adam", "torch.optim.Adam", id="class-path"),
        pytest.param("a b", "a b", id="str-with-space"),
        pytest.param("", "", id="empty-str"),
        pytest.param(0.001, "0.001", id="float"),
        pytest.param(1e-4, "0.0001", id="small-float"),
        pytest.param(1e-7, "1e-07", id="tiny-float"),
        pytest.param(2.0, "2.0", id="whole-float"),
        pytest.param(64, "64", id="int"),
        pytest.param(-3, "-3", id="negative-int"),
        pytest.param(True, "true", id="true"),
        pytest.param(False, "false", id="false"),
        pytest.param(None, "null", id="none"),
        pytest.param([32, 16], "[32, 16]", id="list"),
    ],
)
def test_format_value(value: Any, text: str) -> None:
    assert format_value(value) == text


@pytest.mark.parametrize("value", [0.1, 1e-4, 3.0, 7, True, False, None, [1, 2.5]])
def test_a_formatted_value_reads_back_as_json(value: Any) -> None:
    assert json.loads(format_value(value)) == value
    assert type(json.loads(format_value(value))) is type(value)


def test_a_trial_with_nothing_inline_is_fit_and_its_values() -> None:
    assert cli_args(CliSpec(), {}) == ["fit"]
    assert cli_args(CliSpec(), {"model.init_args.lr": 0.1}) == [
        "fit", "--model.init_args.lr=0.1"]


def test_the_files_come_first_in_order_then_the_inline_sections_then_the_values() -> None:
    spec = CliSpec("main:cli_main", ("base.yaml", "over.yaml"),
                   {"trainer": {"gradient_clip_val": 1.0}, "optimizer": "torch.optim.SGD"})
    args = cli_args(spec, {"model.hidden_dim": 64})
    assert args == [
        "fit", "--config", "base.yaml", "--config", "over.yaml",
        '--config={"trainer": {"gradient_clip_val": 1.0}, "optimizer": "torch.optim.SGD"}',
        "--model.hidden_dim=64",
    ]
    # The inline layer is JSON (also YAML) holding the sections as they are.
    inline = args[5].partition("=")[2]
    assert json.loads(inline) == spec.sections


def test_the_values_are_sorted_so_that_a_prefix_comes_first() -> None:
    """A class chosen by the search comes before the arguments given to it (the CLI resets a
    class's arguments when the class is given after them)."""
    values = {
        "optimizer.init_args.lr": 0.01,
        "model.init_args.encoder.init_args.width": 32,
        "optimizer": "torch.optim.Adam",
        "model.init_args.encoder": "pkg.Encoder",
        "data.batch_size": 64,
    }
    args = cli_args(CliSpec(), values)[1:]
    keys = [arg[2:].partition("=")[0] for arg in args]
    assert sorted(keys) == sorted(values)  # each once
    for first in keys:
        for second in keys:
            if second.startswith(first + "."):
                assert keys.index(first) < keys.index(second), (first, second)
    # By depth, keys of one depth in the order given (the space's): the same line each time.
    assert keys == ["optimizer", "data.batch_size", "optimizer.init_args.lr",
                    "model.init_args.encoder", "model.init_args.encoder.init_args.width"]


def test_the_values_are_formatted_strings_raw_others_as_json() -> None:
    values = {"model.activation": "relu", "optimizer.init_args.lr": 0.001,
              "model.hidden_dim": 64, "model.init_args.bias": False, "model.init_args.extra": None,
              "optimizer": "torch.optim.Adam"}
    args = cli_args(CliSpec(files=("c.yaml",)), values)
    assert args == [
        "fit", "--config", "c.yaml",
        "--optimizer=torch.optim.Adam",
        "--model.activation=relu", "--model.hidden_dim=64",
        "--optimizer.init_args.lr=0.001",
        "--model.init_args.bias=false", "--model.init_args.extra=null",
    ]


def test_the_module_example_command_line() -> None:
    spec = parse_cli({"cli": "main:cli_main", "config": "config.yaml",
                      "trainer": {"gradient_clip_val": 1.0}})
    assert cli_args(spec, {"optimizer.init_args.lr": 0.01, "optimizer": "torch.optim.Adam"}) == [
        "fit", "--config", "config.yaml", '--config={"trainer": {"gradient_clip_val": 1.0}}',
        "--optimizer=torch.optim.Adam", "--optimizer.init_args.lr=0.01",
    ]


def test_cli_args_does_not_change_its_inputs() -> None:
    spec = parse_cli({"config": ["a.yaml"], "model": {"class_path": LENET}})
    values = {"model.init_args.lr": 0.1, "model": LENET}
    before = (json.dumps(spec.sections), dict(values))
    assert cli_args(spec, values) == cli_args(spec, values)
    assert (json.dumps(spec.sections), values) == before
    assert list(values) == ["model.init_args.lr", "model"]


# ------------------------------------------------------------------------------------------
# The retrain command the launcher prints: the project's script, wherever the launcher runs.


def test_a_script_in_the_folder_the_launcher_runs_in_is_named_as_it_is(tmp_path) -> None:
    (tmp_path / "main.py").write_text("")
    assert fit_command("main:cli_main", [str(tmp_path)], cwd=tmp_path) == "python main.py fit"
    assert fit_command("main:cli_main", ["", "/nowhere"], cwd=tmp_path) == "python main.py fit"


def test_a_script_found_elsewhere_is_named_by_its_path(tmp_path) -> None:
    """The launcher run from another folder, the project on PYTHONPATH: ``python main.py`` there
    names a file that is not in that folder (it used to say so)."""
    project, elsewhere = tmp_path / "my project", tmp_path / "runs"
    project.mkdir()
    elsewhere.mkdir()
    (project / "train.py").write_text("")
    below = fit_command("train:cli_main", [str(project)], cwd=tmp_path)
    assert below == "python 'my project/train.py' fit"
    beside = fit_command("train:cli_main", [str(project)], cwd=elsewhere)
    assert beside == f"python '{project / 'train.py'}' fit"


def test_a_module_in_a_package_runs_with_dash_m(tmp_path) -> None:
    package = tmp_path / "proj"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')")
    (package / "cli.py").write_text("")
    assert fit_command("proj.cli:main", [str(tmp_path)], cwd=tmp_path) == "python -m proj.cli fit"


def test_lightning_s_own_cli_or_a_module_not_found_is_said_in_words(tmp_path) -> None:
    assert fit_command(DEFAULT_CLI) == "your CLI's fit"
    assert fit_command("absent_module_xyz:cli", [str(tmp_path)], cwd=tmp_path) == "your CLI's fit"
    (tmp_path / "pkgdir").mkdir()  # a folder of that name, no module: not a script either
    assert fit_command("pkgdir:cli", [str(tmp_path)], cwd=tmp_path) == "your CLI's fit"
