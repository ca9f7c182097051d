"""The best trial's ``config.yaml`` (lightning_hpo.report.best_config) and the report CLI's
``--best-config PATH``: the best COMPLETE trial's file, copied whole with a header line, or one
``best-config`` error (no COMPLETE trial, no file, a destination that cannot be written).

The studies are made by hand in a journal file or SQLite: each trial's ``log_dir`` attribute
names a folder that holds (or lacks) the ``config.yaml`` a LightningCLI trial writes.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from lightning_hpo.errors import ConfigError
from lightning_hpo.report import load, write_best_config
from lightning_hpo.report.__main__ import main
from lightning_hpo.report.best_config import CONFIG_NAME, best_config_source
from lightning_hpo.schema import ATTR
from lightning_hpo.storage import open_storage

T0 = 1_700_000_000.0
#: (state, final value) of each trial; the values' order decides the best in each direction.
TRIALS = (
    (TrialState.COMPLETE, 0.30),
    (TrialState.PRUNED, None),  # reported 0.01 once: never the best (not COMPLETE)
    (TrialState.COMPLETE, 0.10),  # the best when minimizing
    (TrialState.FAIL, None),
    (TrialState.COMPLETE, 0.90),  # the best when maximizing
    (TrialState.COMPLETE, 0.50),
)
BEST = {"minimize": 2, "maximize": 4}


def _fit_config(number: int) -> str:
    """The ``fit`` config trial ``number`` wrote (what LightningCLI saves, in short)."""
    return (f"# lightning.pytorch==2.4.0\nseed_everything: {number}\ntrainer:\n  max_epochs: 9\n"
            f"model:\n  class_path: shop.Model\n  init_args:\n    hidden_dim: {16 * (number + 1)}\n"
            f"optimizer:\n  class_path: torch.optim.SGD\n  init_args:\n"
            f"    lr: {0.001 * (number + 1)}\n")


def make_study(
    storage: str, run_dir: Path, *, direction: str = "minimize", name: str = "shop",
    trials: tuple[tuple[TrialState, float | None], ...] = TRIALS, write: bool = True,
    log_dir: bool = True,
) -> optuna.Study:
    """A study of a LightningCLI project as the launcher leaves it: each trial's folder
    ``run_dir/trial_NNNNN`` (its ``log_dir``) holds its ``config.yaml`` when ``write``."""
    study = optuna.create_study(study_name=name, storage=open_storage(storage),
                                direction=direction)
    for number, (state, value) in enumerate(trials):
        folder = run_dir / f"trial_{number:05d}"
        if write:
            folder.mkdir(parents=True)
            (folder / CONFIG_NAME).write_text(_fit_config(number), encoding="utf-8")
        curve = [0.01] if state == TrialState.PRUNED else [0.8, value or 0.7]
        start = T0 + 10 * number
        trial = optuna.trial.create_trial(
            state=state, value=value, params={"optimizer.init_args.lr": 0.001 * (number + 1)},
            distributions={"optimizer.init_args.lr": FloatDistribution(1e-4, 1e-1, log=True)},
            user_attrs={**({ATTR.LOG_DIR: str(folder)} if log_dir else {}),
                        ATTR.START: start, ATTR.END: start + 5, ATTR.EPOCHS: len(curve),
                        ATTR.EPOCH_END_TIMES: [start + 2 * (k + 1) for k in range(len(curve))],
                        ATTR.SLOT: 0, ATTR.DEVICE: "cpu:0", ATTR.HOST: "box"},
            intermediate_values={k + 1: v for k, v in enumerate(curve)},
        )
        trial.datetime_start = dt.datetime.fromtimestamp(start)
        if state.is_finished():
            trial.datetime_complete = dt.datetime.fromtimestamp(start + 5)
        study.add_trial(trial)
    return study


@pytest.fixture(params=["journal", "sqlite"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "journal":
        return str(tmp_path / "shop.journal")
    return f"sqlite:///{tmp_path / 'shop.db'}"


def _header(number: int, name: str = "shop") -> str:
    return f"# trial {number} of study '{name}', the best COMPLETE trial\n"


# ------------------------------------------------------------------------------------------
# best_config_source and write_best_config.


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_the_best_complete_trials_config_is_copied_with_a_header_line(
    tmp_path: Path, storage: str, direction: str
) -> None:
    make_study(storage, tmp_path / "runs", direction=direction)
    study = load(storage, "shop")  # read back from the storage, as the report does
    best = BEST[direction]
    source = tmp_path / "runs" / f"trial_{best:05d}" / CONFIG_NAME
    assert best_config_source(study) == (best, source)
    dest = tmp_path / "out" / "deeper" / "best_config.yaml"  # folders made as needed
    assert write_best_config(study, dest) == (best, dest)
    text = dest.read_text(encoding="utf-8")
    assert text == _header(best) + _fit_config(best)
    assert text.count("\n") == _fit_config(best).count("\n") + 1  # one line more
    # Still the fit config the project's CLI reads: the header is a YAML comment.
    assert yaml.safe_load(text) == yaml.safe_load(_fit_config(best))
    assert sorted(p.name for p in dest.parent.iterdir()) == ["best_config.yaml"]  # no .partial
    assert source.read_text(encoding="utf-8") == _fit_config(best)  # the trial's is untouched


def test_an_existing_destination_is_replaced_whole(tmp_path: Path) -> None:
    study = make_study(str(tmp_path / "s.journal"), tmp_path / "runs")
    dest = tmp_path / "best_config.yaml"
    dest.write_text("an older best\n" * 100)
    write_best_config(study, dest)
    assert dest.read_text(encoding="utf-8") == _header(2) + _fit_config(2)


def test_a_config_with_non_ascii_text_is_copied_as_utf8(tmp_path: Path) -> None:
    study = make_study(str(tmp_path / "s.journal"), tmp_path / "runs")
    source = tmp_path / "runs" / "trial_00002" / CONFIG_NAME
    source.write_text("# Café ✓\nmodel: {class_path: shop.Modèle}\n", encoding="utf-8")
    dest = tmp_path / "best.yaml"
    write_best_config(study, dest)
    assert dest.read_text(encoding="utf-8") == (_header(2) + "# Café ✓\n"
                                                 "model: {class_path: shop.Modèle}\n")


@pytest.mark.parametrize(
    "trials",
    [
        pytest.param(((TrialState.PRUNED, None), (TrialState.FAIL, None)), id="pruned-and-failed"),
        pytest.param((), id="no-trial"),
        pytest.param(((TrialState.RUNNING, None),), id="running"),
    ],
)
def test_no_complete_trial_is_a_best_config_error(
    tmp_path: Path, trials: tuple[tuple[TrialState, float | None], ...]
) -> None:
    study = make_study(str(tmp_path / "s.journal"), tmp_path / "runs", trials=trials)
    dest = tmp_path / "best.yaml"
    for call in (lambda: best_config_source(study), lambda: write_best_config(study, dest)):
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.field == "best-config"
        assert info.value.message == "study 'shop' has no COMPLETE trial yet"
    assert not dest.exists() and not (tmp_path / "best.yaml.partial").exists()


def test_a_best_trial_without_its_config_names_the_trial(tmp_path: Path) -> None:
    """The best trial's folder is there but holds no config.yaml (a registry model's, or
    another machine's folder): the error names that trial; no other trial's file is used."""
    study = make_study(str(tmp_path / "s.journal"), tmp_path / "runs")
    missing = tmp_path / "runs" / "trial_00002" / CONFIG_NAME
    missing.unlink()
    dest = tmp_path / "best.yaml"
    with pytest.raises(ConfigError) as info:
        write_best_config(study, dest)
    assert info.value.field == "best-config"
    assert info.value.message.startswith(
        f"trial 2 (the best) has no config.yaml ({missing} not found): ")
    assert "LightningCLI" in info.value.message
    assert "\n" not in str(info.value)
    assert not dest.exists()


@pytest.mark.parametrize("write", [True, False], ids=["files-elsewhere", "no-files"])
def test_a_best_trial_without_a_log_dir_names_the_trial(tmp_path: Path, write: bool) -> None:
    """A study whose trials recorded no folder (not the launcher's): nothing to copy."""
    study = make_study(str(tmp_path / "s.journal"), tmp_path / "runs", log_dir=False,
                       write=write)
    with pytest.raises(ConfigError) as info:
        best_config_source(study)
    assert info.value.field == "best-config"
    assert info.value.message.startswith("trial 2 (the best) has no config.yaml: ")


def test_an_unwritable_destination_is_a_best_config_error_and_leaves_no_partial(
    tmp_path: Path,
) -> None:
    """The destination is a folder: the file is written beside it, cannot replace it, and
    is removed; the folder is as it was."""
    study = make_study(str(tmp_path / "s.journal"), tmp_path / "runs")
    dest = tmp_path / "best.yaml"
    dest.mkdir()
    (dest / "keep.txt").write_text("x")
    with pytest.raises(ConfigError) as info:
        write_best_config(study, dest)
    assert info.value.field == "best-config"
    assert info.value.message.startswith(f"cannot write {dest}: ")
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.yaml", "runs", "s.journal"]
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]


