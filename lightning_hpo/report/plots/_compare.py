"""Several studies side by side, over wall-clock and over epochs spent: :func:`plot_compare`
(incumbents) and :func:`plot_compare_hypervolume`."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.plots._common import (
    metric_label,
    new_figure,
    reference_words,
    value_scale,
)

__all__ = ["plot_compare", "plot_compare_hypervolume"]


def plot_compare(incumbents: pd.DataFrame, info: StudyInfo) -> Figure:
    """Incumbent trajectories of several studies, over wall-clock and over epochs spent.

    Args:
        incumbents: the long frame of :func:`~lightning_hpo.report.incumbent_frame` rows with
            a ``study`` column (:attr:`Comparison.incumbents
            <lightning_hpo.report.Comparison.incumbents>`).
        info: any of the studies' info (for the metric name and direction).

    Returns:
        The figure: two axes (wall-clock, epochs), one step line per study on each with
        ``gid=f"study-{label}"``.

    Example::

        >>> comparison = Comparison.of([asha, rs])  # doctest: +SKIP
        >>> plot_compare(comparison.incumbents, comparison.info)  # doctest: +SKIP
    """
    fig = new_figure(width=12.0, height=5.4)
    by_time, by_epochs = fig.subplots(1, 2, sharey=True)
    fig.suptitle(f"Incumbent trajectories: best {info.metric} reported so far "
                 f"(any trial, any {info.resource})")
    by_time.set_xlabel("wall-clock since each study's first trial started (s)")
    by_epochs.set_xlabel(f"{info.units} trained so far (all trials)")
    by_time.set_ylabel(f"best {metric_label(info)}")
    for k, (label, inc) in enumerate(incumbents.groupby("study", sort=False)):
        inc = inc.dropna(subset=["best"])
        if inc.empty:
            continue
        best = inc["best"].to_numpy(float)
        for ax, column in ((by_time, "elapsed_s"), (by_epochs, "epochs_spent")):
            x = inc[column].to_numpy(float)
            ax.step(x, best, where="post",
                    color=f"C{k % 10}", lw=2, gid=f"study-{label}",
                    label=f"{label}: {best[-1]:.4g}" if ax is by_time else None)
            ax.plot(x[-1], best[-1], "o", color=f"C{k % 10}", ms=5, gid="final-best")
    for ax in (by_time, by_epochs):
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    value_scale(by_time, incumbents["best"])
    fig.legend(loc="outside right upper", title="study: final best")
    return fig


def plot_compare_hypervolume(hypervolumes: pd.DataFrame, info: StudyInfo) -> Figure:
    """Hypervolume of several studies with several objectives, over wall-clock and over epochs
    spent, all bounded by one reference point.

    Args:
        hypervolumes: the long frame of :func:`~lightning_hpo.report.hypervolume_frame` rows
            with a ``study`` column (:attr:`Comparison.hypervolumes
            <lightning_hpo.report.Comparison.hypervolumes>`; its ``attrs["reference"]`` names
            the shared reference point).
        info: any of the studies' info (for the objectives).

    Returns:
        The figure: two axes (wall-clock, epochs), one step line per study on each with
        ``gid=f"study-{label}"``.

    Example::

        >>> comparison = Comparison.of([moasha, rs])  # doctest: +SKIP
        >>> plot_compare_hypervolume(comparison.hypervolumes, comparison.info)  # doctest: +SKIP
    """
    fig = new_figure(width=12.0, height=5.4)
    by_time, by_epochs = fig.subplots(1, 2, sharey=True)
    reference = hypervolumes.attrs.get("reference")
    fig.suptitle(f"Hypervolume of every value reported so far (any trial, any "
                 f"{info.resource})\n{info.objectives}; shared reference point "
                 f"{reference_words(info, reference)}", fontsize=11)
    by_time.set_xlabel("wall-clock since each study's first trial started (s)")
    by_epochs.set_xlabel(f"{info.units} trained so far (all trials)")
    by_time.set_ylabel("hypervolume (higher is better)")
    for k, (label, hv) in enumerate(hypervolumes.groupby("study", sort=False)):
        if hv.empty:
            continue
        y = hv["hypervolume"].to_numpy(float)
        for ax, column in ((by_time, "elapsed_s"), (by_epochs, "epochs_spent")):
            x = hv[column].to_numpy(float)
            ax.step(x, y, where="post", color=f"C{k % 10}", lw=2, gid=f"study-{label}",
                    label=f"{label}: {y[-1]:.4g}" if ax is by_time else None)
            ax.plot(x[-1], y[-1], "o", color=f"C{k % 10}", ms=5, gid="final-hypervolume")
    for ax in (by_time, by_epochs):
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    by_time.legend(loc="lower right", title="study: final hypervolume")
    return fig

