"""Comparing studies: the time and compute each took to reach every other study's best.

:class:`Comparison` holds two or more studies read once (one
:class:`~lightning_hpo.report.StudySnapshot` each), labelled; :func:`compare` is its table of
pairs, and :func:`~lightning_hpo.report.write_compare` writes it with the incumbents and a plot.

Studies with several objectives are compared by hypervolume: each study's hypervolume of every
value it reported so far (:func:`~lightning_hpo.report.hypervolume_frame`), all bounded by ONE
reference point computed from the points of every study compared
(:attr:`Comparison.reference`), and the time and compute each took to reach every other study's
final hypervolume. The studies must have the same objectives, in the same order and directions;
a study with one objective is not compared with one with several.

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
from lightning_hpo.pareto import reference_point
from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.snapshot import Source, StudySnapshot
from lightning_hpo.report.tables import INCUMBENT_COLUMNS, hypervolume_frame, incumbent_frame

__all__ = ["COMPARE_COLUMNS", "COMPARE_HYPERVOLUME_COLUMNS", "Comparison", "Studies", "compare"]

COMPARE_COLUMNS = [
    "study", "target", "target_best", "reached", "time_s", "epochs", "device_seconds",
    "target_time_s", "target_epochs", "time_speedup", "epochs_speedup",
]
#: :func:`compare`'s columns for studies with several objectives.
COMPARE_HYPERVOLUME_COLUMNS = [
    "study", "target", "target_hypervolume", "reached", "time_s", "epochs", "device_seconds",
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
        """The first study's info (the metric(s) and direction(s) the plots name)."""
        return next(iter(self.snapshots.values())).info

    @property
    def several(self) -> bool:
        """Whether the studies have several objectives (then compared by hypervolume).

        Raises:
            ConfigError: ``compare`` when some have one objective and some several.
        """
        kinds = {s.info.several for s in self.snapshots.values()}
        if len(kinds) > 1:
            which = "; ".join(f"{label}: {', '.join(s.info.metrics)}"
                              for label, s in self.snapshots.items())
            raise ConfigError("compare", "cannot compare studies with one objective and studies "
                              f"with several ({which})")
        return kinds == {True}

    @cached_property
    def reference(self) -> tuple[float, ...] | None:
        """With several objectives, the one hypervolume reference point of the comparison:
        :func:`lightning_hpo.pareto.reference_point` of every finite point of every study
        (each objective's worst value over all of them plus a tenth of its range), so that
        the hypervolumes compare; ``None`` with one objective or without a finite point.

        Raises:
            ConfigError: as :attr:`pairs`.
        """
        if not self.several:
            return None
        self._check_objectives()
        points = [p for snap in self.snapshots.values() for p in snap.points]
        return reference_point(points, self.info.minimize) if points else None

    @property
    def pairs(self) -> pd.DataFrame:
        """:func:`compare`'s table.

        Raises:
            ConfigError: ``compare`` when the directions differ, a study has no finite value,
                or (several objectives) the objectives differ or some studies have one.
        """
        return self._frames[0]

    @property
    def incumbents(self) -> pd.DataFrame:
        """Every study's :func:`~lightning_hpo.report.incumbent_frame`, one after the other,
        with a first column ``study`` (the label).

        Raises:
            ConfigError: as :attr:`pairs`; ``compare`` for studies with several objectives
                (see :attr:`hypervolumes`).
        """
        if self.several:
            raise ConfigError("compare", "studies with several objectives have no incumbent: "
                              "see Comparison.hypervolumes")
        return self._frames[1]

    @property
    def hypervolumes(self) -> pd.DataFrame:
        """With several objectives, every study's :func:`~lightning_hpo.report.hypervolume_frame`
        bounded by the shared :attr:`reference`, one after the other, with a first column
        ``study`` (the label).

        Raises:
            ConfigError: as :attr:`pairs`; ``compare`` for studies with one objective (see
                :attr:`incumbents`).
        """
        if not self.several:
            raise ConfigError("compare", "studies with one objective have no hypervolume: see "
                              "Comparison.incumbents")
        return self._frames[1]

    def _check_objectives(self) -> None:
        """Raise unless the studies share their objectives' names and directions, and count
        their compute in the same unit (epochs, or optimizer steps)."""
        snaps = self.snapshots
        if len({s.info.resource for s in snaps.values()}) > 1:
            which = ", ".join(f"{k}: {s.info.units}" for k, s in snaps.items())
            raise ConfigError("compare", f"the studies count their compute in different units "
                              f"({which}); the epochs they spent do not compare with steps")
        if len({len(s.info.metrics) for s in snaps.values()}) > 1:
            which = "; ".join(f"{k}: {', '.join(s.info.metrics)}" for k, s in snaps.items())
            raise ConfigError("compare", f"the studies have different numbers of objectives "
                              f"({which}); they do not compare")
        if len({s.info.directions for s in snaps.values()}) > 1:
            which = ", ".join(f"{k}: {'/'.join(s.info.directions)}" for k, s in snaps.items())
            raise ConfigError("compare", f"the studies optimise in different directions ({which})")
        if self.several and len({s.info.metrics for s in snaps.values()}) > 1:
            which = "; ".join(f"{k}: {', '.join(s.info.metrics)}" for k, s in snaps.items())
            raise ConfigError("compare", f"the studies have different objectives ({which}); "
                              "their hypervolumes do not compare")

    @cached_property
    def _frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        if self.several:
            return self._hypervolume_frames()
        self._check_objectives()
        snaps = self.snapshots
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
                rows.append(_pair_row(label, target, hit, own) | {"target_best": finals[target]})
        pairs = _typed_pairs(pd.DataFrame(rows, columns=COMPARE_COLUMNS), "target_best")
        long = pd.concat(
            [inc.assign(study=label) for label, inc in incs.items()], ignore_index=True
        )[["study", *INCUMBENT_COLUMNS]]
        return pairs, long

    def _hypervolume_frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """:attr:`pairs` and :attr:`hypervolumes` of studies with several objectives."""
        reference = self.reference
        snaps = self.snapshots
        empty = [label for label, snap in snaps.items() if not snap.points]
        if empty or reference is None:
            raise ConfigError("compare", f"study '{(empty or list(snaps))[0]}' has no reported "
                              "value to compare")
        hvs = {label: hypervolume_frame(snap, reference) for label, snap in snaps.items()}
        finals = {label: float(hv["hypervolume"].iloc[-1]) for label, hv in hvs.items()}
        rows = []
        for label, hv in hvs.items():
            for target, target_hv in hvs.items():
                if target == label:
                    continue
                hit = _first_hypervolume(hv, finals[target])
                own = _first_hypervolume(target_hv, finals[target])
                assert own is not None  # a study reaches its own hypervolume
                rows.append(_pair_row(label, target, hit, own) | {
                    "target_hypervolume": finals[target]})
        pairs = _typed_pairs(pd.DataFrame(rows, columns=COMPARE_HYPERVOLUME_COLUMNS),
                             "target_hypervolume")
        long = pd.concat([hv.assign(study=label) for label, hv in hvs.items()],
                         ignore_index=True)
        long = long[["study", *(c for c in long.columns if c != "study")]]
        long.attrs["reference"] = reference
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

    Studies with several objectives are compared by hypervolume (:attr:`Comparison.reference`
    bounds them all): ``target_hypervolume`` (the target's final hypervolume of every value it
    reported, at any epoch) takes the place of ``target_best``, and ``time_s``, ``epochs`` and
    the rest say when the study's own hypervolume first reached it.

    Args:
        studies: the studies or their snapshots (labelled by name, ``name (2)`` on a clash),
            a mapping label -> study, or a :class:`Comparison`.

    Raises:
        ConfigError: ``compare`` when there are fewer than 2 studies, the directions differ,
            a study has no finite value, some studies have one objective and some several, or
            studies with several have different objectives.

    Example::

        >>> asha = load("runs/asha.journal")  # doctest: +SKIP
        >>> rs = load("runs/random.journal")  # doctest: +SKIP
        >>> compare([asha, rs])[["study", "target", "time_s", "time_speedup"]]  # doctest: +SKIP
    """
    return Comparison.of(studies).pairs


def _pair_row(
    label: str, target: str, hit: pd.Series | None, own: pd.Series
) -> dict[str, object]:
    """One row of :func:`compare`: ``label``'s first row reaching the target's final value
    (``hit``, ``None`` if never), against the target's own (``own``)."""
    time_s = None if hit is None else float(hit["elapsed_s"])
    epochs = None if hit is None else int(hit["epochs_spent"])
    return {
        "study": label,
        "target": target,
        "reached": hit is not None,
        "time_s": time_s,
        "epochs": epochs,
        "device_seconds": None if hit is None else float(hit["device_seconds_spent"]),
        "target_time_s": float(own["elapsed_s"]),
        "target_epochs": int(own["epochs_spent"]),
        "time_speedup": None if not time_s else float(own["elapsed_s"]) / time_s,
        "epochs_speedup": None if not epochs else int(own["epochs_spent"]) / epochs,
    }


