"""The launcher with real processes on CPU: full runs, DDP slots, kills, signals, resume,
several launchers on one PostgreSQL study, and bad input."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import torch
import yaml
from helpers.support import (
    FINISHED,
    INITIAL,
    TESTS,
    config_file,
    finish,
    launch,
    popen,
    states,
    study_of,
    wait_for,
    wait_for_epochs,
)
from optuna.trial import TrialState

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.__main__ import main as launcher_main
from lightning_hpo.launch.config import DEFAULT_CONFIG, load_config, parse_config
from lightning_hpo.launch.config.devices import plan_slots
from lightning_hpo.launch.processes.supervisor import Supervisor
from lightning_hpo.launch.status import summary
from lightning_hpo.launch.study.creation import open_study
from lightning_hpo.schema import ATTR, CONFIG_ATTR
from lightning_hpo.storage import open_storage

pytestmark = pytest.mark.slow
CONFIGS = DEFAULT_CONFIG.parent


def test_quickstart_runs_to_its_end(tmp_path: Path) -> None:
    """The default config (what `make demo` runs), unchanged, from an empty folder."""
    result = launch(cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    cfg = yaml.safe_load(DEFAULT_CONFIG.read_text())
    study = study_of(str(tmp_path / cfg["storage"]), cfg["study"])
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == cfg["stop"]["n_trials"]
    assert {t.state for t in trials} <= FINISHED
    counts = states(study)
    assert counts["PRUNED"] > 0 and counts["COMPLETE"] > 0, counts
    assert trials[0].params == cfg["initial"][0]
    best = study.best_trial
    assert best.value < 0.2
    assert Path(best.user_attrs["checkpoint"]).is_file()
    for trial in trials:
        attrs = trial.user_attrs
        assert attrs["host"] == socket.gethostname() and attrs["device"].startswith("cpu:")
        assert attrs["end_time"] >= attrs["start_time"]
        assert attrs["epochs"] == len(attrs["epoch_end_times"]) == len(trial.intermediate_values)
        assert (Path(attrs["log_dir"]) / "metrics.csv").is_file()
    assert {t.user_attrs["slot"] for t in trials} == {0, 1}
    by_slot: dict[int, list[str]] = {}
    for trial in sorted(trials, key=lambda t: t.user_attrs["start_time"]):
        by_slot.setdefault(trial.user_attrs["slot"], []).append(trial.user_attrs["data"])
    for paths in by_slot.values():  # each worker prepares the digits once, then reuses them
        assert all(p.startswith("DigitsDataModule: tensors on cpu (") for p in paths), paths
        assert "prepared in" in paths[0] and all("reused" in p for p in paths[1:]), paths
    out = result.stdout
    assert f"Best validation_error: {best.value:.4f} (trial {best.number})" in out
    assert "optuna-dashboard runs/quickstart.journal" in out
    assert "python -m lightning_hpo.report --storage runs/quickstart.journal" in out


def test_ddp_trials_use_two_processes_each(tmp_path: Path) -> None:
    config = config_file(tmp_path, devices={"accelerator": "cpu", "per_trial": 2},
                     stop={"n_trials": 3})
    result = launch(str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    study = study_of(str(tmp_path / "t.journal"))
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 3 and all(t.state == TrialState.COMPLETE for t in trials)
    assert {t.user_attrs["device"] for t in trials} == {"cpu:0,1"}
    assert len({t.user_attrs["pid"] for t in trials}) == 1  # one worker kept its DDP group
    assert all(t.user_attrs["data"].startswith("DigitsDataModule: tensors on cpu")
               for t in trials)


def test_a_trial_failing_on_another_rank_fails_and_the_slot_starts_fresh_ranks(
    tmp_path: Path
) -> None:
    """A DDP trial that raises on rank 1 while rank 0 waits for it in a collective: the slot
    hung for ever (rank 1 swallowed the error and waited for rank 0). The trial now ends FAIL
    with rank 1's error, the slot's worker starts again with fresh ranks, the rest complete."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "per_trial": 2},
                         model={"name": "helpers.launch_models:FailsOnRankOne"},
                         stop={"n_trials": 3})
    result = launch(str(config), "--quiet", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    first = next(t for t in trials if t.params == INITIAL)
    assert first.state == TrialState.FAIL
    assert first.user_attrs["fail_reason"] == "rank 1: RuntimeError: boom on rank 1"
    others = [t for t in trials if t is not first]
    assert len(others) == 2 and all(t.state == TrialState.COMPLETE for t in others)
    assert first.user_attrs["pid"] not in {t.user_attrs["pid"] for t in others}  # restarted


def test_a_slot_loader_gets_no_more_processes_than_its_share_of_cores(tmp_path: Path) -> None:
    """2 slots on 2 cores: each owns 1 core, so 3 asked loader processes become 0."""
    config = config_file(tmp_path, data={"name": "digits", "num_workers": 3, "on_device": False},
                         devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 2})
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for trial in trials:
        assert trial.user_attrs["data"] == (
            "DigitsDataModule: DataLoader over host tensors, 0 worker process(es) "
            "(data.on_device is false)"
        )
    logs = "".join(p.read_text() for p in tmp_path.glob("runs/*/workers/slot*.log"))
    assert "data.num_workers 3 -> 0: this slot's share is 1 core(s)" in logs


def test_a_run_whose_every_trial_failed_exits_1_with_the_first_reason(tmp_path: Path) -> None:
    """Every trial FAIL is not a success: exit 1, the first failure's reason in one line (the
    summary is printed first, as for any run)."""
    config = config_file(tmp_path, model={"name": "helpers.launch_models:ExplodingLeNet"},
                         space={"lr": {"loguniform": [0.2, 1.0]}},
                         initial=[{"lr": 0.5}], stop={"n_trials": 2},
                         devices={"accelerator": "cpu", "count": 1})
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        "error: every trial of this run failed (2 of 2); the first, trial 0: "
        "RuntimeError: boom at lr=0.500"]
    assert "This run: 2 trials on 1 slot in" in result.stdout
    assert states(study_of(str(tmp_path / "t.journal")))["FAIL"] == 2


