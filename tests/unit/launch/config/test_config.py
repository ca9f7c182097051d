"""Config loading: defaults, overrides, and one clear error per broken field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.checks import check_against_registry
from lightning_hpo.launch.config import (
    CONFIG_DIR,
    DEFAULT_CONFIG,
    Config,
    apply_overrides,
    load_config,
    parse_config,
    pause_levels,
    read_yaml,
    resolve_config,
    shipped_configs,
)
from lightning_hpo.launch.study.creation import stored_config
from lightning_hpo.launch.study.search import build_sampler, build_schedule

#: The checkout's top-level configs/ folder: what pyproject.toml ships as lightning_hpo/configs/.
CHECKOUT_CONFIGS = Path(__file__).resolve().parents[4] / "configs"

BASE = {
    "study": "t",
    "model": {"name": "lenet"},
    "space": {"lr": {"loguniform": [0.01, 1.0]}},
    "pruner": {"name": "asha", "max_resource": 9},
    "stop": {"n_trials": 4},
}


def _with(path: str, value: object) -> dict:
    return apply_overrides(BASE, [f"{path}={value}"])


def test_defaults() -> None:
    cfg = parse_config(BASE)
    assert cfg.storage == "runs/t.journal" and cfg.run_dir == "runs"
    assert cfg.data == "digits" and cfg.metric == "validation_error"
    assert cfg.direction == "minimize" and cfg.sampler == "random"
    assert cfg.max_epochs == 9 and cfg.pruner.reduction_factor == 3
    assert cfg.devices.per_trial == 1 and cfg.stop.n_trials == 4
    assert cfg.study_dir == Path("runs/t")


def test_the_shipped_configs_are_the_checkouts_configs_folder() -> None:
    """From a checkout (PYTHONPATH or editable install) the package reads the top-level folder
    itself, not a copy; every YAML file in it is shipped (tests/integration/test_install.py: in
    the wheel)."""
    assert CONFIG_DIR == CHECKOUT_CONFIGS
    on_disk = sorted(CHECKOUT_CONFIGS.glob("*.yaml"))
    assert list(shipped_configs().values()) == on_disk
    # pyproject.toml ships `*.yaml` from it: a config saved as .yml would be left out.
    assert {p.suffix for p in CHECKOUT_CONFIGS.iterdir()} == {".yaml"}


def test_the_quickstart_is_the_default_and_runs_offline_on_cpu() -> None:
    assert resolve_config(None) == DEFAULT_CONFIG == CONFIG_DIR / "quickstart.yaml"
    cfg = load_config(None)
    assert cfg.study == "quickstart" and cfg.data == "digits"  # bundled with scikit-learn
    assert cfg.devices.accelerator == "cpu" and cfg.pruner.name == "asha"
    assert cfg.stop.max_wallclock_time is not None and cfg.stop.max_wallclock_time <= 600


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_every_shipped_config_is_valid(name: str, fashion_root: tuple[Path, object]) -> None:
    path = shipped_configs()[name]
    cfg = load_config(name)  # by its name, as `python -m lightning_hpo.launch NAME` reads it
    assert cfg == load_config(path)
    # The study is named after its file, with its own storage and run folder relative to the
    # folder the launcher is run from (so two shipped studies never share a file).
    assert cfg.study == name.replace("_", "-")
    assert cfg.storage == f"runs/{cfg.study}.journal" and cfg.run_dir == "runs"
    assert cfg.study_dir == Path("runs") / cfg.study
    if cfg.data == "fashion_mnist":  # the files are not here: point at tiny real ones
        assert not cfg.data_args.get("download")  # never reaches the network unasked
        cfg = load_config(path, [f"data.root={fashion_root[0]}"])
    check_against_registry(cfg)


def test_a_shipped_config_is_found_by_name_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ddp = CONFIG_DIR / "lenet_ddp.yaml"
    assert resolve_config("lenet_ddp") == resolve_config("lenet_ddp.yaml") == ddp
    assert load_config("lenet_ddp").devices.per_trial == 2
    # A file of that name in the current folder wins; a path with a folder is never replaced.
    (tmp_path / "lenet_ddp.yaml").write_text(
        "study: mine\nmodel: {name: lenet}\nspace: {lr: {loguniform: [0.01, 1.0]}}\n"
        "pruner: {name: asha, max_resource: 3}\nstop: {n_trials: 2}\n"
    )
    assert resolve_config("lenet_ddp.yaml") == Path("lenet_ddp.yaml")
    assert load_config("lenet_ddp.yaml").study == "mine"
    assert resolve_config("configs/lenet_ddp.yaml") == Path("configs/lenet_ddp.yaml")
    with pytest.raises(ConfigError) as info:
        load_config("configs/lenet_ddp.yaml")
    assert info.value.message == (
        "cannot read configs/lenet_ddp.yaml: No such file or directory; or name a shipped "
        f"config: {', '.join(sorted(p.stem for p in CHECKOUT_CONFIGS.glob('*.yaml')))}"
    )
    with pytest.raises(ConfigError, match="^config: cannot read nope: No such file"):
        load_config("nope")


def test_registry_check_builds_both_ends_of_every_range() -> None:
    cfg = parse_config(_with("model", "{name: dropout_mlp}") | {
        "space": {"dropout_1": {"uniform": [0.0, 1.5]}}})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == "space.dropout_1"
    assert info.value.message.startswith("the high end 1.5 is refused")
    cfg = parse_config(_with("model", "{name: lenet, momentum: -1}"))
    with pytest.raises(ConfigError, match="^model.momentum: is -1"):
        check_against_registry(cfg)


def test_overrides_parse_yaml_values_and_create_sections() -> None:
    raw = apply_overrides(BASE, ["stop.n_trials=20", "devices.per_trial=2", "sampler=tpe",
                                 "space.m={uniform: [0, 1]}"])
    cfg = parse_config(raw)
    assert cfg.stop.n_trials == 20 and cfg.devices.per_trial == 2 and cfg.sampler == "tpe"
    assert "m" in cfg.space
    assert BASE["stop"] == {"n_trials": 4}  # the input is not mutated


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        pytest.param("nokey", "--set", "must look like key.sub=value, or ~key.sub to remove",
                     id="no-equals"),
        pytest.param("a..b=1", "--set", "must look like", id="empty-part"),
        pytest.param("study.x=1", "--set study.x", "'study' is not a mapping", id="into-scalar"),
        pytest.param("stop.n_trials=[1", "--set stop.n_trials", "cannot parse", id="bad-yaml"),
        pytest.param("~stop.n_trials=3", "--set", "to remove a field give its key alone, "
                     "--set '~stop.n_trials'; to set it, stop.n_trials=3", id="remove-with-value"),
        pytest.param("~", "--set", "must look like", id="remove-nothing"),
        pytest.param("~stop.grace", "--set ~stop.grace",
                     "is not in the config: there is nothing to remove", id="remove-absent"),
        pytest.param("~nope.grace", "--set ~nope.grace", "'nope' is not in the config",
                     id="remove-under-absent"),
        pytest.param("~study.x", "--set ~study.x", "'study' is not a mapping",
                     id="remove-under-scalar"),
    ],
)
def test_bad_overrides(override: str, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(BASE, [override])
    assert info.value.field == field
    assert words in info.value.message


def test_a_tilde_removes_a_field_another_pruner_does_not_take() -> None:
    """``--set pruner.name=sync_sh`` over ``mode: promotion`` was refused as ``pruner.mode:
    unknown field``, and no ``--set`` could take ``mode`` out (``mode=`` and ``mode=null``
    left it in, empty)."""
    raw = {**BASE, "pruner": {"name": "asha", "mode": "promotion", "max_resource": 9}}
    with pytest.raises(ConfigError) as info:
        parse_config(apply_overrides(raw, ["pruner.name=sync_sh"]))
    assert str(info.value) == ("pruner.mode: is for pruner asha or hyperband, and the pruner is "
                               "sync_sh: remove it (on the command line, --set '~pruner.mode'); "
                               "allowed: finish_best, max_resource, min_resource, prefact, "
                               "reduction_factor, resume")
    cfg = parse_config(apply_overrides(raw, ["pruner.name=sync_sh", "~pruner.mode"]))
    assert (cfg.pruner.name, cfg.pruner.mode, cfg.pruner.max_resource) == ("sync_sh", "stop", 9)
    assert raw["pruner"]["mode"] == "promotion"  # the input is not mutated
    with pytest.raises(ConfigError, match="^pruner.prefact: is for pruner sync_sh or "
                       "sync_hyperband, and the pruner is none: remove it"):
        parse_config(apply_overrides({**BASE, "pruner": {"name": "sync_sh", "prefact": 2}},
                                     ["pruner.name=none", "trainer.max_epochs=3"]))
    # A bare section name is its name: ~pruner.name leaves the default pruner.
    assert apply_overrides({**BASE, "pruner": "none"}, ["~pruner.name"])["pruner"] == {}
    # A dotted space key of a LightningCLI config is one key.
    cli = {"cli": "main:cli_main", "space": {"model.a": 1, "model.b": 2}}
    assert apply_overrides(cli, ["~space.model.a"])["space"] == {"model.b": 2}


@pytest.mark.parametrize(("text", "value"), [("", ""), ("null", None), ("~", None),
                                             ("''", ""), ("' '", " ")])
def test_an_empty_override_is_the_empty_string_and_null_is_null(text: str, value: Any) -> None:
    assert apply_overrides(BASE, [f"metric={text}"])["metric"] == value


BAD = [
    ("colour", "blue", "colour", "unknown field"),
    ("study", "../escape", "study", "letters, digits"),
    ("study", "ünïcødé", "study", "is 'ünïcødé', but must be 1-128 ASCII letters, digits"),
    ("study", "", "study", "is empty: name the study"),  # --set study=
    ("study", "null", "study", "is missing: name the study"),
    ("storage", "3", "storage", "storage URL"),
    ("model", "[1, 2]", "model", "name"),
    ("model.name", "", "model.name", "non-empty"),
    ("metric", "3", "metric", "logged metric"),
    # --set metric= is the empty string (as in Hydra), not the default metric
    ("metric", "", "metric", "is empty, but must be the name of a logged metric"),
    ("metric", "[loss, '']", "metric[1]", "is empty, but must be the name of a logged metric"),
    ("direction", "", "direction", "is ''; allowed: minimize, maximize"),
    ("sampler", "", "sampler.name", "is '', but must be a non-empty string"),
    ("stop.n_trials", "", "stop.n_trials", "is '', but must be an integer from 1 to 10000"),
    ("direction", "up", "direction", "minimize, maximize"),
    ("space", "{}", "space", "at least one"),
    ("space.lr", "{loguniform: [0, 1]}", "space.lr.loguniform", "low > 0"),
    ("space.batch_size", "{randint: [256, 32]}", "space.batch_size.randint", "low < high"),
    ("initial", "[{lr: 5.0}]", "initial[0].lr", "outside"),
    ("initial", "{lr: 0.1}", "initial", "list"),
    ("sampler", "cmaes", "sampler.name", "random, tpe, gp"),
    ("sampler.seed", "-1", "sampler.seed", ">= 0"),
    ("seed", "abc", "seed", "is 'abc', but must be an integer >= 0"),
    ("seed", "-1", "seed", ">= 0"),
    ("pruner.name", "median", "pruner.name", "asha, hyperband, sync_sh, sync_hyperband, none"),
    ("pruner.reduction_factor", "1", "pruner.reduction_factor", ">= 2"),
    ("pruner.min_resource", "0", "pruner.min_resource", ">= 1"),
    ("pruner.max_resource", "two", "pruner.max_resource", "integer"),
    ("pruner.min_resource", "20", "pruner.max_resource", ">= pruner.min_resource"),
    ("pruner.eta", "3", "pruner.eta", "unknown field"),
    ("pruner.finish_best", "maybe", "pruner.finish_best", "must be true or false"),
    ("pruner.finish_best", "1", "pruner.finish_best", "must be true or false"),
    # asha with mode stop (the default) stops trials: there is no paused best to finish
    ("pruner.finish_best", "false", "pruner.finish_best",
     "applies to pruner mode: promotion (asha or hyperband), sync_sh and sync_hyperband only; "
     "the pruner is asha with mode stop"),
    ("devices.per_trial", "0", "devices.per_trial", ">= 1"),
    ("devices.per_trial", "1.5", "devices.per_trial", "integer"),
    ("devices.accelerator", "tpu", "devices.accelerator", "auto, cpu, gpu"),
    ("devices.gpus", "1", "devices.gpus", "unknown field"),
    # the same allowed range whichever end is crossed
    ("stop.n_trials", "0", "stop.n_trials", "is 0, but must be an integer from 1 to 10000"),
    ("stop.n_trials", "-3", "stop.n_trials", "is -3, but must be an integer from 1 to 10000"),
    ("stop.n_trials", "ten", "stop.n_trials", "is 'ten', but must be an integer from 1 to 10000"),
    ("stop.n_trials", "2.5", "stop.n_trials", "is 2.5, but must be an integer from 1 to 10000"),
    ("stop.n_trials", "true", "stop.n_trials", "is True, but must be an integer from 1 to 10000"),
    ("stop.n_trials", "10001", "stop.n_trials", "must be an integer from 1 to 10000"),
    ("stop.max_wallclock_time", "-5", "stop.max_wallclock_time", "seconds > 0"),
    ("stop.max_wallclock_time", ".inf", "stop.max_wallclock_time", "seconds > 0"),
    # an integer beyond any float: OverflowError tracebacks
    ("stop.max_wallclock_time", "9" * 400, "stop.max_wallclock_time", "seconds > 0"),
    ("stop.grace", "9" * 400, "stop.grace", "seconds >= 0"),
    ("space.lr", "{uniform: [0, " + "9" * 400 + "]}", "space.lr.uniform",
     "bounds must be finite numbers"),
    # beyond numpy's and Lightning's seeds: it was blamed on `sampler` ("Seed must be between")
    ("seed", "4294967296", "seed", "is 4294967296, but must be an integer from 0 to 4294967295"),
    ("sampler.seed", "4294967296", "sampler.seed", "must be an integer from 0 to 4294967295"),
    # Optuna finds a choice by ==: a trial drawing true got 1
    ("space.x", "{choice: [1, true]}", "space.x.choice", "1 and True are equal"),
    ("space.x", "{choice: [0, 0.0]}", "space.x.choice", "0 and 0.0 are equal"),
    # YAML 1.1 reads `yes` as true: the key was shown as True; now named as written
    ("space", "{yes: {uniform: [0, 1]}}", "--set space.yes",
     'yes is read by YAML 1.1 as the boolean true; write "yes" in quotes for text'),
    ("stop.forever", "true", "stop.forever", "unknown field"),
    ("trainer.max_epochs", "5", "trainer.max_epochs", "must equal pruner.max_resource"),
    ("trainer.precision", "[16]", "trainer.precision", "is [16], but must be a string or an int"),
    ("trainer.callbacks", "[]", "trainer.callbacks", "needs a LightningCLI config"),
    ("trainer.devices", "2", "trainer.devices", "is set by the launcher"),
    ("trainer.max_steps", "100", "trainer.max_steps", "is set by the launcher"),
    ("trainer.1x", "1", "trainer.1x", "not a Trainer argument name"),
    ("optimizer", "torch.optim.SGD", "optimizer", "is a LightningCLI section"),
    ("checkpoint.every", "always", "checkpoint.every", "auto, epoch, rung"),
    ("checkpoint.max_paused", "0", "checkpoint.max_paused", "integer >= 1"),
    ("checkpoint.max_paused", "true", "checkpoint.max_paused", "integer >= 1"),
    ("checkpoint.max_paused", "'many'", "checkpoint.max_paused", "integer >= 1"),
    # the default pruner is asha with mode stop: nothing pauses, nothing to bound
    ("checkpoint.max_paused", "10", "checkpoint.max_paused",
     "applies to pruner mode: promotion (asha or hyperband) only; the pruner is asha with mode "
     "stop"),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "words"), BAD, ids=[f"{p}={v[:40]}" for p, v, *_ in BAD]
)
def test_bad_field_is_one_named_error(path: str, value: str, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_with(path, value))
    assert info.value.field == field
    assert words in info.value.message
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("seed", "sampler", "expected"), [
    (5, "random", 5),  # the top-level seed: the sampler's and the trials' training
    (None, {"name": "random", "seed": 3}, 3),
    (3, {"name": "tpe", "seed": 3}, 3),  # the same seed twice is one
    (None, "random", None),
])
def test_one_seed_for_the_sampler_and_the_training(
    seed: int | None, sampler: object, expected: int | None
) -> None:
    raw = {**BASE, "sampler": sampler, **({} if seed is None else {"seed": seed})}
    assert parse_config(raw).seed == expected


def test_two_different_seeds_are_refused() -> None:
    """sampler.seed won and the top-level seed was ignored unchecked (``seed: abc`` passed)."""
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "seed": 7, "sampler": {"name": "random", "seed": 0}})
    assert str(info.value) == ("seed: is 7, but sampler.seed is 0: the sampler and the "
                               "trials' training take one seed; give one of them")


def test_a_home_folder_path_is_expanded_as_in_a_shell(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    """``storage: ~/s.journal`` and ``run_dir: ~/runs`` made a folder named "~" in the current
    folder (one ``rm -rf ~`` away from the home folder)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = parse_config({**BASE, "storage": "~/studies/t.journal", "run_dir": "~/runs"})
    assert (cfg.storage, cfg.run_dir) == (f"{tmp_path}/studies/t.journal", f"{tmp_path}/runs")
    url = "postgresql://hpo:pw@db/~studies"  # a URL is the driver's to read
    assert parse_config({**BASE, "storage": url}).storage == url


