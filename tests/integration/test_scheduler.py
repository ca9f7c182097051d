"""Pause and resume through the launcher, with real processes on CPU: one round of synchronous
successive halving (34 epochs with checkpoints, 58 retrained from scratch), promotion-type ASHA,
a worker killed mid-trial and resumed elsewhere, a launcher killed with paused trials and run
again, two launchers sharing one synchronous round on PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from helpers.support import (
    children_by_parent,
    config_file,
    finish,
    gone,
    launch,
    popen,
    study_of,
    wait_for,
)
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo._optuna import backend_of, claim_waiting_trial, trial_id_of
from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.study.creation import open_study, study_lock
from lightning_hpo.launch.study.scheduler import Assignment, Scheduler
from lightning_hpo.launch.study.trials import (
    end_trial,
    hand_back_lost_claims,
    hand_back_owned,
    open_segment,
    recover_stale_trials,
)
from lightning_hpo.pruners.rungs import (
    bracket_of,
    hyperband_rounds,
    round_epochs,
    successive_halving_plan,
)
from lightning_hpo.schedules import PromotionHyperband
from lightning_hpo.schema import ATTR, BRACKET_ATTR, Owner, Segment
from lightning_hpo.storage import open_storage

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
        # one closed segment per rung reached (each was listed open while it trained)
        segments = trial.user_attrs[ATTR.SEGMENTS]
        assert all(s["end"] is not None and s["how"] != "running" for s in segments), segments
        assert [s["to_epoch"] for s in segments] == [
            level for level in (2, 4, 8, 10) if level <= trial.user_attrs[ATTR.EPOCHS]]
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
    _pruned_by_the_schedule(study_of(str(tmp_path / "t.journal")))


def _most_paused_at_once(trials: list[FrozenTrial]) -> int:
    """From the segments: how many trials waited between two segments (or between their last
    segment and their end PRUNED) at the same instant."""
    edges: list[tuple[float, int]] = []
    for trial in trials:
        segments = trial.user_attrs[ATTR.SEGMENTS]
        ends = [s["end"] for s in segments]
        starts = [s["start"] for s in segments[1:]]
        if trial.state == TrialState.PRUNED and trial.datetime_complete is not None:
            starts.append(trial.datetime_complete.timestamp())
        for paused, resumed in zip(ends, starts, strict=False):
            edges += [(paused, 1), (resumed, -1)]
    most = count = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        count += step
        most = max(most, count)
    return most


def test_max_paused_bounds_the_paused_checkpoints_of_promotion_asha(tmp_path: Path) -> None:
    """``checkpoint.max_paused: 1`` with 2 slots and 15 configurations: trials beyond the bound
    end PRUNED with the reason, their checkpoints deleted; at most 1 waits at a rung, plus one
    per slot in the instant between a pause and the next decision."""
    config = config_file(
        tmp_path, pruner={"name": "asha", "mode": "promotion", "min_resource": 1,
                          "max_resource": 9, "reduction_factor": 3},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 15}, initial=[],
        checkpoint={"max_paused": 1},
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert len(trials) == 15
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    bounded = [t for t in trials if "(max_paused)" in t.user_attrs.get(ATTR.STOP_REASON, "")]
    assert bounded, [t.user_attrs.get(ATTR.STOP_REASON) for t in trials]
    for trial in trials:
        _curve_is_whole(trial)
    assert _most_paused_at_once(trials) <= 1 + 2
    _pruned_by_the_schedule(study_of(str(tmp_path / "t.journal")))
    leftovers = sorted(p.name for p in (tmp_path / "runs").rglob("resume.ckpt*"))
    assert leftovers == [], leftovers


def _pruned_by_the_schedule(study: optuna.Study) -> None:
    """Every PRUNED trial is shown as stopped by the schedule at its rung, not by the budget."""
    from lightning_hpo.report import trials_frame

    frame = trials_frame(study)
    pruned = frame[frame["state"] == "PRUNED"]
    assert len(pruned) and set(pruned["stopped_by"]) == {"pruner"}, pruned[
        ["trial", "stopped_by", "stop_reason"]].to_string()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        assert trial.user_attrs[ATTR.PRUNED_AT_EPOCH] == trial.user_attrs[ATTR.EPOCHS]


def _running_worker_pid(storage: str, minimum_epoch: int) -> tuple[int, int] | None:
    """(trial number, worker pid) of a trial training with a resume checkpoint of at least
    ``minimum_epoch`` epochs written (its value at an epoch is reported before the save)."""
    for trial in study_of(storage).get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        point = trial.user_attrs.get(ATTR.RESUME_POINT)
        done = point.get("epoch") if isinstance(point, dict) else None
        if (trial.user_attrs.get(ATTR.PAUSED) is None and isinstance(done, int)
                and done >= minimum_epoch):
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
    config = config_file(  # SlowLeNet: epochs of 0.4 s at least, a window polls cannot miss
        tmp_path, model={"name": "helpers.launch_models:SlowLeNet"},
        trainer={"max_epochs": 8, "limit_train_batches": 8, "limit_val_batches": 2},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 3},
        checkpoint={"every": "epoch"},  # "auto" may save only at the end on a loaded machine
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


@pytest.mark.parametrize(
    ("pruner", "n_trials"),
    [("none", 2), ({"name": "asha", "mode": "promotion", "min_resource": 1, "max_resource": 3,
                    "reduction_factor": 3}, 3)],
    ids=["to-max-epochs", "promotion-rung"],
)
def test_a_worker_killed_after_its_last_checkpoint_loses_nothing(
    tmp_path: Path, pruner: Any, n_trials: int
) -> None:
    """kill -9 after a segment's last checkpoint is written but before the study is told: the
    resumed segment has nothing left to train; it ends as the segment would have (COMPLETE, or
    paused at its rung), with the value reported at that epoch, and trains no epoch twice."""
    storage = str(tmp_path / "t.journal")
    config = config_file(
        tmp_path, model={"name": "helpers.launch_models:DiesAfterItsLastCheckpoint"}, pruner=pruner,
        trainer={"max_epochs": 3, "limit_train_batches": 2, "limit_val_batches": 1},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": n_trials},
        checkpoint={"every": "epoch"},
    )
    out = finish(popen(str(config), "--quiet", cwd=tmp_path))
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == n_trials
    assert not [t for t in trials if t.state == TrialState.FAIL], [
        t.user_attrs.get(ATTR.FAIL_REASON) for t in trials] + [out[-3000:]]
    assert any(t.state == TrialState.COMPLETE for t in trials)
    for trial in trials:
        _curve_is_whole(trial)
        attempts = trial.user_attrs[ATTR.ATTEMPTS]
        assert len(attempts) == 1 and "was killed by SIGKILL" in attempts[0], attempts
        assert trial.user_attrs[ATTR.EPOCHS_TRAINED] == trial.user_attrs[ATTR.EPOCHS]
        if trial.state == TrialState.COMPLETE:
            assert trial.value == trial.intermediate_values[3]
        hows = [s["how"] for s in trial.user_attrs[ATTR.SEGMENTS]]
        assert hows[0] == "crashed", hows


def test_a_trial_whose_retries_are_spent_ends_fail_with_every_reason(tmp_path: Path) -> None:
    """stop.max_retries: 0 keeps today's behaviour: a killed worker's trial ends FAIL."""
    storage = str(tmp_path / "t.journal")
    config = config_file(
        tmp_path, model={"name": "helpers.launch_models:SlowLeNet"},
        trainer={"max_epochs": 8, "limit_train_batches": 8, "limit_val_batches": 2},
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


def _records(storage: str) -> str:
    """Each trial's records, one line each, for a failure's message: its state, round, the
    epochs it reported and counts done and trained, its pause, target, resume point, owner,
    failed attempts and segments (from, to, how)."""
    lines = []
    for trial in study_of(storage).get_trials(deepcopy=False):
        attrs = trial.user_attrs
        segments = [(s.get("from_epoch"), s.get("to_epoch"), s.get("how"))
                    for s in attrs.get(ATTR.SEGMENTS) or []]
        paused = attrs.get(ATTR.PAUSED)
        if isinstance(paused, dict):
            paused = {key: paused.get(key) for key in ("epoch", "target", "why")}
        point = attrs.get(ATTR.RESUME_POINT)
        lines.append(
            f"trial {trial.number} {trial.state.name} round={attrs.get(ATTR.ROUND)} "
            f"reported={max(trial.intermediate_values, default=0)} "
            f"epochs={attrs.get(ATTR.EPOCHS)} trained={attrs.get(ATTR.EPOCHS_TRAINED)} "
            f"paused={paused} target={attrs.get(ATTR.TARGET)} "
            f"resume_point={point.get('epoch') if isinstance(point, dict) else None} "
            f"owner={attrs.get(ATTR.OWNER)} attempts={len(attrs.get(ATTR.ATTEMPTS) or [])} "
            f"segments={segments}")
    return "\n".join(lines)


@pytest.mark.parametrize("with_workers", [False, True], ids=["launcher-alone", "with-workers"])
def test_a_launcher_killed_with_paused_trials_resumes_them_when_run_again(
    tmp_path: Path, with_workers: bool
) -> None:
    """kill -9 of the launcher in the middle of a sync_sh round (some trials paused at rung 2,
    some training), alone or with its workers (a machine lost), then the same command again:
    the round continues, nothing is lost or trained twice, every segment is closed, and it
    ends as an uninterrupted round does."""
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
    workers = children_by_parent().get(process.pid, [])
    assert workers, "the launcher has no workers"
    os.kill(process.pid, signal.SIGKILL)  # alone, its workers notice and pause
    for pid in workers if with_workers else []:  # with them, their segments are left open
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.communicate(timeout=60)
    wait_for(lambda: all(gone(pid) for pid in workers), timeout=120, what="the workers' exit")
    left = _records(storage)
    result = launch(str(config), cwd=tmp_path)
    story = f"after the kill:\n{left}\nafter the run again:\n{_records(storage)}"
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + story
    assert "paused to resume" in result.stdout or "Resuming" in result.stdout
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == 8, story
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}, story
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 1, story
    stopped_at = Counter(t.user_attrs[ATTR.EPOCHS] for t in trials if t.state == TrialState.PRUNED)
    assert stopped_at == {2: 4, 4: 2, 8: 1}, f"{stopped_at}\n{story}"
    for trial in trials:
        _curve_is_whole(trial)
        segments = trial.user_attrs[ATTR.SEGMENTS]
        assert all(s["end"] is not None and s["to_epoch"] is not None for s in segments), story
        assert trial.user_attrs[ATTR.EPOCHS_TRAINED] == sum(
            s["to_epoch"] - s["from_epoch"] for s in segments), story
    # Every epoch trained is counted; work lost to the kill is at most the epochs in flight.
    assert 34 <= sum(t.user_attrs[ATTR.EPOCHS_TRAINED] for t in trials) <= 34 + 2 * 2, story


def test_two_launchers_share_one_sync_round_on_postgresql(
    tmp_path: Path, postgres_server: Any
) -> None:
    """Two launchers (one slot each) on one PostgreSQL study run one synchronous round between
    them: 8 configurations, 34 epochs, both launchers trained some of them."""
    storage = postgres_server.new_database("sync")
    config = config_file(
        tmp_path, storage=storage, pruner=SYNC, devices={"accelerator": "cpu", "count": 1},
        stop={"n_trials": 8}, initial=[],
        model={"name": "helpers.launch_models:MeetsAnotherLauncher"},
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


# --------------------------------------------------------------------------------------------
# Launcher paths of the pausing schedules not run end to end above: synchronous Hyperband,
# promotion Hyperband, a frozen launcher's trial taken over through the heartbeat, DDP slots.

TINY = {"min_resource": 1, "max_resource": 4, "reduction_factor": 2}


def _ends(trials: list[FrozenTrial]) -> Counter[tuple[str, int]]:
    """How trials ended: (state name, epochs done) counts."""
    return Counter((t.state.name, t.user_attrs[ATTR.EPOCHS]) for t in trials)


def _plan_ends(plan: list[tuple[int, int]]) -> Counter[tuple[str, int]]:
    """How a synchronous bracket's trials end by its round plan: those not kept at a rung
    are PRUNED there, those held at the top rung COMPLETE."""
    held = [configs for _, configs in plan]
    ends = Counter({("PRUNED", level): configs - held[k + 1]
                    for k, (level, configs) in enumerate(plan[:-1])})
    ends["COMPLETE", plan[-1][0]] = held[-1]
    return +ends  # drop zero counts


def test_one_cycle_of_sync_hyperband_ends_each_bracket_as_its_plan_says(tmp_path: Path) -> None:
    """sync_hyperband r 1..4, eta 2: ladder 1, 2, 4 (s_max 2), brackets [1, 2, 4] x 4, [2, 4] x 3,
    [4] x 3 (n = ceil(3 / (s + 1) * 2**s)); n_trials 10 runs each once, one round each: per
    round 2 PRUNED at 1, 1 at 2, 1 COMPLETE; 2 PRUNED at 2, 1 COMPLETE; 3 COMPLETE. With
    checkpoints: 4*1 + 2*1 + 1*2 + 3*2 + 1*2 + 3*4 = 28 epochs."""
    cycle = hyperband_rounds(1, 4, 2)
    n_trials = sum(configs for _, configs in cycle)
    config = config_file(
        tmp_path, pruner={"name": "sync_hyperband", **TINY, "prefact": 1},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": n_trials}, initial=[],
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert len(trials) == n_trials == 10
    rounds: dict[int, list[FrozenTrial]] = {}
    for trial in trials:
        rounds.setdefault(trial.user_attrs[ATTR.ROUND], []).append(trial)
        _curve_is_whole(trial)
        assert trial.state in (TrialState.COMPLETE, TrialState.PRUNED), trial.user_attrs
        assert trial.user_attrs.get(ATTR.PAUSED) is None
    assert sorted(rounds) == list(range(len(cycle)))
    epochs = 0
    for index, (ladder, configs) in enumerate(cycle):
        members = rounds[index]
        plan = successive_halving_plan(ladder[0], max_resource=ladder[-1], reduction_factor=2,
                                       configs=configs)
        assert [level for level, _ in plan] == ladder
        assert len(members) == configs
        assert _ends(members) == _plan_ends(plan), (index, _ends(members))
        for k, (level, held) in enumerate(plan[:-1]):  # the best floor(held / 2) go on
            at_rung = sorted((t for t in members if t.user_attrs[ATTR.EPOCHS] >= level),
                             key=lambda t: (t.intermediate_values[level], t.number))
            assert len(at_rung) == held
            on = {t.number for t in at_rung if t.user_attrs[ATTR.EPOCHS] > level}
            assert on == {t.number for t in at_rung[: plan[k + 1][1]]}, (index, level)
        epochs += round_epochs(plan, resume=True)
    assert epochs == 28
    assert sum(t.user_attrs[ATTR.EPOCHS_TRAINED] for t in trials) == epochs


def test_promotion_hyperband_pauses_at_its_brackets_rungs_and_promotes_their_best(
    tmp_path: Path,
) -> None:
    """Promotion Hyperband r 1..4, eta 2 on 8 configurations: brackets [1, 2, 4], [2, 4], [4]
    by the trial number's hash; each trial climbs its own bracket's rungs from its checkpoint
    and stops at one of them, COMPLETE only at 4. When the study is done nothing is promotable,
    so at every rung the best floor(n / 2) of the n values there went on (PromotionASHA)."""
    schedule = PromotionHyperband(1, 4, 2, study_name="t")
    ladders = schedule.ladders()
    assert ladders == [[1, 2, 4], [2, 4], [4]]
    config = config_file(
        tmp_path, pruner={"name": "hyperband", "mode": "promotion", **TINY},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 8}, initial=[],
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert len(trials) == 8
    brackets: dict[int, list[FrozenTrial]] = {b: [] for b in range(len(ladders))}
    for trial in trials:
        bracket = trial.system_attrs[BRACKET_ATTR]
        assert bracket == bracket_of("t", trial.number, schedule.budgets)
        brackets[bracket].append(trial)
        ladder, epochs = ladders[bracket], trial.user_attrs[ATTR.EPOCHS]
        _curve_is_whole(trial)
        assert trial.user_attrs.get(ATTR.PAUSED) is None
        assert epochs in ladder, (trial.number, bracket, epochs)
        assert trial.state == (TrialState.COMPLETE if epochs == 4 else TrialState.PRUNED)
        segments = trial.user_attrs[ATTR.SEGMENTS]  # one per rung, each from the last one
        assert [s["to_epoch"] for s in segments] == ladder[: len(segments)]
        assert [s["from_epoch"] for s in segments] == [0, *ladder][: len(segments)]
        assert trial.user_attrs[ATTR.EPOCHS_TRAINED] == epochs  # no epoch trained twice
    promoted = 0
    for bracket, ladder in enumerate(ladders):
        for level in ladder[:-1]:
            reached = sorted((t for t in brackets[bracket] if level in t.intermediate_values),
                             key=lambda t: (t.intermediate_values[level], t.number))
            top = reached[: len(reached) // 2]
            assert all(t.user_attrs[ATTR.EPOCHS] > level for t in top), (bracket, level)
            promoted += len(top)
    # By hand: trials 0-4 and 6 hash to bracket 0, so rung 1 holds 6 values: >= 3 go on.
    assert len(brackets[0]) == 6 and promoted >= 3


def _in_training(study: optuna.Study, launcher_pid: int) -> tuple[int, int] | None:
    """(trial number, worker pid) of a trial of launcher ``launcher_pid`` in the middle of a
    segment: an epoch reported, its resume checkpoint recorded at that epoch, its target not
    reached yet (so its worker is training the next epoch)."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        attrs = trial.user_attrs
        done = max(trial.intermediate_values, default=0)
        point = attrs.get(ATTR.RESUME_POINT)
        if (attrs.get(ATTR.LAUNCHER_PID) == launcher_pid and attrs.get(ATTR.PAUSED) is None
                and isinstance(point, dict) and point.get("epoch") == done >= 1
                and done < attrs.get(ATTR.TARGET, 0) and isinstance(attrs.get(ATTR.PID), int)):
            return trial.number, attrs[ATTR.PID]
    return None


