"""The launcher's config as typed records: :class:`Config` and its sections, and the closed choices.

:class:`Config` is what :func:`~lightning_hpo.launch.config.parse_config` returns: every field
validated and every default filled. The tuples below are the allowed values of the fields with a
closed choice (``sampler``, ``pruner.name``, ``pruner.mode``, ``checkpoint.every``,
``direction``, ``trainer.logger``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lightning_hpo.launch.config.cli_spec import (
    CliSpec,
)
from lightning_hpo.launch.config.devices import DevicesSpec
from lightning_hpo.launch.config.space import Space

if TYPE_CHECKING:
    pass

SAMPLERS = ("random", "tpe", "gp")
PRUNERS = ("asha", "hyperband", "sync_sh", "sync_hyperband", "none")
#: ``pruner.mode`` of asha and hyperband: stop trials at rungs, or pause them for promotion.
MODES = ("stop", "promotion")
#: ``checkpoint.every``: when a trial's resume checkpoint is written.
CHECKPOINT_POLICIES = ("auto", "epoch", "rung")
DIRECTIONS = ("minimize", "maximize")
#: The most ``stop.n_trials`` may be. The launcher queues the whole budget (one WAITING trial
#: each) before any trial starts, Optuna deletes no trial, and a study holding more queued
#: trials than a later config's ``n_trials`` is refused, so a mistyped huge number would spend
#: minutes queueing and leave thousands behind. 10,000 keeps setting up within a minute on any
#: storage (the queue goes in one write, ``_optuna.enqueue_trials``), and is far beyond a
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
