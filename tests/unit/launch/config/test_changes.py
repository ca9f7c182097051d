"""An existing study's stored config against a new one: every field classified, defaults equal
to omitted keys, one refusal line, one line for what the study goes on with.

End to end through the launcher: tests/integration/test_launch.py (``test_an_edited_config_*``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import (
    TOP_LEVEL,
    TRAINER_KEYS,
    CheckpointSpec,
    DevicesSpec,
    HeartbeatSpec,
    PrunerSpec,
    StopSpec,
    apply_overrides,
    parse_config,
)
from lightning_hpo.launch.config import changes as changes_module
from lightning_hpo.launch.config.changes import (
    FIELDS,
    MISSING,
    TRAINER_DEFAULTS,
    Change,
    Changes,
    classify,
    compare_configs,
    show,
)
from lightning_hpo.launch.study.creation import (
    config_changes,
    existing_changes,
    open_study,
    stored_config,
)
from lightning_hpo.schema import CONFIG_ATTR
from lightning_hpo.storage import open_storage

SECRET = "s3cr3t-pw"
BASE: dict[str, Any] = {
    "study": "t",
    "storage": f"postgresql://hpo:{SECRET}@db/studies",
    "model": {"name": "lenet"},
    "space": {"lr": {"loguniform": [0.01, 1.0]}, "batch_size": {"randint": [32, 128]}},
    "initial": [{"lr": 0.1, "batch_size": 64}],
    "sampler": {"name": "random", "seed": 0},
    "pruner": {"name": "asha", "max_resource": 9},
    "stop": {"n_trials": 6},
}


def _stored(raw: dict[str, Any]) -> dict[str, Any]:
    """What the study keeps of ``raw`` (JSON and back, as it is read from the study)."""
    return json.loads(json.dumps(stored_config(parse_config(raw)), default=str))


def _compare(new: dict[str, Any], old: dict[str, Any] | None = None) -> Changes:
    return compare_configs(_stored(BASE if old is None else old), _stored(new))


def _with(*overrides: str, base: dict[str, Any] | None = None) -> dict[str, Any]:
    return apply_overrides(BASE if base is None else base, overrides)


PROMOTION = _with("pruner.mode=promotion")
NONE_PRUNER = _with("pruner=none", "trainer.max_epochs=9")
FASHION = _with("data={name: fashion_mnist, root: /data}")
CLASS_SAMPLER = _with("sampler={class: 'optuna.samplers:QMCSampler', scramble: true}")
#: A study of a LightningCLI project (lightning_hpo.launch.config.cli_spec): its entry point, files
#: and
#: inline sections instead of registry names.
CLI_BASE: dict[str, Any] = {
    "study": "t",
    "storage": f"postgresql://hpo:{SECRET}@db/studies",
    "cli": "main:cli_main",
    "config": ["config.yaml"],
    "model": {"class_path": "shop.Model", "init_args": {"hidden_dim": 64}},
    "optimizer": {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.1}},
    "trainer": {"gradient_clip_val": 1.0},
    "metric": "val_loss",
    "space": {"model.init_args.dropout": {"uniform": [0.0, 0.5]},
              "data.batch_size": {"choice": [32, 64]}},
    "initial": [{"model.init_args.dropout": 0.1}],
    "sampler": {"name": "random", "seed": 0},
    "pruner": {"name": "asha", "max_resource": 9},
    "stop": {"n_trials": 6},
}
#: The same project with the sections and values a LightningCLI config may have besides.
CLI_FULL = apply_overrides(CLI_BASE, [
    "config=[base.yaml, config.yaml]", "data={class_path: shop.Data, init_args: {root: /d}}",
    "trainer.callbacks=[{class_path: lightning.pytorch.callbacks.LearningRateMonitor}]",
    "trainer.logger={class_path: lightning.pytorch.loggers.CSVLogger}",
    "trainer.benchmark=true", "lr_scheduler=torch.optim.lr_scheduler.ConstantLR",
    "model.init_args.layers=[32, 16]", "model.init_args.extra={}"])

# ------------------------------------------------------------------------------------------
# The table: every field the grammar knows is classified.


def test_every_top_level_key_is_classified() -> None:
    for key in TOP_LEVEL:
        assert key in FIELDS or any(f.startswith(f"{key}.") for f in FIELDS), key


@pytest.mark.parametrize(
    ("section", "spec"),
    [("pruner", PrunerSpec), ("devices", DevicesSpec), ("stop", StopSpec),
     ("checkpoint", CheckpointSpec), ("heartbeat", HeartbeatSpec)],
)
def test_every_key_of_a_section_is_classified_by_name(section: str, spec: type) -> None:
    """A new key of PrunerSpec & co. fails here until someone decides what its change does."""
    keys = {f.name for f in dataclasses.fields(spec)}
    assert {f"{section}.{key}" for key in keys} <= set(FIELDS), keys
    listed = {f.partition(".")[2] for f in FIELDS if f.startswith(f"{section}.")}
    assert listed == keys  # and nothing stale


def test_every_trainer_key_is_classified_by_name_with_lightnings_default() -> None:
    for key in (*TRAINER_KEYS, "logger"):
        assert f"trainer.{key}" in FIELDS, key
    listed = {f.partition(".")[2] for f in FIELDS if f.startswith("trainer.")} - {"*"}
    assert listed == {*TRAINER_KEYS, "logger"}
    assert set(TRAINER_DEFAULTS) >= set(TRAINER_KEYS) - {"max_epochs"}
    import lightning as L

    params = inspect.signature(L.Trainer.__init__).parameters
    for key, value in TRAINER_DEFAULTS.items():  # what Lightning uses for its None
        default = params[key].default
        assert default is None or default == value, (key, default, value)


def test_the_data_keys_that_may_change_are_arguments_of_the_built_in_data_modules() -> None:
    from lightning_hpo.builtin.data import DigitsDataModule, FashionMNISTDataModule

    arguments = {name for cls in (DigitsDataModule, FashionMNISTDataModule)
                 for name in inspect.signature(cls).parameters}
    allowed = {f.partition(".")[2] for f, kind in FIELDS.items()
               if f.startswith("data.") and kind == "allowed"}
    assert allowed == {"num_workers", "on_device", "root", "download"} and allowed <= arguments
    for name in arguments - allowed:  # batch_size, val_fraction, seed: another data set
        assert classify(f"data.{name}") == "refused", name
    assert set(changes_module.DATA_DEFAULTS) <= allowed


def test_the_model_keys_that_may_change_are_how_the_same_steps_run() -> None:
    allowed = {f for f, kind in FIELDS.items() if f.startswith("model.") and kind == "allowed"}
    assert allowed == {"model.cuda_graphs", "model.channels_last"}
    assert set(changes_module.LAUNCHER_MODEL_ARGS) == {f.partition(".")[2] for f in allowed}
    for name in changes_module.MODEL_DEFAULTS["lenet"]:
        if name not in ("cuda_graphs", "channels_last"):
            assert classify(f"model.{name}") == "refused", name


def test_the_built_in_classes_defaults_are_the_classes_own() -> None:
    from lightning_hpo.builtin.data import DATAMODULES, datamodule_hyperparameters
    from lightning_hpo.builtin.models import MODELS, model_hyperparameters

    assert {name: {**model_hyperparameters(name), **changes_module.LAUNCHER_MODEL_ARGS}
            for name in MODELS} == changes_module.MODEL_DEFAULTS
    assert {name: datamodule_hyperparameters(name) for name in DATAMODULES} == \
        changes_module.DATA_MODULE_DEFAULTS


@pytest.mark.parametrize("written", [
    "data.val_fraction=0.2", "data.seed=0", "model.weight_decay=0.0", "model.width=1.0",
    "trainer.num_sanity_val_steps=2", "trainer.val_check_interval=1.0",
])
def test_a_default_written_out_is_no_change(written: str) -> None:
    """Refused on resume before ("data.val_fraction (not set) -> 0.2 ... leave out
    data.val_fraction"), though 0.2 is what the data module used."""
    base = dict(BASE, model={"name": "lenet"}, data={"name": "digits"}, pruner="none",
                trainer={"max_epochs": 3})
    before = parse_config(base)
    after = parse_config(apply_overrides(base, [written]))
    assert compare_configs(stored_config(before), stored_config(after)) == Changes()


@pytest.mark.parametrize("raw", [
    BASE, PROMOTION, NONE_PRUNER, FASHION, CLASS_SAMPLER,
    _with("heartbeat={interval: 5}", "model.dropout=0.1"),
    CLI_BASE, _with("optimizer=torch.optim.Adam", base=CLI_BASE),
    pytest.param(CLI_FULL, id="cli-full"),
    pytest.param(_with("trainer.benchmark=true"), id="registry-benchmark"),
])
def test_every_field_a_config_resolves_to_is_in_the_table(raw: dict[str, Any]) -> None:
    fields = changes_module._fields(_stored(raw))
    for field in fields:
        section = field.partition(".")[0]
        assert field in FIELDS or f"{section}.*" in FIELDS, field


def test_a_field_nobody_classified_is_refused() -> None:
    assert classify("nosuch") == "refused" and classify("nosuch.key") == "refused"
    assert classify("model.anything") == "refused" and classify("space.anything") == "refused"
    assert classify("sampler.n_startup_trials") == "refused"


# ------------------------------------------------------------------------------------------
# What is refused: one line naming each field, old -> new, and how to go on.

REFUSED = [
    # (id, overrides, the base they apply to, field, old -> new as shown)
    ("metric", ["metric=train_loss"], None, "metric", "validation_error -> train_loss"),
    ("direction", ["direction=maximize"], None, "direction", "minimize -> maximize"),
    ("space-bound", ["space.lr={loguniform: [0.001, 1.0]}"], None, "space.lr",
     "{loguniform: [0.01, 1.0]} -> {loguniform: [0.001, 1.0]}"),
    ("space-kind", ["space.lr={uniform: [0.01, 1.0]}"], None, "space.lr",
     "{loguniform: [0.01, 1.0]} -> {uniform: [0.01, 1.0]}"),
    ("space-added", ["space.momentum={uniform: [0.0, 0.9]}"], None, "space.momentum",
     "(not set) -> {uniform: [0.0, 0.9]}"),
    ("space-constant", ["space.momentum=0.5"], None, "space.momentum", "(not set) -> 0.5"),
    ("space-choice-order", ["space.act={choice: [relu, sigmoid]}"],
     _with("space.act={choice: [sigmoid, relu]}"), "space.act",
     "{choice: [sigmoid, relu]} -> {choice: [relu, sigmoid]}"),
    ("sampler-seed", ["sampler.seed=1"], None, "sampler.seed", "0 -> 1"),
    ("top-level-seed", ["seed=1"], _with("sampler=random"), "seed", "null -> 1"),
    ("sampler-name", ["sampler.name=tpe"], None, "sampler.name", "random -> tpe"),
    ("sampler-argument", ["sampler.scramble=false"], CLASS_SAMPLER, "sampler.scramble",
     "true -> false"),
    ("model-name", ["model.name=dropout_mlp"], None, "model.name", "lenet -> dropout_mlp"),
    ("model-argument", ["model.momentum=0.5"], None, "model.momentum", "0.0 -> 0.5"),  # default
    ("model-nested", ["model.layers={sizes: [32, 16]}"], _with("model.layers={sizes: [32, 8]}"),
     "model.layers", "{sizes: [32, 8]} -> {sizes: [32, 16]}"),
    ("data-name", ["data.name=fashion_mnist"], None, "data.name", "digits -> fashion_mnist"),
    ("data-val-fraction", ["data.val_fraction=0.3"], None, "data.val_fraction",
     "0.2 -> 0.3"),  # the data module's default, left out before
    ("data-seed", ["data.seed=3"], _with("data.seed=2"), "data.seed", "2 -> 3"),
    ("pruner-name", ["pruner.name=sync_sh"], None, "pruner.name", "asha -> sync_sh"),
    ("pruner-none", ["pruner=none", "trainer.max_epochs=9"], None, "pruner.name",
     "asha -> none"),
    ("min-resource", ["pruner.min_resource=2"], None, "pruner.min_resource", "1 -> 2"),
    ("max-resource", ["pruner.max_resource=27"], None, "pruner.max_resource", "9 -> 27"),
    ("reduction-factor", ["pruner.reduction_factor=2"], None, "pruner.reduction_factor",
     "3 -> 2"),
    ("mode", ["pruner.mode=promotion"], None, "pruner.mode", "stop -> promotion"),
    ("prefact", ["pruner.prefact=2"], _with("pruner={name: sync_sh, max_resource: 9}"),
     "pruner.prefact", "1 -> 2"),
    ("resume", ["pruner.resume=false"], _with("pruner={name: sync_sh, max_resource: 9}"),
     "pruner.resume", "true -> false"),
    ("finish-best", ["pruner.finish_best=false"], PROMOTION, "pruner.finish_best",
     "true -> false"),
    ("max-epochs", ["trainer.max_epochs=3"], NONE_PRUNER, "trainer.max_epochs", "9 -> 3"),
    ("precision", ["trainer.precision=bf16"], None, "trainer.precision",
     "32-true -> bf16-mixed"),
    ("gradient-clip", ["trainer.gradient_clip_val=1.0"], None, "trainer.gradient_clip_val",
     "0.0 -> 1.0"),
    ("accumulate", ["trainer.accumulate_grad_batches=2"], None,
     "trainer.accumulate_grad_batches", "1 -> 2"),
    ("limit-train", ["trainer.limit_train_batches=4"], None, "trainer.limit_train_batches",
     "1.0 -> 4"),
    ("limit-val", ["trainer.limit_val_batches=0.5"], None, "trainer.limit_val_batches",
     "1.0 -> 0.5"),
    ("val-every", ["trainer.check_val_every_n_epoch=2"], None,
     "trainer.check_val_every_n_epoch", "1 -> 2"),
    # A LightningCLI project: another entry point, other files or another inline value.
    ("cli", ["cli=other:cli_main"], CLI_BASE, "cli", "'main:cli_main' -> 'other:cli_main'"),
    ("cli-default", ["cli=null"], CLI_BASE, "cli",
     "'main:cli_main' -> 'lightning.pytorch.cli:LightningCLI'"),
    ("config-files", ["config=[config.yaml, fast.yaml]"], CLI_BASE, "config",
     "[config.yaml] -> [config.yaml, fast.yaml]"),
    ("config-file-order", ["config=[b.yaml, a.yaml]"], _with("config=[a.yaml, b.yaml]",
                                                            base=CLI_BASE),
     "config", "[a.yaml, b.yaml] -> [b.yaml, a.yaml]"),
    ("cli-optimizer-lr", ["optimizer.init_args.lr=0.01"], CLI_BASE, "optimizer.init_args.lr",
     "0.1 -> 0.01"),
    ("cli-optimizer-class", ["optimizer.class_path=torch.optim.Adam"], CLI_BASE,
     "optimizer.class_path", "torch.optim.SGD -> torch.optim.Adam"),
    ("cli-scheduler", ["lr_scheduler=torch.optim.lr_scheduler.ConstantLR"], CLI_BASE,
     "lr_scheduler", "(not set) -> torch.optim.lr_scheduler.ConstantLR"),
    ("cli-model-argument", ["model.init_args.hidden_dim=128"], CLI_BASE,
     "model.init_args.hidden_dim", "64 -> 128"),
    ("cli-model-class", ["model.class_path=shop.Other"], CLI_BASE, "model.class_path",
     "shop.Model -> shop.Other"),
    ("cli-data-argument", ["data.init_args.val_fraction=0.2"], CLI_BASE,
     "data.init_args.val_fraction", "(not set) -> 0.2"),
    ("cli-trainer-clip", ["trainer.gradient_clip_val=0.5"], CLI_BASE,
     "trainer.gradient_clip_val", "1.0 -> 0.5"),
    # The project's config file may set what a tune config leaves out: not a default here.
    ("cli-trainer-precision", ["trainer.precision=32-true"], CLI_BASE, "trainer.precision",
     "(not set) -> 32-true"),
    ("cli-space-key", ["space.model.init_args.dropout={uniform: [0.0, 0.3]}"], CLI_BASE,
     "space.model.init_args.dropout", "{uniform: [0.0, 0.5]} -> {uniform: [0.0, 0.3]}"),
]


@pytest.mark.parametrize(("overrides", "base", "field", "shown"), [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_a_change_of_what_a_trial_is_or_how_trials_are_compared_is_refused(
    overrides: list[str], base: dict[str, Any] | None, field: str, shown: str
) -> None:
    old = BASE if base is None else base
    changes = _compare(_with(*overrides, base=old), old)
    assert [(c.field, c.kind) for c in changes.items] == [(field, "refused")]
    error = changes.refusal("t")
    assert isinstance(error, ConfigError) and error.field == field
    text = str(error)
    assert "\n" not in text and f"{field} {shown}" in text, text
    assert "study 't' was created with other settings" in text
    assert "name a new study (--set study=NEW)" in text
    assert changes.line() is None  # nothing the study could go on with


@pytest.mark.parametrize(
    ("overrides", "base"),
    [pytest.param(*r[1:3], id=r[0]) for r in REFUSED],
)
def test_the_refusals_set_gives_the_old_value_back(
    overrides: list[str], base: dict[str, Any] | None
) -> None:
    """What the refusal says to run (--set key=old, as a shell reads it) is the old config
    again: dotted CLI keys (space.model.init_args.dropout) included."""
    old = BASE if base is None else base
    new = _with(*overrides, base=old)
    error = _compare(new, old).refusal("t")
    assert error is not None
    restore = [c.restore() for c in _compare(new, old).of("refused")]
    if None in restore:  # a key the study did not have: "leave out ..."
        assert "leave out" in str(error)
        return
    words = shlex.split(" ".join(r for r in restore if r))
    sets = [word for word in words if word != "--set"]
    assert len(sets) == words.count("--set") == len(restore)
    assert _compare(apply_overrides(new, sets), old).items == ()


def test_every_refused_field_of_the_table_is_exercised() -> None:
    exercised = {r[3] for r in REFUSED}
    named = {f for f, kind in FIELDS.items() if kind == "refused" and not f.endswith(".*")}
    assert named - exercised == {"sampler.class"}  # below: replacing the sampler
    assert {"space", "model", "data", "sampler"} <= {f.partition(".")[0] for f in exercised}


def test_the_refusal_names_every_refused_field_and_how_to_give_each_back() -> None:
    new = _with("pruner.name=sync_sh", "metric=train_loss", "space.lr={uniform: [0.1, 0.5]}",
                "model.momentum=0.5", "stop.n_trials=40")
    error = _compare(new).refusal("t")
    assert error is not None and error.field == "model.momentum"  # first in the config's order
    text = str(error)
    assert text.startswith("model.momentum: study 't' was created with other settings: "
                           "model.momentum 0.0 -> 0.5, metric validation_error -> "
                           "train_loss, space.lr {loguniform: [0.01, 1.0]} -> {uniform: "
                           "[0.1, 0.5]}, pruner.name asha -> sync_sh; these changes would mix "
                           "two studies in one"), text
    assert text.endswith(
        "to go on, name a new study (--set study=NEW) or give the old values (--set "
        "model.momentum=0.0 --set metric=validation_error --set 'space.lr={loguniform: [0.01, "
        "1.0]}' --set pruner.name=asha)"), text
    assert "stop.n_trials" not in text  # allowed: not part of the refusal


def test_replacing_the_sampler_by_a_class_names_both_fields() -> None:
    changes = _compare(CLASS_SAMPLER)
    fields = [(c.field, show(c.old), show(c.new)) for c in changes.items]
    assert fields == [
        ("sampler.name", "random", "(not set)"),
        ("sampler.class", "(not set)", "'optuna.samplers:QMCSampler'"),
        ("sampler.scramble", "(not set)", "true"),
        ("seed", "0", "null"),  # the old one was sampler.seed; the new config gives none
    ]
    assert "leave out sampler.class, sampler.scramble" in str(changes.refusal("t"))


def test_the_seed_is_named_where_the_new_config_gives_it() -> None:
    moved = _with("sampler=random", "seed=0")  # the same seed, at the top level
    assert _compare(moved).items == ()
    changes = _compare(_with("sampler=random", "seed=5"))
    assert [str(c) for c in changes.items] == ["seed 0 -> 5"]
    assert "--set seed=0" in str(changes.refusal("t"))


def test_one_epoch_count_is_named_once() -> None:
    """pruner.max_resource is trainer.max_epochs: the change is named by the field the new
    config sets (the other would be refused as not equal to it)."""
    assert [c.field for c in _compare(_with("pruner.max_resource=27")).items] == [
        "pruner.max_resource"]
    longer = _with("trainer.max_epochs=27", base=NONE_PRUNER)
    assert [c.field for c in _compare(longer, NONE_PRUNER).items] == ["trainer.max_epochs"]
    # none <-> asha with the same epochs: only the name (none trains max_epochs).
    assert [c.field for c in _compare(NONE_PRUNER).items] == ["pruner.name"]


# ------------------------------------------------------------------------------------------
# What the study goes on with, said in one line.

ALLOWED = [
    ("n-trials", ["stop.n_trials=40"], None, "stop.n_trials 6 -> 40"),
    ("wallclock", ["stop.max_wallclock_time=600"], None, "stop.max_wallclock_time null -> 600.0"),
    ("failed", ["stop.max_failed_trials=3"], None, "stop.max_failed_trials null -> 3"),
    ("grace", ["stop.grace=30"], None, "stop.grace 0.0 -> 30.0"),
    ("retries", ["stop.max_retries=0"], None, "stop.max_retries 2 -> 0"),
    ("per-trial", ["devices.per_trial=2"], None, "devices.per_trial 1 -> 2"),
    ("sharing", ["devices.trials_per_device=2"], None, "devices.trials_per_device 1 -> 2"),
    ("accelerator", ["devices.accelerator=cpu"], None, "devices.accelerator auto -> cpu"),
    ("count", ["devices.count=2"], None, "devices.count null -> 2"),
    ("run-dir", ["run_dir=/elsewhere"], None, "run_dir runs -> /elsewhere"),
    ("checkpoint-every", ["checkpoint.every=rung"], None, "checkpoint.every auto -> rung"),
    ("max-paused", ["checkpoint.max_paused=10"], PROMOTION, "checkpoint.max_paused null -> 10"),
    ("heartbeat", ["heartbeat={interval: 5}"], None,
     "heartbeat.interval null -> 5, heartbeat.grace_period null -> 15"),
    ("logger", ["trainer.logger=csv"], _with("trainer.logger=tensorboard"),
     "trainer.logger tensorboard -> csv"),
    ("deterministic", ["trainer.deterministic=true"], None,
     "trainer.deterministic false -> true"),
    ("log-every", ["trainer.log_every_n_steps=10"], None, "trainer.log_every_n_steps 50 -> 10"),
    ("num-workers", ["data.num_workers=2"], None, "data.num_workers 0 -> 2"),
    ("on-device", ["data.on_device=false"], None, "data.on_device auto -> false"),
    ("cuda-graphs", ["model.cuda_graphs=false"], None, "model.cuda_graphs auto -> false"),
    ("channels-last", ["model.channels_last=false"], None,
     "model.channels_last auto -> false"),
    ("root", ["data.root=/mnt/fashion"], FASHION, "data.root /data -> /mnt/fashion"),
    ("download", ["data.download=true"], FASHION, "data.download false -> true"),
    ("cli-n-trials", ["stop.n_trials=40"], CLI_BASE, "stop.n_trials 6 -> 40"),
    ("cli-devices", ["devices.per_trial=2"], CLI_BASE, "devices.per_trial 1 -> 2"),
    ("cli-logger", ["trainer.logger=csv"], _with("trainer.logger=tensorboard", base=CLI_BASE),
     "trainer.logger tensorboard -> csv"),
]


@pytest.mark.parametrize(("overrides", "base", "said"), [r[1:] for r in ALLOWED],
                         ids=[r[0] for r in ALLOWED])
def test_a_change_of_the_budget_devices_or_speed_goes_on_and_is_said(
    overrides: list[str], base: dict[str, Any] | None, said: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("lightning_hpo.launch.config._parse._tensorboard_available", lambda: True)
    old = BASE if base is None else base
    changes = _compare(_with(*overrides, base=old), old)
    assert changes.items and {c.kind for c in changes.items} == {"allowed"}
    assert changes.refusal("t") is None
    assert changes.line() == f"Changed since the study was created: {said}"


def test_every_allowed_field_of_the_table_is_exercised() -> None:
    said = " ".join(r[3] for r in ALLOWED)
    for field, kind in FIELDS.items():
        if kind == "allowed":
            assert f"{field} " in said, field


def test_several_allowed_changes_are_one_line_in_the_configs_order() -> None:
    changes = _compare(_with("stop.n_trials=20", "devices.per_trial=2", "run_dir=/r"))
    assert changes.line() == ("Changed since the study was created: run_dir runs -> /r, "
                              "devices.per_trial 1 -> 2, stop.n_trials 6 -> 20")


def test_another_initial_list_has_no_effect_and_says_so() -> None:
    changes = _compare(_with("initial=[{lr: 0.5, batch_size: 32}]", "stop.n_trials=9"))
    assert [(c.field, c.kind) for c in changes.items] == [
        ("initial", "ignored"), ("stop.n_trials", "allowed")]
    assert changes.refusal("t") is None
    assert changes.line() == (
        "Changed since the study was created: stop.n_trials 6 -> 9; initial [{lr: 0.1, "
        "batch_size: 64}] -> [{lr: 0.5, batch_size: 32}] has no effect (initial "
        "configurations are queued only when the study is created)")
    only = _compare(_with("initial=[]"))
    assert only.line() == (
        "Changed since the study was created: initial [{lr: 0.1, batch_size: 64}] -> [] has "
        "no effect (initial configurations are queued only when the study is created)")


def test_refused_and_allowed_together_are_refused() -> None:
    changes = _compare(_with("stop.n_trials=40", "direction=maximize"))
    assert [c.kind for c in changes.of("refused")] == ["refused"]
    error = changes.refusal("t")
    assert error is not None and error.field == "direction"


# ------------------------------------------------------------------------------------------
# Equal values: defaults, spellings, key order, older stored configs.

SAME = [
    ("identical", []),
    ("pruner-defaults", ["pruner={name: asha, max_resource: 9, min_resource: 1, "
                         "reduction_factor: 3, mode: stop}"]),
    ("pruner-max-epochs-in-trainer", ["pruner=asha", "trainer.max_epochs=9"]),
    ("trainer-max-epochs-also", ["trainer.max_epochs=9"]),
    ("sampler-as-mapping-vs-name", ["sampler={name: random}", "seed=0"]),
    ("data-default", ["data={name: digits}"]),
    ("data-as-name", ["data=digits"]),
    ("data-loader-defaults", ["data={name: digits, num_workers: 0, on_device: auto}"]),
    ("metric-direction", ["metric=validation_error", "direction=minimize"]),
    ("devices-defaults", ["devices={per_trial: 1, trials_per_device: 1, accelerator: auto}"]),
    ("stop-defaults", ["stop={n_trials: 6, grace: 0, max_retries: 2}"]),
    ("stop-float", ["stop={n_trials: 6, grace: 0.0}"]),
    ("checkpoint-default", ["checkpoint={every: auto}"]),
    ("run-dir-default", ["run_dir=runs"]),
    ("precision-int", ["trainer.precision=32"]),
    ("precision-short", ["trainer.precision='32'"]),
    ("precision-long", ["trainer.precision=32-true"]),
    ("lightning-defaults", ["trainer={accumulate_grad_batches: 1, limit_train_batches: 1.0, "
                            "limit_val_batches: 1.0, check_val_every_n_epoch: 1, "
                            "log_every_n_steps: 50, deterministic: false, "
                            "gradient_clip_val: 0}"]),
    ("space-int-bound", ["space.lr={loguniform: [0.01, 1]}"]),
    ("space-key-order", ["space={batch_size: {randint: [32, 128]}, "
                         "lr: {loguniform: [0.01, 1.0]}}"]),
    ("initial-key-order", ["initial=[{batch_size: 64, lr: 0.1}]"]),
    ("storage-elsewhere", ["storage=postgresql://other:pw@replica/studies"]),
]
#: The same for a LightningCLI project (on CLI_BASE).
CLI_SAME = [
    ("identical", []),
    ("config-as-str", ["config=config.yaml"]),
    ("config-spelled-with-a-dot", ["config=./config.yaml"]),
    ("trainer-max-epochs-also", ["trainer.max_epochs=9"]),
    ("pruner-defaults", ["pruner={name: asha, max_resource: 9, min_resource: 1, "
                         "reduction_factor: 3, mode: stop}"]),
    ("sections-key-order", ["optimizer={init_args: {lr: 0.1}, class_path: torch.optim.SGD}"]),
    ("number-spelling", ["optimizer.init_args.lr=1.0e-1", "trainer.gradient_clip_val=1"]),
    ("dotted-space-key-order", ["space={data.batch_size: {choice: [32, 64]}, "
                                "model.init_args.dropout: {uniform: [0.0, 0.5]}}"]),
]


@pytest.mark.parametrize("overrides", [s[1] for s in SAME], ids=[s[0] for s in SAME])
def test_a_default_written_out_or_another_spelling_is_no_change(overrides: list[str]) -> None:
    changes = _compare(_with(*overrides))
    assert changes.items == () and changes.refusal("t") is None and changes.line() is None


@pytest.mark.parametrize("overrides", [s[1] for s in CLI_SAME], ids=[s[0] for s in CLI_SAME])
def test_a_cli_config_written_another_way_is_no_change(overrides: list[str]) -> None:
    changes = _compare(_with(*overrides, base=CLI_BASE), CLI_BASE)
    assert changes.items == () and changes.refusal("t") is None and changes.line() is None


def test_the_default_cli_left_out_equals_it_written_out() -> None:
    base = {k: v for k, v in CLI_BASE.items() if k != "cli"}
    changes = _compare(_with("cli=lightning.pytorch.cli:LightningCLI", base=base), base)
    assert changes.items == ()


def test_a_cli_config_resolves_to_its_entry_files_and_flattened_sections() -> None:
    """No registry names and no Lightning defaults: the project's files may set any of them."""
    fields = changes_module._fields(_stored(CLI_BASE))
    assert fields["cli"] == "main:cli_main" and fields["config"] == ["config.yaml"]
    assert {k: v for k, v in fields.items()
            if k.startswith(("model.", "optimizer.", "trainer.", "data."))} == {
        "model.class_path": "shop.Model", "model.init_args.hidden_dim": 64,
        "optimizer.class_path": "torch.optim.SGD", "optimizer.init_args.lr": 0.1,
        "trainer.gradient_clip_val": 1.0, "trainer.max_epochs": 9,
        "trainer.logger": fields["trainer.logger"],
    }
    assert "model.name" not in fields and "data.name" not in fields
    assert "trainer.precision" not in fields  # no TRAINER_DEFAULTS in CLI mode
    assert fields["space.model.init_args.dropout"] == {"uniform": [0.0, 0.5]}


def test_a_switch_between_registry_and_cli_is_refused() -> None:
    changes = _compare(CLI_BASE, BASE)
    refused = {c.field for c in changes.of("refused")}
    assert {"cli", "config", "model.name", "model.class_path", "metric"} <= refused
    assert changes.refusal("t") is not None


def test_flatten() -> None:
    flatten = changes_module._flatten
    assert flatten({}) == {}
    assert flatten({"model": {"class_path": "m.C", "init_args": {"lr": 1}},
                    "optimizer": "SGD"}) == {
        "model.class_path": "m.C", "model.init_args.lr": 1, "optimizer": "SGD"}
    # Deep mappings all the way down; lists, empty mappings and scalars whole.
    assert flatten({"model": {"init_args": {"net": {"init_args": {"width": 8}},
                                            "layers": [{"a": 1}, 2], "extra": {},
                                            "flag": None}}}) == {
        "model.init_args.net.init_args.width": 8, "model.init_args.layers": [{"a": 1}, 2],
        "model.init_args.extra": {}, "model.init_args.flag": None}
    assert flatten({"trainer": {"callbacks": []}}) == {"trainer.callbacks": []}
    assert flatten({"a": 1}, "x.") == {"x.a": 1}
    sections = {"model": {"init_args": {"lr": 1}}}
    flatten(sections)
    assert sections == {"model": {"init_args": {"lr": 1}}}  # not changed


def test_the_default_logger_left_out_equals_it_written_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("lightning_hpo.launch.config._parse._tensorboard_available", lambda: True)
    assert _compare(_with("trainer.logger=tensorboard")).items == ()
    assert [str(c) for c in _compare(_with("trainer.logger=csv")).items] == [
        "trainer.logger tensorboard -> csv"]


def test_a_stored_tensorboard_logger_is_read_where_tensorboard_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A study created on a machine with tensorboard, resumed on one without (csv)."""
    monkeypatch.setattr("lightning_hpo.launch.config._parse._tensorboard_available", lambda: True)
    stored = _stored(_with("trainer.logger=tensorboard"))
    monkeypatch.setattr("lightning_hpo.launch.config._parse._tensorboard_available", lambda: False)
    changes = compare_configs(stored, _stored(BASE))
    assert [str(c) for c in changes.items] == ["trainer.logger tensorboard -> csv"]


def test_int_and_float_differ_where_lightning_reads_them_differently() -> None:
    """limit_train_batches: 1 is one batch, 1.0 all of them; elsewhere 1 == 1.0."""
    changes = _compare(_with("trainer.limit_train_batches=1"))
    assert [str(c) for c in changes.items] == ["trainer.limit_train_batches 1.0 -> 1"]
    assert _compare(_with("model.momentum=1"), _with("model.momentum=1.0")).items == ()


def test_a_bool_is_not_a_number_and_nested_values_compare_deeply() -> None:
    flag = _compare(_with("model.flag=1"), _with("model.flag=true"))
    assert [str(c) for c in flag.items] == ["model.flag true -> 1"]
    nested = _with("model.net={a: {b: [1, 2, {c: x}]}, d: null}")
    reordered = _with("model.net={d: null, a: {b: [1.0, 2, {c: x}]}}")
    assert _compare(reordered, nested).items == ()
    inner = _compare(_with("model.net={a: {b: [1, 2, {c: y}]}, d: null}"), nested)
    assert [c.field for c in inner.items] == ["model.net"]
    assert show(inner.items[0].new) == "{a: {b: [1, 2, {c: y}]}, d: null}"
    lists = _compare(_with("space.act={choice: [relu, tanh]}"),
                     _with("space.act={choice: [relu, sigmoid]}"))
    assert [str(c) for c in lists.items] == [
        "space.act {choice: [relu, sigmoid]} -> {choice: [relu, tanh]}"]


OLD_STORED = {  # what an earlier launcher stored: the config as written, nothing resolved
    "study": "t", "storage": "runs/t.journal", "model": {"name": "lenet"},
    "space": {"lr": {"loguniform": [0.01, 1.0]}}, "pruner": {"name": "asha", "max_resource": 9},
    "stop": {"n_trials": 6},
}


def test_an_older_stored_config_is_read_with_the_defaults_of_its_missing_keys() -> None:
    new = stored_config(parse_config(apply_overrides(OLD_STORED, [
        "metric=validation_error", "direction=minimize", "trainer.max_epochs=9",
        "checkpoint.every=auto", "devices.per_trial=1", "stop.max_retries=2", "data=digits",
        "sampler=random"])))
    assert compare_configs(OLD_STORED, new).items == ()
    pruned = {k: v for k, v in OLD_STORED.items() if k not in ("storage",)}
    assert compare_configs(pruned, new).items == ()
    more = stored_config(parse_config(apply_overrides(OLD_STORED, ["pruner.mode=promotion",
                                                                   "stop.n_trials=8"])))
    changes = compare_configs(OLD_STORED, more)
    assert [(str(c), c.kind) for c in changes.items] == [
        ("pruner.mode stop -> promotion", "refused"), ("stop.n_trials 6 -> 8", "allowed")]


def test_a_stored_config_that_no_longer_parses_is_not_compared_and_says_so() -> None:
    stored = {**_stored(BASE), "colour": "blue"}  # a key an earlier version had
    changes = compare_configs(stored, _stored(_with("pruner.name=sync_sh")))
    assert changes.items == () and changes.refusal("t") is None
    assert changes.unreadable == "colour: unknown field; allowed: " + ", ".join(sorted(TOP_LEVEL))
    line = changes.line()
    assert line is not None and line.startswith(
        "Changed since the study was created: the study's stored config was not compared "
        "(colour: unknown field")


def test_the_storage_is_never_compared_nor_shown() -> None:
    assert classify("storage") == classify("study") == "identity"
    changes = _compare(_with("storage=runs/t.journal", "pruner.name=sync_sh", "stop.n_trials=9"))
    assert all(not c.field.startswith(("storage", "study")) for c in changes.items)
    text = f"{changes.refusal('t')} {changes.line()}"
    assert SECRET not in text and "postgresql" not in text


def test_show_writes_values_as_a_config_does() -> None:
    assert [show(v) for v in (MISSING, None, True, 3, 0.5, "asha", "a b", "1", [1, "x"],
                              {"loguniform": [0.01, 1.0]})] == [
        "(not set)", "null", "true", "3", "0.5", "asha", "a b", "'1'", "[1, x]",
        "{loguniform: [0.01, 1.0]}"]
    assert show({"k": "x\ny"}) == '{"k": "x\\ny"}'  # one line, still YAML
    assert Change("space.lr", {"uniform": [0, 1]}, MISSING).restore() == (
        "--set 'space.lr={uniform: [0, 1]}'")
    assert Change("model.x", MISSING, 1).restore() is None


# ------------------------------------------------------------------------------------------
# open_study: the refusal comes before anything is written (in-process, a journal file).


def _journal_cfg(tmp_path: Path, *overrides: str) -> Any:
    raw = apply_overrides(BASE, [f"storage={tmp_path / 't.journal'}",
                                 f"run_dir={tmp_path / 'runs'}", "stop.n_trials=3",
                                 *overrides])
    return parse_config(raw)


def test_open_study_refuses_an_edited_config_and_writes_nothing(tmp_path: Path) -> None:
    cfg = _journal_cfg(tmp_path)
    study, created = open_study(cfg, open_storage(cfg.storage))
    assert created and json.loads(study.user_attrs[CONFIG_ATTR])["pruner"]["name"] == "asha"
    journal = tmp_path / "t.journal"
    before, files = journal.read_bytes(), sorted(tmp_path.iterdir())
    edited = _journal_cfg(tmp_path, "pruner.name=sync_sh", "stop.n_trials=5")
    with pytest.raises(ConfigError) as info:
        open_study(edited, open_storage(edited.storage))
    assert info.value.field == "pruner.name" and "asha -> sync_sh" in info.value.message
    with pytest.raises(ConfigError, match="asha -> sync_sh"):  # --check's reading, the same
        existing_changes(edited, open_storage(edited.storage))
    assert journal.read_bytes() == before and sorted(tmp_path.iterdir()) == files
    # A worker's open (queue=False) does not compare: its config is the launcher's.
    open_study(edited, open_storage(edited.storage), queue=False)
    assert journal.read_bytes() == before


def test_open_study_goes_on_with_a_larger_budget_and_keeps_the_created_config(
    tmp_path: Path,
) -> None:
    cfg = _journal_cfg(tmp_path)
    open_study(cfg, open_storage(cfg.storage))
    more = _journal_cfg(tmp_path, "stop.n_trials=5")
    assert existing_changes(more, open_storage(more.storage)) is not None
    study, created = open_study(more, open_storage(more.storage))
    assert not created and len(study.trials) == 5
    assert json.loads(study.user_attrs[CONFIG_ATTR])["stop"] == {"n_trials": 3}  # as created
    assert config_changes(study, more).line() == (
        "Changed since the study was created: stop.n_trials 3 -> 5")


def test_a_study_without_a_stored_config_is_not_compared(tmp_path: Path) -> None:
    import optuna

    cfg = _journal_cfg(tmp_path)
    study = optuna.create_study(study_name="t", storage=open_storage(cfg.storage))
    assert config_changes(study, cfg) == Changes()
    study.set_user_attr(CONFIG_ATTR, "not json")
    assert config_changes(study, cfg) == Changes()
    assert existing_changes(_journal_cfg(tmp_path, "study=other"),
                            open_storage(cfg.storage)) is None  # no such study


@pytest.mark.parametrize("stopped_after", ["create_study", "stored_config"])
def test_a_study_its_creator_left_without_a_queue_is_queued_as_new_with_its_initial(
    tmp_path: Path, stopped_after: str
) -> None:
    """Ctrl-C between creating the study and writing its queue (one write, all or none) left
    it without trials. The next run topped the budget up with empty tickets and never queued
    ``initial``, and a study stopped before its config was stored was never compared again."""
    import optuna

    cfg = _journal_cfg(tmp_path)
    study = optuna.create_study(study_name="t", storage=open_storage(cfg.storage))
    if stopped_after == "stored_config":
        study.set_user_attr(CONFIG_ATTR, json.dumps(stored_config(cfg), default=str))
    study, created = open_study(cfg, open_storage(cfg.storage))
    assert not created
    assert [t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)] == [
        {"lr": 0.1, "batch_size": 64}, {}, {}]
    assert json.loads(study.user_attrs[CONFIG_ATTR]) == stored_config(cfg)
    # Queued once: the next run finds trials and adds nothing.
    again, _ = open_study(cfg, open_storage(cfg.storage))
    assert len(again.get_trials(deepcopy=False)) == 3
    with pytest.raises(ConfigError, match="asha -> sync_sh"):  # compared from now on
        open_study(_journal_cfg(tmp_path, "pruner.name=sync_sh"), open_storage(cfg.storage))


def test_a_study_another_program_made_under_the_name_is_refused_untouched(
    tmp_path: Path,
) -> None:
    """A plain Optuna study of the same name: the launcher ran 0 trials and named its best
    ("Best validation_error: 0.1456 ... with x=0.146"), and with a larger n_trials
    would have added its own to it."""
    import optuna

    cfg = _journal_cfg(tmp_path)
    study = optuna.create_study(study_name="t", storage=open_storage(cfg.storage))
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=3)
    journal = tmp_path / "t.journal"
    before = journal.read_bytes()
    for attempt in (lambda: open_study(cfg, open_storage(cfg.storage)),
                    lambda: existing_changes(cfg, open_storage(cfg.storage))):  # --check
        with pytest.raises(ConfigError) as info:
            attempt()
        assert str(info.value) == (
            f"study: 't' in {journal} holds 3 trial(s) the launcher did not make (no stored "
            "config, no launcher record on its trials): name another study (--set study=NEW) "
            "or storage")
    assert journal.read_bytes() == before
    # An empty one (nothing to mix with) is taken.
    optuna.create_study(study_name="e", storage=open_storage(cfg.storage))
    assert open_study(_journal_cfg(tmp_path, "study=e"), open_storage(cfg.storage))[1] is False
