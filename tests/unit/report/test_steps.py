"""The report of a study trained by steps (``PruningCallback(..., resource="step")``): its steps,
rungs and compute are named steps everywhere a person reads them (the terminal, the plots), the
``epochs`` columns count steps, and such a study does not compare with one by epochs."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import optuna
import pytest
from optuna.trial import TrialState

from lightning_hpo import ASHAPruner, DigitsDataModule, DropoutMLP, PruningCallback
from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo.errors import ConfigError
from lightning_hpo.report import (
    Comparison,
    StudySnapshot,
    curves_frame,
    incumbent_frame,
    load,
    plot_incumbent,
    plot_learning_curves,
    plot_rungs,
    rungs_frame,
    study_info,
    summarize,
    trials_frame,
)
from lightning_hpo.report.__main__ import main
from lightning_hpo.report._spending import Spending
from lightning_hpo.schema import RESOURCE_ATTR

#: Rungs at 2, 4 and 8 optimizer steps; each trial validates every 2 steps up to 8.
RUNGS = (2, 4, 8)


def _objective(trial: optuna.Trial) -> float:
    L.seed_everything(trial.number, verbose=False)
    model = DropoutMLP(lr=trial.suggest_float("lr", 1e-3, 1.0, log=True), num_hiddens_1=32,
                       momentum=0.9)
    pruning = PruningCallback(trial, monitor="validation_error", resource="step")
    trainer = L.Trainer(accelerator="cpu", max_epochs=-1, max_steps=RUNGS[-1],
                        val_check_interval=2, limit_val_batches=2, num_sanity_val_steps=0,
                        callbacks=[pruning], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, datamodule=DigitsDataModule(batch_size=32))
    pruning.raise_if_pruned()
    return trainer.callback_metrics["validation_error"].item()


@pytest.fixture(scope="module")
def by_steps(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A journal holding study ``steps``: 6 trials of real fits reported at optimizer steps 2,
    4, 6, 8 under ASHA with rungs in steps, some of them pruned."""
    path = str(tmp_path_factory.mktemp("steps") / "steps.journal")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name="steps", storage=optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(path)),
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=ASHAPruner(min_resource=2, max_resource=8, reduction_factor=2))
    study.optimize(_objective, n_trials=6)
    assert {t.state for t in study.trials} == {TrialState.COMPLETE, TrialState.PRUNED}
    return path


def _load(path: str, name: str = "steps") -> optuna.Study:
    return load(path, name)


def test_study_info_reads_what_the_steps_count(by_steps: str) -> None:
    info = study_info(_load(by_steps))
    assert (info.resource, info.units, info.rungs) == ("step", "steps", RUNGS)
    plain = study_info(optuna.create_study())
    assert (plain.resource, plain.units) == ("epoch", "epochs")


def test_epochs_columns_count_the_steps_each_trial_reached(by_steps: str) -> None:
    """A trial's ``epochs`` is its last reported step, not its number of reports; the compute
    spent is their sum, and the incumbent's ``epochs_spent`` climbs to it."""
    study = _load(by_steps)
    snap = StudySnapshot.read(study)
    trials = trials_frame(snap).set_index("trial")
    for trial in study.trials:
        assert trials.loc[trial.number, "epochs"] == max(trial.intermediate_values)
    summary = summarize(snap)
    assert summary["epochs"] == sum(max(t.intermediate_values) for t in study.trials)
    spent = incumbent_frame(snap)["epochs_spent"]
    assert spent.is_monotonic_increasing and spent.max() <= summary["epochs"]
    assert set(rungs_frame(snap)["rung"]) <= set(RUNGS)


