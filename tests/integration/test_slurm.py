"""Inside a SLURM allocation without a cluster: what SLURM's variables tell the launcher
(:mod:`lightning_hpo.launch.config.slurm`, pure), and real launcher runs under the variables a batch
step has, where Lightning used to refuse every DDP trial. The runs on a real one-node cluster are
``test_slurm_cluster.py``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.support import (
    children_by_parent,
    config_file,
    env,
    finish,
    states,
    study_of,
    wait_for,
    wait_for_epochs,
)
from optuna.trial import TrialState

from lightning_hpo.launch.config.slurm import (
    KEPT,
    SlurmJob,
    describe,
    slurm_job,
    usable_cores,
    worker_environment,
)
from lightning_hpo.schema import ATTR

#: What a one-task batch step sets (the issue's reproduction), with its CPUs.
BATCH_STEP = {
    "SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "tune", "SLURM_NTASKS": "1",
    "SLURM_NTASKS_PER_NODE": "1", "SLURM_NODELIST": "localhost", "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NNODES": "1", "SLURM_CPUS_ON_NODE": "2",
}


# -- pure: the job, its CPUs, the workers' environment ----------------------------------------


def test_outside_slurm_there_is_no_job_and_the_environment_is_kept() -> None:
    environ = {"HOME": "/h", "PATH": "/bin", "SLURMISH": "x", "MY_SLURM_NOTE": "y"}
    assert slurm_job(environ) is None
    assert worker_environment(environ) == environ
    assert usable_cores(environ, affinity=3) == 3


def test_the_workers_lose_every_task_variable_and_keep_the_jobs_identity() -> None:
    environ = {**BATCH_STEP, "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "2",
               "SLURM_RESTART_COUNT": "1", "SLURM_STEP_ID": "0", "SRUN_DEBUG": "3",
               "SBATCH_PARTITION": "gpu", "SALLOC_TIMELIMIT": "5", "HOME": "/h",
               "CUDA_VISIBLE_DEVICES": "0,1"}
    kept = worker_environment(environ)
    assert kept == {"SLURM_JOB_ID": "42", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "2",
                    "SLURM_RESTART_COUNT": "1", "HOME": "/h", "CUDA_VISIBLE_DEVICES": "0,1"}
    # Lightning's SLURM detection and its rank both read variables that are gone.
    assert not {"SLURM_NTASKS", "SLURM_PROCID", "SLURM_JOB_NAME"} & set(kept)
    assert all(name.startswith("SLURM_") for name in KEPT)


@pytest.mark.parametrize(("variables", "cpus"), [
    ({"SLURM_CPUS_PER_TASK": "3", "SLURM_CPUS_ON_NODE": "8"}, 3),  # -c 3
    ({"SLURM_CPUS_ON_NODE": "8"}, 8),  # the whole node's allocation, one task
    ({"SLURM_CPUS_ON_NODE": "8", "SLURM_NTASKS_PER_NODE": "2"}, 4),  # srun's 2 launchers a node
    ({"SLURM_CPUS_ON_NODE": "8", "SLURM_NTASKS_PER_NODE": "4(x2)"}, 2),  # SLURM's compressed form
    ({"SLURM_CPUS_ON_NODE": "1", "SLURM_NTASKS_PER_NODE": "4"}, 1),  # never 0
    ({}, None),  # SLURM did not say
    ({"SLURM_CPUS_PER_TASK": "two"}, None),  # not a number: not believed
])
def test_the_cpus_slurm_allocated(variables: dict[str, str], cpus: int | None) -> None:
    job = slurm_job({"SLURM_JOB_ID": "7", **variables})
    assert job is not None and job.cpus == cpus
    expected = 16 if cpus is None else min(cpus, 16)
    assert usable_cores({"SLURM_JOB_ID": "7", **variables}, affinity=16) == expected
    assert usable_cores({"SLURM_JOB_ID": "7", **variables}, affinity=1) == 1  # affinity binds


def test_the_job_is_named_as_squeue_shows_it_and_described_in_one_line() -> None:
    task = slurm_job({"SLURM_JOB_ID": "41", "SLURM_ARRAY_JOB_ID": "40",
                      "SLURM_ARRAY_TASK_ID": "1", "SLURM_RESTART_COUNT": "2",
                      "SLURM_CPUS_PER_TASK": "1", "CUDA_VISIBLE_DEVICES": "3"})
    assert task == SlurmJob("41", array_task="1", array_job_id="40", restarts=2, cpus=1,
                            gpus="3")
    line = describe(task, affinity=4)
    assert line.startswith("SLURM job 40_1 (requeued 2x): 1 CPU(s) allocated")
    assert "the affinity allows 4" in line and "GPUs: CUDA_VISIBLE_DEVICES=3" in line
    assert "\n" not in line
    plain = describe(SlurmJob("42", cpus=8), affinity=2)
    assert plain.startswith("SLURM job 42: 2 CPU(s) by affinity, GPUs: none visible")
    unknown = describe(SlurmJob("42"), affinity=2)
    assert "2 CPU(s) by affinity (SLURM did not say how many it allocated)" in unknown


# -- the launcher under a batch step's variables -------------------------------------------------


def _slurm_env(**extra: str) -> dict[str, str]:
    return {**env(), **BATCH_STEP, **extra}


def _run(args: list[str], cwd: Path, environ: dict[str, str], timeout: float = 300
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lightning_hpo.launch", *args], cwd=cwd,
                          env=environ, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_ddp_trials_run_inside_a_one_task_allocation(tmp_path: Path) -> None:
    """The issue's reproduction: devices=2 per trial with SLURM's one-task variables set.
    Lightning refused every trial ("number of tasks per node ... does not match"); now the
    workers do not see the task's variables and every trial completes."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "per_trial": 2},
                         stop={"n_trials": 2})
    check = _run([str(config), "--check"], tmp_path, _slurm_env())
    assert check.returncode == 0, check.stderr
    assert "SLURM job 42: 2 CPU(s) by affinity" in check.stdout or (
        "SLURM job 42: 2 CPU(s) allocated" in check.stdout), check.stdout
    result = _run([str(config), "--quiet"], tmp_path, _slurm_env())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2, [
        t.user_attrs.get("fail_reason") for t in trials]
    log = (tmp_path / "runs" / "t" / "workers" / "slot0.log").read_text()
    assert "tasks per node" not in log and "srun" not in log, log[-3000:]


