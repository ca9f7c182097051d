"""The launcher on a real one-node SLURM cluster (``tests/helpers/slurm.py``), through the shipped
template ``examples/slurm/tune.sbatch``: an array of launchers on one PostgreSQL study, a job
warned by SLURM's signal and requeued, and a DDP config in an ``srun`` step.

Skipped with the reason where SLURM, MUNGE or root are missing (``scripts/ensure_slurm.sh``
installs them), unless ``LIGHTNING_HPO_REQUIRE_SLURM=1``, where the tests fail.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.slurm import SlurmCluster, start_or_skip
from helpers.support import TESTS, config_file, study_of, wait_for, wait_for_epochs
from optuna.trial import TrialState

from lightning_hpo.schema import ATTR, Segment

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

TEMPLATE = TESTS.parent / "examples" / "slurm" / "tune.sbatch"
#: Trials whose epochs take at least 0.4 s (8 steps of 50 ms): a signal sent once a trial has
#: reported its second epoch finds it training, however slowly the signal travels.
SLOW = {"name": "helpers.launch_models:SlowLeNet"}


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    """A cluster for this module's tests, stopped at its end."""
    with start_or_skip() as cluster:
        yield cluster


def _job_env(storage: str) -> dict[str, str]:
    """What the template reads, this checkout's package first on the path, then the tests'
    models (``helpers.launch_models``)."""
    return {"HPO_STORAGE": storage, "PYTHON": sys.executable,
            "PYTHONPATH": f"{TESTS.parent}:{TESTS}"}


def _submit(slurm: SlurmCluster, folder: Path, config: Path, storage: str, *args: str) -> str:
    result = slurm.run(["sbatch", "--parsable", f"--output={folder}/job-%A_%a.out", *args,
                        str(TEMPLATE), str(config)], cwd=folder, env=_job_env(storage))
    return result.stdout.strip().split(";")[0]


def _outputs(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in folder.glob("job-*.out"))


def _curves_complete(storage: str, n_trials: int, epochs: int) -> list[Any]:
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == n_trials, [t.state for t in trials]
    assert {t.state for t in trials} == {TrialState.COMPLETE}, [
        (t.state, t.user_attrs.get("fail_reason")) for t in trials]
    assert all(sorted(t.intermediate_values) == list(range(1, epochs + 1)) for t in trials)
    return trials


@pytest.mark.postgres
def test_an_array_of_launchers_runs_one_postgres_study_exactly(
    slurm: SlurmCluster, tmp_path: Path, postgres_server: Any,
) -> None:
    """``sbatch --array=0-1 -c1``: two launchers (one CPU each, one slot each) on one study
    finish exactly ``n_trials`` between them, each trial's curve complete. Each launcher's
    trials wait until the other's have started (``MeetsAnotherLauncher``): the first launcher
    once ran all six before the second had imported torch."""
    url = postgres_server.new_database("slurm_array")
    config = config_file(tmp_path, storage=url, stop={"n_trials": 6},
                         model={"name": "helpers.launch_models:MeetsAnotherLauncher"},
                         trainer={"max_epochs": 3, "limit_train_batches": 4,
                                  "limit_val_batches": 2})
    job = _submit(slurm, tmp_path, config, url, "--array=0-1", "--cpus-per-task=1")
    tasks = slurm.wait(job, timeout=400)
    out = _outputs(tmp_path)
    assert [(t.state, t.exit_code) for t in tasks] == [("COMPLETED", 0)] * 2, out
    trials = _curves_complete(url, 6, 3)
    assert len({t.user_attrs["launcher_pid"] for t in trials}) == 2, out
    assert f"SLURM job {job}_0: 1 CPU(s)" in out and f"SLURM job {job}_1: 1 CPU(s)" in out, out


