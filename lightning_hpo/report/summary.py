"""The study in a few numbers and words: counts, the best values, compute spent, and what the
report cannot draw for it.

Both functions take an Optuna study (read on the spot) or a
:class:`~lightning_hpo.report.StudySnapshot`.

Example::

    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    >>> study.optimize(lambda trial: trial.suggest_float("x", 0.0, 1.0), n_trials=4)
    >>> s = summarize(study)
    >>> s["counts"]["COMPLETE"], s["best_value"] == study.best_value, s["slots"]
    (4, True, 0)
    >>> for note in limitations(study):  # what a plain Optuna study lacks
    ...     print(note)
    learning curves and rungs: no intermediate values reported
    worker timeline: no `slot` attrs
    compute: 4 trial(s) without a `device` attr counted as 1 device
    >>> two = optuna.create_study(directions=["minimize", "maximize"])
    >>> for point in [(0.1, 0.7), (0.2, 0.9), (0.3, 0.8)]:
    ...     _ = two.tell(two.ask(), list(point))
    >>> s = summarize(two)
    >>> s["pareto_complete_trials"], s["reference"], round(s["hypervolume_complete"], 4)
    ([0, 1], (0.32, 0.68), 0.0284)
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from lightning_hpo.pareto import hypervolume
from lightning_hpo.report.info import StudyInfo
from lightning_hpo.report.snapshot import STATES, STATUSES, Source, StudySnapshot, TrialRecord
from lightning_hpo.schema import ATTR, as_count, as_text

__all__ = ["limitations", "summarize"]


def summarize(source: Source) -> dict[str, Any]:
    """Counts by state, the best value observed, the best COMPLETE trial and the compute spent.

    The headline best is the best value any trial reported at any epoch, whatever its state
    (the first of :attr:`StudySnapshot.ranked <lightning_hpo.report.StudySnapshot.ranked>`,
    as :func:`~lightning_hpo.report.trials_frame` ranks them); the best COMPLETE trial by its
    final value comes beside it.

    Keys: ``study``, ``metric``, ``direction``, ``n_trials`` (WAITING included), ``counts``
    (Optuna's state name -> trials: a paused trial counts as RUNNING), ``paused`` (how many of
    the RUNNING trials wait between two segments); the best observed: ``best_value``,
    ``best_trial``, ``best_step`` (the epoch it was reported at), ``best_state``
    (``COMPLETE``, ``PRUNED``, ``FAIL``, ``RUNNING`` or ``PAUSED``), ``best_stopped_by`` (for
    PRUNED: ``pruner``, or ``budget`` when the study's budget stopped it),
    ``best_stop_reason``, ``best_params``;
    the best COMPLETE trial: ``best_complete_trial``, ``best_complete_value``,
    ``best_complete_params``, ``best_complete_epochs`` (all ``None``/``{}`` when there is
    none); ``epochs`` (trained, all trials, epochs retrained after a crash or from scratch
    included; in a study by steps, each trial's steps up to its last report, as
    ``best_complete_epochs`` and ``best_step`` count steps), ``device_seconds`` (sum of s x
    devices over every ended training segment: a trial trained in one go counts (end -
    start), a paused trial its segments so far, never its pauses), ``devices_unknown``
    (trials counted as 1 device for want of a ``device`` attr),
    ``unfinished`` (trials training now, whose segment in flight is left out of
    ``device_seconds``), ``wall_clock_s`` (first start to the latest time recorded) and
    ``slots``; ``metrics`` and ``directions`` (one per objective).

    With several objectives there is no single best: the ``best_*`` keys are ``None`` (``{}``)
    and these say where the Pareto front stands (:mod:`lightning_hpo.report.fronts` states the
    rules): ``pareto_complete_trials`` (the COMPLETE trials on the front of final values),
    ``pareto_trials`` (the trials with a point on the front of every value reported at any
    epoch), ``reference`` (the hypervolume's reference point,
    :attr:`StudySnapshot.reference <lightning_hpo.report.StudySnapshot.reference>`),
    ``hypervolume`` (of every value reported at any epoch) and ``hypervolume_complete`` (of
    the COMPLETE trials' final values); with one objective they are ``None``.

    Example::

        >>> s = summarize(study)  # doctest: +SKIP
        >>> s["counts"]["PRUNED"], s["epochs"], round(s["device_seconds"])  # doctest: +SKIP
        (25, 131, 318)
        >>> s["best_value"], s["best_trial"], s["best_step"], s["best_state"]  # doctest: +SKIP
        (0.0278, 12, 3, 'PRUNED')
    """
    snap = StudySnapshot.of(source)
    info = snap.info
    counts = {state: snap.counts.get(state, 0) for state in STATES}
    counts.update({k: v for k, v in snap.counts.items() if k not in counts})
    ranked = () if info.several else snap.ranked
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
    slots = {(as_text(t.attrs.get(ATTR.HOST)), as_count(t.attrs.get(ATTR.SLOT)))
             for t in snap.trials if as_count(t.attrs.get(ATTR.SLOT)) is not None}
    slots |= {(s.host, s.slot) for t in snap.trials for s in t.segments if s.slot is not None}
    device_seconds = sum(t.device_seconds or 0.0 for t in snap.trials)
    return {
        "study": info.name,
        "metric": info.metric,
        "direction": info.direction,
        "n_trials": sum(snap.counts.values()),
        "counts": counts,
        "paused": len(snap.paused),
        "best_trial": None if best is None else best.number,
        "best_value": None if found is None else found[0],
        "best_step": None if found is None else found[1],
        "best_state": None if best is None else best.status,
        "best_stopped_by": None if best is None else best.stopped_by,
        "best_stop_reason": None if best is None else best.stop_reason,
        "best_params": {} if best is None else dict(best.params),
        "best_complete_trial": None if done is None else done.number,
        "best_complete_value": None if done is None else done.final_value,
        "best_complete_params": {} if done is None else dict(done.params),
        "best_complete_epochs": None if done is None else done.epochs,
        "epochs": sum(t.epochs_trained for t in snap.trials),
        "device_seconds": device_seconds,
        "devices_unknown": sum(1 for t in snap.trials if not t.devices_known),
        "unfinished": sum(1 for t in snap.trials if t.in_flight),
        "wall_clock_s": None if t0 is None or not any(e is not None for e in ends)
        else max(e for e in ends if e is not None) - t0,
        "slots": len(slots),
        "metrics": info.metrics,
        "directions": info.directions,
        **_pareto_summary(snap),
    }


def _pareto_summary(snap: StudySnapshot) -> dict[str, Any]:
    """:func:`summarize`'s keys on the Pareto front (``None`` with one objective)."""
    keys = ("pareto_complete_trials", "pareto_trials", "reference", "hypervolume",
            "hypervolume_complete")
    if not snap.info.several:
        return dict.fromkeys(keys)
    reference, minimize = snap.reference, snap.info.minimize
    finals = [t.final_values for t in snap.trials if t.final_values is not None]
    return dict(zip(keys, (
        snap.fronts.pareto, snap.fronts.pareto_any_epoch, reference,
        None if reference is None else hypervolume(snap.points, reference, minimize),
        None if reference is None else hypervolume(finals, reference, minimize),
    ), strict=True))


def limitations(source: Source) -> list[str]:
    """What the report cannot draw or count for this study, one short phrase each.

    Empty for a study the launcher made and finished; for a plain Optuna study e.g.
    ``["learning curves over wall-clock: no `epoch_end_times` (drawn against epochs)",
    "worker timeline: no `slot` attrs", ...]``.

    Example::

        >>> "; ".join(limitations(study))  # doctest: +SKIP
    """
    snap = StudySnapshot.of(source)
    notes = []
    info, trials = snap.info, snap.trials
    observed = snap.observations
    trajectory = "hypervolume" if info.several else "incumbent trajectory"
    if not any(math.isfinite(o.value) for o in observed) or (info.several and not snap.points):
        notes.append(f"{trajectory}: no value reported yet")
    elif not any(o.kind == "final" for o in observed):
        best = f"values at any {info.resource}" if info.several else "best reported value"
        notes.append(f"{trajectory}: no COMPLETE trial yet ({best} only)")
    estimated = sum(1 for o in observed if o.estimated)
    if estimated:
        when = "an epoch end time" if info.resource == "epoch" else "a recorded time"
        notes.append(f"{trajectory}: {estimated} value(s) without {when} placed pro rata over "
                     "their trial's duration")
    with_values = [t for t in trials if t.steps]
    if not with_values:
        what = "no `objective_values` reported" if info.several else (
            "no intermediate values reported")
        notes.append(f"learning curves and rungs: {what}")
    else:
        untimed = [t for t in with_values if any(x is None for x in t.times)]
        running = [t for t in untimed if t.state == "RUNNING" and t.timing == "launcher"]
        others = len(untimed) - len(running)
        if len(untimed) == len(with_values):
            notes.append("learning curves over wall-clock: no `epoch_end_times` "
                         f"(drawn against {info.units})")
        elif others:
            notes.append(f"learning curves: {others} trial(s) without `epoch_end_times` "
                         "left out")
        if running and len(untimed) < len(with_values):
            by_status = Counter(t.status for t in running)  # RUNNING, or PAUSED
            words = " and ".join(f"{n} {status}" for status, n in sorted(
                by_status.items(), key=lambda item: STATUSES.index(item[0])))
            notes.append(f"learning curves: {words} trial(s) not drawn yet "
                         "(the launcher writes epoch times when a trial ends)")
        if not info.rungs:
            why = "no pruner" if info.pruner == "none" else "no pruner settings in the study"
            notes.append(f"rung levels: {why} (final {info.units} shown)")
        elif not (snap.records or snap.vector_records) and not info.pauses and any(
                _decided(t, info) for t in with_values):
            # a pausing schedule keeps no records: its decisions are in the trials themselves
            notes.append("rungs: the study holds no rung records of the pruner (promotions "
                         "read from the learning curves)")
    slotted = [t for t in trials if any(s.slot is not None for s in t.spans)]
    if not slotted:
        notes.append("worker timeline: no `slot` attrs")
    elif len(slotted) < len(trials):
        notes.append(f"worker timeline: {len(trials) - len(slotted)} trial(s) without `slot` "
                     "left out")
    unknown = sum(1 for t in trials if not t.devices_known)
    if unknown:
        notes.append(f"compute: {unknown} trial(s) without a `device` attr counted as 1 device")
    return notes


def _decided(trial: TrialRecord, info: StudyInfo) -> bool:
    """Whether the pruner must have recorded a decision for the trial (it passed a rung)."""
    if trial.bracket is None or not 0 <= trial.bracket < len(info.brackets):
        return False
    levels = info.brackets[trial.bracket]
    return any(level < levels[-1] and level <= max(trial.steps) for level in levels)
