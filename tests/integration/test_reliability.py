"""Faults: random SIGKILLs of workers during a 40-trial study, a killed launcher resumed, and
checkpoints that cannot be written (a full disk, a file-size limit).

Whatever happens, every trial ends COMPLETE, PRUNED or FAIL with a reason, none is left
RUNNING, the count is exact, and the best trial is reproducible from its stored params.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from helpers.support import FINISHED, INITIAL, config_file, env, finish, launch, popen, study_of
from optuna.trial import TrialState

from lightning_hpo.launch.config import load_config
from lightning_hpo.launch.worker.training import replay
from lightning_hpo.schema import ATTR

pytestmark = pytest.mark.slow


def _running_pids(storage: str) -> list[int]:
    try:
        trials = study_of(storage).get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    except (KeyError, ValueError, OSError, optuna.exceptions.OptunaError):
        return []  # the launcher has not created the study yet
    return [t.user_attrs["pid"] for t in trials
            if "pid" in t.user_attrs and t.user_attrs.get(ATTR.PAUSED) is None]


def test_forty_trials_survive_ten_random_worker_kills(tmp_path: Path) -> None:
    n_trials, kills = 40, 10
    config = config_file(
        tmp_path, pruner={"name": "asha", "min_resource": 1, "max_resource": 4},
        trainer={"limit_train_batches": 10, "limit_val_batches": 2}, stop={"n_trials": n_trials},
    )
    storage = str(tmp_path / "t.journal")
    process = popen(str(config), "--quiet", cwd=tmp_path)
    rng = random.Random(0)
    killed: set[int] = set()
    deadline = time.time() + 600
    while len(killed) < kills and process.poll() is None and time.time() < deadline:
        pids = [pid for pid in _running_pids(storage) if pid not in killed]
        if not pids:
            time.sleep(0.2)
            continue
        # A random moment of the trial; short, so that 10 kills land well before 40 trials end
        # (a killed slot needs seconds to start a new worker, and trials take about a second).
        # The victim is one still training after the wait: a trial pruned at its first rung
        # ends within it, and a kill between two trials would be no trial's.
        time.sleep(rng.uniform(0.0, 0.6))
        pids = [pid for pid in _running_pids(storage) if pid not in killed]
        if not pids:
            continue
        victim = rng.choice(pids)
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed.add(victim)
    out = finish(process, timeout=900)
    assert process.returncode == 0, out[-3000:]
    assert len(killed) >= kills, f"only {len(killed)} kills happened"
    study = study_of(storage)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == n_trials and [t.number for t in trials] == list(range(n_trials))
    assert {t.state for t in trials} <= FINISHED
    # A killed trial resumes from its last checkpoint (stop.max_retries: 2); only a trial
    # killed three times ends FAIL, with every attempt's reason.
    attempts = [a for t in trials for a in t.user_attrs.get(ATTR.ATTEMPTS, [])]
    by_kill = [a for a in attempts if "was killed by SIGKILL" in a]
    assert len(by_kill) >= kills - 1  # a kill may land just as its trial was being told
    for trial in trials:
        if trial.state == TrialState.FAIL:
            assert len(trial.user_attrs[ATTR.ATTEMPTS]) == 3, trial.user_attrs
            continue
        steps = sorted(trial.intermediate_values)
        assert steps == list(range(1, len(steps) + 1)), (trial.number, steps)
    best = study.best_trial
    cfg = load_config(config)
    assert replay(cfg, best.params, best.number, str(tmp_path / "replay")) == pytest.approx(
        best.value, abs=1e-6
    )


def test_a_killed_launcher_resumes_without_losing_or_duplicating(tmp_path: Path) -> None:
    n_trials = 8
    # Epochs of at least 0.4 s (SlowLeNet): a trial seen RUNNING is still training when the
    # launcher is killed, rather than both workers being between trials.
    config = config_file(tmp_path, model={"name": "helpers.launch_models:SlowLeNet"},
                         trainer={"max_epochs": 4, "limit_train_batches": 8,
                                  "limit_val_batches": 2}, stop={"n_trials": n_trials})
    storage = str(tmp_path / "t.journal")
    process = popen(str(config), "--quiet", cwd=tmp_path)
    limit = time.time() + 300
    while time.time() < limit:
        states = _states_so_far(storage)
        if states.count(TrialState.COMPLETE) >= 2 and TrialState.RUNNING in states:
            break
        time.sleep(0.3)
    os.kill(process.pid, signal.SIGKILL)  # the launcher alone; its workers live on
    process.communicate(timeout=60)
    # Its workers notice the launcher is gone, pause their trials and leave.
    limit = time.time() + 120
    while _running_pids(storage) and time.time() < limit:
        time.sleep(0.3)
    again = popen(str(config), "--quiet", cwd=tmp_path)
    out = finish(again)
    assert again.returncode == 0, out[-3000:]
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == n_trials and [t.number for t in trials] == list(range(n_trials))
    assert {t.state for t in trials} == {TrialState.COMPLETE}  # the paused ones resumed
    interrupted = [t for t in trials
                   if any(s["how"] == "interrupted" for s in t.user_attrs[ATTR.SEGMENTS])]
    assert interrupted
    for trial in trials:
        assert sorted(trial.intermediate_values) == [1, 2, 3, 4]
    assert sum(t.params == INITIAL for t in trials) == 1


def _states_so_far(storage: str) -> list[TrialState]:
    """The trials' states, none while the launcher has not created the study yet (the journal
    file exists a moment before the study's first record does)."""
    if not Path(storage).exists():
        return []
    try:
        return [t.state for t in study_of(storage).get_trials(deepcopy=False)]
    except KeyError:  # optuna: "Record does not exist." (no study of that name yet)
        return []


