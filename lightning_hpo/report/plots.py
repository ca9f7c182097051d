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

Example::

    from lightning_hpo.report import StudySnapshot, load, curves_frame, plot_learning_curves

    snap = StudySnapshot.read(load("runs/quickstart.journal"))
    fig = plot_learning_curves(curves_frame(snap), snap.info)
    fig.savefig("curves.png")
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import (
    FixedFormatter,
    FixedLocator,
    FuncFormatter,
    MaxNLocator,
    NullLocator,
)
from matplotlib.transforms import blended_transform_factory

from lightning_hpo.report.info import StudyInfo

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

_logger = logging.getLogger(__name__)

#: Colours of trial states, as the launcher's live table shows them (PAUSED: a RUNNING trial
#: waiting between two training segments).
STATE_COLORS = {
    "COMPLETE": "#2ca02c",
    "PRUNED": "#e0a800",
    "FAIL": "#d62728",
    "RUNNING": "#17becf",
    "PAUSED": "#e377c2",
}
_WALL = "wall-clock since the study's first trial started (s)"
_DPI = 110


def _figure(width: float = 10.0, height: float = 5.6) -> Figure:
    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _label(info: StudyInfo) -> str:
    arrow = "lower is better" if info.direction == "minimize" else "higher is better"
    return f"{info.metric} ({arrow})"


def _steps(info: StudyInfo) -> str:
    """The step axis: epochs for our studies, optimizer steps for a study by steps, Optuna's
    reported step for any other."""
    if info.resource == "step":
        return "optimizer steps (as reported to Optuna)"
    return "epochs completed" if info.from_launcher else "step (as reported to Optuna)"


def _a(info: StudyInfo) -> str:
    """``an epoch`` or ``a step``: what the study's trials report at."""
    return "an epoch" if info.resource == "epoch" else "a step"


def _finite(values: Iterable[float]) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    return array[np.isfinite(array)]


def _value_scale(ax: matplotlib.axes.Axes, values: Iterable[float]) -> None:
    """Log scale when the values are positive and span more than a decade and a half."""
    array = _finite(values)
    if array.size and array.min() > 0 and array.max() / array.min() > 30:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def _empty(ax: matplotlib.axes.Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


# ------------------------------------------------------------------------------------------
def plot_incumbent(
    incumbent: pd.DataFrame, info: StudyInfo, *, until_s: float | None = None
) -> Figure:
    """Best value so far against wall-clock seconds since the study's first trial started.

    Two labelled step lines: the best value any trial reported at any epoch (the default
    incumbent of multi-fidelity search: a PRUNED trial's good epoch counts), and, dashed, the
    best COMPLETE trial's final value so far (the classic incumbent, which a study whose
    trials are mostly pruned rarely moves). Every reported value is a faint dot behind them.

    Args:
        incumbent: :func:`~lightning_hpo.report.incumbent_frame`.
        info: :func:`~lightning_hpo.report.study_info`.
        until_s: draw the last best up to here (s), e.g. the study's last trial end.

    Returns:
        The figure: the step lines (``gid="incumbent"`` and ``gid="incumbent-complete"``),
        every reported value as a faint dot (``gid="reported"``), every COMPLETE final value
        as a dot (``gid="completed"``), each new best as a marker (``gid="improvements"``, and
        ``gid="improvements-complete"`` on the dashed line).

    Example::

        >>> plot_incumbent(incumbent_frame(study), study_info(study))  # doctest: +SKIP
    """
    fig = _figure()
    ax = fig.add_subplot()
    ax.set_title(f"Incumbent trajectory of study '{info.name}'")
    ax.set_xlabel(_WALL)
    ax.set_ylabel(f"best {_label(info)}")
    valid = incumbent.dropna(subset=["best"])
    if valid.empty:
        _empty(ax, "no value reported yet")
        return fig
    end = max(float(incumbent["elapsed_s"].max()), until_s or 0.0)
    reported = incumbent[incumbent["kind"] == "epoch"]
    ax.scatter(reported["elapsed_s"], reported["value"], s=7, color="0.72", linewidths=0,
               label=f"value reported at {_a(info)} ({len(reported)})", gid="reported",
               zorder=1)
    finals = incumbent[incumbent["kind"] == "final"]
    if not finals.empty:
        ax.scatter(finals["elapsed_s"], finals["value"], s=20, facecolor="none",
                   edgecolor="C1", linewidths=0.9, gid="completed", zorder=2,
                   label=f"COMPLETE trial's final value ({len(finals)})")
    x, best = valid["elapsed_s"].to_numpy(float), valid["best"].to_numpy(float)
    ax.step(np.append(x, end), np.append(best, best[-1]), where="post", color="C0", lw=3.2,
            alpha=0.85, label=f"best value reported so far\n(any trial, any {info.resource})",
            gid="incumbent", zorder=3)
    gains = incumbent[incumbent["improved"]]
    ax.scatter(gains["elapsed_s"], gains["best"], s=44, color="C0", edgecolor="white",
               gid="improvements", zorder=4)
    last = gains.iloc[-1]
    where = f"{info.resource} {int(last['step'])}" if pd.notna(last["step"]) else "final"
    _note(ax, f"{last['best']:.4g}: trial {int(last['trial'])}, {where} "
          f"({_outcome(last.get('status', last['state']), last['stopped_by'])})",
          (end, last["best"]), below=True, color="C0")
    complete = incumbent.dropna(subset=["best_complete"])
    if complete.empty:
        ax.plot([], [], color="C1", ls="--", lw=1.8, gid="incumbent-complete",
                label="best COMPLETE trial so far:\nno COMPLETE trial yet")
    else:
        xc, bc = complete["elapsed_s"].to_numpy(float), complete["best_complete"].to_numpy(float)
        # on top of the thick solid line, so that both show where they coincide
        ax.step(np.append(xc, end), np.append(bc, bc[-1]), where="post", color="C1", ls="--",
                lw=1.6, label="best COMPLETE trial so far\n(its final value)",
                gid="incumbent-complete", zorder=5)
        gains_c = incumbent[incumbent["improved_complete"]]
        ax.scatter(gains_c["elapsed_s"], gains_c["best_complete"], s=26, color="C1",
                   edgecolor="white", gid="improvements-complete", zorder=6)
        last_c = gains_c.iloc[-1]
        _note(ax, f"{last_c['best_complete']:.4g}: trial {int(last_c['trial'])} (COMPLETE)",
              (end, last_c["best_complete"]), below=False, color="C1")
    _value_scale(ax, incumbent["value"])
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper")
    return fig


def _note(
    ax: matplotlib.axes.Axes, text: str, xy: tuple[float, float], *, below: bool, color: str
) -> None:
    """A label ending at ``xy`` (a line's right end), just above or below the line."""
    note = ax.annotate(text, xy, xytext=(-2, -13 if below else 5), textcoords="offset points",
                       ha="right", color=color, fontsize=9, zorder=7,
                       bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                             "alpha": 0.85})
    note.set_in_layout(False)  # a label must not shrink the axes


