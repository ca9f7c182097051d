"""``python -m lightning_hpo.report`` (:mod:`lightning_hpo.report.__main__`): comparisons by name
and ``NAME@STORAGE``, one-line errors with exit code 2, the help, paused trials and open segments
on the terminal, and one slow run of the real launcher followed by the report CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
import yaml
from helpers.report_support import (
    OPEN_SPANS,
    PNGS,
    _gids,
    _png_shape,
    _points,
    make_launcher_study,
    make_open_segment_study,
    make_paused_study,
)
from matplotlib.figure import Figure
from optuna.trial import TrialState

from lightning_hpo.pruners import rung_records
from lightning_hpo.report import curves_frame, load, load_ref, plot_rungs, rungs_frame, study_info
from lightning_hpo.report.__main__ import main
from lightning_hpo.schema import ATTR
from lightning_hpo.storage import open_storage


def test_compare_cli_takes_names_and_name_at_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = str(tmp_path / "shared.journal")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    make_launcher_study(shared, "asha", running=False)
    make_launcher_study(shared, "rs", running=False, epoch_s=2.0)
    make_launcher_study(other, "four", running=False, epoch_s=0.25)
    out = tmp_path / "cmp"
    code = main(["--storage", shared, "--compare", "asha", "rs", f"four@{other}",
                 "--out", str(out)])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert len(pd.read_csv(out / "compare.csv")) == 6
    assert "Time and compute to reach" in stdout and "four" in stdout
    assert load_ref(f"four@{other}").study_name == "four"


def test_compare_with_a_study_that_reports_no_epoch_shows_no_ratio_of_epochs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain Optuna study reaches the other's best having spent 0 epochs (it reports none):
    its ratio of epochs has no value, which the table showed as "-x"."""
    spec = str(tmp_path / "s.journal")
    make_launcher_study(spec, "asha", running=False)
    plain = optuna.create_study(study_name="plain", storage=open_storage(spec))
    plain.optimize(lambda trial: 0.001, n_trials=2)
    assert main(["--storage", spec, "--compare", "asha", "plain",
                 "--out", str(tmp_path / "cmp")]) == 0
    stdout = capsys.readouterr().out
    row = next(line for line in stdout.splitlines()
               if line.startswith("│ plain ") and "asha's" in line)
    assert row.split("│")[5].strip().startswith("0 (vs ") and row.split("│")[6].strip() == "-"
    assert "-x" not in stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--study", "nope"], "error: study: no study named 'nope'", id="wrong-name"),
        pytest.param(["--study", "empty"], "error: study: 'empty' has no started trial",
                     id="empty-study"),
        pytest.param([], "error: study: ", id="several-studies-need-a-name"),
    ],
)
def test_bad_study_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    spec = str(tmp_path / "s.journal")
    make_launcher_study(spec, "demo")
    optuna.create_study(study_name="empty", storage=open_storage(spec)).enqueue_trial({})
    assert main(["--storage", spec, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1, err
    if not args:  # the error lists the studies to choose from
        assert "demo" in err and "empty" in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--bogus"], "error: unrecognized arguments: --bogus (the options: "
                     "--storage URL, --study NAME, --out DIR, --top N, --compare STUDY ..., "
                     "--best-config PATH, --trial N; --help explains them)", id="unknown-flag"),
        pytest.param(["--storage"], "error: storage: needs a value (--storage URL)",
                     id="missing-value"),
        pytest.param(["--storage", "x.journal", "--compare"],
                     "error: compare: needs a value or more (--compare STUDY ...)",
                     id="missing-values"),
        pytest.param(["--top", "0"], "error: top: must be at least 1, not 0", id="bad-top"),
        pytest.param(["--trial", "x"], "error: trial: must be a whole number, not 'x'",
                     id="bad-int"),
        pytest.param(["postgresql://hpo:s3cret-pw@db/studies"],
                     "error: unrecognized arguments: postgresql://hpo:***@db/studies (the "
                     "options:", id="url-without-flag-masked"),
    ],
)
def test_a_bad_argument_is_one_line_exit_2_without_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    """argparse printed its usage block and "python -m lightning_hpo.report: error: ...", and
    the password of a URL given without --storage."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(expected) and captured.err.count("\n") == 1, captured.err
    assert "s3cret" not in captured.err and not captured.out


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("postgresql+psycopg2://hpo:s3cret-pw@127.0.0.1:1/studies",
                     id="postgres-refused"),
        pytest.param("postgresql://hpo:s3cret-pw@127.0.0.1:1/studies", id="postgres-no-driver"),
        pytest.param("sqlite:///{tmp}/missing/none.db", id="sqlite-missing"),
        pytest.param("{tmp}/missing.journal", id="journal-missing"),
    ],
)
def test_unreachable_storage_is_one_masked_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    spec = spec.format(tmp=tmp_path)
    assert main(["--storage", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: storage: cannot open") and err.count("\n") == 1, err
    assert "s3cret" not in err
    assert not (tmp_path / "missing").exists()  # nothing created


def test_an_empty_storage_spec_says_what_one_looks_like(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It read as the current folder: "storage: . is a folder, not a journal file"."""
    assert main(["--storage", ""]) == 2
    assert capsys.readouterr().err == ("error: storage: is '': give a journal file path "
                                       "(runs/study.journal) or an RDB URL (sqlite:///study.db)\n")


