"""The launcher's early start: workers started from the config file before it is validated.

Every worker imports torch and Lightning first, seconds of CPU that nothing else can shorten,
and the launcher's own work before it can start one (importing Optuna, validating the config,
checking the storage and folders) would come on top. So ``python -m
lightning_hpo.launch`` reads the file, works out the slots from its ``devices`` section with the
standard library alone (:func:`plan_early`), and starts the held workers
(:func:`start_early`) before it imports anything else. The supervisor then takes them over
(:meth:`~lightning_hpo.launch.processes.supervisor.Supervisor.adopt`) once the config is valid and
the plan is the one it would have made; otherwise they are stopped and their log folder removed
(:meth:`EarlyWorkers.abort`), and the run goes on as it would have without them: a refused
config is still one line, exit 2, nothing left behind.

On a GPU machine the GPUs are counted from NVIDIA's driver folder and ``CUDA_VISIBLE_DEVICES``
(:func:`~lightning_hpo.launch.config.devices.gpus_without_torch`); the launcher still counts them
with torch meanwhile, and a plan that differs is not adopted. Where they cannot be counted so (WSL,
ROCm, GPUs named by UUID) or the file is not a plain valid shape, there is no early start.

Example::

    >>> plan = plan_early({"study": "s", "devices": {"accelerator": "cpu", "count": 1},
    ...                    "stop": {"max_wallclock_time": 60}}, started=1000.0)
    >>> plan.kind, plan.slots, plan.deadline, str(plan.study_dir)
    ('cpu', [Slot(index=0, devices=(0,))], 1060.0, 'runs/s')
    >>> plan_early({"study": "s", "devices": {"per_trial": 0}}, started=0.0) is None
    True
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightning_hpo._scratch import remove_scratch_of
from lightning_hpo.errors import ConfigError, is_finite_number
from lightning_hpo.launch.config.devices import (
    Slot,
    detect_devices,
    gpus_without_torch,
    machine_memory,
    needs_gpu_count,
    parse_devices,
    plan_slots,
    threads_per_process,
)
from lightning_hpo.launch.config.files import run_dir_of, study_name
from lightning_hpo.launch.config.slurm import usable_cores
from lightning_hpo.launch.processes._worker_logs import claim_log_dir, release_log_dir
from lightning_hpo.launch.processes.protocol import WorkerSpec
from lightning_hpo.launch.processes.spawn import WorkerProcess, spawn_worker

__all__ = ["EarlyPlan", "EarlyWorkers", "deadline_of", "plan_early", "start_early"]


def deadline_of(started: float, seconds: float | None) -> float | None:
    """When a run started at ``started`` (unix seconds) claims no more trials:
    ``stop.max_wallclock_time`` later; None without one.

    Example::

        >>> deadline_of(1000.0, 60), deadline_of(1000.0, None)
        (1060.0, None)
    """
    return None if seconds is None else started + float(seconds)


@dataclass(frozen=True)
class EarlyPlan:
    """What the early workers are started with; the supervisor adopts them only if it would
    have started the same: the same config, slots, threads, deadline and study folder (their
    logs go in its ``workers/``:
    :func:`~lightning_hpo.launch.processes._worker_logs.claim_log_dir`)."""

    raw: dict[str, Any]
    kind: str
    slots: list[Slot]
    threads: int
    deadline: float | None
    study_dir: Path


@dataclass
class EarlyWorkers:
    """Held workers started by :func:`start_early`, one per slot of ``plan``. ``log_dir`` is
    the folder of their logs, ``made`` the top folder made for it (None: it existed)."""

    plan: EarlyPlan
    workers: list[WorkerProcess] = field(default_factory=list)
    log_dir: Path | None = None
    made: Path | None = None
    taken: bool = False  # the supervisor adopted them: abort() leaves them alone

    def abort(self) -> None:
        """Stop the workers (SIGKILL to each one's session) and remove the log folder they were
        given, unless the supervisor has taken them over. Safe to call twice."""
        if self.taken:
            return
        for worker in self.workers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()
            remove_scratch_of(worker.process.pid)  # killed while it checked the config
            worker.reader.close()
            with contextlib.suppress(OSError):
                os.close(worker.control)
        self.workers = []
        if self.log_dir is not None:  # once: a second call must not drop a later claim
            if self.made is not None:
                shutil.rmtree(self.made, ignore_errors=True)
            release_log_dir(self.plan.study_dir)
            self.log_dir = self.made = None


def plan_early(raw: Mapping[str, Any], started: float) -> EarlyPlan | None:
    """The slots, threads, deadline and log folder a run of ``raw`` (a config file's mapping,
    overrides applied) will have, when they are known without torch or Optuna; else None (GPUs
    only torch can count, or a field the launcher will refuse)."""
    try:
        folder = Path(run_dir_of("runs" if raw.get("run_dir") is None else raw["run_dir"]))
        folder = folder / study_name(raw.get("study"))
        devices = parse_devices({} if raw.get("devices") is None else raw["devices"])
        gpus = gpus_without_torch() if needs_gpu_count(devices.accelerator) else 0
        if gpus is None:  # only torch can count them: the launcher does, then starts them
            return None
        kind, n_devices = detect_devices(devices.accelerator, devices.count, gpus=gpus)
        slots = plan_slots(n_devices, devices.per_trial, devices.trials_per_device,
                           memory=machine_memory())
    except ConfigError:
        return None
    stop = raw.get("stop")
    seconds = stop.get("max_wallclock_time") if isinstance(stop, Mapping) else None
    if seconds is not None and (not is_finite_number(seconds) or seconds <= 0):
        return None
    threads = threads_per_process(usable_cores(), len(slots) * len(slots[0].devices))
    return EarlyPlan(dict(raw), kind, slots, threads, deadline_of(started, seconds), folder)


def start_early(raw: Mapping[str, Any], started: float) -> EarlyWorkers | None:
    """Start the held workers of :func:`plan_early`'s plan, each to check the config once
    imported unless another has answered
    (:attr:`~lightning_hpo.launch.processes.protocol.WorkerSpec.check`);
    None where there is no plan or they could not be started (the launcher then starts them
    itself, after its checks, and reports what is wrong)."""
    plan = plan_early(raw, started)
    if plan is None:
        return None
    early = EarlyWorkers(plan)
    try:
        early.log_dir, early.made = claim_log_dir(plan.study_dir)
        for slot in plan.slots:
            spec = WorkerSpec(
                slot=slot.index, devices=slot.devices, kind=plan.kind, threads=plan.threads,
                launcher_pid=os.getpid(), events_fd=-1, deadline=plan.deadline, hold=True,
                check=True,
            )
            early.workers.append(
                spawn_worker(plan.raw, spec, early.log_dir / f"slot{slot.index}.log"))
    except BaseException as error:
        early.abort()
        if isinstance(error, OSError | TypeError | ValueError):  # a folder it cannot make, a
            return None  # value JSON cannot hold: the launcher's own checks say what is wrong
        raise
    return early