def _outcome(status: Any, stopped_by: Any) -> str:
    """A trial's end (or pause) in words: COMPLETE, PRUNED by the pruner, stopped by the
    budget, PAUSED..."""
    if status == "PRUNED":
        return "stopped by the budget" if stopped_by == "budget" else "PRUNED by the pruner"
    if status == "PAUSED":
        return "PAUSED, to be resumed"
    return str(status)


# ------------------------------------------------------------------------------------------
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
    fig = _figure()
    ax = fig.add_subplot()
    timed = curves.dropna(subset=["elapsed_s"])
    if x == "auto":
        x = "wallclock" if not timed.empty else "epochs"
    data = timed if x == "wallclock" else curves
    column = "elapsed_s" if x == "wallclock" else "step"
    ax.set_title(f"Learning curves of study '{info.name}'")
    ax.set_xlabel(_WALL if x == "wallclock" else _steps(info))
    ax.set_ylabel(_label(info))
    if data.empty:
        _empty(ax, "no intermediate values to draw")
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
    paused = _paused_at(trials, curves)
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
    _value_scale(ax, data["value"])
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


# ------------------------------------------------------------------------------------------
_RUNG_MARKERS: dict[str, dict[str, Any]] = {
    "promoted": {"marker": "^", "color": "#2ca02c", "label": "promoted past the rung"},
    "paused": {"marker": "p", "color": STATE_COLORS["PAUSED"], "size": 70,
               "label": "PAUSED here (waits to be promoted or resumed)"},
    "pruned": {"marker": "X", "color": "#d62728", "label": "PRUNED here by the pruner"},
    "stopped-by-budget": {"marker": "s", "color": "0.35",
                          "label": "stopped by the study's budget (last epoch)"},
    "completed": {"marker": "o", "color": "C0", "label": "COMPLETE (final epoch)"},
    "failed": {"marker": "D", "color": "#9467bd", "label": "FAIL (last epoch)"},
    "running": {"marker": "o", "color": STATE_COLORS["RUNNING"], "label": "RUNNING (so far)"},
}


