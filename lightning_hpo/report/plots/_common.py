"""What the report's figures share: the figure itself, axis labels, the value scale, the
colours of trial states, the notes drawn on a line or an empty axes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from lightning_hpo.report.info import StudyInfo

__all__ = [
    "STATE_COLORS", "WALL", "empty", "line_note", "metric_label", "new_figure", "paused_at",
    "reference_words", "steps_label", "value_scale",
]


#: Colours of trial states, as the launcher's live table shows them (PAUSED: a RUNNING trial
#: waiting between two training segments).
STATE_COLORS = {
    "COMPLETE": "#2ca02c",
    "PRUNED": "#e0a800",
    "FAIL": "#d62728",
    "RUNNING": "#17becf",
    "PAUSED": "#e377c2",
}
WALL = "wall-clock since the study's first trial started (s)"
_DPI = 110


def new_figure(width: float = 10.0, height: float = 5.6) -> Figure:
    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def metric_label(info: StudyInfo) -> str:
    arrow = "lower is better" if info.direction == "minimize" else "higher is better"
    return f"{info.metric} ({arrow})"


def steps_label(info: StudyInfo) -> str:
    """The step axis: epochs for our studies, optimizer steps for a study by steps, Optuna's
    reported step for any other."""
    if info.resource == "step":
        return "optimizer steps (as reported to Optuna)"
    return "epochs completed" if info.from_launcher else "step (as reported to Optuna)"


def _finite(values: Iterable[float]) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    return array[np.isfinite(array)]


def value_scale(ax: matplotlib.axes.Axes, values: Iterable[float]) -> None:
    """Log scale when the values are positive and span more than a decade and a half."""
    array = _finite(values)
    if array.size and array.min() > 0 and array.max() / array.min() > 30:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def empty(ax: matplotlib.axes.Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4")


def line_note(
    ax: matplotlib.axes.Axes, text: str, xy: tuple[float, float], *, below: bool, color: str
) -> None:
    """A label ending at ``xy`` (a line's right end), just above or below the line."""
    note = ax.annotate(text, xy, xytext=(-2, -13 if below else 5), textcoords="offset points",
                       ha="right", color=color, fontsize=9, zorder=7,
                       bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                             "alpha": 0.85})
    note.set_in_layout(False)  # a label must not shrink the axes


def paused_at(
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


def reference_words(info: StudyInfo, reference: Sequence[float] | None) -> str:
    """``validation_error=0.32, latency_ms=43``: a reference point, objective by objective."""
    if reference is None:
        return "none"
    return ", ".join(f"{m}={r:.4g}" for m, r in zip(info.metrics, reference, strict=True))

