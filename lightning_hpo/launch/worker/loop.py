"""A long-lived worker: one slot, many trials, torch imported once.

The supervisor starts ``python -m lightning_hpo.launch.worker`` once per slot (and again if it
dies). The worker claims a trial, trains it, tells the study, and claims the next, with no new
interpreter in between: importing torch and Lightning costs seconds, a gap between two trials
very little. With ``devices.per_trial > 1`` the worker is rank 0 of a DDP group that Lightning
launches at the first ``fit`` and keeps; the other ranks run this same module, see
:func:`lightning_hpo.is_follower`, and follow rank 0 trial by trial. It reads its config from
``LIGHTNING_HPO_CONFIG`` and its slot from ``LIGHTNING_HPO_WORKER`` (both JSON; environment,
not argv, so the storage password stays out of ``ps``) and writes events as JSON lines to the
file descriptor the supervisor passed.

Each job is a *segment* (:class:`~lightning_hpo.launch.study.scheduler.Assignment`): train a
trial until a number of epochs is done, from scratch or from its resume checkpoint (written by
:class:`~lightning_hpo.checkpointing.ResumeCheckpoint`); one that ends below ``max_epochs``
pauses the trial for the scheduler. A trial stopped from outside (the budget spent, a
:class:`~lightning_hpo.launch.processes.protocol.StopOrder`, SIGTERM/SIGINT, the launcher gone)
*pauses* at its last checkpoint with ``why`` saying where (``"wall-clock budget reached
(stop.max_wallclock_time=200 s); stopped after epoch 7"``), and the next run resumes it; during
``stop.grace`` it first finishes its epoch. A checkpoint that cannot be written ends the trial
FAIL with a ``CheckpointWriteError``, and the worker goes on with the next trial.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.trial import TrialState

from lightning_hpo._optuna import backend_of, storage_of, trial_id_of
from lightning_hpo._scratch import scratch_prefix
from lightning_hpo.builtin.data import build_datamodule, datamodule_hyperparameters
from lightning_hpo.builtin.tensor_data import TensorDataModule
from lightning_hpo.distributed import (
    FollowerStudy,
    LeaderChannel,
    LeaderTrial,
    is_follower,
)
from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.checks import check_against_registry
from lightning_hpo.launch.config import Config, parse_config, range_end
from lightning_hpo.launch.processes.protocol import (
    CONFIG_ENV,
    RANKS_LOST,
    STOP_SIGNAL,
    TRIAL_LIMIT,
    WORKER_ENV,
    EventWriter,
    WorkerSpec,
    read_go,
)
from lightning_hpo.launch.study.creation import open_study
from lightning_hpo.launch.study.scheduler import WAIT_SECONDS, Assignment, Scheduler
from lightning_hpo.launch.study.search import sampler_for_trial
from lightning_hpo.launch.study.trials import (
    close_segment,
    end_trial,
    open_segment,
    remove_resume_checkpoint,
)
from lightning_hpo.launch.worker._once import say_once
from lightning_hpo.launch.worker.training import (
    AlreadyTrained,
    BudgetStop,
    FitRange,
    Interrupted,
    Progress,
    Stop,
    ignore_signal,
    on_signal,
    train,
)
from lightning_hpo.pareto import is_finite_point
from lightning_hpo.schedules import Value
from lightning_hpo.schema import ATTR, Owner, Segment, objective_curve
from lightning_hpo.storage import open_storage

_logger = logging.getLogger(__name__)


def _run_leader(cfg: Config, spec: WorkerSpec, events: EventWriter) -> str:
    """Rank 0 (or the only rank): ask the scheduler, train the segment, tell, until the budget
    or a stop says no."""
    beat = None if cfg.heartbeat is None else (cfg.heartbeat.interval, cfg.heartbeat.grace_period)
    storage = open_storage(cfg.storage, create=False, heartbeat=beat)
    study, _ = open_study(cfg, storage, queue=False)
    scheduler = Scheduler(study, cfg)
    rungs = tuple(sorted({level for ladder in scheduler.schedule.ladders() for level in ladder}))
    channel = LeaderChannel() if len(spec.devices) > 1 else None
    events.emit("ready", slot=spec.slot, pid=os.getpid())
    trials_run = 0
    try:
        while True:
            if spec.max_trials is not None and trials_run >= spec.max_trials:
                return TRIAL_LIMIT
            why = _why_stop(spec)
            if why is not None:
                return why
            job = scheduler.next(owner=Owner(socket.gethostname(), os.getpid(), trials_run))
            if job == "wait":
                time.sleep(WAIT_SECONDS)
                continue
            if job is None:
                return "no trials left"
            if not job.resumed:  # its values are drawn from its own seed when first suggested
                sampler_for_trial(study, cfg, job.trial.number)
            ranks_fine = _run_segment(cfg, spec, events, scheduler, job, channel, rungs)
            trials_run += 1
            if not ranks_fine:
                return RANKS_LOST
    finally:
        if channel is not None:
            try:
                channel.finish(wait=False)  # _kill_children ends the other ranks
            except Exception:  # the group may be gone after an interrupt; nothing to tell
                _logger.debug("could not tell follower ranks to stop", exc_info=True)


def _why_stop(spec: WorkerSpec) -> str | None:
    """Why this worker must not start another segment, or None."""
    Stop.read_orders()
    if Stop.reason is not None:
        return Stop.reason
    if Stop.budget is not None:
        return Stop.budget
    if os.getppid() != spec.launcher_pid:
        return "the launcher process stopped"
    if spec.deadline is not None and time.time() >= spec.deadline:
        return "wall-clock budget reached"
    return None


@dataclasses.dataclass
class _Outcome:
    """How a segment ended: ``state`` None means paused (``how`` ``"paused"`` at a rung or
    ``"interrupted"`` before its target); ``reason`` is the fail, stop or pause reason."""

    state: TrialState | None = TrialState.FAIL
    how: str = "failed"
    value: Value | None = None
    reason: str | None = None
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)  # written at its end


def _run_segment(
    cfg: Config, spec: WorkerSpec, events: EventWriter, scheduler: Scheduler, job: Assignment,
    channel: LeaderChannel | None, rungs: tuple[int, ...],
) -> bool:
    """Train one segment and write how it ended: COMPLETE, PRUNED, FAIL, or paused. False when
    the DDP slot's other ranks cannot train another one (:func:`_end_on_every_rank`)."""
    trial, study = job.trial, scheduler.study
    job = _readable(job)
    segment = _announce(job, spec, events)
    if channel is not None:
        channel.begin_trial(trial.number)
    progress = _progress_for(cfg, job, spec, events, rungs)
    heartbeat = _Heartbeat(study, trial, cfg.heartbeat.interval) if cfg.heartbeat else None
    try:
        outcome = _train_segment(cfg, spec, job, progress, channel, study)
    finally:
        if heartbeat is not None:
            heartbeat.stop()
    outcome, ranks_fine = _end_on_every_rank(channel, trial.number, outcome)
    if not _still_owner(study, trial, job.owner):
        _logger.warning("trial %d was handed to another worker meanwhile; its segment here is "
                        "dropped", trial.number)
        events.emit("end", trial=trial.number, state="LOST", value=None, reason="handed over")
        return ranks_fine
    _record_epochs(trial, job, progress, segment, outcome)
    if outcome.state is None:
        _pause_segment(scheduler, job, progress, outcome, events)
        return ranks_fine
    reason = outcome.reason or ("unknown" if outcome.state == TrialState.FAIL else None)
    end_trial(study, trial.number, outcome.state, value=outcome.value, reason=reason)
    remove_resume_checkpoint(trial)
    first = outcome.value[0] if isinstance(outcome.value, tuple) else outcome.value
    # its values too: a trial that failed before fit started (its model's __init__ refused
    # them) sent no fit_start, and its line would show none
    events.emit("end", trial=trial.number, state=outcome.state.name, value=first,
                reason=reason, params=progress.params)
    return ranks_fine


