"""The report's tables: one pandas DataFrame per question, read from any Optuna study.

Everything here reads the study and writes nothing to it. Studies made by the launcher carry
per-trial timing attributes (:class:`lightning_hpo.launch.study.ATTR`); for a plain Optuna study
the tables fall back on Optuna's ``datetime_start``/``datetime_complete`` and leave what cannot
be known empty (NaN), which :func:`limitations` spells out.

Times are unix seconds (``*_time``) or seconds since the study's first trial started
(``*_s``, "elapsed"). Trials still WAITING in the queue (never started) are left out of every
table and counted by :func:`summarize`.

Example::

    from lightning_hpo.report import load, trials_frame, curves_frame, incumbent_frame

    study = load("runs/quickstart.journal")           # the storage's only study
    trials = trials_frame(study)                      # one row per trial
    trials.nsmallest(3, "value")[["trial", "value", "epochs", "params_lr"]]
    curves = curves_frame(study)                      # one row per reported epoch
    incumbent_frame(study)[["elapsed_s", "best"]]     # best-so-far over wall-clock
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import optuna
import pandas as pd
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo.config import parse_config
from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.study import ATTR, CONFIG_ATTR
from lightning_hpo.rungs import rung_levels
from lightning_hpo.storage import is_rdb, mask, mask_text, open_storage

__all__ = [
    "STATES",
    "StudyInfo",
    "compare",
    "curves_frame",
    "incumbent_frame",
    "limitations",
    "load",
    "load_ref",
    "study_info",
    "summarize",
    "trials_frame",
]

_logger = logging.getLogger(__name__)

#: Trial states in the order the report lists them.
STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")

TRIAL_COLUMNS = [
    "rank", "trial", "state", "value", "last_value", "epochs", "duration_s", "start_time",
    "end_time", "start_s", "end_s", "slot", "host", "device", "devices", "device_seconds",
]
CURVE_COLUMNS = ["trial", "state", "step", "value", "time", "elapsed_s", "trial_elapsed_s"]
INCUMBENT_COLUMNS = [
    "trial", "time", "elapsed_s", "value", "best", "improved", "epochs_spent",
    "device_seconds_spent",
]
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
    if is_rdb(storage) and storage.startswith("sqlite:///") and storage != "sqlite:///:memory:":
        # RDBStorage would create an empty database at a mistyped path: refuse instead.
        path = Path(storage.removeprefix("sqlite:///"))
        if not path.is_file():
            raise ConfigError("storage", f"cannot open {mask(storage)}: no SQLite file at {path}")
    return open_storage(storage, create=False)


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
        rungs: rung levels in epochs (empty when there is no pruner or it is unknown).
        max_epochs: epochs a trial may train (``None`` when unknown).
        config: the launcher config (storage masked), ``{}`` for a plain Optuna study.
    """

    name: str
    direction: Literal["minimize", "maximize"]
    metric: str = "value"
    pruner: str | None = None
    rungs: tuple[int, ...] = ()
    max_epochs: int | None = None
    config: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def from_launcher(self) -> bool:
        """Whether the launcher created the study (its config is stored with it)."""
        return bool(self.config)

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is at least as good as ``b`` in this study's direction."""
        return a <= b if self.direction == "minimize" else a >= b


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
    rungs: tuple[int, ...] = ()
    if pruner in ("asha", "hyperband") and maximum is not None:
        try:
            rungs = tuple(rung_levels(minimum, factor, maximum))
        except ValueError as error:
            _logger.warning("study %s: cannot compute rungs: %s", study.study_name, error)
    return StudyInfo(
        study.study_name, direction, metric, pruner, rungs, max_epochs, raw  # type: ignore[arg-type]
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

    @property
    def number(self) -> int:
        return self.frozen.number

    @property
    def last_value(self) -> float | None:
        return self.values[-1] if self.values else None

    def busy_until(self, horizon: float) -> float | None:
        """The trial's end, or for a RUNNING trial the study's ``horizon`` (unix s)."""
        if self.start is None:
            return None
        return self.end if self.end is not None else max(horizon, self.start)


class _Spending:
    """Compute spent by all trials up to a time: epochs and device-seconds, vectorised.

    Epochs count each trial's ``epoch_end_times``; a trial without them is credited pro rata
    over its duration (its reported epochs spread evenly from start to end).
    """

    def __init__(self, trials: Sequence[_Trial], horizon: float) -> None:
        started = [t for t in trials if t.start is not None]
        timed = [bool(t.times) and all(x is not None for x in t.times) for t in started]
        ends = [x for t, ok in zip(started, timed, strict=True) if ok for x in t.times]
        self._epoch_ends = np.sort(np.array(ends, dtype=float))
        rows = [(t.start, t.busy_until(horizon), t.devices, t.epochs) for t in started]
        array = np.array(rows, dtype=float).reshape(-1, 4)
        self._start, self._stop, self._devices = array[:, 0], array[:, 1], array[:, 2]
        self._untimed = ~np.array(timed, dtype=bool)
        self._epochs = array[:, 3]

    def epochs_at(self, t: float) -> int:
        """Epochs completed by unix time ``t``, all trials together."""
        counted = int(np.searchsorted(self._epoch_ends, t, side="right"))
        start, stop = self._start[self._untimed], self._stop[self._untimed]
        epochs = self._epochs[self._untimed]
        span = np.maximum(stop - start, 1e-12)
        share = np.clip((t - start) / span, 0.0, 1.0)
        share[t >= stop] = 1.0
        return counted + int(np.floor(epochs * share + 1e-9).sum())

    def device_seconds_at(self, t: float) -> float:
        """Device-seconds spent by unix time ``t``, all trials together."""
        busy = np.clip(np.minimum(t, self._stop) - self._start, 0.0, None)
        return float((busy * self._devices).sum())


@dataclass
class _Snapshot:
    info: StudyInfo
    trials: list[_Trial]  # started trials, by number
    counts: Counter[str]
    horizon: float  # unix s: the latest time the study recorded (a start, an end, an epoch)

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


def _resolve(frozen: FrozenTrial) -> _Trial:
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
    return _Trial(
        frozen, frozen.state.name, start, end, timing, epochs, devices or 1,
        devices is not None, steps, values, times,
    )


def _snapshot(study: optuna.Study) -> _Snapshot:
    info = study_info(study)
    frozen = study.get_trials(deepcopy=False)
    counts = Counter(t.state.name for t in frozen)
    trials = [_resolve(t) for t in frozen if t.state != TrialState.WAITING]
    stamps = [x for t in trials for x in (t.start, t.end, *t.times) if x is not None]
    horizon = max(stamps) if stamps else time.time()
    return _Snapshot(info, sorted(trials, key=lambda t: t.number), counts, horizon)


def _check_not_empty(snap: _Snapshot) -> None:
    if not snap.trials:
        waiting = snap.counts.get("WAITING", 0)
        why = f"no started trial ({waiting} waiting in the queue)" if waiting else "no trials"
        raise ConfigError("study", f"'{snap.info.name}' has {why}; nothing to report yet")


# ------------------------------------------------------------------------------------------
# Tables.
# ------------------------------------------------------------------------------------------
_UNRANKED = 3


def _order_key(trial: _Trial, info: StudyInfo) -> tuple[int, int, float]:
    """Best first: COMPLETE by value; then PRUNED and RUNNING, then FAIL, each by epochs
    reached (more first) and last reported value; trials with no value are unranked."""
    sign = 1.0 if info.direction == "minimize" else -1.0
    value = trial.frozen.value if trial.state == "COMPLETE" else trial.last_value
    if value is None or not math.isfinite(value):
        return (_UNRANKED, 0, math.inf)
    group = {"COMPLETE": 0, "FAIL": 2}.get(trial.state, 1)
    return (group, -trial.epochs, sign * value)


def _trials_frame(snap: _Snapshot) -> pd.DataFrame:
    t0 = snap.t0
    ranked = sorted(snap.trials, key=lambda t: _order_key(t, snap.info))
    rank = {
        t.number: i + 1 for i, t in enumerate(ranked) if _order_key(t, snap.info)[0] < _UNRANKED
    }
    param_names = sorted({name for t in snap.trials for name in t.frozen.params})
    rows = []
    for trial in snap.trials:
        attrs = trial.frozen.user_attrs
        duration = None if trial.start is None or trial.end is None else trial.end - trial.start
        row: dict[str, Any] = {
            "rank": rank.get(trial.number),
            "trial": trial.number,
            "state": trial.state,
            "value": trial.frozen.value if trial.state == "COMPLETE" else None,
            "last_value": trial.last_value,
            "epochs": trial.epochs,
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
    for name in ("rank", "slot"):
        frame[name] = frame[name].astype("Int64")
    for name in ("value", "last_value", "duration_s", "start_time", "end_time", "start_s",
                 "end_s", "device_seconds"):
        frame[name] = frame[name].astype("float64")
    return frame


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per started trial (WAITING trials are left out).

    Columns: ``rank`` (1 = best: COMPLETE trials by value, then PRUNED and RUNNING, then FAIL,
    each by epochs reached and last reported value; empty for trials that reported nothing),
    ``trial`` (number), ``state``, ``value`` (final, COMPLETE only), ``last_value`` (last
    intermediate value), ``epochs`` (completed), ``duration_s`` (NaN while RUNNING),
    ``start_time`` and ``end_time`` (unix s), ``start_s`` and ``end_s`` (s since the study's
    first trial started), ``slot``, ``host``, ``device``, ``devices`` (count; 1 when unknown),
    ``device_seconds`` (duration x devices, NaN while RUNNING), ``params_<name>`` per
    hyperparameter, ``fail_reason`` and ``timing`` (``launcher`` attrs, ``optuna`` datetimes,
    or ``none``).

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
    for name in ("value", "time", "elapsed_s", "trial_elapsed_s"):
        frame[name] = frame[name].astype("float64")
    return frame


def curves_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per reported epoch: the learning curves.

    Columns: ``trial``, ``state`` (the trial's final state), ``step`` (epochs completed, from
    1), ``value`` (the metric), ``time`` (unix s when the epoch ended), ``elapsed_s`` (s since
    the study's first trial started) and ``trial_elapsed_s`` (s since the trial started).
    The times are NaN where the trial has no ``epoch_end_times`` (plain Optuna studies, trials
    still running).

    Example::

        >>> curves = curves_frame(study)  # doctest: +SKIP
        >>> curves.groupby("trial")["step"].max()  # epochs each trial reached  # doctest: +SKIP
    """
    return _curves_frame(_snapshot(study))


def _incumbent_frame(snap: _Snapshot) -> pd.DataFrame:
    t0 = snap.t0
    done = [
        t for t in snap.trials
        if t.state == "COMPLETE" and t.end is not None and t.frozen.value is not None
        and math.isfinite(t.frozen.value)
    ]
    done.sort(key=lambda t: (t.end, t.number))
    spending = _Spending(snap.trials, snap.horizon)
    rows, best = [], None
    for trial in done:
        value = float(trial.frozen.value)  # type: ignore[arg-type]
        improved = best is None or (value != best and snap.info.better(value, best))
        best = value if improved else best
        assert trial.end is not None and t0 is not None
        rows.append({
            "trial": trial.number,
            "time": trial.end,
            "elapsed_s": trial.end - t0,
            "value": value,
            "best": best,
            "improved": improved,
            "epochs_spent": spending.epochs_at(trial.end),
            "device_seconds_spent": spending.device_seconds_at(trial.end),
        })
    frame = pd.DataFrame(rows, columns=INCUMBENT_COLUMNS)
    frame["trial"] = frame["trial"].astype("int64")
    frame["improved"] = frame["improved"].astype("bool")
    frame["epochs_spent"] = frame["epochs_spent"].astype("int64")
    for name in ("time", "elapsed_s", "value", "best", "device_seconds_spent"):
        frame[name] = frame[name].astype("float64")
    return frame


def incumbent_frame(study: optuna.Study) -> pd.DataFrame:
    """The incumbent trajectory: best final value so far, one row per COMPLETE trial.

    Rows are in order of the trials' end times. Columns: ``trial``, ``time`` (unix s when it
    ended), ``elapsed_s`` (s since the study's first trial started), ``value``, ``best``
    (best-so-far), ``improved`` (this trial set a new best), ``epochs_spent`` and
    ``device_seconds_spent`` (compute spent by all trials up to then; epochs count
    ``epoch_end_times``, pro rata over a trial's duration where they are missing).

    Example::

        >>> inc = incumbent_frame(study)  # doctest: +SKIP
        >>> inc.loc[inc["improved"], ["elapsed_s", "best"]]  # doctest: +SKIP
    """
    return _incumbent_frame(_snapshot(study))


def _summarize(snap: _Snapshot) -> dict[str, Any]:
    info = snap.info
    counts = {state: snap.counts.get(state, 0) for state in STATES}
    counts.update({k: v for k, v in snap.counts.items() if k not in counts})
    ranked = sorted(snap.trials, key=lambda t: _order_key(t, info))
    best = next((t for t in ranked if t.state == "COMPLETE" and _order_key(t, info)[0] == 0),
                None)
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
        "best_value": None if best is None else best.frozen.value,
        "best_params": {} if best is None else dict(best.frozen.params),
        "best_epochs": None if best is None else best.epochs,
        "epochs": sum(t.epochs for t in snap.trials),
        "device_seconds": device_seconds,
        "devices_unknown": sum(1 for t in snap.trials if not t.devices_known),
        "unfinished": sum(1 for t in snap.trials if t.end is None),
        "wall_clock_s": None if t0 is None or not any(e is not None for e in ends)
        else max(e for e in ends if e is not None) - t0,
        "slots": len(slots),
    }


def summarize(study: optuna.Study) -> dict[str, Any]:
    """Counts by state, the best trial and the compute spent, as a plain dict.

    Keys: ``study``, ``metric``, ``direction``, ``n_trials`` (WAITING included), ``counts``
    (state name -> trials), ``best_trial``, ``best_value``, ``best_params``, ``best_epochs``,
    ``epochs`` (completed, all trials), ``device_seconds`` (sum of (end - start) x devices
    over finished trials), ``devices_unknown`` (trials counted as 1 device for want of a
    ``device`` attr), ``unfinished`` (RUNNING trials, left out of ``device_seconds``),
    ``wall_clock_s`` (first start to the latest time recorded) and ``slots``.

    Example::

        >>> s = summarize(study)  # doctest: +SKIP
        >>> s["counts"]["PRUNED"], s["epochs"], round(s["device_seconds"])  # doctest: +SKIP
        (25, 131, 318)
    """
    return _summarize(_snapshot(study))


def _limitations(snap: _Snapshot) -> list[str]:
    notes = []
    info, trials = snap.info, snap.trials
    if not any(t.state == "COMPLETE" and t.end is not None for t in trials):
        notes.append("incumbent trajectory: no COMPLETE trial yet")
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
    for _, row in inc.iterrows():
        if info.better(float(row["best"]), target):
            return row
    return None


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
        if inc.empty:
            raise ConfigError("compare", f"study '{label}' has no COMPLETE trial to compare")
    finals = {label: float(inc["best"].iloc[-1]) for label, inc in incs.items()}
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

    One row per ordered pair (``study``, ``target``): ``target_best`` (the target's final best
    value), ``reached``, ``time_s`` (s from the study's first trial start until a COMPLETE
    trial was at least as good), ``epochs`` and ``device_seconds`` (compute spent by then),
    ``target_time_s`` and ``target_epochs`` (what the target itself needed to reach its best),
    and ``time_speedup`` = ``target_time_s / time_s`` and ``epochs_speedup`` =
    ``target_epochs / epochs`` (above 1: this study got there sooner or cheaper). Values are
    NaN where the study never reached the target.

    Args:
        studies: the studies (labelled by name, ``name (2)`` on a clash), or a mapping
            label -> study.

    Raises:
        ConfigError: ``compare`` when the directions differ or a study has no COMPLETE trial.

    Example::

        >>> asha = load("runs/asha.journal")  # doctest: +SKIP
        >>> rs = load("runs/random.journal")  # doctest: +SKIP
        >>> compare([asha, rs])[["study", "target", "time_s", "time_speedup"]]  # doctest: +SKIP
    """
    labelled = _labels(studies)
    if len(labelled) < 2:
        raise ConfigError("compare", f"needs at least 2 studies, got {len(labelled)}")
    return _compare({label: _snapshot(s) for label, s in labelled.items()})[0]
