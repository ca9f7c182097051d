"""Tables, CSV files and plots from any Optuna study: ``python -m lightning_hpo.report``.

The report reads the study and writes nothing to it. It understands what the launcher stores
per trial (slot, device, start and end times, one end time per epoch) and falls back on
Optuna's ``datetime_start``/``datetime_complete`` for plain Optuna studies, saying in one line
what it cannot draw for them (:func:`limitations`). The CLI prints and writes exactly these::

    from lightning_hpo.report import (StudySnapshot, compare, curves_frame, incumbent_frame,
                                      load, summarize, trials_frame, write_report)

    snap = StudySnapshot.read(load("runs/quickstart.journal"))  # or load(url, "study-name")
    trials_frame(snap), curves_frame(snap), incumbent_frame(snap)  # pandas DataFrames
    summarize(snap)["best_value"]                      # best value reported at any epoch
    paths = write_report(snap, "reports/quickstart")   # {"trials.csv": Path, ..., "rungs.png": ...}
    compare([load("runs/asha.journal"), load("runs/random.journal")])  # time to the other's best

Every table, :func:`summarize`, :func:`limitations` and :func:`write_report` take a study (read
on the spot) or a :class:`StudySnapshot` (read once). A study with several objectives is ranked
on Pareto fronts and its progress is a hypervolume (:func:`hypervolume_frame`,
:func:`plot_pareto`); one trained by steps is reported in steps (``snap.info.resource``).

The modules, in the order they build on each other: :mod:`.opening`, :mod:`.info`,
:mod:`.fronts`, :mod:`.snapshot`, :mod:`.tables`, :mod:`.summary`, :mod:`.comparison`,
:mod:`.best_config`, :mod:`.plots` and :mod:`.files`. They read the study through
:mod:`lightning_hpo.storage`, :mod:`lightning_hpo.schema` and the rung records only: nothing
of the launcher or the pruners. The names below are imported on first use, so that
:mod:`.snapshot` (which the launcher's closing summary reads) costs no pandas or matplotlib.
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