def _end_on_every_rank(channel: LeaderChannel | None, number: int,
                       outcome: _Outcome) -> tuple[_Outcome, bool]:
    """End trial ``number`` on the DDP slot's other ranks (:meth:`LeaderChannel.end_trial`):
    the outcome, FAIL with their error when it failed on one of them (rank 0 saw only its
    process group break), and whether they can train another trial (not after a failure on
    one of them, nor when rank 0 failed and they are left in a collective). An interrupted
    segment is not asked: the worker stops, and kills its other ranks."""
    if channel is None or outcome.how == "interrupted":
        return outcome, True
    end = channel.end_trial(failed=outcome.state == TrialState.FAIL)
    if end.error is not None:
        reason = f"rank {end.failed_rank}: {type(end.error).__name__}: {end.error}"[:2000]
        _logger.error("trial %d failed on rank %s: %s", number, end.failed_rank, end.error)
        outcome = _Outcome(reason=reason)
    return outcome, end.error is None and end.ended


def _readable(job: Assignment) -> Assignment:
    """The job, retraining from scratch when its checkpoint cannot be read (a damaged file:
    the trial is not lost, it trains again)."""
    problem = None if job.checkpoint is None else _unreadable(job.checkpoint)
    if problem is None:
        return job
    _logger.warning("trial %d: checkpoint %s cannot be read (%s); it retrains from scratch",
                    job.trial.number, job.checkpoint, problem)
    return dataclasses.replace(job, checkpoint=None, from_epoch=0)


