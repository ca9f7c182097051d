"""A trial's per-epoch records as its worker writes them (``launch.worker.Progress``): a real
``fit`` of the quickstart's LeNet on a live trial of a journal file, every append of the journal
watched (the storage itself runs; the watch only records what each append carried).

An epoch's end times go in the same append as the resume point of the checkpoint saved after
it; after an epoch with no checkpoint, they are written when the next epoch starts or the fit
ends, so that every epoch's end time is in the study before the segment's end is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from helpers.support import config_file
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.processes.protocol import EventWriter, WorkerSpec
from lightning_hpo.launch.worker.training import FitRange, Progress, train
from lightning_hpo.schema import ATTR, ResumePoint

ATTR_OP = 8  # Optuna's journal op code for a trial's user attribute


class _Watched(JournalFileBackend):
    """A journal file that keeps, per append, the user attributes it wrote, in order."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.appends: list[list[str]] = []

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self.appends.append([name for log in logs if log["op_code"] == ATTR_OP
                             for name in log["user_attr"]])
        super().append_logs(logs)


def _fit(tmp_path: Path, every: str, epochs: int) -> tuple[_Watched, optuna.trial.FrozenTrial]:
    cfg = parse_config(yaml.safe_load(config_file(
        tmp_path, trainer={"max_epochs": epochs, "limit_train_batches": 2,
                           "limit_val_batches": 1},
        checkpoint={"every": every}).read_text()))
    backend = _Watched(str(tmp_path / "w.journal"))
    study = optuna.create_study(storage=JournalStorage(backend))
    trial = study.ask()
    spec = WorkerSpec(slot=0, devices=(0,), kind="cpu", threads=1, launcher_pid=os.getppid(),
                      events_fd=-1, deadline=None)
    progress = Progress(cfg, trial.number, EventWriter(-1), spec, trial=trial, rungs=(2,))
    backend.appends.clear()
    train(trial, cfg, spec, progress, FitRange(epochs, None))
    return backend, study.get_trials(deepcopy=False)[trial.number]


@pytest.mark.slow
def test_each_epochs_end_times_go_with_its_resume_point_in_one_append(tmp_path: Path) -> None:
    backend, frozen = _fit(tmp_path, "epoch", epochs=3)
    per_epoch = [names for names in backend.appends if ATTR.RESUME_POINT in names]
    assert per_epoch == [[ATTR.EPOCH_END_TIMES, ATTR.RESUME_POINT]] * 3
    assert not any(names == [ATTR.EPOCH_END_TIMES] for names in backend.appends)
    times = frozen.user_attrs[ATTR.EPOCH_END_TIMES]
    assert len(times) == 3 and times == sorted(times)
    assert ResumePoint.of(frozen).epoch == 3


@pytest.mark.slow
def test_an_epoch_without_a_checkpoint_still_writes_its_end_time(tmp_path: Path) -> None:
    """Saved at the rung (epoch 2) and the segment's end (4) only: epochs 1 and 3 write their
    end times alone, before the next epoch trains."""
    backend, frozen = _fit(tmp_path, "rung", epochs=4)
    written = [names for names in backend.appends
               if ATTR.EPOCH_END_TIMES in names or ATTR.RESUME_POINT in names]
    assert written == [
        [ATTR.EPOCH_END_TIMES],  # epoch 1, when epoch 2 starts
        [ATTR.EPOCH_END_TIMES, ATTR.RESUME_POINT],  # epoch 2, with its checkpoint
        [ATTR.EPOCH_END_TIMES],  # epoch 3
        [ATTR.EPOCH_END_TIMES, ATTR.RESUME_POINT],  # epoch 4, the segment's end
    ]
    assert len(frozen.user_attrs[ATTR.EPOCH_END_TIMES]) == 4
    assert ResumePoint.of(frozen).epoch == 4


def test_a_metric_logged_per_validation_step_only_fails_the_trial_saying_so(
    tmp_path: Path,
) -> None:
    """At an epoch that validated, the launcher's check of the metric tells the loggers' view
    from the callbacks': ``val_loss`` logged with ``on_step=True, on_epoch=False`` in validation
    reaches ``trainer.logged_metrics`` only, and was said "not logged by the LightningModule"."""
    from types import SimpleNamespace

    from lightning_hpo.errors import ConfigError

    cfg = parse_config(yaml.safe_load(config_file(tmp_path, metric="val_loss").read_text()))
    spec = WorkerSpec(slot=0, devices=(0,), kind="cpu", threads=1, launcher_pid=os.getppid(),
                      events_fd=-1, deadline=None)
    progress = Progress(cfg, 0, EventWriter(-1), spec)
    trainer = SimpleNamespace(callback_metrics={"train_loss": 0.5},
                              logged_metrics={"train_loss": 0.5, "val_loss": 0.7})
    with pytest.raises(ConfigError) as info:
        progress._check_logged(trainer, 1)  # type: ignore[arg-type]
    assert str(info.value).startswith(
        "metric: 'val_loss' is logged per validation step only (on_step=True, on_epoch=False), "
        "which Lightning hands to its loggers but not to callbacks (by epoch 1): log it with "
        "on_epoch=True"), str(info.value)


def test_a_checkpoint_ahead_of_the_study_gets_an_end_time_for_every_epoch_it_holds(
        tmp_path: Path) -> None:
    """A worker killed after writing epoch 2's checkpoint but before the study heard of epoch
    2: the next segment restores 2 epochs while the study holds 1 end time. The epochs it
    then trains must not take epoch 2's place (a trial read 4 values and 3 end times)."""
    from types import SimpleNamespace

    cfg = parse_config(yaml.safe_load(config_file(tmp_path).read_text()))
    spec = WorkerSpec(slot=0, devices=(0,), kind="cpu", threads=1, launcher_pid=os.getppid(),
                      events_fd=-1, deadline=None)
    checkpoint = tmp_path / "resume.ckpt"
    checkpoint.write_bytes(b"")
    os.utime(checkpoint, (50.0, 50.0))
    progress = Progress(cfg, 0, EventWriter(-1), spec)
    progress.from_epoch, progress.known, progress.prior_times = 1, [10.0], [10.0]
    progress.on_train_start(SimpleNamespace(current_epoch=2, world_size=1,  # type: ignore[arg-type]
                                            ckpt_path=str(checkpoint)), None)
    assert progress.all_epoch_end_times() == [10.0, 50.0]
    progress.epoch_end_times.append(60.0)  # epoch 3, trained by this segment
    assert progress.all_epoch_end_times() == [10.0, 50.0, 60.0]
