"""The Pareto front of a study with several objectives: :func:`plot_pareto`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.plots._common import (
    empty,
    metric_label,
    new_figure,
    reference_words,
)

__all__ = ["plot_pareto"]


#: Trials on a front labelled with their number up to this many.
_FRONT_LABELS = 12


def _staircase(
    xs: np.ndarray, ys: np.ndarray, minimize: tuple[bool, bool],
    reference: Sequence[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The boundary of what mutually non-dominated points dominate: from each point to the
    next, first along the better first objective, then the second; from the reference's level
    to the first and on to the reference's level after the last when ``reference`` is given."""
    flip = np.array([1.0 if low else -1.0 for low in minimize])
    points = sorted(zip(xs * flip[0], ys * flip[1], strict=True))  # lower is better in both
    vx: list[float] = []
    vy: list[float] = []
    if reference is not None:
        vx.append(points[0][0])
        vy.append(reference[1] * flip[1])
    for k, (x, y) in enumerate(points):
        if k:
            vx.append(x)
            vy.append(points[k - 1][1])
        vx.append(x)
        vy.append(y)
    if reference is not None:
        vx.append(reference[0] * flip[0])
        vy.append(points[-1][1])
    return np.array(vx) * flip[0], np.array(vy) * flip[1]


def _not_drawn(count: int) -> str:
    """A legend's words for points with an infinite value, which cannot be drawn."""
    return f"; {count} infinite, not drawn" if count else ""


def plot_pareto(
    trials: pd.DataFrame, info: StudyInfo, *, reference: Sequence[float] | None = None
) -> Figure:
    """The Pareto front of a study with several objectives, on its first two objectives.

    Filled circles are the COMPLETE trials' final values (``values_<metric>``): the Pareto
    front (``front`` 0) in blue, joined by a staircase, the boundary of what it dominates
    (shaded up to the reference point, the hypervolume, when one is given), the dominated
    trials faded grey. Hollow diamonds are each trial's best point at any epoch
    (``best_<metric>``, whatever its state): those on the front of every value reported
    (``best_front`` 0) in orange, joined by a dashed staircase, the others faded. Trials on a
    front are labelled with their number (up to 12 per front); a point with an infinite value
    on either axis is not drawn, and the legend counts it. With more than two objectives
    the fronts are those of all of them: on two, a front's points need not form a staircase,
    and none is drawn.

    Args:
        trials: :func:`~lightning_hpo.report.trials_frame` of the study.
        info: :func:`~lightning_hpo.report.study_info` (two objectives or more).
        reference: the hypervolume's reference point (its first two values are drawn as a
            cross), e.g. :attr:`StudySnapshot.reference
            <lightning_hpo.report.StudySnapshot.reference>`.

    Returns:
        The figure; marker groups with ``gid`` ``front`` and ``dominated`` (final values),
        ``front-any-epoch`` and ``dominated-any-epoch`` (best points at any epoch), one point
        per trial; lines ``staircase`` and ``staircase-any-epoch``; the reference
        ``reference``.

    Raises:
        ValueError: ``info`` has one objective.

    Example::

        >>> snap = StudySnapshot.read(study)  # doctest: +SKIP
        >>> plot_pareto(trials_frame(snap), snap.info, reference=snap.reference)  # doctest: +SKIP
    """
    if not info.several:
        raise ValueError(f"The value of `info` names one objective ({info.metric}), but a "
                         "Pareto front needs two or more.")
    (mx, my), minimize = info.metrics[:2], (info.minimize[0], info.minimize[1])
    two = len(info.metrics) == 2
    fig = new_figure(width=10.0, height=6.4)
    ax = fig.add_subplot()
    suffix = "" if two else f" (the first two of {len(info.metrics)} objectives)"
    ax.set_title(f"Pareto front of study '{info.name}'{suffix}")
    ax.set_xlabel(metric_label(info.objective(0)))
    ax.set_ylabel(metric_label(info.objective(1)))
    finals = trials.dropna(subset=[f"values_{mx}", f"values_{my}", "front"])
    bests = trials.dropna(subset=[f"best_{mx}", f"best_{my}", "best_front"])
    if finals.empty and bests.empty:
        empty(ax, "no finite values reported yet")
        return fig
    # (frame, column prefix, rank column, gid suffix, words, colour, staircase style, markers
    # on the front, markers off it); the final values drawn last, on top
    layers: list[tuple[pd.DataFrame, str, str, str, str, str, str, dict[str, Any],
                       dict[str, Any]]] = [
        (bests, "best_", "best_front", "-any-epoch", f"best point at any {info.resource}",
         "#ff7f0e", "--",
         {"marker": "D", "s": 60, "facecolor": "none", "edgecolor": "#ff7f0e",
          "linewidths": 1.6, "zorder": 4},
         {"marker": "D", "s": 22, "facecolor": "none", "edgecolor": "0.6", "alpha": 0.45,
          "linewidths": 0.8, "zorder": 1}),
        (finals, "values_", "front", "", "final values (COMPLETE)", "C0", "-",
         {"marker": "o", "s": 46, "color": "C0", "edgecolor": "white", "zorder": 5},
         {"marker": "o", "s": 22, "color": "0.7", "alpha": 0.45, "linewidths": 0, "zorder": 1}),
    ]
    for frame, prefix, rank, gid, words, color, ls, on_style, off_style in layers:
        if frame.empty:
            continue
        # an infinite value (a plain Optuna study's) ranks as a number but has no place here
        drawn = np.isfinite(frame[[f"{prefix}{mx}", f"{prefix}{my}"]].to_numpy(float)).all(1)
        on, off = frame[drawn & (frame[rank] == 0)], frame[drawn & (frame[rank] != 0)]
        hidden_on = int((~drawn & (frame[rank] == 0)).sum())
        hidden_off = int((~drawn & (frame[rank] != 0)).sum())
        x_on, y_on = on[f"{prefix}{mx}"].to_numpy(float), on[f"{prefix}{my}"].to_numpy(float)
        ax.scatter(off[f"{prefix}{mx}"], off[f"{prefix}{my}"], gid=f"dominated{gid}",
                   label=f"{words}: dominated ({len(off)}{_not_drawn(hidden_off)})",
                   **off_style)
        ax.scatter(x_on, y_on, gid=f"front{gid}",
                   label=f"{words}: Pareto front ({len(on)}{_not_drawn(hidden_on)})", **on_style)
        if two and len(on):
            vx, vy = _staircase(x_on, y_on, minimize, reference)
            ax.plot(vx, vy, color=color, ls=ls, lw=1.4, gid=f"staircase{gid}", zorder=3)
            if reference is not None and not gid:  # what the front dominates: the hypervolume
                ax.fill(np.append(vx, reference[0]), np.append(vy, reference[1]), color=color,
                        alpha=0.07, lw=0, gid="dominated-region", zorder=0)
        labelled = set(finals.loc[finals["front"] == 0, "trial"]) if gid else set()
        shown = [(n, x_at, y_at) for n, x_at, y_at in zip(on["trial"], x_on, y_on, strict=True)
                 if n not in labelled]  # a trial on both fronts is labelled once
        for number, x_at, y_at in shown[:_FRONT_LABELS]:
            note = ax.annotate(str(int(number)), (x_at, y_at), xytext=(4, 4),
                               textcoords="offset points", fontsize=8, color=color, zorder=6)
            note.set_in_layout(False)
    if reference is not None:
        ax.plot(reference[0], reference[1], marker="x", color="0.3", ms=8, ls="none",
                gid="reference", label=f"reference point ({reference_words(info, reference)})")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncols=2, fontsize=9)
    return fig