def _announce(job: Assignment, spec: WorkerSpec, events: EventWriter) -> Segment:
    """Tell the supervisor, then the study, that the segment starts; returns it, open.

    The supervisor learns of the trial first, and the launcher's pid is the first attribute:
    whenever this process dies from here on, the trial is handed back for it.
    """
    trial, started = job.trial, time.time()
    events.emit("start", trial=trial.number, slot=spec.slot, from_epoch=job.from_epoch,
                to_epoch=job.to_epoch, resumed=job.resumed)
    attrs: dict[str, Any] = {
        ATTR.LAUNCHER_PID: spec.launcher_pid, ATTR.HOST: socket.gethostname(),
        ATTR.SLOT: spec.slot, ATTR.DEVICE: spec.device_label, ATTR.PID: os.getpid(),
    }
    if not job.resumed:
        attrs[ATTR.START] = started
    segment = Segment(started, None, slot=spec.slot, device=spec.device_label,
                      from_epoch=0 if job.checkpoint is None else job.from_epoch, how="running")
    open_segment(trial, segment, attrs)  # one write, the launcher's pid first
    return segment


def _progress_for(
    cfg: Config, job: Assignment, spec: WorkerSpec, events: EventWriter, rungs: tuple[int, ...]
) -> Progress:
    """The segment's progress callback, knowing the epochs the trial trained before it."""
    trial = job.trial
    progress = Progress(cfg, trial.number, events, spec, trial=trial, rungs=rungs)
    known = list(trial.user_attrs.get(ATTR.EPOCH_END_TIMES) or [])
    progress.from_epoch = job.from_epoch
    progress.prior_times = known[: job.from_epoch] if job.checkpoint is not None else known
    progress.known = known if job.checkpoint is not None else None
    return progress