def _rung_points(
    curves: pd.DataFrame,
    rungs: pd.DataFrame | None,
    brackets: tuple[tuple[int, ...], ...],
    paused: dict[int, int | None],
) -> pd.DataFrame:
    """One row per marker: (bracket, trial, step, value, kind).

    Promotions, prunings and pauses at rungs come from the pruner's records (``rungs``); for
    a trial without records (a pausing schedule keeps none) a promotion is read from its
    curve: it reported an epoch past the rung of its bracket. A paused trial (``paused``:
    trial -> the epoch it waits at) is marked where it waits; every other trial's last epoch
    gets a marker by how it ended, except a trial PRUNED where its record says so.
    """
    rows = []
    marked: set[int] = set()  # trials whose record already marks where they stopped or wait
    recorded: set[int] = set()
    if rungs is not None:
        for row in rungs.itertuples(index=False):
            recorded.add(int(row.trial))
            if row.outcome in ("promoted", "pruned", "paused"):
                rows.append({"bracket": row.bracket, "trial": row.trial, "step": row.rung,
                             "value": row.value, "kind": row.outcome})
            if row.outcome in ("pruned", "paused"):
                marked.add(int(row.trial))
    for number, trial in curves.sort_values("step").groupby("trial"):
        steps = [int(x) for x in trial["step"]]
        values = trial["value"].tolist()
        bracket = trial["bracket"].iloc[0] if "bracket" in trial else None
        if number not in recorded:
            for level in _levels_of(brackets, bracket)[:-1]:
                reach = next((k for k, step in enumerate(steps) if step >= level), None)
                if reach is not None and steps[-1] > steps[reach]:
                    rows.append({"bracket": bracket, "trial": number, "step": level,
                                 "value": values[reach], "kind": "promoted"})
        if number in marked:
            continue
        last = trial.iloc[-1]
        if number in paused:
            epoch = paused[number]
            k = steps.index(epoch) if epoch in steps else len(steps) - 1
            rows.append({"bracket": bracket, "trial": number, "step": steps[k],
                         "value": values[k], "kind": "paused"})
            continue
        state, stopped_by = str(last["state"]), last.get("stopped_by")
        if state == "PRUNED":
            kind = "stopped-by-budget" if stopped_by == "budget" else "pruned"
        else:
            kind = {"COMPLETE": "completed", "FAIL": "failed"}.get(state, "running")
        rows.append({"bracket": last.get("bracket"), "trial": number, "step": int(last["step"]),
                     "value": last["value"], "kind": kind})
    return pd.DataFrame(rows, columns=["bracket", "trial", "step", "value", "kind"])


def _levels_of(brackets: tuple[tuple[int, ...], ...], bracket: Any) -> tuple[int, ...]:
    """The rung levels of a trial's bracket (the only one's when there is one); ``()`` when
    unknown."""
    if len(brackets) == 1:
        return brackets[0]
    if pd.isna(bracket) or not 0 <= int(bracket) < len(brackets):
        return ()
    return brackets[int(bracket)]


def _paused_at(
    trials: pd.DataFrame | None, curves: pd.DataFrame | None = None
) -> dict[int, int | None]:
    """Paused trials -> the epoch each waits at (``None`` when unknown): those of a
    :func:`~lightning_hpo.report.trials_frame` (its ``paused_epoch``), else the trials whose
    ``status`` is ``PAUSED`` in a :func:`~lightning_hpo.report.curves_frame`."""
    if trials is not None and "paused" in trials:
        rows = trials[trials["paused"].astype(bool)]
        epochs = rows["paused_epoch"] if "paused_epoch" in rows else pd.Series(pd.NA, rows.index)
        return {int(n): None if pd.isna(e) else int(e)
                for n, e in zip(rows["trial"], epochs, strict=True)}
    if curves is not None and "status" in curves:
        return {int(n): None for n in curves.loc[curves["status"] == "PAUSED", "trial"].unique()}
    return {}


def _in_bracket(frame: pd.DataFrame, bracket: int) -> pd.Series:
    """Rows of ``frame`` whose ``bracket`` is ``bracket`` (an unknown bracket never is)."""
    return frame["bracket"].astype("Int64").eq(bracket).fillna(False).astype(bool)


def _grid(n: int) -> tuple[int, int]:
    """(rows, columns) of the panels: one row up to 3, then two rows."""
    cols = n if n <= 3 else math.ceil(n / 2)
    return math.ceil(n / cols), cols


