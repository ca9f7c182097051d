"""The launcher's config file: load, override, validate, fill defaults.

A config is a small YAML file (see ``configs/quickstart.yaml``)::

    study: quickstart                   # Optuna study name (letters, digits, . _ -)
    storage: runs/quickstart.journal    # journal file path, or any Optuna RDB URL
    model: {name: lenet}                # registry name or "package.module:Class", + fixed args
    data: {name: digits}                # registry name, + fixed args
    metric: validation_error           # or a list, one per objective: [validation_error,
    direction: minimize                 #   parameters] with direction: [minimize, minimize]
    space:
      lr: {loguniform: [0.01, 1.0]}
      batch_size: {randint: [32, 256]}
    initial: [{lr: 0.1, batch_size: 128}]
    sampler: random                     # random | tpe | gp, or {name: tpe, seed: 0}, or
                                        # {class: "package.module:Class", <its args>...}
    pruner: {name: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
                                        # + mode: stop | promotion (asha, hyperband);
                                        # prefact, resume (sync_*); finish_best: true
                                        # (promotion, sync_*): see PrunerSpec
    devices: {per_trial: 1, trials_per_device: 1}
    stop: {n_trials: 20, max_wallclock_time: 600}
    trainer: {logger: tensorboard}      # tensorboard | csv (default: tensorboard if installed),
                                        # + any Trainer argument the launcher does not own

A LightningCLI project is tuned from its own config instead of ``model``/``data`` names::

    cli: main:cli_main                  # the project's entry point (default: LightningCLI)
    config: [config.yaml]               # the files `python main.py fit --config` takes
    space: {model.hidden_dim: {randint: [16, 256]}, optimizer.init_args.lr: ...}

(:mod:`lightning_hpo.launch.cli_spec`; ``model``/``data`` with a ``class_path`` do the same with
Lightning's own CLI, and ``trainer``, ``optimizer`` and ``lr_scheduler`` are then the CLI's).

Loading is :func:`load_config` (path + ``--set key.sub=value`` overrides); every problem is a
:class:`~lightning_hpo.errors.ConfigError` naming the field. Checks that need the model and data
classes (hyperparameter names, logged metrics) are in :func:`check_against_registry`, which
imports torch; checks of devices and storage belong to the launcher. Relative paths in a config
(``storage``, ``run_dir``, ``data.root``) are relative to the current folder, not to the file.

The configs of the top-level ``configs/`` folder ship inside the package (``lightning_hpo/configs/``
in an installed wheel, :data:`CONFIG_DIR`): :func:`resolve_config` finds one by its name, so
``python -m lightning_hpo.launch lenet_ddp`` works from any folder.

Example::

    >>> cfg = parse_config({"study": "demo", "model": {"name": "lenet"},
    ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}},
    ...                     "pruner": {"name": "asha", "max_resource": 9},
    ...                     "stop": {"n_trials": 20}})
    >>> cfg.max_epochs, cfg.storage, str(cfg.study_dir)
    (9, 'runs/demo.journal', 'runs/demo')
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import inspect
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lightning_hpo.errors import (
    ConfigError,
    field_choice,
    field_int,
    field_keys,
    is_finite_number,
)
from lightning_hpo.launch.cli_spec import (
    OWNED_TRAINER,
    SECTIONS,
    CliSpec,
    is_cli_config,
    parse_cli,
)
from lightning_hpo.launch.config_file import (
    CONFIG_DIR,
    DEFAULT_CONFIG,
    apply_overrides,
    read_config,
    read_yaml,
    resolve_config,
    run_dir_of,
    shipped_configs,
    study_name,
)
from lightning_hpo.launch.devices import DevicesSpec, parse_devices
from lightning_hpo.launch.space import Space, check_in_space, parse_space
from lightning_hpo.rungs import rung_levels

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler

__all__ = [
    "CONFIG_DIR",
    "DEFAULT_CONFIG",
    "CheckpointSpec",
    "Config",
    "DevicesSpec",
    "HeartbeatSpec",
    "MAX_N_TRIALS",
    "PrunerSpec",
    "StopSpec",
    "apply_overrides",
    "check_against_registry",
    "default_logger",
    "load_config",
    "parse_config",
    "read_config",
    "read_yaml",
    "resolve_config",
    "sampler_class",
    "sampler_kwargs",
    "shipped_configs",
]

SAMPLERS = ("random", "tpe", "gp")
PRUNERS = ("asha", "hyperband", "sync_sh", "sync_hyperband", "none")
#: ``pruner.mode`` of asha and hyperband: stop trials at rungs, or pause them for promotion.
MODES = ("stop", "promotion")
#: ``checkpoint.every``: when a trial's resume checkpoint is written.
CHECKPOINT_POLICIES = ("auto", "epoch", "rung")
DIRECTIONS = ("minimize", "maximize")
#: The most ``stop.n_trials`` may be. The launcher queues the whole budget (one WAITING trial
#: each) before any trial starts, Optuna deletes no trial, and a study holding more queued
#: trials than a later config's ``n_trials`` is refused: a mistyped 99999999999999999999 spent
#: minutes queueing and, stopped by Ctrl-C, left thousands behind. Measured on a 2-core machine
#: under load (Optuna 5.0.0), the queue in one write (``_optuna.enqueue_trials``): 10,000
#: trials took 0.6 s on a journal file and 40 s on SQLite (4 ms a trial, the ORM's work; and
#: reading them back took 2 s); one ``enqueue_trial`` at a time they took 0.6 ms each on a
#: journal file, and on SQLite a commit each that grows with the study (500 took 3 s, 3000
#: took 52 s). 10,000 keeps setting up within a minute on any storage, and is far beyond a
#: study of trained models; a longer study gives ``stop.max_wallclock_time`` without
#: ``n_trials`` (nothing is queued then).
MAX_N_TRIALS = 10_000
#: Trainer arguments a config may set (max_epochs comes from the pruner's max_resource).
TRAINER_KEYS: dict[str, type | tuple[type, ...]] = {
    "max_epochs": int,
    "precision": (str, int),
    "gradient_clip_val": (int, float, type(None)),  # null: no clipping
    "accumulate_grad_batches": int,
    "deterministic": (bool, str, type(None)),  # true, false, "warn" or null: ALLOWED's rule
    "limit_train_batches": (int, float),
    "limit_val_batches": (int, float),
    "check_val_every_n_epoch": (int, type(None)),  # null: validate by val_check_interval
    "log_every_n_steps": int,
}
#: ``trainer.logger``: where each trial's epochs are logged besides its ``metrics.csv`` (always
#: written): ``tensorboard`` adds a TensorBoard run per trial under ``run_dir/<study>/``.
LOGGERS = ("tensorboard", "csv")
#: The command that installs what ``trainer.logger: tensorboard`` needs.
TENSORBOARD_INSTALL = "pip install 'lightning-async-hpo[tensorboard]'"




@dataclass(frozen=True)
class PrunerSpec:
    """``pruner:``: which multi-fidelity rule, with resources in epochs.

    * ``asha`` / ``hyperband`` with ``mode: stop`` (the default): asynchronous successive
      halving as an Optuna pruner; a trial below the rung's cut stops there.
    * ``asha`` / ``hyperband`` with ``mode: promotion``: promotion-type ASHA (Li et al., MLSys
      2020, Algorithm 2): every trial pauses at each rung with a checkpoint; a free slot resumes
      the best not-yet-promoted trial in the top ``1/reduction_factor`` of the highest rung, and
      starts a new configuration only when none is promotable.
    * ``sync_sh`` / ``sync_hyperband``: synchronous successive halving (and Hyperband's brackets
      of it) in rounds of ``prefact * reduction_factor**K`` configurations; promoted
      configurations continue from their checkpoint, or retrain from scratch with
      ``resume: false`` (the textbook schedule).
    * ``none``: every trial trains ``max_epochs``.

    ``finish_best`` (``mode: promotion`` and ``sync_*`` only; default ``true``): with
    ``stop.n_trials``, a study whose configurations are all started and where no trial has
    reached ``max_resource`` trains its best paused trial of the highest rung on to it (16
    trials on rungs 1, 3, 9, 27 otherwise end with none past 9 epochs: ``floor(1 / 3) = 0``);
    ``false``: the papers' rules exactly. The wall-clock budget still stops everything.

    Example::

        pruner: {name: sync_sh, min_resource: 2, max_resource: 10, reduction_factor: 2}
        pruner: {name: asha, mode: promotion, min_resource: 1, max_resource: 27}
        pruner: {name: hyperband, mode: promotion, max_resource: 27, finish_best: false}
    """

    name: Literal["asha", "hyperband", "sync_sh", "sync_hyperband", "none"] = "asha"
    min_resource: int = 1
    max_resource: int | None = None
    reduction_factor: int = 3
    mode: Literal["stop", "promotion"] = "stop"
    prefact: int = 1  # sync_sh / sync_hyperband: configurations per round, times eta**K
    resume: bool = True  # sync_sh / sync_hyperband: continue promoted trials from a checkpoint
    finish_best: bool = True  # pausing schedules: train the best to max_resource (n_trials)

    @property
    def pauses(self) -> bool:
        """True when trials pause at rungs (a scheduler, not a pruner, decides)."""
        return self.name.startswith("sync_") or self.mode == "promotion"


@dataclass(frozen=True)
class StopSpec:
    """``stop:``: when the study ends (whichever comes first).

    ``max_retries`` is how many times a trial whose worker died (killed, out of memory, a lost
    machine) is resumed from its last checkpoint on the next free slot before it ends FAIL with
    every attempt's reason (0: end it FAIL at once).

    ``grace`` (seconds) is how long trials still running when ``max_wallclock_time`` or
    ``max_failed_trials`` ends the study may go on to their next epoch boundary; they then end
    PRUNED with their learning curve, and those still running when the grace is over are
    stopped at their next batch. 0 stops them at once.

    Example::

        stop: {n_trials: 50, max_wallclock_time: 720, grace: 60, max_retries: 2}
    """

    n_trials: int | None = None
    max_wallclock_time: float | None = None  # seconds
    max_failed_trials: int | None = None
    grace: float = 0.0  # seconds
    max_retries: int = 2  # a trial whose worker dies resumes from its checkpoint this often


@dataclass(frozen=True)
class CheckpointSpec:
    """``checkpoint:``: the resume checkpoint each trial keeps under ``run_dir``.

    ``every``: ``auto`` (default) writes one at every epoch while the first write costs under 5%
    of an epoch, else only at rungs; ``epoch`` always every epoch; ``rung`` only at rungs and at
    the end of each training segment. Across machines, put ``run_dir`` on a path every machine
    reaches.

    ``max_paused`` (``pruner.mode: promotion`` only): keep at most this many trials paused at a
    rung, each with its checkpoint on disk; beyond it the least promotable end PRUNED and their
    checkpoints are deleted. ``null`` (default): no bound, the paper's algorithm; with
    ``n_trials`` the trials that can never be promoted are pruned anyway, but with only a
    wall-clock budget every paused trial keeps its checkpoint until the study ends.

    Example::

        checkpoint: {every: rung, max_paused: 100}
    """

    every: Literal["auto", "epoch", "rung"] = "auto"
    max_paused: int | None = None


@dataclass(frozen=True)
class HeartbeatSpec:
    """``heartbeat:``: Optuna's RDB heartbeat, to find trials of a lost machine (seconds).

    A worker records a heartbeat every ``interval`` seconds while it trains; a trial whose last
    heartbeat is older than ``grace_period`` is taken to have lost its machine and is resumed
    from its checkpoint by any launcher of the study. PostgreSQL and MySQL storages only (on one
    machine a dead worker is seen at once).

    Example::

        heartbeat: {interval: 60, grace_period: 180}
    """

    interval: int = 60
    grace_period: int = 180


@dataclass(frozen=True)
class Config:
    """A validated launcher config; ``raw`` is the dict it came from (after overrides)."""

    study: str
    storage: str
    run_dir: str
    model: str
    model_args: dict[str, Any]
    data: str
    data_args: dict[str, Any]
    metric: str
    direction: Literal["minimize", "maximize"]
    space: Space
    initial: list[dict[str, Any]]
    sampler: str  # a name of SAMPLERS, or a "package.module:Class" path
    seed: int | None
    pruner: PrunerSpec
    devices: DevicesSpec
    stop: StopSpec
    trainer: dict[str, Any]
    max_epochs: int
    raw: dict[str, Any] = field(repr=False, compare=False)
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    heartbeat: HeartbeatSpec | None = None
    #: Constructor arguments of a ``"package.module:Class"`` sampler (never ``seed``); ``{}``.
    sampler_args: dict[str, Any] = field(default_factory=dict)
    #: ``trainer.logger`` resolved: ``tensorboard`` or ``csv`` (never passed to the Trainer).
    logger: Literal["tensorboard", "csv"] = "csv"
    #: Trials built through a LightningCLI (``cli:``, ``config:``, ``class_path``), else None:
    #: ``model``/``data`` are then ``""`` and ``trainer`` is ``{}`` (the CLI has them).
    cli: CliSpec | None = None
    #: Every objective's metric and direction, in order (``metric: [a, b]``, ``direction:
    #: [minimize, maximize]``); ``metric`` and ``direction`` are the first, the one each
    #: trial's ``best.ckpt`` is chosen by. Empty: the one objective ``metric``.
    metrics: tuple[str, ...] = ()
    directions: tuple[Literal["minimize", "maximize"], ...] = ()

    @property
    def objectives(self) -> tuple[tuple[str, Literal["minimize", "maximize"]], ...]:
        """``(metric, direction)`` per objective: one, or several (a multi-objective study)."""
        if not self.metrics:
            return ((self.metric, self.direction),)
        return tuple(zip(self.metrics, self.directions, strict=True))

    @property
    def several(self) -> bool:
        """Whether the study has several objectives."""
        return len(self.metrics) > 1

    @property
    def study_dir(self) -> Path:
        """Where per-trial logs and checkpoints go: ``run_dir/<study>``."""
        return Path(self.run_dir) / self.study


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config:
    """Load, override and validate a config file (see :func:`resolve_config` for ``path``).

    Example::

        >>> cfg = load_config("quickstart", ["stop.n_trials=5"])
        >>> cfg.study, cfg.stop.n_trials, cfg.storage
        ('quickstart', 5, 'runs/quickstart.journal')
    """
    return parse_config(read_config(path, overrides))


# ------------------------------------------------------------------------------------------
# Validation, field by field.
# ------------------------------------------------------------------------------------------
def _section(raw: Mapping[str, Any], key: str, default: Any) -> Any:
    value = raw.get(key, default)
    return default if value is None else value


def _named(
    raw: Any, field_name: str, default_name: str | None = None
) -> tuple[str, dict[str, Any]]:
    """A ``{name: x, key: value...}`` section (or a bare name) -> (name, the other keys)."""
    if isinstance(raw, str):
        raw = {"name": raw}
    if raw is None and default_name is not None:
        raw = {"name": default_name}
    if not isinstance(raw, Mapping):
        raise ConfigError(field_name, f"must be a name or a mapping with 'name', got {raw!r}")
    args = dict(raw)
    name = args.pop("name", default_name)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{field_name}.name", f"is {name!r}, but must be a non-empty string")
    return name, args


#: The ``pruner.*`` keys besides the resources, by pruner name.
_PRUNER_KEYS: dict[str, tuple[str, ...]] = {
    "asha": ("mode", "finish_best"), "hyperband": ("mode", "finish_best"),
    "sync_sh": ("prefact", "resume", "finish_best"),
    "sync_hyperband": ("prefact", "resume", "finish_best"),
}


def _pruner(raw: Any) -> PrunerSpec:
    name, args = _named(raw, "pruner", "asha")
    field_choice("pruner.name", name, PRUNERS)
    keys = ["min_resource", "max_resource", "reduction_factor", *_PRUNER_KEYS.get(name, ())]
    for key in args:  # one another pruner takes (left by --set pruner.name=sync_sh)
        takes = [other for other, known in _PRUNER_KEYS.items() if key in known]
        if takes and name not in takes:
            raise ConfigError(f"pruner.{key}", f"is for pruner {', '.join(takes[:-1])} or "
                              f"{takes[-1]}, and the pruner is {name}: remove it (on the command "
                              f"line, --set '~pruner.{key}'); allowed: {', '.join(sorted(keys))}")
    field_keys(args, keys, "pruner")
    mode = field_choice("pruner.mode", args.get("mode", "stop"), MODES)
    prefact = field_int("pruner.prefact", args.get("prefact", 1), minimum=1)
    resume = _pruner_flag(args, "resume")
    finish_best = _pruner_flag(args, "finish_best")
    if "finish_best" in args and name in ("asha", "hyperband") and mode != "promotion":
        raise ConfigError("pruner.finish_best", "applies to pruner mode: promotion (asha or "
                          f"hyperband), sync_sh and sync_hyperband only; the pruner is {name} "
                          f"with mode {mode}")
    min_resource = field_int("pruner.min_resource", args.get("min_resource", 1), minimum=1)
    reduction_factor = field_int("pruner.reduction_factor", args.get("reduction_factor", 3),
                                 minimum=2)
    max_resource = field_int("pruner.max_resource", args.get("max_resource"), minimum=1,
                             optional=True)
    assert min_resource is not None and reduction_factor is not None  # _int checked them
    if max_resource is not None and max_resource < min_resource:
        raise ConfigError(
            "pruner.max_resource",
            f"is {max_resource}, but must be >= pruner.min_resource ({min_resource})",
        )
    if name in ("hyperband", "sync_hyperband") and max_resource is None:
        raise ConfigError("pruner.max_resource", f"is required for {name} (epochs, e.g. 27)")
    return PrunerSpec(
        name, min_resource, max_resource, reduction_factor,  # type: ignore[arg-type]
        mode, prefact or 1, resume, finish_best,  # type: ignore[arg-type]
    )


def _pruner_flag(args: Mapping[str, Any], key: str) -> bool:
    """``pruner.<key>``: ``true`` or ``false``, default ``true``."""
    value = args.get(key, True)
    if not isinstance(value, bool):
        raise ConfigError(f"pruner.{key}", f"is {value!r}, but must be true or false")
    return value


def _checkpoint(raw: Any, pruner: PrunerSpec) -> CheckpointSpec:
    if not isinstance(raw, Mapping):
        raise ConfigError("checkpoint", f"must be a mapping, got {raw!r}")
    field_keys(raw, ("every", "max_paused"), "checkpoint")
    every = field_choice("checkpoint.every", raw.get("every", "auto"), CHECKPOINT_POLICIES)
    max_paused = field_int("checkpoint.max_paused", raw.get("max_paused"), minimum=1, optional=True)
    if max_paused is not None and pruner.mode != "promotion":
        used = pruner.name + (f" with mode {pruner.mode}" if pruner.name in ("asha", "hyperband")
                              else "")
        raise ConfigError("checkpoint.max_paused", "applies to pruner mode: promotion (asha or "
                          f"hyperband) only; the pruner is {used}")
    return CheckpointSpec(every, max_paused)  # type: ignore[arg-type]


def _heartbeat(raw: Any, storage: str) -> HeartbeatSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError("heartbeat", f"must be a mapping, got {raw!r}")
    field_keys(raw, ("interval", "grace_period"), "heartbeat")
    if storage.startswith("grpc://"):
        raise ConfigError(
            "heartbeat",
            "is not carried by the gRPC proxy (Optuna's proxy has no heartbeat call); give the "
            "launchers the database URL, or leave heartbeat out",
        )
    if "://" not in storage or storage.startswith("sqlite"):
        raise ConfigError(
            "heartbeat",
            "is for PostgreSQL or MySQL storages (several machines); on one machine a dead "
            "worker is seen at once",
        )
    interval = field_int("heartbeat.interval", raw.get("interval", 60), minimum=1)
    grace = field_int("heartbeat.grace_period", raw.get("grace_period", 3 * interval), minimum=1)
    assert interval is not None and grace is not None
    if grace <= interval:
        raise ConfigError(
            "heartbeat.grace_period", f"is {grace}, but must be > heartbeat.interval ({interval})"
        )
    return HeartbeatSpec(interval, grace)


def _stop(raw: Any) -> StopSpec:
    if not isinstance(raw, Mapping):
        raise ConfigError("stop", f"must be a mapping, got {raw!r}")
    field_keys(
        raw, ("n_trials", "max_wallclock_time", "max_failed_trials", "grace", "max_retries"), "stop"
    )
    n_trials = raw.get("n_trials")
    allowed = f"must be an integer from 1 to {MAX_N_TRIALS}"
    if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, Integral)
                                 or n_trials < 1):
        raise ConfigError("stop.n_trials", f"is {n_trials!r}, but {allowed}")
    n_trials = None if n_trials is None else int(n_trials)
    if n_trials is not None and n_trials > MAX_N_TRIALS:
        raise ConfigError("stop.n_trials", f"is {n_trials}, but {allowed} (the study queues "
                          "every trial of it before the first starts, and a queued trial cannot "
                          "be taken back); for a longer study, give stop.max_wallclock_time "
                          "without n_trials")
    retries = field_int("stop.max_retries", raw.get("max_retries", 2), minimum=0)
    failed = field_int("stop.max_failed_trials", raw.get("max_failed_trials"), minimum=1,
                       optional=True)
    seconds = raw.get("max_wallclock_time")
    if seconds is not None and (not is_finite_number(seconds) or seconds <= 0):
        raise ConfigError("stop.max_wallclock_time", f"is {seconds!r}, but must be seconds > 0")
    if n_trials is None and seconds is None:
        raise ConfigError("stop", "needs n_trials or max_wallclock_time (or both)")
    grace = raw.get("grace", 0)
    if not is_finite_number(grace) or grace < 0:
        raise ConfigError("stop.grace", f"is {grace!r}, but must be seconds >= 0")
    return StopSpec(
        n_trials, None if seconds is None else float(seconds), failed, float(grace), retries or 0
    )


def _trainer(raw: Any, cli: bool = False) -> dict[str, Any]:
    """``trainer``: any Lightning Trainer argument but those the launcher owns.

    The types of :data:`TRAINER_KEYS` are checked here; any other key is checked against the
    Trainer's signature by :func:`check_against_registry` (a CLI config's by the CLI's parser).
    ``logger`` is the launcher's ``tensorboard | csv``; a CLI config may instead give the CLI's
    own logger (a class path mapping, a list of them, or true/false), and ``callbacks``.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("trainer", f"must be a mapping, got {raw!r}")
    for key, value in raw.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(f"trainer.{key}", "is not a Trainer argument name")
        if key in OWNED_TRAINER:
            raise ConfigError(f"trainer.{key}", f"is set by the launcher: {OWNED_TRAINER[key]}")
        if not cli and key == "callbacks":
            raise ConfigError("trainer.callbacks", f"needs a LightningCLI config: {_CLI_HOW}")
        if not cli and key == "logger" and not isinstance(value, str | None):
            raise ConfigError("trainer.logger", f"is {value!r}, but must be tensorboard or csv; "
                              f"a logger of your own needs a LightningCLI config: {_CLI_HOW}")
        types = TRAINER_KEYS.get(key)
        if types is None or (cli and key != "max_epochs"):  # the CLI's parser checks them
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
            raise ConfigError(f"trainer.{key}", f"is {value!r}, but must be {_type_words(key)}")
    out = dict(raw)
    if cli and out.get("logger") not in (None, "tensorboard", "csv"):
        out.pop("logger")  # the CLI's own logger, in cli.sections
    return out


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _type_words(key: str) -> str:
    """What ``trainer.<key>`` of :data:`TRAINER_KEYS` may be, in words.

    Example::

        >>> _type_words("check_val_every_n_epoch"), _type_words("limit_val_batches")
        ('an integer >= 1, or null (validate by val_check_interval)', 'an int or a float')
    """
    from lightning_hpo.launch.trainer_values import ALLOWED

    if key in ALLOWED:
        return ALLOWED[key][1]
    names = {"int": "an int", "float": "a float", "str": "a string", "bool": "true or false",
             "NoneType": "null"}
    return " or ".join(names[t.__name__] for t in _tuple(TRAINER_KEYS[key]))


