"""Writing the report's files: CSV tables and PNG plots of a study, or of a comparison.

Both writers take what they report on already read or not (a study or its
:class:`~lightning_hpo.report.StudySnapshot`; studies or a
:class:`~lightning_hpo.report.Comparison`), create the output folder when it is missing, and
turn a folder that cannot be written into :class:`~lightning_hpo.errors.ConfigError` ``out``;
the files are moved into place once all are written, so a folder that fills up mid-way is left
with none of them (an earlier report there stays whole).
:func:`write_report` has an example.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from lightning_hpo.errors import ConfigError
from lightning_hpo.report.comparison import Comparison, Studies
from lightning_hpo.report.plots import (
    plot_compare,
    plot_compare_hypervolume,
    plot_hypervolume,
    plot_incumbent,
    plot_learning_curves,
    plot_pareto,
    plot_rungs,
    plot_timeline,
)
from lightning_hpo.report.snapshot import Source, StudySnapshot
from lightning_hpo.report.tables import (
    curves_frame,
    hypervolume_frame,
    incumbent_frame,
    rungs_frame,
    segments_frame,
    trials_frame,
)

__all__ = ["write_compare", "write_report"]


def write_report(source: Source, out_dir: str | Path) -> dict[str, Path]:
    """Write a study's CSV tables and PNG plots into ``out_dir`` (created if missing).

    Files: ``trials.csv`` (:func:`~lightning_hpo.report.trials_frame`), ``curves.csv``
    (:func:`~lightning_hpo.report.curves_frame`), ``incumbent.csv``
    (:func:`~lightning_hpo.report.incumbent_frame`), ``rungs.csv``
    (:func:`~lightning_hpo.report.rungs_frame`, for a study with our pruner), ``segments.csv``
    (:func:`~lightning_hpo.report.segments_frame`, for a study whose trials list their training
    segments: pausing schedules, crash resume), and the plots
    ``incumbent.png``, ``learning_curves.png``, ``rungs.png`` (one panel per bracket) and
    ``timeline.png`` where the study has what they need (see
    :func:`~lightning_hpo.report.limitations`).

    A study with several objectives has ``hypervolume.csv``
    (:func:`~lightning_hpo.report.hypervolume_frame`) in place of ``incumbent.csv``, and the
    plots ``pareto.png`` (:func:`~lightning_hpo.report.plot_pareto`), ``hypervolume.png``
    (:func:`~lightning_hpo.report.plot_hypervolume`) and one
    ``learning_curves_<metric>.png`` per objective in place of ``incumbent.png`` and
    ``learning_curves.png``.

    Args:
        source: the study, or its snapshot.
        out_dir: the folder to write into.

    Returns:
        File name -> path, for the files written.

    Raises:
        ConfigError: ``study`` when no trial has started; ``out`` when the folder cannot be
            written.

    Example::

        >>> study = load("runs/quickstart.journal")  # doctest: +SKIP
        >>> paths = write_report(study, "reports/quickstart")  # doctest: +SKIP
        >>> sorted(paths)  # doctest: +SKIP
        ['curves.csv', 'incumbent.csv', 'incumbent.png', 'learning_curves.png', 'rungs.csv',
         'rungs.png', 'timeline.png', 'trials.csv']
    """
    snap = StudySnapshot.of(source)
    snap.require_trials()
    with _out_folder(out_dir) as out:  # a Ctrl-C or error leaves no empty folder
        return _report_files(snap, out)


def _report_files(snap: StudySnapshot, out: Path) -> dict[str, Path]:
    """The tables and figures of :func:`write_report`, written into ``out``."""
    info = snap.info
    trials, curves = trials_frame(snap), curves_frame(snap)
    rungs = rungs_frame(snap) if info.brackets else None
    segments = segments_frame(snap)
    figures: dict[str, Figure] = {}
    tables = {"trials.csv": trials, "curves.csv": curves}
    until_s = float(trials["end_s"].max(skipna=True))
    if info.several:
        hv = hypervolume_frame(snap)
        tables["hypervolume.csv"] = hv
        if not trials[["front", "best_front"]].isna().all(axis=None):
            figures["pareto.png"] = plot_pareto(trials, info, reference=snap.reference)
        if hv["improved"].any():
            figures["hypervolume.png"] = plot_hypervolume(hv, info, until_s=until_s)
        if not curves.empty:
            for k, metric in enumerate(info.metrics):
                figures[f"learning_curves_{safe_name(metric)}.png"] = plot_learning_curves(
                    curves, info, trials=trials, objective=k)
    else:
        inc = incumbent_frame(snap)
        tables["incumbent.csv"] = inc
        improved = inc[inc["improved"]]
        if not improved.empty:
            figures["incumbent.png"] = plot_incumbent(inc, info, until_s=until_s)
        if not curves.empty:
            best = None if improved.empty else int(improved["best_trial"].iloc[-1])
            figures["learning_curves.png"] = plot_learning_curves(curves, info, best_trial=best,
                                                                 trials=trials)
    if rungs is not None:
        tables["rungs.csv"] = rungs
    if any(t.segments for t in snap.trials):
        tables["segments.csv"] = segments
    if not curves.empty:
        figures["rungs.png"] = plot_rungs(curves, info, rungs, trials)
    if segments["slot"].notna().any():
        figures["timeline.png"] = plot_timeline(trials, info, curves, segments)
    return _write_files(out, tables, figures)


def write_compare(studies: Studies | Comparison, out_dir: str | Path) -> dict[str, Path]:
    """Write ``compare.csv`` (:func:`~lightning_hpo.report.compare`), ``incumbents.csv`` (every
    study's incumbent rows with a ``study`` column) and ``compare.png``
    (:func:`~lightning_hpo.report.plot_compare`). Studies with several objectives have
    ``hypervolumes.csv`` (:attr:`Comparison.hypervolumes
    <lightning_hpo.report.Comparison.hypervolumes>`, one shared reference point) in place of
    ``incumbents.csv``, and ``compare.png`` draws their hypervolumes
    (:func:`~lightning_hpo.report.plot_compare_hypervolume`).

    Args:
        studies: the studies or their snapshots (a sequence, or label -> study), or a
            :class:`~lightning_hpo.report.Comparison`.
        out_dir: the folder to write into (created if missing).

    Returns:
        File name -> path, for the files written.

    Raises:
        ConfigError: as :func:`~lightning_hpo.report.compare`; ``study`` when one has no started
            trial; ``out`` when the folder cannot be written.

    Example::

        >>> studies = [load("runs/asha.journal"), load("runs/rs.journal")]  # doctest: +SKIP
        >>> write_compare(studies, "reports/asha-vs-rs")  # doctest: +SKIP
    """
    comparison = Comparison.of(studies)
    for snap in comparison.snapshots.values():
        snap.require_trials()
    pairs = comparison.pairs
    if comparison.several:
        long, name = comparison.hypervolumes, "hypervolumes.csv"
        fig = plot_compare_hypervolume(long, comparison.info)
    else:
        long, name = comparison.incumbents, "incumbents.csv"
        fig = plot_compare(long, comparison.info)
    with _out_folder(out_dir) as out:
        return _write_files(out, {"compare.csv": pairs, name: long}, {"compare.png": fig})


@contextlib.contextmanager
def _out_folder(out_dir: str | Path) -> Iterator[Path]:
    """The folder ``out_dir``, made when missing (:func:`_out_dir`); one made here is removed
    again, when still empty, if the block ends in an error or Ctrl-C."""
    existed = Path(out_dir).is_dir()
    path = _out_dir(out_dir)
    try:
        yield path
    except BaseException:
        if not existed:
            with contextlib.suppress(OSError):  # not empty (another writer's files): kept
                path.rmdir()
        raise


def _out_dir(out_dir: str | Path) -> Path:
    path = Path(out_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        blocker = next((p for p in (path, *path.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise ConfigError("out", f"cannot create {path}: {blocker} is a file, not a "
                              "folder") from None
        raise ConfigError("out", f"cannot create {path}: {error.strerror or error}") from None
    return path


def _write_files(out: Path, tables: dict[str, pd.DataFrame],
                 figures: dict[str, Figure]) -> dict[str, Path]:
    """Write the CSV ``tables`` and PNG ``figures`` into ``out``, each under a temporary name
    first and all of them moved into place at the end: a folder that fills up or refuses a
    file mid-way is left with none of this report's files, not some of them or one cut short
    (an earlier report's files there stay whole). File name -> path."""
    staged: dict[str, Path] = {}
    try:
        with warnings.catch_warnings():  # a study or metric name in a glyph the font lacks
            warnings.filterwarnings("ignore", message="Glyph .* missing from font",
                                    category=UserWarning)
            for name, frame in tables.items():
                staged[name] = out / f".{name}.{os.getpid()}.tmp"
                frame.to_csv(staged[name], index=False)
            for name, fig in figures.items():
                staged[name] = out / f".{name}.{os.getpid()}.tmp"
                fig.savefig(staged[name], format="png")
        for name, temporary in staged.items():
            os.replace(temporary, out / name)
    except OSError as error:
        raise ConfigError("out", f"cannot write to {out}: {error.strerror or error}") from None
    finally:  # an error or Ctrl-C: no temporary file left behind
        for temporary in staged.values():
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
    return {name: out / name for name in staged}


def safe_name(name: str) -> str:
    """A name (a metric's, a study's) as a file or folder name: letters of any script, digits,
    ``.``, ``-`` and ``_`` kept, the rest ``_``; never ``.`` or ``..`` (the folder itself, or
    the one above it).

    Example::

        >>> safe_name("val/loss"), safe_name("étude-β 🚀"), safe_name("..")
        ('val_loss', 'étude-β_', '_..')
    """
    safe = re.sub(r"[^\w.-]+", "_", name)
    return safe if safe.strip(".") else f"_{safe}"