@pytest.mark.parametrize(("class_path", "words"), [
    ("nope.Nope", "is 'nope.Nope', but module 'nope' cannot be imported: "
                  "ModuleNotFoundError: No module named 'nope'"),
    ("lightning_hpo.builtin.models.Nope", "is 'lightning_hpo.builtin.models.Nope', but module "
                                  "'lightning_hpo.builtin.models' has no 'Nope'"),
])
def test_a_class_path_that_does_not_import_is_named_not_a_space_key(
    class_path: str, words: str
) -> None:
    """The CLI's parser failed on the first space key it parsed: the check said
    "space.model.init_args.lr: the middle 0.1 of its range is refused ... No module named"."""
    cfg = parse_config({**CLI_BASE, "model": {"class_path": class_path}})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert (info.value.field, info.value.message) == ("model.class_path", words)


@pytest.mark.parametrize(("init_args", "words"), [
    pytest.param({"activation": "bogus"}, "the CLI's parser refused the tune config's sections: "
                 'Parser key "model"', id="parser-refuses"),
    pytest.param({"momentum": 5.0}, "the project refuses its own config (the tune config's "
                 "sections) as fit builds it", id="class-refuses"),
])
def test_a_fixed_init_args_value_refused_is_the_configs_not_a_space_keys(
    init_args: dict[str, Any], words: str
) -> None:
    """A value the tune config fixes beside a searched one (``activation: bogus``): the parser
    names only the section, ``model``, and the check blamed the first space key in it
    ("space.model.init_args.lr: the middle 0.1 of its range is refused ..."). What the class
    itself raises, over several lines (jsonargparse lists each subtype's error), is one line."""
    model = {"class_path": "lightning_hpo.builtin.models.LeNet", "init_args": init_args}
    cfg = parse_config({**CLI_BASE, "model": model})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == "config" and info.value.message.startswith(words), info.value
    assert "\n" not in str(info.value)


def test_a_searched_value_the_parser_refuses_is_still_the_space_keys() -> None:
    """The other side of the test above: the same section named, and the key is to blame."""
    space = {"model.init_args.activation": {"choice": ["tanh", "relu"]}}  # the middle: tanh
    cfg = parse_config({**CLI_BASE, "space": space})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == "space.model.init_args.activation", info.value
    assert info.value.message.startswith("the middle tanh of its range is refused by the CLI's "
                                         'parser: Parser key "model"'), info.value