def _tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package is installed (found, not imported: no torch here).

    Lightning's ``TensorBoardLogger`` writes with ``torch.utils.tensorboard``, which needs it.
    """
    return importlib.util.find_spec("tensorboard") is not None


def default_logger() -> Literal["tensorboard", "csv"]:
    """``trainer.logger`` when the config leaves it out: ``tensorboard`` when the package is
    installed, else ``csv``."""
    return "tensorboard" if _tensorboard_available() else "csv"


def _trainer_logger(value: Any) -> str:
    """``trainer.logger`` -> ``tensorboard`` or ``csv``; left out: :func:`default_logger`."""
    if value is None:
        return default_logger()
    name = field_choice("trainer.logger", value, LOGGERS)
    if name == "tensorboard" and not _tensorboard_available():
        raise ConfigError(
            "trainer.logger",
            f"is tensorboard, but the tensorboard package is not installed: {TENSORBOARD_INSTALL} "
            "(or set trainer.logger: csv)",
        )
    return name


def _is_yaml_value(value: Any) -> bool:
    """Whether ``value`` is what YAML (and JSON, which carries the config to workers) holds."""
    if isinstance(value, list):
        return all(_is_yaml_value(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _is_yaml_value(v) for k, v in value.items())
    return value is None or isinstance(value, str | int | float | bool)


def _sampler(raw: Any, seed: Any) -> tuple[str, dict[str, Any], int | None]:
    """``sampler:`` -> (built-in name or class path, the class's arguments, seed).

    ``random | tpe | gp``, ``{name: random|tpe|gp, seed: N}``, or ``{class: "package.module:
    Class", seed: N, <constructor arguments>...}``. Pure: the class is imported by
    :func:`check_against_registry`.
    """
    wanted = "a 'package.module:Class' path to an optuna.samplers.BaseSampler subclass"
    if isinstance(raw, Mapping) and "class" in raw:
        args = dict(raw)
        name = args.pop("class")
        if "name" in args:
            raise ConfigError("sampler.name", "give sampler.name (a built-in sampler) or "
                              "sampler.class (your own), not both; on the command line, "
                              "replace the section: --set 'sampler={class: \"module:Class\"}'")
        module_name, colon, attr = name.partition(":") if isinstance(name, str) else ("", "", "")
        if not (colon and module_name and attr):
            raise ConfigError("sampler.class", f"is {name!r}, but must be {wanted}")
    else:
        name, args = _named(raw, "sampler", "random")
        if name not in SAMPLERS:
            hint = (f"; a sampler class goes in sampler.class: {{class: {name!r}}}"
                    if ":" in name else f", or sampler.class: {wanted}")
            raise ConfigError("sampler.name", f"is {name!r}; allowed: {', '.join(SAMPLERS)}{hint}")
    top = _seed("seed", seed)
    own = _seed("sampler.seed", args.pop("seed", None))
    if own is not None and top is not None and own != top:  # one seed: sampler and training
        raise ConfigError("seed", f"is {top}, but sampler.seed is {own}: the sampler and the "
                          "trials' training take one seed; give one of them")
    seed = top if own is None else own
    if name in SAMPLERS:
        field_keys(args, ("name", "seed"), "sampler")
        return name, {}, seed
    for key, value in args.items():
        if not isinstance(key, str) or not _is_yaml_value(value):
            raise ConfigError(f"sampler.{key}", f"is {value!r}, but must be a YAML value "
                              "(number, string, bool, null, or a list or mapping of them)")
    return name, args, seed


#: The largest seed: numpy's, Optuna's samplers' and Lightning's ``seed_everything``'s.
MAX_SEED = 2**32 - 1


def _seed(field: str, value: Any) -> int | None:
    """``seed`` or ``sampler.seed``: an integer from 0 to :data:`MAX_SEED`, or None."""
    seed = field_int(field, value, minimum=0, optional=True)
    if seed is not None and seed > MAX_SEED:
        raise ConfigError(field, f"is {seed}, but must be an integer from 0 to {MAX_SEED}")
    return seed


def sampler_class(name: str) -> type[BaseSampler]:
    """The Optuna sampler class of ``sampler.name`` (built-in) or ``sampler.class`` (a path).

    Imports Optuna and, for a ``"package.module:Class"`` path, that module (which must be
    importable where the launcher and its workers run: on ``PYTHONPATH``, or in the folder
    ``python -m lightning_hpo.launch`` is started from).

    Raises:
        ConfigError: ``sampler.class`` when the module cannot be imported, has no such class, or
            the class is not an ``optuna.samplers.BaseSampler`` subclass.

    Example::

        >>> sampler_class("tpe").__name__, sampler_class("optuna.samplers:QMCSampler").__name__
        ('TPESampler', 'QMCSampler')
    """
    import optuna

    from lightning_hpo._registry import _resolve_class

    builtin: dict[str, type[BaseSampler]] = {
        "random": optuna.samplers.RandomSampler, "tpe": optuna.samplers.TPESampler,
        "gp": optuna.samplers.GPSampler,
    }
    key = "class" if ":" in name else "name"
    return _resolve_class("sampler", name, builtin, optuna.samplers.BaseSampler, key)


def sampler_kwargs(cfg: Config, seed: int | None) -> dict[str, Any]:
    """The arguments :func:`lightning_hpo.launch.study.build_sampler` builds the sampler with:
    ``cfg.sampler_args``, plus ``seed`` when the class takes one (a ``**kwargs`` class does).

    Args:
        cfg: a parsed config.
        seed: the seed for this worker's sampler (None: unseeded).

    Raises:
        ConfigError: ``sampler.class`` for a bad class (:func:`sampler_class`),
            ``sampler.<key>`` for an argument the constructor does not take or a required one
            left out, ``sampler.seed`` when ``sampler.seed`` is set but the class takes none.

    Example::

        >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"},
        ...     "space": {"lr": {"loguniform": [0.01, 1.0]}}, "pruner": "none",
        ...     "trainer": {"max_epochs": 3}, "stop": {"n_trials": 4},
        ...     "sampler": {"class": "optuna.samplers:QMCSampler", "scramble": True}})
        >>> sampler_kwargs(cfg, 7)
        {'scramble': True, 'seed': 7}
    """
    from lightning_hpo._registry import _accepts_any_keyword, _init_parameters

    cls = sampler_class(cfg.sampler)
    params = _init_parameters(cls)
    any_keyword = _accepts_any_keyword(cls)
    if not any_keyword:
        allowed = ", ".join(key for key in params if key != "seed") or "none"
        for key in cfg.sampler_args:
            if key not in params or key == "seed":
                raise ConfigError(
                    f"sampler.{key}", f"unknown argument of {cfg.sampler!r}; allowed: {allowed}"
                )
    for key, param in params.items():
        if param.default is inspect.Parameter.empty and key not in (*cfg.sampler_args, "seed"):
            raise ConfigError(f"sampler.{key}", f"is required by {cfg.sampler!r} but was not given")
    kwargs = dict(cfg.sampler_args)
    if "seed" in params or any_keyword:
        kwargs["seed"] = seed
    else:  # the top-level seed (also the trials' training seed) is not an error here
        section = cfg.raw.get("sampler")
        if isinstance(section, Mapping) and section.get("seed") is not None:
            raise ConfigError("sampler.seed", f"is set, but {cfg.sampler!r} takes no seed")
    return kwargs


def _initial(raw: Any, space: Space) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(item, Mapping) for item in raw):
        raise ConfigError("initial", "must be a list of {hyperparameter: value} mappings")
    for index, item in enumerate(raw):
        check_in_space(item, space, f"initial[{index}]")
    return [dict(item) for item in raw]


TOP_LEVEL = (
    "study", "storage", "run_dir", "cli", "config", "model", "data", "metric", "direction",
    "space", "initial", "sampler", "seed", "pruner", "devices", "stop", "trainer", "optimizer",
    "lr_scheduler", "checkpoint", "heartbeat",
)


def parse_config(raw: Mapping[str, Any]) -> Config:
    """Validate a config mapping and fill in defaults. Pure: no I/O, no torch.

    Sections are read in the order of :data:`TOP_LEVEL` (one helper each), so the first
    offending field is the one reported.

    Raises:
        ConfigError: naming the first offending field and what is allowed.
    """
    field_keys(raw, TOP_LEVEL, "")
    study = study_name(raw.get("study"))
    storage = _storage(_section(raw, "storage", f"runs/{study}.journal"))
    run_dir = run_dir_of(_section(raw, "run_dir", "runs"))
    cli = parse_cli(raw) if is_cli_config(raw) else None
    if cli is None:
        model, model_args = _named(raw.get("model"), "model")
        data, data_args = _named(raw.get("data"), "data", "digits")
        for key in ("optimizer", "lr_scheduler"):
            if raw.get(key) is not None:
                raise ConfigError(key, f"is a LightningCLI section: {_CLI_HOW}")
    else:
        model, model_args, data, data_args = "", {}, "", {}
    metrics, directions = _objectives(raw.get("metric"), raw.get("direction"))
    metric, direction = metrics[0], directions[0]
    space = _space(_section(raw, "space", {}), fixed={**model_args, **data_args},
                   dotted=cli is not None)
    initial = _initial(_section(raw, "initial", []), space)
    sampler, sampler_args, seed = _sampler(_section(raw, "sampler", "random"), raw.get("seed"))
    pruner = _pruner(_section(raw, "pruner", {"name": "asha"}))
    devices = parse_devices(_section(raw, "devices", {}))
    stop = _stop(_section(raw, "stop", {}))
    trainer = _trainer(_section(raw, "trainer", {}), cli=cli is not None)
    trainer_epochs = trainer.pop("max_epochs", None)
    logger = _trainer_logger(trainer.pop("logger", None))
    if cli is not None:
        trainer = {}  # the CLI's section (cli.sections), parsed by the CLI's own parser
    pruner, max_epochs = _max_epochs(pruner, trainer_epochs, cli=cli is not None)
    checkpoint = _checkpoint(_section(raw, "checkpoint", {}), pruner)
    if stop.n_trials is not None and len(initial) > stop.n_trials:  # each one is a trial
        raise ConfigError("initial", f"lists {len(initial)} configurations, but stop.n_trials "
                          f"is {stop.n_trials}: give at most {stop.n_trials}, or raise "
                          "stop.n_trials")
    return Config(
        study=study, storage=storage, run_dir=run_dir, model=model, model_args=model_args,
        data=data, data_args=data_args, metric=metric, direction=direction,  # type: ignore[arg-type]
        space=space, initial=initial, sampler=sampler, seed=seed, sampler_args=sampler_args,
        pruner=pruner, devices=devices, stop=stop, trainer=trainer, max_epochs=max_epochs,
        raw=copy.deepcopy(dict(raw)),
        checkpoint=checkpoint,
        heartbeat=_heartbeat(raw.get("heartbeat"), storage),
        logger=logger,  # type: ignore[arg-type]
        cli=cli,
        metrics=metrics if len(metrics) > 1 else (),
        directions=directions if len(metrics) > 1 else (),  # type: ignore[arg-type]
    )


#: How a config gets ``optimizer:``, ``lr_scheduler:``, Trainer callbacks and loggers.
_CLI_HOW = ("give the model as model: {class_path: package.module.Class} "
            "(lightning_hpo.models.LeNet works), or name your project's CLI (cli: main:cli_main, "
            "config: [config.yaml]); see the README, 'Your Lightning project as it is'")


def _storage(storage: Any) -> str:
    """``storage``: a journal file path or a storage URL (opened and checked by the launcher)."""
    if not isinstance(storage, str) or not storage.strip():
        raise ConfigError("storage", "must be an Optuna storage URL or a journal file path")
    # ~/studies/s.journal is in the home folder, as in a shell (not a folder named "~")
    return storage if "://" in storage else os.path.expanduser(storage)


def _objectives(metric: Any, direction: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``metric`` and ``direction``: a name and a direction, or equally long lists of them (a
    study with several objectives). Whether the model logs them is
    :func:`check_against_registry`'s.

    Example::

        >>> _objectives(["validation_error", "parameters"], ["minimize", "minimize"])
        (('validation_error', 'parameters'), ('minimize', 'minimize'))
        >>> _objectives(None, None)
        (('validation_error',), ('minimize',))
    """
    if metric is None:
        metric = "validation_error"
    if isinstance(metric, list):
        if not metric:
            raise ConfigError("metric", "is an empty list, but must name at least one metric")
        for index, name in enumerate(metric):
            if not isinstance(name, str) or not name:
                shown = "empty" if name == "" else repr(name)
                raise ConfigError(f"metric[{index}]", f"is {shown}, but must be the name of a "
                                  "logged metric")
        twice = sorted({name for name in metric if metric.count(name) > 1})
        if twice:
            raise ConfigError("metric", f"names {', '.join(twice)} twice; each objective is a "
                              "different metric")
        if not isinstance(direction, list):
            shown = "missing" if direction is None else repr(direction)
            raise ConfigError("direction", f"is {shown}, but metric lists {len(metric)} metrics: "
                              f"give a list of {len(metric)} directions (minimize or maximize), "
                              "one per metric")
        if len(direction) != len(metric):
            raise ConfigError("direction", f"lists {len(direction)} direction(s) for "
                              f"{len(metric)} metrics; give one per metric, in the same order")
        directions = tuple(field_choice(f"direction[{index}]", d, DIRECTIONS)
                           for index, d in enumerate(direction))
        return tuple(metric), directions
    if not isinstance(metric, str) or not metric:
        shown = "empty" if metric == "" else repr(metric)  # --set metric=
        raise ConfigError("metric", f"is {shown}, but must be the name of a logged metric, or a "
                          "list of them (several objectives)")
    if isinstance(direction, list):
        raise ConfigError("direction", f"is a list of {len(direction)}, but metric is one name "
                          f"({metric}); give one direction, or a list of metrics")
    direction = "minimize" if direction is None else direction
    return (metric,), (field_choice("direction", direction, DIRECTIONS),)