def test_a_plain_optuna_study_without_steps_or_params_reads_without_empty_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An objective that reports nothing and suggests nothing: no "(RUNNING; )", no "after 0
    epochs", no device-hours of a fraction of a second."""
    spec = str(tmp_path / "plain.journal")
    study = optuna.create_study(study_name="plain", storage=open_storage(spec))
    study.optimize(lambda trial: 1.0, n_trials=2)
    assert main(["--storage", spec, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    best = [line for line in out.splitlines() if line.startswith(("Best value", "Best COMPLETE"))]
    assert best == ["Best value observed: 1, trial 0 (COMPLETE)",
                    "Best COMPLETE trial: trial 0, value 1"], out
    compute = next(line for line in out.splitlines() if line.startswith("Compute: "))
    assert "device-h" not in compute, compute


def test_the_default_folder_of_any_study_name_is_its_own_under_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    recwarn: pytest.WarningsRecorder,
) -> None:
    """A study named ".." was reported into the current folder itself (reports/..), and
    "étude-β 🚀" into reports/_tude-_ (any accented name lost its letters), with matplotlib's
    "Glyph 128640 missing from font" warning on stderr."""
    spec = str(tmp_path / "names.journal")
    for name in ("..", "étude-β 🚀"):
        plain = optuna.create_study(study_name=name, storage=open_storage(spec))
        plain.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    monkeypatch.chdir(tmp_path)
    for name, folder in (("..", "_.."), ("étude-β 🚀", "étude-β_")):
        assert main(["--storage", spec, "--study", name]) == 0
        assert f"Wrote reports/{folder}/: trials.csv" in capsys.readouterr().out
        assert (tmp_path / "reports" / folder / "trials.csv").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["names.journal", "reports"]
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["_..", "étude-β_"]
    assert not [w for w in recwarn if "missing from font" in str(w.message)]


def test_ctrl_c_while_writing_is_one_line_exit_130_and_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It printed KeyboardInterrupt's traceback, and left the CSVs written so far."""
    spec = str(tmp_path / "s.journal")
    make_launcher_study(spec, "demo", running=False)
    real, saved = Figure.savefig, []

    def interrupted(self: Figure, *args: Any, **kwargs: Any) -> None:
        saved.append(args)
        if len(saved) == 2:
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", interrupted)
    out = tmp_path / "rep"
    try:
        code = main(["--storage", spec, "--out", str(out)])
    except KeyboardInterrupt:  # not let through: it would stop the test session
        pytest.fail("Ctrl-C went through main() as KeyboardInterrupt")
    assert code == 130
    captured = capsys.readouterr()
    assert captured.err == "stopped by SIGINT\n" and not captured.out
    assert not out.exists()  # the folder this run made is gone too (it was left empty)
    out.mkdir()  # a folder of an earlier report: kept, with its files
    (out / "trials.csv").write_text("earlier\n")
    saved.clear()
    assert main(["--storage", spec, "--out", str(out)]) == 130
    assert [f.name for f in out.iterdir()] == ["trials.csv"]
    assert (out / "trials.csv").read_text() == "earlier\n"


def test_help_shows_an_example() -> None:
    result = subprocess.run([sys.executable, "-m", "lightning_hpo.report", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "python -m lightning_hpo.report --storage" in result.stdout
    assert "--compare" in result.stdout


@pytest.mark.parametrize(("io_encoding", "shown"), [
    pytest.param("ascii", "?tude-?", id="ascii-replaced"),
    pytest.param("ascii:backslashreplace", "\\xe9tude-\\u03bc", id="users-own-handler-kept"),
    pytest.param("utf-8", "étude-μ", id="utf-8-as-is"),
])
def test_a_study_name_the_terminal_cannot_encode_is_printed_replaced(
    tmp_path: Path, io_encoding: str, shown: str,
) -> None:
    """Under ``PYTHONIOENCODING=ascii`` the report of a study named ``étude-μ`` (made by plain
    Optuna) stopped with rich's UnicodeEncodeError traceback, exit 1; the real CLI, in a
    subprocess, prints ``?`` for what the encoding lacks (the launcher and the proxy share
    its parser, which does it: lightning_hpo._cli.replace_unencodable)."""
    spec = str(tmp_path / "s.journal")
    study = optuna.create_study(study_name="étude-μ", storage=open_storage(spec))
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    result = subprocess.run(
        [sys.executable, "-m", "lightning_hpo.report", "--storage", spec, "--out",
         str(tmp_path / "rep")],
        env={**os.environ, "PYTHONIOENCODING": io_encoding}, capture_output=True,
        encoding="utf-8", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert f"Study '{shown}' on {spec}" in result.stdout, result.stdout[:500]
    assert (tmp_path / "rep" / "trials.csv").is_file()


@pytest.mark.slow
def test_report_on_a_real_launcher_run(tmp_path: Path) -> None:
    storage = str(tmp_path / "e2e.journal")
    config = {
        "study": "e2e", "storage": storage, "run_dir": str(tmp_path / "runs"),
        "model": {"name": "lenet"}, "data": {"name": "digits"},
        "space": {"lr": {"loguniform": [0.01, 1.0]}},
        "initial": [{"lr": 0.1}], "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "asha", "max_resource": 3},
        "trainer": {"limit_train_batches": 5, "limit_val_batches": 2},
        "devices": {"accelerator": "cpu"}, "stop": {"n_trials": 6},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = dict(os.environ)
    launched = subprocess.run([sys.executable, "-m", "lightning_hpo.launch", str(path), "-q"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    out = tmp_path / "report"
    reported = subprocess.run(
        [sys.executable, "-m", "lightning_hpo.report", "--storage", storage, "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert reported.returncode == 0, reported.stderr
    assert "note:" not in reported.stdout  # a launcher study lacks nothing
    assert "Compute:" in reported.stdout and "device-s" in reported.stdout
    study = load(storage, "e2e")
    trials = [t for t in study.trials if t.state != TrialState.WAITING]
    assert len(trials) == 6
    frame = pd.read_csv(out / "trials.csv")
    assert frame["trial"].tolist() == [t.number for t in trials]
    assert frame["state"].tolist() == [t.state.name for t in trials]
    assert frame["epochs"].tolist() == [t.user_attrs[ATTR.EPOCHS] for t in trials]
    assert frame["slot"].tolist() == [t.user_attrs[ATTR.SLOT] for t in trials]
    curves = pd.read_csv(out / "curves.csv")
    assert len(curves) == sum(len(t.intermediate_values) for t in trials)
    assert curves["time"].notna().all()  # the launcher wrote every epoch's end time
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    incumbent = pd.read_csv(out / "incumbent.csv")
    values = [v for t in trials for v in t.intermediate_values.values()]  # any epoch, any trial
    assert incumbent["best"].iloc[-1] == pytest.approx(min(values))
    assert f"Best validation_error observed: {min(values):.4g}, trial " in reported.stdout
    if complete:
        assert incumbent["best_complete"].iloc[-1] == pytest.approx(study.best_value)
    for name in PNGS:  # incumbent.png too: a value was reported even if no trial completed
        height, width, _ = _png_shape(out / name)
        assert width >= 900 and height >= 250, name
    rungs = pd.read_csv(out / "rungs.csv")
    assert len(rungs) == len(rung_records(study)) > 0  # the pruner's own records
    rung_fig = plot_rungs(curves_frame(study), study_info(study), rungs_frame(study))
    assert sorted(_gids(rung_fig, "rung-")) == ["rung-1", "rung-3"]
    for kind in ("promoted", "pruned"):
        assert _points(rung_fig, kind) == int((rungs["outcome"] == kind).sum()), kind


def test_report_files_and_cli_show_paused_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "paused.journal")
    make_paused_study(spec)
    out = tmp_path / "rep"
    assert main(["--storage", spec, "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "Trials: 7 (2 complete, 2 pruned, 1 running, 1 paused, 1 waiting)" in stdout
    assert ("Paused (RUNNING in Optuna, resumed from their checkpoint by the next run): trial 1 "
            "at epoch 4 (rung 4)") in stdout
    assert "Best validation_error observed: 0.2, trial 1 at epoch 4 (PAUSED, to be resumed;" in (
        stdout)
    rows = {int(cells[2]): cells[3].split()[0] for line in stdout.splitlines()
            if line.startswith("│") and (cells := line.split("│"))[1].strip()}
    assert rows == {1: "PAUSED", 3: "COMPLETE", 0: "COMPLETE", 5: "RUNNING", 4: "PRUNED",
                    2: "PRUNED"}
    assert "rung records" not in stdout  # a pausing schedule keeps none: nothing is missing
    assert "(+ 1 trial(s) training now: the segment in flight not counted in device-s)" in stdout
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(["trials.csv", "curves.csv", "incumbent.csv", "rungs.csv",
                            "segments.csv", *PNGS])
    trials = pd.read_csv(out / "trials.csv").set_index("trial")
    assert trials.loc[1, "state"] == "RUNNING" and bool(trials.loc[1, "paused"])
    assert trials.loc[1, "paused_epoch"] == 4 and not trials["paused"].drop(index=1).any()
    segments = pd.read_csv(out / "segments.csv")
    assert len(segments) == 11 and segments["trial"].tolist() == [0, 0, 0, 1, 1, 2, 3, 3, 4, 5, 5]
    for name in PNGS:
        height, width, _ = _png_shape(out / name)
        assert width >= 900 and height >= 250, name


def test_report_cli_exits_0_on_a_study_with_open_and_left_open_segments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'open.db'}"
    make_open_segment_study(url)
    out = tmp_path / "rep"
    assert main(["--storage", url, "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "Trials: 7 (4 complete, 1 running, 2 paused)" in stdout
    rows = {int(cells[2]): cells[3].strip() for line in stdout.splitlines()
            if line.startswith("│") and (cells := line.split("│"))[1].strip()}
    assert rows == {0: "COMPLETE", 1: "PAUSED @ 2", 2: "RUNNING", 3: "COMPLETE", 4: "PAUSED @ 4",
                    5: "COMPLETE", 6: "COMPLETE"}
    assert "trial 1 at epoch 2 (worker died; resumed from epoch 2)" in stdout
    assert "(+ 1 trial(s) training now" in stdout
    assert {"segments.csv", "timeline.png", "learning_curves.png"} <= {
        p.name for p in out.iterdir()}
    segments = pd.read_csv(out / "segments.csv")
    assert len(segments) == sum(len(v) for v in OPEN_SPANS.values())
    assert segments.loc[segments["end_s"].isna(), "trial"].tolist() == [2]
    curves = pd.read_csv(out / "curves.csv")
    assert set(curves.loc[curves["trial"].isin([1, 4]), "status"]) == {"PAUSED"}


def test_one_epoch_of_compute_is_said_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A study of one trial that trained one epoch read "Compute: 1 epochs"."""
    spec = str(tmp_path / "one.journal")

    def objective(trial: optuna.Trial) -> float:
        trial.report(0.5, step=1)
        return 0.5

    optuna.create_study(study_name="one", storage=open_storage(spec)).optimize(objective,
                                                                             n_trials=1)
    assert main(["--storage", spec, "--out", str(tmp_path / "out")]) == 0
    compute = next(line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("Compute: "))
    assert compute.startswith("Compute: 1 epoch, "), compute
