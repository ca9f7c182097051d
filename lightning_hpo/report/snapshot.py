"""A study read once: its trials with their timings resolved, and the pruner's rung records.

:class:`StudySnapshot` is what every table, the summary, the comparison, the plots and the CLI
are built from: given a study a report function reads one; given a snapshot it reads nothing, so
several tables of one study agree and cost one read. Times are unix seconds. Launcher studies
carry per-trial timing attributes (:class:`lightning_hpo.schema.ATTR`); for a plain Optuna study
a trial's start and end fall back on Optuna's ``datetime_start``/``datetime_complete``
(``timing="optuna"``) and its epoch end times are ``None``. Trials still WAITING are left out of
:attr:`StudySnapshot.trials` and counted in :attr:`StudySnapshot.counts`. A trial of a pausing
schedule trains in several :class:`Segment` s and stays RUNNING in between with a :class:`Pause`
(status ``PAUSED``). With several objectives a trial's reports are its
:data:`ATTR.OBJECTIVE_VALUES <lightning_hpo.schema.ATTR>`
(:func:`~lightning_hpo.schema.objective_curve`), and :attr:`StudySnapshot.fronts` places it on
the Pareto fronts. Example::

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
    >>> snap.trials[0].status, snap.trials[0].paused, snap.trials[0].segments
    ('COMPLETE', None, ())
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypeAlias

import optuna
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo.errors import ConfigError
from lightning_hpo.pareto import is_finite_point, reference_point
from lightning_hpo.pruners import RungRecord, VectorRecord, open_vector_store, rung_records
from lightning_hpo.report.fronts import TrialFronts, trial_fronts
from lightning_hpo.report.info import StudyInfo, study_info
from lightning_hpo.schema import (
    ATTR,
    BRACKET_ATTR,
    Pause,
    Segment,
    as_count,
    as_number,
    as_text,
    devices_in_label,
    objective_curve,
)

__all__ = [
    "RANK_ORDER",
    "RANK_ORDER_FRONTS",
    "STATES",
    "STATUSES",
    "Observation",
    "Pause",
    "Segment",
    "Source",
    "StudySnapshot",
    "TrialRecord",
]

#: Trial states (Optuna's) in the order the report lists them.
STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")

#: What the report shows as a trial's state: Optuna's, with a paused RUNNING trial as PAUSED.
STATUSES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "PAUSED", "WAITING")

#: How trials are ranked (:attr:`StudySnapshot.ranked`), in words: the CLI prints it.
RANK_ORDER = (
    "ranked by the best value each trial reported at any epoch (its final value included), "
    "whatever its state; ties: the first to report it"
)

#: How trials are ranked in a study with several objectives, in words: the CLI prints it.
RANK_ORDER_FRONTS = (
    "ranked by the best Pareto front each trial reached at any epoch (its final values "
    "included; 0 = the front), then along the front by the first objective; ties: lower trial "
    "number"
)


@dataclass(frozen=True)
class TrialRecord:
    """One started trial as the report sees it: Optuna's record with its times resolved.

    Attributes:
        frozen: Optuna's trial (params, user attributes, ...), as read.
        state: ``COMPLETE``, ``PRUNED``, ``FAIL`` or ``RUNNING`` (Optuna's: a paused trial is
            RUNNING; :attr:`status` says ``PAUSED``).
        start: unix s when it started (its first segment; ``None`` when nothing says).
        end: unix s when it ended; ``None`` while RUNNING (paused included).
        timing: where ``start``/``end`` come from: the launcher's attributes (``launcher``),
            Optuna's datetimes (``optuna``), or nowhere (``none``).
        epochs: epochs completed (the launcher's count, else the number of reported steps); in
            a study by steps (:attr:`StudyInfo.resource <lightning_hpo.report.StudyInfo>`), the
            last step it reported, as every ``epochs`` of the report counts steps there.
        devices: devices it trained on (1 when unknown).
        devices_known: whether its ``device`` attribute says how many.
        steps: the steps it reported (epochs from 1, or optimizer steps), ascending.
        values: the value reported at each step (with several objectives, the first
            objective's: :attr:`points` holds them all).
        times: unix s when each of those epochs ended (``None`` where unknown).
        bracket: the pruner's bracket (0 for ASHA), ``None`` without a pruner.
        stopped_by: PRUNED trials: ``pruner`` (the pruner, or a pausing schedule that did not
            promote it from a rung), or ``budget`` when the launcher stopped it because the
            study's budget was spent; ``None`` otherwise.
        stop_reason: the launcher's words for a budget stop.
        paused: a RUNNING trial waiting between two segments: where and why; else ``None``.
        segments: the segments it lists (:data:`ATTR.SEGMENTS <lightning_hpo.schema.ATTR>`),
            by start, settled: an open entry (no ``end``) is the segment in
            flight only while the trial trains; one a dead worker left behind is closed at
            the last time recorded in it or dropped when another entry records that stretch;
            an entry listed twice or overlapping another counts once. ``()`` for a trial
            trained in one go.
        trained: epochs trained over all segments, retrained ones included
            (:data:`ATTR.EPOCHS_TRAINED <lightning_hpo.schema.ATTR>`, else the segments'
            sum); ``None`` when nothing says (then :attr:`epochs_trained` is ``epochs``).
        points: with several objectives, the values reported at each step, one per objective
            (:func:`~lightning_hpo.schema.objective_curve`); ``()`` with one objective.
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
    paused: Pause | None = None
    segments: tuple[Segment, ...] = ()
    trained: int | None = None
    points: tuple[tuple[float, ...], ...] = ()

    @property
    def number(self) -> int:
        """The trial's number in the study."""
        return self.frozen.number

    @property
    def status(self) -> str:
        """Its state as the report shows it: Optuna's, or ``PAUSED`` for a paused trial."""
        return "PAUSED" if self.paused is not None else self.state

    @property
    def epochs_trained(self) -> int:
        """Epochs trained over all its segments, retrained ones included (compute spent)."""
        return self.epochs if self.trained is None else self.trained

    @cached_property
    def spans(self) -> tuple[Segment, ...]:
        """Where and when it trained: its :attr:`segments`, or for a trial that lists none one
        unlisted segment from its start to its end (a paused one's: to when it paused), on
        its ``slot``; ``()`` when its start is unknown."""
        if self.segments:
            return self.segments
        if self.start is None:
            return ()
        attrs = self.attrs
        end = self.end
        if end is None and self.paused is not None:
            known = [x for x in (self.paused.since, *self.times) if x is not None]
            end = max(known) if known else None
        done = self.state != "RUNNING" or self.paused is not None
        return (Segment(self.start, None if end is None else max(end, self.start),
                        as_count(attrs.get(ATTR.SLOT)), as_text(attrs.get(ATTR.DEVICE)),
                        as_text(attrs.get(ATTR.HOST)), 0, self.epochs if done else None,
                        None, listed=False),)

    @property
    def device_seconds(self) -> float | None:
        """Device-seconds of its ended spans (s x devices): a paused trial's segments so far,
        nothing of a segment in flight; ``None`` when none has ended."""
        ended = [(s.end - s.start) * (s.devices or self.devices)
                 for s in self.spans if s.end is not None]
        return sum(ended) if ended else None

    @property
    def in_flight(self) -> bool:
        """Whether it is training now (RUNNING and not paused, or a span without an end)."""
        return self.status == "RUNNING" or any(s.end is None for s in self.spans)

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
    def final_values(self) -> tuple[float, ...] | None:
        """The values Optuna holds for a COMPLETE trial, one per objective; else ``None``."""
        values = self.frozen.values if self.state == "COMPLETE" else None
        return None if values is None else tuple(float(v) for v in values)

    @property
    def final_value(self) -> float | None:
        """The value Optuna holds for the trial: a COMPLETE trial's return value (``None`` in a
        study with several objectives: see :attr:`final_values`)."""
        values = self.final_values
        return values[0] if values is not None and len(values) == 1 else None

    @property
    def reported(self) -> list[tuple[int | None, tuple[float, ...]]]:
        """With several objectives, every ``(epoch, values)`` it reported, by epoch, and its
        final values last (at its last epoch) when COMPLETE; ``[]`` with one objective."""
        found: list[tuple[int | None, tuple[float, ...]]] = list(
            zip(self.steps, self.points, strict=False))
        finals = self.final_values
        if finals is not None and len(finals) > 1:
            found.append((max(self.steps, default=None), finals))
        return found

    def best(self, info: StudyInfo) -> tuple[float, int | None] | None:
        """(value, step) of the best finite value it reported, its final value included.

        The earliest step wins a tie; a COMPLETE trial's final value counts at its last
        reported step (``None`` when it reported none) when it beats every intermediate value.
        ``None`` when it has no finite value, and in a study with several objectives (where
        :attr:`StudySnapshot.fronts` says where it stands).
        """
        if info.several:
            return None
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
        """The trial's end; for a paused trial the end of its last segment (or when it
        paused); for a RUNNING one the study's ``horizon`` (unix s)."""
        if self.start is None:
            return None
        if self.end is not None:
            return self.end
        if self.paused is not None and self.spans and all(s.end is not None for s in self.spans):
            return max(max(s.end for s in self.spans if s.end is not None), self.start)
        return max(horizon, self.start)

    @classmethod
    def resolve(cls, frozen: FrozenTrial, info: StudyInfo) -> TrialRecord:
        """The record of a started trial, its times and bracket read from what it stores."""
        attrs = frozen.user_attrs
        pause = Pause.of(frozen)
        raw_times = attrs.get(ATTR.EPOCH_END_TIMES)
        recorded = [as_number(x) for x in raw_times] if isinstance(raw_times, list) else []
        segments = _segments_of(frozen, pause, recorded)
        start, end, timing = _span_of(frozen, segments)
        points: tuple[tuple[float, ...], ...] = ()
        if info.several:  # each epoch's values; Optuna's intermediate values stay empty
            curve = {step: point for step, point in objective_curve(frozen).items()
                     if len(point) == len(info.directions)}
            steps = sorted(curve)
            points = tuple(curve[s] for s in steps)
            values = tuple(point[0] for point in points)
        else:
            steps = sorted(frozen.intermediate_values)
            values = tuple(float(frozen.intermediate_values[s]) for s in steps)
        epochs = as_count(attrs.get(ATTR.EPOCHS))
        devices = devices_in_label(attrs.get(ATTR.DEVICE))
        bracket = as_count(frozen.system_attrs.get(BRACKET_ATTR))
        if bracket is None:
            bracket = info.bracket_of(frozen.number, as_count(attrs.get(ATTR.ROUND)))
        stopped_by, reason = _stopped_by(frozen)
        trained = as_count(attrs.get(ATTR.EPOCHS_TRAINED))
        if trained is None and segments and all(s.epochs is not None for s in segments):
            trained = sum(s.epochs or 0 for s in segments)
        if epochs is None:  # what it reported: epochs (one report each), or its last step
            epochs = max(steps, default=0) if info.resource == "step" else len(steps)
        return cls(
            frozen, frozen.state.name, start, end, timing, epochs, devices or 1,
            devices is not None, tuple(steps), values, _epoch_times(steps, recorded), bracket,
            stopped_by, reason, pause, segments, trained, points,
        )


def _segments_of(
    frozen: FrozenTrial, pause: Pause | None, recorded: list[float | None]
) -> tuple[Segment, ...]:
    """The trial's listed segments, settled (:func:`_settle`) against what else it recorded:
    its epoch end times, its end (else Optuna's), and when it paused."""
    attrs = frozen.user_attrs
    raw = attrs.get(ATTR.SEGMENTS)
    host = as_text(attrs.get(ATTR.HOST))
    listed = [s for s in (Segment.read(x, host) for x in raw) if s is not None] if isinstance(
        raw, (list, tuple)) else []
    last = as_number(attrs.get(ATTR.END))  # the trial's end, else its last segment's
    if last is None and frozen.state.is_finished() and frozen.datetime_complete is not None:
        last = frozen.datetime_complete.timestamp()
    training = frozen.state == TrialState.RUNNING and pause is None
    return _settle(listed, training, [*recorded, last, None if pause is None else pause.since])


def _span_of(
    frozen: FrozenTrial, segments: tuple[Segment, ...]
) -> tuple[float | None, float | None, Literal["launcher", "optuna", "none"]]:
    """``(start, end, timing)`` of a trial: the launcher's times and segments, else Optuna's
    datetimes. A RUNNING trial has not ended, whatever end time its last segment left."""
    attrs = frozen.user_attrs
    finished = frozen.state.is_finished()
    start = as_number(attrs.get(ATTR.START))
    end = as_number(attrs.get(ATTR.END)) if finished else None
    if segments:  # the trial started with its first segment, ended with its last
        start = segments[0].start if start is None else min(start, segments[0].start)
        ends = [s.end for s in segments if s.end is not None]
        if end is None and finished and ends:
            end = max(ends)
    timing: Literal["launcher", "optuna", "none"] = "launcher" if start is not None else "none"
    if start is None and frozen.datetime_start is not None:
        start, timing = frozen.datetime_start.timestamp(), "optuna"
    if end is None and finished and frozen.datetime_complete is not None:
        end = frozen.datetime_complete.timestamp()
    return start, end, timing


def _epoch_times(steps: list[int], recorded: list[float | None]) -> tuple[float | None, ...]:
    """When each reported step's epoch ended: ``recorded[k]`` is the end of epoch ``k + 1``.

    Example::

        >>> _epoch_times([1, 3], [10.0, 20.0, 30.0]), _epoch_times([1, 2], [10.0, 20.0])
        ((10.0, 30.0), (10.0, 20.0))
    """
    if len(recorded) == len(steps):
        return tuple(recorded)
    return tuple(recorded[s - 1] if 1 <= s <= len(recorded) else None for s in steps)


def _stopped_by(frozen: FrozenTrial) -> tuple[Literal["pruner", "budget"] | None, str | None]:
    """Who stopped a PRUNED trial, and the launcher's words when the study's budget did.

    The pruner stopped it at an epoch or a step (``pruned_at_epoch``, ``pruned_at_step``), or
    a schedule did not promote it from the rung it waited at (its last pause, left behind, was
    at a rung); else a stop reason means the study's budget.
    """
    attrs = frozen.user_attrs
    reason = attrs.get(ATTR.STOP_REASON)
    reason = str(reason) if reason not in (None, "") else None
    if frozen.state != TrialState.PRUNED:
        return None, reason
    left = Pause.read(attrs.get(ATTR.PAUSED))
    decided = any(as_count(attrs.get(name)) is not None
                  for name in (ATTR.PRUNED_AT_EPOCH, ATTR.PRUNED_AT_STEP)) or (
        left is not None and left.at_rung)
    return ("budget" if reason is not None and not decided else "pruner"), reason


@dataclass(frozen=True)
class Observation:
    """One value a trial reported (``kind="epoch"``) or returned (``"final"``), placed in time.

    Attributes:
        time: unix s (an epoch's end time, or a COMPLETE trial's end).
        estimated: the time is a pro-rata estimate (no epoch end time recorded).
        trial: the trial.
        kind: ``epoch`` (an intermediate value) or ``final`` (a COMPLETE trial's value).
        step: the epoch; a final value's is its trial's last reported step.
        value: the value (with several objectives, the first objective's).
        values: the values, one per objective.
    """

    time: float
    estimated: bool
    trial: TrialRecord
    kind: Literal["epoch", "final"]
    step: int | None
    value: float
    values: tuple[float, ...] = ()


@dataclass(frozen=True)
class StudySnapshot:
    """A study's trials and rung records, read once; every table is built from one of these.

    Attributes:
        info: what the study is (:class:`~lightning_hpo.report.StudyInfo`).
        trials: the started trials (WAITING ones left out), by number.
        counts: trials by state name, WAITING included.
        horizon: unix s, the latest time the study recorded (a start, an end, an epoch end);
            the time of reading when it recorded none.
        records: the pruner's rung records (:func:`lightning_hpo.pruners.rung_records`),
            empty for a study without our pruner, and with several objectives.
        vector_records: with several objectives, the pruner's rung records
            ``(bracket, rung, trial_number, values)``
            (:meth:`lightning_hpo.pruners.VectorRungStore.records`); else empty.

    Example::

        >>> snap = StudySnapshot.read(study)  # doctest: +SKIP
        >>> trials_frame(snap), curves_frame(snap), summarize(snap)  # doctest: +SKIP
    """

    info: StudyInfo
    trials: tuple[TrialRecord, ...]
    counts: Mapping[str, int]
    horizon: float
    records: tuple[RungRecord, ...] = ()
    vector_records: tuple[VectorRecord, ...] = ()

    @classmethod
    def read(cls, study: optuna.Study) -> StudySnapshot:
        """Read a study: its info, its trials, and (with our pruner) its rung records."""
        info = study_info(study)
        frozen = study.get_trials(deepcopy=False)
        counts = Counter(t.state.name for t in frozen)
        trials = [TrialRecord.resolve(t, info) for t in frozen if t.state != TrialState.WAITING]
        stamps = [x for t in trials for x in (
            t.start, t.end, *t.times, *(x for s in t.segments for x in (s.start, s.end)),
            t.paused.since if t.paused is not None else None) if x is not None]
        horizon = max(stamps) if stamps else time.time()
        records: tuple[RungRecord, ...] = ()
        vectors: tuple[VectorRecord, ...] = ()
        if info.brackets and info.several:
            vectors = tuple(open_vector_store(study).records())
        elif info.brackets:
            records = tuple(rung_records(study))
        return cls(info, tuple(sorted(trials, key=lambda t: t.number)), counts, horizon, records,
                   vectors)

    @classmethod
    def of(cls, source: Source) -> StudySnapshot:
        """``source`` itself when it is a snapshot, else a snapshot of the study read now."""
        return source if isinstance(source, StudySnapshot) else cls.read(source)

    @property
    def paused(self) -> tuple[TrialRecord, ...]:
        """The trials waiting between two segments (RUNNING in :attr:`counts`)."""
        return tuple(t for t in self.trials if t.paused is not None)

    @property
    def statuses(self) -> dict[str, int]:
        """Trials by :attr:`TrialRecord.status`, in :data:`STATUSES` order (zeros included):
        :attr:`counts` with the paused trials moved from RUNNING to PAUSED."""
        found = {status: self.counts.get(status, 0) for status in STATUSES}
        found.update({k: v for k, v in self.counts.items() if k not in found})
        found["PAUSED"] = len(self.paused)
        found["RUNNING"] -= found["PAUSED"]
        return found

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
            points = trial.points or [(value,) for value in trial.values]
            for k, (step, value, when) in enumerate(
                zip(trial.steps, trial.values, trial.times, strict=True)
            ):
                estimated = when is None
                if when is None:
                    if trial.start is None or stop is None:
                        continue
                    when = trial.start + (stop - trial.start) * (k + 1) / len(trial.steps)
                found.append(Observation(when, estimated, trial, "epoch", step, value, points[k]))
            finals = trial.final_values
            if finals is not None and trial.end is not None:
                found.append(Observation(trial.end, False, trial, "final",
                                         max(trial.steps, default=None), finals[0], finals))
        found.sort(key=lambda o: (o.time, o.trial.number, o.kind == "final", o.step or 0))
        return tuple(found)

    @cached_property
    def fronts(self) -> TrialFronts:
        """With several objectives, each trial's front (final values) and best front (any
        epoch), as :mod:`lightning_hpo.report.fronts` defines them; empty with one objective."""
        if not self.info.several:
            return TrialFronts()
        finals = {t.number: t.final_values for t in self.trials if t.final_values is not None}
        reported = {t.number: t.reported for t in self.trials}
        return trial_fronts(finals, reported, self.info.minimize)

    @cached_property
    def points(self) -> tuple[tuple[float, ...], ...]:
        """With several objectives, every finite point the study reported: each trial's values
        at each epoch and the COMPLETE trials' final values; ``()`` with one objective."""
        return tuple(point for t in self.trials for _, point in t.reported
                     if is_finite_point(point))

    @cached_property
    def reference(self) -> tuple[float, ...] | None:
        """With several objectives, the hypervolume's reference point:
        :func:`lightning_hpo.pareto.reference_point` of :attr:`points` (each objective's worst
        value plus a tenth of its range); ``None`` with one objective or no finite point."""
        if not self.points:
            return None
        return reference_point(self.points, self.info.minimize)

    @cached_property
    def ranked(self) -> tuple[TrialRecord, ...]:
        """Trials with a finite value, best first by :data:`RANK_ORDER` (with several
        objectives, by :data:`RANK_ORDER_FRONTS`).

        As the incumbent sees them: of two trials with the same best value, the first to
        report it ranks first.
        """
        info = self.info
        if info.several:
            fronts = self.fronts
            along = 1.0 if info.minimize[0] else -1.0  # the first objective, lower is better
            return tuple(sorted(
                (t for t in self.trials if t.number in fronts.best_front),
                key=lambda t: (fronts.best_front[t.number],
                               along * fronts.best_point[t.number][0], t.number)))
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


def _settle(
    segments: list[Segment], training: bool, known: Iterable[float | None]
) -> tuple[Segment, ...]:
    """A trial's listed segments made consistent, by start: it trains one at a time.

    An open entry (no ``end``: the launcher lists a segment when it starts and replaces the
    entry with the closed one at its end) is the segment in flight only when the trial trains
    now (``training``: RUNNING, not paused) and no other entry starts after it. Any other open
    entry was left behind (its worker died before closing it, or another writer recorded the
    same stretch): dropped when a closed entry covers its start or nothing recorded falls
    between its start and the next entry's, else closed at the last time recorded there
    (``known``, unix s: epoch end times, the pause, the trial's end) with ``how`` unknown.
    An entry listed twice counts once, and entries that overlap (one stretch recorded by two
    writers, two hosts' clocks) are trimmed so that none starts before the previous one
    ended: no second is counted twice.

    Example::

        >>> closed = Segment(0.0, 5.0, slot=0, how="crashed")
        >>> left = Segment(0.1, None, slot=0, how="running")  # the same stretch, left open
        >>> [(s.start, s.end, s.how) for s in _settle([closed, left, closed], False, [9.0])]
        [(0.0, 5.0, 'crashed')]
        >>> now = Segment(6.0, None, slot=1, how="running")
        >>> [(s.start, s.end, s.how) for s in _settle([left, now], True, [3.0])]
        [(0.1, 3.0, None), (6.0, None, 'running')]
    """
    unique = list(dict.fromkeys(segments))
    closed = [s for s in unique if s.end is not None]
    opened = sorted((s for s in unique if s.end is None), key=lambda s: s.start)
    stamps = [x for x in known if x is not None]
    kept = list(closed)
    for k, seg in enumerate(opened):
        later = [s.start for s in unique if s.start > seg.start]
        if training and not later and k == len(opened) - 1:
            kept.append(seg)  # in flight
            continue
        if any(c.start <= seg.start <= c.end for c in closed if c.end is not None):
            continue  # recorded closed by another writer
        limit = min(later, default=math.inf)
        inside = [x for x in stamps if seg.start < x <= limit]
        if inside:
            kept.append(dataclasses.replace(seg, end=max(inside), how=None))
    settled: list[Segment] = []
    last_end = -math.inf
    for seg in sorted(kept, key=lambda s: (math.inf if s.end is None else s.end, s.start)):
        if seg.start < last_end:
            if seg.end is not None and seg.end <= last_end:
                continue  # within the stretch before it: recorded twice
            seg = dataclasses.replace(seg, start=last_end)
        settled.append(seg)
        last_end = seg.end if seg.end is not None else last_end
    return tuple(sorted(settled, key=lambda s: s.start))