def test_slurms_warning_pauses_the_trials_and_the_requeued_job_resumes_them(
    slurm: SlurmCluster, tmp_path: Path,
) -> None:
    """SIGUSR1 to the batch script (what ``--signal=B:USR1@120`` sends before the time limit):
    the running trials pause at their last checkpoint, the template requeues the job, and its
    second run resumes them from there: nothing lost, exactly ``n_trials``."""
    storage = str(tmp_path / "t.journal")
    config = config_file(tmp_path, stop={"n_trials": 4}, devices={"accelerator": "cpu"},
                         model=SLOW, trainer={"max_epochs": 8, "limit_train_batches": 8,
                                              "limit_val_batches": 2})
    job = _submit(slurm, tmp_path, config, storage, "--cpus-per-task=2")
    wait_for_epochs(storage)
    slurm.run(["scancel", "--batch", "--signal=USR1", job])
    (info,) = slurm.wait(job, timeout=400)
    out = _outputs(tmp_path)
    assert (info.state, info.exit_code, info.restarts) == ("COMPLETED", 0, 1), out
    assert "trials paused (exit 138); requeueing job" in out
    assert f"SLURM job {job} (requeued 1x)" in out
    trials = _curves_complete(storage, 4, 8)
    resumed = 0
    for trial in trials:
        segments = [Segment.read(s) for s in trial.user_attrs.get(ATTR.SEGMENTS, [])]
        for before, after in zip(segments, segments[1:], strict=False):
            assert before.how == "interrupted" and after.from_epoch == before.to_epoch, segments
            resumed += 1
    assert resumed >= 1, "no trial was running when SLURM's signal came"


def test_a_ddp_config_in_an_srun_step_has_no_failed_trial(slurm: SlurmCluster, tmp_path: Path
                                                          ) -> None:
    """``srun -n1 -c2 python -m lightning_hpo.launch`` with 2 devices per trial: the step's
    variables (``SLURM_NTASKS=1``) no longer make Lightning refuse ``devices=2``."""
    storage = str(tmp_path / "t.journal")
    config = config_file(tmp_path, devices={"accelerator": "cpu", "per_trial": 2},
                         stop={"n_trials": 2})
    result = slurm.run(["srun", "--ntasks=1", "--cpus-per-task=2", sys.executable, "-m",
                        "lightning_hpo.launch", str(config), "--quiet"], cwd=tmp_path,
                       env=_job_env(storage), timeout=400, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 CPU(s)" in result.stdout and "SLURM job" in result.stdout, result.stdout
    _curves_complete(storage, 2, 2)


def test_sigterm_to_every_process_of_a_ddp_job_pauses_and_the_requeued_job_resumes(
    slurm: SlurmCluster, tmp_path: Path,
) -> None:
    """Preemption or the time limit without an early warning: SLURM sends SIGTERM to every
    process of the job at once, DDP ranks included (``scancel --full``). The ranks used to hang
    for 30 s (Lightning's handler started a collective in one rank while the other was in its
    backward pass), longer than SLURM's KillWait; now rank 0 decides and both leave at the same
    batch, the launcher exits 143 within seconds and the requeued job resumes the trial."""
    storage = str(tmp_path / "t.journal")
    config = config_file(tmp_path, stop={"n_trials": 3},
                         devices={"accelerator": "cpu", "per_trial": 2}, model=SLOW,
                         trainer={"max_epochs": 8, "limit_train_batches": 8,
                                  "limit_val_batches": 2})
    job = _submit(slurm, tmp_path, config, storage, "--cpus-per-task=2")
    wait_for_epochs(storage)
    signalled = time.monotonic()
    slurm.run(["scancel", "--full", "--signal=TERM", job])
    wait_for(lambda: "requeueing job" in _outputs(tmp_path), timeout=120, what="the requeue")
    stopping = time.monotonic() - signalled
    assert stopping < 20, f"the launcher took {stopping:.1f} s to stop (the 30-s DDP hang?)"
    (info,) = slurm.wait(job, timeout=400)
    out = _outputs(tmp_path)
    assert (info.state, info.exit_code, info.restarts) == ("COMPLETED", 0, 1), out
    assert "trials paused (exit 143); requeueing job" in out
    trials = _curves_complete(storage, 3, 8)
    stories = [[Segment.read(s) for s in t.user_attrs[ATTR.SEGMENTS]] for t in trials]
    (segments,) = [story for story in stories if len(story) > 1]  # the one slot's trial
    assert [s.how for s in segments] == ["interrupted", "complete"], stories
    # Resumed from a checkpoint it had written by then (under DDP it may lag the epochs the
    # interrupted segment reported: noted as open work), and never from scratch.
    assert 1 <= segments[1].from_epoch <= segments[0].to_epoch, segments