def _train_segment(
    cfg: Config, spec: WorkerSpec, job: Assignment, progress: Progress,
    channel: LeaderChannel | None, study: optuna.Study,
) -> _Outcome:
    """Train the segment (every DDP rank follows) and say how it ended; never raises for a
    trial's own failure."""
    trial = job.trial
    shared = LeaderTrial(trial, channel) if channel is not None else trial
    try:
        try:
            value, checkpoint = train(shared, cfg, spec, progress,
                                      FitRange(job.to_epoch, job.checkpoint))
        except AlreadyTrained as done:  # its last worker died after the segment's last save
            value, checkpoint = _reported(study, trial, done.epochs), progress.checkpoint
            known = progress.known or []
            progress.from_epoch, progress.prior_times = done.epochs, known[: done.epochs]
        best = {ATTR.CHECKPOINT: checkpoint}
        # Pruned and budget stops raised above: a stop here is the project's own (its
        # EarlyStopping), which ends the trial where fit stopped, as it would straight through;
        # paused, its next segment would train on from there.
        if job.to_epoch < cfg.max_epochs and not progress.stopped_early:
            return _Outcome(None, "paused", value, f"rung {job.to_epoch}", best)
        finite = is_finite_point(value) if isinstance(value, tuple) else math.isfinite(value)
        if finite:
            return _Outcome(TrialState.COMPLETE, "complete", value, attrs=best)
        return _Outcome(value=value, reason=_not_finite(cfg, value), attrs=best)
    except optuna.TrialPruned:
        return _Outcome(TrialState.PRUNED, "pruned")
    except BudgetStop as stop:  # the study's budget, not the trial: it pauses
        return _Outcome(None, "interrupted", reason=str(stop),
                        attrs={ATTR.CHECKPOINT: progress.checkpoint})
    except (Interrupted, KeyboardInterrupt, SystemExit) as error:
        reason = f"interrupted: {str(error) or Stop.reason or type(error).__name__}"
        Stop.reason = Stop.reason or reason
        return _Outcome(None, "interrupted", reason=reason)
    except Exception as error:  # a user model's bug, OOM, bad data: the trial fails
        _logger.exception("trial %d failed", trial.number)
        return _Outcome(reason=f"{type(error).__name__}: {error}"[:2000])


def _pause_segment(
    scheduler: Scheduler, job: Assignment, progress: Progress, outcome: _Outcome,
    events: EventWriter,
) -> None:
    """Pause the trial: at a rung (its segment's last epoch was saved), or interrupted before
    its target (:func:`_paused_at`)."""
    epoch, path = _paused_at(job, progress)
    scheduler.pause(
        job.trial.number, epoch=epoch, checkpoint=path, why=outcome.reason or outcome.how,
        target=job.to_epoch if outcome.how == "interrupted" else None,
    )
    events.emit("pause", trial=job.trial.number, epoch=epoch, reason=outcome.reason)


def _paused_at(job: Assignment, progress: Progress) -> tuple[int, str | None]:
    """``(epochs, checkpoint)`` a paused segment resumes from: the last checkpoint it wrote,
    or, when it wrote none, the one it started from (``(0, None)``: from scratch).

    At a rung that is the segment's last epoch. An interrupted segment may have reported
    epochs after it: under ``checkpoint.every: rung``, or ``auto`` once a save cost more than
    its share of an epoch, an epoch is reported without being saved, and the next segment
    trains it again from this checkpoint.
    """
    last = progress.resume.last if progress.resume is not None else None
    return last if last is not None else (progress.from_epoch, job.checkpoint)


