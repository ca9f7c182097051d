"""The report's pictures, drawn from the frames of :mod:`lightning_hpo.report.tables`.

Each function takes DataFrames (and the study's :class:`~lightning_hpo.report.tables.StudyInfo`)
and returns a :class:`matplotlib.figure.Figure` on the Agg canvas: no display, no pyplot state.
Every trial drawn is one artist whose ``gid`` names it (``trial-7``), and marker groups carry a
``gid`` too (``promoted``, ``stopped``...), so what was drawn can be counted from the figure.

Example::

    from lightning_hpo.report import load, study_info, curves_frame, plot_learning_curves

    study = load("runs/quickstart.journal")
    fig = plot_learning_curves(curves_frame(study), study_info(study))
    fig.savefig("curves.png")
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
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

from lightning_hpo.report.tables import StudyInfo

__all__ = [
    "STATE_COLORS",
    "plot_compare",
    "plot_incumbent",
    "plot_learning_curves",
    "plot_rungs",
    "plot_timeline",
]

_logger = logging.getLogger(__name__)

#: Colours of trial states, as the launcher's live table shows them.
STATE_COLORS = {
    "COMPLETE": "#2ca02c",
    "PRUNED": "#e0a800",
    "FAIL": "#d62728",
    "RUNNING": "#17becf",
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
    """The step axis: epochs for our studies, Optuna's reported step for any other."""
    return "epochs completed" if info.from_launcher else "step (as reported to Optuna)"


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

    Args:
        incumbent: :func:`~lightning_hpo.report.incumbent_frame`.
        info: :func:`~lightning_hpo.report.study_info`.
        until_s: draw the last best up to here (s), e.g. the study's last trial end.

    Returns:
        The figure: a step line (``gid="incumbent"``), every COMPLETE trial as a grey dot
        (``gid="completed"``) and each new best as a marker (``gid="improvements"``).

    Example::

        >>> plot_incumbent(incumbent_frame(study), study_info(study))  # doctest: +SKIP
    """
    fig = _figure()
    ax = fig.add_subplot()
    ax.set_title(f"Incumbent trajectory of study '{info.name}'")
    ax.set_xlabel(_WALL)
    ax.set_ylabel(f"best {_label(info)}")
    if incumbent.empty:
        _empty(ax, "no COMPLETE trial yet")
        return fig
    x = incumbent["elapsed_s"].to_numpy(float)
    best = incumbent["best"].to_numpy(float)
    end = max(float(x[-1]), until_s or 0.0)
    ax.step(np.append(x, end), np.append(best, best[-1]), where="post", color="C0", lw=2,
            label="best so far", gid="incumbent", zorder=3)
    ax.scatter(x, incumbent["value"], s=18, color="0.6", label="COMPLETE trial (final value)",
               gid="completed", zorder=2)
    gains = incumbent[incumbent["improved"]]
    ax.scatter(gains["elapsed_s"], gains["best"], s=46, color="C0", edgecolor="white",
               label="new best", gid="improvements", zorder=4)
    last = gains.iloc[-1]
    ax.annotate(f"trial {int(last['trial'])}: {last['best']:.4g}", (last["elapsed_s"],
                last["best"]), xytext=(8, 8), textcoords="offset points", color="C0")
    _value_scale(ax, incumbent["value"])
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper")
    return fig


# ------------------------------------------------------------------------------------------
_CURVE_STYLE: dict[str, dict[str, Any]] = {
    "COMPLETE": {"color": "C0", "ls": "-", "lw": 1.3, "alpha": 0.85},
    "PRUNED": {"color": "0.55", "ls": "--", "lw": 1.0, "alpha": 0.75},
    "FAIL": {"color": STATE_COLORS["FAIL"], "ls": ":", "lw": 1.2, "alpha": 0.9},
    "RUNNING": {"color": STATE_COLORS["RUNNING"], "ls": "-", "lw": 1.0, "alpha": 0.9},
}


def plot_learning_curves(
    curves: pd.DataFrame,
    info: StudyInfo,
    *,
    x: Literal["auto", "wallclock", "epochs"] = "auto",
    best_trial: int | None = None,
) -> Figure:
    """The metric of every trial, a line per trial, against wall-clock (or epochs).

    COMPLETE trials are solid blue, PRUNED dashed grey ending in an ``x`` where they were
    stopped, FAIL dotted red, RUNNING thin cyan; the best trial is thick black.

    Args:
        curves: :func:`~lightning_hpo.report.curves_frame`.
        info: :func:`~lightning_hpo.report.study_info`.
        x: ``wallclock`` (s since the first trial started; trials without epoch times are
            left out), ``epochs``, or ``auto`` (wall-clock when any trial has epoch times).
        best_trial: the trial to highlight (default: the best COMPLETE final value).

    Returns:
        The figure; each trial is one line with ``gid=f"trial-{number}"``.

    Example::

        >>> plot_learning_curves(curves_frame(study), study_info(study))  # doctest: +SKIP
    """
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
        finals = data[data["state"] == "COMPLETE"].groupby("trial")["value"].last()
        finals = finals[np.isfinite(finals)]
        if not finals.empty:
            best_trial = int(finals.idxmin() if info.direction == "minimize" else finals.idxmax())
    counts: dict[str, int] = {}
    stops: list[tuple[float, float]] = []
    fade = min(1.0, 40 / max(1, data["trial"].nunique()))  # many trials: lighter lines
    for number, rows in data.sort_values([column]).groupby("trial", sort=True):
        state = str(rows["state"].iloc[0])
        style = dict(_CURVE_STYLE.get(state, _CURVE_STYLE["RUNNING"]))
        style["alpha"] = max(0.15, style["alpha"] * fade)
        if number == best_trial:
            style.update(color="black", lw=2.6, alpha=1.0, ls="-")
        counts[state] = counts.get(state, 0) + 1
        ax.plot(rows[column], rows["value"], marker="." if len(rows) == 1 else None,
                gid=f"trial-{number}", zorder=5 if number == best_trial else 2, **style)
        if state == "PRUNED":
            stops.append((rows[column].iloc[-1], rows["value"].iloc[-1]))
    if stops:
        x_stop, y_stop = zip(*stops, strict=True)
        ax.plot(x_stop, y_stop, marker="x", ms=5, color=_CURVE_STYLE["PRUNED"]["color"],
                ls="none", gid="pruned-end", zorder=2)
    _value_scale(ax, data["value"])
    if x == "epochs":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    handles = [
        Line2D([], [], label=f"{state} ({n})", **{k: v for k, v in _CURVE_STYLE[state].items()
                                                   if k != "alpha"})
        for state, n in counts.items() if state in _CURVE_STYLE
    ]
    if best_trial is not None and best_trial in set(data["trial"]):
        handles.append(Line2D([], [], color="black", lw=2.6, label=f"best: trial {best_trial}"))
    fig.legend(handles=handles, loc="outside right upper", title="trials")
    return fig


# ------------------------------------------------------------------------------------------
_RUNG_MARKERS: dict[str, dict[str, Any]] = {
    "promoted": {"marker": "^", "color": "#2ca02c", "label": "promoted past the rung"},
    "stopped": {"marker": "X", "color": "#d62728", "label": "stopped (PRUNED) here"},
    "completed": {"marker": "o", "color": "C0", "label": "COMPLETE (final epoch)"},
    "failed": {"marker": "D", "color": "#9467bd", "label": "FAIL (last epoch)"},
    "running": {"marker": "o", "color": STATE_COLORS["RUNNING"], "label": "RUNNING (so far)"},
}


def _rung_points(curves: pd.DataFrame, rungs: tuple[int, ...]) -> pd.DataFrame:
    """One row per marker: (trial, step, value, kind)."""
    rows = []
    levels = set(rungs)
    for number, trial in curves.groupby("trial"):
        trial = trial.sort_values("step")
        state = str(trial["state"].iloc[0])
        last = int(trial["step"].iloc[-1])
        for step, value in zip(trial["step"], trial["value"], strict=True):
            step = int(step)
            if step != last and step not in levels:
                continue
            if step < last:
                kind = "promoted"
            else:
                kind = {"PRUNED": "stopped", "COMPLETE": "completed", "FAIL": "failed"}.get(
                    state, "running")
            rows.append({"trial": number, "step": step, "value": value, "kind": kind})
    return pd.DataFrame(rows, columns=["trial", "step", "value", "kind"])


def plot_rungs(curves: pd.DataFrame, info: StudyInfo) -> Figure:
    """Epochs against the metric at the rungs: who was promoted, who was stopped where.

    A dashed vertical line marks each rung level (``info.rungs``) with how many trials
    reached it and how many went on. At each rung a trial that reported a later epoch is a
    green triangle (promoted); a PRUNED trial whose last epoch is the rung a red cross
    (stopped). Every trial's last epoch gets a marker by its state even off the rungs, and its
    whole curve is drawn faintly behind.

    Returns:
        The figure; marker groups have ``gid`` ``promoted``, ``stopped``, ``completed``,
        ``failed`` and ``running`` (one point per marker), rung lines ``rung-<level>``, the
        faint curves ``trial-<number>``.

    Example::

        >>> plot_rungs(curves_frame(study), study_info(study))  # doctest: +SKIP
    """
    fig = _figure()
    ax = fig.add_subplot()
    title = f"Rungs of study '{info.name}'"
    if info.rungs:
        title += f" ({info.pruner}, rungs {', '.join(map(str, info.rungs))} epochs)"
    elif info.pruner == "none":
        title += " (no pruner: final epochs only)"
    else:
        title += " (rung levels unknown: final epochs only)"
    ax.set_title(title, pad=16 if info.rungs else 6)
    ax.set_xlabel(_steps(info))
    ax.set_ylabel(_label(info))
    if curves.empty:
        _empty(ax, "no intermediate values to draw")
        return fig
    for number, trial in curves.sort_values("step").groupby("trial"):
        ax.plot(trial["step"], trial["value"], color="0.8", lw=0.7, zorder=1,
                gid=f"trial-{number}")
    points = _rung_points(curves, info.rungs)
    for kind, style in _RUNG_MARKERS.items():
        chosen = points[points["kind"] == kind]
        if chosen.empty:
            continue
        ax.scatter(chosen["step"], chosen["value"], marker=style["marker"], s=42,
                   color=style["color"], edgecolor="white", linewidth=0.5, zorder=3,
                   label=f"{style['label']} ({len(chosen)})", gid=kind)
    top = blended_transform_factory(ax.transData, ax.transAxes)
    for level in info.rungs:
        at = points[points["step"] == level]
        ax.axvline(level, color="0.35", ls="--", lw=0.9, zorder=0, gid=f"rung-{level}")
        went_on = int((at["kind"] == "promoted").sum())
        text = f"{len(at)} in" if level == info.rungs[-1] else f"{len(at)} in, {went_on} on"
        ax.text(level, 1.01, text, transform=top, ha="center", va="bottom", fontsize=8,
                color="0.3")
    steps = sorted(set(int(s) for s in curves["step"]) | set(info.rungs))
    if len(info.rungs) >= 3 and min(steps) >= 1:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(list(info.rungs)))
        ax.xaxis.set_major_formatter(FixedFormatter([str(r) for r in info.rungs]))
        ax.xaxis.set_minor_locator(NullLocator())
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _value_scale(ax, curves["value"])
    ax.margins(x=0.06)
    ax.grid(alpha=0.3, axis="y")
    handles, labels = ax.get_legend_handles_labels()
    if info.rungs:
        handles.append(Line2D([], [], color="0.35", ls="--", lw=0.9))
        labels.append("rung level (trials in, promoted on)")
    fig.legend(handles, labels, loc="outside right upper")
    return fig


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
    trials: pd.DataFrame, info: StudyInfo, curves: pd.DataFrame | None = None
) -> Figure:
    """One row per worker slot, one bar per trial coloured by its final state.

    Gaps between bars are idle time; each row's label gives its idle share of the study's
    span (first start to the latest time recorded). A RUNNING trial is a hatched bar up to
    that latest time. Thin white ticks inside a bar mark its epoch ends when
    ``curves`` has their times.

    Args:
        trials: :func:`~lightning_hpo.report.trials_frame` (trials without ``slot`` are left
            out).
        info: :func:`~lightning_hpo.report.study_info`.
        curves: :func:`~lightning_hpo.report.curves_frame`, for the epoch ticks.

    Returns:
        The figure; each trial is one bar (a ``Rectangle`` with ``gid=f"trial-{number}"``).

    Example::

        >>> plot_timeline(trials_frame(study), study_info(study))  # doctest: +SKIP
    """
    data = trials.dropna(subset=["slot", "start_s"]).copy()
    known = [data["start_s"].max(), data["end_s"].max()]
    if curves is not None and not curves.empty:
        known.append(curves["elapsed_s"].max())
    horizon = max((float(x) for x in known if pd.notna(x)), default=0.0)
    data["stop_s"] = data["end_s"].fillna(horizon)  # RUNNING: up to the latest time recorded
    hosts = sorted(set(data["host"].dropna().astype(str)))
    data["row"] = [f"{h}:{int(s)}" if len(hosts) > 1 else f"slot {int(s)}"
                   for h, s in zip(data["host"].astype(str), data["slot"], strict=True)]
    rows = sorted(set(data["row"]), key=lambda r: (r.rpartition(":")[0], int(r.split()[-1]
                  if r.startswith("slot") else r.rpartition(":")[2])))
    fig = _figure(height=max(2.8, 1.2 + 0.55 * len(rows)))
    ax = fig.add_subplot()
    ax.set_xlabel(_WALL)
    if data.empty:
        ax.set_title(f"Worker timeline of study '{info.name}'")
        _empty(ax, "no trial has a `slot`")
        return fig
    span = float(data["stop_s"].max())
    labels, busy_total = [], 0.0
    x_range = max(span, 1e-9)
    for y, row in enumerate(rows):
        bars = data[data["row"] == row]
        intervals = list(zip(bars["start_s"], bars["stop_s"], strict=True))
        busy = _union_length(intervals)
        busy_total += busy
        labels.append(f"{row}\nidle {100 * (1 - busy / x_range):.0f}%")
        widths = np.maximum((bars["stop_s"] - bars["start_s"]).to_numpy(float), 0.004 * x_range)
        drawn = ax.barh(
            np.full(len(bars), y), widths, left=bars["start_s"].to_numpy(float), height=0.7,
            color=[STATE_COLORS.get(str(state), "0.5") for state in bars["state"]],
            edgecolor="white", linewidth=0.6,
        )
        for patch, number, end, left, width in zip(
            drawn.patches, bars["trial"], bars["end_s"], bars["start_s"], widths, strict=True
        ):
            patch.set_gid(f"trial-{int(number)}")
            if pd.isna(end):  # RUNNING
                patch.set_hatch("//")
            if width > 0.04 * x_range:
                ax.text(left + width / 2, y, str(int(number)), ha="center", va="center",
                        fontsize=7, color="black")
        if curves is not None and not curves.empty:
            ticks = curves[curves["trial"].isin(bars["trial"])].dropna(subset=["elapsed_s"])
            if not ticks.empty:
                ax.vlines(ticks["elapsed_s"], y - 0.35, y - 0.2, color="white", lw=0.8,
                          gid="epoch-ticks", zorder=3)
    utilisation = busy_total / (x_range * len(rows))
    ax.set_title(f"Worker timeline of study '{info.name}': {len(rows)} slot(s), "
                 f"{100 * utilisation:.0f}% busy")
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, x_range * 1.01)
    ax.grid(alpha=0.3, axis="x")
    present = [s for s in STATE_COLORS if s in set(data["state"])]
    handles = [Patch(color=STATE_COLORS[s], label=f"{s} ({int((data['state'] == s).sum())})")
               for s in present]
    fig.legend(handles=handles, loc="outside right upper", title="final state")
    return fig


# ------------------------------------------------------------------------------------------
def plot_compare(incumbents: pd.DataFrame, info: StudyInfo) -> Figure:
    """Incumbent trajectories of several studies, over wall-clock and over epochs spent.

    Args:
        incumbents: the long frame of :func:`~lightning_hpo.report.incumbent_frame` rows with
            a ``study`` column (as :func:`~lightning_hpo.report.write_compare` builds it).
        info: any of the studies' info (for the metric name and direction).

    Returns:
        The figure: two axes (wall-clock, epochs), one step line per study on each with
        ``gid=f"study-{label}"``.

    Example::

        >>> long = pd.concat([incumbent_frame(s).assign(study=s.study_name) for s in studies])
        >>> plot_compare(long, study_info(studies[0]))  # doctest: +SKIP
    """
    fig = _figure(width=12.0, height=5.4)
    by_time, by_epochs = fig.subplots(1, 2, sharey=True)
    fig.suptitle(f"Incumbent trajectories: best {info.metric} so far")
    by_time.set_xlabel("wall-clock since each study's first trial started (s)")
    by_epochs.set_xlabel("epochs trained so far (all trials)")
    by_time.set_ylabel(f"best {_label(info)}")
    for k, (label, inc) in enumerate(incumbents.groupby("study", sort=False)):
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
