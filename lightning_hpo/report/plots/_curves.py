"""Every trial's learning curve: :func:`plot_learning_curves`."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.plots._common import (
    STATE_COLORS,
    WALL,
    empty,
    metric_label,
    new_figure,
    paused_at,
    steps_label,
    value_scale,
)

__all__ = ["plot_learning_curves"]


_CURVE_STYLE: dict[str, dict[str, Any]] = {
    "COMPLETE": {"color": "C0", "ls": "-", "lw": 1.3, "alpha": 0.85},
    "PRUNED": {"color": "0.55", "ls": "--", "lw": 1.0, "alpha": 0.75},
    "FAIL": {"color": STATE_COLORS["FAIL"], "ls": ":", "lw": 1.2, "alpha": 0.9},
    "RUNNING": {"color": STATE_COLORS["RUNNING"], "ls": "-", "lw": 1.0, "alpha": 0.9},
    "PAUSED": {"color": STATE_COLORS["PAUSED"], "ls": "-.", "lw": 1.2, "alpha": 0.9},
}
#: Paused trials labelled one by one on the learning curves up to this many (else the legend).
_PAUSE_LABELS = 8


def plot_learning_curves(
    curves: pd.DataFrame,
    info: StudyInfo,
    *,
    x: Literal["auto", "wallclock", "epochs"] = "auto",
    best_trial: int | None = None,
    trials: pd.DataFrame | None = None,
    objective: int | None = None,
) -> Figure:
    """The metric of every trial, a line per trial, against wall-clock (or epochs).

    COMPLETE trials are solid blue, PRUNED dashed grey ending in an ``x`` where the pruner
    stopped them (a square where the study's budget did), FAIL dotted red, RUNNING thin
    cyan, PAUSED (a RUNNING trial waiting between two segments) dash-dotted pink with a
    pentagon at the epoch it resumes from, labelled ``PAUSED @ <epoch>`` (up to 8 of them);
    the trial that reported the best value is thick black.

    Args:
        curves: :func:`~lightning_hpo.report.curves_frame` (its ``status`` column says which
            trials are paused).
        info: :func:`~lightning_hpo.report.study_info`.
        x: ``wallclock`` (s since the first trial started; trials without epoch times are
            left out), ``epochs``, or ``auto`` (wall-clock when any trial has epoch times).
        best_trial: the trial to highlight (default: the one that reported the best value,
            at any epoch).
        trials: :func:`~lightning_hpo.report.trials_frame`, for the epoch each paused trial
            resumes from (``paused_epoch``); without it, its last reported epoch.
        objective: with several objectives, which one to draw (its index: its curves'
            ``values_<metric>`` column); default the first. Its best trial is the one that
            reported its best value.

    Returns:
        The figure; each trial is one line with ``gid=f"trial-{number}"``; the paused
        trials' pentagons are one marker line ``gid="paused-at"`` and their labels texts
        with ``gid=f"paused-{number}"``.

    Example::

        >>> import optuna
        >>> from lightning_hpo.report import StudySnapshot, curves_frame
        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> def objective(trial):
        ...     lr = trial.suggest_float("lr", 0.01, 1.0, log=True)
        ...     for epoch in range(1, 4):
        ...         trial.report(lr / epoch, step=epoch)
        ...     return lr / 3
        >>> study = optuna.create_study()
        >>> study.optimize(objective, n_trials=3)
        >>> snap = StudySnapshot.read(study)
        >>> fig = plot_learning_curves(curves_frame(snap), snap.info)
        >>> sorted(line.get_gid() for line in fig.axes[0].lines)
        ['trial-0', 'trial-1', 'trial-2']
    """
    if info.several:
        k = objective or 0
        column = f"values_{info.metrics[k]}"
        if column in curves:
            curves = curves.assign(value=curves[column])
        info = info.objective(k)
    fig = new_figure()
    ax = fig.add_subplot()
    timed = curves.dropna(subset=["elapsed_s"])
    if x == "auto":
        x = "wallclock" if not timed.empty else "epochs"
    data = timed if x == "wallclock" else curves
    column = "elapsed_s" if x == "wallclock" else "step"
    ax.set_title(f"Learning curves of study '{info.name}'")
    ax.set_xlabel(WALL if x == "wallclock" else steps_label(info))
    ax.set_ylabel(metric_label(info))
    if data.empty:
        empty(ax, "no intermediate values to draw")
        return fig
    if best_trial is None:
        finite = data[np.isfinite(data["value"].to_numpy(float))]
        if not finite.empty:
            pick = finite["value"].idxmin() if info.direction == "minimize" else (
                finite["value"].idxmax())
            best_trial = int(finite.loc[pick, "trial"])
    counts: dict[str, int] = {}
    stops: list[tuple[float, float]] = []
    budget: list[tuple[float, float]] = []  # PRUNED because the study's budget was spent
    waits: list[tuple[int, int, float, float]] = []  # paused: trial, epoch, x, y
    paused = paused_at(trials, curves)
    fade = min(1.0, 40 / max(1, data["trial"].nunique()))  # many trials: lighter lines
    for number, rows in data.sort_values([column]).groupby("trial", sort=True):
        state = "PAUSED" if number in paused else str(rows["state"].iloc[0])
        style = dict(_CURVE_STYLE.get(state, _CURVE_STYLE["RUNNING"]))
        style["alpha"] = max(0.15, style["alpha"] * fade)
        if number == best_trial:
            style.update(color="black", lw=2.6, alpha=1.0, ls="-")
        counts[state] = counts.get(state, 0) + 1
        ax.plot(rows[column], rows["value"], marker="." if len(rows) == 1 else None,
                gid=f"trial-{number}", zorder=5 if number == best_trial else 2, **style)
        if state == "PRUNED":
            by_budget = "stopped_by" in rows and rows["stopped_by"].iloc[0] == "budget"
            (budget if by_budget else stops).append(
                (rows[column].iloc[-1], rows["value"].iloc[-1]))
        elif state == "PAUSED":  # where it waits: the epoch it resumes from
            epoch = paused[number]
            at = rows[rows["step"] == epoch] if epoch is not None else rows.iloc[:0]
            at = at if not at.empty else rows.sort_values("step").iloc[-1:]
            waits.append((int(number), int(at["step"].iloc[0]) if epoch is None else epoch,
                          float(at[column].iloc[0]), float(at["value"].iloc[0])))
    for points, marker, gid in ((stops, "x", "pruned-end"), (budget, "s", "budget-end")):
        if points:
            x_stop, y_stop = zip(*points, strict=True)
            ax.plot(x_stop, y_stop, marker=marker, ms=5, color=_CURVE_STYLE["PRUNED"]["color"],
                    ls="none", gid=gid, zorder=2)
    if waits:
        ax.plot([w[2] for w in waits], [w[3] for w in waits], marker="p", ms=8, ls="none",
                color=STATE_COLORS["PAUSED"], markeredgecolor="white", gid="paused-at", zorder=6)
        for number, epoch, x_at, y_at in waits[:_PAUSE_LABELS]:
            label = ax.annotate(f"PAUSED @ {epoch}", (x_at, y_at), xytext=(5, 4),
                                textcoords="offset points", fontsize=8,
                                color=STATE_COLORS["PAUSED"], gid=f"paused-{number}", zorder=7)
            label.set_in_layout(False)
    value_scale(ax, data["value"])
    if x == "epochs":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    handles = [
        Line2D([], [], label=f"{state} ({n})", **{k: v for k, v in _CURVE_STYLE[state].items()
                                                   if k != "alpha"})
        for state, n in counts.items() if state in _CURVE_STYLE
    ]
    if budget:
        handles.append(Line2D([], [], marker="s", ls="none", color=_CURVE_STYLE["PRUNED"][
            "color"], label=f"stopped by the budget ({len(budget)})"))
    if waits:
        handles.append(Line2D([], [], marker="p", ls="none", color=STATE_COLORS["PAUSED"],
                              label="PAUSED @ the epoch it resumes from"))
    if best_trial is not None and best_trial in set(data["trial"]):
        handles.append(Line2D([], [], color="black", lw=2.6,
                              label=f"best value: trial {best_trial}"))
    fig.legend(handles=handles, loc="outside right upper", title="trials")
    return fig