def _space(raw: Any, fixed: Mapping[str, Any], dotted: bool = False) -> Space:
    """``space``: at least one searched hyperparameter, none also ``fixed`` under model/data."""
    space = parse_space(raw, dotted=dotted)
    if not any(not isinstance(v, (str, int, float, bool, type(None))) for v in space.values()):
        raise ConfigError("space", "must search at least one hyperparameter")
    overlap = sorted(set(space) & set(fixed))
    if overlap:
        raise ConfigError(f"space.{overlap[0]}", "is also fixed under model/data; keep one")
    if dotted:  # a LightningCLI's keys: what the launcher sets for every trial is not searched
        for name, dist in space.items():
            section, _, key = name.partition(".")
            if not key and section in SECTIONS:
                _whole_section(name, dist, space)
            key = key.partition(".")[0]
            if section == "trainer" and key == "max_epochs":
                raise ConfigError(f"space.{name}", "is set by the launcher: the pruner decides "
                                  "how long a trial trains (pruner.max_resource)")
            if section == "trainer" and key in OWNED_TRAINER:
                raise ConfigError(f"space.{name}", f"is set by the launcher: {OWNED_TRAINER[key]}")
            if section == "ckpt_path":
                raise ConfigError(f"space.{name}", "is set by the launcher: a trial resumes from "
                                  "its own checkpoint")
    return space