class _Heartbeat:
    """Records Optuna's RDB heartbeat of a trial every ``interval`` seconds while it trains
    (``heartbeat:`` in the config), so that another launcher sees this machine is alive."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial, interval: int) -> None:
        self._storage = backend_of(study)
        self._trial_id = trial_id_of(trial)
        self._interval = interval
        self._done = threading.Event()
        self._storage.record_heartbeat(self._trial_id)  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._beat, daemon=True, name="heartbeat")
        self._thread.start()

    def _beat(self) -> None:
        while not self._done.wait(self._interval):
            try:
                self._storage.record_heartbeat(self._trial_id)  # type: ignore[attr-defined]
            except Exception:  # the database is briefly away: the next beat may make it
                _logger.warning("could not record the heartbeat", exc_info=True)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def _not_finite(cfg: Config, value: Value) -> str:
    """Why a trial whose last value is NaN or infinite fails: ``"validation_error is nan"``."""
    if not isinstance(value, tuple):
        return f"{cfg.metric} is {value}"
    pairs = zip(cfg.objectives, value, strict=True)
    return ", ".join(f"{metric} is {v}" for (metric, _), v in pairs if not math.isfinite(v))


def _reported(study: optuna.Study, trial: optuna.Trial, epoch: int) -> Value:
    """The value the trial reported at ``epoch`` (its checkpoint is written after the report);
    a tuple in a study with several objectives.

    Raises:
        RuntimeError: it reported none there.
    """
    frozen = storage_of(study).get_trial(trial_id_of(trial))
    values: Mapping[int, Value] = (objective_curve(frozen) if len(study.directions) > 1
                                   else frozen.intermediate_values)
    if epoch not in values:
        raise RuntimeError(f"its checkpoint holds {epoch} epochs but no value was reported at "
                           f"epoch {epoch}")
    return values[epoch]


def _unreadable(path: str) -> str | None:
    """Why the checkpoint at ``path`` cannot be loaded (``weights_only``, as ``fit`` loads
    it), or None when it can. Memory-mapped: the tensors are not read."""
    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # truncated, not a zip file, unpickling refused, gone
        return f"{type(error).__name__}: {error}"[:300]
    return None


def _still_owner(study: optuna.Study, trial: optuna.Trial, owner: Owner) -> bool:
    """False when the scheduler handed the trial to another worker (a heartbeat ran late)."""
    frozen = storage_of(study).get_trial(trial_id_of(trial))
    return Owner.of(frozen) == owner and frozen.state == TrialState.RUNNING


def _record_epochs(
    trial: optuna.Trial, job: Assignment, progress: Progress, segment: Segment,
    outcome: _Outcome,
) -> None:
    """The trial's epoch count, epoch end times and segments, across all its segments, with
    what else the segment's end records (its best checkpoint, where its data came from), in one
    write.

    A segment that pauses ends where it pauses (:func:`_paused_at`): its ``to_epoch``, and
    the epochs it adds to :data:`ATTR.EPOCHS_TRAINED <ATTR>`, are those in the checkpoint the
    next segment starts from, so that no epoch is counted in two segments and none in neither.
    Epochs an interrupted segment reported past that checkpoint stay in the trial's curve
    (:data:`ATTR.EPOCHS <ATTR>`, their values, their end times until they are trained again)
    and are counted in the segment that trains them again.
    """
    attrs = trial.user_attrs
    times = progress.all_epoch_end_times()
    from_epoch = 0 if job.checkpoint is None else progress.from_epoch
    done = from_epoch + len(progress.epoch_end_times)
    kept = _paused_at(job, progress)[0] if outcome.state is None else done
    trained = int(attrs.get(ATTR.EPOCHS_TRAINED) or 0) + kept - from_epoch
    ended = time.time()
    data = {} if progress.data is None else {ATTR.DATA: progress.data}
    close_segment(trial, dataclasses.replace(segment, from_epoch=from_epoch).closed(
        ended, kept, outcome.how), {
        **outcome.attrs, **data,
        ATTR.EPOCHS: max(done, int(attrs.get(ATTR.EPOCHS) or 0)), ATTR.EPOCH_END_TIMES: times,
        ATTR.EPOCHS_TRAINED: trained, ATTR.END: ended,
    })  # one write


def _run_follower(cfg: Config, spec: WorkerSpec) -> None:
    """Ranks 1..N-1 of a DDP slot: train rank 0's trials, write nothing."""
    quiet = EventWriter(-1)
    FollowerStudy(None, None).optimize(
        lambda trial: train(trial, cfg, spec, Progress(cfg, trial.number, quiet, spec))[0]
    )


def _on_stop_order(signum: int, frame: Any) -> None:
    Stop.read_orders()


