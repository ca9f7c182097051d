"""The pruner's rungs, one panel per bracket: :func:`plot_rungs`."""

from __future__ import annotations

import math
from typing import Any

import matplotlib
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FixedFormatter,
    FixedLocator,
    MaxNLocator,
    NullLocator,
)
from matplotlib.transforms import blended_transform_factory

from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.plots._common import (
    STATE_COLORS,
    empty,
    metric_label,
    new_figure,
    paused_at,
    steps_label,
    value_scale,
)

__all__ = ["plot_rungs"]


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
    fig = new_figure(width=10.0 if n_cols == 1 else 13.0, height=5.6 if n_rows == 1 else 8.0)
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
            ax.set_xlabel(steps_label(info))
        if k % n_cols == 0:
            ax.set_ylabel(metric_label(info))
    if curves.empty:
        empty(axes[0], "no intermediate values to draw")
        return fig
    one_panel = len(brackets) == 1 or "bracket" not in curves.columns
    paused = paused_at(trials, curves)
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
            empty(ax, "no trial in this bracket yet")
        _step_axis(ax, levels, mine)
        ax.grid(alpha=0.3, axis="y")
    value_scale(axes[0], curves["value"])
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