def _whole_section(name: str, dist: Any, space: Mapping[str, Any]) -> None:
    """``space.model`` of a LightningCLI config: the CLI takes a whole section as a class path
    (``--model=package.module.Class``), so a choice of class paths is searched; a number, a
    range or a choice of them is refused here (the CLI's parser refused it as the value of the
    section's first other key, and the check blamed that key)."""
    from optuna.distributions import CategoricalDistribution

    values = dist.choices if isinstance(dist, CategoricalDistribution) else [dist]
    if all(isinstance(value, str) for value in values):
        return
    keys = [key for key in space if key.startswith(f"{name}.")]
    example = (f"space.{keys[0]}, as this space does" if keys else
               f"space.{name}.<argument>, as the CLI's fit --help lists them")
    classes = ("" if name == "trainer" else f", or choose among classes ({name}: {{choice: "
               "[package.module.A, package.module.B]})")
    raise ConfigError(f"space.{name}", f"names the whole {name} section, not one of its "
                      f"arguments: search an argument by its dotted key ({example}){classes}")


def _max_epochs(pruner: PrunerSpec, trainer_epochs: int | None,
                cli: bool = False) -> tuple[PrunerSpec, int]:
    """The epochs a trial may train: ``pruner.max_resource``, else ``trainer.max_epochs`` (which
    must agree when both are given); the pruner gets the resolved ``max_resource``. Neither is
    read from a LightningCLI project's own config files (``cli``): the study decides."""
    max_epochs = trainer_epochs
    if pruner.max_resource is not None:
        if max_epochs is not None and max_epochs != pruner.max_resource:
            raise ConfigError(
                "trainer.max_epochs",
                f"is {max_epochs}, but must equal pruner.max_resource ({pruner.max_resource}) "
                "or be left out",
            )
        max_epochs = pruner.max_resource
    if max_epochs is None:
        where = (" in this file: the trainer.max_epochs of the project's config files is not "
                 "read, the study decides") if cli else ""
        raise ConfigError("pruner.max_resource", "is required (the epochs a trial may train, "
                          f"e.g. 27; or trainer.max_epochs{where})")
    if pruner.name != "none" and pruner.max_resource is None:
        pruner = dataclasses.replace(pruner, max_resource=max_epochs)
    if pruner.min_resource > max_epochs:
        raise ConfigError("pruner.min_resource", f"is above max_epochs ({max_epochs})")
    return pruner, max_epochs


