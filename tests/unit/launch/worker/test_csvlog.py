"""One ``metrics.csv`` per trial across its segments (lightning_hpo.launch.worker._csvlog).

Real fits of LeNet on a few batches of digits, with :class:`ResumeCheckpoint` and
:class:`RandomState` as the launcher's worker uses them: a trial paused after epoch 2 and resumed
to epoch 4 in a new Trainer has the file of one trained straight to 4; a segment interrupted
after logging past its checkpoint loses those rows on resume; a fresh start replaces an old file;
a failed rewrite leaves the old file.
"""

from __future__ import annotations

import csv
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from lightning_hpo import DigitsDataModule, LeNet, RandomState, ResumeCheckpoint
from lightning_hpo.checkpointing import Every
from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.worker._csvlog import SegmentCSVLogger

_VALUES = ("parameters", "train_loss", "validation_error", "validation_loss")


@pytest.fixture(scope="module", autouse=True)
def _torch_settings() -> Iterator[None]:
    """One torch thread, and the flags ``Trainer(deterministic=True)`` switches restored."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    if workspace is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace


class _LogLate(L.Callback):
    """Logs a key the earlier segment never logged (``late``, from epoch index 2 on)."""

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch >= 2:
            pl_module.log("late", float(trainer.current_epoch))


class _Killed(Exception):
    """Stands for a worker killed mid-epoch."""


class _PerBatch(L.Callback):
    """Logs ``batch`` at every training batch (a row per batch) and, with ``kill_in``, stops
    the fit at the second batch of that epoch (0-based), after the first batch's row."""

    def __init__(self, kill_in: int | None = None) -> None:
        self.kill_in = kill_in

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
        batch_idx: int,
    ) -> None:
        if trainer.current_epoch == self.kill_in and batch_idx == 1:
            raise _Killed(f"killed in epoch index {self.kill_in}")
        pl_module.log("batch", float(batch_idx), on_step=True, on_epoch=False)


def _fit(
    folder: Path, max_epochs: int, resume_epoch: int | None, *callbacks: L.Callback,
    every: Every = "rung",
) -> ResumeCheckpoint:
    """One segment of the trial in ``folder``: from scratch (``resume_epoch=None``) or from
    ``folder/resume.ckpt``; returns its resume checkpoint callback."""
    L.seed_everything(0, verbose=False)
    model, data = LeNet(lr=0.1), DigitsDataModule(batch_size=32)
    resume = ResumeCheckpoint(folder / "resume.ckpt", every=every, rungs=[2, 4])
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_epochs=max_epochs, deterministic=True,
        callbacks=[*callbacks, RandomState(), resume],
        logger=SegmentCSVLogger(folder, resume_epoch=resume_epoch),
        limit_train_batches=3, limit_val_batches=2, log_every_n_steps=1,
        num_sanity_val_steps=0, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=str(folder),
    )
    ckpt_path = None if resume_epoch is None else str(folder / "resume.ckpt")
    trainer.fit(model, datamodule=data, ckpt_path=ckpt_path, weights_only=True)
    return resume


