"""Tables, CSV files and plots from any Optuna study: ``python -m lightning_hpo.report``.

The report reads the study and writes nothing to it. It understands what the launcher stores
per trial (slot, device, start and end times, one end time per epoch) and falls back on
Optuna's own ``datetime_start``/``datetime_complete`` for plain Optuna studies, saying in one
line what it cannot draw for them (:func:`limitations`).

Python API (the CLI prints and writes exactly these)::

    from lightning_hpo.report import (
        StudySnapshot, load, trials_frame, curves_frame, incumbent_frame, compare, summarize,
        write_report,
    )

    study = load("runs/quickstart.journal")            # or load(url, "study-name")
    trials = trials_frame(study)                       # one row per started trial
    snap = StudySnapshot.read(study)                   # or read it once for several tables:
    curves = curves_frame(snap)                        # one row per reported epoch
    inc = incumbent_frame(snap)                        # best-so-far over wall-clock
    rungs = rungs_frame(snap)                          # the pruner's rung records
    segments = segments_frame(snap)                    # where and when each trial trained
    summarize(snap)["best_value"]                      # best value reported at any epoch
    summarize(snap)["device_seconds"]                  # compute spent, device-seconds
    summarize(snap)["paused"]                          # trials waiting between segments
    paths = write_report(snap, "reports/quickstart")   # {"trials.csv": Path, ..., "rungs.png": ...}

    asha, rs = load("runs/asha.journal"), load("runs/random.journal")
    compare([asha, rs])                                # time/epochs to reach the other's best

A study with several objectives (Optuna's ``directions=[...]``, each epoch's values in the
trial attribute ``objective_values``) has no single best: its trials stand on Pareto fronts
(:mod:`.fronts` states the rules) and its progress is a hypervolume::

    snap = StudySnapshot.read(load("runs/moasha.journal"))
    snap.info.metrics, snap.info.directions            # ("validation_error", "latency_ms"), ...
    trials = trials_frame(snap)                        # front (final values), best_front (any
    trials[trials["front"] == 0]                       # epoch), values_<metric> per objective
    curves_frame(snap)                                 # + values_<metric>, one per objective
    hv = hypervolume_frame(snap)                       # hypervolume so far, over wall-clock
    hv.attrs["reference"]                              # its reference point (snap.reference)
    summarize(snap)["hypervolume"]                     # of every value reported, any epoch
    summarize(snap)["pareto_complete_trials"]          # COMPLETE trials on the front
    plot_pareto(trials, snap.info, reference=snap.reference)
    write_report(snap, "reports/moasha")               # pareto.png, hypervolume.png,
                                                       # learning_curves_<metric>.png, ...
    moasha, rs = load("runs/moasha.journal"), load("runs/mo-random.journal")
    compare([moasha, rs])                              # time/epochs to reach the other's
                                                       # final hypervolume, bounded by
    Comparison.of([moasha, rs]).reference              # one reference point for both

A study trained by steps (``PruningCallback(..., resource="step")``, which writes so in the
study) is reported in steps: ``snap.info.resource`` is ``"step"``, and every ``epochs`` column,
``epochs_spent`` and ``summarize(snap)["epochs"]`` count optimizer steps (a trial's, up to its
last report); the terminal and the plots say steps. Studies by steps and by epochs do not
compare.

Every table, :func:`summarize`, :func:`limitations` and :func:`write_report` take a study (read
on the spot) or a :class:`StudySnapshot` (read once: the CLI reads each study once and builds
everything from it). Plots are :mod:`lightning_hpo.report.plots` functions that take these
frames and return a matplotlib ``Figure`` (Agg canvas, no display needed).

The modules, one concern each, in the order they build on each other: :mod:`.opening` (a study
from a storage spec), :mod:`.info` (what the study is: metric(s), direction(s), the pruner's
rungs), :mod:`.fronts` (several objectives: Pareto fronts and hypervolume, pure),
:mod:`.snapshot` (the trials read once), :mod:`.tables` (the DataFrames; ``_spending``: the
compute spent so far), :mod:`.summary` (counts, best values, what cannot be drawn),
:mod:`.comparison`, :mod:`.plots` (one figure per module) and :mod:`.files` (CSV and PNG
files). They read the study through :mod:`lightning_hpo.storage`,
:mod:`lightning_hpo.schema` and the rung records only, and rank several objectives with the
pure :mod:`lightning_hpo.pareto`: nothing of the launcher or the pruners.

The names below are imported on first use, so that ``lightning_hpo.report.snapshot`` (which the
launcher's closing summary reads) costs no pandas or matplotlib import.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from lightning_hpo._lazy import lazy_exports

_EXPORTS = {
    "write_best_config": "lightning_hpo.report.best_config",
    "Comparison": "lightning_hpo.report.comparison",
    "compare": "lightning_hpo.report.comparison",
    "TrialFronts": "lightning_hpo.report.fronts",
    "write_compare": "lightning_hpo.report.files",
    "write_report": "lightning_hpo.report.files",
    "StudyInfo": "lightning_hpo.report.info",
    "study_info": "lightning_hpo.report.info",
    "load": "lightning_hpo.report.opening",
    "load_ref": "lightning_hpo.report.opening",
    "STATE_COLORS": "lightning_hpo.report.plots",
    "plot_compare": "lightning_hpo.report.plots",
    "plot_compare_hypervolume": "lightning_hpo.report.plots",
    "plot_hypervolume": "lightning_hpo.report.plots",
    "plot_incumbent": "lightning_hpo.report.plots",
    "plot_learning_curves": "lightning_hpo.report.plots",
    "plot_pareto": "lightning_hpo.report.plots",
    "plot_rungs": "lightning_hpo.report.plots",
    "plot_timeline": "lightning_hpo.report.plots",
    "RANK_ORDER": "lightning_hpo.report.snapshot",
    "RANK_ORDER_FRONTS": "lightning_hpo.report.snapshot",
    "STATES": "lightning_hpo.report.snapshot",
    "STATUSES": "lightning_hpo.report.snapshot",
    "Pause": "lightning_hpo.report.snapshot",
    "Segment": "lightning_hpo.report.snapshot",
    "StudySnapshot": "lightning_hpo.report.snapshot",
    "TrialRecord": "lightning_hpo.report.snapshot",
    "limitations": "lightning_hpo.report.summary",
    "summarize": "lightning_hpo.report.summary",
    "curves_frame": "lightning_hpo.report.tables",
    "hypervolume_frame": "lightning_hpo.report.tables",
    "incumbent_frame": "lightning_hpo.report.tables",
    "rungs_frame": "lightning_hpo.report.tables",
    "segments_frame": "lightning_hpo.report.tables",
    "trials_frame": "lightning_hpo.report.tables",
}

__all__ = [
    "RANK_ORDER",
    "RANK_ORDER_FRONTS",
    "STATES",
    "STATE_COLORS",
    "STATUSES",
    "Comparison",
    "Pause",
    "Segment",
    "StudyInfo",
    "StudySnapshot",
    "TrialFronts",
    "TrialRecord",
    "compare",
    "curves_frame",
    "write_best_config",
    "hypervolume_frame",
    "incumbent_frame",
    "limitations",
    "load",
    "load_ref",
    "plot_compare",
    "plot_compare_hypervolume",
    "plot_hypervolume",
    "plot_incumbent",
    "plot_learning_curves",
    "plot_pareto",
    "plot_rungs",
    "plot_timeline",
    "rungs_frame",
    "segments_frame",
    "study_info",
    "summarize",
    "trials_frame",
    "write_compare",
    "write_report",
]

if TYPE_CHECKING:
    from lightning_hpo.report.best_config import write_best_config
    from lightning_hpo.report.comparison import Comparison, compare
    from lightning_hpo.report.files import write_compare, write_report
    from lightning_hpo.report.fronts import TrialFronts
    from lightning_hpo.report.info import StudyInfo, study_info
    from lightning_hpo.report.opening import load, load_ref
    from lightning_hpo.report.plots import (
        STATE_COLORS,
        plot_compare,
        plot_compare_hypervolume,
        plot_hypervolume,
        plot_incumbent,
        plot_learning_curves,
        plot_pareto,
        plot_rungs,
        plot_timeline,
    )
    from lightning_hpo.report.snapshot import (
        RANK_ORDER,
        RANK_ORDER_FRONTS,
        STATES,
        STATUSES,
        Pause,
        Segment,
        StudySnapshot,
        TrialRecord,
    )
    from lightning_hpo.report.summary import limitations, summarize
    from lightning_hpo.report.tables import (
        curves_frame,
        hypervolume_frame,
        incumbent_frame,
        rungs_frame,
        segments_frame,
        trials_frame,
    )


__getattr__, __dir__ = lazy_exports(sys.modules[__name__], _EXPORTS, __all__)