def plot_rungs(
    curves: pd.DataFrame,
    info: StudyInfo,
    rungs: pd.DataFrame | None = None,
    trials: pd.DataFrame | None = None,
) -> Figure:
    """Epochs against the metric at the rungs, one panel per bracket: who went on, who waits,
    who stopped.

    Promotions and prunings are the pruner's own records (``rungs``), in each trial's own
    bracket; a trial without records (a pausing schedule, ``sync_sh`` or ``mode: promotion``,
    keeps none) was promoted past a rung when it reported a later epoch. A green triangle
    marks a trial promoted past a rung, a pink pentagon a paused trial where it waits (to be
    promoted, or resumed after an interruption), a red cross a trial PRUNED there (by the
    pruner, or not promoted by the schedule). Every other trial's last epoch gets a marker by
    how it ended (COMPLETE, FAIL, RUNNING, or a grey square where the launcher stopped it
    because the study's budget was spent), and its whole curve is drawn faintly behind. A
    dashed vertical line marks each rung of the bracket with how many trials reached it, how
    many went on and how many wait there. ASHA has one bracket; Hyperband one per
    ``min_resource`` (Li et al., JMLR 2018), each with its own rungs.

    Args:
        curves: :func:`~lightning_hpo.report.curves_frame` (its ``bracket`` column places each
            trial in its panel).
        info: :func:`~lightning_hpo.report.study_info` (the brackets' rung levels).
        rungs: :func:`~lightning_hpo.report.rungs_frame`; without it promotions are read
            from the curves and PRUNED trials are marked at their last epoch.
        trials: :func:`~lightning_hpo.report.trials_frame`, for the epoch each paused trial
            waits at (without it: the ``status`` column of ``curves`` says which are paused,
            marked at their last reported epoch).

    Returns:
        The figure, one axes per bracket (``gid=f"bracket-{b}"``, a single one without a
        pruner); marker groups have ``gid`` ``promoted``, ``paused``, ``pruned``,
        ``stopped-by-budget``, ``completed``, ``failed`` and ``running`` (one point per
        marker), rung lines ``rung-<level>``, the faint curves ``trial-<number>``.

    Example::

        >>> plot_rungs(curves_frame(study), study_info(study), rungs_frame(study))  # doctest: +SKIP
    """
    brackets: tuple[tuple[int, ...], ...] = info.brackets or (info.rungs,)
    n_rows, n_cols = _grid(len(brackets))
    fig = _figure(width=10.0 if n_cols == 1 else 13.0, height=5.6 if n_rows == 1 else 8.0)
    axes = fig.subplots(n_rows, n_cols, sharey=True, squeeze=False).ravel()
    for ax in axes[len(brackets):]:
        ax.set_visible(False)
    title = f"Rungs of study '{info.name}'"
    several = len(info.brackets) > 1 or (info.pruner or "").endswith("hyperband")
    if several and info.brackets:
        title += f" ({info.schedule}, {len(brackets)} brackets, one panel each)"
    elif info.rungs:
        title += f" ({info.schedule}, rungs {', '.join(map(str, info.rungs))} {info.units})"
    elif info.pruner == "none":
        title += f" (no pruner: final {info.units} only)"
    else:
        title += f" (rung levels unknown: final {info.units} only)"
    if info.several:  # the decisions ranked every objective; drawn on the first
        title += (f"\ndrawn on {info.metric}, the first of {len(info.metrics)} objectives "
                  "(the pruner ranked them all by Pareto front)")
    fig.suptitle(title)
    for k, ax in enumerate(axes[: len(brackets)]):
        if k + n_cols >= len(brackets):  # nothing drawn below it
            ax.set_xlabel(_steps(info))
        if k % n_cols == 0:
            ax.set_ylabel(_label(info))
    if curves.empty:
        _empty(axes[0], "no intermediate values to draw")
        return fig
    one_panel = len(brackets) == 1 or "bracket" not in curves.columns
    paused = _paused_at(trials, curves)
    points = _rung_points(curves, rungs, brackets if any(brackets) else (), paused)
    counts: dict[str, int] = {}
    for b, (ax, levels) in enumerate(zip(axes, brackets, strict=False)):
        ax.set_gid(f"bracket-{b}")
        mine = curves if one_panel else curves[_in_bracket(curves, b)]
        here = points if one_panel else points[_in_bracket(points, b)]
        records = None if rungs is None else rungs[rungs["bracket"] == b]
        if several and info.brackets:
            ax.set_title(f"bracket {b}: rung{'s' if len(levels) > 1 else ''} "
                         f"{', '.join(map(str, levels))} ({mine['trial'].nunique()} trials)",
                         fontsize=10, pad=16)
        for number, trial in mine.sort_values("step").groupby("trial"):
            ax.plot(trial["step"], trial["value"], color="0.8", lw=0.7, zorder=1,
                    gid=f"trial-{number}")
        for kind, style in _RUNG_MARKERS.items():
            chosen = here[here["kind"] == kind]
            if chosen.empty:
                continue
            counts[kind] = counts.get(kind, 0) + len(chosen)
            ax.scatter(chosen["step"], chosen["value"], marker=style["marker"],
                       s=style.get("size", 42),
                       color=style["color"], edgecolor="white", linewidth=0.5, zorder=3,
                       gid=kind)
        _rung_lines(ax, levels, mine, records, paused)
        if mine.empty:
            _empty(ax, "no trial in this bracket yet")
        _step_axis(ax, levels, mine)
        ax.grid(alpha=0.3, axis="y")
    _value_scale(axes[0], curves["value"])
    handles: list[Any] = [
        Line2D([], [], ls="none", marker=style["marker"], color=style["color"], ms=7,
               label=f"{style['label'].replace('epoch', info.resource)} ({counts[kind]})")
        for kind, style in _RUNG_MARKERS.items() if counts.get(kind)
    ]
    if any(brackets):
        handles.append(Line2D([], [], color="0.35", ls="--", lw=0.9,
                              label="rung (trials in, promoted on)"))
    # below the panels: the title above spans the figure, the panels keep its full width
    fig.legend(handles=handles, loc="outside lower center", ncols=min(3, max(1, len(handles))),
               fontsize=9)
    return fig


