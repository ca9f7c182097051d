"""The workers' slots over time, a bar per training segment: :func:`plot_timeline`."""

from __future__ import annotations

import math
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.plots._common import (
    STATE_COLORS,
    WALL,
    empty,
    new_figure,
)

__all__ = ["plot_timeline"]


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
    fig = new_figure(height=max(2.8, 1.2 + 0.55 * len(rows)))
    ax = fig.add_subplot()
    ax.set_xlabel(WALL)
    if data.empty:
        ax.set_title(f"Worker timeline of study '{info.name}'")
        empty(ax, "no trial has a `slot`")
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