@pytest.mark.slow
def test_the_slots_fit_the_cpus_slurm_allocated(tmp_path: Path) -> None:
    """``-c 1`` on a machine with more cores: one slot, not one per core."""
    config = config_file(tmp_path, stop={"n_trials": 1})
    result = _run([str(config), "--check"], tmp_path, _slurm_env(SLURM_CPUS_PER_TASK="1"))
    assert result.returncode == 0, result.stderr
    assert "1 slot(s) on 1 cpu device(s)" in result.stdout, result.stdout
    assert "SLURM job 42: 1 CPU(s)" in result.stdout
    too_many = _run([str(config), "--check", "--set", "devices.count=2"], tmp_path,
                    _slurm_env(SLURM_CPUS_PER_TASK="1"))
    assert too_many.returncode == 2
    assert too_many.stderr.strip() == (
        "error: devices.count: is 2, but only 1 cpu device(s) exist"), too_many.stderr


@pytest.mark.slow
def test_slurms_early_signal_pauses_the_trials_and_the_requeued_job_resumes_them(
    tmp_path: Path,
) -> None:
    """SIGUSR1 (``--signal=B:USR1@120``, forwarded by the batch script) pauses the running
    trials at their last checkpoint and exits 138, which the template requeues on; the next run
    (SLURM_RESTART_COUNT=1) resumes them and nothing is trained twice."""
    config = config_file(tmp_path, trainer={"max_epochs": 6}, stop={"n_trials": 4},
                         devices={"accelerator": "cpu", "count": 2})
    storage = str(tmp_path / "t.journal")
    process = subprocess.Popen(
        [sys.executable, "-m", "lightning_hpo.launch", str(config), "--quiet"], cwd=tmp_path,
        env=_slurm_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    wait_for(lambda: states(study_of(storage))["RUNNING"] >= 1
             and any(t.intermediate_values for t in study_of(storage).get_trials()),
             what="a running trial with an epoch")
    process.send_signal(signal.SIGUSR1)
    out = finish(process, timeout=120)
    assert process.returncode == 128 + signal.SIGUSR1, out[-3000:]
    assert "stopped: stopped by SIGUSR1" in out
    study = study_of(storage)
    assert states(study)["FAIL"] == 0
    paused = [t for t in study.get_trials(deepcopy=False) if ATTR.PAUSED in t.user_attrs]
    assert paused and all(t.user_attrs[ATTR.PAUSED]["why"].startswith("interrupted:")
                          for t in paused)

    again = _run([str(config)], tmp_path, _slurm_env(SLURM_RESTART_COUNT="1"))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "SLURM job 42 (requeued 1x)" in again.stdout
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == 4 and {t.state for t in trials} == {TrialState.COMPLETE}
    assert all(sorted(t.intermediate_values) == list(range(1, 7)) for t in trials)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGUSR1"])
def test_a_signal_while_starting_is_one_line_and_writes_nothing(tmp_path: Path, name: str
                                                                ) -> None:
    """SLURM's signals before the first trial: the same as Ctrl-C's (one line, 128 + its
    number, no study, no folder), not a traceback or a silent death."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 1})
    process = subprocess.Popen(
        [sys.executable, "-m", "lightning_hpo.launch", str(config), "--quiet"], cwd=tmp_path,
        env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "runs" / "t" / "workers" / "slot0.log"
    wait_for(log.exists, timeout=60, what="the worker's log")
    sig = signal.Signals[name]
    os.kill(process.pid, sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + sig, err
    assert err.strip().splitlines() == [f"stopped by {name} while starting; no trial had started"]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "t.journal").exists()


@pytest.mark.slow
def test_sigterm_to_every_process_of_a_ddp_slot_stops_it_at_once(tmp_path: Path) -> None:
    """What SLURM does at a time limit or on preemption: SIGTERM to the launcher, its worker
    and the worker's DDP rank at the same moment. Lightning's own handler made the rank start
    a collective while rank 0 was in its backward pass, and both hung until the launcher killed
    them 30 s later (past SLURM's KillWait, so the job died unrequeued); now rank 0 decides and
    both ranks leave at the same batch."""
    config = config_file(tmp_path, stop={"n_trials": 3},
                         devices={"accelerator": "cpu", "per_trial": 2},
                         # 0.4 s an epoch at least
                         model={"name": "helpers.launch_models:SlowLeNet"},
                         trainer={"max_epochs": 8, "limit_train_batches": 8,
                                  "limit_val_batches": 2})
    storage = str(tmp_path / "t.journal")
    process = subprocess.Popen(
        [sys.executable, "-m", "lightning_hpo.launch", str(config), "--quiet"], cwd=tmp_path,
        env=_slurm_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    wait_for_epochs(storage)
    tree, todo, children = [], [process.pid], children_by_parent()
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    assert len(tree) >= 3, tree  # the launcher, the worker (rank 0), its rank 1
    signalled = time.monotonic()
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    out = finish(process, timeout=120)
    stopping = time.monotonic() - signalled
    assert process.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert stopping < 20, f"it took {stopping:.1f} s to stop (the 30-s DDP hang?)"
    study = study_of(storage)
    assert states(study)["FAIL"] == 0
    (paused,) = [t for t in study.get_trials(deepcopy=False) if ATTR.PAUSED in t.user_attrs]
    # At its last checkpoint: epoch 2's may still be on its way when the signal comes.
    assert paused.user_attrs[ATTR.PAUSED]["epoch"] >= 1
