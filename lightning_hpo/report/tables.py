"""The report's tables: one pandas DataFrame per question, read from any Optuna study.

Everything here reads the study and writes nothing to it. Studies made by the launcher carry
per-trial timing attributes (:class:`lightning_hpo.launch.study.ATTR`); for a plain Optuna study
the tables fall back on Optuna's ``datetime_start``/``datetime_complete`` and leave what cannot
be known empty (NaN), which :func:`limitations` spells out.

Times are unix seconds (``*_time``) or seconds since the study's first trial started
(``*_s``, "elapsed"). Trials still WAITING in the queue (never started) are left out of every
table and counted by :func:`summarize`.

"Best" means the best value any trial reported at any epoch (a PRUNED trial's epoch 3 counts as
much as a COMPLETE trial's final value: the launcher keeps each trial's best checkpoint), as in
multi-fidelity tools' incumbent plots; the best COMPLETE trial is given beside it
(``best_complete_*``).

Example::

    from lightning_hpo.report import load, trials_frame, curves_frame, incumbent_frame

    study = load("runs/quickstart.journal")           # the storage's only study
    trials = trials_frame(study)                      # one row per trial
    trials.sort_values("rank")[["trial", "state", "best_value", "best_step", "params_lr"]]
    curves = curves_frame(study)                      # one row per reported epoch
    incumbent_frame(study)[["elapsed_s", "best", "best_complete"]]  # best so far, wall-clock
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import optuna
import pandas as pd
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo._rung_store import rung_records
from lightning_hpo.config import parse_config
from lightning_hpo.errors import ConfigError
from lightning_hpo.rungs import (
    bracket_min_resource,
    bracket_of,
    hyperband_brackets,
    rung_levels,
    trial_allocation_budgets,
)
from lightning_hpo.schema import ATTR, BRACKET_ATTR, CONFIG_ATTR
from lightning_hpo.storage import StorageSpec, mask, mask_text

__all__ = [
    "RANK_ORDER",
    "STATES",
    "StudyInfo",
    "compare",
    "curves_frame",
    "incumbent_frame",
    "limitations",
    "load",
    "load_ref",
    "rungs_frame",
    "study_info",
    "summarize",
    "trials_frame",
]

_logger = logging.getLogger(__name__)

#: Trial states in the order the report lists them.
STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")

TRIAL_COLUMNS = [
    "rank", "trial", "state", "best_value", "best_step", "value", "last_value", "epochs",
    "stopped_by", "stop_reason", "bracket", "duration_s", "start_time", "end_time", "start_s",
    "end_s", "slot", "host", "device", "devices", "device_seconds",
]
CURVE_COLUMNS = [
    "trial", "state", "stopped_by", "bracket", "step", "value", "time", "elapsed_s",
    "trial_elapsed_s",
]
INCUMBENT_COLUMNS = [
    "trial", "state", "stopped_by", "kind", "step", "time", "elapsed_s", "time_estimated",
    "value", "best", "best_trial", "best_step", "improved", "best_complete",
    "best_complete_trial", "improved_complete", "epochs_spent", "device_seconds_spent",
]
RUNG_COLUMNS = ["bracket", "rung", "trial", "value", "step", "state", "stopped_by", "outcome"]
COMPARE_COLUMNS = [
    "study", "target", "target_best", "reached", "time_s", "epochs", "device_seconds",
    "target_time_s", "target_epochs", "time_speedup", "epochs_speedup",
]


# ------------------------------------------------------------------------------------------
# Opening a study.
# ------------------------------------------------------------------------------------------
def _open(storage: str | BaseStorage) -> BaseStorage:
    if not isinstance(storage, str):
        return storage
    return StorageSpec(storage).open(create=False)  # never an empty file at a mistyped path


def load(storage: str | BaseStorage, study_name: str | None = None) -> optuna.Study:
    """Open a study for reading.

    Args:
        storage: a storage spec (SQLAlchemy URL or journal file path, see
            :mod:`lightning_hpo.storage`) or an opened Optuna storage.
        study_name: the study; may be left out when the storage holds exactly one.

    Raises:
        ConfigError: ``storage`` when it cannot be opened (password masked) or holds no study;
            ``study`` when the name is not in it (the message lists the names there) or is
            needed because there are several.

    Example::

        >>> study = load("sqlite:///runs/lenet-asha.db", "lenet-asha")  # doctest: +SKIP
    """
    where = mask(storage) if isinstance(storage, str) else type(storage).__name__
    opened = _open(storage)
    try:
        names = sorted(optuna.get_all_study_names(opened))
    except Exception as error:  # driver errors vary: one masked line
        reason = " ".join(str(error).split())[:300]
        if isinstance(storage, str):
            reason = mask_text(reason, storage)
        raise ConfigError("storage", f"cannot read {where}: {reason}") from None
    if not names:
        raise ConfigError("storage", f"{where} holds no study")
    if study_name is None:
        if len(names) > 1:
            raise ConfigError(
                "study",
                f"{where} holds {len(names)} studies; name one of: {', '.join(names)}",
            )
        study_name = names[0]
    elif study_name not in names:
        raise ConfigError(
            "study", f"no study named '{study_name}' in {where}; it holds: {', '.join(names)}"
        )
    return optuna.load_study(
        study_name=study_name, storage=opened, sampler=optuna.samplers.RandomSampler()
    )


def load_ref(ref: str, storage: str | BaseStorage | None = None) -> optuna.Study:
    """Open a study named ``NAME`` (in ``storage``) or ``NAME@STORAGE`` (anywhere).

    A name that exists as such in ``storage`` wins over splitting at ``@``; otherwise the name
    is everything before the first ``@`` and the storage spec everything after it (a
    PostgreSQL URL's own ``user:password@host`` stays whole).

    Raises:
        ConfigError: as :func:`load`; ``storage`` when a bare name comes without a storage.

    Example::

        >>> asha = load_ref("asha@runs/asha.journal")  # doctest: +SKIP
        >>> rs = load_ref("random", "sqlite:///runs/all.db")  # doctest: +SKIP
    """
    name, sep, spec = ref.partition("@")
    if storage is not None and (not sep or _has_study(storage, ref)):
        return load(storage, ref)
    if not sep or not name or not spec:
        raise ConfigError(
            "storage", f"no storage for study '{ref}': give --storage or write NAME@STORAGE"
        )
    return load(spec, name)


def _has_study(storage: str | BaseStorage, name: str) -> bool:
    try:
        return name in optuna.get_all_study_names(_open(storage))
    except ConfigError:
        return False


# ------------------------------------------------------------------------------------------
# What the study is: metric, direction, rungs.
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StudyInfo:
    """What the report needs to know about a study beyond its trials.

    Attributes:
        name: the study name.
        direction: ``"minimize"`` or ``"maximize"``.
        metric: the metric name from the launcher config, else ``"value"``.
        pruner: ``"asha"``, ``"hyperband"``, ``"none"``, or ``None`` when unknown.
        rungs: rung levels in epochs (empty when there is no pruner or it is unknown); for
            Hyperband, those of bracket 0 (the most aggressive).
        max_epochs: epochs a trial may train (``None`` when unknown).
        config: the launcher config (storage masked), ``{}`` for a plain Optuna study.
        brackets: rung levels of each bracket, bracket 0 first: ``(rungs,)`` for ASHA, one
            ladder per Hyperband bracket, ``()`` without a pruner.
        budgets: Hyperband's per-bracket trial allocation (what assigns a trial to a bracket);
            ``()`` for other pruners.
    """

    name: str
    direction: Literal["minimize", "maximize"]
    metric: str = "value"
    pruner: str | None = None
    rungs: tuple[int, ...] = ()
    max_epochs: int | None = None
    config: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    brackets: tuple[tuple[int, ...], ...] = ()
    budgets: tuple[int, ...] = ()

    @property
    def from_launcher(self) -> bool:
        """Whether the launcher created the study (its config is stored with it)."""
        return bool(self.config)

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is at least as good as ``b`` in this study's direction."""
        return a <= b if self.direction == "minimize" else a >= b

    def bracket_of(self, trial_number: int) -> int | None:
        """The pruner's bracket for a trial that has not stored one (``None`` without pruner).

        Hyperband assigns brackets by a hash of the study name and trial number, so the report
        finds the bracket of a trial that stopped before its first rung (where the pruner
        stores it) exactly as the pruner would.
        """
        if self.budgets:
            return bracket_of(self.name, trial_number, self.budgets)
        return 0 if self.brackets else None


def study_info(study: optuna.Study) -> StudyInfo:
    """Metric, direction and rung levels of a study (from ``lightning_hpo:config`` if there).

    Raises:
        ConfigError: ``study`` when the study has several objectives.

    Example::

        >>> info = study_info(study)  # doctest: +SKIP
        >>> info.metric, info.rungs  # doctest: +SKIP
        ('validation_error', (1, 3, 9))
    """
    if len(study.directions) != 1:
        raise ConfigError(
            "study",
            f"'{study.study_name}' has {len(study.directions)} objectives; the report reads "
            "single-objective studies",
        )
    minimize = study.direction == optuna.study.StudyDirection.MINIMIZE
    direction = "minimize" if minimize else "maximize"
    text = study.user_attrs.get(CONFIG_ATTR)
    try:
        raw = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        return StudyInfo(study.study_name, direction)  # type: ignore[arg-type]
    metric = raw.get("metric") if isinstance(raw.get("metric"), str) else "validation_error"
    pruner, minimum, factor, maximum, max_epochs = _pruner_settings(raw)
    brackets: tuple[tuple[int, ...], ...] = ()
    budgets: tuple[int, ...] = ()
    if pruner in ("asha", "hyperband") and maximum is not None:
        try:
            if pruner == "hyperband":
                n_brackets = hyperband_brackets(minimum, maximum, factor)
                budgets = tuple(trial_allocation_budgets(minimum, maximum, factor))
            else:
                n_brackets = 1
            brackets = tuple(
                tuple(rung_levels(bracket_min_resource(minimum, factor, b), factor, maximum))
                for b in range(n_brackets)
            )
        except ValueError as error:
            _logger.warning("study %s: cannot compute rungs: %s", study.study_name, error)
    return StudyInfo(
        study.study_name, direction, metric, pruner,  # type: ignore[arg-type]
        brackets[0] if brackets else (), max_epochs, raw, brackets=brackets, budgets=budgets,
    )


def _pruner_settings(raw: Mapping[str, Any]) -> tuple[str, int, int, int | None, int | None]:
    """(name, min_resource, reduction_factor, max_resource, max_epochs) from a stored config."""
    try:  # the launcher's own reading of its config, defaults included
        cfg = parse_config(raw)
        p = cfg.pruner
        return p.name, p.min_resource, p.reduction_factor, p.max_resource, cfg.max_epochs
    except Exception as error:  # a config from another version: read what is there
        _logger.debug("stored config does not parse (%s); reading the pruner as is", error)
    spec = raw.get("pruner", "asha")
    spec = {"name": spec} if isinstance(spec, str) else dict(spec or {})
    trainer: dict[str, Any] = raw["trainer"] if isinstance(raw.get("trainer"), dict) else {}
    maximum = spec.get("max_resource") or trainer.get("max_epochs")
    ints = [spec.get("min_resource", 1), spec.get("reduction_factor", 3), maximum]
    minimum, factor, maximum = (v if isinstance(v, int) else None for v in ints)
    return str(spec.get("name", "asha")), minimum or 1, factor or 3, maximum, maximum


# ------------------------------------------------------------------------------------------
# A snapshot of the trials, read once, with their timings resolved.
# ------------------------------------------------------------------------------------------
@dataclass
class _Trial:
    frozen: FrozenTrial
    state: str
    start: float | None  # unix seconds
    end: float | None  # unix seconds; None while RUNNING
    timing: Literal["launcher", "optuna", "none"]
    epochs: int
    devices: int
    devices_known: bool
    steps: list[int]
    values: list[float]
    times: list[float | None]  # epoch end times (unix s), aligned with steps
    bracket: int | None = None  # the pruner's bracket (0 for ASHA), None without a pruner
    stopped_by: Literal["pruner", "budget"] | None = None  # PRUNED trials only
    stop_reason: str | None = None  # why the study's budget stopped it (``ATTR.STOP_REASON``)

    @property
    def number(self) -> int:
        return self.frozen.number

    @property
    def last_value(self) -> float | None:
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


class _Spending:
    """Compute spent by all trials up to given times: epochs and device-seconds, vectorised.

    Epochs count each trial's ``epoch_end_times``; a trial without them is credited pro rata
    over its duration (its epochs spread evenly from start to end). Both are cumulative sums
    over sorted event times, so a whole incumbent trajectory costs a few sorts, not a pass over
    every trial per row.
    """

    def __init__(self, trials: Sequence[_Trial], horizon: float) -> None:
        ends: list[float] = []
        spans = []  # (start, stop, devices) per started trial
        for trial in trials:
            stop = trial.busy_until(horizon)
            if trial.start is None or stop is None:
                continue
            stop = max(stop, trial.start)
            spans.append((trial.start, stop, trial.devices))
            if trial.times and all(x is not None for x in trial.times):
                ends.extend(x for x in trial.times if x is not None)
            elif trial.epochs:  # pro rata: epoch k of n ends at start + span * k / n
                span = stop - trial.start
                ends.extend(trial.start + span * k / trial.epochs - 1e-9 * span / trial.epochs
                            for k in range(1, trial.epochs + 1))
        self._epoch_ends = np.sort(np.array(ends, dtype=float))
        array = np.array(spans, dtype=float).reshape(-1, 3)
        # seconds since the first start: sums of unix times would cost precision
        self._t0 = float(array[:, 0].min()) if len(array) else 0.0
        array[:, :2] -= self._t0
        order = np.argsort(array[:, 0])
        self._starts = array[order, 0]
        self._start_devices = np.cumsum(array[order, 2])
        self._start_device_times = np.cumsum(array[order, 2] * array[order, 0])
        order = np.argsort(array[:, 1])
        self._stops = array[order, 1]
        self._stop_devices = np.cumsum(array[order, 2])
        self._stop_device_times = np.cumsum(array[order, 2] * array[order, 1])

    def epochs_at(self, times: np.ndarray) -> np.ndarray:
        """Epochs completed by each unix time in ``times``, all trials together."""
        return np.searchsorted(self._epoch_ends, times, side="right").astype("int64")

    def device_seconds_at(self, times: np.ndarray) -> np.ndarray:
        """Device-seconds spent by each unix time in ``times``, all trials together.

        A trial started by ``t`` counts ``devices * (min(t, stop) - start)``: the finished ones
        their whole span, the others ``t - start``.
        """
        times = np.asarray(times, dtype=float) - self._t0
        started = np.searchsorted(self._starts, times, side="right")
        stopped = np.searchsorted(self._stops, times, side="right")

        def total(cumulative: np.ndarray, count: np.ndarray) -> np.ndarray:
            padded = np.concatenate([[0.0], cumulative])
            return padded[count]

        running = total(self._start_devices, started) - total(self._stop_devices, stopped)
        return (total(self._stop_device_times, stopped) + running * times
                - total(self._start_device_times, started))


@dataclass
class _Snapshot:
    info: StudyInfo
    trials: list[_Trial]  # started trials, by number
    counts: Counter[str]
    horizon: float  # unix s: the latest time the study recorded (a start, an end, an epoch)
    records: list[tuple[int, int, int, float]] = field(default_factory=list)  # the pruner's

    @property
    def t0(self) -> float | None:
        starts = [t.start for t in self.trials if t.start is not None]
        return min(starts) if starts else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _devices(label: Any) -> int | None:
    """Devices in a label like ``cpu:0`` (1) or ``cuda:0,1`` (2); ``None`` when unreadable."""
    if not isinstance(label, str) or not label:
        return None
    ids = label.rpartition(":")[2]
    count = 0
    for part in ids.split(","):
        low, dash, high = part.partition("-")
        if dash and low.isdigit() and high.isdigit():
            count += int(high) - int(low) + 1
        elif part.strip():
            count += 1
    return count or None


def _resolve(frozen: FrozenTrial, info: StudyInfo) -> _Trial:
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
    devices = _devices(attrs.get(ATTR.DEVICE))
    stored = frozen.system_attrs.get(BRACKET_ATTR)
    if isinstance(stored, bool) or not isinstance(stored, int):
        stored = info.bracket_of(frozen.number)
    reason = attrs.get(ATTR.STOP_REASON)  # the launcher's: the study's budget stopped it
    reason = str(reason) if reason not in (None, "") else None
    stopped_by: Literal["pruner", "budget"] | None = None
    if frozen.state == TrialState.PRUNED:
        stopped_by = "budget" if reason is not None else "pruner"
    return _Trial(
        frozen, frozen.state.name, start, end, timing, epochs, devices or 1,
        devices is not None, steps, values, times, stored, stopped_by, reason,
    )


def _snapshot(study: optuna.Study) -> _Snapshot:
    info = study_info(study)
    frozen = study.get_trials(deepcopy=False)
    counts = Counter(t.state.name for t in frozen)
    trials = [_resolve(t, info) for t in frozen if t.state != TrialState.WAITING]
    stamps = [x for t in trials for x in (t.start, t.end, *t.times) if x is not None]
    horizon = max(stamps) if stamps else time.time()
    records = []
    if info.brackets:  # our pruner's (bracket, rung, trial, value) records, read only
        records = [(r.bracket, r.rung, r.trial_number, r.value) for r in rung_records(study)]
    return _Snapshot(info, sorted(trials, key=lambda t: t.number), counts, horizon, records)


def _check_not_empty(snap: _Snapshot) -> None:
    if not snap.trials:
        waiting = snap.counts.get("WAITING", 0)
        why = f"no started trial ({waiting} waiting in the queue)" if waiting else "no trials"
        raise ConfigError("study", f"'{snap.info.name}' has {why}; nothing to report yet")


# ------------------------------------------------------------------------------------------
# Tables.
# ------------------------------------------------------------------------------------------
#: How the best-trials table is ordered, in words (the CLI prints it above the table).
RANK_ORDER = (
    "ranked by the best value each trial reported at any epoch (its final value included), "
    "whatever its state; ties: the first to report it"
)


def _ranked(snap: _Snapshot) -> list[_Trial]:
    """Trials with a finite value, best first by :data:`RANK_ORDER` (as the incumbent sees
    them: the first to report the best value is the best trial)."""
    info = snap.info
    sign = 1.0 if info.direction == "minimize" else -1.0
    bests = {t.number: b for t in snap.trials if (b := t.best(info)) is not None}
    first: dict[int, float] = {}  # trial -> when it first reported its best value (unix s)
    for seen in _observations(snap):
        number = seen.trial.number
        if number in bests and number not in first and seen.value == bests[number][0]:
            first[number] = seen.time
    ranked = [t for t in snap.trials if t.number in bests]
    return sorted(ranked, key=lambda t: (sign * bests[t.number][0],
                                         first.get(t.number, math.inf), t.number))


def _trials_frame(snap: _Snapshot) -> pd.DataFrame:
    t0 = snap.t0
    rank = {t.number: i + 1 for i, t in enumerate(_ranked(snap))}
    param_names = sorted({name for t in snap.trials for name in t.frozen.params})
    rows = []
    for trial in snap.trials:
        attrs = trial.frozen.user_attrs
        duration = None if trial.start is None or trial.end is None else trial.end - trial.start
        best = trial.best(snap.info)
        row: dict[str, Any] = {
            "rank": rank.get(trial.number),
            "trial": trial.number,
            "state": trial.state,
            "best_value": None if best is None else best[0],
            "best_step": None if best is None else best[1],
            "value": trial.final_value,
            "last_value": trial.last_value,
            "epochs": trial.epochs,
            "stopped_by": trial.stopped_by,
            "stop_reason": trial.stop_reason,
            "bracket": trial.bracket,
            "duration_s": duration,
            "start_time": trial.start,
            "end_time": trial.end,
            "start_s": None if trial.start is None or t0 is None else trial.start - t0,
            "end_s": None if trial.end is None or t0 is None else trial.end - t0,
            "slot": attrs.get(ATTR.SLOT),
            "host": attrs.get(ATTR.HOST),
            "device": attrs.get(ATTR.DEVICE),
            "devices": trial.devices,
            "device_seconds": None if duration is None else duration * trial.devices,
        }
        row.update({f"params_{name}": trial.frozen.params.get(name) for name in param_names})
        row["fail_reason"] = attrs.get(ATTR.FAIL_REASON)
        row["timing"] = trial.timing
        rows.append(row)
    columns = [*TRIAL_COLUMNS, *(f"params_{n}" for n in param_names), "fail_reason", "timing"]
    frame = pd.DataFrame(rows, columns=columns)
    for name in ("rank", "slot", "best_step", "bracket"):
        frame[name] = frame[name].astype("Int64")
    for name in ("best_value", "value", "last_value", "duration_s", "start_time", "end_time",
                 "start_s", "end_s", "device_seconds"):
        frame[name] = frame[name].astype("float64")
    return frame


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per started trial (WAITING trials are left out).

    Columns: ``rank`` (1 = best, by :data:`RANK_ORDER`: the best value each trial reported at
    any epoch, whatever its state, so a trial pruned at a later rung with a worse value never
    outranks one stopped earlier with a better one; empty for trials with no finite value),
    ``trial`` (number), ``state``, ``best_value`` and ``best_step`` (that best value and the
    epoch it was reported at), ``value`` (final, COMPLETE only), ``last_value`` (last
    intermediate value), ``epochs`` (completed), ``stopped_by`` (PRUNED trials: ``pruner``,
    or ``budget`` when the launcher stopped it because the study's budget was spent),
    ``stop_reason`` (the launcher's words, e.g. "wall-clock budget reached (...); stopped after
    epoch 7"), ``bracket`` (the pruner's bracket: 0 for ASHA, empty without a
    pruner), ``duration_s`` (NaN while RUNNING), ``start_time`` and ``end_time`` (unix s),
    ``start_s`` and ``end_s`` (s since the study's first trial started), ``slot``, ``host``,
    ``device``, ``devices`` (count; 1 when unknown), ``device_seconds`` (duration x devices,
    NaN while RUNNING), ``params_<name>`` per hyperparameter, ``fail_reason`` and ``timing``
    (``launcher`` attrs, ``optuna`` datetimes, or ``none``).

    Example::

        >>> trials_frame(study).sort_values("rank").head(3)  # doctest: +SKIP
    """
    return _trials_frame(_snapshot(study))


def _curves_frame(snap: _Snapshot) -> pd.DataFrame:
    t0 = snap.t0
    rows = []
    for trial in snap.trials:
        for step, value, when in zip(trial.steps, trial.values, trial.times, strict=True):
            rows.append({
                "trial": trial.number,
                "state": trial.state,
                "stopped_by": trial.stopped_by,
                "bracket": trial.bracket,
                "step": step,
                "value": value,
                "time": when,
                "elapsed_s": None if when is None or t0 is None else when - t0,
                "trial_elapsed_s": None if when is None or trial.start is None
                else when - trial.start,
            })
    frame = pd.DataFrame(rows, columns=CURVE_COLUMNS)
    frame["trial"] = frame["trial"].astype("int64")
    frame["step"] = frame["step"].astype("int64")
    frame["bracket"] = frame["bracket"].astype("Int64")
    for name in ("value", "time", "elapsed_s", "trial_elapsed_s"):
        frame[name] = frame[name].astype("float64")
    return frame


def curves_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per reported epoch: the learning curves.

    Columns: ``trial``, ``state`` (the trial's final state), ``stopped_by`` and ``bracket``
    (as in :func:`trials_frame`), ``step`` (epochs completed, from 1), ``value`` (the metric),
    ``time`` (unix s when the epoch ended), ``elapsed_s`` (s since the study's first trial
    started) and ``trial_elapsed_s`` (s since the trial started).
    The times are NaN where the trial has no ``epoch_end_times`` (plain Optuna studies, trials
    still running).

    Example::

        >>> curves = curves_frame(study)  # doctest: +SKIP
        >>> curves.groupby("trial")["step"].max()  # epochs each trial reached  # doctest: +SKIP
    """
    return _curves_frame(_snapshot(study))


@dataclass(frozen=True)
class _Observation:
    """One value a trial reported (``kind="epoch"``) or returned (``"final"``), placed in time."""

    time: float  # unix s
    estimated: bool  # the time is a pro-rata estimate (no epoch end time recorded)
    trial: _Trial
    kind: Literal["epoch", "final"]
    step: int | None
    value: float


def _observations(snap: _Snapshot) -> list[_Observation]:
    """Every reported value and COMPLETE final value, in time order.

    An epoch without an end time (plain Optuna studies, RUNNING launcher trials) is placed pro
    rata over its trial's duration, as :class:`_Spending` counts it; a trial that never
    started is left out.
    """
    found = []
    for trial in snap.trials:
        stop = trial.busy_until(snap.horizon)
        for k, (step, value, when) in enumerate(
            zip(trial.steps, trial.values, trial.times, strict=True)
        ):
            estimated = when is None
            if when is None:
                if trial.start is None or stop is None:
                    continue
                when = trial.start + (stop - trial.start) * (k + 1) / len(trial.steps)
            found.append(_Observation(when, estimated, trial, "epoch", step, value))
        if trial.final_value is not None and trial.end is not None:
            found.append(_Observation(trial.end, False, trial, "final",
                                      max(trial.steps, default=None), trial.final_value))
    found.sort(key=lambda o: (o.time, o.trial.number, o.kind == "final", o.step or 0))
    return found


def _incumbent_frame(snap: _Snapshot) -> pd.DataFrame:
    t0 = snap.t0
    info = snap.info
    spending = _Spending(snap.trials, snap.horizon)
    rows = []
    best: _Observation | None = None
    best_complete: _Observation | None = None
    observed = _observations(snap)
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
            "trial": seen.trial.number,
            "state": seen.trial.state,
            "stopped_by": seen.trial.stopped_by,
            "kind": seen.kind,
            "step": seen.step,
            "time": seen.time,
            "elapsed_s": seen.time - t0,
            "time_estimated": seen.estimated,
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


def incumbent_frame(study: optuna.Study) -> pd.DataFrame:
    """The incumbent trajectory: the best value reported so far, over wall-clock.

    One row per value a trial reported (``kind="epoch"``, every intermediate value of every
    trial, whatever its state) and per COMPLETE trial's final value (``kind="final"``, at its
    end time), in time order. ``best`` is the best finite value of any row so far, as
    multi-fidelity tools draw it; ``best_complete`` the best COMPLETE final value so far (NaN
    before the first), the classic incumbent.

    Columns: ``trial``, ``state`` and ``stopped_by`` (the trial's, as in
    :func:`trials_frame`), ``kind``, ``step`` (epoch; a final value's is its last reported
    epoch), ``time`` (unix s), ``elapsed_s`` (s since the study's first trial started),
    ``time_estimated`` (no epoch end time was recorded: placed pro rata over the trial's
    duration), ``value``, ``best``, ``best_trial``, ``best_step``, ``improved`` (this row set a
    new ``best``), ``best_complete``, ``best_complete_trial``, ``improved_complete``,
    ``epochs_spent`` and ``device_seconds_spent`` (compute spent by all trials up to then;
    epochs count ``epoch_end_times``, pro rata over a trial's duration where they are
    missing).

    Example::

        >>> inc = incumbent_frame(study)  # doctest: +SKIP
        >>> inc.loc[inc["improved"], ["elapsed_s", "best", "best_trial"]]  # doctest: +SKIP
        >>> inc.loc[inc["improved_complete"], ["elapsed_s", "best_complete"]]  # doctest: +SKIP
    """
    return _incumbent_frame(_snapshot(study))


def _rungs_frame(snap: _Snapshot) -> pd.DataFrame:
    trials = {t.number: t for t in snap.trials}
    top: dict[tuple[int, int], int] = {}  # (bracket, trial) -> its highest recorded rung
    for bracket, rung, number, _ in snap.records:
        top[(bracket, number)] = max(rung, top.get((bracket, number), rung))
    rows = []
    for bracket, rung, number, value in sorted(snap.records):
        trial = trials.get(number)
        if trial is None:  # a record of a trial the study no longer lists: nothing to say
            continue
        step = next((s for s in trial.steps if s >= rung), None)  # the report that reached it
        last = max(trial.steps, default=None)
        if step is not None and last is not None and last > step:
            outcome = "promoted"
        elif trial.stopped_by == "pruner" and rung == top[(bracket, number)]:
            outcome = "pruned"
        elif trial.state == "RUNNING":
            outcome = "continuing"
        else:
            outcome = "ended"
        rows.append({
            "bracket": bracket, "rung": rung, "trial": number, "value": value, "step": step,
            "state": trial.state, "stopped_by": trial.stopped_by, "outcome": outcome,
        })
    frame = pd.DataFrame(rows, columns=RUNG_COLUMNS)
    for name in ("bracket", "rung", "trial"):
        frame[name] = frame[name].astype("int64")
    frame["step"] = frame["step"].astype("Int64")
    frame["value"] = frame["value"].astype("float64")
    return frame


def rungs_frame(study: optuna.Study) -> pd.DataFrame:
    """The pruner's rung records, one row per trial per rung it reached, with the outcome.

    Read from what :class:`~lightning_hpo.ASHAPruner` and
    :class:`~lightning_hpo.HyperbandPruner` store in the study (the value a trial had when it
    first reached a rung, in its own bracket); empty for other studies. Nothing is recomputed
    from the config: a Hyperband trial appears only at the rungs of its bracket where a
    decision was made for it.

    Columns: ``bracket``, ``rung`` (epochs), ``trial``, ``value`` (what the decision compared),
    ``step`` (the epoch whose report reached the rung), ``state`` and ``stopped_by`` (the
    trial's, as in :func:`trials_frame`), and ``outcome``: ``promoted`` (it reported a later
    epoch), ``pruned`` (the pruner stopped it here), ``continuing`` (RUNNING, let through, no
    later epoch yet) or ``ended`` (it ended at that report for another reason: COMPLETE, FAIL,
    or stopped by the study's budget).

    Example::

        >>> rungs = rungs_frame(study)  # doctest: +SKIP
        >>> rungs.groupby(["bracket", "rung"])["outcome"].value_counts()  # doctest: +SKIP
    """
    return _rungs_frame(_snapshot(study))


def _summarize(snap: _Snapshot) -> dict[str, Any]:
    info = snap.info
    counts = {state: snap.counts.get(state, 0) for state in STATES}
    counts.update({k: v for k, v in snap.counts.items() if k not in counts})
    ranked = _ranked(snap)
    best = ranked[0] if ranked else None
    found = None if best is None else best.best(info)
    sign = 1.0 if info.direction == "minimize" else -1.0
    finals = {t.number: t.final_value for t in snap.trials
              if t.final_value is not None and math.isfinite(t.final_value)}
    done = None  # the best COMPLETE trial by its final value
    if finals:
        number = min(finals, key=lambda n: (sign * finals[n], n))
        done = next(t for t in snap.trials if t.number == number)
    ends = [t.busy_until(snap.horizon) for t in snap.trials]
    t0 = snap.t0
    slots = {(t.frozen.user_attrs.get(ATTR.HOST), t.frozen.user_attrs.get(ATTR.SLOT))
             for t in snap.trials if t.frozen.user_attrs.get(ATTR.SLOT) is not None}
    device_seconds = 0.0
    for trial in snap.trials:
        if trial.start is not None and trial.end is not None:
            device_seconds += (trial.end - trial.start) * trial.devices
    return {
        "study": info.name,
        "metric": info.metric,
        "direction": info.direction,
        "n_trials": sum(snap.counts.values()),
        "counts": counts,
        "best_trial": None if best is None else best.number,
        "best_value": None if found is None else found[0],
        "best_step": None if found is None else found[1],
        "best_state": None if best is None else best.state,
        "best_stopped_by": None if best is None else best.stopped_by,
        "best_stop_reason": None if best is None else best.stop_reason,
        "best_params": {} if best is None else dict(best.frozen.params),
        "best_complete_trial": None if done is None else done.number,
        "best_complete_value": None if done is None else done.final_value,
        "best_complete_params": {} if done is None else dict(done.frozen.params),
        "best_complete_epochs": None if done is None else done.epochs,
        "epochs": sum(t.epochs for t in snap.trials),
        "device_seconds": device_seconds,
        "devices_unknown": sum(1 for t in snap.trials if not t.devices_known),
        "unfinished": sum(1 for t in snap.trials if t.end is None),
        "wall_clock_s": None if t0 is None or not any(e is not None for e in ends)
        else max(e for e in ends if e is not None) - t0,
        "slots": len(slots),
    }


def summarize(study: optuna.Study) -> dict[str, Any]:
    """Counts by state, the best value observed, the best COMPLETE trial and the compute spent.

    The headline best is the best value any trial reported at any epoch, whatever its state
    (the first row of :func:`trials_frame`'s ranking); the best COMPLETE trial by its final
    value comes beside it.

    Keys: ``study``, ``metric``, ``direction``, ``n_trials`` (WAITING included), ``counts``
    (state name -> trials); the best observed: ``best_value``, ``best_trial``, ``best_step``
    (the epoch it was reported at), ``best_state`` (``COMPLETE``, ``PRUNED``, ``FAIL`` or
    ``RUNNING``), ``best_stopped_by`` (for PRUNED: ``pruner``, or ``budget`` when the
    study's budget stopped it), ``best_stop_reason``, ``best_params``;
    the best COMPLETE trial: ``best_complete_trial``, ``best_complete_value``,
    ``best_complete_params``, ``best_complete_epochs`` (all ``None``/``{}`` when there is
    none); ``epochs`` (completed, all trials), ``device_seconds`` (sum of (end - start) x devices
    over finished trials), ``devices_unknown`` (trials counted as 1 device for want of a
    ``device`` attr), ``unfinished`` (RUNNING trials, left out of ``device_seconds``),
    ``wall_clock_s`` (first start to the latest time recorded) and ``slots``.

    Example::

        >>> s = summarize(study)  # doctest: +SKIP
        >>> s["counts"]["PRUNED"], s["epochs"], round(s["device_seconds"])  # doctest: +SKIP
        (25, 131, 318)
        >>> s["best_value"], s["best_trial"], s["best_step"], s["best_state"]  # doctest: +SKIP
        (0.0278, 12, 3, 'PRUNED')
    """
    return _summarize(_snapshot(study))


def _limitations(snap: _Snapshot) -> list[str]:
    notes = []
    info, trials = snap.info, snap.trials
    observed = _observations(snap)
    if not any(math.isfinite(o.value) for o in observed):
        notes.append("incumbent trajectory: no value reported yet")
    elif not any(o.kind == "final" for o in observed):
        notes.append("incumbent trajectory: no COMPLETE trial yet (best reported value only)")
    estimated = sum(1 for o in observed if o.estimated)
    if estimated:
        notes.append(f"incumbent trajectory: {estimated} value(s) without an epoch end time "
                     "placed pro rata over their trial's duration")
    with_values = [t for t in trials if t.steps]
    if not with_values:
        notes.append("learning curves and rungs: no intermediate values reported")
    else:
        untimed = [t for t in with_values if any(x is None for x in t.times)]
        running = [t for t in untimed if t.state == "RUNNING" and t.timing == "launcher"]
        others = len(untimed) - len(running)
        if len(untimed) == len(with_values):
            notes.append("learning curves over wall-clock: no `epoch_end_times` "
                         "(drawn against epochs)")
        elif others:
            notes.append(f"learning curves: {others} trial(s) without `epoch_end_times` "
                         "left out")
        if running and len(untimed) < len(with_values):
            notes.append(f"learning curves: {len(running)} RUNNING trial(s) not drawn yet "
                         "(the launcher writes epoch times when a trial ends)")
        if not info.rungs:
            why = "no pruner" if info.pruner == "none" else "no pruner settings in the study"
            notes.append(f"rung levels: {why} (final epochs shown)")
        elif not snap.records and any(_decided(t, info) for t in with_values):
            notes.append("rungs: the study holds no rung records of the pruner (promotions "
                         "and prunings not drawn)")
    slotted = [t for t in trials if isinstance(t.frozen.user_attrs.get(ATTR.SLOT), int)]
    if not slotted:
        notes.append("worker timeline: no `slot` attrs")
    elif len(slotted) < len(trials):
        notes.append(f"worker timeline: {len(trials) - len(slotted)} trial(s) without `slot` "
                     "left out")
    unknown = sum(1 for t in trials if not t.devices_known)
    if unknown:
        notes.append(f"compute: {unknown} trial(s) without a `device` attr counted as 1 device")
    return notes


def _decided(trial: _Trial, info: StudyInfo) -> bool:
    """Whether the pruner must have recorded a decision for the trial (it passed a rung)."""
    if trial.bracket is None or not 0 <= trial.bracket < len(info.brackets):
        return False
    levels = info.brackets[trial.bracket]
    return any(level < levels[-1] and level <= max(trial.steps) for level in levels)


def limitations(study: optuna.Study) -> list[str]:
    """What the report cannot draw or count for this study, one short phrase each.

    Empty for a study the launcher made and finished; for a plain Optuna study e.g.
    ``["learning curves over wall-clock: no `epoch_end_times` (drawn against epochs)",
    "worker timeline: no `slot` attrs", ...]``.

    Example::

        >>> "; ".join(limitations(study))  # doctest: +SKIP
    """
    return _limitations(_snapshot(study))


# ------------------------------------------------------------------------------------------
# Comparing studies.
# ------------------------------------------------------------------------------------------
def _first_reaching(inc: pd.DataFrame, target: float, info: StudyInfo) -> pd.Series | None:
    """The first incumbent row whose ``best`` is at least as good as ``target``."""
    best = inc["best"].to_numpy(float)
    with np.errstate(invalid="ignore"):  # NaN before the first finite value: never reached
        reached = best <= target if info.direction == "minimize" else best >= target
    hits = np.flatnonzero(reached)
    return None if hits.size == 0 else inc.iloc[int(hits[0])]


def _labels(
    studies: Sequence[optuna.Study] | Mapping[str, optuna.Study],
) -> dict[str, optuna.Study]:
    if isinstance(studies, Mapping):
        return dict(studies)
    out: dict[str, optuna.Study] = {}
    for study in studies:
        label, k = study.study_name, 2
        while label in out:
            label, k = f"{study.study_name} ({k})", k + 1
        out[label] = study
    return out


def _compare(snaps: Mapping[str, _Snapshot]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pairs frame, long incumbent frame with a ``study`` column)."""
    directions = {s.info.direction for s in snaps.values()}
    if len(directions) > 1:
        which = ", ".join(f"{k}: {s.info.direction}" for k, s in snaps.items())
        raise ConfigError("compare", f"the studies optimise in different directions ({which})")
    incs = {label: _incumbent_frame(snap) for label, snap in snaps.items()}
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
            assert own is not None
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


def compare(studies: Sequence[optuna.Study] | Mapping[str, optuna.Study]) -> pd.DataFrame:
    """For each study, the time and compute it took to reach every other study's final best.

    One row per ordered pair (``study``, ``target``): ``target_best`` (the best value the
    target reported, at any epoch of any trial), ``reached``, ``time_s`` (s from the study's
    first trial start until any of its trials reported a value at least as good, as
    :func:`incumbent_frame`'s ``best``), ``epochs`` and ``device_seconds`` (compute spent by
    then),
    ``target_time_s`` and ``target_epochs`` (what the target itself needed to reach its best),
    and ``time_speedup`` = ``target_time_s / time_s`` and ``epochs_speedup`` =
    ``target_epochs / epochs`` (above 1: this study got there sooner or cheaper). Values are
    NaN where the study never reached the target.

    Args:
        studies: the studies (labelled by name, ``name (2)`` on a clash), or a mapping
            label -> study.

    Raises:
        ConfigError: ``compare`` when the directions differ or a study has no finite value.

    Example::

        >>> asha = load("runs/asha.journal")  # doctest: +SKIP
        >>> rs = load("runs/random.journal")  # doctest: +SKIP
        >>> compare([asha, rs])[["study", "target", "time_s", "time_speedup"]]  # doctest: +SKIP
    """
    labelled = _labels(studies)
    if len(labelled) < 2:
        raise ConfigError("compare", f"needs at least 2 studies, got {len(labelled)}")
    return _compare({label: _snapshot(s) for label, s in labelled.items()})[0]