def test_max_paused_reaches_the_promotion_schedule() -> None:
    from lightning_hpo.launch.study.search import build_schedule

    for name in ("asha", "hyperband"):
        raw = dict(BASE, pruner={"name": name, "mode": "promotion", "max_resource": 9},
                   checkpoint={"max_paused": 12})
        cfg = parse_config(raw)
        assert cfg.checkpoint.max_paused == 12
        assert build_schedule(cfg).max_paused == 12  # type: ignore[attr-defined]
    assert parse_config(BASE).checkpoint.max_paused is None
    sync = dict(BASE, pruner={"name": "sync_sh", "max_resource": 9}, checkpoint={"max_paused": 1})
    with pytest.raises(ConfigError, match="the pruner is sync_sh$"):
        parse_config(sync)


@pytest.mark.parametrize("pruner", [
    {"name": "asha", "mode": "promotion"}, {"name": "hyperband", "mode": "promotion"},
    {"name": "sync_sh"}, {"name": "sync_hyperband"}], ids=lambda p: p["name"])
def test_finish_best_reaches_the_pausing_schedules(pruner: dict) -> None:
    from lightning_hpo.launch.study.search import build_schedule

    raw = dict(BASE, pruner=dict(pruner, max_resource=9))
    cfg = parse_config(raw)
    assert cfg.pruner.finish_best is True  # the default
    assert build_schedule(cfg).finish_best is True  # type: ignore[attr-defined]
    cfg = parse_config(apply_overrides(raw, ["pruner.finish_best=false"]))
    assert cfg.pruner.finish_best is False
    assert build_schedule(cfg).finish_best is False  # type: ignore[attr-defined]


@pytest.mark.parametrize(("pruner", "words"), [
    ({"name": "hyperband", "mode": "stop"}, "the pruner is hyperband with mode stop"),
    ({"name": "none"}, "the pruner is none: remove it (on the command line, --set "
     "'~pruner.finish_best'); allowed: max_resource, min_resource, reduction_factor"),
], ids=["hyperband-stop", "none"])
def test_finish_best_is_refused_where_nothing_pauses(pruner: dict, words: str) -> None:
    raw = dict(BASE, pruner=dict(pruner, max_resource=9, finish_best=True))
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert info.value.field == "pruner.finish_best" and info.value.message.endswith(words)
    assert "\n" not in str(info.value)