def range_end(dist: Any, end: int) -> Any:
    """The low (``end=0``) or high (``end=-1``) value of a distribution; constants as they are.

    Example::

        >>> from optuna.distributions import FloatDistribution
        >>> range_end(FloatDistribution(0.01, 1.0, log=True), -1), range_end(64, 0)
        (1.0, 64)
    """
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        return dist.choices[end]
    if isinstance(dist, FloatDistribution | IntDistribution):
        return (dist.low, dist.high)[end]
    return dist


def pause_levels(cfg: Config) -> list[int]:
    """The epochs at which the config's schedule pauses trials, ascending; empty where no trial
    pauses (stopping pruners, ``none``). Every pausing schedule's brackets are the full ladder
    or its tail (Hyperband's, :func:`~lightning_hpo.rungs.hyperband_rounds`), so together they
    pause at the full ladder's rungs.

    Example::

        >>> raw = {"study": "s", "model": "lenet", "space": {"lr": {"uniform": [0.01, 0.1]}},
        ...        "stop": {"n_trials": 9}}
        >>> pause_levels(parse_config({**raw, "pruner": {"name": "sync_hyperband",
        ...     "min_resource": 1, "max_resource": 9, "reduction_factor": 3}}))
        [1, 3, 9]
        >>> pause_levels(parse_config({**raw, "trainer": {"max_epochs": 9}}))  # ASHA: no pause
        []
    """
    p = cfg.pruner
    if not p.pauses:
        return []
    top = p.max_resource or cfg.max_epochs
    return rung_levels(p.min_resource, max_resource=top, reduction_factor=p.reduction_factor)


