"""A long-lived worker: one slot, many trials, torch imported once.

The supervisor starts ``python -m lightning_hpo.launch.worker`` once per slot (and again if it
dies). The worker claims a trial, trains it, tells the study, and claims the next, with no new
interpreter in between: importing torch and Lightning costs seconds, a gap between two trials
costs milliseconds. With ``devices.per_trial > 1`` the worker is rank 0 of a DDP group that
Lightning launches at the first ``fit`` and keeps; the other ranks run this same module, see
:func:`lightning_hpo.is_follower`, and follow rank 0 trial by trial.

It reads its config from ``LIGHTNING_HPO_CONFIG`` and its slot from ``LIGHTNING_HPO_WORKER``
(both JSON; environment, not argv, so the storage password stays out of ``ps``) and writes
events as JSON lines to the file descriptor the supervisor passed.

Each job is a *segment* (:class:`~lightning_hpo.launch.scheduler.Assignment`): train a trial
until a number of epochs is done, from scratch or from the trial's resume checkpoint
(``trial_NNNNN/resume.ckpt``, written by :class:`~lightning_hpo.checkpointing.ResumeCheckpoint`
with the random-number state, so a resumed trial trains as it would have straight through).
A segment that ends below ``max_epochs`` pauses the trial for the scheduler (a rung of
``sync_sh`` or promotion ASHA).

How a trial ends when it is stopped from outside:

* the study's budget is spent (a :class:`~lightning_hpo.launch.protocol.StopOrder`), or
  SIGTERM/SIGINT, or the launcher gone: it *pauses* at its last checkpoint, keeping the values
  it reported, with ``why`` saying where it stopped (``"wall-clock budget reached
  (stop.max_wallclock_time=200 s); stopped after epoch 7"``), and the next run resumes it;
  during ``stop.grace`` it first finishes its epoch, and a trial that reaches its last epoch
  ends COMPLETE as usual;
* a checkpoint that cannot be written (disk full, folder not writable): FAIL,
  ``"CheckpointWriteError: cannot write checkpoint /runs/s/trial_00003/best.ckpt: No space left
  on device"``; the worker goes on with the next trial.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning_hpo.launch._collector import imports_without_collection

# torch, Lightning and the rest with the garbage collector paused, in the worker's process only:
# about 1 s less CPU before its first trial (launch/_collector.py).
with imports_without_collection(__name__ == "__main__"):
    import lightning as L
    import optuna
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import Logger
    from lightning.pytorch.plugins import TorchCheckpointIO
    from lightning.pytorch.trainer.states import TrainerFn
    from optuna.trial import TrialState

    from lightning_hpo._optuna import backend_of, set_user_attrs, storage_of, trial_id_of
    from lightning_hpo._scratch import scratch_prefix
    from lightning_hpo.callbacks import PruningCallback, not_logged
    from lightning_hpo.checkpointing import CheckpointWriteError, RandomState, ResumeCheckpoint
    from lightning_hpo.data import build_datamodule, datamodule_hyperparameters
    from lightning_hpo.distributed import is_follower
    from lightning_hpo.distributed._channel import LeaderChannel
    from lightning_hpo.distributed._follower import FollowerStudy, LeaderTrial, share_segment
    from lightning_hpo.errors import ConfigError
    from lightning_hpo.launch._csvlog import SegmentCSVLogger
    from lightning_hpo.launch._exit import fast_exit
    from lightning_hpo.launch._once import say_once
    from lightning_hpo.launch._tblog import TrialTensorBoardLogger
    from lightning_hpo.launch.changes import LAUNCHER_MODEL_ARGS
    from lightning_hpo.launch.config import (
        Config,
        check_against_registry,
        parse_config,
        range_end,
    )
    from lightning_hpo.launch.devices import split_cores
    from lightning_hpo.launch.protocol import (
        CONFIG_ENV,
        RANKS_LOST,
        STOP_SIGNAL,
        TRIAL_LIMIT,
        WORKER_ENV,
        EventWriter,
        WorkerSpec,
        read_go,
        read_stop_orders,
    )
    from lightning_hpo.launch.scheduler import WAIT_SECONDS, Assignment, Scheduler
    from lightning_hpo.launch.search import sampler_for_trial
    from lightning_hpo.launch.space import suggest
    from lightning_hpo.launch.study import open_study
    from lightning_hpo.launch.trials import (
        close_segment,
        end_trial,
        open_segment,
        record_resume_point,
        remove_resume_checkpoint,
    )
    from lightning_hpo.models import MODELS, build_model
    from lightning_hpo.pareto import is_finite_point
    from lightning_hpo.report.best_config import CONFIG_NAME, write_text_whole
    from lightning_hpo.schedules import Value
    from lightning_hpo.schema import ATTR, Owner, Segment, objective_curve
    from lightning_hpo.storage import open_storage
    from lightning_hpo.tensor_data import TensorDataModule

_logger = logging.getLogger(__name__)

class _Stop:
    """Why the worker should stop claiming, and how the trial it trains ends.

    ``reason`` (a signal, the launcher gone; an interrupt order's words) interrupts the trial:
    it pauses at its last checkpoint, to be resumed. ``budget`` (the supervisor's stop order)
    ends it PRUNED: at its next epoch boundary, or at its next training batch once ``now`` is
    set.
    """

    reason: str | None = None
    budget: str | None = None
    now: bool = False
    control_fd: int = -1

    @classmethod
    def read_orders(cls) -> None:
        """Take the supervisor's stop orders waiting on the control pipe."""
        for order in read_stop_orders(cls.control_fd):
            if order.interrupt:  # why the launcher's SIGTERM comes (it follows the order)
                cls.reason = order.reason
                continue
            cls.budget = order.reason
            cls.now = cls.now or order.now


class _Progress(L.Callback):
    """Records epoch end times and values (rank 0), emits events, and stops on request.

    An epoch's end times reach the study in the same write as the resume point its checkpoint
    records (:meth:`saved`, right after the epoch), or, where no checkpoint is saved after it,
    when the next epoch starts or the fit ends (:meth:`flush`): one write an epoch fewer than
    two, and a worker killed while the checkpoint is written leaves neither the epoch's end time
    nor its resume point, not the one without the other.
    """

    def __init__(
        self, cfg: Config, trial_number: int, events: EventWriter, spec: WorkerSpec,
        trial: Any = None, rungs: tuple[int, ...] = (),
    ) -> None:
        self._metric = cfg.metric
        self._metrics = [metric for metric, _ in cfg.objectives] if cfg.several else []
        self._trial = trial_number
        self._events = events
        self._launcher_pid = spec.launcher_pid
        self._live = trial  # rank 0's live trial: the resume point is written to it
        self.rungs = rungs
        self.epoch_end_times: list[float] = []
        self.params: dict[str, Any] = {}
        self.budget_stop: str | None = None  # set when the budget stopped it at an epoch's end
        self.checkpoint: str | None = None  # the best checkpoint written, once fit is over
        self.data: str | None = None  # where the batches came from, once fit is over
        self.resume: ResumeCheckpoint | None = None
        self.from_epoch = 0  # epochs in the checkpoint this segment started from
        self.prior_times: list[float] = []  # the trial's epoch end times before this segment
        self.known: list[float] | None = None  # all of them, when it resumes from a checkpoint
        self.trained = False  # this fit reached its training loop (not all done in the checkpoint)
        self._unwritten = False  # an epoch end time the study has not been told yet
        # a callback (the project's EarlyStopping) ended fit before its last epoch
        self.stopped_early = False
        self._validated = False  # fit validated during the current epoch

    def all_epoch_end_times(self) -> list[float]:
        """One end time per epoch of the trial, across its segments: an epoch trained again
        (a retrain from scratch) keeps its first time, one after a crash its new time."""
        merged = list(self.prior_times)
        for index, end in enumerate(self.epoch_end_times):
            if self.from_epoch + index + 1 > len(merged):
                merged.append(end)
        return merged

    def saved(self, epoch: int, path: str) -> None:
        """A resume checkpoint was written (rank 0): the study learns where to resume from,
        and the end times of the epochs it holds, in one write."""
        if self._live is None:
            return
        times = {ATTR.EPOCH_END_TIMES: self.all_epoch_end_times()} if self._unwritten else {}
        record_resume_point(self._live, epoch, path, times)
        self._unwritten = False

    def flush(self) -> None:
        """Write the epoch end times no checkpoint's write took along (rank 0)."""
        if self._unwritten and self._live is not None:
            self._live.set_user_attr(ATTR.EPOCH_END_TIMES, self.all_epoch_end_times())
        self._unwritten = False

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.flush()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.flush()
        self.stopped_early = bool(trainer.should_stop)

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self.flush()

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero:
            self._events.emit("fit_start", trial=self._trial, params=self.params)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.trained = True
        if trainer.world_size > 1:  # Lightning's SIGTERM handler is in place now: replace it
            signal.signal(signal.SIGTERM, _on_signal if trainer.is_global_zero else _ignore)
        # The checkpoint is the truth: a worker that died between writing it and recording
        # its resume point leaves a study one epoch behind the file Lightning just restored.
        if self.known is not None and trainer.current_epoch != self.from_epoch:
            _logger.warning("trial %d: its checkpoint holds %d epochs, the study said %d",
                            self._trial, trainer.current_epoch, self.from_epoch)
            self.from_epoch = trainer.current_epoch
            self.prior_times = _times_for(self.known, self.from_epoch, trainer.ckpt_path)
            self._unwritten = len(self.known) < self.from_epoch  # the stand-ins: written next

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking and trainer.state.fn == TrainerFn.FITTING:
            self._validated = True  # the epoch's values are read at its end, its last validation

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Every epoch trained has an end time (one, however often it validated:
        ``val_check_interval < 1``) and reaches the launcher; an epoch that validated brings its
        value, and is where the budget's stop may end the trial (it has a value to show for its
        last epoch)."""
        validated, self._validated = self._validated, False
        epoch = trainer.current_epoch + 1
        if validated:
            self._check_logged(trainer, epoch)
        stop = False
        if trainer.is_global_zero:
            self.epoch_end_times.append(time.time())
            self._unwritten = True  # kept per epoch (a worker may die before the end): saved
            self._report(trainer, epoch, validated)
            if validated:
                # The budget is spent: stop at this epoch boundary, unless it was the last.
                last = trainer.max_epochs is not None and 0 < trainer.max_epochs <= epoch
                stop = _Stop.budget is not None and not last
        if trainer.strategy.broadcast(stop, src=0):  # every DDP rank stops after this epoch
            self.budget_stop = f"{_Stop.budget}; stopped after epoch {epoch}"
            trainer.should_stop = True

    def _check_logged(self, trainer: L.Trainer, epoch: int) -> None:
        """Every rank, at the end of an epoch that validated: fail the trial when a metric of
        the config is not logged (yet), naming what was. The launcher reads the metrics at
        every such epoch, and its ModelCheckpoint would refuse the first one next with a message
        of its own; the plain PruningCallback skips such an epoch and waits for the end of fit.
        """
        logged = trainer.callback_metrics
        for index, metric in enumerate(self._metrics or [self._metric]):
            if metric not in logged:
                field = f"metric[{index}]" if self._metrics else "metric"
                raise not_logged(field, metric, logged, f"epoch {epoch}",
                                 trainer.logged_metrics)

    def _report(self, trainer: L.Trainer, epoch: int, validated: bool) -> None:
        """Rank 0: the epoch trained to the launcher, with its value (values) where it
        validated (``check_val_every_n_epoch > 1`` leaves epochs without one)."""
        if not validated:
            self._events.emit("epoch", trial=self._trial, epoch=epoch)
            return
        value = trainer.callback_metrics.get(self._metric)
        extra = {}
        if self._metrics:  # several objectives: the status line shows each
            logged = trainer.callback_metrics
            extra["values"] = [None if logged.get(m) is None else float(logged[m])
                               for m in self._metrics]
        self._events.emit(
            "epoch", trial=self._trial, epoch=epoch,
            value=None if value is None else float(value), **extra,
        )

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.is_global_zero and _Stop.reason is None and os.getppid() != self._launcher_pid:
            _Stop.reason = "the launcher process stopped"
        how = _STOP_NONE
        if _Stop.reason is not None:
            how = _STOP_INTERRUPT
        elif _Stop.now and _Stop.budget is not None:
            how = _STOP_BUDGET
        if trainer.world_size > 1:  # rank 0 decides, every rank leaves at this same batch
            how = _agree(how, trainer.strategy.root_device)
        if how == _STOP_INTERRUPT:
            raise _Interrupted(_Stop.reason or "interrupted by rank 0")
        if how == _STOP_BUDGET:
            raise _BudgetStop(f"{_Stop.budget}; stopped during epoch {trainer.current_epoch + 1}")


class _BestCheckpoint(ModelCheckpoint):
    """The trial's ``best.ckpt``: a ``ModelCheckpoint`` whose state has a key of its own.

    Lightning keys a callback's state by its class name and settings, and refuses two stateful
    callbacks with one key: this class's name keeps it apart from a project's own
    ``ModelCheckpoint`` on the same metric.
    """

    @property
    def _legacy_state_key(self) -> Any:
        # Lightning's fallback when the state key is missing: a resume checkpoint written
        # while this was a plain ModelCheckpoint keeps its state under that class's name
        return "ModelCheckpoint" + self.state_key[len(type(self).__qualname__):]


class _CoreShare(L.Callback):
    """Once the data module has set up (it knows whether it runs a ``DataLoader``), divide the
    slot's cores between torch threads and the loader's processes (:func:`split_cores`)."""

    def __init__(self, share: int) -> None:
        self._share = share

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        data = getattr(trainer, "datamodule", None)
        loaders = getattr(data, "num_workers", 0)
        if isinstance(data, TensorDataModule) and not data.uses_loader:
            loaders = 0
        threads, _ = split_cores(self._share, loaders if isinstance(loaders, int) else 0)
        torch.set_num_threads(threads)


#: What a rank says at a batch's end: go on, stop for the budget, be interrupted (the highest
#: of all ranks' wins: :func:`_agree`).
_STOP_NONE, _STOP_BUDGET, _STOP_INTERRUPT = 0, 1, 2


def _agree(how: int, device: torch.device) -> int:
    """The highest ``how`` of every DDP rank (one all-reduce of one number). Only rank 0 has
    orders and signals (a DDP slot's other ranks ignore SIGTERM during a fit: a SLURM job's
    signal reaches every process, and Lightning's own handler would then start a collective
    in one rank while another is in the middle of its backward pass, which hangs both)."""
    flag = torch.tensor([how], dtype=torch.int32, device=device)
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    return int(flag.item())


def _ignore(signum: int, frame: Any) -> None:
    """A DDP follower's SIGTERM during a fit: rank 0 decides (:func:`_agree`)."""


class _Interrupted(Exception):
    """The trial was stopped from outside (signal, launcher gone): it ends FAIL."""


class _BudgetStop(Exception):
    """The study's budget stopped the trial: it pauses with what it reported."""


class _AlreadyTrained(Exception):
    """The checkpoint a segment resumed from already held ``epochs >=`` its target: the
    worker that wrote it died before the study was told how the segment ended."""

    def __init__(self, epochs: int) -> None:
        super().__init__(f"the checkpoint already holds {epochs} epochs")
        self.epochs = epochs


class _CheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, with errors that name the checkpoint file and no
    truncated file left where the write failed (trial folders are local)."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        try:
            super().save_checkpoint(checkpoint, path, storage_options)
        except OSError as error:  # e.g. "No space left on device: '/tmp/tmpab12' -> 'best.ckpt'"
            with contextlib.suppress(OSError):
                os.remove(path)
            raise CheckpointWriteError(
                f"cannot write checkpoint {path}: {error.strerror or error}"
            ) from error


@dataclasses.dataclass(frozen=True)
class FitRange:
    """What one ``fit`` trains: until ``to_epoch`` epochs are done (``None``: ``max_epochs``),
    from ``checkpoint`` (``None``: from scratch)."""

    to_epoch: int | None = None
    checkpoint: str | None = None


def train(
    trial: Any, cfg: Config, spec: WorkerSpec, progress: _Progress, segment: FitRange = FitRange()
) -> tuple[Value, str | None]:
    """Train one segment of a trial on this slot; every DDP rank runs it.

    Returns:
        The metric after the segment's last epoch (a tuple, one per objective, in a study with
        several), and the best checkpoint's path (chosen by the first objective).

    Raises:
        optuna.TrialPruned: the pruner stopped it.
        _BudgetStop: the study's budget stopped it (``progress.checkpoint`` holds its best
            checkpoint so far).
        _AlreadyTrained: the checkpoint held every epoch of the segment; nothing was trained.
        CheckpointWriteError: a checkpoint could not be written.
    """
    params = progress.params = suggest(trial, cfg.space)
    if hasattr(trial, "share"):  # a DDP slot: the other ranks train the same segment
        segment = FitRange(**share_segment(trial, dataclasses.asdict(segment)))
    seed = (cfg.seed or 0) + trial.number
    trial_dir = cfg.study_dir.resolve() / f"trial_{trial.number:05d}"
    metrics = [metric for metric, _ in cfg.objectives]
    pruning = PruningCallback(trial, monitor=metrics if cfg.several else cfg.metric)
    checkpoint = _BestCheckpoint(
        dirpath=trial_dir, filename="best", monitor=cfg.metric,
        mode="min" if cfg.direction == "minimize" else "max", save_top_k=1,
        enable_version_counter=False,
    )
    resume = progress.resume = ResumeCheckpoint(
        trial_dir / "resume.ckpt", every=cfg.checkpoint.every, rungs=progress.rungs,
        on_save=progress.saved,
    )
    callbacks = [_CoreShare(spec.threads), pruning, progress, checkpoint, RandomState(), resume]
    loggers = _loggers(cfg, trial_dir, params, progress, segment)
    subcommand: str | None = None  # a LightningCLI project's: see ATTR.CLI_SUBCOMMAND
    if cfg.cli is None:
        model_kwargs, data_kwargs = _constructor_kwargs(cfg, spec, params)
        L.seed_everything(seed, workers=True, verbose=False)
        model = build_model(cfg.model, **model_kwargs)
        data: L.LightningDataModule | None = build_datamodule(cfg.data, **data_kwargs)
        args = {**_trainer_args(cfg, spec, segment, trial_dir), **cfg.trainer}
        args["plugins"] = [*_listed(cfg.trainer.get("plugins")), _CheckpointIO()]
        trainer = L.Trainer(**args, callbacks=callbacks, logger=loggers)
    else:  # the project's own LightningCLI builds them (lightning_hpo.launch.project)
        from lightning_hpo.launch.project import build_trial

        built = build_trial(cfg.cli, params, trainer_args=_trainer_args(cfg, spec, segment,
                            trial_dir), callbacks=callbacks, loggers=loggers,
                            trial_dir=trial_dir, seed=seed, max_epochs=cfg.max_epochs,
                            cores=spec.threads)
        model, data, trainer, seed = built.model, built.datamodule, built.trainer, built.seed
        subcommand = built.subcommand
        if segment.checkpoint is not None and trainer.is_global_zero:
            _keep_project_csv_logs(trainer.loggers[1:], progress.from_epoch)
        if trainer.is_global_zero:
            # python main.py fit --config trial_NNNNN/config.yaml retrains it
            write_text_whole(trial_dir / CONFIG_NAME, built.config_text)
    if trainer.is_global_zero:
        attrs: dict[str, Any] = {ATTR.SEED: seed, ATTR.LOG_DIR: str(trial_dir)}
        if subcommand is not None:
            attrs[ATTR.CLI_SUBCOMMAND] = subcommand
        set_user_attrs(trial, attrs)
    try:
        # Our own resume checkpoints; a CLI-built model's hyperparameters hold the CLI's
        # instantiator (a function), which torch's weights-only loading refuses.
        trainer.fit(model, datamodule=data, ckpt_path=segment.checkpoint,
                    weights_only=cfg.cli is None)
    finally:
        progress.checkpoint = checkpoint.best_model_path or None
        data_path = getattr(data, "data_path", None)
        progress.data = data_path if isinstance(data_path, str) else None
    if segment.checkpoint is not None and not progress.trained:
        raise _AlreadyTrained(trainer.current_epoch)
    pruning.raise_if_pruned()
    if progress.budget_stop is not None:
        raise _BudgetStop(progress.budget_stop)
    values = [trainer.callback_metrics.get(metric) for metric in metrics]
    for metric, value in zip(metrics, values, strict=True):
        if value is None:
            raise RuntimeError(f"metric '{metric}' was never logged")
    final = tuple(float(v) for v in values)  # type: ignore[arg-type]
    return (final if cfg.several else final[0]), checkpoint.best_model_path or None


def _constructor_kwargs(
    cfg: Config, spec: WorkerSpec, params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model's and the data module's arguments: the config's fixed ones, and the trial's
    hyperparameters each class takes. A loader's ``num_workers`` is bounded by the slot's share
    of the cores."""
    data_names = datamodule_hyperparameters(cfg.data)
    given = LAUNCHER_MODEL_ARGS if cfg.model in MODELS else {}
    model_kwargs = {**given, **cfg.model_args,
                    **{k: v for k, v in params.items() if k not in data_names}}
    data_kwargs = {**cfg.data_args, **{k: v for k, v in params.items() if k in data_names}}
    if "num_workers" in data_names:
        asked = data_kwargs.get("num_workers", data_names["num_workers"])
        if isinstance(asked, int) and not isinstance(asked, bool):
            data_kwargs["num_workers"] = split_cores(spec.threads, asked)[1]
            if data_kwargs["num_workers"] < asked:
                _logger.info("data.num_workers %d -> %d: this slot's share is %d core(s)",
                             asked, data_kwargs["num_workers"], spec.threads)
    return model_kwargs, data_kwargs


def _loggers(
    cfg: Config, trial_dir: Path, params: dict[str, Any], progress: _Progress, segment: FitRange
) -> list[Logger]:
    """``metrics.csv`` always (the report and tests read it), first: ``trainer.log_dir`` is
    the trial's folder; with ``trainer.logger: tensorboard`` one TensorBoard run per trial in
    the same folder. A resumed segment rewrites its logs from the checkpoint's epoch."""
    resume_epoch = progress.from_epoch if segment.checkpoint else None
    loggers: list[Logger] = [SegmentCSVLogger(trial_dir, resume_epoch)]
    if cfg.logger == "tensorboard":
        loggers.append(TrialTensorBoardLogger(
            trial_dir, params=params, metric=[metric for metric, _ in cfg.objectives],
            resume_epoch=resume_epoch))
    return loggers


def _trainer_args(
    cfg: Config, spec: WorkerSpec, segment: FitRange, trial_dir: Path
) -> dict[str, Any]:
    """The Trainer arguments the launcher owns: this slot's devices (DDP over several), the
    segment's last epoch, the trial's folder, quiet output, checkpoints that name their file."""
    per_trial = len(spec.devices)
    return {
        "accelerator": "gpu" if spec.kind == "gpu" else "cpu",
        "devices": per_trial,
        "strategy": "ddp" if per_trial > 1 else "auto",
        "max_epochs": segment.to_epoch or cfg.max_epochs,
        "plugins": [_CheckpointIO()],
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "default_root_dir": str(trial_dir),
    }


def _keep_project_csv_logs(loggers: list[Logger], resume_epoch: int) -> None:
    """A resumed segment keeps the rows of the epochs its checkpoint holds in the project's own
    ``CSVLogger`` run (Lightning's writer deletes the file it finds), as ``metrics.csv`` does."""
    from lightning.pytorch.loggers import CSVLogger

    from lightning_hpo.launch._csvlog import _SegmentWriter

    for logger in loggers:
        if isinstance(logger, CSVLogger) and not isinstance(logger, SegmentCSVLogger):
            os.makedirs(logger.log_dir, exist_ok=True)
            logger._experiment = _SegmentWriter(logger.log_dir, resume_epoch)


def _listed(value: Any) -> list[Any]:
    """A Trainer argument that takes one item or a list, as a list (None: empty)."""
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def replay(cfg: Config, params: dict[str, Any], number: int, run_dir: str) -> float:
    """Train trial ``number`` again from its stored params and seed, on one CPU thread.

    The launcher seeds each trial with ``seed + number``, so a finished trial's result can be
    reproduced from the study alone. Logs and checkpoints go under ``run_dir`` (not the study's,
    which keeps the original's). Returns the metric after the last epoch (the first objective's
    in a study with several).

    Example::

        study = optuna.load_study(study_name=cfg.study, storage=open_storage(cfg.storage))
        best = study.best_trial
        assert replay(cfg, best.params, best.number, "/tmp/replay") == best.value
    """
    cfg = dataclasses.replace(cfg, run_dir=str(run_dir))
    torch.set_num_threads(1)
    spec = WorkerSpec(slot=0, devices=(0,), kind="cpu", threads=1, launcher_pid=os.getppid(),
                      events_fd=-1, deadline=None)
    trial = optuna.trial.FixedTrial(params, number)
    value, _ = train(trial, cfg, spec, _Progress(cfg, number, EventWriter(-1), spec))
    return value if isinstance(value, float) else value[0]


def _run_leader(cfg: Config, spec: WorkerSpec, events: EventWriter) -> str:
    """Rank 0 (or the only rank): ask the scheduler, train the segment, tell, until the budget
    or a stop says no."""
    beat = None if cfg.heartbeat is None else (cfg.heartbeat.interval, cfg.heartbeat.grace_period)
    storage = open_storage(cfg.storage, create=False, heartbeat=beat)
    study, _ = open_study(cfg, storage, queue=False)
    scheduler = Scheduler(study, cfg)
    rungs = tuple(sorted({level for ladder in scheduler.schedule.ladders() for level in ladder}))
    channel = LeaderChannel() if len(spec.devices) > 1 else None
    events.emit("ready", slot=spec.slot, pid=os.getpid())
    trials_run = 0
    try:
        while True:
            if spec.max_trials is not None and trials_run >= spec.max_trials:
                return TRIAL_LIMIT
            why = _why_stop(spec)
            if why is not None:
                return why
            job = scheduler.next(owner=Owner(socket.gethostname(), os.getpid(), trials_run))
            if job == "wait":
                time.sleep(WAIT_SECONDS)
                continue
            if job is None:
                return "no trials left"
            if not job.resumed:  # its values are drawn from its own seed when first suggested
                sampler_for_trial(study, cfg, job.trial.number)
            ranks_fine = _run_segment(cfg, spec, events, scheduler, job, channel, rungs)
            trials_run += 1
            if not ranks_fine:
                return RANKS_LOST
    finally:
        if channel is not None:
            try:
                channel.finish(wait=False)  # _kill_children ends the other ranks
            except Exception:  # the group may be gone after an interrupt; nothing to tell
                _logger.debug("could not tell follower ranks to stop", exc_info=True)


def _why_stop(spec: WorkerSpec) -> str | None:
    """Why this worker must not start another segment, or None."""
    _Stop.read_orders()
    if _Stop.reason is not None:
        return _Stop.reason
    if _Stop.budget is not None:
        return _Stop.budget
    if os.getppid() != spec.launcher_pid:
        return "the launcher process stopped"
    if spec.deadline is not None and time.time() >= spec.deadline:
        return "wall-clock budget reached"
    return None


@dataclasses.dataclass
class _Outcome:
    """How a segment ended: ``state`` None means paused (``how`` ``"paused"`` at a rung or
    ``"interrupted"`` before its target); ``reason`` is the fail, stop or pause reason."""

    state: TrialState | None = TrialState.FAIL
    how: str = "failed"
    value: Value | None = None
    reason: str | None = None
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)  # written at its end


def _run_segment(
    cfg: Config, spec: WorkerSpec, events: EventWriter, scheduler: Scheduler, job: Assignment,
    channel: LeaderChannel | None, rungs: tuple[int, ...],
) -> bool:
    """Train one segment and write how it ended: COMPLETE, PRUNED, FAIL, or paused. False when
    the DDP slot's other ranks cannot train another one (:func:`_end_on_every_rank`)."""
    trial, study = job.trial, scheduler.study
    job = _readable(job)
    segment = _announce(job, spec, events)
    if channel is not None:
        channel.begin_trial(trial.number)
    progress = _progress_for(cfg, job, spec, events, rungs)
    heartbeat = _Heartbeat(study, trial, cfg.heartbeat.interval) if cfg.heartbeat else None
    try:
        outcome = _train_segment(cfg, spec, job, progress, channel, study)
    finally:
        if heartbeat is not None:
            heartbeat.stop()
    outcome, ranks_fine = _end_on_every_rank(channel, trial.number, outcome)
    if not _still_owner(study, trial, job.owner):
        _logger.warning("trial %d was handed to another worker meanwhile; its segment here is "
                        "dropped", trial.number)
        events.emit("end", trial=trial.number, state="LOST", value=None, reason="handed over")
        return ranks_fine
    _record_epochs(trial, job, progress, segment, outcome)
    if outcome.state is None:
        _pause_segment(scheduler, job, progress, outcome, events)
        return ranks_fine
    reason = outcome.reason or ("unknown" if outcome.state == TrialState.FAIL else None)
    end_trial(study, trial.number, outcome.state, value=outcome.value, reason=reason)
    remove_resume_checkpoint(trial)
    first = outcome.value[0] if isinstance(outcome.value, tuple) else outcome.value
    # its values too: a trial that failed before fit started (its model's __init__ refused
    # them) sent no fit_start, and its line would show none
    events.emit("end", trial=trial.number, state=outcome.state.name, value=first,
                reason=reason, params=progress.params)
    return ranks_fine


def _end_on_every_rank(channel: LeaderChannel | None, number: int,
                       outcome: _Outcome) -> tuple[_Outcome, bool]:
    """End trial ``number`` on the DDP slot's other ranks (:meth:`LeaderChannel.end_trial`):
    the outcome, FAIL with their error when it failed on one of them (rank 0 saw only its
    process group break), and whether they can train another trial (not after a failure on
    one of them, nor when rank 0 failed and they are left in a collective). An interrupted
    segment is not asked: the worker stops, and kills its other ranks."""
    if channel is None or outcome.how == "interrupted":
        return outcome, True
    end = channel.end_trial(failed=outcome.state == TrialState.FAIL)
    if end.error is not None:
        reason = f"rank {end.failed_rank}: {type(end.error).__name__}: {end.error}"[:2000]
        _logger.error("trial %d failed on rank %s: %s", number, end.failed_rank, end.error)
        outcome = _Outcome(reason=reason)
    return outcome, end.error is None and end.ended


def _readable(job: Assignment) -> Assignment:
    """The job, retraining from scratch when its checkpoint cannot be read (a damaged file:
    the trial is not lost, it trains again)."""
    problem = None if job.checkpoint is None else _unreadable(job.checkpoint)
    if problem is None:
        return job
    _logger.warning("trial %d: checkpoint %s cannot be read (%s); it retrains from scratch",
                    job.trial.number, job.checkpoint, problem)
    return dataclasses.replace(job, checkpoint=None, from_epoch=0)


def _announce(job: Assignment, spec: WorkerSpec, events: EventWriter) -> Segment:
    """Tell the supervisor, then the study, that the segment starts; returns it, open.

    The supervisor learns of the trial first, and the launcher's pid is the first attribute:
    whenever this process dies from here on, the trial is handed back for it.
    """
    trial, started = job.trial, time.time()
    events.emit("start", trial=trial.number, slot=spec.slot, from_epoch=job.from_epoch,
                to_epoch=job.to_epoch, resumed=job.resumed)
    attrs: dict[str, Any] = {
        ATTR.LAUNCHER_PID: spec.launcher_pid, ATTR.HOST: socket.gethostname(),
        ATTR.SLOT: spec.slot, ATTR.DEVICE: spec.device_label, ATTR.PID: os.getpid(),
    }
    if not job.resumed:
        attrs[ATTR.START] = started
    segment = Segment(started, None, slot=spec.slot, device=spec.device_label,
                      from_epoch=0 if job.checkpoint is None else job.from_epoch, how="running")
    open_segment(trial, segment, attrs)  # one write, the launcher's pid first
    return segment


def _times_for(
    known: list[float], epochs: int, checkpoint: str | os.PathLike[str] | None
) -> list[float]:
    """One end time for each of the ``epochs`` a restored checkpoint holds: the study's, and
    for the epochs whose end times a killed worker never wrote (it died after writing the
    checkpoint, before recording it), the checkpoint file's time, written just after them.

    Example::

        >>> _times_for([10.0, 20.0, 30.0], 2, None), _times_for([10.0], 3, None)[1:] != []
        ([10.0, 20.0], True)
    """
    times = known[:epochs]
    if len(times) < epochs:
        try:
            written = os.path.getmtime(checkpoint) if checkpoint else time.time()
        except OSError:
            written = time.time()
        times += [max(written, times[-1] if times else written)] * (epochs - len(times))
    return times


def _progress_for(
    cfg: Config, job: Assignment, spec: WorkerSpec, events: EventWriter, rungs: tuple[int, ...]
) -> _Progress:
    """The segment's progress callback, knowing the epochs the trial trained before it."""
    trial = job.trial
    progress = _Progress(cfg, trial.number, events, spec, trial=trial, rungs=rungs)
    known = list(trial.user_attrs.get(ATTR.EPOCH_END_TIMES) or [])
    progress.from_epoch = job.from_epoch
    progress.prior_times = known[: job.from_epoch] if job.checkpoint is not None else known
    progress.known = known if job.checkpoint is not None else None
    return progress


def _train_segment(
    cfg: Config, spec: WorkerSpec, job: Assignment, progress: _Progress,
    channel: LeaderChannel | None, study: optuna.Study,
) -> _Outcome:
    """Train the segment (every DDP rank follows) and say how it ended; never raises for a
    trial's own failure."""
    trial = job.trial
    shared = LeaderTrial(trial, channel) if channel is not None else trial
    try:
        try:
            value, checkpoint = train(shared, cfg, spec, progress,
                                      FitRange(job.to_epoch, job.checkpoint))
        except _AlreadyTrained as done:  # its last worker died after the segment's last save
            value, checkpoint = _reported(study, trial, done.epochs), progress.checkpoint
            known = progress.known or []
            progress.from_epoch, progress.prior_times = done.epochs, known[: done.epochs]
        best = {ATTR.CHECKPOINT: checkpoint}
        # Pruned and budget stops raised above: a stop here is the project's own (its
        # EarlyStopping), which ends the trial where fit stopped, as it would straight through;
        # paused, its next segment would train on from there.
        if job.to_epoch < cfg.max_epochs and not progress.stopped_early:
            return _Outcome(None, "paused", value, f"rung {job.to_epoch}", best)
        finite = is_finite_point(value) if isinstance(value, tuple) else math.isfinite(value)
        if finite:
            return _Outcome(TrialState.COMPLETE, "complete", value, attrs=best)
        return _Outcome(value=value, reason=_not_finite(cfg, value), attrs=best)
    except optuna.TrialPruned:
        return _Outcome(TrialState.PRUNED, "pruned")
    except _BudgetStop as stop:  # the study's budget, not the trial: it pauses
        return _Outcome(None, "interrupted", reason=str(stop),
                        attrs={ATTR.CHECKPOINT: progress.checkpoint})
    except (_Interrupted, KeyboardInterrupt, SystemExit) as error:
        reason = f"interrupted: {str(error) or _Stop.reason or type(error).__name__}"
        _Stop.reason = _Stop.reason or reason
        return _Outcome(None, "interrupted", reason=reason)
    except Exception as error:  # a user model's bug, OOM, bad data: the trial fails
        _logger.exception("trial %d failed", trial.number)
        return _Outcome(reason=f"{type(error).__name__}: {error}"[:2000])


def _pause_segment(
    scheduler: Scheduler, job: Assignment, progress: _Progress, outcome: _Outcome,
    events: EventWriter,
) -> None:
    """Pause the trial: at a rung (its segment's last epoch was saved), or interrupted before
    its target (:func:`_paused_at`)."""
    epoch, path = _paused_at(job, progress)
    scheduler.pause(
        job.trial.number, epoch=epoch, checkpoint=path, why=outcome.reason or outcome.how,
        target=job.to_epoch if outcome.how == "interrupted" else None,
    )
    events.emit("pause", trial=job.trial.number, epoch=epoch, reason=outcome.reason)


def _paused_at(job: Assignment, progress: _Progress) -> tuple[int, str | None]:
    """``(epochs, checkpoint)`` a paused segment resumes from: the last checkpoint it wrote,
    or, when it wrote none, the one it started from (``(0, None)``: from scratch).

    At a rung that is the segment's last epoch. An interrupted segment may have reported
    epochs after it: under ``checkpoint.every: rung``, or ``auto`` once a save cost more than
    its share of an epoch, an epoch is reported without being saved, and the next segment
    trains it again from this checkpoint.
    """
    last = progress.resume.last if progress.resume is not None else None
    return last if last is not None else (progress.from_epoch, job.checkpoint)


class _Heartbeat:
    """Records Optuna's RDB heartbeat of a trial every ``interval`` seconds while it trains
    (``heartbeat:`` in the config), so that another launcher sees this machine is alive."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial, interval: int) -> None:
        self._storage = backend_of(study)
        self._trial_id = trial_id_of(trial)
        self._interval = interval
        self._done = threading.Event()
        self._storage.record_heartbeat(self._trial_id)  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._beat, daemon=True, name="heartbeat")
        self._thread.start()

    def _beat(self) -> None:
        while not self._done.wait(self._interval):
            try:
                self._storage.record_heartbeat(self._trial_id)  # type: ignore[attr-defined]
            except Exception:  # the database is briefly away: the next beat may make it
                _logger.warning("could not record the heartbeat", exc_info=True)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def _not_finite(cfg: Config, value: Value) -> str:
    """Why a trial whose last value is NaN or infinite fails: ``"validation_error is nan"``."""
    if not isinstance(value, tuple):
        return f"{cfg.metric} is {value}"
    pairs = zip(cfg.objectives, value, strict=True)
    return ", ".join(f"{metric} is {v}" for (metric, _), v in pairs if not math.isfinite(v))


def _reported(study: optuna.Study, trial: optuna.Trial, epoch: int) -> Value:
    """The value the trial reported at ``epoch`` (its checkpoint is written after the report);
    a tuple in a study with several objectives.

    Raises:
        RuntimeError: it reported none there.
    """
    frozen = storage_of(study).get_trial(trial_id_of(trial))
    values: Mapping[int, Value] = (objective_curve(frozen) if len(study.directions) > 1
                                   else frozen.intermediate_values)
    if epoch not in values:
        raise RuntimeError(f"its checkpoint holds {epoch} epochs but no value was reported at "
                           f"epoch {epoch}")
    return values[epoch]


def _unreadable(path: str) -> str | None:
    """Why the checkpoint at ``path`` cannot be loaded (``weights_only``, as ``fit`` loads
    it), or None when it can. Memory-mapped: the tensors are not read."""
    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # truncated, not a zip file, unpickling refused, gone
        return f"{type(error).__name__}: {error}"[:300]
    return None


def _still_owner(study: optuna.Study, trial: optuna.Trial, owner: Owner) -> bool:
    """False when the scheduler handed the trial to another worker (a heartbeat ran late)."""
    frozen = storage_of(study).get_trial(trial_id_of(trial))
    return Owner.of(frozen) == owner and frozen.state == TrialState.RUNNING


def _record_epochs(
    trial: optuna.Trial, job: Assignment, progress: _Progress, segment: Segment,
    outcome: _Outcome,
) -> None:
    """The trial's epoch count, epoch end times and segments, across all its segments, with
    what else the segment's end records (its best checkpoint, where its data came from), in one
    write.

    A segment that pauses ends where it pauses (:func:`_paused_at`): its ``to_epoch``, and
    the epochs it adds to :data:`ATTR.EPOCHS_TRAINED <ATTR>`, are those in the checkpoint the
    next segment starts from, so that no epoch is counted in two segments and none in neither.
    Epochs an interrupted segment reported past that checkpoint stay in the trial's curve
    (:data:`ATTR.EPOCHS <ATTR>`, their values, their end times until they are trained again)
    and are counted in the segment that trains them again.
    """
    attrs = trial.user_attrs
    times = progress.all_epoch_end_times()
    from_epoch = 0 if job.checkpoint is None else progress.from_epoch
    done = from_epoch + len(progress.epoch_end_times)
    kept = _paused_at(job, progress)[0] if outcome.state is None else done
    trained = int(attrs.get(ATTR.EPOCHS_TRAINED) or 0) + kept - from_epoch
    ended = time.time()
    data = {} if progress.data is None else {ATTR.DATA: progress.data}
    close_segment(trial, dataclasses.replace(segment, from_epoch=from_epoch).closed(
        ended, kept, outcome.how), {
        **outcome.attrs, **data,
        ATTR.EPOCHS: max(done, int(attrs.get(ATTR.EPOCHS) or 0)), ATTR.EPOCH_END_TIMES: times,
        ATTR.EPOCHS_TRAINED: trained, ATTR.END: ended,
    })  # one write


def _run_follower(cfg: Config, spec: WorkerSpec) -> None:
    """Ranks 1..N-1 of a DDP slot: train rank 0's trials, write nothing."""
    quiet = EventWriter(-1)
    FollowerStudy(None, None).optimize(
        lambda trial: train(trial, cfg, spec, _Progress(cfg, trial.number, quiet, spec))[0]
    )


def _on_signal(signum: int, frame: Any) -> None:
    _Stop.reason = f"signal {signal.Signals(signum).name}"
    _Stop.read_orders()  # the launcher's SIGTERM comes after an order saying why it stopped


def _on_stop_order(signum: int, frame: Any) -> None:
    _Stop.read_orders()


def main() -> int:
    """Entry point of ``python -m lightning_hpo.launch.worker`` (started by the supervisor)."""
    cfg = parse_config(json.loads(os.environ[CONFIG_ENV]))
    spec = WorkerSpec.from_json(os.environ[WORKER_ENV])
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    # The slot's log (workers/slotN.log) says which data path each trial took, how the slot's
    # cores were divided, and that training steps are replayed from a CUDA graph (the first
    # time: _once holds back the lines that differ only in the batch's shape).
    for name in ("lightning_hpo.tensor_data", "lightning_hpo._cuda_graph", __name__):
        logging.getLogger(name).setLevel(logging.INFO)
    say_once()  # a notice Lightning repeats every trial is said the first time only
    torch.set_num_threads(spec.threads)
    if is_follower():
        # Rank 0 reads the orders and leads the ranks; SIGUSR1 sent to every process of a SLURM
        # step (srun, --signal=USR1@...) must not end a follower by its default action.
        signal.signal(STOP_SIGNAL, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, _ignore)  # rank 0 stops it (its _kill_children)
        _run_follower(cfg, spec)
        return 0
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    if spec.control_fd >= 0:
        os.set_blocking(spec.control_fd, False)
        _Stop.control_fd = spec.control_fd
    signal.signal(STOP_SIGNAL, _on_stop_order)  # before "ready": the supervisor waits for it
    events = EventWriter(spec.events_fd)
    if spec.hold and not _await_study(cfg, spec, events):
        return 0
    try:
        why = _run_leader(cfg, spec, events)
    finally:
        if len(spec.devices) > 1:
            _kill_children()
    events.emit("exit", slot=spec.slot, reason=why)
    return 0


def _await_study(cfg: Config, spec: WorkerSpec, events: EventWriter) -> bool:
    """A held worker, its imports done: check the config (unless the go line is here already:
    another worker was first and the study exists), warm up, then wait for the go line.
    False when it must not run: the config was refused, or the launcher stopped or is gone."""
    def keep_waiting() -> bool:  # a signal ends the wait
        return _Stop.reason is None

    go = read_go(spec.control_fd, keep_waiting, wait=False)
    if spec.check and not go and not _check_config(cfg, events):
        return False
    _warm_up(cfg)
    if not go and not read_go(spec.control_fd, keep_waiting):
        events.emit("exit", slot=spec.slot, reason=_Stop.reason or "the launcher did not start")
        return False
    return True


def _check_config(cfg: Config, events: EventWriter) -> bool:
    """Check the config against the real classes (:func:`check_against_registry`) here, where
    torch and Lightning are imported anyway, while the launcher waits to create the study.
    Emits ``checked`` with the notes to show once, or ``refused`` with the field and message;
    False when refused."""
    try:
        notes = check_against_registry(cfg)
    except ConfigError as error:
        events.emit("refused", field=error.field, message=error.message)
        return False
    events.emit("checked", notes=notes)
    return True


def _warm_up(cfg: Config) -> None:
    """While the worker waits for the study, do what its first trial would do first whatever
    its values: build the data module (the space's low ends; for a LightningCLI config through
    the project's CLI at the middle of each range, which imports the project) and load a
    ``TensorDataModule``'s tensors into this process's cache. On the slots that do not check
    the config this is time they would spend idle. Never fails the worker: what goes wrong
    here goes wrong again in the trial, where it is reported."""
    try:
        if cfg.cli is None:
            data_names = datamodule_hyperparameters(cfg.data)
            low = {k: range_end(d, 0) for k, d in cfg.space.items() if k in data_names}
            data = build_datamodule(cfg.data, **{**cfg.data_args, **low})
        else:
            from lightning_hpo.launch.project import warm_data

            with tempfile.TemporaryDirectory(prefix=scratch_prefix("warm")) as scratch:
                data = warm_data(cfg.cli, cfg.space, Path(scratch))
        if isinstance(data, TensorDataModule):
            data.prefetch()
    except Exception:  # noqa: BLE001 (the trial reports it)
        _logger.debug("warm-up skipped", exc_info=True)


def _kill_children() -> None:
    """SIGKILL the DDP ranks Lightning started from this process (Linux ``/proc``).

    Followers leave on rank 0's stop message; this covers an interrupted trial, after which a
    follower may still wait in a collective that rank 0 will never join.
    """
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent == me:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue


if __name__ == "__main__":
    fast_exit(main())  # no 2-s teardown of torch: the launcher waits for this exit
