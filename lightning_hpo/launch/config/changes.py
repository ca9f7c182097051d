"""What changed in a study's config since the study was created, and whether it may go on.

An edited config on an existing study would mix two studies in one. The study keeps the config
it was created with (:func:`~lightning_hpo.launch.study.creation.stored_config`, its
:data:`~lightning_hpo.schema.CONFIG_ATTR`); :func:`compare_configs` compares it with the new one
field by field, both with their defaults filled in. :data:`FIELDS` classifies every field:
``refused`` (what a trial is, or how trials are sampled or compared: the launcher refuses with
one line, :meth:`Changes.refusal`), ``allowed`` (budget, devices, logs, speed: the study goes on
and :meth:`Changes.line` says what changed), ``ignored`` (``initial``, enqueued only at
creation) and ``identity`` (``study`` and ``storage``, never compared). Pure: no storage, no
files, no torch.

Example::

    >>> old = {"study": "s", "model": {"name": "lenet"}, "trainer": {"max_epochs": 9},
    ...        "space": {"lr": {"loguniform": [0.01, 1.0]}}, "pruner": {"name": "asha"},
    ...        "stop": {"n_trials": 20}}
    >>> new = {**old, "stop": {"n_trials": 40}, "pruner": {"name": "asha", "mode": "stop",
    ...        "max_resource": 9, "reduction_factor": 3}}
    >>> compare_configs(old, new).line()
    'Changed since the study was created: stop.n_trials 20 -> 40'
    >>> print(compare_configs(old, {**new, "pruner": "sync_sh"}).refusal("s"))
    ... # doctest: +NORMALIZE_WHITESPACE
    pruner.name: study 's' was created with other settings: pruner.name asha -> sync_sh; this
    change would mix two studies in one (what a trial trains, or how trials are sampled or
    compared); to go on, name a new study (--set study=NEW) or give the old value
    (--set pruner.name=asha)
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config._parse import default_logger, parse_config
from lightning_hpo.launch.config.cli_spec import flatten as _flatten
from lightning_hpo.launch.config.space import to_yaml

__all__ = ["FIELDS", "MISSING", "Change", "Changes", "classify", "compare_configs"]

Kind = Literal["refused", "allowed", "ignored", "identity"]

#: Every config field and what a change of it does to an existing study, in the config's order
#: (:data:`~lightning_hpo.launch.config.TOP_LEVEL`, the order changes are named in). A dotted
#: name, or ``section.*`` for the keys of an open section (the model's and data module's
#: arguments, the search space, a sampler class's arguments);
#: tests/unit/launch/config/test_changes.py checks that every field the config grammar knows
#: is here.
FIELDS: dict[str, Kind] = {
    # Which study it is: never compared.
    "study": "identity",  # another name is another study
    "storage": "identity",  # may hold a password; machines may reach one study by other URLs
    # Where logs and checkpoints go (a paused trial's checkpoint path is in the study).
    "run_dir": "allowed",
    # A LightningCLI project: another entry point or other config files build other trials
    # (the files' content is the project's; edit them only with a new study).
    "cli": "refused",
    "config": "refused",
    # What a trial trains: another model or model argument is another objective.
    "model.name": "refused",
    "model.*": "refused",
    # ... except whether the built-in models' training steps are replayed from a CUDA graph:
    # the same steps, launched from the host in fewer calls (lightning_hpo.builtin._cuda_graph).
    "model.cuda_graphs": "allowed",
    # ... and in which memory layout they train (channels-last: the same values up to the
    # order of float sums; lightning_hpo.builtin._memory_format).
    "model.channels_last": "allowed",
    # What a trial trains on: another data set, split, batch size or seed ...
    "data.name": "refused",
    "data.*": "refused",
    # ... except the data module keys that only decide how fast the same batches arrive
    # (lightning_hpo.builtin.tensor_data.TensorDataModule: loader processes, tensors on the device)
    # or where the same files are found (FashionMNISTDataModule: machines of one study may keep
    # them in different folders; with download the same files are fetched).
    "data.num_workers": "allowed",
    "data.on_device": "allowed",
    "data.root": "allowed",
    "data.download": "allowed",
    # A LightningCLI config's optimizer and scheduler sections: what an epoch trains.
    "optimizer.*": "refused",
    "lr_scheduler.*": "refused",
    # What is compared, and in which direction: every recorded value would change meaning.
    "metric": "refused",
    "direction": "refused",
    # What is sampled: the distributions the sampler draws from (constants are model arguments).
    "space.*": "refused",
    # Enqueued once, when the study is created (launch/study.py): a change has no effect.
    "initial": "ignored",
    # How configurations are proposed: another sampler, its arguments or seed continue another
    # sequence. The top-level seed also seeds each trial's training (seed + trial number).
    "sampler.name": "refused",
    "sampler.class": "refused",
    "sampler.seed": "refused",
    "sampler.*": "refused",
    "seed": "refused",
    # The multi-fidelity rule: rungs, who continues, pauses, promotions. Two rules in one study
    # mix two schedules (every key, including the pausing schedules' prefact/resume/finish_best).
    "pruner.name": "refused",
    "pruner.min_resource": "refused",
    "pruner.max_resource": "refused",
    "pruner.reduction_factor": "refused",
    "pruner.mode": "refused",
    "pruner.prefact": "refused",
    "pruner.resume": "refused",
    "pruner.finish_best": "refused",
    # The devices a trial runs on, and how many trials share one.
    "devices.per_trial": "allowed",
    "devices.trials_per_device": "allowed",
    "devices.accelerator": "allowed",
    "devices.count": "allowed",
    # The budget: more trials or time, another failure limit, grace or retry count.
    "stop.n_trials": "allowed",
    "stop.max_wallclock_time": "allowed",
    "stop.max_failed_trials": "allowed",
    "stop.grace": "allowed",
    "stop.max_retries": "allowed",
    # Training arguments that change what an epoch trains or reports, so values at one epoch
    # would not be comparable (the pruner compares values epoch by epoch).
    "trainer.max_epochs": "refused",
    "trainer.precision": "refused",
    "trainer.gradient_clip_val": "refused",
    "trainer.accumulate_grad_batches": "refused",
    "trainer.limit_train_batches": "refused",
    "trainer.limit_val_batches": "refused",
    "trainer.check_val_every_n_epoch": "refused",  # which epochs report a value at all
    # Training arguments that change neither: deterministic kernels (bit-for-bit reruns, the
    # same training), logging cadence (our models log once an epoch) and the logger.
    "trainer.deterministic": "allowed",
    "trainer.log_every_n_steps": "allowed",
    "trainer.logger": "allowed",
    # Any other Trainer argument (callbacks included): it may change what an epoch trains.
    "trainer.*": "refused",
    # How often resume checkpoints are written, how many paused trials keep one.
    "checkpoint.every": "allowed",
    "checkpoint.max_paused": "allowed",
    # How a lost machine is found.
    "heartbeat.interval": "allowed",
    "heartbeat.grace_period": "allowed",
}

_RANK = {field: rank for rank, field in enumerate(FIELDS)}

#: What Lightning's Trainer uses for a ``trainer.*`` key the config leaves out (Lightning 2.x),
#: so that leaving it out equals giving it.
TRAINER_DEFAULTS: dict[str, Any] = {
    "precision": "32-true",
    "gradient_clip_val": 0.0,  # Lightning: None or 0 does not clip
    "accumulate_grad_batches": 1,
    "deterministic": False,
    "limit_train_batches": 1.0,
    "limit_val_batches": 1.0,
    "check_val_every_n_epoch": 1,
    "log_every_n_steps": 50,
    # Lightning's defaults of other arguments a config may write out
    "num_sanity_val_steps": 2,
    "val_check_interval": 1.0,  # Lightning: None is every epoch
    "gradient_clip_algorithm": "norm",  # Lightning: None is norm
    "detect_anomaly": False,
    "inference_mode": True,
    "sync_batchnorm": False,
    "use_distributed_sampler": True,
    "reload_dataloaders_every_n_epochs": 0,
}
#: The defaults of the data keys of :data:`FIELDS` that every built-in data module takes.
DATA_DEFAULTS: dict[str, Any] = {"num_workers": 0, "on_device": "auto"}
#: The arguments the launcher gives a built-in model (a registry name) where the config does
#: not: its trials run only the launcher's own callbacks, so a training step replayed from a
#: CUDA graph (where one applies; silent elsewhere) cannot miss a change made to the model, and
#: no hook of the user's sees a convolution's output in the channels-last layout (on a CPU).
LAUNCHER_MODEL_ARGS: dict[str, Any] = {"cuda_graphs": "auto", "channels_last": "auto"}
#: The constructor defaults of the built-in models and data modules, by registry name, as the
#: launcher builds them (:data:`LAUNCHER_MODEL_ARGS` over the classes' own). Without torch: the
#: launcher compares configs before any worker imported it;
#: tests/unit/launch/config/test_changes.py checks them against the classes. An argument
#: given at its default equals leaving it out; a class named by its path
#: (``package.module:Class``) is compared as written.
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "lenet": {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "num_classes": 10,
              "activation": "relu", "width": 1.0, "measure_latency": False,
              **LAUNCHER_MODEL_ARGS},
    "dropout_mlp": {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "num_classes": 10,
                    "num_inputs": 784, "num_hiddens_1": 256, "num_hiddens_2": 256,
                    "dropout_1": 0.5, "dropout_2": 0.5, "measure_latency": False,
                    **LAUNCHER_MODEL_ARGS},
}
DATA_MODULE_DEFAULTS: dict[str, dict[str, Any]] = {
    "digits": {"batch_size": 64, "val_fraction": 0.2, "seed": 0, **DATA_DEFAULTS},
    "fashion_mnist": {"root": "data", "batch_size": 64, "download": False, **DATA_DEFAULTS},
}
#: Lightning's short precision names, as its Trainer reads them.
_PRECISIONS = {"32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed", "64": "64-true"}
#: Fields whose int and float mean different things (Lightning: 4 batches, or 0.25 of them).
_TYPED = ("trainer.limit_train_batches", "trainer.limit_val_batches")


class _Missing:
    """A key one side does not have (an argument of an open section given on one side only)."""

    def __repr__(self) -> str:
        return "MISSING"


#: The value of a key that one config does not have.
MISSING: Any = _Missing()


def classify(field: str) -> Kind:
    """The kind of a dotted field: its own entry in :data:`FIELDS`, else its section's ``.*``.

    A field in neither is refused: a field nobody classified is not known to be harmless.

    Example::

        >>> classify("pruner.mode"), classify("model.dropout_1"), classify("stop.n_trials")
        ('refused', 'refused', 'allowed')
    """
    if field in FIELDS:
        return FIELDS[field]
    return FIELDS.get(f"{field.partition('.')[0]}.*", "refused")


@dataclass(frozen=True)
class Change:
    """One field that differs: its old and new value (:data:`MISSING` where a side lacks it)."""

    field: str
    old: Any
    new: Any

    @property
    def kind(self) -> Kind:
        """What the change does to the study (:func:`classify`)."""
        return classify(self.field)

    def __str__(self) -> str:
        return f"{self.field} {show(self.old)} -> {show(self.new)}"

    def restore(self) -> str | None:
        """``--set key=old``, which gives the old value back on the command line; None where
        the study had no such key (it is left out instead)."""
        if self.old is MISSING:
            return None
        return f"--set {shlex.quote(f'{self.field}={show(self.old)}')}"


@dataclass(frozen=True)
class Changes:
    """Every field that differs between a study's stored config and a new one."""

    items: tuple[Change, ...] = ()
    #: Why the stored config could not be compared (it no longer parses); None when it was.
    unreadable: str | None = None

    def of(self, kind: Kind) -> list[Change]:
        """The changes of one kind, in the config's order."""
        return [change for change in self.items if change.kind == kind]

    def refusal(self, study: str) -> ConfigError | None:
        """The one-line error for the refused changes (None when there is none): every refused
        field, old -> new, and how to go on (a new study, or the old values)."""
        refused = self.of("refused")
        if not refused:
            return None
        many = len(refused) > 1
        listed = ", ".join(str(change) for change in refused)
        restore = " ".join(filter(None, (change.restore() for change in refused)))
        extra = ", ".join(change.field for change in refused if change.old is MISSING)
        if extra:
            restore += ("; " if restore else "") + f"leave out {extra}"
        return ConfigError(
            refused[0].field,
            f"study '{study}' was created with other settings: {listed}; "
            f"{'these changes' if many else 'this change'} would mix two studies in one (what "
            "a trial trains, or how trials are sampled or compared); to go on, name a new study "
            f"(--set study=NEW) or give the old value{'s' if many else ''} ({restore})",
        )

    def line(self) -> str | None:
        """One line saying what changed that the study goes on with; None when nothing did."""
        allowed, ignored = self.of("allowed"), self.of("ignored")
        words = ", ".join(str(change) for change in allowed)
        if ignored:
            noted = ", ".join(str(change) for change in ignored)
            words += ("; " if words else "") + (
                f"{noted} has no effect (initial configurations are queued only when the "
                "study is created)"
            )
        if self.unreadable is not None:
            words += ("; " if words else "") + (
                f"the study's stored config was not compared ({self.unreadable})"
            )
        return f"Changed since the study was created: {words}" if words else None