@pytest.mark.parametrize(
    ("trainer", "epochs", "reported"),
    [({"val_check_interval": 0.5}, 3, [1, 2, 3]), ({"check_val_every_n_epoch": 2}, 4, [2, 4])],
    ids=["twice-an-epoch", "every-second-epoch"],
)
def test_a_trial_counts_the_epochs_it_trained_however_often_it_validates(
    tmp_path: Path, trainer: dict[str, Any], epochs: int, reported: list[int]
) -> None:
    """Each epoch trained has one end time, validated twice (``val_check_interval: 0.5``, which
    counted each epoch twice: 6 for 3) or not at all (``check_val_every_n_epoch: 2``, which
    counted only the validated ones: 2 for 4); the values are those of the validated epochs.
    The launcher's line for each trial counts its epochs trained too (it said 2 for 3 where
    the last epoch did not validate, a config now refused)."""
    config = config_file(tmp_path, trainer={"max_epochs": epochs, "limit_train_batches": 4,
                                            "limit_val_batches": 2, **trainer},
                         stop={"n_trials": 2}, devices={"accelerator": "cpu", "count": 1})
    result = launch(str(config), cwd=tmp_path)  # not a terminal: a line per trial
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("trial ")]
    assert len(lines) == 2 and all(f" COMPLETE epochs   {epochs} " in line for line in lines), lines
    for trial in study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False):
        assert trial.state == TrialState.COMPLETE
        assert sorted(trial.intermediate_values) == reported
        attrs = trial.user_attrs
        assert attrs[ATTR.EPOCHS] == attrs[ATTR.EPOCHS_TRAINED] == epochs, attrs
        assert len(attrs[ATTR.EPOCH_END_TIMES]) == epochs
        assert [s["to_epoch"] for s in attrs[ATTR.SEGMENTS]] == [epochs]


def test_failing_trials_are_recorded_and_the_worker_goes_on(tmp_path: Path) -> None:
    config = config_file(tmp_path, model={"name": "helpers.launch_models:ExplodingLeNet"},
                     initial=[{"lr": 0.05, "batch_size": 64}], stop={"n_trials": 6})
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert len(trials) == 6
    for trial in trials:
        if trial.params["lr"] > 0.1:
            assert trial.state == TrialState.FAIL
            assert trial.user_attrs["fail_reason"].startswith("RuntimeError: boom at lr=")
        else:
            assert trial.state == TrialState.COMPLETE
    assert len({t.user_attrs["pid"] for t in trials}) <= 2  # no worker was replaced