def _rung_lines(
    ax: matplotlib.axes.Axes, levels: tuple[int, ...], curves: pd.DataFrame,
    records: pd.DataFrame | None, paused: dict[int, int | None],
) -> None:
    """A dashed line per rung, labelled with the trials that reached it, went on and wait there.

    From the pruner's records where the bracket has some, else from the curves (a trial went
    on when it reported a later epoch).
    """
    top = blended_transform_factory(ax.transData, ax.transAxes)
    reached = curves.groupby("trial")["step"].max() if not curves.empty else pd.Series()
    waiting = [epoch if epoch is not None else reached.get(number)
               for number, epoch in paused.items() if number in reached.index]
    for level in levels:
        ax.axvline(level, color="0.35", ls="--", lw=0.9, zorder=0, gid=f"rung-{level}")
        if level == levels[-1]:  # no decision at the top: who got there
            text = f"{int((reached >= level).sum())} in"
        elif records is not None and not records.empty:
            at = records[records["rung"] == level]
            text = f"{len(at)} in, {int((at['outcome'] == 'promoted').sum())} on"
        else:
            text = f"{int((reached >= level).sum())} in, {int((reached > level).sum())} on"
        here = sum(1 for epoch in waiting if epoch == level)
        if here:
            text += f", {here} paused"
        ax.text(level, 1.01, text, transform=top, ha="center", va="bottom", fontsize=8,
                color="0.3")


def _step_axis(ax: matplotlib.axes.Axes, levels: tuple[int, ...], curves: pd.DataFrame) -> None:
    """Log-scaled epochs with the rungs as ticks when there are 3 or more, else integers."""
    steps = sorted({int(s) for s in curves["step"]} | set(levels))
    if len(levels) >= 3 and steps and min(steps) >= 1:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(list(levels)))
        ax.xaxis.set_major_formatter(FixedFormatter([str(r) for r in levels]))
        ax.xaxis.set_minor_locator(NullLocator())
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.margins(x=0.06)