def _typed_pairs(pairs: pd.DataFrame, target_column: str) -> pd.DataFrame:
    pairs["reached"] = pairs["reached"].astype("bool")
    pairs["epochs"] = pairs["epochs"].astype("Int64")
    for name in (target_column, "time_s", "device_seconds", "target_time_s", "time_speedup",
                 "epochs_speedup"):
        pairs[name] = pairs[name].astype("float64")
    return pairs


def _first_hypervolume(hv: pd.DataFrame, target: float) -> pd.Series | None:
    """The first :func:`~lightning_hpo.report.hypervolume_frame` row whose ``hypervolume``
    reaches ``target`` (up to rounding: one part in 10^9)."""
    hits = np.flatnonzero(hv["hypervolume"].to_numpy(float) >= target * (1 - 1e-9))
    return None if hits.size == 0 else hv.iloc[int(hits[0])]


def _first_reaching(inc: pd.DataFrame, target: float, info: StudyInfo) -> pd.Series | None:
    """The first incumbent row whose ``best`` is at least as good as ``target``."""
    best = inc["best"].to_numpy(float)
    with np.errstate(invalid="ignore"):  # NaN before the first finite value: never reached
        reached = best <= target if info.direction == "minimize" else best >= target
    hits = np.flatnonzero(reached)
    return None if hits.size == 0 else inc.iloc[int(hits[0])]
