"""One ``metrics.csv`` per trial across its segments: :class:`SegmentCSVLogger`.

A trial trained in segments (paused at a rung, resumed later from ``trial_NNNNN/resume.ckpt``,
maybe in another worker process) logs every segment into the same folder. Lightning's
``CSVLogger`` deletes an existing ``metrics.csv`` when its writer starts, so a resumed segment
would leave only its own rows. This logger keeps the rows of the epochs the checkpoint holds and
appends the new segment's, so the file reads as if the trial had trained straight through.

Example (the first segment trains epochs 1-2, the second resumes from its checkpoint)::

    first = SegmentCSVLogger("runs/s/trial_00003", resume_epoch=None)
    L.Trainer(max_epochs=2, logger=first, callbacks=[RandomState(), resume]).fit(model, data)

    second = SegmentCSVLogger("runs/s/trial_00003", resume_epoch=2)
    L.Trainer(max_epochs=4, logger=second, callbacks=[RandomState(), resume]).fit(
        model, data, ckpt_path="runs/s/trial_00003/resume.ckpt")
    # runs/s/trial_00003/metrics.csv: the rows of epochs 0, 1 (first), then 2, 3 (second)
"""

from __future__ import annotations

import contextlib
import csv
import logging
import os
from typing import Any

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from typing_extensions import override

from lightning_hpo.errors import field_int

__all__ = ["SegmentCSVLogger"]

_logger = logging.getLogger(__name__)


class SegmentCSVLogger(CSVLogger):
    """Lightning's ``CSVLogger`` writing ``save_dir/metrics.csv``, kept whole across segments.

    * ``resume_epoch=None`` (a fresh start, no checkpoint): a new ``metrics.csv``; one left by an
      earlier attempt of the same trial (one that is now retrained from scratch) is removed
      when the writer starts, as Lightning's logger does (without its warning).
    * ``resume_epoch=e`` (resumed from a checkpoint holding ``e`` epochs): the rows of epochs
      ``0 .. e-1`` are kept (Lightning's ``epoch`` column counts from 0), the rows of epochs
      ``>= e`` are dropped (an interrupted segment may have logged past its last checkpoint),
      and so is a last line cut short by a kill; a row without an epoch (a callback's, such as
      ``LearningRateMonitor``'s) is kept when its step is not past the last kept epoch; the new
      segment's rows follow. The header keeps the file's columns, so rows logging new keys
      later still line up with the kept ones.

    Every rewrite of the file (the trimming above; Lightning's own when new keys appear) writes
    ``metrics.csv.tmp`` in the same folder and renames it over ``metrics.csv``
    (``os.replace``): a process killed mid-write leaves the previous file. New rows are
    appended, and Lightning flushes after every logging call. The folder must be local.

    Only global rank 0 writes (as with any Lightning logger), so under DDP the other ranks'
    ``resume_epoch`` does not matter.

    Args:
        save_dir: the trial's folder, e.g. ``runs/study/trial_00003``; created if missing.
        resume_epoch: the epochs in the checkpoint the segment resumes from (``>= 0``), or
            None for a segment trained from scratch.

    Example::

        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> first = SegmentCSVLogger(folder, resume_epoch=None)  # logged epochs 0-2, then died
        >>> for epoch in range(3):
        ...     first.log_metrics({"epoch": epoch, "loss": 1.0 / (epoch + 1)}, step=epoch)
        ...     first.save()  # the Trainer saves after every logging call
        >>> second = SegmentCSVLogger(folder, resume_epoch=2)  # from the checkpoint of epoch 2
        >>> second.log_metrics({"epoch": 2, "loss": 0.3, "lr": 0.1}, step=2)
        >>> second.save()
        >>> with open(os.path.join(folder, "metrics.csv"), newline="") as file:
        ...     print(file.read().replace("\\r\\n", "\\n"), end="")
        epoch,loss,lr,step
        0,1.0,,0
        1,0.5,,1
        2,0.3,0.1,2
    """

    def __init__(self, save_dir: str | os.PathLike[str], resume_epoch: int | None) -> None:
        super().__init__(save_dir=os.fspath(save_dir), name="", version="")
        self.resume_epoch = (
            None if resume_epoch is None else field_int("resume_epoch", resume_epoch, minimum=0)
        )

    @property
    @override
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        """The writer of ``metrics.csv`` (global rank 0; a no-op stand-in on other ranks)."""
        if isinstance(self._experiment, ExperimentWriter):
            return self._experiment
        self._fs.makedirs(self.root_dir, exist_ok=True)
        writer = self._experiment = SegmentWriter(self.log_dir, self.resume_epoch)
        return writer