def test_stop_needs_a_criterion_and_hyperband_a_max_resource() -> None:
    raw = dict(BASE, stop={})
    with pytest.raises(ConfigError, match="^stop: needs n_trials"):
        parse_config(raw)
    with pytest.raises(ConfigError, match="pruner.max_resource: is required for hyperband"):
        parse_config(dict(BASE, pruner={"name": "hyperband"}))
    with pytest.raises(ConfigError, match="pruner.max_resource: is required .*trainer.max_epochs"):
        parse_config(dict(BASE, pruner="none"))
    with pytest.raises(ConfigError, match=r"^pruner.max_resource: is required \(the epochs a "
                       r"trial may train, e.g. 27; or trainer.max_epochs\)$"):
        parse_config(dict(BASE, pruner="none"))
    cfg = parse_config(dict(BASE, pruner="none", trainer={"max_epochs": 3}))
    assert cfg.max_epochs == 3 and cfg.pruner.name == "none"
    # without a pruner, its max_resource is the epochs every trial trains, as for the others
    cfg = parse_config(dict(BASE, pruner={"name": "none", "max_resource": 4}))
    assert cfg.max_epochs == 4 and cfg.pruner.name == "none"


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        pytest.param({"model": {"name": "resnet"}}, "model.name", "allowed: lenet", id="model"),
        pytest.param({"data": {"name": "cifar"}}, "data.name", "allowed: digits", id="data"),
        pytest.param({"model": {"name": "lenet", "depth": 3}}, "model.depth", "allowed: lr",
                     id="arg"),
        pytest.param({"space": {"depth": {"randint": [1, 3]}}}, "space.depth", "not a hyper",
                     id="space-name"),
        pytest.param({"metric": "accuracy"}, "metric", "not logged", id="metric"),
    ],
)
def test_registry_checks(raw: dict, field: str, words: str) -> None:
    cfg = parse_config({**BASE, **raw})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == field
    assert words in info.value.message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("study: [unclosed\n", "not valid YAML at line", id="malformed"),
        pytest.param("!!python/object/apply:os.system ['echo hi']\n", "not valid YAML",
                     id="python-tag"),
        pytest.param("- a\n- b\n", "must hold a mapping", id="list"),
        pytest.param("study: a\nspace: {lr: {uniform: [0, 1]}}\nstop: {}\nspace: {}\n",
                     "at line 4, column 1: key 'space' is given twice (first on line 2)",
                     id="duplicate-key"),
        pytest.param("space:\n  lr: {uniform: [0, 1]}\n  lr: {uniform: [0, 2]}\n",
                     "at line 3, column 3: key 'lr' is given twice (first on line 2)",
                     id="duplicate-nested-key"),
    ],
)
def test_read_yaml_is_safe_and_says_where(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert info.value.field == "config" and words in info.value.message


def test_yaml_merge_keys_may_still_be_overridden(tmp_path: Path) -> None:
    """Only keys written twice in one mapping are refused: a merge's keys are meant to be."""
    path = tmp_path / "c.yaml"
    path.write_text("base: &b {lr: 0.1, momentum: 0.5}\ninitial:\n  - <<: *b\n    lr: 0.2\n")
    assert read_yaml(path)["initial"] == [{"lr": 0.2, "momentum": 0.5}]


def test_a_duplicate_key_in_a_set_value_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides({}, ["space={lr: {uniform: [0, 1]}, lr: {uniform: [0, 2]}}"])
    assert info.value.field == "--set space" and "key 'lr' is given twice" in info.value.message


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param(b"study: t\n# caf\xe9\n", "is not UTF-8 text (byte 0xe9 on line 2); save it",
                     id="latin-1"),
        pytest.param(b"\xff\xfes\x00t\x00", "is not UTF-8 text (byte 0xff on line 1)",
                     id="utf-16"),
        pytest.param(b"study: t\x00\n", "is not valid YAML at character 9: unacceptable character",
                     id="nul-byte"),
    ],
)
def test_config_bytes_must_be_utf8_text(tmp_path: Path, data: bytes, words: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert info.value.field == "config" and words in info.value.message, info.value
    assert str(path) in info.value.message


def test_utf8_with_a_byte_order_mark_and_accents_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes("\ufeffstudy: t  # café\nmodel: {name: lenet}\n".encode())
    assert read_yaml(path) == {"study": "t", "model": {"name": "lenet"}}


def test_a_folder_is_not_a_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^config: cannot read .*: Is a directory$"):
        read_yaml(tmp_path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^config: cannot read"):
        read_yaml(tmp_path / "nope.yaml")


def test_exponent_floats_are_numbers(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "study: t\nmodel: {name: lenet}\nspace: {lr: {loguniform: [1e-3, 1e-1]}}\n"
        "pruner: {name: asha, max_resource: 3}\nstop: {n_trials: 2}\n"
    )
    cfg = load_config(path, ["space.momentum={uniform: [0, 9e-1]}"])
    assert cfg.space["lr"].low == 0.001 and cfg.space["momentum"].high == 0.9


# ---------------------------------------------------------------------------------------------
# trainer.logger (tests/unit/launch/worker/test_tensorboard.py runs both through the launcher)


@pytest.mark.parametrize("installed", [True, False], ids=["tensorboard-installed", "not-installed"])
def test_the_default_logger_is_tensorboard_when_installed(
    installed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lightning_hpo.launch.config._parse._tensorboard_available",
                        lambda: installed)
    cfg = parse_config(BASE)
    assert cfg.logger == ("tensorboard" if installed else "csv")
    assert "logger" not in cfg.trainer  # a launcher setting, never a Trainer argument
    assert parse_config(_with("trainer.logger", "csv")).logger == "csv"


def test_the_logger_is_a_launcher_setting_next_to_trainer_arguments() -> None:
    cfg = parse_config(apply_overrides(BASE, ["trainer.logger=csv", "trainer.precision=32"]))
    assert (cfg.logger, cfg.trainer) == ("csv", {"precision": 32})
    assert cfg.raw["trainer"] == {"logger": "csv", "precision": 32}  # the study keeps it


@pytest.mark.parametrize("value", ["wandb", "TensorBoard"], ids=["unknown", "case"])
def test_a_bad_logger_is_one_error_naming_the_choices(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_with("trainer.logger", value))
    assert info.value.field == "trainer.logger"
    assert info.value.message.endswith("; allowed: tensorboard, csv"), info.value
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("value", ["true", "[csv]", "{class_path: lightning.pytorch.loggers."
                                   "WandbLogger}"], ids=["bool", "list", "class-path"])
def test_a_logger_that_is_not_a_name_needs_a_cli_config(value: str) -> None:
    """Registry mode: the launcher's tensorboard | csv only; a logger object is the CLI's."""
    with pytest.raises(ConfigError) as info:
        parse_config(_with("trainer.logger", value))
    assert info.value.field == "trainer.logger"
    assert info.value.message.startswith(f"is {_yaml_value(value)!r}, but must be tensorboard "
                                         "or csv; a logger of your own needs a LightningCLI "
                                         "config: ")
    assert "cli: main:cli_main" in info.value.message  # how to give one
    assert "\n" not in str(info.value)


def _yaml_value(text: str) -> object:
    return apply_overrides({}, [f"x={text}"])["x"]


def test_tensorboard_asked_for_but_not_installed_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("lightning_hpo.launch.config._parse._tensorboard_available", lambda: False)
    with pytest.raises(ConfigError) as info:
        parse_config(_with("trainer.logger", "tensorboard"))
    assert info.value.field == "trainer.logger" and "\n" not in str(info.value)
    assert "pip install 'lightning-async-hpo[tensorboard]'" in info.value.message
    assert "trainer.logger: csv" in info.value.message


# --- sampler: {name: "package.module:Class", <its arguments>...} ----------------------------


#: This module's name as its configs' class paths name it (``unit.launch.config.test_config``:
#: ``tests/`` is on ``sys.path`` and each folder under it a package).
HERE = __name__
SEEDED, SEEDLESS = f"{HERE}:SeededSampler", f"{HERE}:SeedlessSampler"


class SeededSampler(optuna.samplers.RandomSampler):
    """A sampler class path the tests name as :data:`SEEDED`: one required
    argument, one optional, and a seed; refuses a negative ``width``."""

    def __init__(self, width: float, rounds: int = 1, seed: int | None = None) -> None:
        if width < 0:
            raise ValueError(f"width must be >= 0, got {width}")
        super().__init__(seed=seed)
        self.width, self.rounds, self.seed = width, rounds, seed


class SeedlessSampler(optuna.samplers.RandomSampler):
    """A sampler class that takes no seed (:data:`SEEDLESS`)."""

    def __init__(self) -> None:
        super().__init__()


def _sampler_cfg(sampler: object, **extra: object) -> Config:
    return parse_config({**BASE, "sampler": sampler, **extra})


def test_a_sampler_class_path_is_built_with_its_arguments_and_a_seed_per_trial() -> None:
    cfg = _sampler_cfg({"class": SEEDED, "width": 0.5, "seed": 3})
    assert (cfg.sampler, cfg.sampler_args, cfg.seed) == (SEEDED,
                                                         {"width": 0.5}, 3)
    check_against_registry(cfg)
    samplers = [build_sampler(cfg, number) for number in (0, 1, 2)]
    assert all(type(s) is SeededSampler for s in samplers)
    assert [(s.width, s.rounds, s.seed) for s in samplers] == [
        (0.5, 1, 3), (0.5, 1, 3 + 7919), (0.5, 1, 3 + 2 * 7919)]
    # The seed may come from the top level; without any the sampler is unseeded.
    top_level = _sampler_cfg({"class": SEEDED, "width": 1}, seed=5)
    unseeded = _sampler_cfg({"class": SEEDED, "width": 1})
    assert [build_sampler(top_level, 1).seed, build_sampler(unseeded).seed] == [5 + 7919, None]
    # A bare class path is a sampler with no arguments; a top-level seed is not passed to a
    # class that takes none (it still seeds the trials' training).
    cfg = _sampler_cfg({"class": SEEDLESS}, seed=1)
    check_against_registry(cfg)
    assert type(build_sampler(cfg, 1)) is SeedlessSampler


def test_a_sampler_class_path_config_stays_json_for_the_study_and_the_workers() -> None:
    cfg = _sampler_cfg({"class": SEEDED, "width": 0.5,
                        "rounds": 2, "seed": 3})
    stored = json.loads(json.dumps(stored_config(cfg)))
    assert stored["sampler"] == {"class": SEEDED, "width": 0.5,
                                 "rounds": 2, "seed": 3}
    assert parse_config(json.loads(json.dumps(cfg.raw))) == cfg  # what a worker parses


def test_the_built_in_samplers_are_unchanged() -> None:
    for raw, kind in (("random", optuna.samplers.RandomSampler),
                      ({"name": "tpe", "seed": 2}, optuna.samplers.TPESampler),
                      ("gp", optuna.samplers.GPSampler)):
        cfg = _sampler_cfg(raw)
        assert cfg.sampler_args == {} and type(build_sampler(cfg)) is kind


@pytest.mark.parametrize(
    ("sampler", "field", "message"),
    [
        pytest.param("local_search", "sampler.name",
                     "is 'local_search'; allowed: random, tpe, gp, or sampler.class: a "
                     "'package.module:Class' path to an optuna.samplers.BaseSampler subclass",
                     id="unknown-name"),
        pytest.param({"class": "local_search"}, "sampler.class",
                     "is 'local_search', but must be a 'package.module:Class' path",
                     id="no-colon"),
        pytest.param({"class": ":SeededSampler"}, "sampler.class", "is ':SeededSampler', but",
                     id="no-module"),
        pytest.param({"class": 3}, "sampler.class", "is 3, but must be", id="not-a-string"),
        pytest.param({"class": "no_such_module:Sampler"}, "sampler.class",
                     "cannot import module 'no_such_module' (No module named 'no_such_module')",
                     id="missing-module"),
        pytest.param({"class": f"{HERE}:NoSuchSampler"}, "sampler.class",
                     f"module {HERE!r} has no attribute 'NoSuchSampler'",
                     id="missing-class"),
        pytest.param({"class": "optuna.pruners:NopPruner"}, "sampler.class",
                     "'optuna.pruners:NopPruner' is not a BaseSampler subclass",
                     id="not-a-sampler"),
        pytest.param(SEEDED, "sampler.name",
                     f"a sampler class goes in sampler.class: {{class: {SEEDED!r}}}",
                     id="class-path-as-name"),
        pytest.param({"class": SEEDED, "name": "tpe"}, "sampler.name",
                     "not both", id="name-and-class"),
        pytest.param({"class": SEEDED, "width": 1, "depth": 2},
                     "sampler.depth", f"unknown argument of {SEEDED!r}; "
                     "allowed: width, rounds", id="bad-kwarg"),
        pytest.param({"class": SEEDED}, "sampler.width",
                     f"is required by {SEEDED!r} but was not given",
                     id="missing-kwarg"),
        pytest.param({"class": SEEDED, "width": -1}, "sampler",
                     f"{SEEDED!r} refused its arguments {{'width': -1, "
                     "'seed': None}: width must be >= 0, got -1", id="refused-value"),
        pytest.param({"class": SEEDLESS, "seed": 0}, "sampler.seed",
                     f"is set, but {SEEDLESS!r} takes no seed", id="no-seed"),
        pytest.param({"name": "tpe", "n_startup_trials": 3}, "sampler.n_startup_trials",
                     "unknown field; allowed: name, seed", id="built-in-kwarg"),
        pytest.param({"class": SEEDED, "width": object()}, "sampler.width",
                     "but must be a YAML value", id="not-yaml"),
    ],
)
def test_bad_sampler_class_paths_are_one_line_errors(
    sampler: object, field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        check_against_registry(_sampler_cfg(sampler))  # parse_config raises some already
    assert info.value.field == field
    assert message in info.value.message, info.value.message
    assert "\n" not in str(info.value)


# --- parse_config reads the sections in the file's order, one helper each -------------------


def test_the_first_bad_section_in_the_files_order_is_the_one_reported() -> None:
    """Every section below is broken; each fix reveals the next one, in TOP_LEVEL's order
    (parse_config's section helpers run in that order)."""
    broken = {
        "study": "bad name!", "storage": " ", "run_dir": "", "model": 3, "data": [],
        "metric": "", "direction": "up", "space": {"lr": 0.1},
        "initial": {"lr": 0.1}, "sampler": "grid", "pruner": "nope", "devices": [],
        "stop": {}, "trainer": {"max_epochs": "x"}, "checkpoint": {"every": "hour"},
        "heartbeat": {"interval": 5},
    }
    fixes = [
        ("study", "t"), ("storage", "runs/t.journal"), ("run_dir", "runs"),
        ("model", {"name": "lenet"}), ("data", "digits"), ("metric", "validation_error"),
        ("direction", "minimize"), ("space", {"lr": {"loguniform": [0.01, 1.0]}}),
        ("initial", []), ("sampler", "random"), ("pruner", {"name": "asha"}),
        ("devices", {}), ("stop", {"n_trials": 2}), ("trainer", {"max_epochs": 3}),
        ("checkpoint", {}),
    ]
    reported = []
    for key, good in fixes:
        with pytest.raises(ConfigError) as info:
            parse_config(broken)
        reported.append(info.value.field.partition(".")[0])
        broken[key] = good
    with pytest.raises(ConfigError) as info:  # a heartbeat on a journal file: last of all
        parse_config(broken)
    assert info.value.field == "heartbeat"
    assert reported == [key for key, _ in fixes]
    del broken["heartbeat"]
    assert parse_config(broken).max_epochs == 3


def test_the_epochs_come_from_the_pruner_or_the_trainer_and_must_agree() -> None:
    assert parse_config(_with("trainer.max_epochs", "9")).max_epochs == 9  # equal: fine
    cfg = parse_config(apply_overrides(BASE, ["pruner=asha", "trainer.max_epochs=5"]))
    assert (cfg.max_epochs, cfg.pruner.max_resource) == (5, 5)  # the pruner gets them
    none = parse_config(apply_overrides(BASE, ["pruner=none", "trainer.max_epochs=4"]))
    assert (none.max_epochs, none.pruner.max_resource) == (4, None)
    with pytest.raises(ConfigError, match=r"^pruner.max_resource: is required"):
        parse_config(apply_overrides(BASE, ["pruner=asha"]))
    with pytest.raises(ConfigError, match=r"^pruner.min_resource: is above max_epochs \(4\)"):
        parse_config(apply_overrides(BASE, ["pruner={name: asha, min_resource: 5}",
                                            "trainer.max_epochs=4"]))


def test_the_default_logger_is_the_one_a_config_without_it_gets() -> None:
    from lightning_hpo.launch.config import default_logger

    assert parse_config(BASE).logger == default_logger()


# --- A LightningCLI project as it is: cli:, config:, class_path
# (lightning_hpo.launch.config.cli_spec)

#: The tune.yaml of the issue, next to a project trained with `python main.py fit --config
#: config.yaml`.
ISSUE_TUNE_YAML = """\
study: shop
cli: main:cli_main
config: [config.yaml]
metric: val_loss
direction: minimize
space:
  model.hidden_dim: {randint: [16, 256]}
  model.dropout: {uniform: [0.0, 0.5]}
  optimizer.init_args.lr: {loguniform: [1.0e-4, 1.0e-1]}
  data.batch_size: {choice: [32, 64, 128]}
initial: [{model.hidden_dim: 64, optimizer.init_args.lr: 0.001}]
pruner: {name: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
devices: {per_trial: 1, trials_per_device: 1}
stop: {n_trials: 40}
"""
#: The smallest CLI config: Lightning's own CLI and the shipped LeNet by its class path.
CLI_BASE = {
    "study": "t",
    "model": {"class_path": "lightning_hpo.builtin.models.LeNet"},
    "space": {"model.init_args.lr": {"loguniform": [0.01, 1.0]}},
    "pruner": {"name": "asha", "max_resource": 9},
    "stop": {"n_trials": 4},
}


def test_the_issues_tune_yaml_parses_in_cli_mode(tmp_path: Path) -> None:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    from lightning_hpo.launch.config.cli_spec import CliSpec

    path = tmp_path / "tune.yaml"
    path.write_text(ISSUE_TUNE_YAML)
    cfg = load_config(path)
    assert cfg.cli == CliSpec("main:cli_main", ("config.yaml",), {})
    assert cfg.cli.files == ("config.yaml",)
    # The model, data and Trainer are the CLI's (its config files): none of the registry's.
    assert (cfg.model, cfg.model_args, cfg.data, cfg.data_args) == ("", {}, "", {})
    assert cfg.trainer == {}
    assert cfg.max_epochs == 9 and cfg.pruner.max_resource == 9
    assert (cfg.study, cfg.metric, cfg.direction) == ("shop", "val_loss", "minimize")
    assert cfg.stop.n_trials == 40 and cfg.devices.per_trial == 1
    assert cfg.storage == "runs/shop.journal"
    # The CLI's dotted keys, in the file's order.
    assert cfg.space == {
        "model.hidden_dim": IntDistribution(16, 256),
        "model.dropout": FloatDistribution(0.0, 0.5),
        "optimizer.init_args.lr": FloatDistribution(1e-4, 1e-1, log=True),
        "data.batch_size": CategoricalDistribution([32, 64, 128]),
    }
    # An initial configuration may give some of the keys (the sampler draws the others).
    assert cfg.initial == [{"model.hidden_dim": 64, "optimizer.init_args.lr": 0.001}]
    # What the study keeps reads back to the same config (JSON, as the storage holds it).
    stored = json.loads(json.dumps(stored_config(cfg)))
    assert parse_config(stored) == cfg


def test_a_class_path_alone_is_lightnings_own_cli() -> None:
    from lightning_hpo.launch.config.cli_spec import DEFAULT_CLI

    cfg = parse_config(CLI_BASE)
    assert cfg.cli is not None and cfg.cli.entry == DEFAULT_CLI and cfg.cli.files == ()
    assert cfg.cli.sections == {"model": {"class_path": "lightning_hpo.builtin.models.LeNet"}}
    assert (cfg.model, cfg.data, cfg.data_args) == ("", "", {})  # no registry digits default
    assert cfg.metric == "validation_error"  # the launcher's defaults are the same


def test_the_cli_sections_go_to_the_cli_and_the_launchers_settings_stay_out() -> None:
    raw = {**CLI_BASE, "config": "config.yaml",
           "trainer": {"logger": "csv", "max_epochs": 9, "gradient_clip_val": 1.0,
                       "callbacks": [{"class_path": "lightning.pytorch.callbacks."
                                      "LearningRateMonitor"}]},
           "optimizer": {"class_path": "torch.optim.SGD", "init_args": {"momentum": 0.9}},
           "lr_scheduler": "torch.optim.lr_scheduler.ConstantLR"}
    cfg = parse_config(raw)
    assert cfg.cli is not None and cfg.cli.files == ("config.yaml",)
    assert cfg.cli.sections["trainer"] == {"gradient_clip_val": 1.0,
                                           "callbacks": raw["trainer"]["callbacks"]}
    assert cfg.cli.sections["optimizer"] == raw["optimizer"]
    assert cfg.cli.sections["lr_scheduler"] == "torch.optim.lr_scheduler.ConstantLR"
    assert (cfg.logger, cfg.trainer, cfg.max_epochs) == ("csv", {}, 9)


def test_a_cli_logger_of_the_project_is_the_clis_and_the_launcher_keeps_its_default() -> None:
    from lightning_hpo.launch.config import default_logger

    logger = {"class_path": "lightning.pytorch.loggers.CSVLogger",
              "init_args": {"save_dir": "logs"}}
    cfg = parse_config({**CLI_BASE, "trainer": {"logger": logger}})
    assert cfg.cli is not None and cfg.cli.sections["trainer"] == {"logger": logger}
    assert cfg.logger == default_logger() and cfg.trainer == {}


def test_cli_mode_still_checks_the_epochs_against_the_pruner() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**CLI_BASE, "trainer": {"max_epochs": 5}})
    assert info.value.field == "trainer.max_epochs"
    assert "must equal pruner.max_resource (9)" in info.value.message
    cfg = parse_config({**CLI_BASE, "pruner": "none", "trainer": {"max_epochs": 4}})
    assert cfg.max_epochs == 4 and cfg.cli is not None and cfg.cli.sections.get("trainer") is None


def test_cli_mode_without_epochs_says_the_projects_own_are_not_read() -> None:
    """The project's config.yaml may say trainer.max_epochs: 9; the study's file must say it."""
    with pytest.raises(ConfigError) as info:
        parse_config({**CLI_BASE, "pruner": "none", "config": ["config.yaml"]})
    assert str(info.value) == (
        "pruner.max_resource: is required (the epochs a trial may train, e.g. 27; or "
        "trainer.max_epochs in this file: the trainer.max_epochs of the project's config files "
        "is not read, the study decides)")


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        pytest.param({"cli": "main"}, "cli", "must be 'module:name'", id="cli"),
        pytest.param({"config": 3}, "config", "must be a file path or a list", id="config"),
        pytest.param({"model": {"name": "lenet"}, "config": "c.yaml"}, "model.name",
                     "is a registry name", id="registry-name"),
        pytest.param({"data": "digits"}, "data", "must be a mapping", id="data-name-str"),
        pytest.param({"space": {"model..lr": {"uniform": [0, 1]}}}, "space.model..lr",
                     "dotted keys of the CLI", id="empty-part"),
        pytest.param({"space": {"model.hidden-dim": {"randint": [1, 3]}}},
                     "space.model.hidden-dim", "dotted keys of the CLI", id="dash"),
        pytest.param({"space": {".lr": {"uniform": [0, 1]}}}, "space..lr",
                     "dotted keys of the CLI", id="leading-dot"),
        pytest.param({"initial": [{"model.init_args.momentum": 0.5}]},
                     "initial[0].model.init_args.momentum", "not a searched hyperparameter",
                     id="initial-unknown-key"),
        pytest.param({"initial": [{"model.init_args.lr": 5.0}]}, "initial[0].model.init_args.lr",
                     "outside the range", id="initial-outside"),
        pytest.param({"trainer": {"callbacks": 3, "devices": 2}}, "trainer.devices",
                     "is set by the launcher", id="owned-beside-callbacks"),
        # a searched value the launcher would replace in every trial: Optuna would record it
        # as a parameter although it changed nothing
        pytest.param({"space": {"trainer.max_epochs": {"choice": [1, 5]}}},
                     "space.trainer.max_epochs", "the pruner decides", id="space-max-epochs"),
        pytest.param({"space": {"trainer.devices": {"choice": [1, 2]}}},
                     "space.trainer.devices", "is set by the launcher", id="space-devices"),
        pytest.param({"space": {"trainer.default_root_dir": {"choice": ["a", "b"]}}},
                     "space.trainer.default_root_dir", "its own folder", id="space-root-dir"),
        pytest.param({"space": {"ckpt_path": {"choice": ["a.ckpt"]}}}, "space.ckpt_path",
                     "its own checkpoint", id="space-ckpt-path"),
    ],
)
def test_a_bad_cli_field_is_one_named_error(raw: dict, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**CLI_BASE, **raw})
    assert info.value.field == field
    assert words in info.value.message, info.value.message
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("key", ["model.hidden_dim", "optimizer.init_args.lr", "data.batch_size"])
def test_dotted_space_keys_are_for_cli_configs(key: str) -> None:
    """Registry mode: hyperparameters are the model's and data module's own names."""
    raw = {**BASE, "space": {key: {"randint": [16, 256]}}}
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert info.value.field == f"space.{key}"
    own = key.rpartition(".")[2] if key.startswith(("model.", "data.")) else "lr"
    assert info.value.message == (
        "is a dotted key, which needs a LightningCLI config (model: {class_path: package.module."
        "Class}); with model and data by name, a space key is a model or data argument's own "
        f"name (space.{own})")
    assert list(parse_config({**CLI_BASE, "space": raw["space"]}).space) == [key]


