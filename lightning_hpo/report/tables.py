"""The report's tables: one pandas DataFrame per question, built from a study or its snapshot.

Every function takes an Optuna study (read on the spot) or a
:class:`~lightning_hpo.report.StudySnapshot` (read once, shared by several tables, which then
agree with each other) and writes nothing to the study. What a plain Optuna study cannot tell
(slots, epoch end times) is left NaN, as :func:`~lightning_hpo.report.limitations` says. Times
are unix seconds (``*_time``) or seconds since the study's first trial started (``*_s``).
Trials still WAITING are left out and counted by :func:`~lightning_hpo.report.summarize`;
``state`` is Optuna's and ``status`` what the report shows (``PAUSED`` for a trial between two
segments). "Best" is the best value any trial reported at any epoch (the launcher keeps each
trial's best checkpoint), with the best COMPLETE trial beside it (``best_complete_*``). With
several objectives, :func:`trials_frame` gives each trial's Pareto ``front`` and ``best_front``
(:mod:`lightning_hpo.report.fronts`) and ``values_<metric>`` columns, and
:func:`hypervolume_frame` takes the place of :func:`incumbent_frame`.

Example::

    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    >>> study.optimize(lambda trial: trial.suggest_float("x", 0.0, 1.0), n_trials=4)
    >>> snap = StudySnapshot.read(study)
    >>> int(trials_frame(snap).sort_values("rank")["trial"].iloc[0]) == study.best_trial.number
    True
    >>> float(incumbent_frame(snap)["best"].iloc[-1]) == study.best_value
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from lightning_hpo.errors import ConfigError
from lightning_hpo.report._spending import Spending
from lightning_hpo.report.fronts import HypervolumeTrace, TrialFronts
from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.snapshot import Observation, Source, StudySnapshot, TrialRecord
from lightning_hpo.schema import ATTR, as_count, as_text

__all__ = [
    "CURVE_COLUMNS",
    "HYPERVOLUME_COLUMNS",
    "INCUMBENT_COLUMNS",
    "RUNG_COLUMNS",
    "SEGMENT_COLUMNS",
    "TRIAL_COLUMNS",
    "curves_frame",
    "hypervolume_frame",
    "incumbent_frame",
    "objective_columns",
    "rungs_frame",
    "segments_frame",
    "trials_frame",
]


TRIAL_COLUMNS = [
    "rank", "trial", "state", "status", "paused", "best_value", "best_step", "value",
    "last_value", "epochs", "epochs_trained", "stopped_by", "stop_reason", "paused_epoch",
    "paused_since", "paused_why", "segments", "bracket", "duration_s", "start_time", "end_time",
    "start_s", "end_s", "slot", "host", "device", "devices", "device_seconds",
]
SEGMENT_COLUMNS = [
    "trial", "segment", "state", "status", "paused", "slot", "host", "device", "devices",
    "start_time", "end_time", "start_s", "end_s", "duration_s", "from_epoch", "to_epoch", "how",
    "listed",
]
CURVE_COLUMNS = [
    "trial", "state", "status", "stopped_by", "bracket", "step", "value", "time", "elapsed_s",
    "trial_elapsed_s",
]
INCUMBENT_COLUMNS = [
    "trial", "state", "status", "stopped_by", "kind", "step", "time", "elapsed_s",
    "time_estimated", "value", "best", "best_trial", "best_step", "improved", "best_complete",
    "best_complete_trial", "improved_complete", "epochs_spent", "device_seconds_spent",
]
RUNG_COLUMNS = [
    "bracket", "rung", "trial", "value", "step", "state", "status", "stopped_by", "outcome",
]
#: :func:`hypervolume_frame`'s columns; ``values_<metric>`` per objective follow
#: ``time_estimated``.
HYPERVOLUME_COLUMNS = [
    "trial", "state", "status", "stopped_by", "kind", "step", "time", "elapsed_s",
    "time_estimated", "hypervolume", "improved", "front_size", "hypervolume_complete",
    "improved_complete", "front_size_complete", "epochs_spent", "device_seconds_spent",
]
#: The columns of one objective's value in :func:`trials_frame` (with several objectives), each
#: followed by the metric's name: its final value, the values of its best point, its last one.
_TRIAL_OBJECTIVE_PREFIXES = ("values_", "best_", "last_")


def objective_columns(info: StudyInfo, prefix: str = "values_") -> list[str]:
    """The columns that hold one value per objective: ``values_<metric>`` by default (as
    Optuna's ``trials_dataframe`` names them), in the study's order of objectives.

    Example::

        >>> from lightning_hpo.report import StudyInfo
        >>> objective_columns(StudyInfo("s", "minimize", metrics=("error", "latency_ms"),
        ...                             directions=("minimize", "minimize")))
        ['values_error', 'values_latency_ms']
    """
    return [f"{prefix}{metric}" for metric in info.metrics]


def trials_frame(source: Source) -> pd.DataFrame:
    """One row per started trial (WAITING trials are left out).

    Columns: ``rank`` (1 = best, by :data:`~lightning_hpo.report.RANK_ORDER`: the best value
    each trial reported at any epoch, whatever its state, so a trial pruned at a later rung
    with a worse value never outranks one stopped earlier with a better one; empty for trials
    with no finite value),
    ``trial`` (number), ``state`` (Optuna's), ``status`` (what the report shows: ``PAUSED``
    for a paused trial, else ``state``), ``paused`` (a RUNNING trial waiting between two
    segments), ``best_value`` and ``best_step`` (that best value and the
    epoch it was reported at), ``value`` (final, COMPLETE only), ``last_value`` (last
    intermediate value), ``epochs`` (completed), ``epochs_trained`` (over all its segments,
    retrained epochs included), ``stopped_by`` (PRUNED trials: ``pruner``, the pruner or a
    pausing schedule that did not promote it, or ``budget`` when the launcher stopped it
    because the study's budget was spent), ``stop_reason`` (the launcher's words, e.g.
    "wall-clock budget reached (...); stopped after epoch 7"), ``paused_epoch``,
    ``paused_since`` (unix s) and ``paused_why`` (paused trials: the epochs in the checkpoint
    it resumes from, when and why it paused), ``segments`` (how many training segments it
    lists; empty for a trial trained in one go), ``bracket`` (the pruner's bracket: 0 for
    ASHA, empty without a pruner), ``duration_s`` (first start to end, pauses included; NaN
    while RUNNING or paused), ``start_time`` and ``end_time`` (unix s),
    ``start_s`` and ``end_s`` (s since the study's first trial started), ``slot``, ``host``,
    ``device`` (its latest), ``devices`` (count; 1 when unknown), ``device_seconds`` (s x
    devices over its ended segments: duration x devices for a trial trained in one go; a
    paused trial's so far; NaN while its only segment runs), ``params_<name>`` per
    hyperparameter, ``fail_reason`` and ``timing`` (``launcher`` attrs, ``optuna`` datetimes,
    or ``none``).

    With several objectives, ``best_value``, ``best_step``, ``value`` and ``last_value`` give
    way to ``front`` (its final values' Pareto front among the COMPLETE trials': 0 = the
    front; empty for a trial without final values), ``best_front`` and ``best_front_step``
    (the best front any point it reported reached, at any epoch, its final values included,
    and the earliest epoch it reached it at; :mod:`lightning_hpo.report.fronts` states both
    rules), and per objective ``values_<metric>`` (final, COMPLETE only), ``best_<metric>``
    (the point on its best front) and ``last_<metric>`` (the last epoch reported); ``rank``
    follows :data:`~lightning_hpo.report.RANK_ORDER_FRONTS`.

    Example::

        >>> trials_frame(study).sort_values("rank").head(3)  # doctest: +SKIP
    """
    snap = StudySnapshot.of(source)
    info = snap.info
    t0 = snap.t0
    fronts = snap.fronts
    rank = {t.number: i + 1 for i, t in enumerate(snap.ranked)}
    param_names = sorted({name for t in snap.trials for name in t.params})
    rows = []
    for trial in snap.trials:
        attrs = trial.attrs
        duration = None if trial.start is None or trial.end is None else trial.end - trial.start
        best = trial.best(snap.info)
        pause = trial.paused
        row: dict[str, Any] = {
            "rank": rank.get(trial.number),
            "trial": trial.number,
            "state": trial.state,
            "status": trial.status,
            "paused": pause is not None,
            "best_value": None if best is None else best[0],
            "best_step": None if best is None else best[1],
            "value": trial.final_value,
            "last_value": trial.last_value,
            "epochs": trial.epochs,
            "epochs_trained": trial.epochs_trained,
            "stopped_by": trial.stopped_by,
            "stop_reason": trial.stop_reason,
            "paused_epoch": None if pause is None else pause.epoch,
            "paused_since": None if pause is None else pause.since,
            "paused_why": None if pause is None else pause.why,
            "segments": len(trial.segments) or None,
            "bracket": trial.bracket,
            "duration_s": duration,
            "start_time": trial.start,
            "end_time": trial.end,
            "start_s": None if trial.start is None or t0 is None else trial.start - t0,
            "end_s": None if trial.end is None or t0 is None else trial.end - t0,
            "slot": as_count(attrs.get(ATTR.SLOT)),  # the launcher's names, which a plain
            "host": as_text(attrs.get(ATTR.HOST)),  # Optuna study may use for anything
            "device": as_text(attrs.get(ATTR.DEVICE)),
            "devices": trial.devices,
            "device_seconds": trial.device_seconds,
        }
        if info.several:
            row.update(_objective_row(trial, info, fronts))
        row.update({f"params_{name}": trial.params.get(name) for name in param_names})
        row["fail_reason"] = as_text(attrs.get(ATTR.FAIL_REASON))
        row["timing"] = trial.timing
        rows.append(row)
    columns = [*_trial_columns(info), *(f"params_{n}" for n in param_names), "fail_reason",
               "timing"]
    frame = pd.DataFrame(rows, columns=columns)
    integers = ("front", "best_front", "best_front_step") if info.several else ("best_step",)
    for name in ("rank", "slot", "bracket", "paused_epoch", "segments", *integers):
        frame[name] = frame[name].astype("Int64")
    numbers = ([c for prefix in _TRIAL_OBJECTIVE_PREFIXES for c in objective_columns(info, prefix)]
               if info.several else ["best_value", "value", "last_value"])
    for name in (*numbers, "duration_s", "start_time", "end_time", "start_s", "end_s",
                 "device_seconds", "paused_since"):
        frame[name] = frame[name].astype("float64")
    frame["paused"] = frame["paused"].astype("bool")
    return frame


def _trial_columns(info: StudyInfo) -> list[str]:
    """:data:`TRIAL_COLUMNS`, or with several objectives their counterparts in place of the
    best, final and last value."""
    if not info.several:
        return TRIAL_COLUMNS
    at = TRIAL_COLUMNS.index("best_value")
    objectives = [c for prefix in _TRIAL_OBJECTIVE_PREFIXES for c in objective_columns(info,
                                                                                        prefix)]
    return [*TRIAL_COLUMNS[:at], "front", "best_front", "best_front_step", *objectives,
            *TRIAL_COLUMNS[at + 4:]]


def _objective_row(trial: TrialRecord, info: StudyInfo, fronts: TrialFronts) -> dict[str, Any]:
    """A trial's fronts and values per objective, for :func:`trials_frame`."""
    n = len(info.metrics)
    finals = trial.final_values or (None,) * n
    best = fronts.best_point.get(trial.number, (None,) * n)
    last = trial.points[-1] if trial.points else (None,) * n
    row: dict[str, Any] = {
        "front": fronts.front.get(trial.number),
        "best_front": fronts.best_front.get(trial.number),
        "best_front_step": fronts.best_step.get(trial.number),
    }
    for prefix, values in zip(_TRIAL_OBJECTIVE_PREFIXES, (finals, best, last), strict=True):
        row.update(zip(objective_columns(info, prefix), values, strict=True))
    return row


def segments_frame(source: Source) -> pd.DataFrame:
    """One row per training segment: where and when each trial trained.

    A trial of a pausing schedule (``sync_sh``, ``mode: promotion``) or one resumed after a
    crash trains in several segments, possibly on different slots, and waits in between; its
    segments are the ones it lists (``listed`` True). A trial that lists none is one segment
    from its start to its end (a paused one's: to when it paused; ``listed`` False). Trials
    whose start is unknown are left out. The segment in flight (a RUNNING trial's open entry)
    has no end; an entry a dead worker left open is closed or dropped as
    :attr:`TrialRecord.segments <lightning_hpo.report.TrialRecord>` says, so no second is
    counted twice.

    Columns: ``trial``, ``segment`` (1, 2, ... by start), ``state`` (the trial's, Optuna's),
    ``status`` (the trial's as the report shows it: ``PAUSED`` while it waits), ``paused`` (the
    trial waits now), ``slot``, ``host``, ``device``, ``devices`` (count; the
    trial's when the segment names none), ``start_time`` and ``end_time`` (unix s; NaN while
    in flight), ``start_s`` and ``end_s`` (s since the study's first trial started),
    ``duration_s``, ``from_epoch`` (epochs in the checkpoint it started from; 0 from scratch),
    ``to_epoch`` (epochs done when it ended), ``how`` (``paused``, ``complete``, ``pruned``,
    ``interrupted``, ``crashed``, ``failed``; ``running`` or empty in flight; empty when
    unknown) and ``listed``.

    Example::

        >>> segs = segments_frame(study)  # doctest: +SKIP
        >>> segs.groupby("trial")["duration_s"].sum()  # s trained, per trial  # doctest: +SKIP
    """
    snap = StudySnapshot.of(source)
    t0 = snap.t0
    rows = []
    for trial in snap.trials:
        for k, seg in enumerate(trial.spans, 1):
            rows.append({
                "trial": trial.number, "segment": k, "state": trial.state,
                "status": trial.status, "paused": trial.paused is not None, "slot": seg.slot,
                "host": seg.host, "device": seg.device, "devices": seg.devices or trial.devices,
                "start_time": seg.start, "end_time": seg.end,
                "start_s": None if t0 is None else seg.start - t0,
                "end_s": None if t0 is None or seg.end is None else seg.end - t0,
                "duration_s": None if seg.end is None else seg.end - seg.start,
                "from_epoch": seg.from_epoch, "to_epoch": seg.to_epoch, "how": seg.how,
                "listed": seg.listed,
            })
    frame = pd.DataFrame(rows, columns=SEGMENT_COLUMNS)
    for name in ("trial", "segment", "devices"):
        frame[name] = frame[name].astype("int64")
    for name in ("slot", "from_epoch", "to_epoch"):
        frame[name] = frame[name].astype("Int64")
    for name in ("start_time", "end_time", "start_s", "end_s", "duration_s"):
        frame[name] = frame[name].astype("float64")
    for name in ("paused", "listed"):
        frame[name] = frame[name].astype("bool")
    return frame


def curves_frame(source: Source) -> pd.DataFrame:
    """One row per reported epoch: the learning curves.

    Columns: ``trial``, ``state`` (the trial's, Optuna's), ``status`` (``PAUSED`` for a
    paused trial, else ``state``), ``stopped_by`` and ``bracket`` (as in
    :func:`trials_frame`), ``step`` (epochs completed, from 1), ``value`` (the metric),
    ``time`` (unix s when the epoch ended), ``elapsed_s`` (s since the study's first trial
    started) and ``trial_elapsed_s`` (s since the trial started).
    The times are NaN where the trial has no ``epoch_end_times`` (plain Optuna studies, trials
    still running). With several objectives, the epochs are those of each trial's
    ``objective_values``, ``value`` is the first objective's and ``values_<metric>`` columns
    follow, one per objective.

    Example::

        >>> curves = curves_frame(study)  # doctest: +SKIP
        >>> curves.groupby("trial")["step"].max()  # epochs each trial reached  # doctest: +SKIP
    """
    snap = StudySnapshot.of(source)
    t0 = snap.t0
    several = snap.info.several
    objectives = objective_columns(snap.info) if several else []
    rows = []
    for trial in snap.trials:
        for k, (step, value, when) in enumerate(
            zip(trial.steps, trial.values, trial.times, strict=True)
        ):
            row = {
                "trial": trial.number,
                "state": trial.state,
                "status": trial.status,
                "stopped_by": trial.stopped_by,
                "bracket": trial.bracket,
                "step": step,
                "value": value,
                "time": when,
                "elapsed_s": None if when is None or t0 is None else when - t0,
                "trial_elapsed_s": None if when is None or trial.start is None
                else when - trial.start,
            }
            if several:
                row.update(zip(objectives, trial.points[k], strict=True))
            rows.append(row)
    frame = pd.DataFrame(rows, columns=[*CURVE_COLUMNS, *objectives])
    frame["trial"] = frame["trial"].astype("int64")
    frame["step"] = frame["step"].astype("int64")
    frame["bracket"] = frame["bracket"].astype("Int64")
    for name in ("value", "time", "elapsed_s", "trial_elapsed_s", *objectives):
        frame[name] = frame[name].astype("float64")
    return frame


def incumbent_frame(source: Source) -> pd.DataFrame:
    """The incumbent trajectory: the best value reported so far, over wall-clock.

    One row per value a trial reported (``kind="epoch"``, every intermediate value of every
    trial, whatever its state) and per COMPLETE trial's final value (``kind="final"``, at its
    end time), in time order. ``best`` is the best finite value of any row so far, as
    multi-fidelity tools draw it; ``best_complete`` the best COMPLETE final value so far (NaN
    before the first), the classic incumbent.

    Columns: ``trial``, ``state``, ``status`` and ``stopped_by`` (the trial's, as in
    :func:`trials_frame`), ``kind``, ``step`` (epoch; a final value's is its last reported
    epoch), ``time`` (unix s), ``elapsed_s`` (s since the study's first trial started),
    ``time_estimated`` (no epoch end time was recorded: placed pro rata over the trial's
    duration), ``value``, ``best``, ``best_trial``, ``best_step``, ``improved`` (this row set a
    new ``best``), ``best_complete``, ``best_complete_trial``, ``improved_complete``,
    ``epochs_spent`` and ``device_seconds_spent`` (compute spent by all trials up to then;
    epochs count ``epoch_end_times``, pro rata over a trial's duration where they are
    missing).

    Raises:
        ConfigError: ``study`` when it has several objectives (no single best: see
            :func:`hypervolume_frame`).

    Example::

        >>> inc = incumbent_frame(study)  # doctest: +SKIP
        >>> inc.loc[inc["improved"], ["elapsed_s", "best", "best_trial"]]  # doctest: +SKIP
        >>> inc.loc[inc["improved_complete"], ["elapsed_s", "best_complete"]]  # doctest: +SKIP
    """
    snap = StudySnapshot.of(source)
    t0 = snap.t0
    info = snap.info
    if info.several:
        raise ConfigError("study", f"'{info.name}' has {len(info.metrics)} objectives: no "
                          "single best value to follow (its hypervolume_frame follows them all)")
    spending = Spending(snap.trials, snap.horizon, snap.info.resource == "step")
    rows = []
    best: Observation | None = None
    best_complete: Observation | None = None
    observed = snap.observations
    times = np.array([seen.time for seen in observed], dtype=float)
    epochs_spent = spending.epochs_at(times)
    device_seconds_spent = spending.device_seconds_at(times)
    for k, seen in enumerate(observed):
        finite = math.isfinite(seen.value)
        improved = finite and (
            best is None or (seen.value != best.value and info.better(seen.value, best.value))
        )
        best = seen if improved else best
        improved_complete = finite and seen.kind == "final" and (
            best_complete is None or (seen.value != best_complete.value
                                      and info.better(seen.value, best_complete.value))
        )
        best_complete = seen if improved_complete else best_complete
        assert t0 is not None  # an observation needs a started trial
        rows.append({
            **_observed(seen, t0),
            "value": seen.value,
            "best": None if best is None else best.value,
            "best_trial": None if best is None else best.trial.number,
            "best_step": None if best is None else best.step,
            "improved": improved,
            "best_complete": None if best_complete is None else best_complete.value,
            "best_complete_trial": None if best_complete is None else best_complete.trial.number,
            "improved_complete": improved_complete,
            "epochs_spent": int(epochs_spent[k]),
            "device_seconds_spent": float(device_seconds_spent[k]),
        })
    frame = pd.DataFrame(rows, columns=INCUMBENT_COLUMNS)
    frame["trial"] = frame["trial"].astype("int64")
    for name in ("improved", "improved_complete", "time_estimated"):
        frame[name] = frame[name].astype("bool")
    frame["epochs_spent"] = frame["epochs_spent"].astype("int64")
    for name in ("step", "best_trial", "best_step", "best_complete_trial"):
        frame[name] = frame[name].astype("Int64")
    for name in ("time", "elapsed_s", "value", "best", "best_complete", "device_seconds_spent"):
        frame[name] = frame[name].astype("float64")
    return frame


def hypervolume_frame(
    source: Source, reference: Sequence[float] | None = None
) -> pd.DataFrame:
    """The hypervolume of what a study with several objectives reported so far, over wall-clock:
    its counterpart of :func:`incumbent_frame`.

    One row per point a trial reported at an epoch (``kind="epoch"``, whatever its state) and
    per COMPLETE trial's final values (``kind="final"``, at its end), in time order.
    ``hypervolume`` is that of every finite point so far (any trial, any epoch: a PRUNED trial's
    epoch 3 counts, as in the incumbent's ``best``), ``hypervolume_complete`` that of the
    COMPLETE trials' final values so far (0 before the first), both bounded by ``reference``
    (:mod:`lightning_hpo.report.fronts`); neither ever decreases.

    Columns: ``trial``, ``state``, ``status`` and ``stopped_by`` (the trial's), ``kind``,
    ``step``, ``time`` (unix s), ``elapsed_s``, ``time_estimated`` (as in
    :func:`incumbent_frame`), ``values_<metric>`` (the point, one column per objective),
    ``hypervolume``, ``improved`` (this row made it grow), ``front_size`` (points no other
    dominates so far), ``hypervolume_complete``, ``improved_complete``,
    ``front_size_complete``, ``epochs_spent`` and ``device_seconds_spent`` (compute spent by
    all trials up to then). ``frame.attrs["reference"]`` holds the reference point.

    Args:
        source: the study, or its snapshot.
        reference: the reference point, one value per objective (default: the study's,
            :attr:`StudySnapshot.reference <lightning_hpo.report.StudySnapshot.reference>`;
            a comparison passes one shared by every study).

    Raises:
        ConfigError: ``study`` when it has one objective (see :func:`incumbent_frame`);
            ``reference`` when it does not give one finite value per objective.

    Example::

        >>> import optuna, warnings
        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> two = optuna.create_study(directions=["minimize", "minimize"])
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")  # Optuna calls set_metric_names experimental
        ...     two.set_metric_names(["error", "latency_ms"])
        >>> for point in [(0.1, 30.0), (0.2, 10.0), (0.3, 40.0)]:
        ...     _ = two.tell(two.ask(), list(point))
        >>> trials_frame(two)[["trial", "front", "values_error", "values_latency_ms"]]
           trial  front  values_error  values_latency_ms
        0      0      0           0.1               30.0
        1      1      0           0.2               10.0
        2      2      1           0.3               40.0
        >>> hv = hypervolume_frame(two)  # reference: each worst value + a tenth of its range
        >>> hv.attrs["reference"], hv["hypervolume"].round(3).tolist()
        ((0.32, 43.0), [2.86, 5.26, 5.26])
    """
    snap = StudySnapshot.of(source)
    info = snap.info
    if not info.several:
        raise ConfigError("study", f"'{info.name}' has one objective: its incumbent_frame "
                          "follows its best value")
    objectives = objective_columns(info)
    if reference is None:
        reference = snap.reference
    elif len(reference) != len(objectives) or not all(math.isfinite(r) for r in reference):
        raise ConfigError("reference", f"{tuple(reference)} must give one finite value per "
                          f"objective ({', '.join(info.metrics)})")
    observed = snap.observations
    times = np.array([seen.time for seen in observed], dtype=float)
    spending = Spending(snap.trials, snap.horizon, snap.info.resource == "step")
    epochs_spent = spending.epochs_at(times)
    device_seconds_spent = spending.device_seconds_at(times)
    any_epoch = complete = None
    if reference is not None:
        any_epoch = HypervolumeTrace(reference, info.minimize)
        complete = HypervolumeTrace(reference, info.minimize)
    t0 = snap.t0
    rows = []
    for k, seen in enumerate(observed):
        improved = any_epoch is not None and any_epoch.add(seen.values)
        improved_complete = (complete is not None and seen.kind == "final"
                             and complete.add(seen.values))
        assert t0 is not None  # an observation needs a started trial
        rows.append({
            **_observed(seen, t0),
            **dict(zip(objectives, seen.values, strict=True)),
            "hypervolume": 0.0 if any_epoch is None else any_epoch.value,
            "improved": improved,
            "front_size": 0 if any_epoch is None else any_epoch.size,
            "hypervolume_complete": 0.0 if complete is None else complete.value,
            "improved_complete": improved_complete,
            "front_size_complete": 0 if complete is None else complete.size,
            "epochs_spent": int(epochs_spent[k]),
            "device_seconds_spent": float(device_seconds_spent[k]),
        })
    at = HYPERVOLUME_COLUMNS.index("time_estimated") + 1
    columns = [*HYPERVOLUME_COLUMNS[:at], *objectives, *HYPERVOLUME_COLUMNS[at:]]
    frame = pd.DataFrame(rows, columns=columns)
    for name in ("trial", "epochs_spent", "front_size", "front_size_complete"):
        frame[name] = frame[name].astype("int64")
    for name in ("improved", "improved_complete", "time_estimated"):
        frame[name] = frame[name].astype("bool")
    frame["step"] = frame["step"].astype("Int64")
    for name in ("time", "elapsed_s", *objectives, "hypervolume", "hypervolume_complete",
                 "device_seconds_spent"):
        frame[name] = frame[name].astype("float64")
    frame.attrs["reference"] = None if reference is None else tuple(float(r) for r in reference)
    return frame


def rungs_frame(source: Source) -> pd.DataFrame:
    """The pruner's rung records, one row per trial per rung it reached, with the outcome.

    Read from what :class:`~lightning_hpo.ASHAPruner` and
    :class:`~lightning_hpo.HyperbandPruner` store in the study (the value a trial had when it
    first reached a rung, in its own bracket); empty for other studies. Nothing is recomputed
    from the config: a Hyperband trial appears only at the rungs of its bracket where a
    decision was made for it.

    Columns: ``bracket``, ``rung`` (epochs), ``trial``, ``value`` (what the decision compared),
    ``step`` (the epoch whose report reached the rung), ``state``, ``status`` and
    ``stopped_by`` (the trial's, as in :func:`trials_frame`), and ``outcome``: ``promoted``
    (it reported a later epoch), ``pruned`` (the pruner stopped it here), ``paused`` (it waits
    here, paused, for a decision or a free slot), ``continuing`` (RUNNING, let through, no
    later epoch yet) or ``ended`` (it ended at that report for another reason: COMPLETE, FAIL,
    or stopped by the study's budget). With several objectives the records are the pruner's
    vectors (its decisions ranked them by Pareto front): ``value`` is the first objective's and
    ``values_<metric>`` columns follow, one per objective.

    Example::

        >>> rungs = rungs_frame(study)  # doctest: +SKIP
        >>> rungs.groupby(["bracket", "rung"])["outcome"].value_counts()  # doctest: +SKIP
    """
    snap = StudySnapshot.of(source)
    trials = {t.number: t for t in snap.trials}
    objectives = objective_columns(snap.info) if snap.info.several else []
    records = ([(b, r, n, values[0] if values else math.nan, values)
                for b, r, n, values in snap.vector_records] if snap.info.several
               else [(b, r, n, v, ()) for b, r, n, v in snap.records])
    top: dict[tuple[int, int], int] = {}  # (bracket, trial) -> its highest recorded rung
    for bracket, rung, number, _, _ in records:
        top[(bracket, number)] = max(rung, top.get((bracket, number), rung))
    rows = []
    for bracket, rung, number, value, values in sorted(records):
        trial = trials.get(number)
        if trial is None:  # a record of a trial the study no longer lists: nothing to say
            continue
        step = next((s for s in trial.steps if s >= rung), None)  # the report that reached it
        last = max(trial.steps, default=None)
        if step is not None and last is not None and last > step:
            outcome = "promoted"
        elif trial.stopped_by == "pruner" and rung == top[(bracket, number)]:
            outcome = "pruned"
        elif trial.paused is not None and rung == top[(bracket, number)]:
            outcome = "paused"
        elif trial.state == "RUNNING":
            outcome = "continuing"
        else:
            outcome = "ended"
        rows.append({
            "bracket": bracket, "rung": rung, "trial": number, "value": value, "step": step,
            "state": trial.state, "status": trial.status, "stopped_by": trial.stopped_by,
            "outcome": outcome, **dict(zip(objectives, values, strict=False)),
        })
    frame = pd.DataFrame(rows, columns=[*RUNG_COLUMNS, *objectives])
    for name in ("bracket", "rung", "trial"):
        frame[name] = frame[name].astype("int64")
    frame["step"] = frame["step"].astype("Int64")
    for name in ("value", *objectives):
        frame[name] = frame[name].astype("float64")
    return frame


def _observed(seen: Observation, t0: float) -> dict[str, Any]:
    """The columns every observation row starts with: its trial, kind, step and times."""
    return {
        "trial": seen.trial.number,
        "state": seen.trial.state,
        "status": seen.trial.status,
        "stopped_by": seen.trial.stopped_by,
        "kind": seen.kind,
        "step": seen.step,
        "time": seen.time,
        "elapsed_s": seen.time - t0,
        "time_estimated": seen.estimated,
    }
