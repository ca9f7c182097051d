"""Tuning a LightningCLI project as it is, end to end: ``examples/lightning_cli`` (``main.py``
with its ``ShopCLI``, ``config.yaml``, ``tune.yaml``) is copied into a temporary folder and tuned
there with ``python -m lightning_hpo.launch tune.yaml`` as a stranger would, shrunk with
``--set`` (a few trials, a few batches per epoch); the study, the trial folders and
``best_config.yaml`` are read back.

* ASHA (stop mode) on 2 slots: each trial's ``config.yaml`` holds its values, the project's
  callback (``epochs.txt``) and logger (``lightning_logs/version_0``) ran in the trial's folder,
  the launcher's ``metrics.csv`` has the project's ``lr-SGD``; ``best_config.yaml`` is the best
  COMPLETE trial's and retrains with the project's own ``python main.py fit --config``;
* promotion ASHA: a paused and resumed trial continues the CLI-built StepLR exactly;
* DDP (2 processes per trial), Lightning's default CLI in subclass mode through
  ``lightning_hpo.launch.run`` (in this process), a metric the model never logs;
* ``--check`` (in this process, through the launcher's ``main``): bad input is one
  ``error: <field>: ...`` line and exit code 2, with nothing written.

Launches are real multi-process runs (``slow``). Builders: lightning_hpo.launch.checks.project,
lightning_hpo.launch.config.cli_spec; the report's copy of the best config:
tests/unit/report/test_best_config.py.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from helpers.support import REPO, ddp_clean_env, run_job
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo.launch.__main__ import main as launcher_main
from lightning_hpo.launch.checks.project import owned_lines
from lightning_hpo.schema import ATTR
from lightning_hpo.storage import open_storage

EXAMPLE = REPO / "examples" / "lightning_cli"
PROJECT_FILES = ("main.py", "config.yaml", "tune.yaml")
STUDY = "shop"
#: Two training batches and one validation batch per epoch: every epoch takes milliseconds.
TINY = ("--set", "trainer.limit_train_batches=2", "--set", "trainer.limit_val_batches=1")
LAUNCH_TIMEOUT = 300


# ------------------------------------------------------------------------------------------
# Helpers: a copy of the project, running the launcher in it, reading what it wrote.


def _copy_project(folder: Path) -> Path:
    """The example project's files in ``folder`` (nothing else: no runs, no logs)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        shutil.copy(EXAMPLE / name, folder / name)
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh copy of the example project."""
    return _copy_project(tmp_path / "shop")


def _launch(
    folder: Path, *args: str, config: str = "tune.yaml"
) -> subprocess.CompletedProcess[str]:
    """``python -m lightning_hpo.launch CONFIG --quiet ARGS`` in ``folder``, to its end (its DDP
    ranks too), in an environment without another DDP job's variables."""
    return run_job([sys.executable, "-m", "lightning_hpo.launch", config, "--quiet", *args],
                   cwd=folder, env=ddp_clean_env(), timeout=LAUNCH_TIMEOUT)


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-4000:]}"


def _study(folder: Path, name: str = STUDY) -> optuna.Study:
    """The study the launcher wrote in ``folder`` (the default storage ``runs/<study>.journal``)."""
    storage = open_storage(str(folder / "runs" / f"{name}.journal"), create=False)
    return optuna.load_study(study_name=name, storage=storage)


def _trial_dir(folder: Path, trial: FrozenTrial, name: str = STUDY) -> Path:
    path = folder / "runs" / name / f"trial_{trial.number:05d}"
    assert Path(trial.user_attrs[ATTR.LOG_DIR]).resolve() == path.resolve()
    return path


def _epochs(trial: FrozenTrial) -> int:
    """Epochs the trial trained: one reported value per epoch, 1..N."""
    steps = sorted(trial.intermediate_values)
    assert steps == list(range(1, len(steps) + 1)), (trial.number, steps)
    return len(steps)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def _epochs_logged(rows: list[dict[str, str]], column: str) -> list[int]:
    """The epoch of each row that logs ``column`` (Lightning's epochs count from 0)."""
    return [int(float(row["epoch"])) for row in rows if row.get(column)]


def _lr_by_epoch(rows: list[dict[str, str]]) -> dict[int, float]:
    """``lr-SGD`` by epoch: LearningRateMonitor logs it at each epoch's start, in a row without
    an epoch; it belongs to the epoch of the next row that has one."""
    out: dict[int, float] = {}
    pending: list[float] = []
    for row in rows:
        if row.get("lr-SGD"):
            pending.append(float(row["lr-SGD"]))
        elif row.get("epoch") and pending:
            epoch = int(float(row["epoch"]))
            assert len(pending) == 1 and epoch not in out, (epoch, pending, out)
            out[epoch] = pending.pop()
    assert not pending, f"lr-SGD logged for an epoch that logged nothing else: {pending}"
    return out


def _epochs_txt(trial_dir: Path) -> list[int]:
    """The lines the project's EpochLog callback appended in the trial's folder."""
    return [int(line) for line in (trial_dir / "epochs.txt").read_text().split()]


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _tune_variant(folder: Path, name: str, **fields: Any) -> str:
    """``folder/name``: the project's tune.yaml with ``fields`` replacing top-level entries
    (``space``: its keys added to the project's space, or replacing those of the same name)."""
    raw = yaml.safe_load((folder / "tune.yaml").read_text())
    raw["space"].update(fields.pop("space", {}))
    raw.update(fields)
    _write_yaml(folder / name, raw)
    return name


def _nothing_written(folder: Path) -> None:
    assert not (folder / "runs").exists(), sorted(p.name for p in folder.iterdir())
    assert not list(folder.rglob("*.journal*"))


# ------------------------------------------------------------------------------------------
# 1-2. ASHA (stop mode) on 2 slots, and retraining its best config with the project's fit.


