"""A trial's records in the study: claimed, owned, paused, its segments, ended, handed back.

No torch here: the supervisor uses it too. This module is the one writer of the launcher's
per-trial records; their types and readers are :mod:`lightning_hpo.schema`'s.

* **Claim** (:func:`claim_trial`): a worker moves a queued ticket from WAITING to RUNNING, which
  the storage allows once (the queue: :mod:`lightning_hpo.launch.study.creation`).
* **Own** (:func:`assign`): the worker's :class:`~lightning_hpo.schema.Owner` is the first thing
  written, so a worker that dies from then on is known by it (:func:`hand_back_owned`,
  :func:`recover_stale_trials`).
* **Pause** (:func:`pause`, :func:`interrupt`): a trial waiting between two segments stays
  RUNNING (WAITING would make any ``ask()`` hand it out as new) with a
  :class:`~lightning_hpo.schema.Pause`.
* **Segments** (:func:`open_segment`, :func:`close_segment`, :func:`close_segment_of`).
* **End** (:func:`end_trial`, :func:`end_paused`) and **crash** (:func:`crashed`: paused for
  resume while ``stop.max_retries`` allows, then FAIL with every attempt's reason).

Example::

    trial = claim_trial(study, cfg)                      # None: the budget is spent
    assign(trial, Owner(host, os.getpid(), 0), to_epoch=9)
    open_segment(trial, Segment(time.time(), None, slot=0, device="cpu:0", from_epoch=0))
    ...                                                  # train, then one of:
    end_trial(study, trial.number, TrialState.COMPLETE, value=0.03)
    pause(study, trial.number, epoch=3, checkpoint=path, why="rung 3", target=None)
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import optuna
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo._optuna import (
    claim_waiting_trial,
    set_trial_user_attrs,
    set_user_attrs,
    storage_of,
    study_id_of,
    trial_id_of,
    unwrap_storage,
)
from lightning_hpo.launch.config import Config
from lightning_hpo.schema import (
    ATTR,
    HasAttrs,
    Owner,
    Pause,
    ResumePoint,
    Segment,
    as_count,
    is_paused,
    with_segment,
)
from lightning_hpo.storage import StorageSpec, file_lock, proxy_client

__all__ = [
    "assign",
    "claim_trial",
    "close_segment",
    "close_segment_of",
    "crashed",
    "end_paused",
    "end_trial",
    "hand_back_lost_claims",
    "hand_back_owned",
    "interrupt",
    "is_unowned",
    "open_segment",
    "pause",
    "record_resume_point",
    "recover_stale_trials",
    "remove_resume_checkpoint",
    "resume_from",
    "unpause",
]

_logger = logging.getLogger(__name__)


# -- claim, own, end ------------------------------------------------------------------------


def claim_trial(study: optuna.Study, cfg: Config) -> optuna.Trial | None:
    """The next trial for a worker, or None when the ``n_trials`` budget is spent.

    Without ``n_trials`` (a wall-clock budget only) every call asks a new trial.
    """
    if cfg.stop.n_trials is None:
        return study.ask()
    spec = StorageSpec(cfg.storage)
    if spec.is_proxy:  # one call: the proxy claims on its database, serialised there
        trial_id = proxy_client(unwrap_storage(storage_of(study))).claim(study_id_of(study))
        return None if trial_id is None else optuna.Trial(study, trial_id)
    with _claim_lock(spec):
        return claim_waiting_trial(study)


def _claim_lock(spec: StorageSpec) -> contextlib.AbstractContextManager[bool]:
    """Serialise claims on one SQLite database (its reads take no lock); no-op elsewhere."""
    lock_path = spec.lock_path("claim")
    if spec.kind != "sqlite" or lock_path is None:
        return contextlib.nullcontext(True)
    return file_lock(lock_path)


def assign(
    trial: optuna.Trial, owner: Owner, to_epoch: int, before: Mapping[str, Any] | None = None
) -> None:
    """Give a claimed (or resumed) trial's next segment to ``owner``, to train to ``to_epoch``.

    ``before`` (other user attributes, such as a new trial's round) first, then the target,
    the owner last, in one write (:func:`~lightning_hpo._optuna.set_user_attrs`), under the
    schedule's lock: an unowned claim is handed back there
    (:func:`hand_back_lost_claims`), so a trial with an owner always has its target too (a
    crashed trial is resumed to its target, not past a rung).
    """
    set_user_attrs(trial, {**(before or {}), ATTR.TARGET: to_epoch,
                           ATTR.OWNER: owner.token})


def end_trial(
    study: optuna.Study,
    number: int,
    state: TrialState,
    value: float | Sequence[float] | None = None,
    reason: str | None = None,
) -> bool:
    """Finish trial ``number`` (COMPLETE with a value, one per objective in a study with
    several, PRUNED, or FAIL with a reason).

    ``reason`` is stored as ``fail_reason`` for FAIL and as ``stop_reason`` for PRUNED (a trial
    the study's budget stopped; Optuna keeps its intermediate values, and its last one as its
    value). Returns False when the trial had already finished (another process ended it first).

    Example::

        end_trial(study, 13, TrialState.PRUNED,
                  reason="wall-clock budget reached (stop.max_wallclock_time=200 s); "
                  "stopped after epoch 7")
    """
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state.is_finished():
        return False
    storage = storage_of(study)
    try:
        if reason is not None:
            name = ATTR.STOP_REASON if state == TrialState.PRUNED else ATTR.FAIL_REASON
            set_trial_user_attrs(storage, trial_id_of(frozen), {name: reason,
                                                               ATTR.END: time.time()})
        study.tell(number, value if state == TrialState.COMPLETE else None, state=state)
    except (optuna.exceptions.UpdateFinishedTrialError, ValueError, RuntimeError) as error:
        _logger.debug("trial %d already ended: %s", number, error)
        return False
    return True


def end_paused(study: optuna.Study, frozen: FrozenTrial, reason: str) -> None:
    """End a paused trial that a schedule will not promote: PRUNED, checkpoints deleted.

    The schedule decided, not the study's budget: like the pruner, it records the epoch the
    trial stopped at (``pruned_at_epoch``), which reports and the status read that way.
    """
    paused = Pause.of(frozen) or Pause()
    attrs: dict[str, object] = {}
    if paused.epoch is not None:
        attrs[ATTR.PRUNED_AT_EPOCH] = paused.epoch
    attrs[ATTR.PAUSED] = None
    set_trial_user_attrs(storage_of(study), trial_id_of(frozen), attrs)
    if end_trial(study, frozen.number, TrialState.PRUNED, reason=reason):
        _remove(paused.checkpoint)
        remove_resume_checkpoint(frozen)


# -- pause and resume -----------------------------------------------------------------------


def pause(
    study: optuna.Study, number: int, *, epoch: int, checkpoint: str | None, why: str,
    target: int | None,
) -> None:
    """Mark trial ``number`` paused with ``epoch`` epochs in ``checkpoint``: at a rung
    (``target`` None) or interrupted before ``target`` epochs; it stays RUNNING."""
    frozen = study.get_trials(deepcopy=False)[number]
    value = Pause(epoch=epoch, checkpoint=checkpoint, since=time.time(), target=target, why=why)
    storage_of(study).set_trial_user_attr(trial_id_of(frozen), ATTR.PAUSED, value.to_attr())


def unpause(trial: optuna.Trial) -> None:
    """The paused trial's next segment starts now (after :func:`assign`)."""
    trial.set_user_attr(ATTR.PAUSED, None)


def resume_from(frozen: FrozenTrial) -> tuple[int, str | None]:
    """``(epochs, checkpoint)`` a crashed or interrupted trial resumes from: its
    :class:`~lightning_hpo.schema.ResumePoint` while the file is there, else ``(0, None)``."""
    point = ResumePoint.of(frozen)
    if point is not None and Path(point.checkpoint).is_file():
        return point.epoch, point.checkpoint
    return 0, None


def record_resume_point(
    trial: optuna.Trial, epoch: int, checkpoint: str, attrs: Mapping[str, Any] | None = None
) -> None:
    """A resume checkpoint holding ``epoch`` epochs was written (rank 0, each time), after
    ``attrs`` (other user attributes, e.g. the epochs' end times), all in one write."""
    set_user_attrs(trial, {**(attrs or {}),
                           ATTR.RESUME_POINT: ResumePoint(epoch, checkpoint).to_attr()})


def remove_resume_checkpoint(trial: HasAttrs) -> None:
    """Delete a trial's resume checkpoint once it is not needed (its best one is kept)."""
    point = ResumePoint.of(trial)
    _remove(None if point is None else point.checkpoint)


def interrupt(study: optuna.Study, number: int, why: str, max_epochs: int) -> bool:
    """Pause a trial stopped from outside (the budget, Ctrl-C, a worker that had to be killed)
    at its last checkpoint, so the next run resumes it. Returns False when it had ended or was
    paused already."""
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state != TrialState.RUNNING or is_paused(frozen):
        return False
    epoch, checkpoint = resume_from(frozen)
    target = as_count(frozen.user_attrs.get(ATTR.TARGET)) or max_epochs
    pause(study, number, epoch=epoch, checkpoint=checkpoint, why=why, target=target)
    return True


# -- segments -------------------------------------------------------------------------------


def open_segment(
    trial: optuna.Trial, segment: Segment, attrs: Mapping[str, Any] | None = None
) -> None:
    """List a segment that starts now on a live trial (``end`` None), after ``attrs`` (other
    user attributes), all in one write."""
    set_user_attrs(trial, {**(attrs or {}), ATTR.SEGMENTS: with_segment(trial, segment)})


def close_segment(
    trial: optuna.Trial, segment: Segment, attrs: Mapping[str, Any] | None = None
) -> None:
    """Record a live trial's segment as ended (it replaces the open entry it listed), after
    ``attrs`` (other user attributes), all in one write."""
    set_user_attrs(trial, {**(attrs or {}), ATTR.SEGMENTS: with_segment(trial, segment)})


def close_segment_of(
    study: optuna.Study, number: int, segment: Segment, *, only_open: bool = False
) -> None:
    """Record the segment of trial ``number`` whose worker died or was killed as ended (it
    replaces the open entry; ``only_open``: nothing is written when there is none), count the
    epochs it reported as trained, and as completed (:data:`ATTR.EPOCHS <ATTR>`, which its
    worker writes only at a segment's end: without this, a trial killed after its last epoch
    of a rung and then ended at that rung would say it stopped a rung lower)."""
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state != TrialState.RUNNING:
        return
    if only_open and Segment.open_last(frozen) is None:
        return
    attrs: dict[str, Any] = {ATTR.SEGMENTS: with_segment(frozen, segment)}
    if segment.epochs:
        before = as_count(frozen.user_attrs.get(ATTR.EPOCHS_TRAINED)) or 0
        attrs[ATTR.EPOCHS_TRAINED] = before + segment.epochs
    done = as_count(frozen.user_attrs.get(ATTR.EPOCHS)) or 0
    if segment.to_epoch is not None and segment.to_epoch > done:
        attrs[ATTR.EPOCHS] = segment.to_epoch
    set_trial_user_attrs(storage_of(study), trial_id_of(frozen), attrs)


def _lost_segment(frozen: FrozenTrial) -> Segment | None:
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
        >>> segment.from_epoch, segment.to_epoch, segment.end, segment.how
        (2, 4, 14.0, 'crashed')
    """
    last = Segment.open_last(frozen)
    if last is None:
        return None
    times = frozen.user_attrs.get(ATTR.EPOCH_END_TIMES) or []
    after = [epoch for epoch, end in enumerate(times, 1)
             if isinstance(end, int | float) and end >= last.start]
    end = times[max(after) - 1] if after else last.start
    return last.closed(end, max([last.from_epoch or 0, *after]), "crashed")


# -- workers that died ----------------------------------------------------------------------


def crashed(
    study: optuna.Study, number: int, reason: str, cfg: Config, owner: Owner | None = None
) -> Literal["resumable", "failed", "ended"]:
    """A trial whose worker died: paused for resume from its last checkpoint while
    ``stop.max_retries`` allows, else ended FAIL with every attempt's reason.

    ``owner``: the dead worker; when the trial names another owner now, another worker has
    taken it meanwhile and it is left alone.

    Returns ``"resumable"``, ``"failed"``, or ``"ended"`` when it had finished, was paused or
    has another owner.
    """
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state != TrialState.RUNNING or is_paused(frozen):
        return "ended"
    if owner is not None and Owner.of(frozen) != owner:
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
    epoch, checkpoint = resume_from(frozen)
    target = as_count(frozen.user_attrs.get(ATTR.TARGET)) or cfg.max_epochs
    pause(study, number, epoch=epoch, checkpoint=checkpoint, target=target,
          why=f"{reason}; resumed from epoch {epoch} (retry {len(attempts)} of "
              f"{cfg.stop.max_retries})")
    return "resumable"


def hand_back_owned(
    study: optuna.Study, cfg: Config, host: str, pid: int, reason: str
) -> dict[int, str]:
    """Hand back (:func:`crashed`) every RUNNING trial, not paused, whose segment the dead
    worker ``pid`` on ``host`` held: also one it claimed but died before telling anyone of.
    Returns ``{number: "resumable" | "failed"}``."""
    outcome: dict[int, str] = {}
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = Owner.of(frozen)
        if is_paused(frozen) or owner is None or (owner.host, owner.pid) != (host, pid):
            continue
        result = crashed(study, frozen.number, reason, cfg, owner=owner)
        if result != "ended":
            outcome[frozen.number] = result
    return outcome


def is_unowned(frozen: FrozenTrial) -> bool:
    """A RUNNING trial, not paused, that no worker has named itself on: a claim being made, or
    one whose worker died before it wrote its name (:func:`hand_back_lost_claims`). Trials of a
    study from before owner tokens have their launcher's pid instead, and are not unowned."""
    return (frozen.state == TrialState.RUNNING and not is_paused(frozen)
            and Owner.of(frozen) is None and ATTR.LAUNCHER_PID not in frozen.user_attrs)


def hand_back_lost_claims(study: optuna.Study, trials: list[FrozenTrial]) -> list[int]:
    """Put back as WAITING each unowned trial (:func:`is_unowned`): claimed by a worker that
    died before it wrote its name (the claim and the owner are separate writes). It trained
    nothing; as a ticket again it keeps its enqueued parameters and is claimed like any other.
    Returns the numbers handed back.

    Call it only while holding the study's ``schedule`` lock: every claim of a launcher's study
    is made under that lock, its owner written before the lock is let go
    (:class:`~lightning_hpo.launch.study.scheduler.Scheduler`), so an unowned trial seen under the
    lock cannot be one whose claimer is alive. (A study a launcher runs is the launcher's: a
    script's own ``study.optimize`` on it would have its RUNNING trials taken for lost.)
    """
    lost = [t for t in trials if is_unowned(t)]
    storage = storage_of(study)
    for frozen in lost:
        _logger.warning("trial %d was claimed by a worker that stopped before it wrote its "
                        "name; it waits to be claimed again", frozen.number)
        storage.set_trial_state_values(trial_id_of(frozen), TrialState.WAITING)
    return [t.number for t in lost]


def recover_stale_trials(study: optuna.Study, cfg: Config) -> dict[int, str]:
    """Hand back the RUNNING trials whose worker on this host is gone.

    A trial's worker is known by its :class:`~lightning_hpo.schema.Owner` (written with the
    claim), in a study without owners by its launcher's pid. Each is resumed from its last
    checkpoint by the scheduler while ``stop.max_retries`` allows, else ends FAIL with every
    attempt's reason (:func:`crashed`). Paused trials are left as they are (the scheduler
    resumes them); trials of other hosts too: their launchers may be alive. A claim no worker
    named itself on goes back to the tickets (:func:`hand_back_lost_claims`; the caller holds
    the ``schedule`` lock). Returns ``{number: "resumable" | "failed"}``.
    """
    hand_back_lost_claims(study, study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    host = socket.gethostname()
    outcome: dict[int, str] = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_paused(trial):
            continue
        attrs = trial.user_attrs
        owner = Owner.of(trial)
        launcher = attrs.get(ATTR.LAUNCHER_PID) if attrs.get(ATTR.HOST) == host else None
        launcher_gone = isinstance(launcher, int) and not _pid_alive(launcher)
        if owner is None:  # a study from before owner tokens: its launcher tells
            if not launcher_gone:
                continue
        elif owner.host != host or _pid_alive(owner.pid):
            continue
        reason = (f"launcher (pid {launcher}) on {host} stopped while the trial ran"
                  if launcher_gone or owner is None else
                  f"its worker (pid {owner.pid}) on {host} stopped before its launcher learnt "
                  "of the trial")
        result = crashed(study, trial.number, reason, cfg, owner=owner)
        if result != "ended":
            outcome[trial.number] = result
    return outcome


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs. A zombie does not: it has died, and
    only its exit status waits to be collected; a worker whose launcher died with it is
    collected by the init process, which may take seconds, and until then ``kill(pid, 0)``
    answers for it as for a live process (its trial was then taken for a live worker's and
    never handed back). Where there is no ``/proc``, ``kill(pid, 0)`` alone tells."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[:1]
    except FileNotFoundError:  # collected since kill() saw it, or no /proc at all
        return not os.path.isdir("/proc/self")
    except (OSError, IndexError):
        return True
    return state not in ([b"Z"], [b"X"])


def _remove(path: object) -> None:
    if isinstance(path, str):
        with contextlib.suppress(OSError):
            os.remove(path)