@pytest.mark.parametrize("section", ["model", "data", "optimizer", "trainer"])
@pytest.mark.parametrize("spec", [{"randint": [1, 2]}, {"uniform": [0.1, 0.2]}, {"choice": [1, 2]},
                                  3], ids=["randint", "uniform", "choice", "constant"])
def test_a_whole_cli_section_in_the_space_is_refused_naming_it(section: str, spec: Any) -> None:
    """``space: {model: {randint: [1, 2]}, model.hidden_dim: ...}`` passed the config, and the
    check blamed ``space.model.hidden_dim`` (the CLI's parser refused ``--model=1`` as the
    value of the section's first key)."""
    space = {f"{section}.init_args.x": {"uniform": [0.1, 0.2]}, section: spec}
    with pytest.raises(ConfigError) as info:
        parse_config({**CLI_BASE, "space": space})
    assert info.value.field == f"space.{section}"
    assert info.value.message.startswith(
        f"names the whole {section} section, not one of its arguments: search an argument by "
        f"its dotted key (space.{section}.init_args.x, as this space does)")
    assert ("choose among classes" in info.value.message) == (section != "trainer")
    other = "data" if section == "model" else "model"  # no key of the section to show
    with pytest.raises(ConfigError, match=rf"\(space.{section}.<argument>, as the CLI's fit "):
        parse_config({**CLI_BASE, "space": {f"{other}.init_args.x": {"uniform": [0.1, 0.2]},
                                            section: spec}})


def test_a_choice_of_classes_for_a_whole_cli_section_is_searched() -> None:
    from optuna.distributions import CategoricalDistribution

    classes = ["lightning_hpo.builtin.models.LeNet", "lightning_hpo.builtin.models.DropoutMLP"]
    cfg = parse_config({**CLI_BASE, "space": {**CLI_BASE["space"], "model": {"choice": classes}}})
    assert cfg.space["model"] == CategoricalDistribution(classes)