def compare_configs(stored: Mapping[str, Any], new: Mapping[str, Any]) -> Changes:
    """Every field that differs between a study's stored config and a new config.

    Args:
        stored: the config the study was created with, as
            :func:`~lightning_hpo.launch.study.creation.stored_config` wrote it (an older version's
            may lack keys: they are read with their defaults).
        new: the new config in the same form (``stored_config(cfg)``).

    Returns:
        The changes; ``unreadable`` says why, when the stored config no longer parses (then
        only the new one is known and nothing is compared).

    Raises:
        ConfigError: the new config does not parse (it was parsed once already: not expected).
    """
    try:
        old_fields = _fields(stored)
    except ConfigError as error:
        return Changes((), unreadable=str(error))
    new_fields = _fields(new)
    for fields, other in ((old_fields, new_fields), (new_fields, old_fields)):
        for field in set(other) - set(fields):  # given on one side only: its default, if known
            default = _class_default(field, fields)
            if default is not MISSING:
                fields[field] = default
    changes = [
        Change(field, old_fields.get(field, MISSING), new_fields.get(field, MISSING))
        for field in _ordered(old_fields, new_fields)
        if not _same(field, old_fields.get(field, MISSING), new_fields.get(field, MISSING))
    ]
    changed = {change.field for change in changes}
    if {"pruner.max_resource", "trainer.max_epochs"} <= changed:  # one number, two names:
        none = new_fields["pruner.name"] == "none"  # the one the new config sets
        drop = "pruner.max_resource" if none else "trainer.max_epochs"
        changes = [change for change in changes if change.field != drop]
    seed = _seed_field(new)  # named where the new config gives it (one resolved seed)
    changes = [dataclasses.replace(c, field=seed) if c.field == "seed" else c for c in changes]
    return Changes(tuple(changes))