@pytest.fixture(scope="module")
def asha(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """4 trials, rungs 1 and 3, 2 slots (the example's 2-core default)."""
    folder = _copy_project(tmp_path_factory.mktemp("asha") / "shop")
    result = _launch(folder, "--set", "stop.n_trials=4", "--set", "pruner.max_resource=3",
                     "--set", "devices.count=2", *TINY)
    return folder, result


@pytest.mark.slow
def test_asha_trials_run_the_projects_callback_and_logger_in_their_folders(
    asha: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, result = asha
    assert result.returncode == 0, _output(result)
    study = _study(folder)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 4
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}, \
        [(t.number, t.state.name, t.user_attrs.get(ATTR.FAIL_REASON)) for t in trials]
    assert {t.user_attrs[ATTR.SLOT] for t in trials} <= {0, 1}
    for trial in trials:
        where = _trial_dir(folder, trial)
        epochs = _epochs(trial)
        assert epochs == (3 if trial.state == TrialState.COMPLETE else 1), trial.number
        # The trial's fit config, with its values where the CLI keeps them.
        config = yaml.safe_load((where / "config.yaml").read_text())
        params = trial.params
        assert config["model"]["hidden_dim"] == params["model.hidden_dim"]
        assert config["model"]["dropout"] == pytest.approx(params["model.dropout"])
        assert config["optimizer"]["class_path"] == "torch.optim.SGD"
        assert config["optimizer"]["init_args"]["lr"] == pytest.approx(
            params["optimizer.init_args.lr"])
        assert config["optimizer"]["init_args"]["momentum"] == 0.9  # the project's, kept
        assert config["data"]["batch_size"] == params["data.batch_size"]
        assert config["lr_scheduler"]["init_args"] == {"step_size": 3, "gamma": 0.5,
                                                       "last_epoch": -1}
        assert config["trainer"]["max_epochs"] == 3  # the study's, not the project's 9
        assert config["trainer"]["limit_train_batches"] == 2
        # The project's callback ran once per epoch, in the trial's folder.
        assert _epochs_txt(where) == list(range(1, epochs + 1)), trial.number
        # The launcher's metrics.csv holds the project's LearningRateMonitor column.
        rows = _rows(where / "metrics.csv")
        assert {"lr-SGD", "val_loss"} <= set(rows[0]), list(rows[0])
        assert _epochs_logged(rows, "val_loss") == list(range(epochs))
        assert sorted(_lr_by_epoch(rows)) == list(range(epochs))
        # The project's own CSVLogger wrote one run, inside the trial's folder.
        runs = where / "lightning_logs"
        assert sorted(p.name for p in runs.iterdir()) == ["version_0"]
        theirs = _rows(runs / "version_0" / "metrics.csv")
        assert _epochs_logged(theirs, "val_loss") == list(range(epochs))
    assert not (folder / "logs").exists()  # the project's save_dir is not used by trials
    assert not (folder / "epochs.txt").exists()
    # The best COMPLETE trial's config, copied with a header line.
    best = study.best_trial
    assert best.state == TrialState.COMPLETE
    copied = (folder / "runs" / STUDY / "best_config.yaml").read_text()
    header, _, body = copied.partition("\n")
    assert header == f"# trial {best.number} of study '{STUDY}', the best COMPLETE trial"
    assert body == (_trial_dir(folder, best) / "config.yaml").read_text()
    assert "best_config.yaml" in result.stdout


@pytest.mark.slow
def test_the_best_config_retrains_with_the_projects_own_fit(
    asha: tuple[Path, subprocess.CompletedProcess[str]], project: Path,
) -> None:
    """``python main.py fit --config .../best_config.yaml``, in another copy of the project."""
    folder, result = asha
    assert result.returncode == 0, _output(result)
    path = folder / "runs" / STUDY / "best_config.yaml"
    best = yaml.safe_load(path.read_text())
    # The launcher's redirections are not in it: the project's own folders.
    assert best["trainer"]["default_root_dir"] is None
    assert best["trainer"]["logger"]["init_args"]["save_dir"] == "logs"
    fit = run_job([sys.executable, "main.py", "fit", "--config", str(path),
                   "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
                   "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false"],
                  cwd=project, env=ddp_clean_env(), timeout=LAUNCH_TIMEOUT)
    assert fit.returncode == 0, _output(fit)
    assert (project / "logs" / "lightning_logs" / "version_0" / "metrics.csv").is_file()


# ------------------------------------------------------------------------------------------
# 3. Promotion ASHA: paused trials resume the CLI-built optimizer and scheduler.


@pytest.fixture(scope="module")
def promotion(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, optuna.Study]:
    """4 trials, rungs 1, 3, 9 (min 1, max 9, reduction 3), paused at each rung."""
    folder = _copy_project(tmp_path_factory.mktemp("promotion") / "shop")
    result = _launch(folder, "--set", "stop.n_trials=4", "--set", "pruner.mode=promotion",
                     "--set", "pruner.min_resource=1", "--set", "pruner.max_resource=9",
                     "--set", "pruner.reduction_factor=3", "--set", "devices.count=2", *TINY)
    assert result.returncode == 0, _output(result)
    return folder, _study(folder)


def _resumed(trial: FrozenTrial) -> list[int]:
    """The epochs the trial's segments resumed from (a checkpoint holding that many)."""
    return [s["from_epoch"] for s in trial.user_attrs[ATTR.SEGMENTS] if s["from_epoch"] > 0]


@pytest.mark.slow
def test_promotion_resumes_the_cli_built_step_lr_exactly(
    promotion: tuple[Path, optuna.Study],
) -> None:
    folder, study = promotion
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 4
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}, \
        [(t.number, t.state.name, t.user_attrs.get(ATTR.FAIL_REASON)) for t in trials]
    crossed = []  # resumed trials that trained past StepLR's first step (epoch 3)
    for trial in trials:
        where = _trial_dir(folder, trial)
        epochs = _epochs(trial)
        lr0 = trial.params["optimizer.init_args.lr"]
        lrs = _lr_by_epoch(_rows(where / "metrics.csv"))
        assert sorted(lrs) == list(range(epochs)), (trial.number, lrs)
        expected = [lr0 * 0.5 ** (epoch // 3) for epoch in range(epochs)]
        assert [lrs[epoch] for epoch in range(epochs)] == pytest.approx(expected, rel=1e-9), \
            (trial.number, _resumed(trial))
        assert _epochs_txt(where) == list(range(1, epochs + 1)), (trial.number, _resumed(trial))
        if _resumed(trial) and epochs > 3:
            crossed.append(trial.number)
    assert crossed, [(t.number, _epochs(t), _resumed(t)) for t in trials]


@pytest.mark.slow
def test_a_resumed_trials_own_csv_logger_keeps_every_epoch(
    promotion: tuple[Path, optuna.Study],
) -> None:
    folder, study = promotion
    resumed = [t for t in study.get_trials(deepcopy=False) if _resumed(t)]
    assert resumed
    for trial in resumed:
        theirs = _rows(_trial_dir(folder, trial) / "lightning_logs" / "version_0" / "metrics.csv")
        assert _epochs_logged(theirs, "val_loss") == list(range(_epochs(trial))), trial.number


# ------------------------------------------------------------------------------------------
# 4. DDP: 2 processes per trial.


@pytest.mark.slow
def test_ddp_trials_of_a_cli_project_complete(project: Path) -> None:
    """The project as it is (its LearningRateMonitor, EpochLog and CSVLogger), 2 CPU
    processes per trial."""
    result = _launch(project, "--set", "devices.per_trial=2", "--set", "devices.count=2",
                     "--set", "stop.n_trials=2", "--set", "pruner.min_resource=1",
                     "--set", "pruner.max_resource=2", *TINY)
    assert result.returncode == 0, _output(result)
    trials = _study(project).get_trials(deepcopy=False)
    assert len(trials) == 2
    assert all(t.state != TrialState.FAIL for t in trials), \
        [t.user_attrs.get(ATTR.FAIL_REASON) for t in trials]
    assert {t.user_attrs[ATTR.DEVICE] for t in trials} == {"cpu:0,1"}
    for trial in trials:
        where = _trial_dir(project, trial)
        assert (where / "config.yaml").is_file()
        rows = _rows(where / "metrics.csv")
        assert _epochs_logged(rows, "val_loss") == list(range(_epochs(trial)))
        assert sorted(_lr_by_epoch(rows)) == list(range(_epochs(trial)))
        assert _epochs_txt(where) == list(range(1, _epochs(trial) + 1))  # the user's callback


def _import_example(folder: Path) -> Any:
    """The project's ``main.py`` as a module of another name (``main`` stays unimported)."""
    spec = importlib.util.spec_from_file_location("lightning_cli_example_main", folder / "main.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _CountingStrategy:
    def __init__(self) -> None:
        self.broadcasts = 0

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        self.broadcasts += 1
        return obj


class _RankTrainer:
    """What EpochLog reads of a Trainer on one DDP rank; ``log_dir`` is a broadcast, as in
    Lightning (its docstring: "You must call this on all processes")."""

    def __init__(self, rank: int, folder: Path) -> None:
        self.is_global_zero = rank == 0
        self.global_rank = rank
        self.current_epoch = 0
        self.default_root_dir = str(folder)
        self.strategy = _CountingStrategy()

    @property
    def log_dir(self) -> str:
        return self.strategy.broadcast(self.default_root_dir)


def test_the_example_callback_makes_the_same_collective_calls_on_every_rank(
    project: Path, tmp_path: Path,
) -> None:
    callback = _import_example(project).EpochLog()
    ranks = [_RankTrainer(rank, tmp_path) for rank in (0, 1)]
    for trainer in ranks:
        callback.on_train_epoch_end(trainer, None)
    rank0, rank1 = (trainer.strategy.broadcasts for trainer in ranks)
    assert rank0 == rank1, f"broadcasts: rank 0 {rank0}, rank 1 {rank1}"


# ------------------------------------------------------------------------------------------
# In this process: lightning_hpo.launch.run and the launcher's --check.


@pytest.fixture
def here(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Work in the project's folder in this process; afterwards the project's ``main`` module,
    ``sys.path``, the environment (Lightning's ``PL_GLOBAL_SEED``) and Optuna's verbosity are
    as they were."""
    monkeypatch.chdir(project)
    path, environ = list(sys.path), dict(os.environ)
    module = sys.modules.get("main")
    verbosity = optuna.logging.get_verbosity()
    try:
        yield project
    finally:
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)
        if module is None:
            sys.modules.pop("main", None)
        else:
            sys.modules["main"] = module
        optuna.logging.set_verbosity(verbosity)


@pytest.mark.slow
def test_run_tunes_a_subclass_mode_project_with_lightnings_own_cli(here: Path) -> None:
    """No ``cli:``: Lightning's LightningCLI, the classes by class_path, through
    lightning_hpo.launch.run with a dict."""
    import lightning_hpo.launch

    study = lightning_hpo.launch.run({
        "study": "sub",
        "model": {"class_path": "main.Classifier",
                  "init_args": {"in_features": 64, "num_classes": 10}},
        "data": {"class_path": "main.DigitsData"},
        "optimizer": {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.1}},
        "trainer": {"limit_train_batches": 2, "limit_val_batches": 1},
        "metric": "val_loss",
        "space": {"model.init_args.hidden_dim": {"randint": [16, 64]},
                  "optimizer.init_args.lr": {"loguniform": [0.01, 0.3]}},
        "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "asha", "min_resource": 1, "max_resource": 2,
                   "reduction_factor": 2},
        "devices": {"accelerator": "cpu", "count": 2},
        "stop": {"n_trials": 3},
    })
    assert isinstance(study, optuna.Study) and study.study_name == "sub"
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 3
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}, \
        [(t.number, t.state.name, t.user_attrs.get(ATTR.FAIL_REASON)) for t in trials]
    assert _study(here, "sub").best_trial.number == study.best_trial.number
    for trial in trials:
        where = _trial_dir(here, trial, "sub")
        hidden, lr = (trial.params[key] for key in ("model.init_args.hidden_dim",
                                                    "optimizer.init_args.lr"))
        config = yaml.safe_load((where / "config.yaml").read_text())
        assert config["model"]["class_path"] == "main.Classifier"
        assert config["model"]["init_args"]["hidden_dim"] == hidden
        assert config["optimizer"]["init_args"]["lr"] == pytest.approx(lr)
        hparams = yaml.safe_load((where / "hparams.yaml").read_text())  # the model's own
        assert (hparams["hidden_dim"], hparams["in_features"]) == (hidden, 64)
    best = (here / "runs" / "sub" / "best_config.yaml").read_text()
    assert best.startswith(f"# trial {study.best_trial.number} of study 'sub'")


def _check(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = launcher_main([*argv, "--check"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_passes_the_example_and_writes_nothing(
    here: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _check("tune.yaml", capsys=capsys)
    assert code == 0, out + err
    assert "config OK: study 'shop'" in out, out
    _nothing_written(here)


def test_a_project_that_never_validates_is_refused_by_check(
    here: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """``limit_val_batches: 0`` in the project's own config: Lightning's fit takes it, and every
    trial failed once it had trained ("never logged")."""
    raw = yaml.safe_load((here / "config.yaml").read_text())
    raw["trainer"]["limit_val_batches"] = 0
    _write_yaml(here / "config_noval.yaml", raw)
    code, out, err = _check(_tune_variant(here, "tune_noval.yaml", config=["config_noval.yaml"]),
                            capsys=capsys)
    assert code == 2, out + err
    assert err.strip() == ("error: config: trainer.limit_val_batches is 0 in the project's "
                           "config, but the launcher reads the metric from each epoch's "
                           "validation: leave it out or give at least 1 batch")
    _nothing_written(here)


PROMOTION = {"name": "asha", "mode": "promotion", "min_resource": 1, "max_resource": 9,
             "reduction_factor": 3}


@pytest.mark.parametrize(
    ("where", "field"),
    [("project", "config: trainer.check_val_every_n_epoch in the project's config validates "),
     ("inline", "trainer.check_val_every_n_epoch: validates "),
     ("searched", "space.trainer.check_val_every_n_epoch: cannot be searched: ")],
)
def test_a_pausing_schedule_needs_every_rung_validated_wherever_it_is_set(
    here: Path, capsys: pytest.CaptureFixture[str], where: str, field: str,
) -> None:
    """Trials pause at rungs 1, 3, 9 and are ranked by the value of that epoch: validating every
    2 epochs, in the project's files, the tune config's trainer or a searched range, is refused
    by --check (every trial's first segment failed, having trained)."""
    fields: dict[str, Any] = {"pruner": PROMOTION}
    if where == "project":
        raw = yaml.safe_load((here / "config.yaml").read_text())
        raw["trainer"]["check_val_every_n_epoch"] = 2
        _write_yaml(here / "config_every2.yaml", raw)
        fields["config"] = ["config_every2.yaml"]
    elif where == "inline":
        fields["trainer"] = {"check_val_every_n_epoch": 2}
    else:
        fields["space"] = {"trainer.check_val_every_n_epoch": {"randint": [1, 3]}}
    code, out, err = _check(_tune_variant(here, "tune_every2.yaml", **fields), capsys=capsys)
    assert code == 2, out + err
    assert err.startswith(f"error: {field}"), err
    assert "pause at epochs 1, 3, 9" in err and len(err.strip().splitlines()) == 1
    _nothing_written(here)


def test_check_says_once_that_the_projects_trainer_devices_is_replaced(
    here: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    raw = yaml.safe_load((here / "config.yaml").read_text())
    raw["trainer"]["devices"] = 3
    _write_yaml(here / "config_devices.yaml", raw)
    tune = _tune_variant(here, "tune_devices.yaml", config=["config_devices.yaml"])
    code, out, err = _check(tune, capsys=capsys)
    assert code == 0, out + err
    said = [line for line in out.splitlines() if "trainer.devices=3" in line]
    assert len(said) == 1 and "replaced" in said[0], out
    assert "config OK" in out
    _nothing_written(here)


@pytest.mark.parametrize(
    ("trainer", "said"),
    [
        ({"enable_progress_bar": False}, []),  # what the launcher sets it to: nothing replaced
        ({"enable_progress_bar": True}, ["enable_progress_bar=true"]),
        ({"enable_checkpointing": True, "max_steps": -1, "fast_dev_run": False}, []),
        ({"enable_checkpointing": False}, ["enable_checkpointing=false"]),
        ({"max_steps": 100, "min_epochs": 2}, ["max_steps=100", "min_epochs=2"]),
        ({"devices": 1, "accelerator": "auto"}, ["devices=1"]),  # the slot's, not fixed
    ],
    ids=["bar-off", "bar-on", "fixed-as-ours", "checkpointing-off", "steps", "devices"],
)
def test_a_trainer_argument_is_said_replaced_only_when_its_value_changes(
    trainer: dict[str, Any], said: list[str]
) -> None:
    lines = owned_lines(trainer)
    assert [line.split(" ")[0].removeprefix("trainer.") for line in lines] == said, lines
    assert all("in the project's config is replaced: " in line for line in lines)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        pytest.param({"space": {"model.nope": {"randint": [1, 4]}}}, "space.model.nope",
                     "is not a key of the CLI; its model keys: model.hidden_dim, model.dropout",
                     id="unknown-key"),
        pytest.param({"space": {"nothing.x": {"randint": [1, 4]}}}, "space.nothing.x",
                     "is not a key of the CLI; it has no nothing section", id="unknown-section"),
        pytest.param({"space": {"model.hidden_dim": {"randint": [16, 64]},
                                "optimizer.init_args.nope": {"uniform": [0.1, 0.2]}}},
                     "space.optimizer.init_args.nope", "Option 'nope' is not accepted",
                     id="unknown-optimizer-argument"),
        pytest.param({"space": {"model.hidden_dim": {"uniform": [16, 64]}}},
                     "space.model.hidden_dim", "Expected a <class 'int'>",
                     id="float-range-for-int"),
        pytest.param({"space": {"model.dropout": {"uniform": [0.0, 1.5]}}},
                     "space.model.dropout", "high end", id="refused-high-end"),
        pytest.param({"config": ["missing.yaml"]}, "config", "missing.yaml", id="missing-config"),
        pytest.param({"config": ["."]}, "config", "a folder, not a file", id="folder-as-config"),
        pytest.param({"cli": "main:nope"}, "cli", "nope", id="bad-cli"),
        pytest.param({"space": {"model.in_features": {"randint": [8, 64]}}},
                     "space.model.in_features", "cannot be searched: the project's CLI sets it "
                     "from data.num_features (link_arguments); leave it out of space",
                     id="linked-key"),
        pytest.param({"trainer": {"devices": 2}}, "trainer.devices", "", id="owned-trainer"),
        # Values the CLI and Trainer(...) take and only fit refuses (or misreads).
        pytest.param({"trainer": {"accumulate_grad_batches": 0}},
                     "trainer.accumulate_grad_batches", "is 0, but must be an integer >= 1",
                     id="inline-fit-value"),
        pytest.param({"space": {"model.hidden_dim": {"randint": [16, 64]},
                                "trainer.accumulate_grad_batches": {"randint": [0, 4]}}},
                     "space.trainer.accumulate_grad_batches",
                     "the low end 0 is refused: Lightning's fit takes an integer >= 1",
                     id="searched-fit-value"),
        # Values fit takes and the launcher cannot run (no batch to train or validate).
        pytest.param({"trainer": {"limit_train_batches": 0}}, "trainer.limit_train_batches",
                     "is 0, but a trial must train", id="inline-launcher-value"),
        pytest.param({"space": {"model.hidden_dim": {"randint": [16, 64]},
                                "trainer.limit_val_batches": {"uniform": [0.0, 1.0]}}},
                     "space.trainer.limit_val_batches", "the low end 0.0 is refused: the launcher "
                     "reads the metric", id="searched-launcher-value"),
        # A batch size the project's data module takes and its DataLoader refuses.
        pytest.param({"space": {"data.batch_size": {"choice": [0, 64]}}},
                     "space.data.batch_size", "the middle 0 of its range is refused by torch's "
                     "DataLoader: batch_size should be a positive integer value",
                     id="searched-batch-size"),
    ],
)
def test_check_refuses_bad_input_naming_the_field_and_writes_nothing(
    here: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], field: str,
    words: str,
) -> None:
    tune = _tune_variant(here, "tune_bad.yaml", **fields)
    code, out, err = _check(tune, capsys=capsys)
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), lines
    assert words in lines[0], lines[0]
    assert "config OK" not in out
    _nothing_written(here)


@pytest.mark.parametrize(("where", "error"), [
    ("tune", "error: data.batch_size: is 0, which torch's DataLoader refuses: batch_size should "
     "be a positive integer value, but got batch_size=0"),
    ("project", "error: config: the project refuses its own config (config_zero.yaml) as fit "
     "builds it, before any searched value: ValueError: data.batch_size is 0, which torch's "
     "DataLoader refuses: batch_size should be a positive integer value, but got batch_size=0"),
])
def test_check_refuses_a_fixed_batch_size_the_dataloader_refuses(
    here: Path, capsys: pytest.CaptureFixture[str], where: str, error: str,
) -> None:
    """The project's DigitsData takes ``batch_size: 0``: --check passed, and every trial failed
    when fit asked for its DataLoader."""
    raw = yaml.safe_load((here / "tune.yaml").read_text())
    raw["space"] = {"model.hidden_dim": raw["space"]["model.hidden_dim"]}  # fewer builds
    raw["initial"] = [{"model.hidden_dim": 64}]
    if where == "tune":
        raw["data"] = {"batch_size": 0}
    else:
        project = yaml.safe_load((here / "config.yaml").read_text())
        project["data"]["batch_size"] = 0
        _write_yaml(here / "config_zero.yaml", project)
        raw["config"] = ["config_zero.yaml"]
    _write_yaml(here / "tune_zero.yaml", raw)
    code, out, err = _check("tune_zero.yaml", capsys=capsys)
    assert (code, err.strip()) == (2, error), out + err
    _nothing_written(here)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("trainer:\n  nope: 3\n", "does not accept option 'trainer.nope'",
                     id="unknown-key"),
        pytest.param("trainer:\n  max_epochs: [\n", "Problems parsing config", id="not-yaml"),
    ],
)
def test_check_names_the_project_file_its_parser_refuses(
    here: Path, capsys: pytest.CaptureFixture[str], text: str, words: str,
) -> None:
    (here / "extra.yaml").write_text(text, encoding="utf-8")
    tune = _tune_variant(here, "tune_extra.yaml", config=["config.yaml", "extra.yaml"])
    code, out, err = _check(tune, capsys=capsys)
    assert code == 2, out + err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: config: the CLI's parser refused config.yaml + extra.yaml: ")
    assert words in line, line
    _nothing_written(here)


def test_check_names_the_project_config_that_fit_would_refuse(
    here: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A gradient clip the Trainer takes and that flips every gradient (clip_grad_norm_ to a
    negative norm), in the project's own file: ``config`` is named, with what is allowed."""
    (here / "extra.yaml").write_text("trainer:\n  gradient_clip_val: -1.0\n", encoding="utf-8")
    tune = _tune_variant(here, "tune_extra.yaml", config=["config.yaml", "extra.yaml"])
    code, out, err = _check(tune, capsys=capsys)
    assert code == 2, out + err
    (line,) = err.strip().splitlines()
    assert line == ("error: config: trainer.gradient_clip_val is -1.0 in the project's config, "
                    "but Lightning's fit takes a number >= 0, or null (no clipping)"), line
    _nothing_written(here)


_NO_OPTIMIZER_PROJECT = """
from torch import nn
import lightning.pytorch as L
from lightning.pytorch.cli import LightningCLI
from lightning_hpo.builtin.data import DigitsDataModule


class Net(L.LightningModule):
    def __init__(self, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.Linear(hidden, 10))

    def training_step(self, batch, index):
        return nn.functional.cross_entropy(self.net(batch[0]), batch[1])

    def validation_step(self, batch, index):
        self.log("val_loss", nn.functional.cross_entropy(self.net(batch[0]), batch[1]))


def cli_main(args=None):
    return LightningCLI(Net, DigitsDataModule, args=args)
"""


@pytest.mark.parametrize("optimizer", [None, "torch.optim.Adam"])
def test_check_refuses_a_model_without_optimizers_unless_the_config_gives_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    optimizer: str | None,
) -> None:
    """Lightning's fit refuses a model without ``configure_optimizers`` (every trial failed);
    the CLI's ``optimizer:`` gives it one. ``--check`` used to say OK either way."""
    (tmp_path / "noopt_main.py").write_text(_NO_OPTIMIZER_PROJECT, encoding="utf-8")
    tune = {"study": "noopt", "cli": "noopt_main:cli_main", "metric": "val_loss",
            "space": {"model.hidden": {"randint": [8, 64]}},
            "pruner": {"name": "asha", "max_resource": 2}, "stop": {"n_trials": 2}}
    if optimizer is not None:
        tune["optimizer"] = optimizer
    _write_yaml(tmp_path / "tune.yaml", tune)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        code, out, err = _check("tune.yaml", capsys=capsys)
    finally:
        sys.modules.pop("noopt_main", None)
    if optimizer is None:
        assert code == 2, out + err
        assert err.strip() == (
            "error: config: the model Net has no configure_optimizers() and the config gives "
            "no optimizer: (e.g. optimizer: torch.optim.Adam); Lightning's fit needs one")
    else:
        assert code == 0 and "config OK" in out, out + err
    _nothing_written(tmp_path)


def test_check_names_the_project_config_its_classes_refuse(
    here: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A value the parser takes and the class refuses, in the project's own file and outside
    the space (SGD's momentum -1): the config, not the space, is named."""
    (here / "extra.yaml").write_text("optimizer:\n  init_args: {momentum: -1.0}\n",
                                     encoding="utf-8")
    tune = _tune_variant(here, "tune_extra.yaml", config=["config.yaml", "extra.yaml"])
    code, out, err = _check(tune, capsys=capsys)
    assert code == 2, out + err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: config: the project refuses its own config (config.yaml + "
                           "extra.yaml) as fit builds it, before any searched value: "), line
    assert "momentum" in line, line
    _nothing_written(here)


_ENTRY_MODULES = {
    # the project's CLI class named as the entry, which makes it without its model and data
    # classes: the parser's setup refuses the project's link_arguments
    "cli-class-without-its-classes": ("from main import ShopCLI\n",
                                      "error: cli: 'proj_entry:ShopCLI' failed setting up its "
                                      "LightningCLI's parser (add_arguments_to_parser, "
                                      "link_arguments), before reading any config: ValueError: "
                                      'Target key expected to start with "model.init_args.", '
                                      'got "model.in_features"; a LightningCLI subclass as cli: '
                                      "is made with no arguments: name the function that makes "
                                      "it with its model and data (def cli_main(args=None): "
                                      "ShopCLI(Model, Data, args=args))"),
    "raises-at-import": ("raise RuntimeError('no GPU here')\n",
                         "error: cli: importing module 'proj_entry' failed: RuntimeError: no "
                         "GPU here"),
    "missing-dependency": ("import proj_not_installed_xyz\n",
                           "error: cli: importing module 'proj_entry' failed: No module named "
                           "'proj_not_installed_xyz' (a module it imports: install it, or put "
                           "the folder that holds it on PYTHONPATH)"),
    "raises-before-its-cli": ("def cli_main(args=None):\n"
                              "    raise RuntimeError('set DATA_DIR first')\n",
                              "error: cli: 'proj_entry:cli_main' raised before building its "
                              "LightningCLI: RuntimeError: set DATA_DIR first"),
    # argparse at import, as scripts do for flags of their own: the launcher's arguments are
    # not the project's (the project's own fit gives it `fit --config ...`, which it ignores)
    "parses-argv-at-import": ("import argparse\n"
                              "parser = argparse.ArgumentParser()\n"
                              "parser.add_argument('--verbose', action='store_true')\n"
                              "ARGS = parser.parse_args()\n"
                              "from main import cli_main\n", ""),
}


@pytest.mark.parametrize("case", list(_ENTRY_MODULES))
def test_check_names_the_entry_point_for_what_its_module_or_function_raises(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str,
) -> None:
    """What the project's module or entry function raises before its LightningCLI is built, or
    its CLI while setting up its parser, is the ``cli`` entry's: it was reported as the
    project's config refusing itself (``config: the project refuses its own config
    (config.yaml) ...``), a missing dependency as a module
    not found in the folder ("run the launcher in the project's folder"), and a module that
    parses ``sys.argv`` at import exited with its own usage line about the launcher's
    arguments."""
    text, error = _ENTRY_MODULES[case]
    (here / "proj_entry.py").write_text(text, encoding="utf-8")
    raw = yaml.safe_load((here / "tune.yaml").read_text())
    raw["space"] = {"model.hidden_dim": raw["space"]["model.hidden_dim"]}  # fewer builds
    raw["initial"] = [{"model.hidden_dim": 64}]
    raw["cli"] = "proj_entry:" + ("ShopCLI" if "ShopCLI" in text else "cli_main")
    _write_yaml(here / "tune_entry.yaml", raw)
    monkeypatch.setattr(sys, "argv", ["pytest", "tests/integration/test_lightning_cli.py", "-q"])
    try:
        code, out, err = _check("tune_entry.yaml", capsys=capsys)
    finally:
        sys.modules.pop("proj_entry", None)
    if error:
        assert (code, err.strip()) == (2, error), out + err
    else:
        assert code == 0 and "config OK" in out, out + err
    _nothing_written(here)


# ------------------------------------------------------------------------------------------
# 8. A metric the model never logs.


@pytest.mark.slow
def test_a_metric_never_logged_fails_the_trial_naming_what_was_logged(project: Path) -> None:
    """At its first epoch that validated: the launcher reads the metric at every such epoch
    (a plain PruningCallback skips it there and fails the fit at its end)."""
    result = _launch(project, "--set", "metric=val_nope", "--set", "stop.n_trials=1",
                     "--set", "devices.count=1", "--set", "pruner.max_resource=3", *TINY)
    assert result.returncode == 1, _output(result)  # every trial of the run failed
    (trial,) = _study(project).get_trials(deepcopy=False)
    assert trial.state == TrialState.FAIL
    reason = trial.user_attrs[ATTR.FAIL_REASON]
    assert reason.startswith("ConfigError: metric: 'val_nope' is not logged by the "
                             "LightningModule (by epoch 1); logged metrics: "), reason
    assert "val_loss" in reason and "val_acc" in reason, reason
    assert len(trial.user_attrs.get(ATTR.EPOCH_END_TIMES, [])) <= 1  # not 3 epochs
    assert result.stderr.strip() == (
        f"error: every trial of this run failed (1 of 1); the first, trial 0: {reason}")
    assert not (project / "runs" / STUDY / "best_config.yaml").exists()  # nothing COMPLETE


# ------------------------------------------------------------------------------------------
# In this process: one trial built through Lightning's own CLI
# (lightning_hpo.launch.checks.project).


@pytest.mark.parametrize(("cores", "asked", "expected"),
                         [(2, 4, 1), (1, 3, 1), (4, 2, 2), (1, 0, 0), (3, 1, 1)])
def test_a_cli_data_modules_loader_workers_stay_within_the_slots_cores(
    tmp_path: Path, cores: int, asked: int, expected: int,
) -> None:
    """At most the slot's cores but one, and at least one where the project asks for loader
    processes: a project's DataLoader with ``persistent_workers=True`` (or a
    ``prefetch_factor``) refuses ``num_workers=0``, and every trial of a 1-core slot failed
    with torch's ``ValueError: persistent_workers option needs num_workers > 0``."""
    from lightning_hpo.launch.checks.project import build_trial
    from lightning_hpo.launch.config.cli_spec import CliSpec

    spec = CliSpec(sections={
        "model": {"class_path": "lightning_hpo.builtin.models.LeNet"},
        "data": {"class_path": "lightning_hpo.builtin.data.DigitsDataModule",
                 "init_args": {"num_workers": asked}},
    })
    built = build_trial(spec, {"model.init_args.lr": 0.1}, trainer_args={
        "accelerator": "cpu", "devices": 1, "max_epochs": 1, "default_root_dir": str(tmp_path)},
        callbacks=[], loggers=[], trial_dir=tmp_path, seed=3, max_epochs=9, cores=cores)
    assert built.datamodule.num_workers == expected
    written = yaml.safe_load(built.config_text)
    assert written["data"]["init_args"]["num_workers"] == asked  # the project's value
    assert written["model"]["init_args"]["lr"] == 0.1
    assert written["trainer"]["max_epochs"] == 9 and written["seed_everything"] == 3
    assert built.seed == 3 and built.trainer.max_epochs == 1


def test_building_and_checking_a_trial_calls_no_deprecated_jsonargparse_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our calls into the CLI's parser use no API that jsonargparse 5 removes (``skip_none``,
    ``add_instantiator`` ...): a JsonargparseDeprecationWarning pointing into lightning_hpo
    fails the test. Lightning's own LightningCLI still calls some (its ``add_instantiator``,
    ``instantiate_classes``, ``skip_none``); those point into Lightning and are let through."""
    from jsonargparse._deprecated import JsonargparseDeprecationWarning
    from optuna.distributions import FloatDistribution

    from lightning_hpo.launch.checks.cli_checks import check_cli
    from lightning_hpo.launch.checks.project import build_trial
    from lightning_hpo.launch.config.cli_spec import CliSpec

    # jsonargparse shows each deprecation once per process: every time here
    monkeypatch.setenv("JSONARGPARSE_DEPRECATION_WARNINGS", "all")
    package = Path(build_trial.__code__.co_filename).resolve().parents[2]
    spec = CliSpec(sections={
        "model": {"class_path": "lightning_hpo.builtin.models.LeNet"},
        "data": {"class_path": "lightning_hpo.builtin.data.DigitsDataModule"},
        "trainer": {"limit_train_batches": 2, "limit_val_batches": 1}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JsonargparseDeprecationWarning)
        built = build_trial(spec, {"model.init_args.lr": 0.1}, trainer_args={
            "accelerator": "cpu", "devices": 1, "max_epochs": 1,
            "default_root_dir": str(tmp_path)},
            callbacks=[], loggers=[], trial_dir=tmp_path, seed=3, max_epochs=2)
        check_cli(spec, {"model.init_args.lr": FloatDistribution(0.01, 0.1, log=True)},
                  tmp_path / "scratch", max_epochs=2)
    ours = [f"{Path(w.filename).name}:{w.lineno}: {' '.join(str(w.message).split())}"
            for w in caught if issubclass(w.category, JsonargparseDeprecationWarning)
            and Path(w.filename).resolve().is_relative_to(package)]
    assert not ours, ours
    # the written config keeps its null values (skip_unset=False, as skip_none=False did)
    written = yaml.safe_load(built.config_text)
    assert "ckpt_path" in written and written["ckpt_path"] is None


_RUN_FALSE_PROJECT = """
import lightning.pytorch as L
from lightning.pytorch.cli import LightningCLI


def main(args=None):
    cli = LightningCLI(args=args, run=False, save_config_callback=None)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli
"""


@pytest.mark.parametrize("run", [True, False])
def test_a_run_false_clis_config_retrains_without_a_subcommand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: bool,
) -> None:
    """A project that makes its CLI with ``run=False`` and calls ``fit`` itself retrains with
    ``python main.py --config ...``: its parser takes no ``ckpt_path`` or ``weights_only``
    (``fit``'s own arguments), which the trial's config.yaml held, and no ``fit``."""
    from lightning_hpo.launch.checks.project import build_trial
    from lightning_hpo.launch.config.cli_spec import CliSpec

    fit_line = "    cli.trainer.fit(cli.model, datamodule=cli.datamodule)\n"
    text = (_RUN_FALSE_PROJECT if not run else
            _RUN_FALSE_PROJECT.replace("run=False", "run=True").replace(fit_line, ""))
    (tmp_path / "rf_main.py").write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = CliSpec(entry="rf_main:main", sections={
        "model": {"class_path": "lightning_hpo.builtin.models.LeNet"},
        "data": {"class_path": "lightning_hpo.builtin.data.DigitsDataModule"},
        "trainer": {"limit_train_batches": 2, "limit_val_batches": 1,
                    "enable_progress_bar": False, "logger": False}})
    try:
        built = build_trial(spec, {"model.init_args.lr": 0.1}, trainer_args={
            "accelerator": "cpu", "devices": 1, "max_epochs": 1,
            "default_root_dir": str(tmp_path)},
            callbacks=[], loggers=[], trial_dir=tmp_path, seed=3, max_epochs=1)
        written = yaml.safe_load(built.config_text)
        assert built.subcommand == ("fit" if run else "")
        assert ("ckpt_path" in written) is run and ("weights_only" in written) is run
        assert written["model"]["init_args"]["lr"] == 0.1  # the model's section is kept
        if not run:  # the project's own parser takes the file, and fit runs (here)
            monkeypatch.chdir(tmp_path)
            config = tmp_path / "config.yaml"
            config.write_text(built.config_text, encoding="utf-8")
            import rf_main

            cli = rf_main.main(["--config", str(config)])
            assert cli.trainer.current_epoch == 1 and cli.model.hparams.lr == 0.1
    finally:
        sys.modules.pop("rf_main", None)


_BAR_PROJECT = """
from lightning.pytorch.callbacks import LearningRateMonitor, RichProgressBar, TQDMProgressBar
from lightning.pytorch.cli import LightningCLI


class BarCLI(LightningCLI):
    def add_arguments_to_parser(self, parser):
        parser.add_lightning_class_args(RichProgressBar, "bar")


def defaults_main(args=None):
    LightningCLI(args=args, trainer_defaults={
        "callbacks": [TQDMProgressBar(refresh_rate=5), LearningRateMonitor()]})


def class_args_main(args=None):
    BarCLI(args=args)


def config_main(args=None):
    LightningCLI(args=args)
"""


@pytest.mark.parametrize("entry", ["defaults_main", "class_args_main", "config_main"])
def test_a_progress_bar_from_trainer_defaults_or_class_args_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str,
) -> None:
    """A progress bar the project's CLI adds itself (``trainer_defaults={"callbacks": [...]}``,
    ``parser.add_lightning_class_args(RichProgressBar, ...)``) failed every trial, and the
    check: "MisconfigurationException: Trainer was configured with `enable_progress_bar=False`
    but found `TQDMProgressBar` in callbacks list"; only one in ``trainer.callbacks`` (here
    beside them, with a callback of its own) was left out. The project's other callbacks
    stay."""
    from lightning.pytorch.callbacks import ProgressBar

    from lightning_hpo.launch.checks.project import build_trial
    from lightning_hpo.launch.config.cli_spec import CliSpec

    (tmp_path / "bar_main.py").write_text(_BAR_PROJECT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = CliSpec(entry=f"bar_main:{entry}", sections={
        "model": {"class_path": "lightning_hpo.builtin.models.LeNet"},
        "data": {"class_path": "lightning_hpo.builtin.data.DigitsDataModule"},
        "trainer": {"callbacks": [
            {"class_path": "lightning.pytorch.callbacks.TQDMProgressBar"},
            {"class_path": "lightning.pytorch.callbacks.LearningRateMonitor"}]}})
    try:
        built = build_trial(spec, {"model.init_args.lr": 0.1}, trainer_args={
            "accelerator": "cpu", "devices": 1, "max_epochs": 1,
            "default_root_dir": str(tmp_path)},
            callbacks=[], loggers=[], trial_dir=tmp_path, seed=3, max_epochs=1)
    finally:
        sys.modules.pop("bar_main", None)
    names = [type(callback).__name__ for callback in built.trainer.callbacks]
    assert not any(isinstance(c, ProgressBar) for c in built.trainer.callbacks), names
    assert names.count("LearningRateMonitor") == (2 if entry == "defaults_main" else 1), names


@pytest.mark.slow
def test_a_projects_own_checkpoint_on_the_metric_progress_bar_and_written_out_seed(
    project: Path,
) -> None:
    """What ``python main.py fit --print_config`` and common projects hold: a
    ``ModelCheckpoint`` on the tuned metric (the launcher's best checkpoint watches it too),
    a ``TQDMProgressBar`` (the launcher's Trainer has none) and ``seed_everything: true``
    written out (Lightning's default: each trial gets its own seed, not Lightning's 0)."""
    config = yaml.safe_load((project / "config.yaml").read_text())
    config["seed_everything"] = True
    config["trainer"]["callbacks"] += [
        {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
         "init_args": {"monitor": "val_loss", "mode": "min"}},
        {"class_path": "lightning.pytorch.callbacks.TQDMProgressBar",
         "init_args": {"refresh_rate": 10}},
    ]
    _write_yaml(project / "config.yaml", config)
    result = _launch(project, "--set", "stop.n_trials=2", "--set", "devices.count=1",
                     "--set", "pruner.max_resource=3", *TINY)
    assert result.returncode == 0, _output(result)
    trials = _study(project).get_trials(deepcopy=False)
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials), (
        [t.user_attrs.get(ATTR.FAIL_REASON) for t in trials])
    assert [t.user_attrs[ATTR.SEED] for t in trials] == [0, 1]
    for trial in trials:
        written = yaml.safe_load((_trial_dir(project, trial) / "config.yaml").read_text())
        assert written["seed_everything"] == trial.user_attrs[ATTR.SEED]
        assert (_trial_dir(project, trial) / "best.ckpt").is_file()


@pytest.mark.slow
def test_the_projects_early_stopping_at_a_rung_ends_the_trial_there(project: Path) -> None:
    """The project's EarlyStopping stops every trial after epoch 2 (``patience: 0`` and a
    ``min_delta`` no epoch beats), which is also a rung of promotion ASHA (1, 2, 4). Straight
    through, ``python main.py fit`` stops there; paused there instead, a promoted trial went on
    to train epoch 3, and its best_config.yaml no longer retrained it."""
    config = yaml.safe_load((project / "config.yaml").read_text())
    config["trainer"]["callbacks"].append(
        {"class_path": "lightning.pytorch.callbacks.EarlyStopping",
         "init_args": {"monitor": "val_loss", "patience": 0, "min_delta": 1.0e9}})
    _write_yaml(project / "config.yaml", config)
    result = _launch(project, "--set", "stop.n_trials=4", "--set", "devices.count=1",
                     "--set", "pruner={name: asha, mode: promotion, min_resource: 1, "
                     "max_resource: 4, reduction_factor: 2}", *TINY)
    assert result.returncode == 0, _output(result)
    trials = _study(project).get_trials(deepcopy=False)
    assert max(max(t.intermediate_values) for t in trials) == 2, [
        (t.number, t.state.name, sorted(t.intermediate_values)) for t in trials]
    for trial in trials:
        if max(trial.intermediate_values) == 2:
            assert trial.state == TrialState.COMPLETE, trial


def test_a_ckpt_path_in_the_projects_config_is_said_replaced_and_keeps_the_trials_values(
    here: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """``ckpt_path: old.ckpt`` in the project's config: Lightning's CLI replaced the trial's
    model values with the hyperparameters saved in that checkpoint (a trial searching
    ``model.hidden_dim`` 20 trained 200, the study recording 20), the trial's ``config.yaml``
    named the checkpoint, which the launcher's fit never resumed from, and nothing said so."""
    import torch

    from lightning_hpo.launch.checks.cli_checks import _on_cpu
    from lightning_hpo.launch.config.cli_spec import CliSpec

    torch.save({"hyper_parameters": {"hidden_dim": 200}}, here / "old.ckpt")
    (here / "extra.yaml").write_text("ckpt_path: old.ckpt\n", encoding="utf-8")
    built = _on_cpu(CliSpec("main:cli_main", ("config.yaml", "extra.yaml")),
                    {"model.hidden_dim": 20}, here / "scratch")
    assert built.model.hparams.hidden_dim == 20
    written = yaml.safe_load(built.config_text)
    assert written["model"]["hidden_dim"] == 20 and written["ckpt_path"] is None
    shutil.rmtree(here / "scratch", ignore_errors=True)
    tune = _tune_variant(here, "tune_extra.yaml", config=["config.yaml", "extra.yaml"])
    code, out, err = _check(tune, capsys=capsys)
    assert code == 0, out + err
    assert ("ckpt_path=old.ckpt in the project's config is replaced: each trial trains from "
            "its start (it resumes from its own checkpoint only)") in out.splitlines(), out
    _nothing_written(here)


def test_check_names_the_choice_a_searched_argument_does_not_fit(
    here: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A space choosing between two model classes and searching an argument only the first
    takes: the check said "space.model.init_args.width: is refused by the CLI's parser: ..."
    at its middle, which the range's middle is not to blame for; it names the choice too."""
    _write_yaml(here / "tune_choice.yaml", {
        "study": "choice",
        "model": {"class_path": "lightning_hpo.builtin.models.LeNet"},
        "data": {"class_path": "lightning_hpo.builtin.data.DigitsDataModule"},
        "metric": "validation_loss",
        "space": {"model.class_path": {"choice": ["lightning_hpo.builtin.models.LeNet",
                                                   "lightning_hpo.builtin.models.DropoutMLP"]},
                  "model.init_args.width": {"uniform": [0.5, 1.0]}},
        "pruner": {"name": "asha", "max_resource": 3}, "stop": {"n_trials": 4},
    })
    code, out, err = _check("tune_choice.yaml", capsys=capsys)
    assert code == 2, out + err
    (line,) = err.strip().splitlines()
    assert line.startswith(
        "error: space.model.init_args.width: with space.model.class_path at its high end "
        "lightning_hpo.builtin.models.DropoutMLP, it is refused by the CLI's parser: "), line
    assert "'width'" in line, line
    _nothing_written(here)
