"""Comparing studies: the time and compute each took to reach every other study's best.

:class:`Comparison` holds two or more studies read once (one
:class:`~lightning_hpo.report.StudySnapshot` each), labelled; :func:`compare` is its table of
pairs, and :func:`~lightning_hpo.report.write_compare` writes it with the incumbents and a plot.

Example::

    >>> asha, rs = load("runs/asha.journal"), load("runs/random.journal")  # doctest: +SKIP
    >>> compare([asha, rs])[["study", "target", "time_s", "time_speedup"]]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeAlias

import numpy as np
import pandas as pd

from lightning_hpo.errors import ConfigError
from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.snapshot import Source, StudySnapshot
from lightning_hpo.report.tables import INCUMBENT_COLUMNS, incumbent_frame

__all__ = ["COMPARE_COLUMNS", "Comparison", "Studies", "compare"]

COMPARE_COLUMNS = [
    "study", "target", "target_best", "reached", "time_s", "epochs", "device_seconds",
    "target_time_s", "target_epochs", "time_speedup", "epochs_speedup",
]

#: Studies to compare: a sequence (labelled by name, ``name (2)`` on a clash) or label -> study;
#: each a study or a snapshot of one.
Studies: TypeAlias = Sequence[Source] | Mapping[str, Source]


@dataclass(frozen=True)
class Comparison:
    """Two or more studies read once and labelled: what a comparison is built from.

    Attributes:
        snapshots: label -> the study's snapshot, in the order given.

    Raises:
        ConfigError: ``compare`` when there are fewer than 2 studies.

    Example::

        >>> comparison = Comparison.of([asha, rs])  # doctest: +SKIP
        >>> comparison.pairs, comparison.incumbents  # doctest: +SKIP
    """

    snapshots: Mapping[str, StudySnapshot]

    def __post_init__(self) -> None:
        if len(self.snapshots) < 2:
            raise ConfigError("compare", f"needs at least 2 studies, got {len(self.snapshots)}")

    @classmethod
    def of(cls, studies: Studies | Comparison) -> Comparison:
        """Label the studies and read each once (a comparison is returned as is).

        Raises:
            ConfigError: ``compare`` when there are fewer than 2 studies.
        """
        if isinstance(studies, Comparison):
            return studies
        if isinstance(studies, Mapping):
            labelled = dict(studies)
        else:
            labelled = {}
            for study in studies:
                name = study.info.name if isinstance(study, StudySnapshot) else study.study_name
                label, k = name, 2
                while label in labelled:
                    label, k = f"{name} ({k})", k + 1
                labelled[label] = study
        return cls({label: StudySnapshot.of(study) for label, study in labelled.items()})

    @property
    def info(self) -> StudyInfo:
        """The first study's info (the metric and direction the plots name)."""
        return next(iter(self.snapshots.values())).info

    @property
    def pairs(self) -> pd.DataFrame:
        """:func:`compare`'s table.

        Raises:
            ConfigError: ``compare`` when the directions differ or a study has no finite value.
        """
        return self._frames[0]

    @property
    def incumbents(self) -> pd.DataFrame:
        """Every study's :func:`~lightning_hpo.report.incumbent_frame`, one after the other,
        with a first column ``study`` (the label).

        Raises:
            ConfigError: as :attr:`pairs`.
        """
        return self._frames[1]

    @cached_property
    def _frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        snaps = self.snapshots
        directions = {s.info.direction for s in snaps.values()}
        if len(directions) > 1:
            which = ", ".join(f"{k}: {s.info.direction}" for k, s in snaps.items())
            raise ConfigError("compare", f"the studies optimise in different directions ({which})")
        incs = {label: incumbent_frame(snap) for label, snap in snaps.items()}
        for label, inc in incs.items():
            if inc["best"].isna().all():
                raise ConfigError("compare", f"study '{label}' has no reported value to compare")
        finals = {label: float(inc["best"].dropna().iloc[-1]) for label, inc in incs.items()}
        rows = []
        for label, inc in incs.items():
            info = snaps[label].info
            for target, target_inc in incs.items():
                if target == label:
                    continue
                hit = _first_reaching(inc, finals[target], info)
                own = _first_reaching(target_inc, finals[target], info)
                assert own is not None  # a study reaches its own best
                time_s = None if hit is None else float(hit["elapsed_s"])
                epochs = None if hit is None else int(hit["epochs_spent"])
                rows.append({
                    "study": label,
                    "target": target,
                    "target_best": finals[target],
                    "reached": hit is not None,
                    "time_s": time_s,
                    "epochs": epochs,
                    "device_seconds": None if hit is None else float(hit["device_seconds_spent"]),
                    "target_time_s": float(own["elapsed_s"]),
                    "target_epochs": int(own["epochs_spent"]),
                    "time_speedup": None if not time_s else float(own["elapsed_s"]) / time_s,
                    "epochs_speedup": None if not epochs else int(own["epochs_spent"]) / epochs,
                })
        pairs = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
        pairs["reached"] = pairs["reached"].astype("bool")
        pairs["epochs"] = pairs["epochs"].astype("Int64")
        for name in ("target_best", "time_s", "device_seconds", "target_time_s", "time_speedup",
                     "epochs_speedup"):
            pairs[name] = pairs[name].astype("float64")
        long = pd.concat(
            [inc.assign(study=label) for label, inc in incs.items()], ignore_index=True
        )[["study", *INCUMBENT_COLUMNS]]
        return pairs, long


def compare(studies: Studies | Comparison) -> pd.DataFrame:
    """For each study, the time and compute it took to reach every other study's final best.

    One row per ordered pair (``study``, ``target``): ``target_best`` (the best value the
    target reported, at any epoch of any trial), ``reached``, ``time_s`` (s from the study's
    first trial start until any of its trials reported a value at least as good, as
    :func:`~lightning_hpo.report.incumbent_frame`'s ``best``), ``epochs`` and
    ``device_seconds`` (compute spent by then),
    ``target_time_s`` and ``target_epochs`` (what the target itself needed to reach its best),
    and ``time_speedup`` = ``target_time_s / time_s`` and ``epochs_speedup`` =
    ``target_epochs / epochs`` (above 1: this study got there sooner or cheaper). Values are
    NaN where the study never reached the target.

    Args:
        studies: the studies or their snapshots (labelled by name, ``name (2)`` on a clash),
            a mapping label -> study, or a :class:`Comparison`.

    Raises:
        ConfigError: ``compare`` when there are fewer than 2 studies, the directions differ or
            a study has no finite value.

    Example::

        >>> asha = load("runs/asha.journal")  # doctest: +SKIP
        >>> rs = load("runs/random.journal")  # doctest: +SKIP
        >>> compare([asha, rs])[["study", "target", "time_s", "time_speedup"]]  # doctest: +SKIP
    """
    return Comparison.of(studies).pairs


def _first_reaching(inc: pd.DataFrame, target: float, info: StudyInfo) -> pd.Series | None:
    """The first incumbent row whose ``best`` is at least as good as ``target``."""
    best = inc["best"].to_numpy(float)
    with np.errstate(invalid="ignore"):  # NaN before the first finite value: never reached
        reached = best <= target if info.direction == "minimize" else best >= target
    hits = np.flatnonzero(reached)
    return None if hits.size == 0 else inc.iloc[int(hits[0])]