def _class_default(field: str, fields: Mapping[str, Any]) -> Any:
    """The built-in model's or data module's default for ``model.<key>`` / ``data.<key>``
    (:data:`MODEL_DEFAULTS`, :data:`DATA_MODULE_DEFAULTS`) in the config of ``fields``, where
    the key is not searched there; else :data:`MISSING`.

    Example::

        >>> _class_default("data.val_fraction", {"data.name": "digits"})
        0.2
        >>> _class_default("model.lr", {"model.name": "lenet", "space.lr": {"uniform": [0, 1]}})
        MISSING
    """
    section, _, key = field.partition(".")
    tables = {"model": MODEL_DEFAULTS, "data": DATA_MODULE_DEFAULTS}
    if section not in tables or f"space.{key}" in fields:
        return MISSING
    name = fields.get(f"{section}.name")
    return tables[section].get(name, {}).get(key, MISSING) if isinstance(name, str) else MISSING


def show(value: Any) -> str:
    """A value as it is written in a config (YAML flow style): ``asha``, ``1.0``, ``null``,
    ``{loguniform: [0.01, 1.0]}``; ``(not set)`` for :data:`MISSING`.

    Example::

        >>> show({"loguniform": [0.01, 1.0]}), show("asha"), show(None), show(MISSING)
        ('{loguniform: [0.01, 1.0]}', 'asha', 'null', '(not set)')
    """
    if value is MISSING:
        return "(not set)"
    text = yaml.safe_dump([value], default_flow_style=True, sort_keys=False, width=1 << 30)
    text = text.strip()[1:-1]
    if "\n" in text:  # a string with a line break: JSON's escapes keep it one line (and YAML)
        return json.dumps(value, default=str)
    return str(text)


