"""Train one segment of a trial: the Trainer the worker builds, its callbacks and loggers.

:func:`train` fits a model from its resume checkpoint (or from scratch) up to a segment's last
epoch (:class:`FitRange`), with the callbacks that report each epoch to the study
(``Progress``), keep the best and resume checkpoints, and share the slot's cores;
:func:`replay` retrains a finished trial's values for the best-config files. The trial loop
that calls it is :mod:`lightning_hpo.launch.worker.loop`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import lightning as L
import optuna
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import Logger
from lightning.pytorch.plugins import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn

from lightning_hpo._optuna import set_user_attrs
from lightning_hpo.builtin.data import build_datamodule, datamodule_hyperparameters
from lightning_hpo.builtin.models import MODELS, build_model
from lightning_hpo.builtin.tensor_data import TensorDataModule
from lightning_hpo.callbacks import PruningCallback, not_logged
from lightning_hpo.checkpointing import CheckpointWriteError, RandomState, ResumeCheckpoint
from lightning_hpo.distributed import (
    share_segment,
)
from lightning_hpo.launch.config import Config
from lightning_hpo.launch.config.changes import LAUNCHER_MODEL_ARGS
from lightning_hpo.launch.config.devices import split_cores
from lightning_hpo.launch.config.space import suggest
from lightning_hpo.launch.processes.protocol import (
    EventWriter,
    WorkerSpec,
    read_stop_orders,
)
from lightning_hpo.launch.study.trials import (
    record_resume_point,
)
from lightning_hpo.launch.worker._csvlog import SegmentCSVLogger
from lightning_hpo.launch.worker._tblog import TrialTensorBoardLogger
from lightning_hpo.report.best_config import CONFIG_NAME, write_text_whole
from lightning_hpo.schedules import Value
from lightning_hpo.schema import ATTR

_logger = logging.getLogger(__name__)

class Stop:
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


class Progress(L.Callback):
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
            signal.signal(signal.SIGTERM, on_signal if trainer.is_global_zero else ignore_signal)
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
                stop = Stop.budget is not None and not last
        if trainer.strategy.broadcast(stop, src=0):  # every DDP rank stops after this epoch
            self.budget_stop = f"{Stop.budget}; stopped after epoch {epoch}"
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
        if trainer.is_global_zero and Stop.reason is None and os.getppid() != self._launcher_pid:
            Stop.reason = "the launcher process stopped"
        how = _STOP_NONE
        if Stop.reason is not None:
            how = _STOP_INTERRUPT
        elif Stop.now and Stop.budget is not None:
            how = _STOP_BUDGET
        if trainer.world_size > 1:  # rank 0 decides, every rank leaves at this same batch
            how = _agree(how, trainer.strategy.root_device)
        if how == _STOP_INTERRUPT:
            raise Interrupted(Stop.reason or "interrupted by rank 0")
        if how == _STOP_BUDGET:
            raise BudgetStop(f"{Stop.budget}; stopped during epoch {trainer.current_epoch + 1}")


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


def ignore_signal(signum: int, frame: Any) -> None:
    """A DDP follower's SIGTERM during a fit: rank 0 decides (:func:`_agree`)."""


class Interrupted(Exception):
    """The trial was stopped from outside (signal, launcher gone): it ends FAIL."""


class BudgetStop(Exception):
    """The study's budget stopped the trial: it pauses with what it reported."""


class AlreadyTrained(Exception):
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
    trial: Any, cfg: Config, spec: WorkerSpec, progress: Progress, segment: FitRange = FitRange()
) -> tuple[Value, str | None]:
    """Train one segment of a trial on this slot; every DDP rank runs it.

    Returns:
        The metric after the segment's last epoch (a tuple, one per objective, in a study with
        several), and the best checkpoint's path (chosen by the first objective).

    Raises:
        optuna.TrialPruned: the pruner stopped it.
        BudgetStop: the study's budget stopped it (``progress.checkpoint`` holds its best
            checkpoint so far).
        AlreadyTrained: the checkpoint held every epoch of the segment; nothing was trained.
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
    else:  # the project's own LightningCLI builds them (lightning_hpo.launch.checks.project)
        from lightning_hpo.launch.checks.project import build_trial

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
        raise AlreadyTrained(trainer.current_epoch)
    pruning.raise_if_pruned()
    if progress.budget_stop is not None:
        raise BudgetStop(progress.budget_stop)
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
    cfg: Config, trial_dir: Path, params: dict[str, Any], progress: Progress, segment: FitRange
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

    from lightning_hpo.launch.worker._csvlog import SegmentWriter

    for logger in loggers:
        if isinstance(logger, CSVLogger) and not isinstance(logger, SegmentCSVLogger):
            os.makedirs(logger.log_dir, exist_ok=True)
            logger._experiment = SegmentWriter(logger.log_dir, resume_epoch)


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
    value, _ = train(trial, cfg, spec, Progress(cfg, number, EventWriter(-1), spec))
    return value if isinstance(value, float) else value[0]


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


def on_signal(signum: int, frame: Any) -> None:
    Stop.reason = f"signal {signal.Signals(signum).name}"
    Stop.read_orders()  # the launcher's SIGTERM comes after an order saying why it stopped
