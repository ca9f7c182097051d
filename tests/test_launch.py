"""The launcher with real processes on CPU: full runs, DDP slots, kills, signals, resume,
several launchers on one PostgreSQL study, and bad input."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from _support import (
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
)
from optuna.trial import TrialState

from lightning_hpo.config import DEFAULT_CONFIG
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


def test_failing_trials_are_recorded_and_the_worker_goes_on(tmp_path: Path) -> None:
    config = config_file(tmp_path, model={"name": "_launch_models:ExplodingLeNet"},
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
    config = config_file(tmp_path, trainer={"max_epochs": 6}, stop={"n_trials": 6})
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
    assert len({t.user_attrs["pid"] for t in trials if "pid" in t.user_attrs}) >= 3


def test_sigterm_stops_cleanly_and_the_same_command_resumes(tmp_path: Path) -> None:
    config = config_file(tmp_path, trainer={"max_epochs": 6}, stop={"n_trials": 6})
    storage = str(tmp_path / "t.journal")
    process = popen(str(config), cwd=tmp_path)
    wait_for(lambda: states(study_of(storage))["COMPLETE"] >= 1
              and states(study_of(storage))["RUNNING"] >= 1, what="one done, one running")
    process.send_signal(signal.SIGTERM)
    out = finish(process, timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert "stopped: stopped by SIGTERM" in out
    study = study_of(storage)
    counts = states(study)
    assert counts["RUNNING"] == 0 and counts["FAIL"] >= 1 and counts["WAITING"] >= 1, counts
    for trial in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        assert trial.user_attrs["fail_reason"].startswith("interrupted:")

    again = launch(str(config), cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "Resuming study 't'" in again.stdout
    trials = study_of(storage).get_trials(deepcopy=False)
    assert len(trials) == 6 and {t.state for t in trials} <= FINISHED
    assert sum(t.params == INITIAL for t in trials) == 1


def test_stale_running_trials_of_a_dead_launcher_end_on_resume(tmp_path: Path) -> None:
    config = config_file(tmp_path, stop={"n_trials": 3})
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


@pytest.mark.postgres
def test_two_launchers_share_one_postgres_study(tmp_path: Path, postgres_server: Any) -> None:
    postgres_url = postgres_server.new_database("launchers")
    config = config_file(tmp_path, storage=postgres_url, devices={"accelerator": "cpu", "count": 1},
                     stop={"n_trials": 8})
    first = popen(str(config), "--quiet", cwd=tmp_path)
    second = popen(str(config), "--quiet", cwd=tmp_path)
    outs = [finish(first), finish(second)]
    assert first.returncode == 0 and second.returncode == 0, "\n".join(o[-2000:] for o in outs)
    trials = study_of(postgres_url).get_trials(deepcopy=False)
    assert len(trials) == 8 and {t.state for t in trials} == {TrialState.COMPLETE}
    assert sum(t.params == INITIAL for t in trials) == 1
    assert len({t.user_attrs["launcher_pid"] for t in trials}) == 2


BAD_CALLS = [
    ("missing-file", ["nope.yaml"], "config: cannot read nope.yaml"),
    ("unknown-key", ["--set", "colour=blue"], "colour: unknown field"),
    ("metric-not-logged", ["--set", "metric=accuracy"], "metric: 'accuracy' is not logged"),
    ("too-many-devices", ["--set", "devices.per_trial=64"], "devices.per_trial: is 64"),
    ("device-count", ["--set", "devices.count=64"], "devices.count: is 64"),
    ("no-gpu", ["--set", "devices.accelerator=gpu"], "devices.accelerator: is gpu"),
    ("bad-set", ["--set", "stop.n_trials"], "--set: 'stop.n_trials' must look like"),
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


def test_shipped_configs_mention_their_command() -> None:
    for path in CONFIGS.glob("*.yaml"):
        assert "lightning_hpo.launch" in path.read_text(), path


_SET_UP = """
import sys, time, yaml
from pathlib import Path
from lightning_hpo.config import parse_config
from lightning_hpo.launch.study import open_study
from lightning_hpo.storage import open_storage
cfg = parse_config(yaml.safe_load(Path(sys.argv[1]).read_text()))
storage = open_storage(cfg.storage)
Path(sys.argv[2], "ready-" + sys.argv[3]).touch()
while not Path(sys.argv[2], "go").exists():
    time.sleep(0.001)
open_study(cfg, storage)
"""


@pytest.mark.parametrize("kind", ["journal", "sqlite", pytest.param("postgres",
                                                                     marks=pytest.mark.postgres)])
def test_launchers_setting_up_together_queue_the_budget_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Several launchers create-or-load one study at the same moment: n_trials trials in the
    queue, the initial configuration once (the set-up is serialised per study)."""
    storage = {"journal": str(tmp_path / "t.journal"), "sqlite": f"sqlite:///{tmp_path}/t.db"}
    url = (request.getfixturevalue("postgres_server").new_database("setup") if kind == "postgres"
           else storage[kind])
    config = config_file(tmp_path, storage=url, stop={"n_trials": 12})
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    processes = [
        subprocess.Popen([sys.executable, "-c", _SET_UP, str(config), str(barrier), str(k)])
        for k in range(4)
    ]
    wait_for(lambda: len(list(barrier.glob("ready-*"))) == 4, what="4 processes ready")
    (barrier / "go").touch()
    for process in processes:
        assert process.wait(timeout=120) == 0
    trials = study_of(url).get_trials(deepcopy=False)
    assert len(trials) == 12 and {t.state for t in trials} == {TrialState.WAITING}
    assert sum(t.system_attrs.get("fixed_params") == INITIAL for t in trials) == 1