# ------------------------------------------------------------------------------------------
# Flattening a config into its fields, defaults filled in.
# ------------------------------------------------------------------------------------------
def _fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``{dotted field: resolved value}`` of a config mapping (``trainer.logger`` resolved
    here: parsing refuses ``tensorboard`` where the package is missing, and a stored config may
    come from a machine that has it)."""
    raw = dict(raw)
    trainer = raw.get("trainer")
    logger = None
    if isinstance(trainer, Mapping):
        trainer = dict(trainer)
        logger = trainer.pop("logger", None)
        raw["trainer"] = trainer
    cfg = parse_config(raw)
    trainer_args = {**TRAINER_DEFAULTS, **cfg.trainer} if cfg.cli is None else {}
    if "precision" in trainer_args:
        trainer_args["precision"] = _PRECISIONS.get(str(trainer_args["precision"]),
                                                    str(trainer_args["precision"]))
    heartbeat = cfg.heartbeat
    if cfg.cli is not None:
        # ./config.yaml and config.yaml are one file (relative to where the launcher runs)
        project = {"cli": cfg.cli.entry, "config": [os.path.normpath(f) for f in cfg.cli.files],
                   **_flatten(cfg.cli.sections)}
    else:
        project = {
            "model.name": cfg.model,
            **{f"model.{key}": value for key, value in cfg.model_args.items()},
            "data.name": cfg.data,
            **{f"data.{key}": value for key, value in {**DATA_DEFAULTS, **cfg.data_args}.items()},
        }
    return {
        "metric": [m for m, _ in cfg.objectives] if cfg.several else cfg.metric,
        "direction": [d for _, d in cfg.objectives] if cfg.several else cfg.direction,
        **{f"space.{name}": value for name, value in to_yaml(cfg.space).items()},
        "initial": cfg.initial,
        "seed": cfg.seed,  # sampler.seed, else the top-level one: renamed by compare_configs
        "sampler.class" if ":" in cfg.sampler else "sampler.name": cfg.sampler,
        **{f"sampler.{key}": value for key, value in cfg.sampler_args.items()},
        **project,
        # pruner none trains max_epochs: its max_resource is that too, so that a change between
        # none and another pruner is only the name's
        **_section("pruner", dataclasses.replace(
            cfg.pruner, max_resource=cfg.pruner.max_resource or cfg.max_epochs)),
        "trainer.max_epochs": cfg.max_epochs,
        **{f"trainer.{key}": value for key, value in trainer_args.items()},
        "trainer.logger": default_logger() if logger is None else logger,
        **_section("devices", cfg.devices),
        **_section("stop", cfg.stop),
        "run_dir": cfg.run_dir,
        **_section("checkpoint", cfg.checkpoint),
        "heartbeat.interval": None if heartbeat is None else heartbeat.interval,
        "heartbeat.grace_period": None if heartbeat is None else heartbeat.grace_period,
    }


def _seed_field(raw: Mapping[str, Any]) -> str:
    """Where the config gives its seed: ``sampler.seed`` wins over the top-level ``seed``."""
    sampler = raw.get("sampler")
    return "sampler.seed" if isinstance(sampler, Mapping) and "seed" in sampler else "seed"


def _section(name: str, spec: Any) -> dict[str, Any]:
    return {f"{name}.{key}": value for key, value in dataclasses.asdict(spec).items()}


def _ordered(*sides: Mapping[str, Any]) -> list[str]:
    """The fields of both sides, each once, in the order of :data:`FIELDS` (then as found)."""
    seen: dict[str, None] = {}
    for side in sides:
        seen.update(dict.fromkeys(side))
    return sorted(seen, key=lambda field: _RANK.get(field, _RANK.get(
        f"{field.partition('.')[0]}.*", len(_RANK))))


def _same(field: str, old: Any, new: Any) -> bool:
    if field in _TYPED and type(old) is not type(new):
        return False
    return _canonical(old) == _canonical(new)


def _canonical(value: Any) -> Any:
    """A value to compare: numbers by value (``1 == 1.0``), a bool never equal to a number,
    mappings regardless of key order."""
    if value is MISSING or value is None or isinstance(value, str):
        return ("value", value)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, Mapping):
        return ("mapping", sorted((repr(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("list", [_canonical(item) for item in value])
    return ("other", repr(value))
