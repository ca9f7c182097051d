"""One TensorBoard run per trial across its segments: :class:`TrialTensorBoardLogger`.

With ``trainer.logger: tensorboard`` the launcher's worker logs each trial twice: to
``metrics.csv`` (:class:`~lightning_hpo.launch.worker._csvlog.SegmentCSVLogger`, always) and to a
TensorBoard event file in the same folder, ``run_dir/<study>/trial_NNNNN/``. So
``tensorboard --logdir run_dir/<study>`` lists one run per trial, named ``trial_NNNNN``, and its
HPARAMS tab holds one row per trial: the trial's hyperparameters and the config's ``metric``.

The x axis (TensorBoard's "step") is the number of epochs completed, counted from 1 as Optuna's
intermediate values are: a trial paused at a rung and resumed later, maybe by another worker,
continues its own curves, and every trial's curves line up epoch by epoch whatever its batch
size. (A value a model logs per training step lands on the step of the epoch it was logged in.)

Example (the first segment trains epochs 1-2, the second resumes from its checkpoint)::

    params = {"lr": 0.1, "batch_size": 64}
    first = TrialTensorBoardLogger("runs/s/trial_00003", params=params,
                                   metric="validation_error", resume_epoch=None)
    L.Trainer(max_epochs=2, logger=first, callbacks=[RandomState(), resume]).fit(model, data)

    second = TrialTensorBoardLogger("runs/s/trial_00003", params=params,
                                    metric="validation_error", resume_epoch=2)
    L.Trainer(max_epochs=4, logger=second, callbacks=[RandomState(), resume]).fit(
        model, data, ckpt_path="runs/s/trial_00003/resume.ckpt")
    # runs/s/trial_00003/events.out.tfevents.*: one file, validation_error at steps 1, 2, 3, 4
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from typing_extensions import override

from lightning_hpo.errors import field_int

if TYPE_CHECKING:
    from tensorboard.compat.proto.event_pb2 import Event
    from torch.utils.tensorboard import SummaryWriter

__all__ = ["EVENT_FILES", "TrialTensorBoardLogger"]

#: The names of TensorBoard event files (a glob pattern), e.g.
#: ``events.out.tfevents.1718000000.host.4242.0``.
EVENT_FILES = "events.out.tfevents.*"

_logger = logging.getLogger(__name__)


class TrialTensorBoardLogger(TensorBoardLogger):
    """Lightning's ``TensorBoardLogger`` writing one trial's run into ``save_dir``, kept whole
    across segments, with the trial's hyperparameters for the HPARAMS tab.

    * Scalars are logged at step = epochs completed (Lightning's 0-based ``epoch`` + 1); the
      ``epoch`` value itself is not logged (it is the x axis).
    * When the writer starts, it records the HPARAMS session of the trial: ``params`` (values
      other than numbers, strings and booleans as strings) and ``metric`` as the metric (or
      metrics) to show; their values are the scalars of those names. No ``hp_metric``
      placeholder is logged.
    * ``resume_epoch=None`` (a fresh start, no checkpoint): the event files an earlier attempt
      of the same trial left in ``save_dir`` are removed, as ``metrics.csv`` is replaced.
    * ``resume_epoch=e`` (resumed from a checkpoint holding ``e`` epochs): the earlier event
      files are rewritten into the new segment's file, without the scalars of steps ``> e`` (an
      interrupted segment may have logged past its last checkpoint) and without the older
      HPARAMS records, then removed; the new segment's events follow. Summaries other than
      scalars (images, histograms, text a model wrote itself) are carried over as they are. So
      the folder holds one event file, and TensorBoard shows each epoch once, as if the trial
      had trained straight through. A record cut short by a kill is dropped.

    Only global rank 0 writes (as with any Lightning logger). The trial's ``hparams.yaml`` is
    the CSV logger's: this logger writes none. The folder must be local.

    Args:
        save_dir: the trial's folder, e.g. ``runs/study/trial_00003``; created if missing.
        params: the trial's hyperparameters, e.g. ``{"lr": 0.1, "batch_size": 64}``.
        metric: the config's metric, e.g. ``"validation_error"``; a list of them in a study of
            several objectives, each a metric column of the HPARAMS tab.
        resume_epoch: the epochs in the checkpoint the segment resumes from (``>= 0``), or
            None for a segment trained from scratch.
        **kwargs: passed to ``torch.utils.tensorboard.SummaryWriter`` (e.g. ``max_queue``).

    Example::

        logger = TrialTensorBoardLogger("runs/s/trial_00003", params={"lr": 0.1},
                                        metric="validation_error", resume_epoch=None)
        logger.log_metrics({"validation_error": 0.25, "epoch": 0}, step=17)  # at step 1
        logger.finalize("success")
    """

    def __init__(
        self,
        save_dir: str | os.PathLike[str],
        *,
        params: Mapping[str, Any],
        metric: str | Sequence[str],
        resume_epoch: int | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            save_dir=os.fspath(save_dir), name="", version="", default_hp_metric=False, **kwargs
        )
        self.params = dict(params)
        self.metrics = (metric,) if isinstance(metric, str) else tuple(metric)
        self.resume_epoch = (
            None if resume_epoch is None else field_int("resume_epoch", resume_epoch, minimum=0)
        )

    @property
    @override
    @rank_zero_experiment
    def experiment(self) -> SummaryWriter:
        """The trial's ``SummaryWriter`` (global rank 0; a no-op stand-in on other ranks).

        Created at the first use: earlier event files are carried over or removed (see the
        class), then the trial's HPARAMS session is written.
        """
        if self._experiment is not None:
            return self._experiment
        from torch.utils.tensorboard import SummaryWriter

        earlier = sorted(glob.glob(os.path.join(glob.escape(self.log_dir), EVENT_FILES)))
        kept = [] if self.resume_epoch is None else _kept_events(earlier, self.resume_epoch)
        writer = self._experiment = SummaryWriter(log_dir=self.log_dir, **self._kwargs)
        file_writer = writer.file_writer  # opened by SummaryWriter(): the new event file
        if file_writer is None:
            raise RuntimeError(f"SummaryWriter opened no event file in {self.log_dir}")
        for event in kept:
            file_writer.add_event(event, step=event.step, walltime=event.wall_time)
        writer.flush()  # the kept events are on disk before the files they came from go
        for path in earlier:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        if earlier:
            _logger.debug("%s: %d event(s) of %d earlier file(s) kept (resume_epoch=%s)",
                          self.log_dir, len(kept), len(earlier), self.resume_epoch)
        self._write_hparams(file_writer)
        return writer

    def _write_hparams(self, file_writer: Any) -> None:
        """The HPARAMS plugin's experiment and session-start records of this trial (step 0)."""
        from torch.utils.tensorboard.summary import hparams

        params = self._sanitize_params(dict(self.params))
        # Only the metrics' names are written (each objective's, in a study of several); their
        # values are the scalars of those tags. No session end record: how the trial ended is
        # Optuna's to say (TensorBoard shows it as unknown).
        experiment, session_start, _ = hparams(params, dict.fromkeys(self.metrics, 0.0))
        file_writer.add_summary(experiment)
        file_writer.add_summary(session_start)
        file_writer.flush()

    @override
    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log ``metrics`` at step = ``metrics["epoch"] + 1`` (epochs completed), else ``step``."""
        values = dict(metrics)
        epoch = values.pop("epoch", None)
        if epoch is not None:
            step = int(epoch) + 1
        if values:
            super().log_metrics(values, step)

    @override
    @rank_zero_only
    def save(self) -> None:
        """Flush the event file (no ``hparams.yaml``: the CSV logger writes the trial's)."""
        self.experiment.flush()


def _kept_events(paths: list[str], resume_epoch: int) -> list[Event]:
    """The events of ``paths`` to carry into a segment resumed at ``resume_epoch``: scalars of
    steps ``<= resume_epoch``, the latest written of each tag and step, and every other summary
    event but HPARAMS records, in step order. File-version and session events are dropped (the
    new file writes its own)."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    scalars: dict[tuple[str, int], Event] = {}
    others: list[Event] = []
    for path in paths:
        for event in LegacyEventFileLoader(path).Load():
            if not event.HasField("summary"):
                continue
            values = event.summary.value
            if any(value.metadata.plugin_data.plugin_name == "hparams" for value in values):
                continue
            if values and all(value.HasField("simple_value") for value in values):
                for value in values:
                    key = (value.tag, event.step)
                    if event.step <= resume_epoch and (
                        key not in scalars or event.wall_time >= scalars[key].wall_time
                    ):
                        scalars[key] = _one_value_event(event, value)
            else:
                others.append(event)
    return sorted([*scalars.values(), *others], key=lambda event: (event.step, event.wall_time))


def _one_value_event(event: Event, value: Any) -> Event:
    """A copy of ``event`` holding only ``value`` of its summary."""
    from tensorboard.compat.proto.event_pb2 import Event

    single = Event(wall_time=event.wall_time, step=event.step)
    single.summary.value.add().CopyFrom(value)
    return single