def check_against_registry(cfg: Config) -> list[str]:
    """Check the model, data, hyperparameter names, values and metric against the real classes.

    Builds the model and the data module once at the low end and once at the high end of every
    range, so a fixed argument or a range the class refuses (``dropout_1: {uniform: [0, 1.5]}``)
    is reported before anything runs (a data module's batches are counted at both ends where
    the Trainer's values need them, and a refusal is said at the end with the fewest: its limit
    is the one to keep to), and builds the sampler once (a ``"package.module:Class"``
    sampler's ``ValueError`` or ``TypeError`` becomes a ``sampler`` error; with several
    objectives it is asked for one trial, so a single-objective sampler is refused). Imports
    torch and Lightning (a few seconds); the launcher calls it once, before anything is written
    to the storage.

    A LightningCLI config (``cfg.cli``) is checked against the project's CLI instead
    (:func:`lightning_hpo.launch.project.check_cli`: its entry point, files and every space key).

    Returns:
        Lines to show once: the Trainer arguments of a project's config the launcher replaces.

    Raises:
        ConfigError: naming ``model.*``, ``data.*``, ``space.*``, ``metric``, ``sampler.*``,
            ``trainer.*``, ``cli`` or ``config``.
    """
    kwargs = sampler_kwargs(cfg, cfg.seed)
    try:
        sampler = sampler_class(cfg.sampler)(**kwargs)
    except ConfigError:  # a class that names its own field
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError("sampler", f"{cfg.sampler!r} refused its arguments {kwargs}: "
                          f"{error}") from error
    if cfg.several:
        _check_sampler_objectives(cfg, sampler)
    from lightning_hpo.launch.trainer_values import (
        batch_size_refusal,
        binding_refusal,
        needs_batch_count,
        unvalidated_end,
        unvalidated_rungs,
    )

    levels = pause_levels(cfg)
    if cfg.cli is not None:
        import tempfile

        from lightning_hpo._scratch import scratch_prefix
        from lightning_hpo.launch.project import check_cli

        with tempfile.TemporaryDirectory(prefix=scratch_prefix("check")) as scratch:
            return check_cli(cfg.cli, cfg.space, Path(scratch), cfg.max_epochs, levels)
    _check_trainer_arguments(cfg.trainer)
    every = cfg.trainer.get("check_val_every_n_epoch", 1)
    why = (unvalidated_rungs(every, levels) if levels else None) or unvalidated_end(
        every, cfg.max_epochs)
    if why is not None:
        raise ConfigError("trainer.check_val_every_n_epoch", why)
    from lightning_hpo.data import build_datamodule, datamodule_hyperparameters
    from lightning_hpo.models import build_model, model_class, model_hyperparameters

    model_params = model_hyperparameters(cfg.model)
    data_params = datamodule_hyperparameters(cfg.data)
    for name in cfg.space:
        if name not in model_params and name not in data_params:
            params = {"model": model_params, "data": data_params}.get(name)
            section = (f"; {name} is the section, not one of its arguments: search one of "
                       f"those by its own name (space.{next(iter(params))})" if params else "")
            raise ConfigError(
                f"space.{name}", f"is not a hyperparameter of model {cfg.model} "
                f"({', '.join(model_params)}) or data {cfg.data} ({', '.join(data_params)})"
                f"{section}"
            )
    counted: list[tuple[str, int | None, int | None]] = []  # (which end, its batch counts)
    for end, label in ((0, "low"), (-1, "high")):
        values = {name: range_end(dist, end) for name, dist in cfg.space.items()}
        data_values = {k: v for k, v in values.items() if k in data_params}
        try:
            build_model(cfg.model, **cfg.model_args,
                        **{k: v for k, v in values.items() if k not in data_params})
            data = build_datamodule(cfg.data, **cfg.data_args, **data_values)
        except ConfigError as error:
            key = error.field.partition(".")[2]
            if key in cfg.space:
                raise ConfigError(
                    f"space.{key}", f"the {label} end {values[key]!r} is refused: {error.message}"
                ) from None
            raise
        loader_refused = batch_size_refusal(data)
        if loader_refused is not None:  # the class took it; the DataLoader fit asks for would not
            value, words = loader_refused
            if "batch_size" in data_values:
                raise ConfigError("space.batch_size", f"the {label} end {value!r} is refused by "
                                  f"torch's DataLoader: {words}")
            where = "data.batch_size" if "batch_size" in cfg.data_args else "data"
            shown = "is" if where == "data.batch_size" else f"{cfg.data}: its batch_size is"
            raise ConfigError(where, f"{shown} {value!r}, which torch's DataLoader refuses: "
                              f"{words}")
        if needs_batch_count(cfg.trainer):
            where = "".join(f", data.{k} {v!r}" for k, v in data_values.items())
            counted.append((f"the space's {label} end{where}",
                            *_batch_counts(data, cfg.devices.per_trial)))
    # Said at the end with the fewest batches: its limit is the one every trial keeps to.
    refused = binding_refusal(cfg.trainer, [(train, val) for _, train, val in counted])
    if refused is not None:
        at, field, why = refused
        raise ConfigError(field, f"{why} ({counted[at][0]})")
    logged = getattr(model_class(cfg.model), "LOGGED_METRICS", None)
    optional = getattr(model_class(cfg.model), "OPTIONAL_METRICS", None) or {}
    for index, (metric, _) in enumerate(cfg.objectives):
        where = f"metric[{index}]" if cfg.several else "metric"
        if logged is not None and metric not in logged:
            raise ConfigError(
                where, f"'{metric}' is not logged by {cfg.model}; logged: {', '.join(logged)}"
            )
        flag = optional.get(metric)
        if flag is not None and cfg.model_args.get(flag) is not True and flag not in cfg.space:
            raise ConfigError(where, f"'{metric}' is logged by {cfg.model} only with "
                              f"model.{flag}: true")
    return []


