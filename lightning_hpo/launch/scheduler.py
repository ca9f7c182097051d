"""The launcher's scheduler: which trial a free slot trains next, to which epoch, from where.

No torch here: the supervisor uses it too. The decisions are the pure
:mod:`lightning_hpo.schedules`; this module reads the study into their
:class:`~lightning_hpo.schedules.TrialView` s, and writes back what they decide, under one lock
per study (:func:`~lightning_hpo.launch.study.study_lock` ``"schedule"``: an advisory lock on
PostgreSQL, a file lock beside a journal file or SQLite database), so that every worker of every
launcher on the study shares one schedule. All the scheduler's state is in the study:

* a trial that waits between two training segments stays RUNNING in Optuna's terms (WAITING
  would make any ``ask()`` hand it out as new) with :data:`ATTR.PAUSED
  <lightning_hpo.schema.ATTR>` set: at which epoch, with which checkpoint, and whether it must
  still reach an epoch (``target``: it was interrupted) or waits at a rung for a decision;
* the synchronous schedules' round of each trial is :data:`ATTR.ROUND <lightning_hpo.schema.ATTR>`,
  promotion-type Hyperband's bracket is :data:`~lightning_hpo.schema.BRACKET_ATTR`;
* the values at rungs are the trials' intermediate values (one per epoch).

A launcher killed with ``kill -9`` and run again therefore continues the round and resumes the
paused trials; two launchers on one PostgreSQL study share one synchronous round.

Crash resume (:func:`crashed`): a trial whose worker died goes back to the scheduler as an
interrupted trial, resumed from its last checkpoint (:data:`ATTR.RESUME_POINT
<lightning_hpo.schema.ATTR>`) on the next free slot, ``stop.max_retries`` times; then it ends FAIL
with every attempt's reason.

Example::

    scheduler = Scheduler(study, cfg)
    job = scheduler.next(owner="host:4242:1")
    if isinstance(job, Assignment):      # train job.trial to job.to_epoch from job.checkpoint
        ...
        scheduler.pause(job.trial.number, epoch=job.to_epoch, checkpoint=path, why="rung 2")
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo import schedules
from lightning_hpo._optuna import (
    backend_of,
    live_trial,
    stale_trial_ids,
    storage_of,
    trial_id_of,
)
from lightning_hpo.launch.config import Config
from lightning_hpo.launch.study import claim_trial, end_trial, study_lock
from lightning_hpo.schema import ATTR, BRACKET_ATTR

__all__ = [
    "Assignment",
    "Scheduler",
    "build_schedule",
    "close_segment",
    "close_segment_of",
    "crashed",
    "hand_back_owned",
    "interrupt",
    "is_paused",
    "open_segment",
    "owner_of",
    "trial_view",
]

_logger = logging.getLogger(__name__)

#: Seconds a worker waits before asking again when the schedule says "wait".
WAIT_SECONDS = 0.5


def build_schedule(cfg: Config) -> schedules.Schedule:
    """The config's schedule: a pausing one for ``sync_*`` and ``mode: promotion``, else
    :class:`~lightning_hpo.schedules.StopSchedule` (the pruner stops trials; only interrupted
    trials are resumed)."""
    p = cfg.pruner
    minimize = cfg.direction == "minimize"
    top = p.max_resource or cfg.max_epochs
    if p.name == "sync_sh":
        return schedules.SyncSuccessiveHalving(
            p.min_resource, top, p.reduction_factor, p.prefact, p.resume, minimize=minimize
        )
    if p.name == "sync_hyperband":
        return schedules.SyncHyperband(
            p.min_resource, top, p.reduction_factor, p.prefact, p.resume, minimize=minimize
        )
    if p.mode == "promotion" and p.name == "asha":
        return schedules.PromotionASHA(p.min_resource, top, p.reduction_factor, minimize=minimize,
                                       max_paused=cfg.checkpoint.max_paused)
    if p.mode == "promotion" and p.name == "hyperband":
        return schedules.PromotionHyperband(
            p.min_resource, top, p.reduction_factor, minimize=minimize, study_name=cfg.study,
            max_paused=cfg.checkpoint.max_paused,
        )
    return schedules.StopSchedule(cfg.max_epochs)


def is_paused(trial: FrozenTrial) -> bool:
    """True for a RUNNING trial that waits between segments (:data:`ATTR.PAUSED`)."""
    return trial.state == TrialState.RUNNING and isinstance(trial.user_attrs.get(ATTR.PAUSED), dict)


_STATES: dict[TrialState, schedules.State] = {
    TrialState.WAITING: "waiting", TrialState.RUNNING: "running",
    TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "fail",
}


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def trial_view(trial: FrozenTrial) -> schedules.TrialView:
    """What the pure schedules see of a trial."""
    attrs = trial.user_attrs
    paused = attrs.get(ATTR.PAUSED) if trial.state == TrialState.RUNNING else None
    values = {step: value for step, value in trial.intermediate_values.items()}
    group = _int_or_none(attrs.get(ATTR.ROUND))
    if group is None:
        group = _int_or_none(trial.system_attrs.get(BRACKET_ATTR))
    if isinstance(paused, dict):
        return schedules.TrialView(
            trial.number, "paused", _int_or_none(paused.get("epoch")) or 0, values, group,
            _int_or_none(paused.get("target")),
        )
    return schedules.TrialView(
        trial.number, _STATES[trial.state], max(values, default=0), values, group,
        _int_or_none(attrs.get(ATTR.TARGET)) if trial.state == TrialState.RUNNING else None,
    )


@dataclass
class Assignment:
    """A segment for a worker: train ``trial`` until ``to_epoch`` epochs are done.

    ``checkpoint`` is the file to resume from (None: from scratch); ``from_epoch`` the epochs in
    it; ``owner`` the token the worker holds for this segment (:data:`ATTR.OWNER`).
    """

    trial: optuna.Trial
    to_epoch: int
    checkpoint: str | None
    from_epoch: int
    owner: str
    resumed: bool


class Scheduler:
    """The study's schedule, shared through the storage (see the module docstring).

    Args:
        study: the opened study (the worker's).
        cfg: the validated config.
    """

    def __init__(self, study: optuna.Study, cfg: Config) -> None:
        self.study = study
        self.cfg = cfg
        self.schedule = build_schedule(cfg)
        self._storage = storage_of(study)

    def next(self, owner: str) -> Assignment | Literal["wait"] | None:
        """The next segment for a free slot; ``"wait"`` (ask again in a moment) or None (no
        work left for this study)."""
        fast = not self.cfg.pruner.pauses and self.cfg.heartbeat is None
        if fast and not self._any_paused():
            return self._start_plain(owner)  # the fast path of a stopping pruner
        with study_lock(self.cfg, self._storage, "schedule"):
            trials = self.study.get_trials(deepcopy=False)
            if self.cfg.heartbeat is not None and self._recover_lost(trials):
                trials = self.study.get_trials(deepcopy=False)
            tickets = sum(t.state == TrialState.WAITING for t in trials)
            views = [trial_view(t) for t in trials if t.state != TrialState.WAITING]
            decision = self.schedule.decide(
                views, tickets=None if self.cfg.stop.n_trials is None else tickets,
                next_number=_next_number(trials),
            )
            for number in decision.prune:
                self._prune(trials[number], decision.reasons.get(number, "not promoted"))
            job = decision.job
            if job.kind == "wait":
                return "wait"
            if job.kind == "done":
                return None
            assert job.to_epoch is not None
            if job.kind == "resume":
                assert job.trial is not None
                return self._resume(trials[job.trial], job.to_epoch, job.from_scratch, owner)
            return self._start(job.to_epoch, job.group, owner)

    def _recover_lost(self, trials: list[FrozenTrial]) -> bool:
        """Hand back the trials whose worker stopped sending heartbeats (a lost machine);
        True when there were any."""
        stale = set(stale_trial_ids(self.study))
        assert self.cfg.heartbeat is not None
        lost = False
        for frozen in trials:
            if trial_id_of(frozen) not in stale or is_paused(frozen):
                continue
            host = frozen.user_attrs.get(ATTR.HOST, "its host")
            reason = (f"no heartbeat from its worker on {host} for "
                      f"{self.cfg.heartbeat.grace_period} s (heartbeat.grace_period)")
            lost = crashed(self.study, frozen.number, reason, self.cfg) != "ended" or lost
        return lost

    # -- writing decisions -------------------------------------------------------------------
    def _any_paused(self) -> bool:
        running = self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        return any(is_paused(t) for t in running)

    def _claim(self) -> optuna.Trial | None:
        return claim_trial(self.study, self.cfg)

    def _start_plain(self, owner: str) -> Assignment | None:
        trial = self._claim()
        if trial is None:
            return None
        self._mark(trial, self.cfg.max_epochs, owner)
        return Assignment(trial, self.cfg.max_epochs, None, 0, owner, resumed=False)

    def _start(self, to_epoch: int, group: int | None, owner: str) -> Assignment | None:
        trial = self._claim()
        if trial is None:
            return None
        self._mark(trial, to_epoch, owner)
        if group is not None:
            if self.cfg.pruner.name.startswith("sync_"):
                trial.set_user_attr(ATTR.ROUND, group)
            else:
                self._storage.set_trial_system_attr(trial_id_of(trial), BRACKET_ATTR, group)
        return Assignment(trial, to_epoch, None, 0, owner, resumed=False)

    def _resume(
        self, frozen: FrozenTrial, to_epoch: int, from_scratch: bool, owner: str
    ) -> Assignment:
        paused = frozen.user_attrs.get(ATTR.PAUSED) or {}
        checkpoint = None if from_scratch else paused.get("checkpoint")
        if checkpoint is not None and not Path(checkpoint).is_file():
            _logger.warning("trial %d: checkpoint %s is gone; it retrains from scratch",
                            frozen.number, checkpoint)
            checkpoint = None
        from_epoch = int(paused.get("epoch") or 0) if checkpoint is not None else 0
        trial = live_trial(self.study, frozen.number)
        self._mark(trial, to_epoch, owner)  # the new owner before it is no longer paused
        trial.set_user_attr(ATTR.PAUSED, None)
        return Assignment(trial, to_epoch, checkpoint, from_epoch, owner, resumed=True)

    def _mark(self, trial: optuna.Trial, to_epoch: int, owner: str) -> None:
        # The owner first: from the claim on, a worker that dies is known by it (owner_of).
        trial.set_user_attr(ATTR.OWNER, owner)
        trial.set_user_attr(ATTR.TARGET, to_epoch)
        if self.cfg.heartbeat is not None:  # a resumed trial's last beat is from before its
            # pause: beat now, or another launcher takes it for lost before its worker's first
            backend_of(self.study).record_heartbeat(trial_id_of(trial))  # type: ignore[attr-defined]

    def _prune(self, frozen: FrozenTrial, reason: str) -> None:
        """End a paused trial that can no longer be promoted, and delete its checkpoint.

        The schedule decided, not the study's budget: like the pruner, it records the epoch the
        trial stopped at (``pruned_at_epoch``), which reports and the status read that way.
        """
        paused = frozen.user_attrs.get(ATTR.PAUSED) or {}
        storage, trial_id = storage_of(self.study), trial_id_of(frozen)
        if isinstance(paused.get("epoch"), int):
            storage.set_trial_user_attr(trial_id, ATTR.PRUNED_AT_EPOCH, paused["epoch"])
        storage.set_trial_user_attr(trial_id, ATTR.PAUSED, None)
        if end_trial(self.study, frozen.number, TrialState.PRUNED, reason=reason):
            _remove(paused.get("checkpoint"))
            resume_point = frozen.user_attrs.get(ATTR.RESUME_POINT)
            if isinstance(resume_point, dict):
                _remove(resume_point.get("checkpoint"))

    def pause(
        self, number: int, *, epoch: int, checkpoint: str | None, why: str,
        target: int | None = None,
    ) -> None:
        """Pause trial ``number`` with ``epoch`` epochs in ``checkpoint`` (see :func:`_pause`)."""
        _pause(self.study, number, epoch=epoch, checkpoint=checkpoint, why=why, target=target)


def _pause(
    study: optuna.Study, number: int, *, epoch: int, checkpoint: str | None, why: str,
    target: int | None,
) -> None:
    """Mark trial ``number`` paused: at a rung (``target`` None) or interrupted before
    ``target`` epochs; it stays RUNNING."""
    frozen = study.get_trials(deepcopy=False)[number]
    value = {"epoch": epoch, "checkpoint": checkpoint, "since": time.time(), "target": target,
             "why": why}
    storage_of(study).set_trial_user_attr(trial_id_of(frozen), ATTR.PAUSED, value)


def _next_number(trials: list[FrozenTrial]) -> int:
    for trial in trials:
        if trial.state == TrialState.WAITING:
            return trial.number
    return len(trials)


def _remove(path: object) -> None:
    if isinstance(path, str):
        with contextlib.suppress(OSError):
            os.remove(path)


def _resume_point(frozen: FrozenTrial) -> tuple[int, str | None]:
    point = frozen.user_attrs.get(ATTR.RESUME_POINT)
    path = point.get("checkpoint") if isinstance(point, dict) else None
    if isinstance(point, dict) and isinstance(path, str) and Path(path).is_file():
        return int(point.get("epoch") or 0), path
    return 0, None


def interrupt(study: optuna.Study, number: int, why: str, max_epochs: int) -> bool:
    """Pause a trial stopped from outside (the budget, Ctrl-C, a worker that had to be killed)
    at its last checkpoint, so the next run resumes it. Returns False when it had ended or was
    paused already."""
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state != TrialState.RUNNING or is_paused(frozen):
        return False
    epoch, checkpoint = _resume_point(frozen)
    target = _int_or_none(frozen.user_attrs.get(ATTR.TARGET)) or max_epochs
    _pause(study, number, epoch=epoch, checkpoint=checkpoint, why=why, target=target)
    return True


def crashed(
    study: optuna.Study, number: int, reason: str, cfg: Config, owner: str | None = None
) -> Literal["resumable", "failed", "ended"]:
    """A trial whose worker died: paused for resume from its last checkpoint while
    ``stop.max_retries`` allows, else ended FAIL with every attempt's reason.

    ``owner``: the dead worker's token (:data:`ATTR.OWNER`); when the trial holds another one
    now, another worker has taken it meanwhile and it is left alone.

    Returns ``"resumable"``, ``"failed"``, or ``"ended"`` when it had finished, was paused or
    has another owner.
    """
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state != TrialState.RUNNING or is_paused(frozen):
        return "ended"
    if owner is not None and frozen.user_attrs.get(ATTR.OWNER) != owner:
        return "ended"
    lost = _lost_segment(frozen)
    if lost is not None:  # its launcher died with it, unseen: close it from the study's records
        close_segment_of(study, number, lost, only_open=True)
        frozen = study.get_trials(deepcopy=False)[number]
    attempts = [str(a) for a in frozen.user_attrs.get(ATTR.ATTEMPTS) or []] + [reason]
    storage = storage_of(study)
    storage.set_trial_user_attr(trial_id_of(frozen), ATTR.ATTEMPTS, attempts)
    if len(attempts) > cfg.stop.max_retries:
        why = reason if len(attempts) == 1 else (
            f"{len(attempts)} attempts failed: " + "; ".join(
                f"{i}) {a}" for i, a in enumerate(attempts, 1)
            )
        )
        end_trial(study, number, TrialState.FAIL, reason=why)
        return "failed"
    epoch, checkpoint = _resume_point(frozen)
    target = _int_or_none(frozen.user_attrs.get(ATTR.TARGET)) or cfg.max_epochs
    _pause(study, number, epoch=epoch, checkpoint=checkpoint, target=target,
           why=f"{reason}; resumed from epoch {epoch} (retry {len(attempts)} of "
               f"{cfg.stop.max_retries})")
    return "resumable"


def owner_of(trial: FrozenTrial) -> tuple[str, int] | None:
    """``(host, worker pid)`` of the worker that holds a RUNNING trial's segment, from its
    :data:`ATTR.OWNER` token ``"host:pid:n"`` (written first, right after the claim); None
    when it has no such token.

    Example::

        >>> from optuna.trial import create_trial
        >>> owner_of(create_trial(state=TrialState.RUNNING, user_attrs={ATTR.OWNER: "vm:42:3"}))
        ('vm', 42)
    """
    token = trial.user_attrs.get(ATTR.OWNER)
    parts = token.rsplit(":", 2) if isinstance(token, str) else []
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def hand_back_owned(
    study: optuna.Study, cfg: Config, host: str, pid: int, reason: str
) -> dict[int, str]:
    """Hand back (:func:`crashed`) every RUNNING trial, not paused, whose segment the dead
    worker ``pid`` on ``host`` held: also one it claimed but died before telling anyone of.
    Returns ``{number: "resumable" | "failed"}``."""
    outcome: dict[int, str] = {}
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_paused(frozen) or owner_of(frozen) != (host, pid):
            continue
        result = crashed(study, frozen.number, reason, cfg,
                         owner=frozen.user_attrs.get(ATTR.OWNER))
        if result != "ended":
            outcome[frozen.number] = result
    return outcome


def open_segment(trial: Any, segment: dict[str, Any]) -> None:
    """List a segment that starts now on a live trial's :data:`ATTR.SEGMENTS` (``end`` None)."""
    segments = list(trial.user_attrs.get(ATTR.SEGMENTS) or [])
    trial.set_user_attr(ATTR.SEGMENTS, [*segments, segment])


def close_segment(trial: Any, segment: dict[str, Any]) -> None:
    """Record a live trial's segment as ended: it replaces the open entry it listed."""
    segments = list(trial.user_attrs.get(ATTR.SEGMENTS) or [])
    trial.set_user_attr(ATTR.SEGMENTS, _closed(segments, segment))


def close_segment_of(
    study: optuna.Study, number: int, segment: dict[str, Any], *, only_open: bool = False
) -> None:
    """Record the segment of trial ``number`` whose worker died or was killed as ended (it
    replaces the open entry; ``only_open``: nothing is written when there is none), and count
    the epochs it reported (``segment["to_epoch"] - segment["from_epoch"]``) as trained."""
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state == TrialState.RUNNING:
        segments = list(frozen.user_attrs.get(ATTR.SEGMENTS) or [])
        if only_open and not (segments and isinstance(segments[-1], dict)
                              and segments[-1].get("end") is None):
            return
        storage, trial_id = storage_of(study), trial_id_of(frozen)
        storage.set_trial_user_attr(trial_id, ATTR.SEGMENTS, _closed(segments, segment))
        trained = max(0, int(segment["to_epoch"]) - int(segment["from_epoch"]))
        if trained:
            before = _int_or_none(frozen.user_attrs.get(ATTR.EPOCHS_TRAINED)) or 0
            storage.set_trial_user_attr(trial_id, ATTR.EPOCHS_TRAINED, before + trained)


def _lost_segment(frozen: FrozenTrial) -> dict[str, Any] | None:
    """The trial's open last segment closed as ``"crashed"`` from what the study recorded, or
    None when it has none open.

    Its worker wrote an end time per epoch (:data:`ATTR.EPOCH_END_TIMES`): the segment reached
    the last epoch that ended after it started, and ended then; without one, it trained
    nothing. (A retrain from scratch keeps the first end times of the epochs it trains again:
    a segment lost before it passed them counts none of them.)

    Example::

        >>> from optuna.trial import create_trial
        >>> trial = create_trial(state=TrialState.RUNNING, user_attrs={
        ...     ATTR.SEGMENTS: [{"start": 10.0, "end": None, "from_epoch": 2, "to_epoch": None}],
        ...     ATTR.EPOCH_END_TIMES: [4.0, 8.0, 12.0, 14.0]})
        >>> segment = _lost_segment(trial)
        >>> segment["from_epoch"], segment["to_epoch"], segment["end"], segment["how"]
        (2, 4, 14.0, 'crashed')
    """
    segments = frozen.user_attrs.get(ATTR.SEGMENTS) or []
    last = segments[-1] if segments else None
    if not isinstance(last, dict) or last.get("end") is not None:
        return None
    start = last.get("start")
    from_epoch = _int_or_none(last.get("from_epoch")) or 0
    times = frozen.user_attrs.get(ATTR.EPOCH_END_TIMES) or []
    after = [epoch for epoch, end in enumerate(times, 1)
             if isinstance(end, int | float) and isinstance(start, int | float) and end >= start]
    to_epoch = max([from_epoch, *after])
    end = times[max(after) - 1] if after else start
    return {**last, "end": end, "to_epoch": to_epoch, "how": "crashed"}


def _closed(segments: list[Any], segment: dict[str, Any]) -> list[Any]:
    """``segments`` with its open last entry (if any) replaced by ``segment``.

    Example::

        >>> _closed([{"end": 2.0}, {"end": None}], {"end": 5.0})
        [{'end': 2.0}, {'end': 5.0}]
        >>> _closed([{"end": 2.0}], {"end": 5.0})
        [{'end': 2.0}, {'end': 5.0}]
    """
    if segments and isinstance(segments[-1], dict) and segments[-1].get("end") is None:
        segments = segments[:-1]
    return [*segments, segment]
