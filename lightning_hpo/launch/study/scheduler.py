"""The launcher's scheduler: which trial a free slot trains next, to which epoch, from where.

No torch here: the supervisor uses it too. The decisions are the pure
:mod:`lightning_hpo.schedules` (built by :func:`lightning_hpo.launch.study.search.build_schedule`);
this module reads the study into their :class:`~lightning_hpo.schedules.TrialView` s and writes
back what they decide (through :mod:`lightning_hpo.launch.study.trials`), under one lock per
study (:func:`~lightning_hpo.launch.study.creation.study_lock` ``"schedule"``), so that every
worker of every launcher on the study shares one schedule. All its state is in the study, so a
launcher killed and run again continues the round and resumes the paused trials:

* a trial waiting between two segments stays RUNNING (WAITING would make any ``ask()`` hand it
  out as new) with a :class:`~lightning_hpo.schema.Pause`;
* a synchronous schedule's round is :data:`ATTR.ROUND <lightning_hpo.schema.ATTR>`, promotion
  Hyperband's bracket :data:`~lightning_hpo.schema.BRACKET_ATTR`;
* the values at rungs are the trials' intermediate values, or with several objectives their
  :data:`ATTR.OBJECTIVE_VALUES <lightning_hpo.schema.ATTR>`.

A trial whose worker died (:func:`~lightning_hpo.launch.study.trials.crashed`) is resumed from
its :class:`~lightning_hpo.schema.ResumePoint` on the next free slot, ``stop.max_retries`` times,
then ends FAIL. Every claim is made under the lock with its owner written before the lock is let
go, so a claim whose worker died first is put back
(:func:`~lightning_hpo.launch.study.trials.hand_back_lost_claims`). Example::

    scheduler = Scheduler(study, cfg)
    job = scheduler.next(owner=Owner("host", 4242, 1))
    if isinstance(job, Assignment):      # train job.trial to job.to_epoch from job.checkpoint
        scheduler.pause(job.trial.number, epoch=job.to_epoch, checkpoint=path, why="rung 2")
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import optuna
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo import schedules
from lightning_hpo._optuna import backend_of, live_trial, stale_trial_ids, storage_of, trial_id_of
from lightning_hpo.launch.config import Config
from lightning_hpo.launch.study.creation import study_lock
from lightning_hpo.launch.study.search import build_schedule
from lightning_hpo.launch.study.trials import (
    assign,
    claim_trial,
    crashed,
    end_paused,
    hand_back_lost_claims,
    is_unowned,
    pause,
    unpause,
)
from lightning_hpo.schema import (
    ATTR,
    BRACKET_ATTR,
    Owner,
    Pause,
    as_count,
    is_paused,
    objective_curve,
)

__all__ = ["WAIT_SECONDS", "Assignment", "Scheduler", "trial_view"]

_logger = logging.getLogger(__name__)

#: Seconds a worker waits before asking again when the schedule says "wait".
WAIT_SECONDS = 0.5

_STATES: dict[TrialState, schedules.State] = {
    TrialState.WAITING: "waiting", TrialState.RUNNING: "running",
    TrialState.COMPLETE: "complete", TrialState.PRUNED: "pruned", TrialState.FAIL: "fail",
}


def trial_view(trial: FrozenTrial, several: bool = False) -> schedules.TrialView:
    """What the pure schedules see of a trial.

    Example::

        >>> from optuna.trial import create_trial
        >>> trial = create_trial(state=TrialState.RUNNING, intermediate_values={1: 0.5},
        ...                      user_attrs={ATTR.PAUSED: {"epoch": 1, "target": None}})
        >>> trial.number = 0
        >>> trial_view(trial)
        TrialView(number=0, state='paused', epoch=1, values={1: 0.5}, group=None, target=None)
    """
    attrs = trial.user_attrs
    values: dict[int, schedules.Value] = (
        dict(objective_curve(trial)) if several else dict(trial.intermediate_values))
    group = as_count(attrs.get(ATTR.ROUND))
    if group is None:
        group = as_count(trial.system_attrs.get(BRACKET_ATTR))
    paused = Pause.of(trial)
    if paused is not None:
        return schedules.TrialView(
            trial.number, "paused", paused.epoch or 0, values, group, paused.target or None,
        )
    return schedules.TrialView(
        trial.number, _STATES[trial.state], max(values, default=0), values, group,
        as_count(attrs.get(ATTR.TARGET)) or None if trial.state == TrialState.RUNNING else None,
    )


@dataclass
class Assignment:
    """A segment for a worker: train ``trial`` until ``to_epoch`` epochs are done.

    ``checkpoint`` is the file to resume from (None: from scratch); ``from_epoch`` the epochs in
    it; ``owner`` the worker that holds this segment.
    """

    trial: optuna.Trial
    to_epoch: int
    checkpoint: str | None
    from_epoch: int
    owner: Owner
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

    def next(self, owner: Owner) -> Assignment | Literal["wait"] | None:
        """The next segment for a free slot; ``"wait"`` (ask again in a moment) or None (no
        work left for this study)."""
        fast = not self.cfg.pruner.pauses and self.cfg.heartbeat is None
        if fast and not self._needs_schedule():
            return self._start_plain(owner)  # the fast path of a stopping pruner
        with study_lock(self.cfg, self._storage, "schedule"):
            trials = self.study.get_trials(deepcopy=False)
            # Every claim, the fast path's too, is made under this lock and names its owner
            # before the lock is let go: an unowned RUNNING trial here is a lost claim.
            if hand_back_lost_claims(self.study, trials):
                trials = self.study.get_trials(deepcopy=False)
            if self.cfg.heartbeat is not None and self._recover_lost(trials):
                trials = self.study.get_trials(deepcopy=False)
            tickets = sum(t.state == TrialState.WAITING for t in trials)
            views = [trial_view(t, self.cfg.several) for t in trials
                     if t.state != TrialState.WAITING]
            decision = self.schedule.decide(
                views, tickets=None if self.cfg.stop.n_trials is None else tickets,
                next_number=_next_number(trials),
            )
            for number in decision.prune:
                end_paused(self.study, trials[number], decision.reasons.get(number, "not promoted"))
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
    def _needs_schedule(self) -> bool:
        """A stopping pruner's study still needs the locked path: a paused trial to resume, or
        a claim that may be lost (read without the lock: one being made shows up here too,
        and the locked path then finds it owned)."""
        running = self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        return any(is_paused(t) or is_unowned(t) for t in running)

    def _start_plain(self, owner: Owner) -> Assignment | None:
        # no decision to take, but the claim and its owner under the lock, as every claim
        with study_lock(self.cfg, self._storage, "schedule"):
            trial = claim_trial(self.study, self.cfg)
            if trial is None:
                return None
            self._mark(trial, self.cfg.max_epochs, owner)
        return Assignment(trial, self.cfg.max_epochs, None, 0, owner, resumed=False)

    def _start(self, to_epoch: int, group: int | None, owner: Owner) -> Assignment | None:
        trial = claim_trial(self.study, self.cfg)
        if trial is None:
            return None
        # The round (bracket) and the target before the owner: a worker killed between two of
        # these writes leaves either a trial without an owner, which the next claim hands back
        # as a ticket (hand_back_lost_claims), or one that has them all; never an owned trial
        # outside any round, which the schedule would take for a stray and prune.
        before: dict[str, int] = {}
        if group is not None:
            if self.cfg.pruner.name.startswith("sync_"):
                before[ATTR.ROUND] = group  # written with the target and owner, first
            else:
                self._storage.set_trial_system_attr(trial_id_of(trial), BRACKET_ATTR, group)
        self._mark(trial, to_epoch, owner, before)
        return Assignment(trial, to_epoch, None, 0, owner, resumed=False)

    def _resume(
        self, frozen: FrozenTrial, to_epoch: int, from_scratch: bool, owner: Owner
    ) -> Assignment:
        paused = Pause.of(frozen) or Pause()
        checkpoint = None if from_scratch else paused.checkpoint
        if checkpoint is not None and not Path(checkpoint).is_file():
            _logger.warning("trial %d: checkpoint %s is gone; it retrains from scratch",
                            frozen.number, checkpoint)
            checkpoint = None
        from_epoch = (paused.epoch or 0) if checkpoint is not None else 0
        trial = live_trial(self.study, frozen.number)
        self._mark(trial, to_epoch, owner)  # the new owner before it is no longer paused
        unpause(trial)
        return Assignment(trial, to_epoch, checkpoint, from_epoch, owner, resumed=True)

    def _mark(self, trial: optuna.Trial, to_epoch: int, owner: Owner,
              before: dict[str, int] | None = None) -> None:
        assign(trial, owner, to_epoch, before)
        if self.cfg.heartbeat is not None:  # a resumed trial's last beat is from before its
            # pause: beat now, or another launcher takes it for lost before its worker's first
            backend_of(self.study).record_heartbeat(trial_id_of(trial))  # type: ignore[attr-defined]

    def pause(
        self, number: int, *, epoch: int, checkpoint: str | None, why: str,
        target: int | None = None,
    ) -> None:
        """Pause trial ``number`` with ``epoch`` epochs in ``checkpoint``
        (:func:`~lightning_hpo.launch.study.trials.pause`)."""
        pause(self.study, number, epoch=epoch, checkpoint=checkpoint, why=why, target=target)


def _next_number(trials: list[FrozenTrial]) -> int:
    for trial in trials:
        if trial.state == TrialState.WAITING:
            return trial.number
    return len(trials)
