"""A study read once: its trials with their timings resolved, and the pruner's rung records.

:class:`StudySnapshot` is what every table, the summary, the comparison, the plots' inputs and the
CLI are built from. Each public report function takes a study or a snapshot: given a study it
reads one; given a snapshot it reads nothing, so several tables of one study agree with each
other and cost one read of the storage.

Times are unix seconds. Studies made by the launcher carry per-trial timing attributes
(:class:`lightning_hpo.schema.ATTR`); for a plain Optuna study a trial's start and end fall back
on Optuna's ``datetime_start``/``datetime_complete`` (``timing="optuna"``) and its epoch end
times are unknown (``None``). Trials still WAITING in the queue (never started) are left out of
:attr:`StudySnapshot.trials` and counted in :attr:`StudySnapshot.counts`.

Example::

    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study(study_name="demo")
    >>> study.optimize(lambda trial: trial.suggest_float("x", 0.0, 1.0), n_trials=3)
    >>> study.enqueue_trial({"x": 0.5})
    >>> snap = StudySnapshot.read(study)
    >>> len(snap.trials), snap.counts["WAITING"], snap.trials[0].state, snap.trials[0].timing
    (3, 1, 'COMPLETE', 'optuna')
    >>> snap.ranked[0].number == study.best_trial.number
    True
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypeAlias

import optuna
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo._rung_store import RungRecord, rung_records
from lightning_hpo.errors import ConfigError
from lightning_hpo.report.info import StudyInfo, study_info
from lightning_hpo.schema import ATTR, BRACKET_ATTR, devices_in_label

__all__ = [
    "RANK_ORDER",
    "STATES",
    "Observation",
    "Source",
    "StudySnapshot",
    "TrialRecord",
]

#: Trial states in the order the report lists them.
STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")

#: How trials are ranked (:attr:`StudySnapshot.ranked`), in words: the CLI prints it.
RANK_ORDER = (
    "ranked by the best value each trial reported at any epoch (its final value included), "
    "whatever its state; ties: the first to report it"
)


@dataclass(frozen=True)
class TrialRecord:
    """One started trial as the report sees it: Optuna's record with its times resolved.

    Attributes:
        frozen: Optuna's trial (params, user attributes, ...), as read.
        state: ``COMPLETE``, ``PRUNED``, ``FAIL`` or ``RUNNING``.
        start: unix s when it started (``None`` when nothing says).
        end: unix s when it ended; ``None`` while RUNNING.
        timing: where ``start``/``end`` come from: the launcher's attributes (``launcher``),
            Optuna's datetimes (``optuna``), or nowhere (``none``).
        epochs: epochs completed (the launcher's count, else the number of reported steps).
        devices: devices it trained on (1 when unknown).
        devices_known: whether its ``device`` attribute says how many.
        steps: the steps (epochs, from 1) it reported, ascending.
        values: the value reported at each step.
        times: unix s when each of those epochs ended (``None`` where unknown).
        bracket: the pruner's bracket (0 for ASHA), ``None`` without a pruner.
        stopped_by: PRUNED trials: ``pruner``, or ``budget`` when the launcher stopped it
            because the study's budget was spent; ``None`` otherwise.
        stop_reason: the launcher's words for a budget stop.
    """

    frozen: FrozenTrial
    state: str
    start: float | None
    end: float | None
    timing: Literal["launcher", "optuna", "none"]
    epochs: int
    devices: int
    devices_known: bool
    steps: tuple[int, ...]
    values: tuple[float, ...]
    times: tuple[float | None, ...]
    bracket: int | None = None
    stopped_by: Literal["pruner", "budget"] | None = None
    stop_reason: str | None = None

    @property
    def number(self) -> int:
        """The trial's number in the study."""
        return self.frozen.number

    @property
    def params(self) -> dict[str, Any]:
        """Its hyperparameters."""
        return self.frozen.params

    @property
    def attrs(self) -> dict[str, Any]:
        """Its user attributes (:class:`lightning_hpo.schema.ATTR` keys for launcher trials)."""
        return self.frozen.user_attrs

    @property
    def last_value(self) -> float | None:
        """The last value it reported (``None`` when it reported none)."""
        return self.values[-1] if self.values else None

    @property
    def final_value(self) -> float | None:
        """The value Optuna holds for the trial: a COMPLETE trial's return value."""
        value = self.frozen.value if self.state == "COMPLETE" else None
        return None if value is None else float(value)

    def best(self, info: StudyInfo) -> tuple[float, int | None] | None:
        """(value, step) of the best finite value it reported, its final value included.

        The earliest step wins a tie; a COMPLETE trial's final value counts at its last
        reported step (``None`` when it reported none) when it beats every intermediate value.
        ``None`` when it has no finite value.
        """
        found: tuple[float, int | None] | None = None
        candidates: list[tuple[float, int | None]] = list(
            zip(self.values, self.steps, strict=True)
        )
        if self.final_value is not None:
            candidates.append((self.final_value, max(self.steps, default=None)))
        for value, step in candidates:
            if math.isfinite(value) and (
                found is None or (value != found[0] and info.better(value, found[0]))
            ):
                found = (value, step)
        return found

    def busy_until(self, horizon: float) -> float | None:
        """The trial's end, or for a RUNNING trial the study's ``horizon`` (unix s)."""
        if self.start is None:
            return None
        return self.end if self.end is not None else max(horizon, self.start)

    @classmethod
    def resolve(cls, frozen: FrozenTrial, info: StudyInfo) -> TrialRecord:
        """The record of a started trial, its times and bracket read from what it stores."""
        attrs = frozen.user_attrs
        start, end = _number(attrs.get(ATTR.START)), _number(attrs.get(ATTR.END))
        timing: Literal["launcher", "optuna", "none"] = "launcher" if start is not None else "none"
        if start is None and frozen.datetime_start is not None:
            start, timing = frozen.datetime_start.timestamp(), "optuna"
        if end is None and frozen.state.is_finished() and frozen.datetime_complete is not None:
            end = frozen.datetime_complete.timestamp()
        steps = sorted(frozen.intermediate_values)
        values = [float(frozen.intermediate_values[s]) for s in steps]
        raw_times = attrs.get(ATTR.EPOCH_END_TIMES)
        times: list[float | None] = [None] * len(steps)
        if isinstance(raw_times, list) and raw_times:
            clean = [_number(x) for x in raw_times]
            if len(clean) == len(steps):
                times = clean
            else:  # aligned by step: epoch_end_times[k] is the end of epoch k + 1
                times = [clean[s - 1] if 1 <= s <= len(clean) else None for s in steps]
        epochs = attrs.get(ATTR.EPOCHS)
        if isinstance(epochs, bool) or not isinstance(epochs, int):
            epochs = len(steps)
        devices = devices_in_label(attrs.get(ATTR.DEVICE))
        bracket = frozen.system_attrs.get(BRACKET_ATTR)
        if isinstance(bracket, bool) or not isinstance(bracket, int):
            bracket = info.bracket_of(frozen.number)
        reason = attrs.get(ATTR.STOP_REASON)  # the launcher's: the study's budget stopped it
        reason = str(reason) if reason not in (None, "") else None
        stopped_by: Literal["pruner", "budget"] | None = None
        if frozen.state == TrialState.PRUNED:
            stopped_by = "budget" if reason is not None else "pruner"
        return cls(
            frozen, frozen.state.name, start, end, timing, epochs, devices or 1,
            devices is not None, tuple(steps), tuple(values), tuple(times), bracket,
            stopped_by, reason,
        )


@dataclass(frozen=True)
class Observation:
    """One value a trial reported (``kind="epoch"``) or returned (``"final"``), placed in time.

    Attributes:
        time: unix s (an epoch's end time, or a COMPLETE trial's end).
        estimated: the time is a pro-rata estimate (no epoch end time recorded).
        trial: the trial.
        kind: ``epoch`` (an intermediate value) or ``final`` (a COMPLETE trial's value).
        step: the epoch; a final value's is its trial's last reported step.
        value: the value.
    """

    time: float
    estimated: bool
    trial: TrialRecord
    kind: Literal["epoch", "final"]
    step: int | None
    value: float


@dataclass(frozen=True)
class StudySnapshot:
    """A study's trials and rung records, read once; every table is built from one of these.

    Attributes:
        info: what the study is (:class:`~lightning_hpo.report.StudyInfo`).
        trials: the started trials (WAITING ones left out), by number.
        counts: trials by state name, WAITING included.
        horizon: unix s, the latest time the study recorded (a start, an end, an epoch end);
            the time of reading when it recorded none.
        records: the pruner's rung records (:func:`lightning_hpo._rung_store.rung_records`),
            empty for a study without our pruner.

    Example::

        >>> snap = StudySnapshot.read(study)  # doctest: +SKIP
        >>> trials_frame(snap), curves_frame(snap), summarize(snap)  # doctest: +SKIP
    """

    info: StudyInfo
    trials: tuple[TrialRecord, ...]
    counts: Mapping[str, int]
    horizon: float
    records: tuple[RungRecord, ...] = ()

    @classmethod
    def read(cls, study: optuna.Study) -> StudySnapshot:
        """Read a study: its info, its trials, and (with our pruner) its rung records.

        Raises:
            ConfigError: ``study`` when the study has several objectives.
        """
        info = study_info(study)
        frozen = study.get_trials(deepcopy=False)
        counts = Counter(t.state.name for t in frozen)
        trials = [TrialRecord.resolve(t, info) for t in frozen if t.state != TrialState.WAITING]
        stamps = [x for t in trials for x in (t.start, t.end, *t.times) if x is not None]
        horizon = max(stamps) if stamps else time.time()
        records = tuple(rung_records(study)) if info.brackets else ()
        return cls(info, tuple(sorted(trials, key=lambda t: t.number)), counts, horizon, records)

    @classmethod
    def of(cls, source: Source) -> StudySnapshot:
        """``source`` itself when it is a snapshot, else a snapshot of the study read now."""
        return source if isinstance(source, StudySnapshot) else cls.read(source)

    @property
    def t0(self) -> float | None:
        """Unix s when the study's first trial started (``None`` before any did)."""
        starts = [t.start for t in self.trials if t.start is not None]
        return min(starts) if starts else None

    def require_trials(self) -> None:
        """Raise unless a trial has started.

        Raises:
            ConfigError: ``study``, naming the study and how many trials wait in the queue.
        """
        if not self.trials:
            waiting = self.counts.get("WAITING", 0)
            why = f"no started trial ({waiting} waiting in the queue)" if waiting else "no trials"
            raise ConfigError("study", f"'{self.info.name}' has {why}; nothing to report yet")

    @cached_property
    def observations(self) -> tuple[Observation, ...]:
        """Every reported value and COMPLETE final value, in time order.

        An epoch without an end time (plain Optuna studies, RUNNING launcher trials) is placed
        pro rata over its trial's duration (up to :attr:`horizon` while RUNNING); a trial that
        never started is left out.
        """
        found = []
        for trial in self.trials:
            stop = trial.busy_until(self.horizon)
            for k, (step, value, when) in enumerate(
                zip(trial.steps, trial.values, trial.times, strict=True)
            ):
                estimated = when is None
                if when is None:
                    if trial.start is None or stop is None:
                        continue
                    when = trial.start + (stop - trial.start) * (k + 1) / len(trial.steps)
                found.append(Observation(when, estimated, trial, "epoch", step, value))
            if trial.final_value is not None and trial.end is not None:
                found.append(Observation(trial.end, False, trial, "final",
                                         max(trial.steps, default=None), trial.final_value))
        found.sort(key=lambda o: (o.time, o.trial.number, o.kind == "final", o.step or 0))
        return tuple(found)

    @cached_property
    def ranked(self) -> tuple[TrialRecord, ...]:
        """Trials with a finite value, best first by :data:`RANK_ORDER`.

        As the incumbent sees them: of two trials with the same best value, the first to
        report it ranks first.
        """
        info = self.info
        sign = 1.0 if info.direction == "minimize" else -1.0
        bests = {t.number: b for t in self.trials if (b := t.best(info)) is not None}
        first: dict[int, float] = {}  # trial -> when it first reported its best value (unix s)
        for seen in self.observations:
            number = seen.trial.number
            if number in bests and number not in first and seen.value == bests[number][0]:
                first[number] = seen.time
        ranked = [t for t in self.trials if t.number in bests]
        return tuple(sorted(ranked, key=lambda t: (sign * bests[t.number][0],
                                                   first.get(t.number, math.inf), t.number)))


#: What every report function takes: a study (read on the spot) or a snapshot of one.
Source: TypeAlias = optuna.Study | StudySnapshot


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