def _mount_tmpfs(where: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` at ``where`` (root only); False where that is not possible."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, check=False)
    return done.returncode == 0


def test_a_full_disk_fails_the_trial_whose_checkpoint_it_cannot_hold(tmp_path: Path) -> None:
    """Trial 2's folder is a 64 KiB tmpfs: its logs fit, its checkpoint does not. The trial ends
    FAIL naming the checkpoint and the problem in one line, no truncated checkpoint is left, and
    the same worker runs the rest of the study."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 1},
                         stop={"n_trials": 4})
    folder = tmp_path / "runs" / "t" / "trial_00002"
    folder.mkdir(parents=True)
    if not _mount_tmpfs(folder, "64k"):
        pytest.skip("needs root and mount for a tmpfs (the file-size-limit test runs anywhere)")
    try:
        result = launch(str(config), "--quiet", cwd=tmp_path)
        leftovers = [path.name for path in folder.iterdir() if path.suffix == ".ckpt"]
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE", "FAIL", "COMPLETE"]
    assert trials[2].user_attrs["fail_reason"] == (
        f"CheckpointWriteError: cannot write checkpoint {folder / 'best.ckpt'}: "
        "No space left on device"
    )
    assert leftovers == []
    assert len({t.user_attrs["pid"] for t in trials}) == 1  # the worker went on


def test_a_checkpoint_over_the_file_size_limit_fails_its_trial(tmp_path: Path) -> None:
    """The launcher runs under a 128 KiB file-size limit (RLIMIT_FSIZE): the study's journal and
    the logs fit, no LeNet checkpoint (about 250 KB) does. Each trial ends FAIL with the reason,
    the worker goes on to the next, and none is left RUNNING."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 1},
                         stop={"n_trials": 3})
    limit = 128 * 1024
    # The limit is set by a small program that then becomes the launcher (exec), not by a
    # preexec_fn: that would fork the test process (see helpers.support.ctrl_c_reaches_children).
    limited = ("import os, resource, sys; limit = int(sys.argv[1]); "
               "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
               "os.execv(sys.executable, [sys.executable, '-m', 'lightning_hpo.launch', "
               "*sys.argv[2:]])")
    result = subprocess.run(
        [sys.executable, "-c", limited, str(limit), str(config), "--quiet"], cwd=tmp_path,
        env=env(), capture_output=True, text=True, timeout=420,
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "No trial completed yet." in result.stdout
    assert result.stderr.startswith("error: every trial of this run failed (3 of 3); the first, "
                                    "trial 0: CheckpointWriteError: cannot write checkpoint ")
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["FAIL"] * 3
    for trial in trials:
        assert trial.user_attrs["fail_reason"] == (
            "CheckpointWriteError: cannot write checkpoint "
            f"{tmp_path / 'runs' / 't' / f'trial_{trial.number:05d}' / 'best.ckpt'}: "
            "File too large"
        )
    assert len({t.user_attrs["pid"] for t in trials}) == 1
