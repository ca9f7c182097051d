"""``trainer.logger: tensorboard``: one TensorBoard run per trial, read back from the event files.

The launcher runs real trials (LeNet on digits, a few batches an epoch); the event files under
``run_dir/<study>/`` are then read as ``tensorboard --logdir run_dir/<study>`` reads them (an
``EventMultiplexer`` over the folder): one run per trial, the epoch scalars at steps 1..epochs
with the values Optuna has, and the HPARAMS records with the trial's params and the metric.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import optuna
import pytest
from helpers.support import config_file, launch, study_of
from optuna.trial import TrialState

from lightning_hpo.launch.worker._tblog import EVENT_FILES, TrialTensorBoardLogger
from lightning_hpo.schema import ATTR

pytest.importorskip("tensorboard", reason="trainer.logger: tensorboard needs the tensorboard extra")

from tensorboard.backend.event_processing.event_multiplexer import (  # noqa: E402
    EventMultiplexer,
)
from tensorboard.plugins.hparams import metadata as hparams_metadata  # noqa: E402

EPOCH_SCALARS = ("parameters", "train_loss", "validation_error", "validation_loss")


def _runs(folder: Path) -> EventMultiplexer:
    """What ``tensorboard --logdir folder`` loads: every folder holding event files is a run."""
    mux = EventMultiplexer()
    mux.AddRunsFromDirectory(str(folder))
    mux.Reload()
    return mux


def _curve(mux: EventMultiplexer, run: str, tag: str) -> dict[int, float]:
    points = mux.Scalars(run, tag)
    steps = [point.step for point in points]
    assert len(steps) == len(set(steps)), (run, tag, steps)  # no epoch shown twice
    return {point.step: point.value for point in points}


def _hparams(mux: EventMultiplexer, run: str) -> tuple[dict[str, Any], list[str]]:
    """The run's HPARAMS session values and the experiment's metric names."""
    content = mux.PluginRunToTagToContent(hparams_metadata.PLUGIN_NAME)[run]
    start = hparams_metadata.parse_session_start_info_plugin_data(
        content[hparams_metadata.SESSION_START_INFO_TAG])
    experiment = hparams_metadata.parse_experiment_plugin_data(
        content[hparams_metadata.EXPERIMENT_TAG])
    values = {}
    for name, value in start.hparams.items():
        kind = value.WhichOneof("kind")
        values[name] = getattr(value, kind)
    return values, [info.name.tag for info in experiment.metric_infos]


def _launch(tmp_path: Path, **fields: Any) -> optuna.Study:
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 2}, **fields)
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return study_of(str(tmp_path / "t.journal"))


@pytest.mark.slow
def test_each_trial_is_a_tensorboard_run_with_its_scalars_and_hparams(tmp_path: Path) -> None:
    study = _launch(tmp_path, trainer={"max_epochs": 2, "limit_train_batches": 4,
                                       "limit_val_batches": 2, "logger": "tensorboard"},
                    stop={"n_trials": 3})
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    study_dir = tmp_path / "runs" / "t"
    mux = _runs(study_dir)
    assert sorted(mux.Runs()) == [f"trial_{t.number:05d}" for t in trials]
    for trial in trials:
        run = f"trial_{trial.number:05d}"
        trial_dir = Path(trial.user_attrs[ATTR.LOG_DIR])
        assert trial_dir == study_dir.resolve() / run  # the folder its checkpoints are in
        assert len(list(trial_dir.glob(EVENT_FILES))) == 1
        assert (trial_dir / "metrics.csv").is_file() and (trial_dir / "best.ckpt").is_file()
        assert set(mux.Runs()[run]["scalars"]) == set(EPOCH_SCALARS)  # no hp_metric, no epoch
        for tag in EPOCH_SCALARS:
            assert list(_curve(mux, run, tag)) == [1, 2], (run, tag)
        curve = _curve(mux, run, "validation_error")
        assert curve == pytest.approx(trial.intermediate_values, rel=1e-6)
        assert curve[2] == pytest.approx(trial.value, rel=1e-6)
        params, metrics = _hparams(mux, run)
        assert params == pytest.approx(trial.params) and set(params) == {"lr", "batch_size"}
        assert metrics == ["validation_error"]


@pytest.mark.slow
def test_a_paused_and_resumed_trial_keeps_one_run_with_every_epoch(tmp_path: Path) -> None:
    """Synchronous SH, rungs 1, 2, 4: the best of 4 trials trains in 3 segments (from
    checkpoints, maybe on other slots); the logger is left to its default (tensorboard)."""
    study = _launch(
        tmp_path, pruner={"name": "sync_sh", "min_resource": 1, "max_resource": 4,
                          "reduction_factor": 2},
        trainer={"limit_train_batches": 4, "limit_val_batches": 2}, initial=[],
        stop={"n_trials": 4},
    )
    trials = study.get_trials(deepcopy=False)
    epochs = sorted(t.user_attrs[ATTR.EPOCHS] for t in trials)
    assert epochs == [1, 1, 2, 4], epochs
    mux = _runs(tmp_path / "runs" / "t")
    assert sorted(mux.Runs()) == [f"trial_{t.number:05d}" for t in trials]
    for trial in trials:
        run = f"trial_{trial.number:05d}"
        segments = trial.user_attrs[ATTR.SEGMENTS]
        assert len(segments) == {1: 1, 2: 2, 4: 3}[trial.user_attrs[ATTR.EPOCHS]]
        # One event file: each resumed segment rewrote the earlier ones into its own.
        assert len(list((tmp_path / "runs" / "t" / run).glob(EVENT_FILES))) == 1
        done = list(range(1, trial.user_attrs[ATTR.EPOCHS] + 1))
        for tag in EPOCH_SCALARS:
            assert list(_curve(mux, run, tag)) == done, (run, tag)
        curve = _curve(mux, run, "validation_error")
        assert curve == pytest.approx(trial.intermediate_values, rel=1e-6)
        params, metrics = _hparams(mux, run)
        assert params == pytest.approx(trial.params) and metrics == ["validation_error"]
        with open(tmp_path / "runs" / "t" / run / "metrics.csv", newline="") as file:
            rows = [row for row in csv.DictReader(file) if row["validation_error"]]
        assert [float(row["validation_error"]) for row in rows] == pytest.approx(
            [curve[step] for step in done], rel=1e-6)  # the CSV and TensorBoard agree


@pytest.mark.slow
def test_the_csv_logger_writes_no_event_files(tmp_path: Path) -> None:
    study = _launch(tmp_path, trainer={"max_epochs": 2, "limit_train_batches": 4,
                                       "limit_val_batches": 2, "logger": "csv"},
                    stop={"n_trials": 2})
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    assert list((tmp_path / "runs").rglob(EVENT_FILES)) == []
    for trial in trials:
        assert (Path(trial.user_attrs[ATTR.LOG_DIR]) / "metrics.csv").is_file()


# ---------------------------------------------------------------------------------------------
# The logger alone: segments, as the worker builds it for each one


def _logger(folder: Path, resume_epoch: int | None) -> TrialTensorBoardLogger:
    return TrialTensorBoardLogger(folder, params={"lr": 0.1, "act": "relu", "skip": None},
                                  metric="validation_error", resume_epoch=resume_epoch)


def _segment(folder: Path, resume_epoch: int | None, values: dict[int, float]) -> None:
    """Log ``validation_error`` for 0-based epochs, as Lightning does, then end the segment."""
    logger = _logger(folder, resume_epoch)
    for epoch, value in values.items():
        logger.log_metrics({"validation_error": value, "epoch": epoch}, step=100 * epoch)
        logger.save()
    logger.finalize("success")


def test_a_resumed_segment_drops_the_epochs_logged_past_its_checkpoint(tmp_path: Path) -> None:
    _segment(tmp_path, None, {0: 0.9, 1: 0.8, 2: 0.7})  # died after epoch 3, checkpoint at 2
    logger = _logger(tmp_path, resume_epoch=2)
    logger.experiment.add_text("note", "kept as it is", global_step=500)  # not an epoch scalar
    logger.log_metrics({"validation_error": 0.6, "epoch": 2})
    logger.log_metrics({"validation_error": 0.5, "epoch": 3})
    logger.finalize("success")
    assert len(list(tmp_path.glob(EVENT_FILES))) == 1
    mux = _runs(tmp_path)
    assert _curve(mux, ".", "validation_error") == pytest.approx({1: 0.9, 2: 0.8, 3: 0.6, 4: 0.5})
    params, metrics = _hparams(mux, ".")
    assert params == pytest.approx({"lr": 0.1, "act": "relu", "skip": "None"})
    assert metrics == ["validation_error"]
    _segment(tmp_path, 4, {4: 0.4})  # the next segment carries the text over, once
    mux = _runs(tmp_path)
    assert [event.step for event in mux.Tensors(".", "note/text_summary")] == [500]
    assert list(_curve(mux, ".", "validation_error")) == [1, 2, 3, 4, 5]


def test_a_fresh_start_replaces_an_earlier_attempts_events(tmp_path: Path) -> None:
    _segment(tmp_path, None, {0: 0.9, 1: 0.8, 2: 0.7})
    _segment(tmp_path, None, {0: 0.5})  # retrained from scratch (no usable checkpoint)
    assert len(list(tmp_path.glob(EVENT_FILES))) == 1
    assert _curve(_runs(tmp_path), ".", "validation_error") == pytest.approx({1: 0.5})


def test_a_record_cut_short_by_a_kill_is_dropped(tmp_path: Path) -> None:
    _segment(tmp_path, None, {0: 0.9, 1: 0.8})
    (path,) = tmp_path.glob(EVENT_FILES)
    path.write_bytes(path.read_bytes()[:-5])  # the last record (epoch 2's value), torn
    _segment(tmp_path, 2, {2: 0.7})
    assert _curve(_runs(tmp_path), ".", "validation_error") == pytest.approx({1: 0.9, 3: 0.7})


def test_a_resume_at_epoch_0_keeps_no_epochs_and_a_bad_epoch_is_refused(tmp_path: Path) -> None:
    _segment(tmp_path, None, {0: 0.9})
    _segment(tmp_path, 0, {0: 0.3})
    assert _curve(_runs(tmp_path), ".", "validation_error") == pytest.approx({1: 0.3})
    with pytest.raises(ValueError, match="resume_epoch"):
        _logger(tmp_path, resume_epoch=-1)


def test_every_objective_of_a_study_of_several_is_a_metric_of_the_hparams_tab(
    tmp_path: Path,
) -> None:
    logger = TrialTensorBoardLogger(tmp_path, params={"lr": 0.1},
                                    metric=["validation_error", "parameters"], resume_epoch=None)
    logger.log_metrics({"validation_error": 0.5, "parameters": 1234.0, "epoch": 0})
    logger.finalize("success")
    mux = _runs(tmp_path)
    assert _hparams(mux, ".")[1] == ["validation_error", "parameters"]
    assert _curve(mux, ".", "parameters") == pytest.approx({1: 1234.0})