@pytest.mark.parametrize(("space", "words", "key"), [
    ({"model": {"hidden_dim": {"randint": [1, 2]}}}, "unknown distribution 'hidden_dim'",
     "hidden_dim"),
    ({"model": {"hidden_dim": {"randint": [1, 2]}, "dropout": 0.1}}, "must have exactly one key",
     "dropout"),
], ids=["one-key", "two-keys"])
def test_a_nested_section_of_a_cli_space_says_its_dotted_key(space: dict, words: str,
                                                              key: str) -> None:
    """It said "model.* keys need a LightningCLI config" of a LightningCLI config."""
    with pytest.raises(ConfigError) as info:
        parse_config({**CLI_BASE, "space": space})
    assert info.value.field == "space.model" and words in info.value.message
    assert info.value.message.endswith("model is a section, not a hyperparameter: name one of "
                                       f"its arguments by its dotted key, space.model.{key}")
    assert "need a LightningCLI config" not in info.value.message


def test_a_registry_section_in_the_space_says_to_name_an_argument() -> None:
    cfg = parse_config({**BASE, "space": {**BASE["space"], "model": {"randint": [1, 2]}}})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == "space.model"
    assert info.value.message.endswith("; model is the section, not one of its arguments: search "
                                       "one of those by its own name (space.lr)")


@pytest.mark.parametrize(
    ("section", "value"),
    [("optimizer", "torch.optim.Adam"),
     ("optimizer", {"class_path": "torch.optim.Adam", "init_args": {"lr": 0.1}}),
     ("lr_scheduler", {"class_path": "torch.optim.lr_scheduler.StepLR"})],
    ids=["optimizer-str", "optimizer-mapping", "lr-scheduler"],
)
def test_optimizer_and_scheduler_sections_need_a_cli_config(section: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, section: value})
    assert info.value.field == section
    assert info.value.message.startswith("is a LightningCLI section: give the model as model: "
                                         "{class_path: package.module.Class}")
    assert "cli: main:cli_main" in info.value.message
    assert "\n" not in str(info.value)


def test_registry_callbacks_need_a_cli_config() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "trainer": {"callbacks": [
            {"class_path": "lightning.pytorch.callbacks.LearningRateMonitor"}]}})
    assert info.value.field == "trainer.callbacks"
    assert info.value.message.startswith("needs a LightningCLI config: ")
    # The same callbacks in a CLI config are the CLI's.
    cfg = parse_config({**CLI_BASE, "trainer": {"callbacks": []}})
    assert cfg.cli is not None and cfg.cli.sections["trainer"] == {"callbacks": []}


@pytest.mark.parametrize(
    ("key", "value"),
    [("gradient_clip_algorithm", "norm"), ("benchmark", True), ("num_sanity_val_steps", 0),
     ("val_check_interval", 0.5), ("enable_model_summary", False)],
)
def test_registry_trainer_takes_any_lightning_argument_the_launcher_does_not_own(
    key: str, value: object
) -> None:
    cfg = parse_config({**BASE, "trainer": {key: value, "gradient_clip_val": 0.5}})
    assert cfg.trainer == {key: value, "gradient_clip_val": 0.5}
    assert check_against_registry(cfg) == []  # a real Trainer argument: no note


@pytest.mark.parametrize(("trainer", "field", "words"), [
    # digits at batch_size 128 (the space's high end) is 12 training batches an epoch
    ({"val_check_interval": 13}, "trainer.val_check_interval",
     "is 13, but an epoch has 12 training batches: give at most 12, or a fraction of an epoch "
     "(e.g. 0.5) (the space's high end, data.batch_size 128)"),
    ({"val_check_interval": 5, "limit_train_batches": 4}, "trainer.val_check_interval",
     "is 5, but an epoch has 4 training batches"),
    # None at either end; 0.0222 (the low end's 45 batches) would leave none of the high end's
    ({"limit_train_batches": 0.01}, "trainer.limit_train_batches",
     "is 0.01, which leaves none of an epoch's 12 training batches: give at least 0.0833"),
    ({"val_check_interval": 13, "check_val_every_n_epoch": None}, "trainer.val_check_interval",
     "is 13, but an epoch has 12 training batches, and with check_val_every_n_epoch: null the "
     "epochs between two validations would have no value to report"),
    ({"val_check_interval": 0.5, "check_val_every_n_epoch": None}, "trainer",
     "val_check_interval: 0.5, check_val_every_n_epoch: None together, which Lightning's "
     "Trainer refuses: `val_check_interval` should be an integer"),
])
def test_trainer_values_lightnings_fit_would_refuse_in_every_trial_are_refused_first(
    trainer: dict[str, object], field: str, words: str
) -> None:
    """Each value alone builds a Trainer; what fails is the epoch's batch count (known once the
    data is loaded) or the values together: every trial would fail with Lightning's error."""
    cfg = parse_config({**BASE, "pruner": "none",
                        "space": {"lr": {"loguniform": [0.01, 1.0]},
                                  "batch_size": {"randint": [32, 128]}},
                        "trainer": {"max_epochs": 2, **trainer}})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == field
    assert words in info.value.message


@pytest.mark.parametrize(("space", "trainer", "field", "message"), [
    # The low end (batch 32) has 45 batches an epoch and the high end 12: the advice said 45,
    # and 45 was then refused at the high end.
    ({"batch_size": {"randint": [32, 128]}}, {"val_check_interval": 50},
     "trainer.val_check_interval",
     "is 50, but an epoch has 12 training batches: give at most 12, or a fraction of an epoch "
     "(e.g. 0.5) (the space's high end, data.batch_size 128)"),
    ({"batch_size": {"randint": [32, 128]}}, {"val_check_interval": 13, "limit_train_batches": 0.5},
     "trainer.val_check_interval",
     "is 13, but an epoch has 6 training batches: give at most 6, or a fraction of an epoch "
     "(e.g. 0.5) (the space's high end, data.batch_size 128)"),
    # 360 validation images: 12 batches at the low end, 3 at the high end; both leave none.
    ({"batch_size": {"randint": [32, 128]}}, {"limit_val_batches": 0.05},
     "trainer.limit_val_batches",
     "is 0.05, which leaves none of the 3 validation batches: give at least 0.333, or a number "
     "of batches (an integer) (the space's high end, data.batch_size 128)"),
    # Fewer training batches at the low end here (more images held out for validation).
    ({"val_fraction": {"uniform": [0.1, 0.9]}}, {"val_check_interval": 20},
     "trainer.val_check_interval",
     "is 20, but an epoch has 3 training batches: give at most 3, or a fraction of an epoch "
     "(e.g. 0.5) (the space's high end, data.val_fraction 0.9)"),
])
def test_a_batch_count_refusal_names_the_limit_at_the_end_with_the_fewest_batches(
    space: dict[str, object], trainer: dict[str, object], field: str, message: str
) -> None:
    cfg = parse_config({**BASE, "pruner": "none",
                        "space": {"lr": {"loguniform": [0.01, 1.0]}, **space},
                        "trainer": {"max_epochs": 2, **trainer}})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert (info.value.field, info.value.message) == (field, message)


_SPLIT_NEEDS = ("but a stratified split needs at least one of each of the 10 classes on each "
                "side: give from 0.0051 to 0.9944")


@pytest.mark.parametrize(("data", "space", "field", "message"), [
    ({"val_fraction": 0.9995}, {}, "data.val_fraction",
     f"is 0.9995, which leaves 0 of the 1797 digits for training, {_SPLIT_NEEDS}"),
    ({"val_fraction": 0.001}, {}, "data.val_fraction",
     f"is 0.001, which leaves 2 of the 1797 digits for validation, {_SPLIT_NEEDS}"),
    ({}, {"val_fraction": {"uniform": [0.0001, 0.5]}}, "space.val_fraction",
     "the low end 0.0001 is refused: is 0.0001, which leaves 1 of the 1797 digits for "
     f"validation, {_SPLIT_NEEDS}"),
    ({}, {"val_fraction": {"uniform": [0.2, 0.9995]}}, "space.val_fraction",
     "the high end 0.9995 is refused: is 0.9995, which leaves 0 of the 1797 digits for "
     f"training, {_SPLIT_NEEDS}"),
    ({"seed": 2**32}, {}, "data.seed",
     "is 4294967296, but must be at most 2**32 - 1 (4294967295), the seeds scikit-learn's "
     "split takes"),
])
def test_a_split_every_trial_would_fail_to_make_is_refused_by_the_check(
    data: dict[str, object], space: dict[str, object], field: str, message: str
) -> None:
    """Every trial failed in setup; the check said OK (it built the module, loading nothing)."""
    cfg = parse_config({**BASE, "data": {"name": "digits", **data},
                        "space": {"lr": {"loguniform": [0.01, 1.0]}, **space}})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert (info.value.field, info.value.message) == (field, message)


def test_the_split_fractions_the_refusal_offers_pass_the_check() -> None:
    cfg = parse_config({**BASE, "space": {"lr": {"loguniform": [0.01, 1.0]},
                                          "val_fraction": {"uniform": [0.0051, 0.9944]}}})
    assert check_against_registry(cfg) == []


def test_unreadable_fashion_mnist_files_are_refused_by_the_check(
    fashion_root: tuple[Path, object]
) -> None:
    root = fashion_root[0]
    images = root / "FashionMNIST" / "raw" / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-1])
    cfg = parse_config({**BASE, "data": {"name": "fashion_mnist", "root": str(root)}})
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert str(info.value) == (
        f"data.root: cannot read the Fashion-MNIST files under '{root}': "
        "FashionMNIST/raw/train-images-idx3-ubyte has 15695 bytes, but its header says 20 "
        "images, 15696 bytes (a truncated copy?)")


def test_every_trainer_value_the_fit_rules_allow_has_a_type_parse_config_takes() -> None:
    """parse_config checks the types of some Trainer keys; trainer_values says which values
    Lightning's fit takes: a value it allows (null, "warn") must not be a wrong type."""
    from lightning_hpo.launch.config import TRAINER_KEYS

    from .test_trainer_values import GOOD

    shared = set(GOOD) & set(TRAINER_KEYS)
    assert {"check_val_every_n_epoch", "deterministic", "gradient_clip_val"} <= shared
    for key in sorted(shared):
        for value in GOOD[key]:
            assert parse_config({**BASE, "trainer": {key: value}}).trainer[key] == value


