"""``lightning_hpo.launch.run`` in this process, with real workers: it ends as the command does.
Where the command exits non-zero after a run, ``run`` raises: every trial FAIL is a
``TrialsFailedError`` with the command's one line (exit 1), and a signal that stopped the run
reaches the caller once the trials paused (Ctrl-C: ``KeyboardInterrupt``; exit 130)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from helpers.support import TESTS, config_file, states, study_of, wait_for
from optuna.trial import TrialState

import lightning_hpo.launch
from lightning_hpo.errors import ConfigError, TrialsFailedError
from lightning_hpo.launch import runner
from lightning_hpo.launch.runner import Outcome
from lightning_hpo.schema import ATTR

pytestmark = pytest.mark.slow


@pytest.fixture
def workers_see_tests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The workers (this process's children) import the test models; Optuna's verbosity, which
    the launcher sets, is restored."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
    verbosity = optuna.logging.get_verbosity()
    yield
    optuna.logging.set_verbosity(verbosity)


def _config(tmp_path: Path, **fields: object) -> dict[str, Any]:
    return dict(yaml.safe_load(config_file(tmp_path, **fields).read_text()))


def test_run_raises_with_the_commands_line_when_every_trial_failed(
    tmp_path: Path, workers_see_tests: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command prints ``error: every trial of this run failed ...`` and exits 1; ``run``
    raises the same line, after the summary, with the study to look at."""
    config = _config(tmp_path, model={"name": "helpers.launch_models:ExplodingLeNet"},
                     space={"lr": {"loguniform": [0.2, 1.0]}}, initial=[{"lr": 0.5}],
                     stop={"n_trials": 2}, devices={"accelerator": "cpu", "count": 1})
    with pytest.raises(TrialsFailedError) as caught:
        lightning_hpo.launch.run(config)
    assert str(caught.value) == ("every trial of this run failed (2 of 2); the first, trial 0: "
                                 "RuntimeError: boom at lr=0.500")
    study = caught.value.study
    assert isinstance(study, optuna.Study)
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.FAIL] * 2
    assert "This run: 2 trials on 1 slot in" in capsys.readouterr().out  # the summary first


def test_run_delivers_ctrl_c_once_the_running_trials_paused(
    tmp_path: Path, workers_see_tests: None
) -> None:
    """SIGINT while trials run: they pause at their last checkpoint (as the command's do), and
    then ``run`` raises KeyboardInterrupt instead of returning as though the budget were done."""
    storage = str(tmp_path / "t.journal")
    config = _config(tmp_path, trainer={"max_epochs": 3}, stop={"n_trials": 6},
                     devices={"accelerator": "cpu", "count": 1})
    returned = threading.Event()  # no SIGINT once run() is back: it would hit pytest

    def interrupt() -> None:
        wait_for(lambda: returned.is_set() or (states(study_of(storage))["COMPLETE"] >= 1
                                               and states(study_of(storage))["RUNNING"] >= 1),
                 what="one done, one running")
        if not returned.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt, daemon=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            lightning_hpo.launch.run(config)
    finally:
        returned.set()
        sender.join(timeout=5)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the caller's again
    study = study_of(storage)
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    assert states(study)["FAIL"] == 0 and running, states(study)
    for trial in running:  # paused to resume: the same config again goes on with them
        assert trial.user_attrs[ATTR.PAUSED]["why"] == "interrupted: launcher stopped by SIGINT"


def test_run_hands_sigterm_to_the_callers_handler_and_returns_where_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM and SIGUSR1 go to whatever handler the caller has (their default ends the
    process, as the command ends); a handler that returns gets the study back."""
    study = optuna.create_study()
    monkeypatch.setattr(runner, "launch",
                        lambda cfg, **kwargs: Outcome(study, "stopped by SIGTERM"))
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        assert runner.run(_config(tmp_path)) is study
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert got == [signal.SIGTERM]


def test_an_outcome_names_the_signal_that_stopped_it() -> None:
    assert Outcome(None, "stopped by SIGUSR1").stopped_by is signal.SIGUSR1
    assert Outcome(None, "all trials done", "every trial ...").stopped_by is None


@pytest.mark.parametrize(
    ("config", "overrides", "message"),
    [
        ({"study": "s"}, "stop.n_trials=2",
         "overrides: is the string 'stop.n_trials=2', but must be a list of them: "
         "['stop.n_trials=2']"),
        ({"study": "s"}, ["stop.n_trials=2", 3],
         "overrides: holds 3 (int), but must hold 'key.sub=value' strings only"),
        ({"study": "s"}, 3, "overrides: is 3 (int), but must be a list of 'key.sub=value' strings"),
        (123, (), "config: is 123 (int), but must be a mapping (the YAML file's content), a "
         "config file's path or a shipped config's name"),
        ([("study", "s")], (), "config: is [('study', 's')] (list), but must be a mapping"),
    ],
    ids=["overrides-one-string", "override-not-a-string", "overrides-int", "config-int",
         "config-list"],
)
def test_run_refuses_arguments_of_the_wrong_kind_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: Any, overrides: Any, message: str
) -> None:
    """One string of overrides was read character by character ("--set: 's' must look like
    key.sub=value"); an int override was an AttributeError, an int or list config a TypeError.
    Nothing is written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        lightning_hpo.launch.run(config, overrides)
    assert str(info.value).startswith(message)
    assert list(tmp_path.iterdir()) == []