# ------------------------------------------------------------------------------------------
def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for lo, hi in sorted(intervals):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def plot_timeline(
    trials: pd.DataFrame,
    info: StudyInfo,
    curves: pd.DataFrame | None = None,
    segments: pd.DataFrame | None = None,
) -> Figure:
    """One row per worker slot, one bar per training segment, coloured by the trial's state.

    A trial trained in one go is one bar. A trial of a pausing schedule or one resumed after a
    crash trains in segments, possibly on different slots: each segment is its own bar on its
    slot, and a dotted line in the trial's colour joins the end of one segment to the start of
    the next across the pause. Gaps between bars are idle time; each row's label gives its
    idle share of the study's span (first start to the latest time recorded). A segment in
    flight is a hatched bar up to that latest time; a segment that ended in a crash has a red
    edge. Thin white ticks inside a bar mark its epoch ends when ``curves`` has their times.

    Args:
        trials: :func:`~lightning_hpo.report.trials_frame` (trials without ``slot`` are left
            out); it places every trial when ``segments`` is not given.
        info: :func:`~lightning_hpo.report.study_info`.
        curves: :func:`~lightning_hpo.report.curves_frame`, for the epoch ticks.
        segments: :func:`~lightning_hpo.report.segments_frame`: draw each segment on its slot
            (without it, each trial is one bar from its start to its end).

    Returns:
        The figure; a trial trained in one go is one bar (a ``Rectangle`` with
        ``gid=f"trial-{number}"``), a listed segment ``k`` one bar with
        ``gid=f"trial-{number}:{k}"``; each pause between two of a trial's segments is a line
        with ``gid=f"pause-{number}"``.

    Example::

        >>> snap = StudySnapshot.read(study)  # doctest: +SKIP
        >>> plot_timeline(trials_frame(snap), snap.info, curves_frame(snap),
        ...               segments_frame(snap))  # doctest: +SKIP
    """
    data = _timeline_bars(trials, segments)
    known = [data["start_s"].max(), data["end_s"].max()]
    if curves is not None and not curves.empty:
        known.append(curves["elapsed_s"].max())
    horizon = max((float(x) for x in known if pd.notna(x)), default=0.0)
    data["stop_s"] = data["end_s"].fillna(horizon)  # in flight: up to the latest time recorded
    hosts = sorted(set(data["host"].dropna().astype(str)))
    data["key"] = [(str(h) if len(hosts) > 1 else "", int(s))
                   for h, s in zip(data["host"], data["slot"], strict=True)]
    rows = sorted(set(data["key"]))
    fig = _figure(height=max(2.8, 1.2 + 0.55 * len(rows)))
    ax = fig.add_subplot()
    ax.set_xlabel(_WALL)
    if data.empty:
        ax.set_title(f"Worker timeline of study '{info.name}'")
        _empty(ax, "no trial has a `slot`")
        return fig
    x_range = max(float(data["stop_s"].max()), 1e-9)
    data["y"] = [rows.index(key) for key in data["key"]]
    data["width"] = np.maximum((data["stop_s"] - data["start_s"]).to_numpy(float),
                               0.004 * x_range)
    ends: dict[int, np.ndarray] = {}  # trial -> its epoch end times (s)
    if curves is not None and not curves.empty:
        timed = curves.dropna(subset=["elapsed_s"])
        ends = {int(n): g.to_numpy(float) for n, g in timed.groupby("trial")["elapsed_s"]}
    labels, busy_total = [], 0.0
    for y, (host, slot) in enumerate(rows):
        busy = _draw_slot(ax, data[data["y"] == y], y, ends, x_range)
        busy_total += busy
        name = f"{host}:{slot}" if host else f"slot {slot}"
        labels.append(f"{name}\nidle {100 * (1 - busy / x_range):.0f}%")
    pauses = _draw_pauses(ax, data)
    utilisation = busy_total / (x_range * len(rows))
    statuses = data.drop_duplicates("trial")["status"]
    paused = int((statuses == "PAUSED").sum())
    ax.set_title(f"Worker timeline of study '{info.name}': {len(rows)} slot(s), "
                 f"{100 * utilisation:.0f}% busy" + (f", {paused} paused" if paused else ""))
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, x_range * 1.01)
    ax.grid(alpha=0.3, axis="x")
    fig.legend(handles=_timeline_legend(data, statuses, pauses), loc="outside right upper",
               title="state")
    return fig


def _draw_slot(
    ax: matplotlib.axes.Axes, bars: pd.DataFrame, y: int, ends: dict[int, np.ndarray],
    x_range: float,
) -> float:
    """One slot's row of the timeline: its bars (numbered, hatched in flight, red-edged when
    they crashed) and their epoch ticks; returns the seconds the slot was busy."""
    crashed = bars["how"].isin(_CRASHED).to_numpy(bool)
    drawn = ax.barh(
        np.full(len(bars), y), bars["width"].to_numpy(float),
        left=bars["start_s"].to_numpy(float), height=0.7,
        color=[STATE_COLORS.get(str(status), "0.5") for status in bars["status"]],
        edgecolor=[STATE_COLORS["FAIL"] if c else "white" for c in crashed],
        linewidth=[1.4 if c else 0.6 for c in crashed],
    )
    ticks: list[float] = []
    for patch, bar in zip(drawn.patches, bars.itertuples(index=False), strict=True):
        number = int(bar.trial)
        patch.set_gid(f"trial-{number}:{int(bar.segment)}" if bar.listed else f"trial-{number}")
        if pd.isna(bar.end_s):  # in flight
            patch.set_hatch("//")
        if bar.width > 0.04 * x_range:
            ax.text(bar.start_s + bar.width / 2, y, str(number), ha="center",
                    va="center", fontsize=7, color="black")
        mine = ends.get(number)
        if mine is not None:  # the epochs that ended within this bar
            ticks += mine[(mine >= bar.start_s - 1e-9) & (mine <= bar.stop_s + 1e-9)].tolist()
    if ticks:
        ax.vlines(ticks, y - 0.35, y - 0.2, color="white", lw=0.8, gid="epoch-ticks", zorder=3)
    return _union_length(list(zip(bars["start_s"], bars["stop_s"], strict=True)))