def test_the_terminal_report_says_steps_wherever_it_counts(
    by_steps: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--storage", by_steps, "--study", "steps", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    total = sum(max(t.intermediate_values) for t in _load(by_steps).trials)
    assert "asha rungs 2, 4, 8 steps" in out
    assert "reported at any step" in out and "@ step" in out
    assert re.search(r"trial \d+ at step \d", out)
    assert f"Compute: {total} steps (up to each trial's last report)" in out
    # "epoch" is left only in the attribute's name the notes quote
    assert re.sub(r"`epoch_end_times`", "", out).lower().count("epoch") == 0, out


def _words(fig: Any) -> list[str]:
    """Every text a person reads in a figure: titles, axis labels, legends, notes."""
    texts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        texts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        texts += [t.get_text() for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
    for legend in fig.legends:
        texts += [t.get_text() for t in legend.get_texts()]
    if fig._suptitle is not None:
        texts.append(fig._suptitle.get_text())
    return [t for t in texts if t]


def test_the_plots_say_steps(by_steps: str) -> None:
    snap = StudySnapshot.read(_load(by_steps))
    info = snap.info
    figures = [plot_rungs(curves_frame(snap), info, rungs_frame(snap), trials_frame(snap)),
               plot_incumbent(incumbent_frame(snap), info),
               plot_learning_curves(curves_frame(snap), info)]
    try:
        for fig in figures:
            words = " | ".join(_words(fig))
            assert "step" in words and "epoch" not in words.lower(), words
    finally:
        for fig in figures:
            plt.close(fig)


def _synthetic(storage: optuna.storages.BaseStorage, name: str, resource: str | None,
               steps: tuple[int, ...]) -> optuna.Study:
    """A study of two COMPLETE trials that reported at ``steps``: 5 s each, 10 s apart."""
    study = optuna.create_study(study_name=name, storage=storage)
    if resource is not None:
        storage_of(study).set_study_system_attr(study_id_of(study), RESOURCE_ATTR, resource)
    start = datetime.datetime(2026, 1, 1)
    for k in range(2):
        trial = optuna.trial.create_trial(
            state=TrialState.COMPLETE, value=1.0 / (k + 1), params={"x": float(k)},
            distributions={"x": optuna.distributions.FloatDistribution(0, 1)},
            intermediate_values={s: 1.0 / (k + 1) for s in steps})
        trial.datetime_start = start + datetime.timedelta(seconds=10 * k)
        trial.datetime_complete = start + datetime.timedelta(seconds=10 * k + 5)
        study.add_trial(trial)
    return study


def test_compute_by_steps_counts_each_report_not_each_step() -> None:
    """100,000 steps a trial, reported every 25,000: the compute spent is placed at the
    reports (pro rata over each trial's duration), and sums to the steps reached."""
    storage = optuna.storages.InMemoryStorage()
    study = _synthetic(storage, "long", "step", (25_000, 50_000, 75_000, 100_000))
    snap = StudySnapshot.read(study)
    assert summarize(snap)["epochs"] == 200_000
    spent = incumbent_frame(snap)
    assert spent["epochs_spent"].tolist() == [25_000, 50_000, 75_000, 100_000, 100_000,
                                              125_000, 150_000, 175_000, 200_000, 200_000]
    assert Spending(snap.trials, snap.horizon, by_step=True)._epoch_ends.size == 8


def test_a_study_by_steps_does_not_compare_with_one_by_epochs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "two.journal")
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
    _synthetic(storage, "by-steps", "step", (200, 400))
    _synthetic(storage, "by-epochs", None, (1, 2))
    _synthetic(storage, "also-steps", "step", (100, 400))
    with pytest.raises(ConfigError) as info:
        _ = Comparison.of([_load(path, "by-steps"), _load(path, "by-epochs")]).pairs
    assert str(info.value) == (
        "compare: the studies count their compute in different units (by-steps: steps, "
        "by-epochs: epochs); the epochs they spent do not compare with steps")
    assert main(["--storage", path, "--compare", "by-steps", "by-epochs",
                 "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: compare: the studies count") and err.count("\n") == 1, err
    assert main(["--storage", path, "--compare", "by-steps", "also-steps",
                 "--out", str(tmp_path / "ok")]) == 0
    out = capsys.readouterr().out
    assert "steps ratio" in out and "at any step of any trial" in out
