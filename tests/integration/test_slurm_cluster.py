"""The throwaway one-node SLURM cluster of ``tests/helpers/slurm.py`` works as a real one would:
steps, batch jobs, arrays, signals, requeue, and it leaves nothing behind.

Skipped with the reason where SLURM, MUNGE or root are missing (``scripts/ensure_slurm.sh``
installs them), unless ``LIGHTNING_HPO_REQUIRE_SLURM=1``, where the tests fail.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.slurm import SlurmCluster, start_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.slurm]


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    """A cluster for this module's tests, stopped at its end."""
    with start_or_skip() as cluster:
        yield cluster


def script(folder: Path, body: str, name: str = "job.sh") -> Path:
    """An executable bash script ``folder/name`` running ``body`` in ``folder``."""
    path = folder / name
    path.write_text(f"#!/bin/bash\ncd {folder}\n{body}")
    path.chmod(0o755)
    return path


def wait_for_text(path: Path, text: str, timeout: float = 30) -> None:
    """Wait until ``path`` holds ``text`` (a job got as far as writing it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never held {text!r}")


def slurm_env(path: Path) -> dict[str, str]:
    """``NAME=value`` lines of ``env`` output, as a dict."""
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie waiting for init to reap it counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_srun_runs_a_step(slurm: SlurmCluster) -> None:
    assert slurm.run(["srun", "hostname"]).stdout.strip() == socket.gethostname()
    env = dict(line.split("=", 1) for line in slurm.run(["srun", "-c1", "env"]).stdout.split("\n")
               if line.startswith("SLURM"))
    assert env["SLURM_CONF"] == str(slurm.conf)
    assert (env["SLURM_STEP_ID"], env["SLURM_PROCID"], env["SLURM_NTASKS"]) == ("0", "0", "1")
    assert env["SLURM_CPUS_PER_TASK"] == "1"
    assert env["SLURM_CPU_BIND_LIST"] == "0x1"  # task/affinity binds the task to its CPU
    if slurm.cpus >= 2:
        ranks = slurm.run(["srun", "-n2", "-c1", "bash", "-c", "echo $SLURM_PROCID"]).stdout
        assert sorted(ranks.split()) == ["0", "1"]


def test_sbatch_job_completes(slurm: SlurmCluster, tmp_path: Path) -> None:
    job_script = script(tmp_path, (
        'echo "hello from $SLURM_JOB_ID"\n'
        "env | grep ^SLURM | sort > batch_env.txt\n"
        "srun env | grep ^SLURM | sort > step_env.txt\n"
        "nproc > nproc.txt\n"
    ))
    job = slurm.sbatch(job_script, "-c1", "-o", str(tmp_path / "out.txt"))
    (info,) = slurm.wait(job)
    assert (info.state, info.exit_code, info.restarts) == ("COMPLETED", 0, 0)
    assert (tmp_path / "out.txt").read_text() == f"hello from {job}\n"
    batch = slurm_env(tmp_path / "batch_env.txt")
    assert batch["SLURM_JOB_ID"] == job
    assert batch["SLURM_CONF"] == str(slurm.conf)  # scontrol inside a job reaches this cluster
    assert batch["SLURM_JOB_NODELIST"] == slurm.node
    assert batch["SLURM_CPUS_PER_TASK"] == "1"
    assert "SLURM_RESTART_COUNT" not in batch  # set from the first requeue on
    assert "SLURM_NTASKS" not in batch  # a batch job without -n has no SLURM_NTASKS
    step = slurm_env(tmp_path / "step_env.txt")
    assert (step["SLURM_STEP_ID"], step["SLURM_NTASKS"]) == ("0", "1")
    assert (tmp_path / "nproc.txt").read_text().strip() == "1"  # bound to its one CPU


def test_array_tasks_run_side_by_side(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Each task waits (up to 60 s) for the other to start: both hold a CPU at once (CR_CPU).
    job_script = script(tmp_path, (
        "echo $SLURM_ARRAY_TASK_ID > task.$SLURM_ARRAY_TASK_ID\n"
        "other=task.$((1 - SLURM_ARRAY_TASK_ID))\n"
        "for _ in $(seq 600); do [ -e $other ] && break; sleep 0.1; done\n"
        "[ -e $other ] && echo together\n"
    ))
    job = slurm.sbatch(job_script, "--array=0-1", "-c1", "-o", str(tmp_path / "out.%a"))
    infos = slurm.wait(job)
    assert [(info.array_job_id, info.array_task_id, info.state) for info in infos] == [
        (job, "0", "COMPLETED"), (job, "1", "COMPLETED")]
    assert [(tmp_path / f"task.{task}").read_text() for task in (0, 1)] == ["0\n", "1\n"]
    if slurm.cpus >= 2:
        assert [(tmp_path / f"out.{task}").read_text() for task in (0, 1)] == ["together\n"] * 2


@pytest.mark.parametrize("how", ["--batch", "--full"])
def test_scancel_signal_reaches_batch_script(
    slurm: SlurmCluster, tmp_path: Path, how: str
) -> None:
    """``scancel --signal=TERM`` alone signals the job's steps only (a batch script without
    ``srun`` steps gets nothing); ``--batch`` signals the batch shell, ``--full`` every process
    of the job (here ``sleep`` too, which bash reports as ``Terminated``)."""
    job_script = script(tmp_path, (
        "trap 'echo got TERM; exit 3' TERM\n"
        "echo started\n"
        "while true; do sleep 0.1; done\n"
    ))
    out = tmp_path / "out.txt"
    job = slurm.sbatch(job_script, "-o", str(out))
    wait_for_text(out, "started")
    slurm.run(["scancel", "--signal=TERM", job])
    time.sleep(1)
    assert slurm.jobs(job)[0].state == "RUNNING" and "got TERM" not in out.read_text()
    slurm.run(["scancel", how, "--signal=TERM", job])
    (info,) = slurm.wait(job, timeout=30)
    assert (info.state, info.exit_code, info.exit_signal) == ("FAILED", 3, 0)
    assert "got TERM" in out.read_text()


@pytest.mark.parametrize("when", ["running", "finished", "from_inside"])
def test_requeue_runs_job_again(slurm: SlurmCluster, tmp_path: Path, when: str) -> None:
    """``scontrol requeue JOB`` of a running job (killed first), of one that has ended, and by
    the job itself (Lightning's auto-requeue does this): the job runs again after
    ``REQUEUE_DELAY_S`` with ``SLURM_RESTART_COUNT=1``, and ``Restarts=1``."""
    first_run = {
        "running": "echo started; while true; do sleep 0.1; done",
        "finished": "exit 1",
        "from_inside": "scontrol requeue $SLURM_JOB_ID; while true; do sleep 0.1; done",
    }[when]
    job_script = script(tmp_path, (
        'echo "run restart=${SLURM_RESTART_COUNT:-unset}"\n'
        f'if [ -z "${{SLURM_RESTART_COUNT:-}}" ]; then {first_run}; fi\n'
    ))
    out = tmp_path / "out.txt"
    job = slurm.sbatch(job_script, "-o", str(out), "--open-mode=append")
    if when == "running":
        wait_for_text(out, "started")
        slurm.run(["scontrol", "requeue", job])
    elif when == "finished":
        (info,) = slurm.wait(job)
        assert (info.state, info.exit_code) == ("FAILED", 1)
        slurm.run(["scontrol", "requeue", job])
    (info,) = slurm.wait(job, timeout=40)
    assert (info.state, info.exit_code, info.restarts) == ("COMPLETED", 0, 1)
    runs = [line for line in out.read_text().splitlines() if line.startswith("run ")]
    assert runs == ["run restart=unset", "run restart=1"]


def test_stop_ends_daemons_and_jobs(tmp_path: Path) -> None:
    cluster = start_or_skip()
    with cluster:
        pids = cluster.pids
        assert sorted(pids) == ["munged", "slurmctld", "slurmd"]
        job_script = script(tmp_path, "echo $$ > pid\nwhile true; do sleep 0.1; done\n")
        cluster.sbatch(job_script, "-o", str(tmp_path / "out.txt"))
        wait_for_text(tmp_path / "pid", "\n")
        job_pid = int((tmp_path / "pid").read_text())
        assert not gone(job_pid)
    assert all(gone(pid) for pid in pids.values()), pids
    assert gone(job_pid)
    assert not cluster.root.exists()
    cluster.stop()  # a second stop does nothing
    marker = f"SLURM_CONF={cluster.conf}".encode()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        assert marker not in environ.split(b"\0"), f"pid {entry} of the stopped cluster"