def test_a_destination_under_a_file_is_a_best_config_error(tmp_path: Path) -> None:
    study = make_study(str(tmp_path / "s.journal"), tmp_path / "runs")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ConfigError) as info:
        write_best_config(study, tmp_path / "afile" / "best.yaml")
    assert info.value.field == "best-config"
    assert info.value.message.startswith(f"cannot write {tmp_path / 'afile' / 'best.yaml'}: ")


# ------------------------------------------------------------------------------------------
# python -m lightning_hpo.report --best-config PATH


def test_the_report_cli_writes_the_best_config_and_the_report(
    tmp_path: Path, storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make_study(storage, tmp_path / "runs", direction="maximize")
    dest, out = tmp_path / "best_config.yaml", tmp_path / "report"
    code = main(["--storage", storage, "--out", str(out), "--best-config", str(dest)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert dest.read_text(encoding="utf-8") == _header(4) + _fit_config(4)
    assert (out / "trials.csv").is_file()  # the report itself, as without the flag
    assert (f"Wrote {dest}: trial 4's config (the project's fit --config {dest} retrains it)"
            in captured.out)
    assert not (tmp_path / "best_config.yaml.partial").exists()


def _cli_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_the_report_cli_without_a_complete_trial_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs",
               trials=((TrialState.PRUNED, None), (TrialState.FAIL, None)))
    dest, out = tmp_path / "best.yaml", tmp_path / "report"
    err = _cli_error(["--storage", spec, "--out", str(out), "--best-config", str(dest)], capsys)
    assert err == "error: best-config: study 'shop' has no COMPLETE trial yet\n"
    assert not dest.exists() and not out.exists()  # the report is not written either


def test_the_report_cli_with_a_best_trial_without_its_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs")
    (tmp_path / "runs" / "trial_00002" / CONFIG_NAME).unlink()
    dest, out = tmp_path / "best.yaml", tmp_path / "report"
    err = _cli_error(["--storage", spec, "--out", str(out), "--best-config", str(dest)], capsys)
    assert err.startswith("error: best-config: trial 2 (the best) has no config.yaml (")
    assert not dest.exists() and not out.exists()


def test_the_report_cli_with_an_unwritable_destination_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs")
    dest = tmp_path / "taken" / "best_config.yaml"
    dest.mkdir(parents=True)  # a folder where the file would go
    err = _cli_error(["--storage", spec, "--out", str(tmp_path / "report"),
                      "--best-config", str(tmp_path / "taken")], capsys)
    assert err.startswith(f"error: best-config: cannot write {dest}: ")
    assert not (tmp_path / "taken" / "best_config.yaml.partial").exists()


def test_the_report_cli_with_a_destination_under_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs")
    (tmp_path / "afile").write_text("x")
    err = _cli_error(["--storage", spec, "--out", str(tmp_path / "report"),
                      "--best-config", str(tmp_path / "afile" / "best.yaml")], capsys)
    assert err.startswith("error: best-config: cannot write ")


def test_the_report_cli_refuses_best_config_with_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs_a", name="a")
    make_study(spec, tmp_path / "runs_b", name="b")
    dest, out = tmp_path / "x", tmp_path / "cmp"
    err = _cli_error(["--storage", spec, "--compare", "a", "b", "--best-config", str(dest),
                      "--out", str(out)], capsys)
    assert err.startswith("error: best-config: cannot be combined with --compare")
    assert not dest.exists() and not out.exists()


def test_the_report_cli_help_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "--best-config PATH" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------
# --trial N: a chosen trial's config (a study of several objectives has no single best)


def test_the_report_cli_writes_a_chosen_trials_config_whatever_its_state(
    tmp_path: Path, storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make_study(storage, tmp_path / "runs")
    dest, out = tmp_path / "chosen.yaml", tmp_path / "report"
    code = main(["--storage", storage, "--out", str(out), "--best-config", str(dest),
                 "--trial", "1"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert dest.read_text(encoding="utf-8") == (
        "# trial 1 of study 'shop', the trial chosen (PRUNED)\n" + _fit_config(1))
    assert f"Wrote {dest}: trial 1's config" in captured.out
    assert (out / "trials.csv").is_file()


@pytest.mark.parametrize("args, message", [
    (["--trial", "6"], "error: trial: is 6, but study 'shop' has trials 0 to 5\n"),
    (["--trial", "-1"], "error: trial: is -1, but study 'shop' has trials 0 to 5\n"),
    (["--trial", "2", "--no-best-config"], "error: trial: names the trial whose config "
     "--best-config PATH writes: give --best-config too\n"),
], ids=["past-the-last", "negative", "without-best-config"])
def test_a_bad_trial_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs")
    dest, out = tmp_path / "chosen.yaml", tmp_path / "report"
    best = [] if "--no-best-config" in args else ["--best-config", str(dest)]
    args = [a for a in args if a != "--no-best-config"]
    err = _cli_error(["--storage", spec, "--out", str(out), *best, *args], capsys)
    assert err == message
    assert not dest.exists() and not out.exists()


def test_a_chosen_trial_without_its_config_names_it(tmp_path: Path) -> None:
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs")
    (tmp_path / "runs" / "trial_00005" / CONFIG_NAME).unlink()
    with pytest.raises(ConfigError) as info:
        best_config_source(load(spec, "shop"), 5)
    assert info.value.field == "best-config"
    assert info.value.message.startswith("trial 5 (the one named) has no config.yaml (")
    with pytest.raises(ConfigError, match="is True"):
        best_config_source(load(spec, "shop"), True)  # type: ignore[arg-type]


def test_the_launchers_last_line_of_a_study_of_several_objectives_lists_its_front(
    tmp_path: Path,
) -> None:
    """No single best_config.yaml: the line names each Pareto-optimal trial's config."""
    from lightning_hpo.launch.config import parse_config
    from lightning_hpo.launch.runner import _best_config

    cfg = parse_config({
        "study": "mo", "storage": str(tmp_path / "mo.journal"), "run_dir": str(tmp_path),
        "model": {"class_path": "lightning_hpo.builtin.models.LeNet"},
        "data": {"class_path": "lightning_hpo.builtin.data.DigitsDataModule"},
        "metric": ["validation_error", "parameters"], "direction": ["minimize", "minimize"],
        "space": {"model.init_args.lr": {"loguniform": [0.01, 1.0]}},
        "stop": {"n_trials": 3}, "trainer": {"max_epochs": 2},
    })
    study = optuna.create_study(study_name="mo", storage=open_storage(cfg.storage),
                                directions=["minimize", "minimize"])
    assert _best_config(cfg, study) == "No best_config.yaml: no COMPLETE trial yet"
    for number, values in enumerate([(0.1, 900.0), (0.2, 950.0), (0.3, 100.0)]):  # 1 dominated
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.COMPLETE, values=list(values),
            user_attrs={ATTR.LOG_DIR: str(tmp_path / f"trial_{number:05d}")}))
    line = _best_config(cfg, study)
    assert line == (f"Pareto-optimal trials' configs: trial 0: {tmp_path}/trial_00000/config.yaml, "
                    f"trial 2: {tmp_path}/trial_00002/config.yaml (the report's --best-config "
                    "PATH --trial N copies one with its header)")
    assert not (tmp_path / "mo" / "best_config.yaml").exists()


@pytest.mark.parametrize("folder", ["new folder/", "existing"])
def test_best_config_into_a_folder_writes_best_config_yaml_there(
    tmp_path: Path, folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--best-config newdir/`` wrote a file named ``newdir``; an existing folder was
    refused. Either is the folder the file goes in, and the printed command quotes a path
    with a space."""
    spec = str(tmp_path / "s.journal")
    make_study(spec, tmp_path / "runs")
    (tmp_path / "existing").mkdir()
    code = main(["--storage", spec, "--out", str(tmp_path / "report"),
                 "--best-config", f"{tmp_path}/{folder}"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    dest = tmp_path / folder.rstrip("/") / "best_config.yaml"
    assert dest.read_text(encoding="utf-8").startswith("# trial ")
    assert f"fit --config {shlex.quote(str(dest))} retrains it" in captured.out.replace("\n", "")