@pytest.mark.parametrize("trainer", [
    {"val_check_interval": 12},  # an epoch's 12 batches at the high end
    {"val_check_interval": 12, "check_val_every_n_epoch": None},  # counts across epochs
    {"deterministic": "warn"},
    {"deterministic": None, "check_val_every_n_epoch": 2},
])
def test_trainer_values_lightning_takes_pass_parse_and_check(trainer: dict[str, object]) -> None:
    """``null`` and ``"warn"`` are values the Trainer documents (parse_config took only the
    types of the other values before)."""
    cfg = parse_config({**BASE, "pruner": "none",
                        "space": {"lr": {"loguniform": [0.01, 1.0]},
                                  "batch_size": {"randint": [32, 128]}},
                        "trainer": {"max_epochs": 2, **trainer}})
    assert check_against_registry(cfg) == []


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("check_val_every_n_epoch", "2", "an integer >= 1, or null (validate by val_check_interval)"),
    ("max_epochs", 2.5, "an int"),
    ("precision", 1.5, "a string or an int"),
    ("limit_val_batches", "all", "an int or a float"),
])
def test_a_trainer_value_of_the_wrong_type_says_what_is_allowed(
    key: str, value: object, allowed: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "trainer": {key: value}})
    assert (info.value.field, info.value.message) == (f"trainer.{key}",
                                                      f"is {value!r}, but must be {allowed}")


def test_an_unknown_registry_trainer_argument_is_refused_against_lightnings_trainer() -> None:
    cfg = parse_config({**BASE, "trainer": {"not_an_arg": 1}})  # pure: not known here
    assert cfg.trainer == {"not_an_arg": 1}
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == "trainer.not_an_arg"
    message = info.value.message
    assert message.startswith("is not an argument of Lightning's Trainer; allowed: ")
    allowed = message.partition("allowed: ")[2].split(", ")
    assert {"gradient_clip_algorithm", "benchmark", "max_epochs", "precision"} <= set(allowed)
    # What a registry config may not set is not offered.
    assert not {"devices", "accelerator", "strategy", "callbacks", "logger"} & set(allowed)


@pytest.mark.parametrize("key", ["devices", "accelerator", "strategy", "num_nodes",
                                 "default_root_dir", "enable_checkpointing", "max_steps",
                                 "fast_dev_run"])
@pytest.mark.parametrize("mode", ["registry", "cli"])
def test_the_trainer_arguments_the_launcher_owns_are_refused_in_both_modes(
    key: str, mode: str
) -> None:
    from lightning_hpo.launch.config.cli_spec import OWNED_TRAINER

    base = BASE if mode == "registry" else {**CLI_BASE, "config": "config.yaml"}
    with pytest.raises(ConfigError) as info:
        parse_config({**base, "trainer": {key: 2}})
    assert info.value.field == f"trainer.{key}"
    assert info.value.message == f"is set by the launcher: {OWNED_TRAINER[key]}"


def test_set_overrides_a_dotted_space_key_of_a_cli_config(tmp_path: Path) -> None:
    from optuna.distributions import FloatDistribution, IntDistribution

    path = tmp_path / "tune.yaml"
    path.write_text(ISSUE_TUNE_YAML)
    cfg = load_config(path, ["space.model.hidden_dim={randint: [8, 64]}",
                             "space.optimizer.init_args.momentum={uniform: [0.0, 0.9]}",
                             "space.model.dropout.uniform=[0.1, 0.2]", "stop.n_trials=5"])
    assert cfg.space["model.hidden_dim"] == IntDistribution(8, 64)
    assert cfg.space["optimizer.init_args.momentum"] == FloatDistribution(0.0, 0.9)
    assert cfg.space["model.dropout"] == FloatDistribution(0.1, 0.2)
    assert list(cfg.space) == ["model.hidden_dim", "model.dropout", "optimizer.init_args.lr",
                               "data.batch_size", "optimizer.init_args.momentum"]
    assert cfg.stop.n_trials == 5
    # A registry config's space keys are names: the same override nests (and is refused).
    with pytest.raises(ConfigError) as info:
        parse_config(apply_overrides(BASE, ["space.model.hidden_dim={randint: [8, 32]}"]))
    assert info.value.field.startswith("space.model")


@pytest.mark.parametrize(("key", "value", "words"), [
    ("precision", "bogus", "Precision 'bogus' is invalid"),
    ("precision", "8", "Precision 8 is invalid"),
    ("limit_train_batches", "-2", "invalid value -2"),
    ("limit_val_batches", "0", "reads the metric from each epoch's validation"),
])
def test_a_trainer_value_lightning_refuses_is_refused_before_anything_runs(
    key: str, value: str, words: str,
) -> None:
    """Found late, every trial of the study failed, and the study kept the bad value: a rerun
    without it was refused as a changed config."""
    cfg = parse_config(_with(f"trainer.{key}", value))
    with pytest.raises(ConfigError) as info:
        check_against_registry(cfg)
    assert info.value.field == f"trainer.{key}"
    assert words in info.value.message and "\n" not in str(info.value)


def test_trainer_values_lightning_takes_pass_the_check() -> None:
    cfg = parse_config(apply_overrides(BASE, [
        "trainer.precision=bf16-mixed", "trainer.gradient_clip_val=0.5",
        "trainer.limit_val_batches=0.5", "trainer.log_every_n_steps=5"]))
    check_against_registry(cfg)


@pytest.mark.parametrize("pruner", [
    {"name": "sync_sh"}, {"name": "sync_hyperband"}, {"name": "asha", "mode": "promotion"},
    {"name": "hyperband", "mode": "promotion"}, {"name": "asha"}, {"name": "hyperband"},
    {"name": "none"},
])
@pytest.mark.parametrize(("low", "top", "eta"), [(1, 9, 3), (1, 27, 3), (2, 10, 2), (3, 100, 4),
                                                 (1, 1, 2), (5, 7, 3)])
def test_pause_levels_are_every_rung_the_schedule_pauses_at(
    pruner: dict[str, str], low: int, top: int, eta: int
) -> None:
    """The pure levels (checked against check_val_every_n_epoch) are the schedule's own."""
    fields = {} if pruner["name"] == "none" else {
        "min_resource": low, "max_resource": top, "reduction_factor": eta}
    cfg = parse_config({"study": "s", "model": "lenet", "stop": {"n_trials": 9},
                        "space": {"lr": {"uniform": [0.01, 0.1]}},
                        "trainer": {"max_epochs": top}, "pruner": {**pruner, **fields}})
    paused = sorted({level for ladder in build_schedule(cfg).ladders() for level in ladder})
    assert pause_levels(cfg) == (paused if cfg.pruner.pauses else [])


N_TRIALS_TYPO = (
    "stop.n_trials: is 99999999999999999999, but must be an integer from 1 to 10000 (the study "
    "queues every trial of it before the first starts, and a queued trial cannot be taken "
    "back); for a longer study, give stop.max_wallclock_time without n_trials"
)


def test_a_mistyped_n_trials_is_refused_in_one_line() -> None:
    """Queued before any trial started (minutes, no wall clock counted), and a Ctrl-C left the
    tickets written so far, which the study then held it to."""
    with pytest.raises(ConfigError) as info:
        parse_config(apply_overrides(BASE, ["stop.n_trials=99999999999999999999"]))
    assert str(info.value) == N_TRIALS_TYPO


def test_n_trials_up_to_the_bound_is_taken() -> None:
    from lightning_hpo.launch.config import MAX_N_TRIALS

    assert MAX_N_TRIALS == 10_000
    assert parse_config(_with("stop.n_trials", str(MAX_N_TRIALS))).stop.n_trials == MAX_N_TRIALS


@pytest.mark.parametrize(("typed", "read"), [
    ("0777", "the number 511"),  # YAML 1.1 octal: the advice quoted '511'
    ("1_000", "the number 1000"),
    ("1e3", "the number 1000.0"),
    ("123", "a number"),
    ("yes", "the boolean true"),
])
def test_a_study_name_yaml_reads_as_a_number_is_quoted_as_typed(
    tmp_path: Path, typed: str, read: str,
) -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(BASE, [f"study={typed}"])
    assert str(info.value) == (f"study: is {typed}, which YAML reads as {read}: quote the name, "
                               f"--set study='\"{typed}\"'")
    assert apply_overrides(BASE, [f'study="{typed}"'])["study"] == typed  # as the shell passes it
    assert apply_overrides(BASE, [f"study={typed}", "study=later"])["study"] == "later"
    path = tmp_path / "tune.yaml"
    path.write_text(f"study: {typed}\nmodel: lenet\nspace: {{lr: {{uniform: [0.1, 0.2]}}}}\n"
                    "pruner: {name: asha, max_resource: 3}\nstop: {n_trials: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"study: is {typed}, which YAML reads as {read}: quote the name, "
                               f"study: \"{typed}\"")
    assert load_config(path, ["study=other"]).study == "other"  # replaced: nothing to quote
    path.write_text(path.read_text().replace(f"study: {typed}", f'study: "{typed}"'))
    assert load_config(path).study == typed


def test_a_study_that_is_no_name_even_quoted_shows_what_was_typed() -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(BASE, ["study=12:30"])
    assert info.value.message.startswith("is 12:30 (YAML reads the number 750), but must be "
                                         "1-128 ASCII letters, digits")
    assert "quote" not in info.value.message
    with pytest.raises(ConfigError) as info:  # no text to quote (a mapping from Python)
        parse_config({**BASE, "study": 511})
    assert "study: \"511\"" not in info.value.message
    assert info.value.message.endswith("(a number, not a name: in YAML, write the name in "
                                       "quotes, study: \"0777\")")


