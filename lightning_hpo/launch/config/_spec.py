"""The launcher's config as typed records: :class:`Config` and its sections, and the closed choices.

:class:`Config` is what :func:`~lightning_hpo.launch.config.parse_config` returns: every field
validated and every default filled. The tuples below are the allowed values of the fields with a
closed choice (``sampler``, ``pruner.name``, ``pruner.mode``, ``checkpoint.every``,
``direction``, ``trainer.logger``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any, Literal, get_args

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config._fields import FieldDoc, spec
from lightning_hpo.launch.config.cli_spec import (
    CliSpec,
)
from lightning_hpo.launch.config.devices import DevicesSpec
from lightning_hpo.launch.config.space import Space

PrunerName = Literal["asha", "hyperband", "sync_sh", "sync_hyperband", "none"]
Mode = Literal["stop", "promotion"]
CheckpointPolicy = Literal["auto", "epoch", "rung"]
Direction = Literal["minimize", "maximize"]
SAMPLERS = ("random", "tpe", "gp")
PRUNERS: tuple[str, ...] = get_args(PrunerName)
#: ``pruner.mode`` of asha and hyperband: stop trials at rungs, or pause them for promotion.
MODES: tuple[str, ...] = get_args(Mode)
#: ``checkpoint.every``: when a trial's resume checkpoint is written.
CHECKPOINT_POLICIES: tuple[str, ...] = get_args(CheckpointPolicy)
DIRECTIONS: tuple[str, ...] = get_args(Direction)
#: The most ``stop.n_trials`` may be. The launcher queues the whole budget (one WAITING trial
#: each) before any trial starts, Optuna deletes no trial, and a study holding more queued
#: trials than a later config's ``n_trials`` is refused, so a mistyped huge number would spend
#: minutes queueing and leave thousands behind. 10,000 keeps setting up within a minute on any
#: storage (the queue goes in one write, ``_optuna.enqueue_trials``), and is far beyond a
#: study of trained models; a longer study gives ``stop.max_wallclock_time`` without
#: ``n_trials`` (nothing is queued then).
MAX_N_TRIALS = 10_000
#: Trainer arguments the launcher checks, with their types and one sentence each (max_epochs
#: comes from the pruner's max_resource).
TRAINER_FIELDS: dict[str, tuple[type | tuple[type, ...], str]] = {
    "max_epochs": (int, "The epochs a trial may train; equal to pruner.max_resource if both are "
                   "given."),
    "precision": ((str, int), "Lightning's precision (32, 16-mixed, bf16-mixed...)."),
    "gradient_clip_val": ((int, float, type(None)),
                          "Clip gradients to this norm; null: no clipping."),
    "accumulate_grad_batches": (int, "Batches whose gradients are summed before a step."),
    # true, false, "warn" or null (trainer_values.ALLOWED's rule)
    "deterministic": ((bool, str, type(None)),
                      "Use deterministic algorithms (Lightning's true, false or warn)."),
    "limit_train_batches": ((int, float), "Training batches an epoch: a count, or a fraction "
                            "of the loader."),
    "limit_val_batches": ((int, float), "Validation batches: a count, or a fraction of the "
                          "loader."),
    "check_val_every_n_epoch": ((int, type(None)), "Validate every this many epochs; null: by "
                                "val_check_interval."),
    "log_every_n_steps": (int, "How often the Trainer logs training steps."),
}
#: The types each of :data:`TRAINER_FIELDS` may have.
TRAINER_KEYS: dict[str, type | tuple[type, ...]] = {
    key: types for key, (types, _) in TRAINER_FIELDS.items()}
#: One sentence on each of :data:`TRAINER_FIELDS`, for the reference.
TRAINER_DOCS: dict[str, str] = {key: doc for key, (_, doc) in TRAINER_FIELDS.items()}
#: ``trainer.logger``: where each trial's epochs are logged besides its ``metrics.csv`` (always
#: written): ``tensorboard`` adds a TensorBoard run per trial under ``run_dir/<study>/``.
LOGGERS = ("tensorboard", "csv")
#: The command that installs what ``trainer.logger: tensorboard`` needs.
TENSORBOARD_INSTALL = "pip install 'lightning-async-hpo[tensorboard]'"
_SYNC = ("sync_sh", "sync_hyperband")
_STAGED = ("asha", "hyperband")


def _n_trials(path: str, value: Any) -> int | None:
    """``stop.n_trials``: an integer from 1 to :data:`MAX_N_TRIALS`, or null."""
    allowed = f"must be an integer from 1 to {MAX_N_TRIALS}"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < 1:
        raise ConfigError(path, f"is {value!r}, but {allowed}")
    if int(value) > MAX_N_TRIALS:
        raise ConfigError(path, f"is {value}, but {allowed} (the study queues every trial of it "
                          "before the first starts, and a queued trial cannot be taken back); "
                          "for a longer study, give stop.max_wallclock_time without n_trials")
    return int(value)


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

    name: PrunerName = spec("asha", "The multi-fidelity rule (or a bare name: pruner: none).")
    min_resource: int = spec(1, "The epochs of the first rung.", minimum=1, unit="epochs")
    max_resource: int | None = spec(
        None, "The epochs a trial may train at most (the last rung).", minimum=1, unit="epochs",
        default_text="trainer.max_epochs")
    reduction_factor: int = spec(3, "Each rung keeps 1/reduction_factor of the trials, each "
                                 "trained reduction_factor times longer.", minimum=2)
    mode: Mode = spec("stop", "Stop trials below a rung's cut, or pause every trial at each "
                      "rung for promotion.", pruners=_STAGED)
    prefact: int = spec(1, "Configurations per round, times reduction_factor**K.", minimum=1,
                        pruners=_SYNC)
    resume: bool = spec(True, "Continue promoted trials from their checkpoint (false: retrain "
                        "from scratch).", pruners=_SYNC)
    finish_best: bool = spec(
        True, "With stop.n_trials, train the best paused trial of the highest rung on to "
        "max_resource.", pruners=(*_STAGED, *_SYNC), when=lambda pruner: pruner.pauses,
        applies="pruner mode: promotion (asha or hyperband), sync_sh and sync_hyperband")

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

    n_trials: int | None = spec(None, "The trials to run (queued before the first starts).",
                                minimum=1, maximum=MAX_N_TRIALS, check=_n_trials)
    max_wallclock_time: float | None = spec(None, "End the study after this long.", minimum=0,
                                            above=True, unit="seconds")
    max_failed_trials: int | None = spec(None, "End the study after this many failed trials.",
                                         minimum=1)
    grace: float = spec(0.0, "How long running trials may go on to their next epoch when the "
                        "study ends early.", minimum=0, unit="seconds")
    max_retries: int = spec(2, "How often a trial whose worker died resumes from its "
                            "checkpoint.", minimum=0)


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

    every: CheckpointPolicy = spec("auto", "When a trial's resume checkpoint is written.")
    max_paused: int | None = spec(
        None, "Keep at most this many trials paused at a rung; beyond it the least promotable "
        "end PRUNED.", minimum=1, when=lambda pruner: pruner.mode == "promotion",
        applies="pruner mode: promotion (asha or hyperband)", default_text="null (no bound)")


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

    interval: int = spec(60, "How often a training worker records a heartbeat.", minimum=1,
                         unit="seconds")
    grace_period: int = spec(180, "A trial whose last heartbeat is older is resumed elsewhere.",
                             minimum=1, unit="seconds", default_text="3 × interval",
                             allowed_text="> interval")


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
    direction: Direction
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


def _top(type_text: str, default_text: str, doc: str, allowed_text: str = "",
         applies: str = "") -> FieldDoc:
    return FieldDoc(doc, type_text=type_text, default_text=default_text,
                    allowed_text=allowed_text, applies=applies)


_CLI_ONLY = "LightningCLI configs"
#: The default of each top-level key a config may leave out that is not a section of its own:
#: :func:`~lightning_hpo.launch.config.parse_config` fills them in from here, and the reference
#: prints them from here.
TOP_DEFAULTS: dict[str, Any] = {
    "run_dir": "runs", "data": "digits", "metric": "validation_error", "direction": "minimize",
    "initial": [], "sampler": "random", "seed": None, "pruner": "asha",
}


def _default(key: str) -> str:
    """``TOP_DEFAULTS[key]`` as the reference writes it (``null``, ``[]``, a name)."""
    value = TOP_DEFAULTS[key]
    return "null" if value is None else ("[]" if value == [] else str(value))


#: The top-level keys in the order :func:`~lightning_hpo.launch.config.parse_config` reads them
#: (``TOP_LEVEL``), each with its doc; a ``section`` key has a table of its own.
TOP_FIELDS: dict[str, FieldDoc] = {
    "study": _top("string", "required", "The Optuna study's name.",
                  "letters, digits, . _ -"),
    "storage": _top("string", "runs/<study>.journal", "A journal file path or an Optuna "
                    "storage URL (PostgreSQL for several machines)."),
    "run_dir": _top("string", _default("run_dir"), "Where each trial's logs and checkpoints go "
                    "(run_dir/<study>)."),
    "cli": _top("string", "", "Your project's LightningCLI, as package.module:function.",
                applies=_CLI_ONLY),
    "config": _top("list of paths", "", "The project's own config files, given to its CLI.",
                   applies=_CLI_ONLY),
    "model": _top("name or mapping", "", "A registry name or class path, with fixed "
                  "arguments ({name: lenet, ...}) or a LightningCLI {class_path: ...}."),
    "data": _top("name or mapping", _default("data"), "A registry name, with fixed arguments."),
    "metric": _top("string or list", _default("metric"), "The logged metric to optimize; a "
                   "list of them for several objectives."),
    "direction": _top("choice or list", _default("direction"), "Whether the metric is minimized or "
                      "maximized; a list, one per metric.", ", ".join(DIRECTIONS)),
    "space": _top("mapping", "", "The hyperparameters searched ({lr: {loguniform: [a, b]}}).",
                  "at least one searched"),
    "initial": _top("list of mappings", _default("initial"),
                    "Configurations tried first, each a trial.", "values inside the space"),
    "sampler": _top("section", _default("sampler"), "Optuna's sampler (a name, or a section)."),
    "seed": _top("integer or null", _default("seed"), "The seed of the sampler and of every "
                 "trial's training.", "0 to 4294967295"),
    "pruner": _top("section", _default("pruner"), "The multi-fidelity schedule."),
    "devices": _top("section", "", "How trials share the machine's devices."),
    "stop": _top("section", "", "When the study ends."),
    "trainer": _top("section", "", "Lightning Trainer arguments for every trial."),
    "optimizer": _top("mapping", "", "The CLI's optimizer section.", applies=_CLI_ONLY),
    "lr_scheduler": _top("mapping", "", "The CLI's lr_scheduler section.", applies=_CLI_ONLY),
    "checkpoint": _top("section", "", "The resume checkpoint each trial keeps."),
    "heartbeat": _top("section", "null", "Optuna's RDB heartbeat, to resume the trials of a "
                      "lost machine.", applies="PostgreSQL and MySQL storages"),
}
#: The ``sampler:`` section's keys.
SAMPLER_FIELDS: dict[str, FieldDoc] = {
    "name": _top("choice", _default("sampler"), "A built-in Optuna sampler.", ", ".join(SAMPLERS)),
    "class": _top("string", "", "Your own sampler as package.module:Class; its constructor's "
                  "arguments go beside it.", "an optuna.samplers.BaseSampler subclass"),
    "seed": _top("integer or null", "null", "The same as the top-level seed (give one).",
                 "0 to 4294967295"),
}
#: ``trainer.logger``: the launcher's own Trainer key (the others are :data:`TRAINER_KEYS`).
LOGGER_FIELD = _top("choice", "tensorboard if installed, else csv", "Where each trial's "
                    "epochs are logged besides its metrics.csv.", ", ".join(LOGGERS))