def _check_sampler_objectives(cfg: Config, sampler: BaseSampler) -> None:
    """Refuse a sampler that cannot propose a trial of a study with the config's objectives.

    Optuna's single-objective samplers (``CmaEsSampler``) raise ``ValueError`` when asked for a
    trial of a study with several objectives, so every trial they were asked for would end FAIL
    (only the initial configurations, not sampled, would train). The sampler is asked here for
    one trial of an empty in-memory study with the config's directions and space.

    Raises:
        ConfigError: ``sampler``, with the sampler's own words.
    """
    import optuna

    from lightning_hpo.launch.space import suggest

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # not "A new study created in memory"
    try:
        study = optuna.create_study(directions=list(cfg.directions), sampler=sampler)
        suggest(study.ask(), cfg.space)
    except (ValueError, TypeError, NotImplementedError) as error:
        raise ConfigError("sampler", (
            f"{cfg.sampler!r} cannot propose a trial of a study with {len(cfg.directions)} "
            f"objectives ({error}); {', '.join(SAMPLERS)} and optuna.samplers:NSGAIISampler can"
        )) from error
    finally:
        optuna.logging.set_verbosity(verbosity)


def _batch_counts(data: Any, world_size: int) -> tuple[int | None, int | None]:
    """How many training and validation batches one of ``world_size`` DDP ranks gets an epoch
    from the data module ``data`` (set up here once, outside a Trainer), as Lightning counts
    them before ``limit_train_batches`` / ``limit_val_batches``; None for a count that cannot be
    made (its data missing, a loader without a length): the trial then reports what is wrong."""
    try:
        data.setup("fit")
    except Exception:  # noqa: BLE001 (the trial reports it, with the data module's words)
        return None, None
    return (_rank_batches(data.train_dataloader, world_size),
            _rank_batches(data.val_dataloader, world_size))


