"""The report's pictures, drawn from the frames of :mod:`lightning_hpo.report.tables`.

Each function takes DataFrames (and the study's :class:`~lightning_hpo.report.StudyInfo`)
and returns a :class:`matplotlib.figure.Figure` on the Agg canvas: no display, no pyplot state.
Every trial drawn is one artist whose ``gid`` names it (``trial-7``), and marker groups carry a
``gid`` too (``promoted``, ``stopped``...), so what was drawn can be counted from the figure.

A study with several objectives has its own: :func:`plot_pareto` (the front of the first two
objectives), :func:`plot_hypervolume` (its counterpart of the incumbent trajectory) and
:func:`plot_compare_hypervolume`; its learning curves are drawn one objective at a time by
:func:`plot_learning_curves` (``objective=``), and :func:`plot_rungs` draws its rung records on
the first objective.

One figure per module: ``_incumbent`` (:func:`plot_incumbent`), ``_curves``
(:func:`plot_learning_curves`), ``_rungs`` (:func:`plot_rungs`), ``_timeline``
(:func:`plot_timeline`), ``_compare`` (:func:`plot_compare`, :func:`plot_compare_hypervolume`),
``_pareto`` (:func:`plot_pareto`), ``_hypervolume`` (:func:`plot_hypervolume`); ``_common``
holds what they share (the figure, axis labels, the value scale, :data:`STATE_COLORS`).

Example::

    from lightning_hpo.report import StudySnapshot, load, curves_frame, plot_learning_curves

    snap = StudySnapshot.read(load("runs/quickstart.journal"))
    fig = plot_learning_curves(curves_frame(snap), snap.info)
    fig.savefig("curves.png")
"""

from lightning_hpo.report.plots._common import STATE_COLORS
from lightning_hpo.report.plots._compare import plot_compare, plot_compare_hypervolume
from lightning_hpo.report.plots._curves import plot_learning_curves
from lightning_hpo.report.plots._hypervolume import plot_hypervolume
from lightning_hpo.report.plots._incumbent import plot_incumbent
from lightning_hpo.report.plots._pareto import plot_pareto
from lightning_hpo.report.plots._rungs import plot_rungs
from lightning_hpo.report.plots._timeline import plot_timeline

__all__ = [
    "STATE_COLORS",
    "plot_compare",
    "plot_compare_hypervolume",
    "plot_hypervolume",
    "plot_incumbent",
    "plot_learning_curves",
    "plot_pareto",
    "plot_rungs",
    "plot_timeline",
]