def _read(folder: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(folder / "metrics.csv", newline="") as file:
        reader = csv.DictReader(file)
        rows = list(reader)
    assert reader.fieldnames is not None
    return list(reader.fieldnames), rows


def _epochs(rows: list[dict[str, str]], column: str) -> list[int]:
    """The epochs of the rows that hold a value in ``column``, in file order."""
    return [int(row["epoch"]) for row in rows if row[column] != ""]


def test_a_resumed_trial_has_the_file_of_straight_training(tmp_path: Path) -> None:
    """Paused after 2 epochs, resumed to 4 in a new Trainer (logging a new key there): the
    file holds epochs 0..3 once each, in order, as trained straight through."""
    straight, paused = tmp_path / "straight", tmp_path / "paused"
    _fit(straight, 4, None)
    first = _fit(paused, 2, None)
    assert first.last is not None and first.last[0] == 2
    _, rows_first = _read(paused)
    _fit(paused, 4, 2, _LogLate())

    header, rows = _read(paused)
    assert header == sorted(header) and set(header) == {"epoch", "step", "late", *_VALUES}
    for column in _VALUES:
        assert _epochs(rows, column) == [0, 1, 2, 3], column
    assert _epochs(rows, "late") == [2, 3]
    steps = [int(row["step"]) for row in rows]
    assert steps == sorted(steps)
    # The first segment's rows survived the resumed segment's rewrite for its new key.
    assert [{key: row[key] for key in rows_first[0]} for row in rows[: len(rows_first)]] == (
        rows_first
    )
    # The same rows as straight training: steps, epochs and values (to float rounding).
    _, rows_straight = _read(straight)
    assert len(rows) == len(rows_straight)
    for row, reference in zip(rows, rows_straight, strict=True):
        assert (row["epoch"], row["step"]) == (reference["epoch"], reference["step"])
        for column in _VALUES:
            assert (row[column] == "") == (reference[column] == "")
            if row[column]:
                assert float(row[column]) == pytest.approx(float(reference[column]), abs=1e-6)


def test_rows_past_the_checkpoint_are_dropped(tmp_path: Path) -> None:
    """Killed in epoch index 2 after logging a row there, checkpointed after 2 epochs: on
    resume the row of epoch 2 goes, and every epoch ends up with its rows once."""
    with pytest.raises(_Killed):
        _fit(tmp_path, 4, None, _PerBatch(kill_in=2), every="epoch")
    _, rows = _read(tmp_path)
    assert _epochs(rows, "batch") == [0, 0, 0, 1, 1, 1, 2]  # a row past the checkpoint
    # The checkpoint holds 2 epochs (Lightning's "epoch" is the 0-based index of the last one).
    assert torch.load(tmp_path / "resume.ckpt", weights_only=True)["epoch"] == 1

    _fit(tmp_path, 4, 2, _PerBatch(), every="epoch")
    _, rows = _read(tmp_path)
    assert _epochs(rows, "batch") == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [row["batch"] for row in rows if row["batch"]] == ["0.0", "1.0", "2.0"] * 4
    for column in _VALUES:
        assert _epochs(rows, column) == [0, 1, 2, 3], column
    epochs = [int(row["epoch"]) for row in rows]
    assert epochs == sorted(epochs)


def test_a_fresh_start_replaces_an_old_file(tmp_path: Path) -> None:
    """A trial retrained from scratch: the old attempt's rows and columns are gone."""
    (tmp_path / "metrics.csv").write_text("epoch,old,step\n0,9.0,0\n5,9.0,99\n")
    _fit(tmp_path, 1, None)
    header, rows = _read(tmp_path)
    assert "old" not in header
    assert [int(row["epoch"]) for row in rows] == [0, 0]  # its validation and training rows
    assert not (tmp_path / "metrics.csv.tmp").exists()


def test_a_failed_rewrite_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new key makes the writer rewrite the file; a write that fails midway (here: the disk
    full after the header) leaves the file as it was and no temporary file."""
    logger = SegmentCSVLogger(tmp_path, resume_epoch=None)
    logger.log_metrics({"epoch": 0, "loss": 1.0}, step=0)
    logger.save()
    before = (tmp_path / "metrics.csv").read_bytes()

    def disk_full(self: csv.DictWriter[str], rows: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(csv.DictWriter, "writerows", disk_full)
    logger.log_metrics({"epoch": 1, "loss": 0.5, "accuracy": 0.9}, step=1)
    with pytest.raises(OSError, match="No space left"):
        logger.save()
    assert (tmp_path / "metrics.csv").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["metrics.csv"]


def test_resuming_trims_a_line_cut_short(tmp_path: Path) -> None:
    """A kill during an append leaves half a line (here of epoch 1, whose training row
    Lightning logs after the checkpoint): it goes; the new rows follow the kept ones."""
    (tmp_path / "metrics.csv").write_text(
        "epoch,loss,step\r\n0,1.0,0\r\n1,0.5,1\r\n1,0.4", newline=""
    )
    logger = SegmentCSVLogger(tmp_path, resume_epoch=2)
    logger.log_metrics({"epoch": 2, "loss": 0.3}, step=2)
    logger.save()
    header, rows = _read(tmp_path)
    assert header == ["epoch", "loss", "step"]
    assert [(row["epoch"], row["loss"]) for row in rows] == [("0", "1.0"), ("1", "0.5"),
                                                              ("2", "0.3")]


@pytest.mark.parametrize("bad", [-1, 1.5, True], ids=["negative", "float", "bool"])
def test_resume_epoch_must_be_a_count_of_epochs(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(ConfigError, match="resume_epoch"):
        SegmentCSVLogger(tmp_path, resume_epoch=bad)


# --- Rows without an epoch (LearningRateMonitor's, at each epoch's start) -------------------

#: 23 steps an epoch: LearningRateMonitor logs ``lr-SGD`` (no epoch) at each epoch's first
#: step, the epoch's own row (with its epoch) comes at its last step.
_STEPS = 23


def _log_epochs(logger: SegmentCSVLogger, epochs: range) -> None:
    """What a Trainer with LearningRateMonitor logs for ``epochs``: an lr row at the epoch's
    start (step 0, 23, 46, ...), the epoch's row at its end (step 22, 45, 68, ...)."""
    for epoch in epochs:
        logger.log_metrics({"lr-SGD": 0.1 * 0.5**epoch}, step=_STEPS * epoch)
        logger.save()
        logger.log_metrics({"epoch": epoch, "train_loss": 1.0 / (epoch + 1)},
                           step=_STEPS * epoch + _STEPS - 1)
        logger.save()


def _rows(folder: Path) -> list[tuple[str, str, str]]:
    """(epoch, step, lr-SGD) of each row, in file order."""
    _, rows = _read(folder)
    return [(row["epoch"], row["step"], row["lr-SGD"]) for row in rows]


def test_a_resumed_segment_keeps_the_rows_without_an_epoch_up_to_its_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Logged epochs 0-3, resumed from the checkpoint of 3 epochs: the lr rows at steps 0, 23
    and 46 (epochs 0-2) stay; the one at 69 (epoch 3's start) goes with epoch 3's row; the
    resumed segment's own follow, so the file reads as one straight run."""
    _log_epochs(SegmentCSVLogger(tmp_path, resume_epoch=None), range(4))
    assert [step for _, step, _ in _rows(tmp_path)] == ["0", "22", "23", "45", "46", "68",
                                                        "69", "91"]
    with caplog.at_level("DEBUG", logger="lightning_hpo.launch.worker._csvlog"):
        resumed = SegmentCSVLogger(tmp_path, resume_epoch=3)
        resumed.experiment  # noqa: B018 (the writer trims the file when it starts)
    assert _rows(tmp_path) == [
        ("", "0", "0.1"), ("0", "22", ""), ("", "23", "0.05"), ("1", "45", ""),
        ("", "46", "0.025"), ("2", "68", ""),
    ]
    assert any("kept 6 row(s)" in r.getMessage() and "dropped 2" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    _log_epochs(resumed, range(3, 5))
    straight = tmp_path / "straight"
    _log_epochs(SegmentCSVLogger(straight, resume_epoch=None), range(5))
    assert _rows(tmp_path) == _rows(straight)


@pytest.mark.parametrize("resume_epoch", [0, 1, 2, 3, 4, 9])
def test_the_rows_without_an_epoch_kept_are_those_not_past_the_last_kept_epoch(
    tmp_path: Path, resume_epoch: int
) -> None:
    _log_epochs(SegmentCSVLogger(tmp_path, resume_epoch=None), range(4))
    SegmentCSVLogger(tmp_path, resume_epoch=resume_epoch).experiment  # noqa: B018
    kept = min(resume_epoch, 4)
    rows = _rows(tmp_path)
    assert [epoch for epoch, _, _ in rows if epoch] == [str(e) for e in range(kept)]
    # Every epoch kept keeps its start's lr row; none of a dropped epoch does.
    assert [int(step) for epoch, step, _ in rows if not epoch] == [
        _STEPS * e for e in range(kept)]
    steps = [int(step) for _, step, _ in rows]
    assert steps == sorted(steps)


def test_a_row_without_an_epoch_or_a_step_is_dropped(tmp_path: Path) -> None:
    """A row whose step cannot be read is not known to be before the checkpoint."""
    (tmp_path / "metrics.csv").write_text(
        "epoch,lr-SGD,loss,step\n"
        ",0.1,,0\n"  # kept: before epoch 0's row
        "0,,1.0,22\n"
        ",0.2,,\n"  # no step
        ",0.3,,x\n"  # a step that is no number
        ",0.05,,22\n"  # at the last kept step: kept
        ",0.05,,23\n"  # past it: dropped
        "1,,0.5,45\n",
        newline="",
    )
    SegmentCSVLogger(tmp_path, resume_epoch=1).experiment  # noqa: B018
    assert _rows(tmp_path) == [("", "0", "0.1"), ("0", "22", ""), ("", "22", "0.05")]