def _rank_batches(make_loader: Any, world_size: int) -> int | None:
    """One rank's batches of the loader ``make_loader()`` returns (DistributedSampler's share
    of the examples under DDP); None when it has no length."""
    try:
        loader = make_loader()
        batches = len(loader)
    except Exception:  # noqa: BLE001 (no loader, or one without a length)
        return None
    size, sampler = getattr(loader, "batch_size", None), getattr(loader, "sampler", None)
    if world_size > 1 and isinstance(size, int) and size > 0 and hasattr(sampler, "__len__"):
        examples = math.ceil(len(sampler) / world_size)  # type: ignore[arg-type]
        batches = examples // size if getattr(loader, "drop_last", False) else math.ceil(
            examples / size)
    return batches


def _check_trainer_arguments(trainer: Mapping[str, Any]) -> None:
    """Every ``trainer.*`` key is an argument of Lightning's Trainer (imports Lightning)."""
    from lightning.pytorch import Trainer

    from lightning_hpo._registry import _init_parameters

    known = list(_init_parameters(Trainer))
    for key in trainer:
        if key not in known:
            close = [name for name in known if name not in OWNED_TRAINER and name not in
                     ("callbacks", "logger")]
            raise ConfigError(f"trainer.{key}", "is not an argument of Lightning's Trainer; "
                              f"allowed: {', '.join(close)}")
    from lightning_hpo.launch.trainer_values import NEEDED, launcher_refusal

    for key in NEEDED:
        why = launcher_refusal(key, trainer.get(key))
        if why is not None:
            raise ConfigError(f"trainer.{key}", f"is {trainer[key]!r}, but {why}")
    _check_trainer_values(trainer)


def _check_trainer_values(trainer: Mapping[str, Any]) -> None:
    """Each ``trainer.*`` value as Lightning's Trainer takes it (``precision: bogus``,
    ``limit_train_batches: -2``): a Trainer is built on the CPU with each one alone, so that
    the refusal names its key, then with all of them (values that refuse each other); a value
    only a GPU takes is let through. Values the Trainer takes and only ``fit`` refuses, or never
    does, first (:mod:`~lightning_hpo.launch.trainer_values`)."""
    import tempfile
    import warnings

    from lightning_hpo._scratch import scratch_prefix
    from lightning_hpo.launch._quiet import quiet_lightning
    from lightning_hpo.launch.trainer_values import fit_refusal

    for key, value in trainer.items():
        allowed = fit_refusal(key, value)
        if allowed is not None:
            raise ConfigError(f"trainer.{key}", f"is {value!r}, but must be {allowed}")

    quiet = {"accelerator": "cpu", "devices": 1, "logger": False, "enable_checkpointing": False,
             "enable_progress_bar": False, "enable_model_summary": False}
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("check")) as scratch, \
            warnings.catch_warnings(), quiet_lightning():
        warnings.simplefilter("ignore")
        given = {key: value for key, value in trainer.items()
                 if key not in ("callbacks", "plugins", "max_epochs", "logger")}
        for key, value in given.items():
            message = _trainer_refusal({**quiet, key: value, "default_root_dir": scratch})
            if message is not None:
                raise ConfigError(f"trainer.{key}", f"is {value!r}, which Lightning's Trainer "
                                  f"refuses: {message}")
        # Each value alone passed; some refuse each other (check_val_every_n_epoch: null with
        # a fractional val_check_interval).
        message = (_trainer_refusal({**quiet, **given, "default_root_dir": scratch})
                   if len(given) > 1 else None)
        if message is not None:
            shown = ", ".join(f"{key}: {value!r}" for key, value in given.items())
            raise ConfigError("trainer", f"{shown} together, which Lightning's Trainer refuses: "
                              f"{message}")


def _trainer_refusal(arguments: Mapping[str, Any]) -> str | None:
    """Lightning's words (one line, at most 300 characters) when ``Trainer(**arguments)``
    raises, None when it builds; None too for a refusal that names a GPU (a value for the
    slot's device, not for this CPU check)."""
    from lightning.pytorch import Trainer

    try:
        Trainer(**arguments)
    except Exception as error:  # Lightning's ValueError, TypeError, Misconfiguration
        message = " ".join(str(error).split())
        if re.search(r"\b(cuda|gpu|mps|tpu|accelerator)\b", message, re.IGNORECASE):
            return None
        return message[:300]
    return None