def _draw_pauses(ax: matplotlib.axes.Axes, data: pd.DataFrame) -> int:
    """A dotted line in the trial's colour across each pause between two of its bars; returns
    how many were drawn."""
    pauses = 0
    split = data[data.duplicated("trial", keep=False)]  # trials drawn in several bars
    for number, bars in split.sort_values("start_s").groupby("trial"):
        color = STATE_COLORS.get(str(bars["status"].iloc[0]), "0.5")
        for a, b in zip(bars.iloc[:-1].itertuples(), bars.iloc[1:].itertuples(), strict=True):
            ax.plot([a.stop_s, b.start_s], [a.y, b.y], ls=":", lw=1.1, color=color, zorder=2,
                    gid=f"pause-{int(number)}")
            pauses += 1
    return pauses


def _timeline_legend(data: pd.DataFrame, statuses: pd.Series, pauses: int) -> list[Any]:
    """The timeline's legend: a patch per state drawn, and the marks that appear."""
    handles: list[Any] = [
        Patch(color=STATE_COLORS[s], label=f"{s} ({int((statuses == s).sum())})")
        for s in STATE_COLORS if s in set(statuses)
    ]
    if pauses:
        handles.append(Line2D([], [], ls=":", lw=1.1, color="0.3",
                              label="pause between a trial's segments"))
    if bool(data["how"].isin(_CRASHED).any()):
        handles.append(Patch(facecolor="white", edgecolor=STATE_COLORS["FAIL"], lw=1.4,
                             label="segment that crashed"))
    flying = int(data["end_s"].isna().sum())
    if flying:
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//",
                             label=f"segment in flight ({flying}), drawn\nto the latest time "
                             "recorded"))
    return handles


#: Segment endings drawn with a red edge on the timeline.
_CRASHED = ("crashed", "failed")


def _timeline_bars(trials: pd.DataFrame, segments: pd.DataFrame | None) -> pd.DataFrame:
    """The timeline's bars: trial, segment, status, slot, host, start_s, end_s (NaN: in
    flight), how, listed; from ``segments``, else one per trial of ``trials``."""
    columns = ["trial", "segment", "status", "slot", "host", "start_s", "end_s", "how", "listed"]
    if segments is not None:
        bars = segments.copy()
    else:
        bars = trials.copy()
        bars["segment"], bars["how"], bars["listed"] = 1, None, False
        if {"paused", "paused_since", "start_time"} <= set(bars):  # paused: up to its pause
            since = bars["paused_since"] - (bars["start_time"] - bars["start_s"])
            bars["end_s"] = bars["end_s"].fillna(since.where(bars["paused"].astype(bool)))
    if "status" not in bars:  # frames written before the status column
        paused = (bars["paused"].astype(bool) if "paused" in bars
                  else pd.Series(False, index=bars.index))
        bars["status"] = bars["state"].astype(str).where(~paused, "PAUSED")
    bars = bars.dropna(subset=["slot", "start_s"])
    return bars[columns].reset_index(drop=True)


# ------------------------------------------------------------------------------------------
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
    fig = _figure(width=12.0, height=5.4)
    by_time, by_epochs = fig.subplots(1, 2, sharey=True)
    fig.suptitle(f"Incumbent trajectories: best {info.metric} reported so far "
                 f"(any trial, any {info.resource})")
    by_time.set_xlabel("wall-clock since each study's first trial started (s)")
    by_epochs.set_xlabel(f"{info.units} trained so far (all trials)")
    by_time.set_ylabel(f"best {_label(info)}")
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
    _value_scale(by_time, incumbents["best"])
    fig.legend(loc="outside right upper", title="study: final best")
    return fig


# ------------------------------------------------------------------------------------------
#: Trials on a front labelled with their number up to this many.
_FRONT_LABELS = 12


