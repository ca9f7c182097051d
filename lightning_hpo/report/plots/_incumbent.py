"""The incumbent trajectory of a study with one objective: :func:`plot_incumbent`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.plots._common import (
    WALL,
    empty,
    line_note,
    metric_label,
    new_figure,
    value_scale,
)

__all__ = ["plot_incumbent"]


def _a(info: StudyInfo) -> str:
    """``an epoch`` or ``a step``: what the study's trials report at."""
    return "an epoch" if info.resource == "epoch" else "a step"


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
    fig = new_figure()
    ax = fig.add_subplot()
    ax.set_title(f"Incumbent trajectory of study '{info.name}'")
    ax.set_xlabel(WALL)
    ax.set_ylabel(f"best {metric_label(info)}")
    valid = incumbent.dropna(subset=["best"])
    if valid.empty:
        empty(ax, "no value reported yet")
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
    line_note(ax, f"{last['best']:.4g}: trial {int(last['trial'])}, {where} "
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
        line_note(ax, f"{last_c['best_complete']:.4g}: trial {int(last_c['trial'])} (COMPLETE)",
              (end, last_c["best_complete"]), below=False, color="C1")
    value_scale(ax, incumbent["value"])
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper")
    return fig


def _outcome(status: Any, stopped_by: Any) -> str:
    """A trial's end (or pause) in words: COMPLETE, PRUNED by the pruner, stopped by the
    budget, PAUSED..."""
    if status == "PRUNED":
        return "stopped by the budget" if stopped_by == "budget" else "PRUNED by the pruner"
    if status == "PAUSED":
        return "PAUSED, to be resumed"
    return str(status)

