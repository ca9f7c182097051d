"""Inside a SLURM allocation: what SLURM gave the launcher, and the environment its workers get.

The launcher is one SLURM task (one per node: ``sbatch`` runs it in the batch step, or ``srun
--ntasks-per-node=1`` starts one on each node). Its workers and their DDP ranks are its own
processes, not SLURM tasks, so they must not see the task's variables: Lightning would take
SLURM for their cluster environment, refuse ``devices=2`` against ``--ntasks-per-node=1``, read
its rank from ``SLURM_PROCID`` and install its own auto-requeue on SIGUSR1, which is the
launcher's stop signal. :func:`worker_environment` removes them and keeps the job's identity
(:data:`KEPT`) for whatever logs it. The launcher uses the CPUs SLURM allocated (the fewer of
its affinity and ``SLURM_CPUS_PER_TASK``/``SLURM_CPUS_ON_NODE``: :func:`usable_cores`; not every
cluster confines a job's affinity) and the GPUs SLURM made visible (``CUDA_VISIBLE_DEVICES``,
read as for any process).

Standard library only: the command line reads this before it imports anything heavy.

Example::

    >>> env = {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "1", "SLURM_PROCID": "0", "HOME": "/h"}
    >>> sorted(worker_environment(env))
    ['HOME', 'SLURM_JOB_ID']
    >>> slurm_job({"SLURM_JOB_ID": "42", "SLURM_CPUS_PER_TASK": "2"}).cpus
    2
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["KEPT", "SlurmJob", "describe", "slurm_job", "usable_cores", "worker_environment"]

#: The SLURM variables a worker keeps: the job's identity, which nothing reads to decide how to
#: train (Lightning reads ``SLURM_JOB_ID`` only once it took SLURM for its environment).
KEPT = frozenset({
    "SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT",
    "SLURM_CLUSTER_NAME", "SLURM_JOB_PARTITION", "SLURM_SUBMIT_DIR",
})
#: Prefixes of the variables of a SLURM task and of ``srun``'s/``sbatch``'s input variables.
_PREFIXES = ("SLURM_", "SRUN_", "SBATCH_", "SALLOC_")


@dataclass(frozen=True)
class SlurmJob:
    """What SLURM told this process in its environment.

    ``cpus`` is the number of CPUs allocated to this task on this node (None when SLURM did not
    say); ``gpus`` the GPUs it made visible (``CUDA_VISIBLE_DEVICES``, None when not set);
    ``restarts`` how often the job was requeued before this run (``SLURM_RESTART_COUNT``).
    """

    job_id: str
    array_task: str | None = None  # "3" in array job 41_3
    array_job_id: str | None = None
    restarts: int = 0
    cpus: int | None = None
    gpus: str | None = None
    node: str | None = None

    @property
    def name(self) -> str:
        """The job as ``squeue`` shows it: ``41_3`` for an array task, else ``42``."""
        if self.array_job_id and self.array_task is not None:
            return f"{self.array_job_id}_{self.array_task}"
        return self.job_id


def slurm_job(environ: Mapping[str, str] | None = None) -> SlurmJob | None:
    """The SLURM job this process runs in, None outside one (no ``SLURM_JOB_ID``)."""
    env = os.environ if environ is None else environ
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        return None
    return SlurmJob(
        job_id=job_id,
        array_task=env.get("SLURM_ARRAY_TASK_ID") or None,
        array_job_id=env.get("SLURM_ARRAY_JOB_ID") or None,
        restarts=_int(env.get("SLURM_RESTART_COUNT")) or 0,
        cpus=_allocated_cpus(env),
        gpus=env.get("CUDA_VISIBLE_DEVICES"),
        node=env.get("SLURMD_NODENAME") or None,
    )


def _allocated_cpus(env: Mapping[str, str]) -> int | None:
    """``SLURM_CPUS_PER_TASK`` (``-c``) when set; else the node's allocation
    (``SLURM_CPUS_ON_NODE``) divided among the tasks on the node."""
    per_task = _int(env.get("SLURM_CPUS_PER_TASK"))
    if per_task:
        return per_task
    on_node = _int(env.get("SLURM_CPUS_ON_NODE"))
    if not on_node:
        return None
    tasks = _int(re.split(r"[(,]", env.get("SLURM_NTASKS_PER_NODE", ""))[0]) or 1
    return max(1, on_node // tasks)


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def usable_cores(environ: Mapping[str, str] | None = None,
                 affinity: int | None = None) -> int:
    """The CPU cores the launcher may use: those it may run on (its affinity), no more than
    SLURM allocated to it inside a job.

    Example::

        >>> usable_cores({"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "1"}, affinity=16)
        1
        >>> usable_cores({}, affinity=16)
        16
    """
    cores = len(os.sched_getaffinity(0)) if affinity is None else affinity
    job = slurm_job(environ)
    if job is not None and job.cpus is not None:
        cores = min(cores, job.cpus)
    return cores


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the SLURM task's variables (all ``SLURM_*``, ``SRUN_*``, ``SBATCH_*``
    and ``SALLOC_*`` but :data:`KEPT`): a worker is not a SLURM task, and Lightning must not take
    it for one. The same mapping, copied, outside SLURM."""
    return {key: value for key, value in environ.items()
            if key in KEPT or not key.startswith(_PREFIXES)}


def describe(job: SlurmJob, affinity: int) -> str:
    """One line for ``--check`` and the run's start: the job, the CPUs and GPUs it uses.

    Example::

        >>> print(describe(SlurmJob("41", array_task="3", array_job_id="40", cpus=2), 16)[:64])
        SLURM job 40_3: 2 CPU(s) allocated (SLURM_CPUS_PER_TASK or SLURM
    """
    run = f" (requeued {job.restarts}x)" if job.restarts else ""
    if job.cpus is None:
        cpus = f"{affinity} CPU(s) by affinity (SLURM did not say how many it allocated)"
    elif job.cpus < affinity:
        cpus = (f"{job.cpus} CPU(s) allocated (SLURM_CPUS_PER_TASK or SLURM_CPUS_ON_NODE; "
                f"the affinity allows {affinity})")
    else:
        cpus = f"{affinity} CPU(s) by affinity"  # SLURM allocated as many or more
    gpus = f"CUDA_VISIBLE_DEVICES={job.gpus}" if job.gpus else "none visible"
    return (f"SLURM job {job.name}{run}: {cpus}, GPUs: {gpus}; workers run without the "
            "task's SLURM_* variables, so Lightning trains them as plain processes")
