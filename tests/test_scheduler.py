"""Pause and resume through the launcher, with real processes on CPU: one round of synchronous
successive halving (34 epochs with checkpoints, 58 retrained from scratch), promotion-type ASHA,
a worker killed mid-trial and resumed elsewhere, a launcher killed with paused trials and run
again, two launchers sharing one synchronous round on PostgreSQL."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
from _support import config_file, finish, launch, popen, study_of, wait_for
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo.schema import ATTR

pytestmark = pytest.mark.slow

SYNC = {"name": "sync_sh", "min_resource": 2, "max_resource": 10, "reduction_factor": 2}


def _curve_is_whole(trial: FrozenTrial) -> None:
    """One intermediate value per epoch, 1..its last epoch, none twice or missing."""
    steps = sorted(trial.intermediate_values)
    assert steps == list(range(1, len(steps) + 1)), (trial.number, steps)
    assert trial.user_attrs[ATTR.EPOCHS] == len(steps), (trial.number, trial.user_attrs)
    assert len(trial.user_attrs[ATTR.EPOCH_END_TIMES]) == len(steps)


def _run_sync(tmp_path: Path, storage: str, **fields: Any) -> optuna.Study:
    config = config_file(
        tmp_path, storage=storage, pruner=fields.pop("pruner", SYNC),
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 8}, **fields,
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return study_of(storage)


@pytest.mark.parametrize(
    ("resume", "storage_kind", "direction", "epochs"),
    [(True, "journal", "minimize", 34), (False, "sqlite", "maximize", 58)],
    ids=["resume-journal-minimize", "retrain-sqlite-maximize"],
)
def test_one_round_of_sync_sh_trains_34_epochs_with_checkpoints_58_without(
    tmp_path: Path, resume: bool, storage_kind: str, direction: str, epochs: int
) -> None:
    """r_min 2, r_max 10, eta 2, 8 configurations: rungs 2, 4, 8, 10 hold 8, 4, 2, 1; continued
    from checkpoints the round costs 34 epochs, retrained from scratch (textbook) 58."""
    storage = (str(tmp_path / "t.journal") if storage_kind == "journal"
               else f"sqlite:///{tmp_path / 't.db'}")
    study = _run_sync(tmp_path, storage, pruner={**SYNC, "resume": resume},
                      direction=direction, initial=[])
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 8
    assert sum(t.user_attrs[ATTR.EPOCHS_TRAINED] for t in trials) == epochs
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 1 and complete[0].user_attrs[ATTR.EPOCHS] == 10
    stopped_at = Counter(t.user_attrs[ATTR.EPOCHS] for t in trials if t.state == TrialState.PRUNED)
    assert stopped_at == {2: 4, 4: 2, 8: 1}, stopped_at
    for trial in trials:
        _curve_is_whole(trial)
        assert trial.state in (TrialState.COMPLETE, TrialState.PRUNED)
        assert trial.user_attrs.get(ATTR.PAUSED) is None  # nothing left paused
    # The survivors of each rung are its best: ranks at rung 2 decide who reached epoch 4.
    sign = 1 if direction == "minimize" else -1
    ranked = sorted(trials, key=lambda t: (sign * t.intermediate_values[2], t.number))
    assert {t.number for t in ranked[:4]} == {
        t.number for t in trials if t.user_attrs[ATTR.EPOCHS] >= 4
    }
    # Checkpoints of stopped trials are deleted: only the best checkpoints stay.
    leftovers = sorted(p.name for p in (tmp_path / "runs").rglob("resume.ckpt*"))
    assert leftovers == [], leftovers


def test_promotion_asha_pauses_at_rungs_and_promotes_the_best(tmp_path: Path) -> None:
    """Promotion ASHA (r 1..9, eta 3) on 9 configurations: every trial pauses at its rungs,
    whatever reaches 9 epochs is COMPLETE, the rest end PRUNED when the study is over, and each
    promotion went to a trial in the top third of its rung at that moment."""
    config = config_file(
        tmp_path, pruner={"name": "asha", "mode": "promotion", "min_resource": 1,
                          "max_resource": 9, "reduction_factor": 3},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 9}, initial=[],
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert len(trials) == 9
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    for trial in trials:
        _curve_is_whole(trial)
        assert trial.user_attrs[ATTR.EPOCHS] in (1, 3, 9)
        segments = trial.user_attrs[ATTR.SEGMENTS]
        assert [s["to_epoch"] for s in segments] == [1, 3, 9][: len(segments)]
    # 9 values at rung 1 -> at most 3 promoted (floor(9/3)); 3 at rung 3 -> 1 reaches 9.
    at = Counter(t.user_attrs[ATTR.EPOCHS] for t in trials)
    assert at[9] >= 1 and at[3] + at[9] <= 3 + 1, at
    assert all(t.state == TrialState.COMPLETE for t in trials if t.user_attrs[ATTR.EPOCHS] == 9)


def _running_worker_pid(storage: str, minimum_epoch: int) -> tuple[int, int] | None:
    """(trial number, worker pid) of a trial that is training past ``minimum_epoch``."""
    for trial in study_of(storage).get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        done = max(trial.intermediate_values, default=0)
        if trial.user_attrs.get(ATTR.PAUSED) is None and done >= minimum_epoch:
            pid = trial.user_attrs.get(ATTR.PID)
            if isinstance(pid, int):
                return trial.number, pid
    return None


def test_a_worker_killed_mid_trial_resumes_from_its_checkpoint_on_another_slot(
    tmp_path: Path,
) -> None:
    """kill -9 of a worker in the middle of a trial: the trial is resumed from its last
    checkpoint and ends COMPLETE with a complete, duplicate-free curve and the attempt noted."""
    storage = str(tmp_path / "t.journal")
    config = config_file(
        tmp_path, trainer={"max_epochs": 8, "limit_train_batches": 8, "limit_val_batches": 2},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 3},
    )
    process = popen(str(config), "--quiet", cwd=tmp_path)
    found = wait_for(lambda: _running_worker_pid(storage, 3), timeout=240,
                     what="a trial past epoch 3")
    assert isinstance(found, tuple)
    number, pid = found
    os.kill(pid, signal.SIGKILL)
    out = finish(process)
    assert process.returncode == 0, out[-3000:]
    trial = study_of(storage).get_trials(deepcopy=False)[number]
    assert trial.state == TrialState.COMPLETE, trial.user_attrs
    _curve_is_whole(trial)
    assert max(trial.intermediate_values) == 8
    attempts = trial.user_attrs[ATTR.ATTEMPTS]
    assert len(attempts) == 1 and "was killed by SIGKILL" in attempts[0], attempts
    hows = [s["how"] for s in trial.user_attrs[ATTR.SEGMENTS]]
    assert hows[0] == "crashed" and hows[-1] == "complete", hows
    resumed = trial.user_attrs[ATTR.SEGMENTS][1]["from_epoch"]
    assert resumed >= 3, trial.user_attrs[ATTR.SEGMENTS]  # not from scratch
    assert trial.user_attrs[ATTR.EPOCHS_TRAINED] <= 8 + 1  # at most the epoch in flight again


def test_a_trial_whose_retries_are_spent_ends_fail_with_every_reason(tmp_path: Path) -> None:
    """stop.max_retries: 0 keeps today's behaviour: a killed worker's trial ends FAIL."""
    storage = str(tmp_path / "t.journal")
    config = config_file(
        tmp_path, trainer={"max_epochs": 8, "limit_train_batches": 8, "limit_val_batches": 2},
        devices={"accelerator": "cpu", "count": 1}, stop={"n_trials": 2, "max_retries": 0},
    )
    process = popen(str(config), "--quiet", cwd=tmp_path)
    found = wait_for(lambda: _running_worker_pid(storage, 2), timeout=240, what="a trial")
    assert isinstance(found, tuple)
    number, pid = found
    os.kill(pid, signal.SIGKILL)
    out = finish(process)
    assert process.returncode == 0, out[-3000:]
    trial = study_of(storage).get_trials(deepcopy=False)[number]
    assert trial.state == TrialState.FAIL
    assert "was killed by SIGKILL" in trial.user_attrs["fail_reason"]


def test_a_launcher_killed_with_paused_trials_resumes_them_when_run_again(
    tmp_path: Path,
) -> None:
    """kill -9 of the launcher in the middle of a sync_sh round (some trials paused at rung 2,
    some training), then the same command again: the round continues, nothing is lost or
    trained twice, and it ends as an uninterrupted round does."""
    storage = str(tmp_path / "t.journal")
    config = config_file(
        tmp_path, pruner=SYNC, devices={"accelerator": "cpu", "count": 2},
        trainer={"limit_train_batches": 8, "limit_val_batches": 2},
        stop={"n_trials": 8}, initial=[],
    )
    process = popen(str(config), "--quiet", cwd=tmp_path)

    def some_paused() -> bool:
        trials = study_of(storage).get_trials(deepcopy=False)
        return sum(isinstance(t.user_attrs.get(ATTR.PAUSED), dict) for t in trials) >= 3

    wait_for(some_paused, timeout=240, what="3 paused trials")
    os.kill(process.pid, signal.SIGKILL)  # the launcher alone; its workers notice and pause
    process.communicate(timeout=60)
    time.sleep(3)
    result = launch(str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "paused to resume" in result.stdout or "Resuming" in result.stdout
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == 8
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 1
    stopped_at = Counter(t.user_attrs[ATTR.EPOCHS] for t in trials if t.state == TrialState.PRUNED)
    assert stopped_at == {2: 4, 4: 2, 8: 1}, stopped_at
    for trial in trials:
        _curve_is_whole(trial)
    # Work lost to the kill is at most the epochs in flight on the 2 slots.
    assert sum(t.user_attrs[ATTR.EPOCHS_TRAINED] for t in trials) <= 34 + 2 * 2


def test_two_launchers_share_one_sync_round_on_postgresql(
    tmp_path: Path, postgres_server: Any
) -> None:
    """Two launchers (one slot each) on one PostgreSQL study run one synchronous round between
    them: 8 configurations, 34 epochs, both launchers trained some of them."""
    storage = postgres_server.new_database("sync")
    config = config_file(
        tmp_path, storage=storage, pruner=SYNC, devices={"accelerator": "cpu", "count": 1},
        stop={"n_trials": 8}, initial=[],
    )
    first = popen(str(config), "--quiet", cwd=tmp_path)
    second = popen(str(config), "--quiet", cwd=tmp_path)
    for process in (first, second):
        out = finish(process)
        assert process.returncode == 0, out[-3000:]
        assert "lost" not in out, out[-3000:]  # no segment trained twice and dropped
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == 8
    story = {t.number: (t.state.name, t.user_attrs.get(ATTR.EPOCHS_TRAINED)) for t in trials}
    assert sum(t.user_attrs[ATTR.EPOCHS_TRAINED] for t in trials) == 34, story
    stopped_at = Counter(t.user_attrs[ATTR.EPOCHS] for t in trials if t.state == TrialState.PRUNED)
    assert stopped_at == {2: 4, 4: 2, 8: 1}, stopped_at
    launchers = {t.user_attrs[ATTR.LAUNCHER_PID] for t in trials}
    assert launchers == {first.pid, second.pid}, launchers