def _open_transactions(url: str) -> int:
    """Sessions of other processes inside a transaction on ``url``'s database."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'")
            ).scalar_one())
    finally:
        engine.dispose()


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (state T in /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def _freeze_in_training(
    storage: str, launcher: subprocess.Popen[str], groups: set[int]
) -> int:
    """SIGSTOP the launcher and the worker of one of its trials while that trial trains
    mid-segment and no database transaction of theirs is open; returns the trial's number.

    The worker runs in a session of its own (the supervisor starts it so): both process groups
    are added to ``groups`` before they are stopped, for the caller to kill. Where the trial
    left its segment or a transaction was open at the moment of the stop, both continue and it
    tries again."""
    study = wait_for(lambda: study_of(storage), what="the study")
    assert isinstance(study, optuna.Study)
    for _ in range(20):
        found = wait_for(lambda: launcher.poll() is not None or _in_training(study, launcher.pid),
                         timeout=240, what="a trial of the first launcher in training")
        assert launcher.poll() is None, "the first launcher ended before a trial could be frozen"
        assert isinstance(found, tuple)
        number, worker = found
        groups.update({os.getpgid(worker), os.getpgid(launcher.pid)})
        for group in groups:
            os.killpg(group, signal.SIGSTOP)
        pids = (worker, launcher.pid)
        wait_for(lambda pids=pids: all(map(_stopped, pids)), timeout=10, what="SIGSTOP")
        if _in_training(study, launcher.pid) == found and not _open_transactions(storage):
            return number
        for group in groups:
            os.killpg(group, signal.SIGCONT)
    raise AssertionError("no trial could be frozen in training")


@pytest.mark.postgres
def test_a_frozen_launchers_trial_is_resumed_by_another_once_its_heartbeat_stops(
    tmp_path: Path, postgres_server: Any
) -> None:
    """Launcher A (one slot) is frozen (SIGSTOP, as a lost machine) while its trial trains;
    launcher B on the same PostgreSQL study finds the trial's heartbeat older than
    heartbeat.grace_period, resumes it from A's last checkpoint, and ends the round:
    sync_sh r 2..4, eta 2, 2 configurations -> 1 PRUNED at 2, 1 COMPLETE at 4, none FAIL.
    Each epoch takes at least 0.8 s (SlowLeNet), so the window to freeze a trial mid-epoch is
    not a few polls wide however fast training is (it was, and the launcher finished first)."""
    storage = postgres_server.new_database("heartbeat")
    config = config_file(
        tmp_path, storage=storage, initial=[], stop={"n_trials": 2},
        model={"name": "helpers.launch_models:SlowLeNet"},
        pruner={"name": "sync_sh", "min_resource": 2, "max_resource": 4, "reduction_factor": 2},
        devices={"accelerator": "cpu", "count": 1}, checkpoint={"every": "epoch"},
        heartbeat={"interval": 1, "grace_period": 3},
        trainer={"limit_train_batches": 16, "limit_val_batches": 2},
    )
    first = popen(str(config), "--quiet", cwd=tmp_path)
    groups = {first.pid}  # its session; the worker's session is added once known
    try:
        number = _freeze_in_training(storage, first, groups)
        frozen = study_of(storage).get_trials(deepcopy=False)[number]
        point, frozen_at = frozen.user_attrs[ATTR.RESUME_POINT], time.time()
        second = popen(str(config), "--quiet", cwd=tmp_path)
        out = finish(second)
        assert second.returncode == 0, out[-3000:]
    finally:
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        first.communicate(timeout=60)
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == 2
    # rungs 2, 4 hold 2, 1
    expected = _plan_ends(successive_halving_plan(2, max_resource=4, reduction_factor=2))
    assert _ends(trials) == expected == {("PRUNED", 2): 1, ("COMPLETE", 4): 1}, _ends(trials)
    for trial in trials:  # none left RUNNING (paused or not), none FAIL
        _curve_is_whole(trial)
    taken = trials[number]
    attempts = taken.user_attrs[ATTR.ATTEMPTS]
    assert len(attempts) == 1 and "no heartbeat from its worker" in attempts[0], attempts
    assert taken.user_attrs[ATTR.LAUNCHER_PID] == second.pid
    resumed = next(s for s in taken.user_attrs[ATTR.SEGMENTS] if s["start"] > frozen_at)
    assert resumed["from_epoch"] == point["epoch"] >= 1, (point, resumed)  # A's checkpoint


def test_sync_sh_under_ddp_resumes_paused_trials_on_both_ranks(tmp_path: Path) -> None:
    """One slot of 2 CPU processes (DDP), sync_sh r 1..4, eta 2, 4 configurations: rungs 1, 2, 4
    hold 4, 2, 1; 3 segments resume from a checkpoint (2 to epoch 2, 1 to epoch 4), and the
    round trains 4*1 + 2*1 + 1*2 = 8 epochs: rank 1 continued from the checkpoint as rank 0
    did, or the ranks would disagree on the epochs and the round would not end."""
    plan = successive_halving_plan(1, max_resource=4, reduction_factor=2)
    config = config_file(
        tmp_path, pruner={"name": "sync_sh", **TINY},
        devices={"accelerator": "cpu", "count": 2, "per_trial": 2},
        stop={"n_trials": plan[0][1]}, initial=[],
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert len(trials) == 4
    assert _ends(trials) == _plan_ends(plan) == {("PRUNED", 1): 2, ("PRUNED", 2): 1,
                                                 ("COMPLETE", 4): 1}
    epochs = round_epochs(plan, resume=True)
    assert epochs == 8
    assert sum(t.user_attrs[ATTR.EPOCHS_TRAINED] for t in trials) == epochs
    resumed = 0
    for trial in trials:
        _curve_is_whole(trial)
        assert trial.user_attrs[ATTR.DEVICE] == "cpu:0,1"
        segments = trial.user_attrs[ATTR.SEGMENTS]
        assert [s["from_epoch"] for s in segments[1:]] == [s["to_epoch"] for s in segments[:-1]]
        resumed += len(segments) - 1
    assert resumed == sum(configs for _, configs in plan[1:])  # 2 + 1
    assert len({t.user_attrs[ATTR.PID] for t in trials}) == 1  # one worker, one DDP group


@pytest.mark.postgres
def test_a_trial_resumed_after_a_long_pause_is_not_taken_for_lost(
    tmp_path: Path, postgres_server: Any
) -> None:
    """With heartbeat on, a paused trial's last heartbeat is from before its pause. Resumed after
    more than grace_period, it must not look lost to another worker before its own worker's
    first heartbeat (sync_sh r 1..2, eta 2, 2 configurations, two schedulers on one study)."""
    url = postgres_server.new_database("race")
    cfg = parse_config({
        "study": "t", "storage": url, "run_dir": str(tmp_path), "model": {"name": "lenet"},
        "space": {"lr": {"loguniform": [0.01, 1.0]}}, "stop": {"n_trials": 2},
        "pruner": {"name": "sync_sh", "min_resource": 1, "max_resource": 2, "reduction_factor": 2},
        "heartbeat": {"interval": 1, "grace_period": 5},  # 5 s between the two next() calls
    })                                                     # would take a frozen machine
    study, _ = open_study(cfg, open_storage(url, heartbeat=(1, 5)))
    one, two = Scheduler(study, cfg), Scheduler(study, cfg)
    for value in (0.5, 0.7):  # both configurations train to rung 1 (with heartbeats), pause
        job = one.next(Owner("w", 1, 0))
        assert isinstance(job, Assignment)
        backend_of(study).record_heartbeat(trial_id_of(job.trial))  # type: ignore[attr-defined]
        job.trial.report(value, 1)
        one.pause(job.trial.number, epoch=1, checkpoint=None, why="rung 1")
    time.sleep(6)  # paused longer than grace_period
    job = one.next(Owner("w", 1, 0))  # worker 1 resumes the best (trial 0) to epoch 2 ...
    assert isinstance(job, Assignment) and job.trial.number == 0
    # ... worker 2, before worker 1's first beat, must wait
    assert two.next(Owner("w", 2, 0)) == "wait"
    trial = study.get_trials(deepcopy=False)[0]
    assert trial.user_attrs.get(ATTR.ATTEMPTS) is None
    assert Owner.of(trial) == Owner("w", 1, 0)


def test_a_damaged_checkpoint_is_retrained_from_scratch_not_failed(tmp_path: Path) -> None:
    """A promoted trial whose checkpoint cannot be read (a torn copy, a full disk elsewhere)
    trains again from epoch 0 and ends COMPLETE with a whole curve, instead of failing."""
    storage = str(tmp_path / "t.journal")
    pruner = {"name": "sync_sh", "min_resource": 1, "max_resource": 2, "reduction_factor": 2}
    config = config_file(tmp_path, storage=storage, pruner=pruner, stop={"n_trials": 2},
                         initial=[])
    cfg = parse_config(yaml.safe_load(config.read_text()))
    study, _ = open_study(cfg, open_storage(storage))
    scheduler = Scheduler(study, cfg)
    for value in (0.2, 0.9):  # both reach rung 1 and pause; trial 0 (the better) goes on
        job = scheduler.next(Owner("test", 1, 0))
        assert isinstance(job, Assignment)
        job.trial.report(value, 1)
        job.trial.set_user_attr(ATTR.EPOCH_END_TIMES, [time.time()])
        damaged = tmp_path / f"damaged-{job.trial.number}.ckpt"
        damaged.write_bytes(b"PK\x03\x04 not a checkpoint")
        scheduler.pause(job.trial.number, epoch=1, checkpoint=str(damaged), why="rung 1")
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    first, second = study_of(storage).get_trials(deepcopy=False)
    assert first.state == TrialState.COMPLETE, first.user_attrs
    assert second.state == TrialState.PRUNED
    _curve_is_whole(first)
    assert [s["from_epoch"] for s in first.user_attrs[ATTR.SEGMENTS]] == [0]  # from scratch
    assert first.user_attrs[ATTR.EPOCHS_TRAINED] == 2
    log = "".join(p.read_text() for p in (tmp_path / "runs" / "t" / "workers").glob("*.log"))
    assert "cannot be read" in log and "retrains from scratch" in log


def _dead_pid() -> int:
    """The pid of a process of this host that has exited."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _small_sync_study(tmp_path: Path) -> tuple[str, Path, Any, optuna.Study]:
    """sync_sh r 1..2, eta 2, 2 configurations: storage, config file, config, opened study."""
    storage = str(tmp_path / "t.journal")
    config = config_file(tmp_path, storage=storage, initial=[], stop={"n_trials": 2},
                         pruner={"name": "sync_sh", "min_resource": 1, "max_resource": 2,
                                 "reduction_factor": 2})
    cfg = parse_config(yaml.safe_load(config.read_text()))
    study, _ = open_study(cfg, open_storage(storage))
    return storage, config, cfg, study