def main() -> int:
    """Entry point of ``python -m lightning_hpo.launch.worker`` (started by the supervisor)."""
    cfg = parse_config(json.loads(os.environ[CONFIG_ENV]))
    spec = WorkerSpec.from_json(os.environ[WORKER_ENV])
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    # The slot's log (workers/slotN.log) says which data path each trial took, how the slot's
    # cores were divided, and that training steps are replayed from a CUDA graph (the first
    # time: _once holds back the lines that differ only in the batch's shape).
    for name in ("lightning_hpo.builtin.tensor_data", "lightning_hpo.builtin._cuda_graph",
                 "lightning_hpo.launch.worker"):  # the loop and its training
        logging.getLogger(name).setLevel(logging.INFO)
    say_once()  # a notice Lightning repeats every trial is said the first time only
    torch.set_num_threads(spec.threads)
    if is_follower():
        # Rank 0 reads the orders and leads the ranks; SIGUSR1 sent to every process of a SLURM
        # step (srun, --signal=USR1@...) must not end a follower by its default action.
        signal.signal(STOP_SIGNAL, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, ignore_signal)  # rank 0 stops it (its _kill_children)
        _run_follower(cfg, spec)
        return 0
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if spec.control_fd >= 0:
        os.set_blocking(spec.control_fd, False)
        Stop.control_fd = spec.control_fd
    signal.signal(STOP_SIGNAL, _on_stop_order)  # before "ready": the supervisor waits for it
    events = EventWriter(spec.events_fd)
    if spec.hold and not _await_study(cfg, spec, events):
        return 0
    try:
        why = _run_leader(cfg, spec, events)
    finally:
        if len(spec.devices) > 1:
            _kill_children()
    events.emit("exit", slot=spec.slot, reason=why)
    return 0


def _await_study(cfg: Config, spec: WorkerSpec, events: EventWriter) -> bool:
    """A held worker, its imports done: check the config (unless the go line is here already:
    another worker was first and the study exists), warm up, then wait for the go line.
    False when it must not run: the config was refused, or the launcher stopped or is gone."""
    def keep_waiting() -> bool:  # a signal ends the wait
        return Stop.reason is None

    go = read_go(spec.control_fd, keep_waiting, wait=False)
    if spec.check and not go and not _check_config(cfg, events):
        return False
    _warm_up(cfg)
    if not go and not read_go(spec.control_fd, keep_waiting):
        events.emit("exit", slot=spec.slot, reason=Stop.reason or "the launcher did not start")
        return False
    return True


def _check_config(cfg: Config, events: EventWriter) -> bool:
    """Check the config against the real classes (:func:`check_against_registry`) here, where
    torch and Lightning are imported anyway, while the launcher waits to create the study.
    Emits ``checked`` with the notes to show once, or ``refused`` with the field and message;
    False when refused."""
    try:
        notes = check_against_registry(cfg)
    except ConfigError as error:
        events.emit("refused", field=error.field, message=error.message)
        return False
    events.emit("checked", notes=notes)
    return True


def _warm_up(cfg: Config) -> None:
    """While the worker waits for the study, do what its first trial would do first whatever
    its values: build the data module (the space's low ends; for a LightningCLI config through
    the project's CLI at the middle of each range, which imports the project) and load a
    ``TensorDataModule``'s tensors into this process's cache. On the slots that do not check
    the config this is time they would spend idle. Never fails the worker: what goes wrong
    here goes wrong again in the trial, where it is reported."""
    try:
        if cfg.cli is None:
            data_names = datamodule_hyperparameters(cfg.data)
            low = {k: range_end(d, 0) for k, d in cfg.space.items() if k in data_names}
            data = build_datamodule(cfg.data, **{**cfg.data_args, **low})
        else:
            from lightning_hpo.launch.checks.cli_checks import warm_data

            with tempfile.TemporaryDirectory(prefix=scratch_prefix("warm")) as scratch:
                data = warm_data(cfg.cli, cfg.space, Path(scratch))
        if isinstance(data, TensorDataModule):
            data.prefetch()
    except Exception:  # noqa: BLE001 (the trial reports it)
        _logger.debug("warm-up skipped", exc_info=True)


def _kill_children() -> None:
    """SIGKILL the DDP ranks Lightning started from this process (Linux ``/proc``).

    Followers leave on rank 0's stop message; this covers an interrupted trial, after which a
    follower may still wait in a collective that rank 0 will never join.
    """
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent == me:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue
