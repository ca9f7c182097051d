"""The hypervolume of a study with several objectives over wall-clock: :func:`plot_hypervolume`."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.plots._common import (
    WALL,
    empty,
    line_note,
    new_figure,
    reference_words,
)

__all__ = ["plot_hypervolume"]


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
    fig = new_figure()
    ax = fig.add_subplot()
    reference = hypervolumes.attrs.get("reference")
    fig.suptitle(f"Hypervolume of study '{info.name}'\n{info.objectives}; reference point "
                 f"{reference_words(info, reference)}", fontsize=11)
    ax.set_xlabel(WALL)
    ax.set_ylabel("hypervolume (higher is better)")
    if hypervolumes.empty or not hypervolumes["improved"].any():
        empty(ax, "no finite values reported yet")
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
        line_note(ax, f"{y[-1]:.4g}", (end, y[-1]), below=ls == "--", color=color)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", title="hypervolume of")  # below a curve that only rises
    return fig