#: Plain values YAML 1.1 reads as something else than written (field, as typed, what it is read
#: as and what to write): refused in the launcher's file and in --set alike, naming the field.
MISREAD = [
    pytest.param("stop.max_wallclock_time", "1:30", "the base-60 number 90 (1*60 + 30); write "
                 "the number itself (e.g. 90) for a number", id="sexagesimal"),
    pytest.param("stop.max_wallclock_time", "1:30:00", "the base-60 number 5400 (1*3600 + "
                 "30*60 + 00); write the number itself (e.g. 5400) for a number",
                 id="sexagesimal-hours"),
    pytest.param("stop.n_trials", "0777", "the octal number 511; write 511 or 777 (no leading "
                 "zero) for a number", id="octal"),
    pytest.param("stop.n_trials", "010", "the octal number 8; write 8 or 10 (no leading zero) "
                 "for a number", id="octal-ten"),
    pytest.param("stop.n_trials", "07", "the octal number 7; write 7 for a number",
                 id="octal-same-digits"),
    pytest.param("pruner.mode", "on", "the boolean true; write true or false for a boolean",
                 id="on"),
    pytest.param("pruner.mode", "off", "the boolean false; write true or false for a boolean",
                 id="off"),
    pytest.param("sampler.name", "yes", "the boolean true; write true or false for a boolean",
                 id="yes"),
    pytest.param("data.name", "No", "the boolean false; write true or false for a boolean",
                 id="no-capitalised"),
]


def _file_with(tmp_path: Path, field: str, typed: str) -> Path:
    """BASE as a YAML file, with ``field`` written as the plain scalar ``typed``."""
    raw = apply_overrides(BASE, [f"{field}=PLACEHOLDER"])
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(raw).replace("PLACEHOLDER", typed))
    return path


@pytest.mark.parametrize(("field", "typed", "how"), MISREAD)
def test_a_value_yaml_1_1_reads_as_something_else_is_refused_naming_the_field(
    tmp_path: Path, field: str, typed: str, how: str,
) -> None:
    """``max_wallclock_time: 1:30`` ran 90 seconds, ``n_trials: 0777`` 511 trials and
    ``mode: on`` was True: one line naming the field, saying how to write it either way."""
    path = _file_with(tmp_path, field, typed)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"{field}: {typed} is read by YAML 1.1 as {how}, or "
                               f"\"{typed}\" in quotes for text")
    with pytest.raises(ConfigError) as info:
        load_config(DEFAULT_CONFIG, [f"{field}={typed}"])
    assert str(info.value) == (f"--set {field}: {typed} is read by YAML 1.1 as {how}, or "
                               f"--set {field}='\"{typed}\"' for text")
    # quoted, it is the text as typed (which the field's own check then judges)
    path.write_text(path.read_text().replace(typed, f'"{typed}"'))
    section, name = field.split(".")
    assert read_yaml(path)[section][name] == typed
    assert apply_overrides(BASE, [f'{field}="{typed}"'])[section][name] == typed


@pytest.mark.parametrize(("text", "error"), [
    ("space: {act: {choice: [relu, off]}}\n", "space.act.choice[1]: off is read by YAML 1.1 as "
     "the boolean false; write true or false for a boolean, or \"off\" in quotes for text"),
    ("space: {on: {uniform: [0, 1]}}\n", "space.on: on is read by YAML 1.1 as the boolean true; "
     "write \"on\" in quotes for text"),  # a key is a name: text only
    ("base: &b {n_trials: 0777}\nstop: {<<: *b}\n", "base.n_trials: 0777 is read by YAML 1.1 "
     "as the octal number 511; write 511 or 777 (no leading zero) for a number, or \"0777\" in "
     "quotes for text"),  # where the anchor writes it
    ("trainer: {gradient_clip_val: 1:30.5}\n", "trainer.gradient_clip_val: 1:30.5 is read by "
     "YAML 1.1 as the base-60 number 90.5 (1*60 + 30.5); write the number itself (e.g. 90.5) "
     "for a number, or \"1:30.5\" in quotes for text"),
], ids=["in-a-list", "a-key", "through-an-alias", "sexagesimal-float"])
def test_a_misread_value_anywhere_in_the_file_is_named_where_it_is_written(
    tmp_path: Path, text: str, error: str,
) -> None:
    path = tmp_path / "tune.yaml"
    path.write_text("study: t\n" + text)
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert str(info.value) == error


def test_values_yaml_1_1_reads_as_written_are_taken(tmp_path: Path) -> None:
    """true/false for a boolean (in any case YAML 1.2 takes), plain and signed integers, 0,
    floats such as 1e-3, hex, and a value with an explicit tag (``!!int 0777`` says it means
    511) or quoted are all read as they were before."""
    path = tmp_path / "tune.yaml"
    path.write_text(
        "study: t\nmodel: lenet\nspace: {lr: {loguniform: [1e-3, 1.0]}, "
        "batch_size: {choice: [16, 32]}}\n"
        "pruner: {name: sync_sh, max_resource: 9, resume: True, finish_best: false}\n"
        "stop: {n_trials: 10, max_wallclock_time: 90.5}\n")
    cfg = load_config(path)
    assert cfg.pruner.resume is True and cfg.pruner.finish_best is False
    assert cfg.stop.n_trials == 10 and cfg.stop.max_wallclock_time == 90.5
    assert load_config(path, ["pruner.resume=false", "stop.n_trials=0x10",
                              "stop.max_wallclock_time=1.5e3"]).stop.n_trials == 16
    path.write_text("a: !!int 0777\nb: !!str on\nc: 'yes'\nd: [0, -3, +4, 1_000, TRUE, "
                    "2.5e-1, .inf]\ne: 12:30 text\n")
    assert read_yaml(path) == {"a": 511, "b": "on", "c": "yes",
                               "d": [0, -3, 4, 1000, True, 0.25, float("inf")],
                               "e": "12:30 text"}


@pytest.mark.parametrize(("data", "space", "error"), [
    ({"batch_size": 0}, {}, "data.batch_size: is 0, which torch's DataLoader refuses: batch_size "
     "should be a positive integer value, but got batch_size=0"),
    ({"batch_size": 2.5}, {}, "data.batch_size: is 2.5, which torch's DataLoader refuses: "
     "batch_size should be a positive integer value, but got batch_size=2.5"),
    ({}, {"batch_size": {"randint": [-4, 8]}}, "space.batch_size: the low end -4 is refused by "
     "torch's DataLoader: batch_size should be a positive integer value, but got batch_size=-4"),
    ({"samples": 64}, {"batch_size": {"choice": [16, 0]}}, "space.batch_size: the high end 0 is "
     "refused by torch's DataLoader: batch_size should be a positive integer value, but got "
     "batch_size=0"),
], ids=["fixed-zero", "fixed-float", "searched-negative", "searched-choice"])
def test_a_batch_size_a_users_data_module_takes_and_its_dataloader_refuses_is_refused(
    data: dict[str, Any], space: dict[str, Any], error: str,
) -> None:
    """The class took it, --check passed, and every trial failed when fit asked for a loader."""
    raw = {**BASE, "data": {"name": "helpers.launch_models:LoaderData", **data},
           "space": {**BASE["space"], **space}}
    with pytest.raises(ConfigError) as info:
        check_against_registry(parse_config(raw))
    assert str(info.value) == error


def test_a_batch_size_a_users_dataloader_takes_passes_the_check() -> None:
    raw = {**BASE, "data": {"name": "helpers.launch_models:LoaderData", "batch_size": 4},
           "space": {**BASE["space"], "samples": {"randint": [16, 32]}}}
    assert check_against_registry(parse_config(raw)) == []


@pytest.mark.parametrize(("value", "field", "words"), [
    ("9" * 400, "model.width", "is " + "9" * 400 + ", but must be"),
    ("9" * 400, "data.val_fraction", "is " + "9" * 400 + ", but must be"),
    ("9" * 400, "trainer.gradient_clip_val", "a number >= 0"),
], ids=["model-width", "data-val-fraction", "gradient-clip-val"])
def test_an_integer_beyond_any_float_is_one_line_in_the_check(
    value: str, field: str, words: str,
) -> None:
    """An OverflowError traceback from the classes' and the Trainer values' checks."""
    raw = apply_overrides(BASE, [f"{field}={value}"])
    with pytest.raises(ConfigError) as info:
        check_against_registry(parse_config(raw))
    assert info.value.field == field and words in info.value.message


@pytest.mark.parametrize(("text", "where"), [
    ("model: &m {name: lenet, loop: *m}\n", "model.loop"),
    ("space: &s {lr: {uniform: [0, 1]}, more: [1, *s]}\n", "space.more[1]"),
], ids=["mapping", "list"])
def test_a_yaml_alias_inside_its_own_anchor_is_one_line(
    tmp_path: Path, text: str, where: str,
) -> None:
    """A structure that holds itself: a RecursionError traceback (sampler arguments) or a
    'Circular reference' blamed on the project (a LightningCLI section)."""
    path = tmp_path / "loop.yaml"
    path.write_text("study: s\n" + text)
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert str(info.value) == (f"config: {path}: {where} is an alias (*name) inside the anchor it "
                               "names (&name): a structure without end; write its values out")
    with pytest.raises(ConfigError, match=r"^--set model: model.x\[0\] is an alias"):
        apply_overrides(BASE, ["model={name: lenet, x: &a [*a]}"])
    shared = "study: s\nbase: &b {lr: 0.1}\none: *b\ntwo: *b\n"  # an alias used twice: fine
    path.write_text(shared)
    assert read_yaml(path)["two"] == {"lr": 0.1}


def test_yaml_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("space: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    assert str(info.value) == f"config: {path} nests lists or mappings too deeply to read"
    with pytest.raises(ConfigError, match="^--set space: nests lists or mappings too deeply"):
        apply_overrides(BASE, ["space=" + "[" * 5000 + "]" * 5000])


def test_a_study_yaml_reads_as_a_date_is_quoted_as_typed() -> None:
    with pytest.raises(ConfigError) as info:
        apply_overrides(BASE, ["study=2024-05-01"])
    assert str(info.value) == ("study: is 2024-05-01, which YAML reads as a date: quote the name, "
                               "--set study='\"2024-05-01\"'")


def test_set_takes_spaces_around_the_key_and_shows_control_characters() -> None:
    assert apply_overrides(BASE, [" stop.n_trials = 5"])["stop"]["n_trials"] == 5
    assert apply_overrides(BASE, ["stop . grace=1"])["stop"]["grace"] == 1
    with pytest.raises(ConfigError) as info:
        apply_overrides(BASE, ["study=a\x00b"])
    assert str(info.value) == "--set study: cannot parse value 'a\\x00b' as YAML"
