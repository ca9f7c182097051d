"""The supervisor: one worker process per slot, kept alive, watched, restarted, stopped cleanly.

It never imports torch. Each worker is ``python -m lightning_hpo.launch.worker`` in a session of
its own (:func:`~lightning_hpo.launch.processes.spawn.spawn_worker`), its threads set to an equal
share of the cores. Workers report on a pipe, one JSON event a line, which the supervisor turns
into the live status:

* the workers start before the study exists (:meth:`Supervisor.start_held`, or earlier from the
  config file: :meth:`Supervisor.adopt`), importing torch and Lightning while the launcher
  validates the config; the first one ready checks the config against the real classes, and only
  once it says ``checked`` is the study created or changed (a refusal leaves nothing written);
* a worker that exits non-zero or is killed hands its trial back to the scheduler
  (:func:`~lightning_hpo.launch.study.trials.crashed`) and its slot is started again;
* the study's budget (``stop.max_wallclock_time``, ``stop.max_failed_trials``) sends every
  worker a :class:`~lightning_hpo.launch.processes.protocol.StopOrder`: no more claims, and the
  running trials pause at their last checkpoint (at an epoch boundary while ``stop.grace``
  lasts), for the next run to resume;
* SIGINT, SIGTERM and SIGUSR1 (SLURM's warning before a time limit) send an interrupt order,
  then SIGTERM, and the running trials pause the same way; a signal during ``stop.grace`` ends
  the grace instead;
* a worker still alive :data:`GRACE_SECONDS` after its last order is killed, and any trial of
  this launcher still RUNNING and not paused is paused at its last checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from lightning_hpo._scratch import remove_scratch_of
from lightning_hpo.errors import ConfigError, WorkerError
from lightning_hpo.launch.config import Config
from lightning_hpo.launch.config.devices import Slot, threads_per_process
from lightning_hpo.launch.processes._worker_logs import claim_log_dir, release_log_dir
from lightning_hpo.launch.processes.early import EarlyWorkers, deadline_of
from lightning_hpo.launch.processes.protocol import (
    GO_LINE,
    INTERRUPTS,
    RESTART_REASONS,
    STOP_SIGNAL,
    StopOrder,
    WorkerSpec,
)
from lightning_hpo.launch.processes.spawn import spawn_worker
from lightning_hpo.launch.study.trials import close_segment_of, crashed, hand_back_owned, interrupt
from lightning_hpo.schema import ATTR, Segment, device_label, is_paused
from lightning_hpo.storage import StorageSpec, break_lock_of

__all__ = ["Supervisor", "TrialRow", "WorkerError"]

_logger = logging.getLogger(__name__)

#: Seconds a worker gets to end its trial after SIGTERM or a stop-now order before it is killed.
GRACE_SECONDS = 30.0
#: A slot whose worker dies this many times in a row without finishing a trial is given up.
MAX_RESTARTS = 5


@dataclass
class TrialRow:
    """What the status display knows of one trial (from worker events)."""

    number: int
    slot: int
    device: str
    state: str = "RUNNING"
    epochs: int = 0
    last: float | None = None
    value: float | None = None
    reason: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: Several objectives: the last epoch's value of each (``last`` is the first's).
    last_values: list[float | None] | None = None
    started: float = field(default_factory=time.time)
    ended: float | None = None
    fit_started: float | None = None
    from_epoch: int = 0  # epochs in the checkpoint its current segment started from


@dataclass
class _Worker:
    slot: Slot
    process: subprocess.Popen[bytes]
    reader: Any
    generation: int
    control: int  # write end of its stop-order pipe
    buffer: str = ""
    trial: int | None = None
    exit_reason: str | None = None
    deaths_in_a_row: int = 0
    ready: bool = False  # it said so: its stop-order signal handler is in place


def _how_it_ended(code: int) -> str:
    """``"was killed by SIGKILL"`` or ``"exited with code 1"``."""
    return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"


class Supervisor:
    """Run the study's trials on ``slots`` until the budget is spent or a stop arrives.

    Args:
        cfg: the validated config.
        study: the opened study (its trial queue already filled).
        slots: from :func:`~lightning_hpo.launch.config.devices.plan_slots`.
        kind: ``"gpu"`` or ``"cpu"``.
        n_cores: CPU cores to divide among the worker processes.
        on_change: called with the supervisor after every batch of events (the live display).
        trials_per_process: start a fresh worker process after this many trials (None: keep
            each worker for the whole study; 1 is the one-process-per-trial baseline that
            ``benchmarks/bench_launch.py`` measures against).
    """

    def __init__(
        self,
        cfg: Config,
        study: optuna.Study | None,
        slots: list[Slot],
        kind: str,
        n_cores: int,
        on_change: Callable[[Supervisor], None] | None = None,
        trials_per_process: int | None = None,
        started: float | None = None,
    ) -> None:
        self.cfg = cfg
        self.study: optuna.Study = study  # type: ignore[assignment]  # None until attach()
        self.slots = slots
        self.kind = kind
        self.started = time.time() if started is None else started
        self.deadline = deadline_of(self.started, cfg.stop.max_wallclock_time)
        self.rows: dict[int, TrialRow] = {}
        self.stop_reason: str | None = None
        self._order: StopOrder | None = None  # the budget's last stop order, once it is spent
        self._grace_end: float | None = None  # unix seconds: then the order becomes "now"
        self._kill_at: float | None = None  # unix seconds: then workers still alive are killed
        self.gaps: list[float] = []  # seconds between a trial's end and the next fit on a slot
        self._threads = threads_per_process(n_cores, len(slots) * len(slots[0].devices))
        self.on_change = on_change
        self._selector = selectors.DefaultSelector()
        self._workers: dict[int, _Worker] = {}
        self._slot_last_end: dict[int, float] = {}
        self._failed = 0
        self._log_dir: Path | None = None  # claimed when the first worker starts
        self._trials_per_process = trials_per_process
        self._held = False  # workers started by start_held(), waiting for GO_LINE
        self._made_logs: Path | None = None  # the top folder start_held() made for the logs
        self._check_answer: list[str] | ConfigError | None = None
        spec = StorageSpec(cfg.storage)
        #: a journal file: the lock a killed worker held is released when it is reaped
        self._journal: Path | None = spec.path if spec.kind == "journal" else None

    # -- an early start: workers import torch while the launcher creates the study ---------
    def start_held(self, check: bool) -> None:
        """Start every slot's worker now, before the study exists: each imports torch and
        Lightning (seconds) while the launcher goes on, then waits for :meth:`run`'s word.
        With ``check`` each of them checks the config against the real classes once imported
        (:func:`~lightning_hpo.launch.checks.check_against_registry`), unless the go line came
        first: the first to finish importing answers; wait for it with :meth:`await_check`."""
        self._log_dir, self._made_logs = claim_log_dir(self.cfg.study_dir)
        for slot in self.slots:
            self._start(slot, generation=0, hold=True, check=check)
        self._held = True

    def adopt(self, early: EarlyWorkers) -> bool:
        """Take over the workers the launcher started early
        (:mod:`~lightning_hpo.launch.processes.early`) as if :meth:`start_held` had started them;
        False, and nothing taken, when they were started with another config, slots, threads,
        deadline or study folder than this supervisor would use (the caller stops them and calls
        :meth:`start_held`)."""
        plan = early.plan
        same = (plan.raw == self.cfg.raw and plan.kind == self.kind and plan.slots == self.slots
                and plan.threads == self._threads and plan.deadline == self.deadline
                and plan.study_dir == self.cfg.study_dir and self._trials_per_process is None
                and len(early.workers) == len(self.slots) and early.log_dir is not None)
        if not same or early.taken:
            return False
        for slot, started in zip(self.slots, early.workers, strict=True):
            self._add(_Worker(slot, started.process, started.reader, 0, started.control))
        self._log_dir, self._made_logs = early.log_dir, early.made
        self._held, early.taken = True, True
        return True

    def await_check(self) -> list[str]:
        """The first answer of a checking worker (whichever finished importing first): the
        notes to show once (the Trainer arguments of a project's config the launcher replaces).

        Raises:
            ConfigError: the config was refused, naming the field.
            WorkerError: every worker died before one answered (the last one is named, with
                its log).
        """
        while self._check_answer is None:
            self._pump(timeout=0.2)
            dead = [w for w in self._workers.values() if w.process.poll() is not None]
            if self._check_answer is None and len(dead) == len(self._workers):
                for worker in dead:
                    self._read(worker)
                if self._check_answer is None:
                    worker = max(dead, key=lambda w: w.slot.index)
                    code = worker.process.poll()
                    assert code is not None
                    raise WorkerError(
                        f"the worker checking the config (pid {worker.process.pid}) "
                        f"{_how_it_ended(code)} before it answered; its log: "
                        f"{self.log_dir / f'slot{worker.slot.index}.log'}")
        if isinstance(self._check_answer, ConfigError):
            raise self._check_answer
        return self._check_answer

    @property
    def log_dir(self) -> Path:
        """The folder of this launcher's worker logs (``workers/slotN.log``): the study
        folder's ``workers/``, or ``workers/<host>-<pid>/`` while another launcher writes
        there (:func:`~lightning_hpo.launch.processes._worker_logs.claim_log_dir`); claimed on first
        use."""
        if self._log_dir is None:
            self._log_dir, _ = claim_log_dir(self.cfg.study_dir)
        return self._log_dir

    def attach(self, study: optuna.Study) -> None:
        """The study the held workers will run, once the launcher has created or opened it."""
        self.study = study

    def abort(self, keep_logs: bool = False) -> None:
        """Stop the held workers (the config was refused, or the study could not be opened):
        SIGKILL, and remove the log folder :meth:`start_held` made unless ``keep_logs``."""
        for worker in list(self._workers.values()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()
            self._clean_after(worker, f"worker for slot {worker.slot.index} (pid "
                              f"{worker.process.pid}) was stopped")
            self._forget(worker)
        self._held = False
        if self._made_logs is not None and not keep_logs:
            shutil.rmtree(self._made_logs, ignore_errors=True)
            self._log_dir = self._made_logs = None
        release_log_dir(self.cfg.study_dir)  # its workers have ended: the folder is free

    # -- lifecycle -------------------------------------------------------------------------
    def run(self) -> str:
        """Start every slot and supervise until all workers are done. Returns why it stopped."""
        self._log_dir, _ = claim_log_dir(self.cfg.study_dir)  # the same one, or made anew
        previous = {sig: signal.signal(sig, self._on_signal) for sig in INTERRUPTS}
        try:
            if self._held:  # the study exists now: the held workers may claim
                for worker in self._workers.values():
                    with contextlib.suppress(OSError):  # it has died meanwhile: _reap() says
                        os.write(worker.control, GO_LINE)
                self._held = False
            else:
                for slot in self.slots:
                    self._start(slot, generation=0)
            while self._workers:
                self._pump(timeout=0.2)
                self._reap()
                self._check_budget()
                if self.on_change is not None:
                    self.on_change(self)
                if self._kill_at is not None and time.time() >= self._kill_at:
                    break
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._stop_all()
            self._end_orphans()
            self._refresh_paused_rows()
            release_log_dir(self.cfg.study_dir)  # its workers have ended: the folder is free
        return self.stop_reason or "all trials done"

    def _refresh_paused_rows(self) -> None:
        """Rows shown PAUSED whose trial the scheduler has ended meanwhile (not promoted)
        take the trial's final state."""
        paused = [row for row in self.rows.values() if row.state == "PAUSED"]
        if not paused:
            return
        trials = self.study.get_trials(deepcopy=False)
        for row in paused:
            trial = trials[row.number]
            if trial.state.is_finished():
                row.state = trial.state.name
                row.reason = trial.user_attrs.get(ATTR.STOP_REASON) or row.reason
                if row.value is None:  # as for a trial the pruner stopped: its last value
                    row.value = row.last

    def _on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.stop_reason is None:
            self.stop_reason = f"stopped by {name}"
            # why, first: the worker's SIGTERM handler reads it
            self._send(StopOrder(f"launcher {self.stop_reason}", now=True, interrupt=True))
            self._signal_workers(signal.SIGTERM)
            self._kill_at = time.time() + GRACE_SECONDS
        elif self._grace_end is not None:
            _logger.warning("%s: stop.grace cut short, stopping the running trials now", name)
            self._order_stop(now=True)

    def _start(self, slot: Slot, generation: int, hold: bool = False, check: bool = False
               ) -> None:
        spec = WorkerSpec(
            slot=slot.index, devices=slot.devices, kind=self.kind, threads=self._threads,
            launcher_pid=os.getpid(), events_fd=-1, deadline=self.deadline,
            generation=generation, max_trials=self._trials_per_process, hold=hold, check=check,
        )
        started = spawn_worker(self.cfg.raw, spec, self.log_dir / f"slot{slot.index}.log")
        self._add(_Worker(slot, started.process, started.reader, generation, started.control))

    def _add(self, worker: _Worker) -> None:
        """Watch a started worker (a restarted slot keeps its count of deaths in a row)."""
        previous = self._workers.get(worker.slot.index)
        if previous is not None:
            worker.deaths_in_a_row = previous.deaths_in_a_row
        self._workers[worker.slot.index] = worker
        self._selector.register(worker.reader, selectors.EVENT_READ, worker)

    # -- events ----------------------------------------------------------------------------
    def _pump(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            worker: _Worker = key.data
            self._read(worker)

    def _read(self, worker: _Worker) -> None:
        try:
            chunk = worker.reader.read()
        except (BlockingIOError, TypeError):
            return
        if not chunk:
            return
        worker.buffer += chunk
        *lines, worker.buffer = worker.buffer.split("\n")
        for line in lines:
            if line.strip():
                self._handle(worker, json.loads(line))

    def _handle(self, worker: _Worker, event: dict[str, Any]) -> None:
        kind, now = event["e"], event["t"]
        if kind == "start":
            number = event["trial"]
            worker.trial = number
            device = device_label(self.kind, worker.slot.devices)
            row = self.rows.get(number)
            from_epoch = int(event.get("from_epoch") or 0)
            if row is None:
                row = self.rows[number] = TrialRow(number, worker.slot.index, device, started=now)
            else:  # a paused trial resumed here: its row times this segment
                row.slot, row.device = worker.slot.index, device
                row.state, row.ended, row.started = "RUNNING", None, now
            row.epochs = row.from_epoch = from_epoch
        elif kind == "fit_start":
            row = self.rows.get(event["trial"])
            if row is not None:
                row.fit_started, row.params = now, event.get("params", {})
            last_end = self._slot_last_end.get(worker.slot.index)
            if last_end is not None:
                self.gaps.append(now - last_end)
        elif kind == "epoch":
            row = self.rows.get(event["trial"])
            if row is not None:  # every epoch trained; its value where it validated
                row.epochs = event["epoch"]
                if "value" in event:
                    row.last, row.last_values = event["value"], event.get("values")
        elif kind == "pause":
            row = self.rows.get(event["trial"])
            if row is not None:
                row.state, row.reason, row.ended = "PAUSED", event.get("reason"), now
            worker.trial = None
            worker.deaths_in_a_row = 0
            self._slot_last_end[worker.slot.index] = now
        elif kind == "end":
            row = self.rows.get(event["trial"])
            if row is not None:
                row.state, row.value, row.reason, row.ended = (
                    event["state"], event["value"], event["reason"], now
                )
                row.params = row.params or event.get("params") or {}
                if row.value is None and row.state == "PRUNED":
                    row.value = row.last
            worker.trial = None
            worker.deaths_in_a_row = 0
            self._slot_last_end[worker.slot.index] = now
            if event["state"] == "FAIL":
                self._failed += 1
        elif kind == "ready":
            worker.ready = True
            if self._order is not None:  # the order is in its pipe; now it can take the signal
                self._wake(worker)
        elif kind == "exit":
            worker.exit_reason = event["reason"]
        elif kind == "checked" and self._check_answer is None:  # the first answer counts
            self._check_answer = [str(note) for note in event.get("notes") or []]
        elif kind == "refused" and self._check_answer is None:
            self._check_answer = ConfigError(str(event["field"]), str(event["message"]))

    # -- deaths, restarts, budgets -----------------------------------------------------------
    def _reap(self) -> None:
        for index, worker in list(self._workers.items()):
            code = worker.process.poll()
            if code is None:
                continue
            self._read(worker)  # the last events before it went
            self._forget(worker)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.process.pid, signal.SIGKILL)  # its DDP ranks, if any
            if code == 0 and worker.trial is None:
                if worker.exit_reason in RESTART_REASONS and self.stop_reason is None:
                    self._start(worker.slot, worker.generation + 1)
                continue
            reason = f"worker for slot {index} (pid {worker.process.pid}) {_how_it_ended(code)}"
            self._clean_after(worker, reason)
            if worker.trial is not None:
                self._crashed(worker, reason)
            # and any trial it claimed before it could tell (owner token written, no event)
            self._failed += sum(outcome == "failed" for outcome in hand_back_owned(
                self.study, self.cfg, socket.gethostname(), worker.process.pid, reason).values())
            worker.deaths_in_a_row += 1
            if self.stop_reason is not None:
                continue
            if worker.deaths_in_a_row > MAX_RESTARTS:
                _logger.error("%s; slot %d given up after %d restarts", reason, index,
                              MAX_RESTARTS)
                continue
            _logger.warning("%s; restarting the slot", reason)
            self._workers[index] = worker  # carry the death count into the restart
            self._start(worker.slot, worker.generation + 1)

    def _clean_after(self, worker: _Worker, reason: str) -> None:
        """What a worker that did not exit on its own may have left: the journal's lock, when
        it was killed while it appended (every writer, this supervisor first, would wait
        Optuna's 30-s grace period), and its temporary folders."""
        pid = worker.process.pid
        if self._journal is not None and break_lock_of(self._journal, pid):
            _logger.warning("%s while it held the journal's lock; released it", reason)
        remove_scratch_of(pid)

    def _forget(self, worker: _Worker) -> None:
        """Close a finished worker's pipes and drop it from the running workers."""
        self._selector.unregister(worker.reader)
        worker.reader.close()
        with contextlib.suppress(OSError):
            os.close(worker.control)
        if self._workers.get(worker.slot.index) is worker:
            del self._workers[worker.slot.index]

    def _crashed(self, worker: _Worker, reason: str) -> None:
        """A worker died in a trial: hand the trial back for resume, or end it FAIL when its
        retries are spent; show it so."""
        number = worker.trial
        assert number is not None
        row = self.rows.get(number)
        if row is not None:
            close_segment_of(self.study, number, self._segment_of(row, worker.slot.index,
                                                                  "crashed"))
        outcome = crashed(self.study, number, reason, self.cfg)
        if outcome == "failed":
            self._failed += 1
        if row is not None and outcome != "ended":
            row.state = "PAUSED" if outcome == "resumable" else TrialState.FAIL.name
            row.reason, row.ended = reason, time.time()

    def _end_unfinished(self, number: int, detail: str | None = None) -> None:
        """Pause a trial still running when the launcher stops, at its last checkpoint, with
        its learning curve: the next run resumes it."""
        why = self.stop_reason or "launcher stopped"
        why = f"{why}; {detail or 'left running'}" if self._order is not None else (
            f"interrupted: {why}" + (f" ({detail})" if detail else ""))
        row = self.rows.get(number)
        if row is not None:  # a worker killed after the grace left its segment open
            close_segment_of(self.study, number, self._segment_of(row, row.slot, "interrupted"),
                             only_open=True)
        paused = interrupt(self.study, number, why, self.cfg.max_epochs)
        if paused and row is not None and row.ended is None:
            row.state, row.reason, row.ended = "PAUSED", why, time.time()

    def _check_budget(self) -> None:
        """Start the budget stop when a criterion is met; end the grace when it is over."""
        now = time.time()
        if self.stop_reason is None:
            limit = self.cfg.stop.max_failed_trials
            if self.deadline is not None and now >= self.deadline:
                seconds = self.cfg.stop.max_wallclock_time
                self.stop_reason = (
                    f"wall-clock budget reached (stop.max_wallclock_time={seconds:g} s)"
                )
            elif limit is not None and self._failed >= limit:
                self.stop_reason = f"{self._failed} trials failed (stop.max_failed_trials={limit})"
            if self.stop_reason is not None:
                self._order_stop(now=self.cfg.stop.grace <= 0)
        elif self._grace_end is not None and now >= self._grace_end:
            self._order_stop(now=True)

    def _order_stop(self, now: bool) -> None:
        """Tell every worker the budget is spent: stop at the next epoch boundary, or ``now``."""
        self._order = StopOrder(self.stop_reason or "budget spent", now)
        if now:
            self._grace_end, self._kill_at = None, time.time() + GRACE_SECONDS
        else:
            self._grace_end = time.time() + self.cfg.stop.grace
        self._send(self._order)
        for worker in self._workers.values():
            if worker.ready:
                self._wake(worker)

    def _send(self, order: StopOrder) -> None:
        """Write ``order`` on every worker's control pipe (one atomic write each)."""
        line = order.to_line().encode()
        for worker in self._workers.values():
            with contextlib.suppress(OSError):  # it has just exited
                os.write(worker.control, line)

    def _wake(self, worker: _Worker) -> None:
        """Make a worker read its stop orders now (it installed the handler before "ready")."""
        with contextlib.suppress(ProcessLookupError):
            worker.process.send_signal(STOP_SIGNAL)

    def _signal_workers(self, signum: int) -> None:
        for worker in self._workers.values():
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signum)

    def _stop_all(self) -> None:
        """Wait for the stopped workers (reading events) until their time is up, then SIGKILL
        what is left; a loop left on an error first sends SIGTERM."""
        if not self._workers:
            return
        if self._kill_at is None:
            self.stop_reason = self.stop_reason or "launcher stopped"
            self._order, self._grace_end = None, None
            self._signal_workers(signal.SIGTERM)
            self._kill_at = time.time() + GRACE_SECONDS
        while self._workers and time.time() < self._kill_at:
            self._pump(timeout=0.1)
            self._reap()
        for worker in list(self._workers.values()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()
            self._read(worker)
            self._forget(worker)
            self._clean_after(worker, f"worker for slot {worker.slot.index} (pid "
                              f"{worker.process.pid}) was killed after {GRACE_SECONDS:g} s")
            if worker.trial is not None:
                killed = f"its worker did not stop within {GRACE_SECONDS:g} s and was killed"
                self._end_unfinished(worker.trial, killed)

    def _end_orphans(self) -> None:
        """Any trial this launcher's workers left RUNNING is ended with the reason."""
        mine = os.getpid()
        for trial in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if trial.user_attrs.get(ATTR.LAUNCHER_PID) == mine and not is_paused(trial):
                self._end_unfinished(trial.number)

    @staticmethod
    def _segment_of(row: TrialRow, slot: int, how: str) -> Segment:
        """The segment a trial's row saw, ended now (its worker died or was stopped)."""
        return Segment(row.started, time.time(), slot=slot, device=row.device,
                       from_epoch=row.from_epoch, to_epoch=row.epochs, how=how)

    # -- what the display reads --------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        """Seconds since the supervisor started."""
        return time.time() - self.started
