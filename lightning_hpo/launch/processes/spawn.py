"""Starting one worker process: its environment, its two pipes and its log file.

Light on purpose (the standard library and :mod:`~lightning_hpo.launch.processes.protocol`): the
supervisor starts every worker through :func:`spawn_worker`, and so does the launcher's early
start (:mod:`lightning_hpo.launch.processes.early`) before Optuna is imported.

A worker is ``python -m lightning_hpo.launch.worker`` in a session of its own (a terminal's
Ctrl-C reaches only the launcher, which then stops the workers in order), with the config's raw
mapping and its :class:`~lightning_hpo.launch.processes.protocol.WorkerSpec` as JSON in its
environment (not argv: a storage password stays out of ``ps``), without a SLURM task's variables
(:func:`~lightning_hpo.launch.config.slurm.worker_environment`), ``CUDA_VISIBLE_DEVICES`` set to its
GPUs on a GPU machine, and its threads to its share of the cores (``OMP_NUM_THREADS``). Its
output is appended to its slot's log.

**Priority.** A worker runs at the launcher's ``nice`` (``nice -n 10 python -m
lightning_hpo.launch`` on a shared machine). The process inherits it, but with the kernel's
autogroups (``CONFIG_SCHED_AUTOGROUP``, on by default on most distributions) a new session is
scheduled as a group at nice 0 beside every other, whatever its processes' nice, and the
workers, which do all the training, would take the machine as if not niced: their session's
autogroup gets the launcher's nice too (:func:`share_priority`).

Example::

    spec = WorkerSpec(slot=0, devices=(0,), kind="cpu", threads=1, launcher_pid=os.getpid(),
                      events_fd=-1, deadline=None, hold=True)
    worker = spawn_worker(cfg.raw, spec, Path("runs/quickstart/workers/slot0.log"))
    print(worker.reader.readline())   # its first event, a JSON line
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lightning_hpo.launch.config.devices import visible_gpus
from lightning_hpo.launch.config.slurm import worker_environment
from lightning_hpo.launch.processes.protocol import CONFIG_ENV, WORKER_ENV, WorkerSpec

__all__ = ["WorkerProcess", "share_priority", "spawn_worker"]


@dataclass
class WorkerProcess:
    """A started worker: its process, the read end of its event pipe (non-blocking) and the
    write end of its control pipe (the go line and stop orders)."""

    process: subprocess.Popen[bytes]
    reader: IO[str]
    control: int


def spawn_worker(raw: Mapping[str, Any], spec: WorkerSpec, log: Path) -> WorkerProcess:
    """Start the worker of ``spec``'s slot on the config ``raw``, its output appended to
    ``log`` (whose folder must exist). ``spec``'s ``events_fd`` and ``control_fd`` are replaced
    by the new pipes' ends.

    Raises:
        OSError: the log cannot be opened or the process cannot be started (nothing is left
            open).
    """
    events_read, events_write = os.pipe()
    control_read, control_write = os.pipe()
    spec = dataclasses.replace(spec, events_fd=events_write, control_fd=control_read)
    env = worker_environment(os.environ)  # not a SLURM task, whatever the launcher is
    env[CONFIG_ENV] = json.dumps(raw)
    env[WORKER_ENV] = json.dumps(dataclasses.asdict(spec))
    env["PYTHONUNBUFFERED"] = "1"
    if spec.kind == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = visible_gpus(
            spec.devices, os.environ.get("CUDA_VISIBLE_DEVICES")
        )
    # Its share of the cores, on GPU slots too: 8 trials on one GPU must not each start a
    # thread per core (the worker splits it with its data loader, devices.split_cores).
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(spec.threads)
    try:
        with open(log, "ab") as output:  # the child keeps its own descriptor
            process = subprocess.Popen(
                [sys.executable, "-m", "lightning_hpo.launch.worker"],
                env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                pass_fds=(events_write, control_read), start_new_session=True,
            )
    except BaseException:
        os.close(events_read)
        os.close(control_write)
        raise
    finally:
        os.close(events_write)
        os.close(control_read)
    share_priority(process.pid)
    reader = os.fdopen(events_read, "r")
    os.set_blocking(events_read, False)
    return WorkerProcess(process, reader, control_write)


def share_priority(pid: int) -> None:
    """Schedule process ``pid``, the leader of a session of its own, at this process's nice.

    Writes the nice into ``/proc/PID/autogroup`` when it is not 0; nothing on a kernel without
    autogroups (the process nice, inherited, is enough there) or where the kernel refuses.

    Example::

        child = subprocess.Popen(command, start_new_session=True)
        share_priority(child.pid)   # under `nice -n 10`: /proc/PID/autogroup says "nice 10"
    """
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if nice == 0:
        return
    try:
        with open(f"/proc/{pid}/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
    except OSError:  # no autogroups, the process already gone, or a negative nice refused
        pass