class SegmentWriter(ExperimentWriter):
    """Lightning's CSV writer that trims instead of deleting an existing file when it starts,
    and rewrites the file atomically."""

    def __init__(self, log_dir: str, resume_epoch: int | None) -> None:
        self._resume_epoch = resume_epoch
        super().__init__(log_dir)  # calls _check_log_dir_exists

    @override
    def _check_log_dir_exists(self) -> None:
        path = self.metrics_file_path
        if not os.path.isfile(path):
            return
        if self._resume_epoch is None:
            _logger.debug("fresh start: replacing %s", path)
            os.remove(path)
            return
        header, rows, dropped = _read_kept(path, self._resume_epoch)
        if header is None:  # empty, or not even a header line: written afresh
            os.remove(path)
            return
        self.metrics_keys = sorted(header)  # what Lightning's writer keeps, sorted, as it does
        _write_atomically(path, self.metrics_keys, rows)
        _logger.debug("resumed at epoch %d: kept %d row(s) of %s, dropped %d",
                      self._resume_epoch, len(rows), path, dropped)

    @override
    def _rewrite_with_new_header(self, fieldnames: list[str]) -> None:
        with open(self.metrics_file_path, newline="") as file:
            rows = list(csv.DictReader(file))
        _write_atomically(self.metrics_file_path, fieldnames, rows)


def _read_kept(path: str, resume_epoch: int) -> tuple[list[str] | None, list[dict[str, Any]], int]:
    """The header of ``path``, its rows of epochs ``< resume_epoch`` and how many it dropped.

    A last line without its line end (a kill during an append) is dropped, and so is a row
    with more fields than the header. A row without an epoch (a callback's, such as
    ``LearningRateMonitor``'s at an epoch's start) is kept when its ``step`` is not past the
    last kept epoch's; other rows without a readable epoch are dropped.
    """
    with open(path, newline="") as file:
        text = file.read()
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines.pop()
    reader = csv.DictReader(lines)
    header = reader.fieldnames
    if not header:
        return None, [], 0
    rows = [row for row in reader if None not in row]
    kept_steps = [_number(row, "step") for row in rows
                  if (epoch := _number(row, "epoch")) is not None and epoch < resume_epoch]
    last_step = max((step for step in kept_steps if step is not None), default=None)
    kept: list[dict[str, Any]] = []
    for row in rows:
        epoch, step = _number(row, "epoch"), _number(row, "step")
        if epoch is not None:
            keep = epoch < resume_epoch
        else:
            keep = step is not None and last_step is not None and step <= last_step
        if keep:
            kept.append(row)
    return list(header), kept, reader.line_num - 1 - len(kept)


def _number(row: dict[str, Any], key: str) -> float | None:
    """The row's ``key`` as a number (epochs count from 0), or None when it has none."""
    try:
        return float(row.get(key) or "")
    except ValueError:
        return None


def _write_atomically(path: str, fieldnames: list[str], rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` under ``fieldnames`` to ``path.tmp``, then rename it over ``path``;
    on an error the temporary file is removed and ``path`` is as it was."""
    temporary = path + ".tmp"
    try:
        with open(temporary, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=fieldnames)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
