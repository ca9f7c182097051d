"""Tables, CSV files and plots from any Optuna study: ``python -m lightning_hpo.report``.

The report reads the study and writes nothing to it. It understands what the launcher stores
per trial (slot, device, start and end times, one end time per epoch) and falls back on
Optuna's own ``datetime_start``/``datetime_complete`` for plain Optuna studies, saying in one
line what it cannot draw for them (:func:`limitations`).

Python API (the CLI prints and writes exactly these)::

    from lightning_hpo.report import (
        load, trials_frame, curves_frame, incumbent_frame, compare, summarize, write_report,
    )

    study = load("runs/quickstart.journal")            # or load(url, "study-name")
    trials = trials_frame(study)                       # one row per started trial
    curves = curves_frame(study)                       # one row per reported epoch
    inc = incumbent_frame(study)                       # best-so-far over wall-clock
    rungs = rungs_frame(study)                         # the pruner's rung records
    summarize(study)["best_value"]                     # best value reported at any epoch
    summarize(study)["device_seconds"]                 # compute spent, device-seconds
    paths = write_report(study, "reports/quickstart")  # {"trials.csv": Path, ..., "rungs.png": ...}

    asha, rs = load("runs/asha.journal"), load("runs/random.journal")
    compare([asha, rs])                                # time/epochs to reach the other's best

Plots are :mod:`lightning_hpo.report.plots` functions that take these frames and return a
matplotlib ``Figure`` (Agg canvas, no display needed).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import optuna
import pandas as pd

from lightning_hpo.errors import ConfigError
from lightning_hpo.report.plots import (
    STATE_COLORS,
    plot_compare,
    plot_incumbent,
    plot_learning_curves,
    plot_rungs,
    plot_timeline,
)
from lightning_hpo.report.tables import (
    STATES,
    StudyInfo,
    _check_not_empty,
    _compare,
    _curves_frame,
    _incumbent_frame,
    _labels,
    _rungs_frame,
    _Snapshot,
    _snapshot,
    _trials_frame,
    compare,
    curves_frame,
    incumbent_frame,
    limitations,
    load,
    load_ref,
    rungs_frame,
    study_info,
    summarize,
    trials_frame,
)

__all__ = [
    "STATES",
    "STATE_COLORS",
    "StudyInfo",
    "compare",
    "curves_frame",
    "incumbent_frame",
    "limitations",
    "load",
    "load_ref",
    "plot_compare",
    "plot_incumbent",
    "plot_learning_curves",
    "plot_rungs",
    "plot_timeline",
    "rungs_frame",
    "study_info",
    "summarize",
    "trials_frame",
    "write_compare",
    "write_report",
]

_logger = logging.getLogger(__name__)


def _out_dir(out_dir: str | Path) -> Path:
    path = Path(out_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError("out", f"cannot create {path}: {error.strerror or error}") from None
    return path


def _write_report(snap: _Snapshot, out_dir: str | Path) -> dict[str, Path]:
    _check_not_empty(snap)
    out = _out_dir(out_dir)
    trials, curves, inc = _trials_frame(snap), _curves_frame(snap), _incumbent_frame(snap)
    rungs = _rungs_frame(snap)
    paths: dict[str, Path] = {}
    try:
        tables = [("trials.csv", trials), ("curves.csv", curves), ("incumbent.csv", inc)]
        if snap.info.brackets:
            tables.append(("rungs.csv", rungs))
        for name, frame in tables:
            paths[name] = out / name
            frame.to_csv(paths[name], index=False)
        figures = {}
        improved = inc[inc["improved"]]
        if not improved.empty:
            figures["incumbent.png"] = plot_incumbent(
                inc, snap.info, until_s=float(trials["end_s"].max(skipna=True))
            )
        if not curves.empty:
            best = None if improved.empty else int(improved["best_trial"].iloc[-1])
            figures["learning_curves.png"] = plot_learning_curves(
                curves, snap.info, best_trial=best
            )
            figures["rungs.png"] = plot_rungs(
                curves, snap.info, rungs if snap.info.brackets else None
            )
        if trials["slot"].notna().any():
            figures["timeline.png"] = plot_timeline(trials, snap.info, curves)
        for name, fig in figures.items():
            paths[name] = out / name
            fig.savefig(paths[name])
    except OSError as error:
        raise ConfigError("out", f"cannot write to {out}: {error.strerror or error}") from None
    return paths


def write_report(study: optuna.Study, out_dir: str | Path) -> dict[str, Path]:
    """Write a study's CSV tables and PNG plots into ``out_dir`` (created if missing).

    Files: ``trials.csv`` (:func:`trials_frame`), ``curves.csv`` (:func:`curves_frame`),
    ``incumbent.csv`` (:func:`incumbent_frame`), ``rungs.csv`` (:func:`rungs_frame`, for a
    study with our pruner), and the plots ``incumbent.png``, ``learning_curves.png``,
    ``rungs.png`` (one panel per bracket) and ``timeline.png`` where the study has what they
    need (see :func:`limitations`).

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
    return _write_report(_snapshot(study), out_dir)


def _write_compare(
    snaps: Mapping[str, _Snapshot], out_dir: str | Path
) -> tuple[pd.DataFrame, dict[str, Path]]:
    for snap in snaps.values():
        _check_not_empty(snap)
    pairs, long = _compare(snaps)
    out = _out_dir(out_dir)
    paths = {"compare.csv": out / "compare.csv", "incumbents.csv": out / "incumbents.csv",
             "compare.png": out / "compare.png"}
    try:
        pairs.to_csv(paths["compare.csv"], index=False)
        long.to_csv(paths["incumbents.csv"], index=False)
        plot_compare(long, next(iter(snaps.values())).info).savefig(paths["compare.png"])
    except OSError as error:
        raise ConfigError("out", f"cannot write to {out}: {error.strerror or error}") from None
    return pairs, paths


def write_compare(
    studies: Sequence[optuna.Study] | Mapping[str, optuna.Study], out_dir: str | Path
) -> dict[str, Path]:
    """Write ``compare.csv`` (:func:`compare`), ``incumbents.csv`` (every study's incumbent
    rows with a ``study`` column) and ``compare.png`` (:func:`plots.plot_compare`).

    Raises:
        ConfigError: as :func:`compare`; ``study`` when one has no started trial.

    Example::

        >>> studies = [load("runs/asha.journal"), load("runs/rs.journal")]  # doctest: +SKIP
        >>> write_compare(studies, "reports/asha-vs-rs")  # doctest: +SKIP
    """
    labelled = _labels(studies)
    if len(labelled) < 2:
        raise ConfigError("compare", f"needs at least 2 studies, got {len(labelled)}")
    return _write_compare({k: _snapshot(s) for k, s in labelled.items()}, out_dir)[1]