def test_a_killed_worker_fails_its_trial_and_the_slot_restarts(tmp_path: Path) -> None:
    """With stop.max_retries: 0 a killed worker's trial ends FAIL at once (the default resumes
    it: tests/integration/test_scheduler.py)."""
    # Epochs of at least 0.4 s (SlowLeNet): the trial found running is still running when the
    # kill comes, however slowly the study is read.
    config = config_file(tmp_path, model={"name": "helpers.launch_models:SlowLeNet"},
                         trainer={"max_epochs": 6, "limit_train_batches": 8,
                                  "limit_val_batches": 2},
                         stop={"n_trials": 6, "max_retries": 0})
    storage = str(tmp_path / "t.journal")
    process = popen(str(config), "--quiet", cwd=tmp_path)

    def running_with_pid() -> optuna.trial.FrozenTrial | None:
        running = study_of(storage).get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        return next((t for t in running if "pid" in t.user_attrs), None)

    victim = wait_for(running_with_pid, what="a running trial")
    assert isinstance(victim, optuna.trial.FrozenTrial)
    os.kill(victim.user_attrs["pid"], signal.SIGKILL)
    out = finish(process)
    assert process.returncode == 0, out[-3000:]
    study = study_of(storage)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 6 and {t.state for t in trials} <= FINISHED
    killed = trials[victim.number]
    assert killed.state == TrialState.FAIL
    assert "was killed by SIGKILL" in killed.user_attrs["fail_reason"]
    # The slot was restarted (whether its new worker got a trial before the other slot took the
    # rest depends on the machine's speed).
    assert "was killed by SIGKILL; restarting the slot" in out, out[-3000:]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_cleanly_and_the_same_command_resumes(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """SIGTERM (a scheduler) or SIGINT (Ctrl-C) to the launcher: the trials it runs pause at
    their last checkpoint saying so (the launcher's signal, not the SIGTERM it sent its workers),
    and the same command resumes them."""
    config = config_file(tmp_path, trainer={"max_epochs": 6}, stop={"n_trials": 6})
    storage = str(tmp_path / "t.journal")
    process = popen(str(config), cwd=tmp_path)
    wait_for(lambda: states(study_of(storage))["COMPLETE"] >= 1
              and states(study_of(storage))["RUNNING"] >= 1, what="one done, one running")
    process.send_signal(stop)
    out = finish(process, timeout=120)
    assert process.returncode == 128 + stop, out[-3000:]
    assert f"stopped: stopped by {stop.name}" in out
    study = study_of(storage)
    counts = states(study)
    assert counts["FAIL"] == 0 and counts["RUNNING"] >= 1 and counts["WAITING"] >= 1, counts
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        paused = trial.user_attrs[ATTR.PAUSED]  # paused at its last checkpoint, to resume
        assert paused["target"] == 6, paused
        assert paused["why"] == f"interrupted: launcher stopped by {stop.name}", paused
        assert f"(interrupted: launcher stopped by {stop.name})" in out

    again = launch(str(config), cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "Resuming study 't'" in again.stdout and "paused to resume" in again.stdout
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == 6 and {t.state for t in trials} == {TrialState.COMPLETE}
    assert all(sorted(t.intermediate_values) == list(range(1, 7)) for t in trials)
    assert sum(t.params == INITIAL for t in trials) == 1


def test_a_sigtermed_ddp_trial_resumes_where_its_interrupted_segment_ended(
    tmp_path: Path
) -> None:
    """SIGTERM to the launcher while a DDP trial trains past its last checkpoint (``auto``
    stopped saving every epoch: its checkpoints are slow): the trial pauses at that checkpoint,
    its interrupted segment ends there too, and the rerun's segment starts where it ended. The
    segment used to end at the last epoch it reported, so the next one, starting from the
    checkpoint, overlapped it (``to_epoch`` 4, resumed from epoch 1)."""
    max_epochs = 8
    config = config_file(tmp_path, model={"name": "helpers.launch_models:SlowToCheckpoint"},
                         devices={"accelerator": "cpu", "per_trial": 2},
                         trainer={"max_epochs": max_epochs, "limit_train_batches": 2,
                                  "limit_val_batches": 1},
                         stop={"n_trials": 1})
    storage = str(tmp_path / "t.journal")
    process = popen(str(config), "--quiet", cwd=tmp_path)
    wait_for_epochs(storage, 2)  # past epoch 1, the one checkpoint before the segment's end
    process.send_signal(signal.SIGTERM)
    out = finish(process, timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, out[-3000:]
    (trial,) = study_of(storage).get_trials(deepcopy=False)
    paused, reported = trial.user_attrs[ATTR.PAUSED], len(trial.intermediate_values)
    assert paused is not None and paused["epoch"] == 1, trial.user_attrs
    assert trial.user_attrs[ATTR.RESUME_POINT]["epoch"] == 1
    assert 1 < reported < max_epochs, trial.intermediate_values  # epochs 2.. were not saved
    (first,) = trial.user_attrs[ATTR.SEGMENTS]
    assert (first["device"], first["how"]) == ("cpu:0,1", "interrupted"), first
    assert (first["from_epoch"], first["to_epoch"]) == (0, paused["epoch"]), first

    again = launch(str(config), "--quiet", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    (trial,) = study_of(storage).get_trials(deepcopy=False)
    assert trial.state == TrialState.COMPLETE, trial.user_attrs
    assert sorted(trial.intermediate_values) == list(range(1, max_epochs + 1))
    segments = trial.user_attrs[ATTR.SEGMENTS]
    assert [s["how"] for s in segments] == ["interrupted", "complete"], segments
    assert segments[1]["from_epoch"] == segments[0]["to_epoch"] == 1, segments
    assert segments[1]["to_epoch"] == trial.user_attrs[ATTR.EPOCHS] == max_epochs
    assert trial.user_attrs[ATTR.EPOCHS_TRAINED] == max_epochs  # each epoch counted once


def test_a_resumed_study_draws_new_configurations(tmp_path: Path) -> None:
    """A seeded sampler draws each trial from the trial's own seed: a second run of a study
    (more trials) does not draw again what the first run's workers drew."""
    config = config_file(tmp_path, trainer={"max_epochs": 1, "limit_train_batches": 1,
                                            "limit_val_batches": 1}, stop={"n_trials": 4})
    first = launch(str(config), cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    again = launch(str(config), "--set", "stop.n_trials=8", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    drawn = [tuple(sorted(t.params.items())) for t in trials]
    assert len(drawn) == 8 and len(set(drawn)) == 8, drawn


def test_stale_running_trials_of_a_dead_launcher_end_on_resume(tmp_path: Path) -> None:
    """A RUNNING trial of a launcher that died (kill -9 of the machine's launcher and workers):
    with stop.max_retries: 0 it ends FAIL on resume; by default it is retrained."""
    config = config_file(tmp_path, stop={"n_trials": 3, "max_retries": 0})
    storage = str(tmp_path / "t.journal")
    study = optuna.create_study(study_name="t", storage=open_storage(storage))
    stale = study.ask()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale.set_user_attr("host", socket.gethostname())
    stale.set_user_attr("launcher_pid", dead.pid)
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = study_of(storage).get_trials(deepcopy=False)
    assert trials[0].state == TrialState.FAIL
    assert "stopped while the trial ran" in trials[0].user_attrs["fail_reason"]
    assert len(trials) == 3 and {t.state for t in trials} <= FINISHED


def _budget_trial(study: optuna.Study) -> optuna.trial.FrozenTrial:
    """The trial the budget stopped, checked for what every budget stop keeps."""
    trials = study.get_trials(deepcopy=False)
    counts = states(study)
    assert counts["FAIL"] == 0, counts
    assert counts["WAITING"] == 2, counts  # unclaimed tickets stay for the next run
    trial = trials[0]
    attrs = trial.user_attrs
    assert "fail_reason" not in attrs
    # every epoch trained has its end time; only the validated ones have a value
    assert attrs["epochs"] == len(attrs["epoch_end_times"]) >= len(trial.intermediate_values)
    assert all(step <= attrs["epochs"] for step in trial.intermediate_values)
    if trial.state == TrialState.RUNNING:  # paused at its last checkpoint for the next run
        paused = attrs[ATTR.PAUSED]
        assert paused["epoch"] == (attrs[ATTR.RESUME_POINT]["epoch"]
                                   if ATTR.RESUME_POINT in attrs else 0)
        if paused["epoch"]:
            assert Path(paused["checkpoint"]).is_file()
    return trial


def test_the_wall_clock_budget_pauses_the_interrupted_trial(tmp_path: Path) -> None:
    """A trial still running when stop.max_wallclock_time runs out pauses at its last
    checkpoint with its learning curve and the reason, not FAIL (the next run resumes it); the
    summary names the best value it reached."""
    # 1000 epochs of 16 batches outlast 35 s on any machine (of 4 batches, a quiet one
    # finished them: the trial ended COMPLETE before the budget)
    config = config_file(tmp_path, trainer={"max_epochs": 1000, "limit_train_batches": 16,
                                            "limit_val_batches": 2},
                         devices={"accelerator": "cpu", "count": 1},
                         stop={"n_trials": 3, "max_wallclock_time": 35})
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    reason = "wall-clock budget reached (stop.max_wallclock_time=35 s)"
    assert f"Study 't' stopped: {reason}." in out
    trial = _budget_trial(study_of(str(tmp_path / "t.journal")))
    assert trial.state == TrialState.RUNNING, trial.user_attrs
    assert trial.intermediate_values, "the worker took the whole budget to start"
    assert re.fullmatch(re.escape(reason) + r"; stopped (after|during) epoch \d+",
                        trial.user_attrs[ATTR.PAUSED]["why"])
    epoch, best = min(trial.intermediate_values.items(), key=lambda item: item[1])
    assert "No trial completed yet." in out
    assert (f"Best validation_error seen at any epoch: {best:.4f} (trial 0 at epoch {epoch}, "
            "PAUSED trial)") in out


def test_max_failed_trials_pauses_the_others(tmp_path: Path) -> None:
    """stop.max_failed_trials is the study's budget too: the trial still running when it is
    reached (a good one, lr=0.1) pauses with the reason, the failed one stays FAIL."""
    config = config_file(
        tmp_path, model={"name": "helpers.launch_models:ExplodingLeNet"},
        initial=[{"lr": 0.1, "batch_size": 64}, {"lr": 0.5, "batch_size": 64}],
        trainer={"max_epochs": 1000, "limit_train_batches": 4, "limit_val_batches": 2},
        devices={"accelerator": "cpu", "count": 2},
        stop={"n_trials": 4, "max_failed_trials": 1},
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reason = r"\d trials failed \(stop\.max_failed_trials=1\)"  # 2 if two fail at once
    assert re.search(f"Study 't' stopped: {reason}\\.", result.stdout), result.stdout
    trials = study_of(str(tmp_path / "t.journal")).get_trials(deepcopy=False)
    assert [t.state.name for t in trials[:2]] == ["RUNNING", "FAIL"]
    # The failing slot may claim one more before the supervisor has counted the failure.
    assert {t.state.name for t in trials[2:]} <= {"WAITING", "RUNNING", "FAIL"}
    for trial in trials:
        if trial.state == TrialState.FAIL:
            assert trial.user_attrs["fail_reason"].startswith("RuntimeError: boom at lr=")
        elif trial.state == TrialState.RUNNING:
            assert "fail_reason" not in trial.user_attrs
            assert re.fullmatch(reason + r"; stopped (after|during) epoch \d+",
                                trial.user_attrs[ATTR.PAUSED]["why"])


# grace (s), max_epochs, check_val_every_n_epoch, the reported epoch after which the deadline
# comes (0: a second into the first fit), Ctrl-C after the deadline, devices per trial ->
#   the trial's state, how its stop_reason ends (a regex), the epochs it reported
GRACE_CASES = [
    ("no-grace-stops-mid-epoch", 0, 1000, 3, 3, False, 1,
     TrialState.RUNNING, r"stopped during epoch [4-6]", [3]),
    ("grace-reaches-the-next-report", 120, 1000, 3, 3, False, 1,
     TrialState.RUNNING, r"stopped after epoch 6", [3, 6]),
    ("grace-lets-the-last-epoch-complete", 120, 6, 3, 3, False, 1,
     TrialState.COMPLETE, None, [3, 6]),
    ("grace-runs-out", 2, 1000, 500, 0, False, 1,
     TrialState.RUNNING, r"stopped during epoch \d+", []),
    ("ctrl-c-cuts-the-grace-short", 120, 1000, 3, 3, True, 1,
     TrialState.RUNNING, r"stopped during epoch [4-6]", [3]),
    ("grace-under-ddp", 120, 1000, 3, 3, False, 2,
     TrialState.RUNNING, r"stopped after epoch 6", [3, 6]),
]


@pytest.mark.parametrize(
    ("grace", "max_epochs", "every", "trigger", "ctrl_c", "per_trial", "state", "ending",
     "reported"),
    [c[1:] for c in GRACE_CASES], ids=[c[0] for c in GRACE_CASES],
)
def test_the_budget_stop_and_its_grace(
    tmp_path: Path, grace: float, max_epochs: int, every: int, trigger: int, ctrl_c: bool,
    per_trial: int, state: TrialState, ending: str | None, reported: list[int],
) -> None:
    """stop.grace lets a trial running when the budget runs out go on to its next reported
    epoch (or to its last, and COMPLETE); without a grace, when the grace is over, or on Ctrl-C
    during it, the trial stops at its next batch. The supervisor runs in this process so that
    the test can move its deadline to a known point of the trial."""
    # Three epochs between two reports take far longer than the supervisor takes to send an
    # order (about 0.2 s): every batch of the digits' training split, 32 images a batch.
    config = config_file(
        tmp_path, devices={"accelerator": "cpu", "count": per_trial, "per_trial": per_trial},
        initial=[{"lr": 0.1, "batch_size": 32}],
        trainer={"max_epochs": max_epochs, "check_val_every_n_epoch": every,
                 "limit_val_batches": 2},
        stop={"n_trials": 3, "max_wallclock_time": 600, "grace": grace},
    )
    cfg = load_config(config)
    study, _ = open_study(cfg, open_storage(cfg.storage))
    moved: list[float] = []

    def move_the_deadline(sup: Supervisor) -> None:
        row = sup.rows.get(0)
        if row is None or row.fit_started is None:
            return
        due = row.epochs >= trigger > 0 or (trigger == 0 and time.time() > row.fit_started + 1)
        if due and not moved:
            sup.deadline = time.time()
            moved.append(sup.deadline)
        elif ctrl_c and sup.stop_reason is not None and len(moved) == 1:
            moved.append(time.time())
            os.kill(os.getpid(), signal.SIGINT)

    sup = Supervisor(cfg, study, plan_slots(per_trial, per_trial), "cpu", n_cores=per_trial,
                     on_change=move_the_deadline)
    why = sup.run()
    took = time.time() - moved[0]
    assert why == "wall-clock budget reached (stop.max_wallclock_time=600 s)"
    trial = _budget_trial(study_of(cfg.storage))
    assert trial.state == state, trial.user_attrs
    assert sorted(trial.intermediate_values) == reported
    if ending is None:
        assert trial.user_attrs.get(ATTR.PAUSED) is None
    else:  # paused (RUNNING) at its last checkpoint, for the next run to resume
        assert re.fullmatch(re.escape(why) + "; " + ending, trial.user_attrs[ATTR.PAUSED]["why"])
    # One end time per epoch trained, validated or not: as many as the epochs the stop left
    # complete (all of them for a trial that reached its last epoch).
    times = trial.user_attrs["epoch_end_times"]
    assert len(times) == trial.user_attrs[ATTR.EPOCHS] == len(set(times))
    if ending is None:
        assert len(times) == max_epochs
    else:
        stopped = re.search(r"stopped (after|during) epoch (\d+)$",
                            trial.user_attrs[ATTR.PAUSED]["why"])
        assert stopped is not None
        epoch = int(stopped.group(2))
        assert len(times) == (epoch if stopped.group(1) == "after" else epoch - 1)
    assert all(b > a for a, b in zip(times, times[1:], strict=False))
    assert took < (0 if ctrl_c else grace) + 20, f"the run ended {took:.1f} s after the deadline"
    if grace and not ctrl_c and ending and "during" in ending:
        assert took >= grace  # stopped mid-epoch only once the grace was over


def _trial(state: TrialState, curve: dict[int, float], lr: float = 0.1, **attrs: Any) -> Any:
    return optuna.trial.create_trial(
        state=state, value=curve[max(curve)] if state == TrialState.COMPLETE else None,
        params={"lr": lr}, distributions={"lr": optuna.distributions.FloatDistribution(0.01, 1)},
        intermediate_values=curve, user_attrs=attrs,
    )


def test_the_summary_names_the_best_value_of_a_stopped_trial(tmp_path: Path) -> None:
    """The best value anywhere (any state, any epoch) is named beside the best COMPLETE trial,
    saying that the study's budget stopped the trial that reached it; not when it is the same.
    Parameters are rounded as the per-trial lines round them (the study keeps them whole)."""
    cfg = load_config(config_file(tmp_path))
    study = optuna.create_study(direction="minimize")
    study.add_trial(_trial(TrialState.COMPLETE, {1: 0.004, 2: 0.0009}, checkpoint="/c/0.ckpt"))
    study.add_trial(_trial(TrialState.PRUNED, {1: 0.003, 2: 0.0002, 3: 0.0004},
                           stop_reason="wall-clock budget reached", checkpoint="/c/1.ckpt",
                           lr=0.0325003874457434))
    study.add_trial(_trial(TrialState.FAIL, {1: float("nan")}, fail_reason="boom"))
    lines = summary(cfg, study, None, "wall-clock budget reached")
    assert "Best validation_error: 0.0009 (trial 0) with lr=0.1" in lines
    assert "Best checkpoint: /c/0.ckpt" in lines
    seen = lines.index("Best validation_error seen at any epoch: 0.0002 (trial 1 at epoch 2, "
                       "stopped by the study's budget) with lr=0.0325")
    assert lines[seen + 1] == "Its best checkpoint: /c/1.ckpt"

    alone = optuna.create_study(direction="minimize")
    alone.add_trial(_trial(TrialState.PRUNED, {1: 0.5, 2: 0.3}))
    lines = summary(cfg, alone, None, "all trials done")
    assert "No trial completed yet." in lines
    assert ("Best validation_error seen at any epoch: 0.3000 (trial 0 at epoch 2, PRUNED trial) "
            "with lr=0.1") in lines

    study.add_trial(_trial(TrialState.COMPLETE, {1: 0.01, 2: 0.0001}, lr=0.12345678))
    lines = summary(cfg, study, None, "all trials done")
    assert "Best validation_error: 0.0001 (trial 3) with lr=0.123" in lines
    assert study.best_params == {"lr": 0.12345678}  # whole in the study, rounded in the line
    assert not any(line.startswith("Best validation_error seen") for line in lines)


@pytest.mark.postgres
def test_two_launchers_share_one_postgres_study(tmp_path: Path, postgres_server: Any) -> None:
    postgres_url = postgres_server.new_database("launchers")
    config = config_file(tmp_path, storage=postgres_url, devices={"accelerator": "cpu", "count": 1},
                         stop={"n_trials": 8},
                         model={"name": "helpers.launch_models:MeetsAnotherLauncher"})
    first = popen(str(config), "--quiet", cwd=tmp_path)
    second = popen(str(config), "--quiet", cwd=tmp_path)
    outs = [finish(first), finish(second)]
    assert first.returncode == 0 and second.returncode == 0, "\n".join(o[-2000:] for o in outs)
    trials = study_of(postgres_url).get_trials(deepcopy=False)
    assert len(trials) == 8 and {t.state for t in trials} == {TrialState.COMPLETE}
    assert sum(t.params == INITIAL for t in trials) == 1
    assert len({t.user_attrs["launcher_pid"] for t in trials}) == 2
    # one run folder, two slot 0s: each launcher's log in a folder of its own, and said so
    workers = tmp_path / "runs" / "t" / "workers"
    host = socket.gethostname().split(".")[0]
    own = {p.pid: workers / f"{host}-{p.pid}" for p in (first, second)}
    logs = sorted(workers.rglob("slot*.log"))
    assert len(logs) == 2 and workers / "slot0.log" in logs, logs
    (other,) = [log.parent for log in logs if log.parent != workers]
    assert other in own.values()
    for process, out in zip((first, second), outs, strict=True):
        mine = other if own[process.pid] == other else workers
        assert f"(worker logs: {mine}/)" in out, out[-2000:]


BAD_CALLS = [
    ("missing-file", ["nope.yaml"], "config: cannot read nope.yaml"),
    ("unknown-key", ["--set", "colour=blue"], "colour: unknown field"),
    ("metric-not-logged", ["--set", "metric=accuracy"], "metric: 'accuracy' is not logged"),
    ("too-many-devices", ["--set", "devices.per_trial=64"], "devices.per_trial: is 64"),
    ("device-count", ["--set", "devices.count=64"], "devices.count: is 64"),
    ("no-gpu", ["--set", "devices.accelerator=gpu"], "devices.accelerator: is gpu"),
    ("bad-set", ["--set", "stop.n_trials"], "--set: 'stop.n_trials' must look like"),
    ("negative-grace", ["--set", "stop.grace=-1"], "stop.grace: is -1, but must be seconds >= 0"),
    ("unreachable-postgres",
     ["--set", "storage=postgresql+psycopg2://hpo:s3cr3t-pw@127.0.0.1:1/db"],
     "storage: cannot open postgresql+psycopg2://hpo:***@127.0.0.1:1/db"),
]


@pytest.mark.parametrize(("args", "expected"), [c[1:] for c in BAD_CALLS],
                         ids=[c[0] for c in BAD_CALLS])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    config = config_file(tmp_path)
    first = [] if args[0] == "nope.yaml" else [str(config)]
    result = launch(*first, *args, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert "Traceback" not in result.stderr and "s3cr3t-pw" not in result.stdout + result.stderr
    assert not (tmp_path / "t.journal").exists() and not (tmp_path / "runs").exists()


def test_check_validates_without_writing(tmp_path: Path) -> None:
    result = launch(str(config_file(tmp_path)), "--check", cwd=tmp_path, timeout=120)
    assert result.returncode == 0 and "config OK" in result.stdout
    assert not (tmp_path / "t.journal").exists()


def test_help_has_an_example() -> None:
    result = launch("--help", cwd=TESTS, timeout=60)
    assert result.returncode == 0 and "example: python -m lightning_hpo.launch" in result.stdout


def _commands_in(config: Path) -> list[list[str]]:
    """The launcher commands a config's comments give, as argument lists (a trailing remark in
    parentheses, ``(this file is the default)``, is not part of the command)."""
    commands = []
    for line in config.read_text().splitlines():
        match = re.match(r"#\s+(python -m lightning_hpo\.launch\b.*)", line)
        if match:
            command = shlex.split(re.sub(r"\s*\(.*\)\s*$", "", match.group(1)))
            commands.append(command[3:])
    return commands


@pytest.mark.parametrize("config", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_the_command_in_each_config_runs_that_config(
    config: Path, fashion_root: tuple[Path, object], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """Each shipped config's comment gives a command that, run from the checkout's root, the
    launcher accepts (``--check``) and that loads this very config (its study name).

    Storage, run folder, Fashion-MNIST root and a GPU-only accelerator are pointed at this test's
    folder and machine, so nothing is read from or written to the checkout.
    """
    commands = _commands_in(config)
    assert len(commands) == 1, f"{config.name}: one launcher command in its comments"
    study = yaml.safe_load(config.read_text())["study"]
    here = [f"storage={tmp_path}/s.journal", f"run_dir={tmp_path}/runs",
            f"data.root={fashion_root[0]}"]
    if yaml.safe_load(config.read_text()).get("data", {}).get("name") != "fashion_mnist":
        here.pop()
    if torch.cuda.device_count() == 0:
        here.append("devices.accelerator=auto")
    monkeypatch.chdir(CONFIGS.parent)
    code = launcher_main([*commands[0], *(a for kv in here for a in ("--set", kv)), "--check"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith(f"config OK: study '{study}' "), out.out
    assert not (tmp_path / "s.journal").exists() and not (tmp_path / "runs").exists()


_SET_UP = """
import sys, time, yaml
from pathlib import Path
from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.study.creation import open_study
from lightning_hpo.storage import open_storage
cfg = parse_config(yaml.safe_load(Path(sys.argv[1]).read_text()))
storage = open_storage(cfg.storage)
Path(sys.argv[2], "ready-" + sys.argv[3]).touch()
while not Path(sys.argv[2], "go").exists():
    time.sleep(0.001)
open_study(cfg, storage)
"""


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest, name: str) -> str:
    """A fresh storage of ``kind``: a journal file, an SQLite file or a PostgreSQL database."""
    if kind == "postgres":
        return str(request.getfixturevalue("postgres_server").new_database(name))
    return {"journal": str(tmp_path / "t.journal"), "sqlite": f"sqlite:///{tmp_path}/t.db"}[kind]


def _together(script: str, config: Path, barrier: Path, n: int) -> None:
    """Run ``script`` in ``n`` processes that start its work at the same moment (each touches
    ``ready-K`` in ``barrier``, then waits for ``go``); each must exit 0."""
    barrier.mkdir()
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(config), str(barrier), str(k)])
        for k in range(n)
    ]
    wait_for(lambda: len(list(barrier.glob("ready-*"))) == n, what=f"{n} processes ready")
    (barrier / "go").touch()
    for process in processes:
        assert process.wait(timeout=120) == 0


@pytest.mark.parametrize("kind", ["journal", "sqlite", pytest.param("postgres",
                                                                     marks=pytest.mark.postgres)])
def test_launchers_setting_up_together_queue_the_budget_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Several launchers create-or-load one study at the same moment: n_trials trials in the
    queue, the initial configuration once (the set-up is serialised per study)."""
    url = _url(kind, tmp_path, request, "setup")
    config = config_file(tmp_path, storage=url, stop={"n_trials": 12})
    _together(_SET_UP, config, tmp_path / "barrier", 4)
    trials = study_of(url).get_trials(deepcopy=False)
    assert len(trials) == 12 and {t.state for t in trials} == {TrialState.WAITING}
    assert sum(t.system_attrs.get("fixed_params") == INITIAL for t in trials) == 1


def test_the_study_keeps_the_config_as_written_with_resolved_values(tmp_path: Path) -> None:
    """Readers (the report) need no config defaults: the study stores the resolved ones."""
    raw = {"study": "kept", "storage": str(tmp_path / "kept.journal"), "model": {"name": "lenet"},
           "space": {"lr": {"loguniform": [0.01, 1.0]}}, "trainer": {"precision": 32},
           "pruner": {"name": "hyperband", "max_resource": 9}, "stop": {"n_trials": 2}}
    cfg = parse_config(raw)
    study, created = open_study(cfg, open_storage(cfg.storage))
    stored = json.loads(study.user_attrs[CONFIG_ATTR])
    assert created
    assert (stored["metric"], stored["direction"]) == ("validation_error", "minimize")
    assert stored["trainer"] == {"precision": 32, "max_epochs": 9}
    assert stored["pruner"] == {"name": "hyperband", "max_resource": 9}  # as written
    assert {k: v for k, v in stored.items() if k not in ("metric", "direction", "trainer")} == {
        k: v for k, v in raw.items() if k != "trainer"}


def test_fewer_trials_on_a_study_with_trials_queued_beyond_them_is_refused(
    tmp_path: Path,
) -> None:
    """The study queued 6 trials (a first run stopped before it started them all): a run with
    stop.n_trials=2 would have run them all the same. Refused, nothing written; fewer trials
    where none is queued beyond them go on (nothing left to run)."""
    raw = yaml.safe_load(config_file(tmp_path, stop={"n_trials": 6}).read_text())
    cfg = parse_config(raw)
    study, _ = open_study(cfg, open_storage(cfg.storage))
    for _ in range(3):
        trial = study.ask()  # what workers claimed: trials 0-2 started, 3-5 queued
        study.tell(trial, 0.5)
    before = Path(cfg.storage).read_bytes()
    fewer = parse_config({**raw, "stop": {"n_trials": 2}})
    with pytest.raises(ConfigError) as info:
        open_study(fewer, open_storage(cfg.storage))
    assert info.value.field == "stop.n_trials"
    assert "holds 6 trials already, 3 of them queued" in info.value.message
    assert "give at least 6" in info.value.message
    assert Path(cfg.storage).read_bytes() == before
    assert open_study(parse_config({**raw, "stop": {"n_trials": 6}}),
                      open_storage(cfg.storage))[0].study_name == "t"


_HOLD_LOCK = """
import sys, time, yaml
from pathlib import Path
from lightning_hpo._optuna import storage_of
from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.study.creation import open_study, study_lock
from lightning_hpo.storage import open_storage
cfg = parse_config(yaml.safe_load(Path(sys.argv[1]).read_text()))
study, _ = open_study(cfg, open_storage(cfg.storage))
barrier, name = Path(sys.argv[2]), sys.argv[3]
(barrier / f"ready-{name}").touch()
while not (barrier / "go").exists():
    time.sleep(0.001)
with study_lock(cfg, storage_of(study), "schedule"):  # the study's storage, as the scheduler
    (barrier / f"in-{name}").write_text(str(time.monotonic()))
    time.sleep(0.5)
    (barrier / f"out-{name}").write_text(str(time.monotonic()))
"""


@pytest.mark.parametrize("kind", ["journal", "sqlite", pytest.param("postgres",
                                                                     marks=pytest.mark.postgres)])
def test_the_schedule_lock_excludes_other_processes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Three processes take the "schedule" lock through the study's own storage (Optuna's
    cache around an RDB storage, as the scheduler passes it): their turns never overlap. On
    PostgreSQL no lock was taken at all before, and two launchers resumed one trial twice."""
    config = config_file(tmp_path, storage=_url(kind, tmp_path, request, "lock"),
                         stop={"n_trials": 2})
    barrier = tmp_path / "barrier"
    _together(_HOLD_LOCK, config, barrier, 3)
    turns = sorted((float((barrier / f"in-{k}").read_text()),
                    float((barrier / f"out-{k}").read_text())) for k in range(3))
    for (_, left), (entered, _) in zip(turns, turns[1:], strict=False):
        assert entered >= left, turns  # the next one entered only after the last one left


# ------------------------------------------------------------------------------------------
# An edited config of an existing study (the study keeps the config it was created with).


@pytest.fixture(scope="module")
def asha_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a study of 2 ASHA trials the real launcher ran (``config.yaml``,
    ``t.journal``, ``runs/``); the tests that use it only read it."""
    folder = tmp_path_factory.mktemp("asha-study")
    config = config_file(folder, pruner={"name": "asha", "max_resource": 2},
                         stop={"n_trials": 2})
    result = launch(str(config), "--quiet", cwd=folder)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return folder


def _everything(folder: Path) -> tuple[bytes, list[str], list[dict[str, Any]]]:
    """The study's journal, every file and folder, and each trial's state, values and attrs."""
    trials = [{"state": t.state, "values": t.intermediate_values, "attrs": t.user_attrs}
              for t in study_of(str(folder / "t.journal")).get_trials(deepcopy=False)]
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    return (folder / "t.journal").read_bytes(), files, trials


EDITS = [  # (id, --set arguments, the change as named, how to give the old value back)
    ("pruner-name", ["pruner.name=sync_sh", "stop.n_trials=4"], "pruner.name asha -> sync_sh",
     "--set pruner.name=asha"),
    ("direction", ["direction=maximize"], "direction minimize -> maximize",
     "--set direction=minimize"),
    ("metric", ["metric=train_loss"], "metric validation_error -> train_loss",
     "--set metric=validation_error"),
    ("space", ["space.lr={loguniform: [0.001, 1.0]}"],
     "space.lr {loguniform: [0.01, 1.0]} -> {loguniform: [0.001, 1.0]}",
     "--set 'space.lr={loguniform: [0.01, 1.0]}'"),
]


@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
@pytest.mark.parametrize(("overrides", "named", "restore"), [e[1:] for e in EDITS],
                         ids=[e[0] for e in EDITS])
def test_an_edited_config_that_would_mix_two_studies_is_refused(
    asha_study: Path, overrides: list[str], named: str, restore: str, check: bool,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's case: 2 ASHA trials, then the same command with pruner.name=sync_sh and 4
    trials ran on, exit 0. Now: exit 2, one line naming the change and how to go on, the study
    and its folders as they were (run in this process: the refusal comes before any trial)."""
    before = _everything(asha_study)
    monkeypatch.chdir(asha_study)
    sets = [arg for kv in overrides for arg in ("--set", kv)]
    code = launcher_main([str(asha_study / "config.yaml"), *sets, *(["--check"] * check)])
    out = capsys.readouterr()
    assert code == 2, out.out + out.err
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert f"study 't' was created with other settings: {named};" in lines[0], lines[0]
    assert "name a new study (--set study=NEW)" in lines[0] and restore in lines[0], lines[0]
    assert "config OK" not in out.out and "Resuming" not in out.out
    assert _everything(asha_study) == before


def test_an_edited_budget_goes_on_and_says_what_changed(
    asha_study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """More trials (and another run folder: the study's copy is here) go on, said in one line;
    the study keeps the config it was created with."""
    (tmp_path / "t.journal").write_bytes((asha_study / "t.journal").read_bytes())
    config = config_file(tmp_path, pruner={"name": "asha", "max_resource": 2},
                         stop={"n_trials": 3})
    said = ("Changed since the study was created: "
            f"run_dir {asha_study / 'runs'} -> {tmp_path / 'runs'}, stop.n_trials 2 -> 3")
    monkeypatch.chdir(tmp_path)
    assert launcher_main([str(config), "--check"]) == 0
    checked = capsys.readouterr().out.splitlines()
    assert checked[0].startswith("config OK") and checked[1:] == [said], checked
    result = launch(str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Resuming study 't'") and lines[1] == said, lines[:3]
    study = study_of(str(tmp_path / "t.journal"))
    assert len(study.trials) == 3 and {t.state for t in study.trials} <= FINISHED
    assert json.loads(study.user_attrs[CONFIG_ATTR])["stop"] == {"n_trials": 2}


def test_check_on_an_sql_database_says_the_config_is_compared_by_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--check does not open Optuna's tables of an SQLite file (that may write): it says the
    stored config is compared when the study runs, and writes nothing."""
    database = tmp_path / "s.db"
    monkeypatch.chdir(tmp_path)
    code = launcher_main(["quickstart", "--check", "--set", f"storage=sqlite:///{database}",
                          "--set", f"run_dir={tmp_path}/runs"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "not compared by --check on an SQL database" in out.out, out.out
    assert not database.exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["--bogus"], "error: unrecognized arguments: --bogus (the options: CONFIG (no flag), "
                  "--set KEY=VALUE, --quiet, --check, --print-config, --list-configs, "
                  "--list-fields; --help explains them)"),
    (["--set"], "error: set: needs a value (--set KEY=VALUE)"),
    (["postgresql://hpo:s3cret@db/studies"],
     "error: config: is a URL (postgresql://hpo:***@db/studies), but must be a YAML file or a "
     "shipped config's name; a storage URL goes in --set storage=URL"),
    (["--check", "--set", "stop.n_trials=postgresql://hpo:s3cret@db/studies"],
     "error: stop.n_trials: is 'postgresql://hpo:***@db/studies', but must be an integer from 1 "
     "to 10000"),
], ids=["unknown-flag", "flag-without-value", "url-as-config", "url-in-a-bad-value"])
def test_the_launchers_refusals_are_one_line_and_mask_passwords(
    argv: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse's refusals printed its usage block; a storage URL typed where the config goes
    was read as a file path (``postgresql:/hpo:s3cret@db/studies``, password shown), and a URL
    in a refused value was printed as it was. Now one line, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    try:
        code = launcher_main(argv)
    except SystemExit as exit_:  # argparse's refusals exit from parse_args
        code = exit_.code  # type: ignore[assignment]
    out = capsys.readouterr()
    assert code == 2 and out.err.splitlines() == [said], out.err
    assert "s3cret" not in out.out + out.err and list(tmp_path.iterdir()) == []