def _reference_words(info: StudyInfo, reference: Sequence[float] | None) -> str:
    """``validation_error=0.32, latency_ms=43``: a reference point, objective by objective."""
    if reference is None:
        return "none"
    return ", ".join(f"{m}={r:.4g}" for m, r in zip(info.metrics, reference, strict=True))


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
    fig = _figure(width=10.0, height=6.4)
    ax = fig.add_subplot()
    suffix = "" if two else f" (the first two of {len(info.metrics)} objectives)"
    ax.set_title(f"Pareto front of study '{info.name}'{suffix}")
    ax.set_xlabel(_label(info.objective(0)))
    ax.set_ylabel(_label(info.objective(1)))
    finals = trials.dropna(subset=[f"values_{mx}", f"values_{my}", "front"])
    bests = trials.dropna(subset=[f"best_{mx}", f"best_{my}", "best_front"])
    if finals.empty and bests.empty:
        _empty(ax, "no finite values reported yet")
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
                gid="reference", label=f"reference point ({_reference_words(info, reference)})")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside lower center", ncols=2, fontsize=9)
    return fig


def plot_hypervolume(
    hypervolumes: pd.DataFrame, info: StudyInfo, *, until_s: float | None = None
) -> Figure:
    """Hypervolume so far against wall-clock seconds since the study's first trial started: a
    study with several objectives' counterpart of :func:`plot_incumbent`.

    Two step lines: the hypervolume of every value reported so far (any trial, any epoch),
    and, dashed, that of the COMPLETE trials' final values; the reference point that bounds
    both is in the title.

    Args:
        hypervolumes: :func:`~lightning_hpo.report.hypervolume_frame` (its
            ``attrs["reference"]`` names the reference point).
        info: :func:`~lightning_hpo.report.study_info`.
        until_s: draw the last hypervolume up to here (s), e.g. the study's last trial end.

    Returns:
        The figure: the step lines (``gid="hypervolume"`` and ``gid="hypervolume-complete"``),
        each growth as a marker (``gid="improvements"`` and ``gid="improvements-complete"``).

    Example::

        >>> plot_hypervolume(hypervolume_frame(study), study_info(study))  # doctest: +SKIP
    """
    fig = _figure()
    ax = fig.add_subplot()
    reference = hypervolumes.attrs.get("reference")
    fig.suptitle(f"Hypervolume of study '{info.name}'\n{info.objectives}; reference point "
                 f"{_reference_words(info, reference)}", fontsize=11)
    ax.set_xlabel(_WALL)
    ax.set_ylabel("hypervolume (higher is better)")
    if hypervolumes.empty or not hypervolumes["improved"].any():
        _empty(ax, "no finite values reported yet")
        return fig
    end = max(float(hypervolumes["elapsed_s"].max()), until_s or 0.0)
    lines = (("hypervolume", "improved", "C0", "-", 3.0,
              f"every value reported so far\n(any trial, any {info.resource})"),
             ("hypervolume_complete", "improved_complete", "C1", "--", 1.6,
              "COMPLETE trials' final values so far"))
    for column, improved, color, ls, lw, label in lines:
        suffix = column.removeprefix("hypervolume").replace("_", "-")
        gains = hypervolumes[hypervolumes[improved]]
        if gains.empty:
            ax.plot([], [], color=color, ls=ls, lw=lw, gid=f"hypervolume{suffix}",
                    label=f"{label}: none yet")
            continue
        since = hypervolumes.loc[gains.index[0]:]  # from its first growth on
        x, y = since["elapsed_s"].to_numpy(float), since[column].to_numpy(float)
        ax.step(np.append(x, end), np.append(y, y[-1]), where="post", color=color, ls=ls,
                lw=lw, alpha=0.9, gid=f"hypervolume{suffix}", label=label,
                zorder=5 if ls == "--" else 3)
        ax.scatter(gains["elapsed_s"], gains[column], s=36 if ls == "-" else 24, color=color,
                   edgecolor="white", gid=f"improvements{suffix}", zorder=6)
        _note(ax, f"{y[-1]:.4g}", (end, y[-1]), below=ls == "--", color=color)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", title="hypervolume of")  # below a curve that only rises
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
    fig = _figure(width=12.0, height=5.4)
    by_time, by_epochs = fig.subplots(1, 2, sharey=True)
    reference = hypervolumes.attrs.get("reference")
    fig.suptitle(f"Hypervolume of every value reported so far (any trial, any "
                 f"{info.resource})\n{info.objectives}; shared reference point "
                 f"{_reference_words(info, reference)}", fontsize=11)
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