def test_a_claim_whose_worker_died_before_it_trained_is_handed_back_when_run_again(
    tmp_path: Path,
) -> None:
    """A worker that claimed a trial and died before writing anything else (the launcher
    killed with it) leaves the trial RUNNING with only its owner token: the next launcher on
    this host hands it back and the round ends, instead of waiting for it forever."""
    storage, config, cfg, study = _small_sync_study(tmp_path)
    job = Scheduler(study, cfg).next(Owner(socket.gethostname(), _dead_pid(), 0))
    assert isinstance(job, Assignment)
    result = launch(str(config), "--quiet", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(storage).get_trials(deepcopy=False)
    assert _ends(trials) == {("COMPLETE", 2): 1, ("PRUNED", 1): 1}, _ends(trials)
    attempts = trials[job.trial.number].user_attrs[ATTR.ATTEMPTS]
    assert len(attempts) == 1 and "stopped before" in attempts[0], attempts


def _zombie() -> subprocess.Popen[bytes]:
    """A child process killed and not yet collected: what a worker killed with its launcher is
    until the init process collects it (seconds after), as ``/proc`` shows it."""
    process = subprocess.Popen(["sleep", "600"])
    process.kill()
    wait_for(lambda: gone(process.pid), timeout=30, what="the killed process to be a zombie")
    assert Path(f"/proc/{process.pid}").exists(), "collected already: not a zombie"
    return process


def test_a_worker_killed_with_its_launcher_and_not_yet_collected_is_taken_for_dead(
    tmp_path: Path,
) -> None:
    """A machine lost mid-segment: the worker died with its launcher, leaving its trial RUNNING
    with its owner token and an open segment, and the next launcher starts while the dead
    worker is still a zombie. That launcher hands the trial back all the same, and the round
    ends. (``kill(pid, 0)`` answers for a zombie as for a live process: the trial was taken for
    a live worker's, never handed back, and the round waited on it for ever, or, where it had
    reported its rung's value, ended without it: a trial left RUNNING after the run.)"""
    storage, config, cfg, study = _small_sync_study(tmp_path)
    worker = _zombie()
    try:
        dead = Owner(socket.gethostname(), worker.pid, 0)
        job = Scheduler(study, cfg).next(dead)
        assert isinstance(job, Assignment)
        open_segment(job.trial, Segment(time.time(), None, slot=0, device="cpu:0",
                                        from_epoch=0, how="running"),
                     {ATTR.LAUNCHER_PID: _dead_pid(), ATTR.HOST: dead.host, ATTR.PID: dead.pid})
        assert gone(worker.pid) and Path(f"/proc/{worker.pid}").exists()  # still a zombie
        with study_lock(cfg, open_storage(storage), "schedule"):  # as the launcher does
            outcome = recover_stale_trials(study_of(storage), cfg)
        assert outcome == {job.trial.number: "resumable"}, _records(storage)
        frozen = study_of(storage).get_trials(deepcopy=False)[job.trial.number]
        assert frozen.user_attrs[ATTR.PAUSED]["target"] == 1, _records(storage)
        assert frozen.user_attrs[ATTR.SEGMENTS][-1]["how"] == "crashed", _records(storage)
        result = launch(str(config), "--quiet", cwd=tmp_path, timeout=120)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        trials = study_of(storage).get_trials(deepcopy=False)
        assert _ends(trials) == {("COMPLETE", 2): 1, ("PRUNED", 1): 1}, _records(storage)
    finally:
        worker.wait()


def test_a_claim_of_a_worker_that_died_before_it_told_the_launcher_is_handed_back(
    tmp_path: Path,
) -> None:
    """The live launcher's side: a worker of its own died between its claim and its first
    event, so the supervisor does not know the trial; the trials that worker owned are
    handed back all the same."""

    storage, _, cfg, study = _small_sync_study(tmp_path)
    host, pid = socket.gethostname(), _dead_pid()
    mine = Scheduler(study, cfg).next(Owner(host, pid, 3))
    other = Scheduler(study, cfg).next(Owner(host, pid + 1, 0))  # another worker's: left alone
    assert isinstance(mine, Assignment) and isinstance(other, Assignment)
    handed = hand_back_owned(study, cfg, host, pid, "worker for slot 0 (pid 1) was killed")
    assert handed == {mine.trial.number: "resumable"}
    trials = study_of(storage).get_trials(deepcopy=False)
    assert trials[mine.trial.number].user_attrs[ATTR.PAUSED]["target"] == 1
    assert trials[other.trial.number].user_attrs.get(ATTR.PAUSED) is None
    assert hand_back_owned(study, cfg, host, pid, "again") == {}  # once


class _Killed(BaseException):
    """The worker process dies here (SIGKILL): nothing after this write happens."""


def _kill_after(storage: Any, monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """Make the storage's ``writes``-th write the last one this process makes."""
    done = [0]
    for name in ("set_trial_state_values", "set_trial_user_attr", "set_trial_system_attr"):
        real = getattr(storage, name)

        def write(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if done[0] == writes:
                raise _Killed
            done[0] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(storage, name, write)


@pytest.mark.parametrize("writes", [1, 2, 3, 4], ids=["claim", "round", "target", "owner"])
def test_a_worker_killed_between_the_writes_of_its_claim_leaves_the_round_whole(
    tmp_path: Path, storage: Any, monkeypatch: pytest.MonkeyPatch, writes: int
) -> None:
    """Sync SH, one round of 2 (rungs 1, 2). The first worker dies after the k-th write of its
    claim (the claim itself, the round, the target, the owner). A claim it did not name itself
    on goes back to the tickets at the next worker's claim; an owned one is handed back by the
    supervisor and resumed to its target. Either way the round ends as if nothing happened: the
    better configuration (trial 0) completes and the other is not promoted at rung 1. (Owner
    before round once left an owned trial outside any round: pruned as a stray, the worse one
    completed, and a claim without an owner stayed RUNNING, the round waiting on it for ever.)"""
    if storage.url is None:
        pytest.skip("the launcher refuses in-memory storage")
    cfg = parse_config({
        "study": "t", "storage": storage.url, "run_dir": str(tmp_path), "model": {"name": "lenet"},
        "space": {"lr": {"loguniform": [0.01, 1.0]}}, "stop": {"n_trials": 2}, "initial": [],
        "pruner": {"name": "sync_sh", "min_resource": 1, "max_resource": 2, "reduction_factor": 2},
    })
    study, _ = open_study(cfg, open_storage(storage.url, create=True))
    dead = Owner(socket.gethostname(), 999_999_999, 0)
    with monkeypatch.context() as patch:
        _kill_after(study._storage, patch, writes)
        with contextlib.suppress(_Killed):  # after the 4th, it dies before it trains
            Scheduler(study, cfg).next(dead)
    hand_back_owned(study, cfg, dead.host, dead.pid, "killed")  # what its supervisor does
    values = {0: 0.1, 1: 0.9}
    scheduler, worker = Scheduler(study, cfg), Owner(socket.gethostname(), os.getpid(), 0)
    for _ in range(10):
        job = scheduler.next(worker)
        if job is None:
            break
        assert isinstance(job, Assignment), "a lone worker waits: a trial is stuck RUNNING"
        for epoch in range(job.from_epoch + 1, job.to_epoch + 1):
            job.trial.report(values[job.trial.number], epoch)
        if job.to_epoch < 2:
            scheduler.pause(job.trial.number, epoch=job.to_epoch, checkpoint=None, why="rung")
        else:
            end_trial(study, job.trial.number, TrialState.COMPLETE, value=0.0)
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED]
    assert [t.user_attrs.get(ATTR.ROUND) for t in trials] == [0, 0]
    assert "round 0" in trials[1].user_attrs[ATTR.STOP_REASON]


def test_only_claims_no_worker_owns_are_handed_back(tmp_path: Path) -> None:
    """Owned, paused, finished and pre-owner-token trials stay as they are."""
    cfg = parse_config({
        "study": "t", "storage": str(tmp_path / "t.journal"), "run_dir": str(tmp_path),
        "model": {"name": "lenet"}, "space": {"lr": {"loguniform": [0.01, 1.0]}},
        "stop": {"n_trials": 5}, "initial": [], "trainer": {"max_epochs": 2},
    })
    study, _ = open_study(cfg, open_storage(cfg.storage, create=True))
    storage = study._storage
    trials = [study.ask() for _ in range(5)]
    ids = [trial_id_of(t) for t in trials]
    storage.set_trial_user_attr(ids[1], ATTR.OWNER, Owner("h", 1, 0).token)
    storage.set_trial_user_attr(ids[2], ATTR.LAUNCHER_PID, 1)
    storage.set_trial_user_attr(ids[3], ATTR.PAUSED, {"epoch": 1, "target": None})
    storage.set_trial_state_values(ids[4], TrialState.COMPLETE, [0.5])
    frozen = study.get_trials(deepcopy=False)
    before = [t.state for t in frozen]
    assert hand_back_lost_claims(study, frozen) == [trials[0].number]
    after = [t.state for t in study.get_trials(deepcopy=False)]
    assert after == [TrialState.WAITING, *before[1:]]


@pytest.mark.parametrize("pruner", [
    {"name": "asha", "min_resource": 1, "max_resource": 2},  # the lock-free fast path's study
    {"name": "none"},
], ids=["asha", "none"])
def test_a_stopping_pruners_lost_claim_is_claimed_again_in_the_same_run(
    tmp_path: Path, pruner: dict[str, Any]
) -> None:
    """A worker killed right after its claim, before any other write (seen once in
    test_forty_trials_survive_ten_random_worker_kills: the trial stayed RUNNING to the end):
    the next worker's claim, on the fast path of a stopping pruner, hands it back and takes it,
    with its enqueued configuration."""
    cfg = parse_config({
        "study": "t", "storage": str(tmp_path / "t.journal"), "run_dir": str(tmp_path),
        "model": {"name": "lenet"}, "space": {"lr": {"loguniform": [0.01, 1.0]}},
        "stop": {"n_trials": 2}, "initial": [{"lr": 0.5}], "pruner": pruner,
        "trainer": {"max_epochs": 2},
    })
    study, _ = open_study(cfg, open_storage(cfg.storage, create=True))
    lost = claim_waiting_trial(study)  # claimed as a worker does, which then is gone
    assert lost is not None and lost.number == 0
    job = Scheduler(study, cfg).next(Owner(socket.gethostname(), os.getpid(), 0))
    assert isinstance(job, Assignment) and job.trial.number == 0
    assert job.trial.suggest_float("lr", 0.01, 1.0, log=True) == 0.5  # its configuration
    frozen = study.get_trials(deepcopy=False)[0]
    assert frozen.state == TrialState.RUNNING and Owner.of(frozen) is not None

