"""The report of a study with several objectives (issue 26): each trial's Pareto fronts, the
hypervolume and its reference point, per-objective curves and rungs, the plots, the CLI, and
``--compare`` by hypervolume with one shared reference point.

The numbers are worked out by hand from :data:`report_support.MO_SCENARIO` (both objectives
minimised): the COMPLETE trials end at (0.2, 20) trial 0, (0.35, 10) trial 1, (0.25, 25) trial 3
and (0.4, 8) trial 5; PRUNED trial 2 reported (0.7, 30), PRUNED trial 4 (0.5, 5) then (0.45, 5),
FAIL trial 6 (0.9, 40), RUNNING trial 7 (0.55, 12).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from helpers.report_support import (
    MO_METRICS,
    MO_SCENARIO,
    MoSpec,
    _gids,
    _points,
    make_launcher_study,
    make_mo_study,
)
from optuna.trial import TrialState

from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo.errors import ConfigError
from lightning_hpo.pareto import reference_point
from lightning_hpo.pruners import VectorRungStore
from lightning_hpo.report import (
    Comparison,
    StudySnapshot,
    compare,
    curves_frame,
    hypervolume_frame,
    incumbent_frame,
    limitations,
    load,
    plot_hypervolume,
    plot_learning_curves,
    plot_pareto,
    rungs_frame,
    study_info,
    summarize,
    trials_frame,
    write_report,
)
from lightning_hpo.report.__main__ import main
from lightning_hpo.schema import CONFIG_ATTR
from lightning_hpo.storage import open_storage

#: Final values' fronts (COMPLETE trials): 3 is behind 0.
FRONT = {0: 0, 1: 0, 3: 1, 5: 0}
#: Best front at any epoch: 4's epoch 2 (0.45, 5) joins the front; 3 (0.25, 25) and 7
#: (0.55, 12) are behind it, 2 (0.7, 30) behind 3, 6 (0.9, 40) behind 2.
BEST_FRONT = {0: 0, 1: 0, 2: 2, 3: 1, 4: 0, 5: 0, 6: 3, 7: 1}
BEST_STEP = {0: 3, 1: 3, 2: 1, 3: 3, 4: 2, 5: 3, 6: 1, 7: 1}
#: By best front, then along it by validation_error.
RANKED = [0, 1, 5, 4, 3, 7, 2, 6]
#: Each objective's worst value plus a tenth of its range (0.2..0.9 and 5..40).
REFERENCE = (0.9 + 0.07, 40 + 3.5)
#: The final front's staircase against REFERENCE, then 4's point (0.45, 5) below it.
HYPERVOLUME_COMPLETE = 0.77 * 23.5 + 0.62 * 10 + 0.57 * 2
HYPERVOLUME = HYPERVOLUME_COMPLETE + 0.52 * 3

#: The same trials, each value worse by 0.1 and 5 ms, and one more PRUNED trial far behind.
WORSE = tuple(MoSpec(s.state, tuple((e + 0.1, ms + 5) for e, ms in s.points), s.lr)
              for s in MO_SCENARIO) + (MoSpec(TrialState.PRUNED, ((1.5, 60.0),), 0.3),)
#: The comparison's one reference point: over both studies' points (0.2..1.5 and 5..60).
SHARED = (1.5 + 0.13, 60 + 5.5)


@pytest.fixture
def mo_study(tmp_path: Path) -> optuna.Study:
    spec = str(tmp_path / "mo.journal")
    make_mo_study(spec)
    return load(spec)  # read back from the file


@pytest.fixture(params=["journal", "sqlite"])
def stored_mo_study(request: pytest.FixtureRequest, tmp_path: Path) -> optuna.Study:
    """:func:`make_mo_study` read back from a journal file and from SQLite (where the rung
    records and the values are stored differently)."""
    spec = (str(tmp_path / "mo.journal") if request.param == "journal"
            else f"sqlite:///{tmp_path / 'mo.db'}")
    make_mo_study(spec)
    return load(spec)


def test_study_info_names_the_objectives(mo_study: optuna.Study) -> None:
    info = study_info(mo_study)
    assert info.several and info.metrics == MO_METRICS
    assert info.directions == ("minimize", "minimize") and info.minimize == (True, True)
    assert (info.metric, info.direction) == ("validation_error", "minimize")  # the first's
    assert info.pruner == "asha" and info.rungs == (1, 3) and info.max_epochs == 3


@pytest.mark.parametrize(
    ("metric_names", "config_metric", "expected"),
    [
        pytest.param(["error", "ms"], ["validation_error", "latency_ms"], ("error", "ms"),
                     id="optuna-metric-names-first"),
        pytest.param(None, ["validation_error", "latency_ms"], MO_METRICS, id="config-list"),
        pytest.param(None, "validation_error", ("value_0", "value_1"), id="neither"),
    ],
)
def test_objective_names_by_preference(
    metric_names: list[str] | None, config_metric: object, expected: tuple[str, ...]
) -> None:
    study = optuna.create_study(directions=["minimize", "maximize"])
    if metric_names:
        with pytest.warns(optuna.exceptions.ExperimentalWarning):
            study.set_metric_names(metric_names)
    study.set_user_attr(CONFIG_ATTR, json.dumps({"metric": config_metric}))
    info = study_info(study)
    assert info.metrics == expected and info.directions == ("minimize", "maximize")


@pytest.mark.parametrize(("metric_names", "config_metric", "expected"), [
    pytest.param(["validation_error"], None, "validation_error", id="optuna-metric-names"),
    pytest.param(["error"], "validation_error", "error", id="optuna-metric-names-first"),
    pytest.param(None, "validation_error", "validation_error", id="config"),
    pytest.param(None, None, "value", id="neither"),
])
def test_one_objective_is_named_by_the_same_preference(
    metric_names: list[str] | None, config_metric: object, expected: str
) -> None:
    """A plain study whose script called ``study.set_metric_names`` is named so (it was "value"
    whatever it said, with one objective)."""
    study = optuna.create_study()
    if metric_names:
        with pytest.warns(optuna.exceptions.ExperimentalWarning):
            study.set_metric_names(metric_names)
    if config_metric is not None:
        study.set_user_attr(CONFIG_ATTR, json.dumps({"metric": config_metric}))
    assert study_info(study).metrics == (expected,)


def test_trials_table_gives_each_trial_its_fronts(stored_mo_study: optuna.Study) -> None:
    snap = StudySnapshot.read(stored_mo_study)
    trials = trials_frame(snap).set_index("trial")
    assert {int(n): int(f) for n, f in trials["front"].dropna().items()} == FRONT
    assert trials["best_front"].astype(int).to_dict() == BEST_FRONT
    assert trials["best_front_step"].astype(int).to_dict() == BEST_STEP
    assert trials.sort_values("rank").index.tolist() == RANKED == [t.number for t in snap.ranked]
    assert trials.loc[4, ["best_validation_error", "best_latency_ms"]].tolist() == [0.45, 5.0]
    assert trials.loc[0, ["values_validation_error", "values_latency_ms"]].tolist() == [0.2, 20]
    assert trials.loc[7, ["last_validation_error", "last_latency_ms"]].tolist() == [0.55, 12.0]
    assert trials.loc[4, ["values_validation_error", "values_latency_ms"]].isna().all()
    assert "best_value" not in trials and "value" not in trials  # no single best
    summary = summarize(snap)
    assert summary["pareto_complete_trials"] == [0, 1, 5]
    assert summary["pareto_trials"] == [0, 1, 4, 5]
    assert summary["best_value"] is None and summary["best_trial"] is None


def test_hypervolume_and_its_reference_point(mo_study: optuna.Study) -> None:
    snap = StudySnapshot.read(mo_study)
    summary = summarize(snap)
    assert summary["reference"] == pytest.approx(REFERENCE) and snap.reference == \
        summary["reference"]
    assert summary["hypervolume"] == pytest.approx(HYPERVOLUME)
    assert summary["hypervolume_complete"] == pytest.approx(HYPERVOLUME_COMPLETE)
    hv = hypervolume_frame(snap)
    assert hv.attrs["reference"] == pytest.approx(REFERENCE)
    assert np.all(np.diff(hv["hypervolume"]) >= 0) and np.all(
        np.diff(hv["hypervolume_complete"]) >= 0)
    assert hv["hypervolume"].iloc[-1] == pytest.approx(HYPERVOLUME)
    assert hv["hypervolume_complete"].iloc[-1] == pytest.approx(HYPERVOLUME_COMPLETE)
    assert hv["front_size"].iloc[-1] == 4 and hv["front_size_complete"].iloc[-1] == 3
    first = hv[hv["improved_complete"]].iloc[0]  # trial 0's final values, alone
    assert (first["trial"], first["kind"]) == (0, "final")
    assert first["hypervolume_complete"] == pytest.approx(0.77 * 23.5)
    # trial 4's epoch 2 (0.45, 5) is the last growth before trial 5 completes
    gains = hv[hv["improved"]]
    assert (gains["trial"].tolist()[-2:], gains["step"].tolist()[-2:]) == ([4, 5], [2, 3])
    assert len(hv) == sum(len(s.points) for s in MO_SCENARIO) + len(FRONT)  # epochs + finals
    # a reference point given: the hypervolume against it
    wide = hypervolume_frame(snap, reference=(1.0, 50.0))
    assert wide["hypervolume_complete"].iloc[-1] == pytest.approx(
        0.8 * 30 + 0.65 * 10 + 0.6 * 2)
    with pytest.raises(ConfigError, match="reference"):
        hypervolume_frame(snap, reference=(1.0,))
    with pytest.raises(ConfigError, match="hypervolume_frame"):
        incumbent_frame(snap)


def test_mixed_directions_mirror_the_minimised_study(tmp_path: Path) -> None:
    """Accuracy (1 - error), maximised: the same fronts, the same hypervolume, the reference
    point on accuracy's worse side."""
    flipped = tuple(MoSpec(s.state, tuple((1 - e, ms) for e, ms in s.points), s.lr)
                    for s in MO_SCENARIO)
    study = make_mo_study(str(tmp_path / "acc.journal"), scenario=flipped,
                          metrics=("accuracy", "latency_ms"), directions=("maximize", "minimize"))
    snap = StudySnapshot.read(study)
    trials = trials_frame(snap).set_index("trial")
    assert {int(n): int(f) for n, f in trials["front"].dropna().items()} == FRONT
    assert trials["best_front"].astype(int).to_dict() == BEST_FRONT
    assert trials.sort_values("rank").index.tolist() == RANKED  # along the front: accuracy
    summary = summarize(snap)
    assert summary["reference"] == pytest.approx((1 - REFERENCE[0], REFERENCE[1]))
    assert summary["hypervolume"] == pytest.approx(HYPERVOLUME)
    assert summary["hypervolume_complete"] == pytest.approx(HYPERVOLUME_COMPLETE)
    fig = plot_pareto(trials.reset_index(), snap.info, reference=snap.reference)
    stairs = next(line for line in fig.axes[0].lines if line.get_gid() == "staircase")
    # accuracy falls as latency falls along the front: from the reference's latency down
    assert np.allclose(stairs.get_xdata(), [0.8, 0.8, 0.65, 0.65, 0.6, 0.6, 1 - REFERENCE[0]])
    assert np.allclose(stairs.get_ydata(), [REFERENCE[1], 20, 20, 10, 10, 8, 8])


def test_curves_and_rungs_have_one_column_per_objective(
    stored_mo_study: optuna.Study,
) -> None:
    mo_study = stored_mo_study
    snap = StudySnapshot.read(mo_study)
    curves = curves_frame(snap)
    assert len(curves) == sum(len(s.points) for s in MO_SCENARIO)
    four = curves[curves["trial"] == 4]
    assert four["step"].tolist() == [1, 2]
    assert four[["values_validation_error", "values_latency_ms"]].to_numpy().tolist() == [
        [0.5, 5.0], [0.45, 5.0]]
    assert four["value"].tolist() == [0.5, 0.45]  # the first objective's
    assert four["elapsed_s"].notna().all()
    stored = VectorRungStore(storage_of(mo_study), study_id_of(mo_study)).records()
    rungs = rungs_frame(snap)
    assert len(stored) == len(MO_SCENARIO)  # rung 1: every trial; rung 3 is the top
    assert [(r.bracket, r.rung, r.trial, (r.values_validation_error, r.values_latency_ms))
            for r in rungs.itertuples()] == stored
    assert rungs.set_index("trial").loc[2, "outcome"] == "pruned"
    assert rungs.set_index("trial").loc[0, "outcome"] == "promoted"


def test_plots_draw_the_fronts_the_hypervolume_and_each_objective(
    mo_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(mo_study)
    trials = trials_frame(snap)
    fig = plot_pareto(trials, snap.info, reference=snap.reference)
    assert _points(fig, "front") == 3 and _points(fig, "dominated") == 1
    assert _points(fig, "front-any-epoch") == 4 and _points(fig, "dominated-any-epoch") == 4
    faded = next(c for c in fig.axes[0].collections if c.get_gid() == "dominated")
    assert faded.get_alpha() < 0.5  # dominated trials faded
    stairs = {line.get_gid(): line for line in fig.axes[0].lines}
    assert np.allclose(stairs["staircase"].get_xdata(),
                       [0.2, 0.2, 0.35, 0.35, 0.4, 0.4, REFERENCE[0]])
    assert np.allclose(stairs["staircase"].get_ydata(), [REFERENCE[1], 20, 20, 10, 10, 8, 8])
    assert np.allclose(stairs["staircase-any-epoch"].get_ydata()[-3:], [8, 5, 5])
    assert stairs["reference"].get_xdata()[0] == pytest.approx(REFERENCE[0])
    hv = plot_hypervolume(hypervolume_frame(snap), snap.info)
    lines = {line.get_gid(): line for line in hv.axes[0].lines}
    assert lines["hypervolume"].get_ydata()[-1] == pytest.approx(HYPERVOLUME)
    assert lines["hypervolume-complete"].get_ydata()[-1] == pytest.approx(HYPERVOLUME_COMPLETE)
    curves = curves_frame(snap)
    for k, metric in enumerate(MO_METRICS):
        fig = plot_learning_curves(curves, snap.info, trials=trials, objective=k)
        assert fig.axes[0].get_ylabel().startswith(metric)
        drawn = {line.get_gid(): line for line in fig.axes[0].lines}
        assert drawn["trial-4"].get_ydata().tolist() == [[0.5, 0.45], [5.0, 5.0]][k]
    assert len(_gids(fig, "trial-")) == len(MO_SCENARIO) - 1  # RUNNING: no epoch times yet


def test_cli_writes_the_report_and_prints_the_hypervolume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "mo.journal")
    make_mo_study(spec)
    out = tmp_path / "rep"
    assert main(["--storage", spec, "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert (f"Study 'mo' on {spec}: 2 objectives: minimize validation_error, minimize "
            "latency_ms, asha rungs 1, 3 epochs") in stdout
    assert ("Pareto-optimal: 3 COMPLETE trial(s) by their final values (trials 0, 1, 5); 4 "
            "trial(s) by the values reported at any epoch (trials 0, 1, 4, 5)") in stdout
    assert (f"Hypervolume: {HYPERVOLUME:.4g} (values at any epoch), "
            f"{HYPERVOLUME_COMPLETE:.4g} (COMPLETE trials' final values); reference point "
            "validation_error=0.97, latency_ms=43.5") in stdout
    assert "ranked by the best Pareto front" in stdout
    written = {p.name for p in out.iterdir()}
    assert written == {"trials.csv", "curves.csv", "hypervolume.csv", "rungs.csv",
                       "pareto.png", "hypervolume.png", "learning_curves_validation_error.png",
                       "learning_curves_latency_ms.png", "rungs.png", "timeline.png"}
    assert pd.read_csv(out / "trials.csv").set_index("trial")["front"].dropna().to_dict() == \
        FRONT
    # no single best trial to retrain: one line, exit 2, nothing written
    assert main(["--storage", spec, "--best-config", str(tmp_path / "best.yaml")]) == 2
    err = capsys.readouterr().err
    assert err == ("error: best-config: study 'mo' has 2 objectives, so no single best trial: "
                   "choose one of its Pareto-optimal trials (0, 1, 5) with --trial N\n")
    assert not (tmp_path / "best.yaml").exists()


def test_compare_by_hypervolume_with_one_shared_reference_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "both.journal")
    make_mo_study(spec, "mo")
    make_mo_study(spec, "worse", scenario=WORSE)
    studies = [load(spec, "mo"), load(spec, "worse")]
    comparison = Comparison.of(studies)
    points = [p for snap in comparison.snapshots.values() for p in snap.points]
    assert comparison.reference == pytest.approx(SHARED)
    assert comparison.reference == reference_point(points, (True, True))
    assert comparison.snapshots["mo"].reference == pytest.approx(REFERENCE)  # its own differs
    hvs = comparison.hypervolumes
    finals = hvs.groupby("study")["hypervolume"].last()
    # mo's front against the shared reference point, by hand
    assert finals["mo"] == pytest.approx(1.43 * 45.5 + 1.28 * 10 + 1.23 * 2 + 1.18 * 3)
    assert finals["mo"] > finals["worse"]
    pairs = compare(comparison).set_index(["study", "target"])
    assert bool(pairs.loc[("mo", "worse"), "reached"])  # the better front gets there first
    assert pairs.loc[("mo", "worse"), "time_s"] < pairs.loc[("mo", "worse"), "target_time_s"]
    assert not pairs.loc[("worse", "mo"), "reached"]
    assert pairs.loc[("worse", "mo"), "target_hypervolume"] == pytest.approx(finals["mo"])
    with pytest.raises(ConfigError, match="hypervolumes"):
        _ = comparison.incumbents
    out = tmp_path / "cmp"
    assert main(["--storage", spec, "--compare", "mo", "worse", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert ("Reference point (shared by every study): validation_error=1.63, "
            "latency_ms=65.5") in stdout
    assert "Time and compute to reach another study's final hypervolume" in stdout
    assert {p.name for p in out.iterdir()} == {"compare.csv", "hypervolumes.csv", "compare.png"}
    assert len(pd.read_csv(out / "compare.csv")) == 2


@pytest.mark.parametrize(
    ("other", "expected"),
    [
        pytest.param("single", "error: compare: cannot compare studies with one objective and "
                     "studies with several", id="one-and-several"),
        pytest.param("params", "error: compare: the studies have different objectives",
                     id="different-metrics"),
        pytest.param("accuracy", "error: compare: the studies optimise in different directions",
                     id="different-directions"),
        # it said "different directions (mo: minimize/minimize, three: minimize/minimize/...)"
        pytest.param("three", "error: compare: the studies have different numbers of objectives "
                     "(mo: validation_error, latency_ms; three: value_0, value_1, value_2)",
                     id="three-objectives-and-two"),
    ],
)
def test_compare_of_studies_that_do_not_compare_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], other: str, expected: str
) -> None:
    spec = str(tmp_path / "s.journal")
    make_mo_study(spec, "mo", scenario=MO_SCENARIO[:2])
    if other == "single":
        make_launcher_study(spec, other, running=False, waiting=0)
    elif other == "three":
        three = optuna.create_study(study_name=other, storage=open_storage(spec),
                                    directions=["minimize"] * 3)
        three.optimize(lambda trial: (0.1, 0.2, 0.3), n_trials=2)
    elif other == "params":
        make_mo_study(spec, other, scenario=MO_SCENARIO[:2],
                      metrics=("validation_error", "params"))
    else:
        make_mo_study(spec, other, scenario=MO_SCENARIO[:2], metrics=MO_METRICS,
                      directions=("maximize", "minimize"))
    out = tmp_path / "cmp"
    assert main(["--storage", spec, "--compare", "mo", other, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1, err
    assert not out.exists()


def test_plain_optuna_study_with_several_objectives(tmp_path: Path) -> None:
    """No launcher, no callback: final values only, Optuna's datetimes, value_0 and value_1."""
    study = optuna.create_study(directions=["minimize", "maximize"],
                                storage=f"sqlite:///{tmp_path / 'plain.db'}")
    for point in [(0.1, 0.7), (0.2, 0.9), (0.3, 0.8)]:
        study.tell(study.ask(), list(point))
    study.tell(study.ask(), state=TrialState.PRUNED)
    snap = StudySnapshot.read(study)
    assert snap.info.metrics == ("value_0", "value_1")
    summary = summarize(snap)
    assert summary["pareto_complete_trials"] == [0, 1] == summary["pareto_trials"]
    assert summary["reference"] == pytest.approx((0.32, 0.68))
    # (0.1, 0.7) and (0.2, 0.9): (0.22 x 0.02) + (0.12 x 0.2)
    assert summary["hypervolume_complete"] == pytest.approx(0.22 * 0.02 + 0.12 * 0.2)
    assert "learning curves and rungs: no `objective_values` reported" in limitations(snap)
    paths = write_report(snap, tmp_path / "rep")
    assert {"pareto.png", "hypervolume.png", "hypervolume.csv"} <= set(paths)
    assert not any(name.startswith("learning_curves") for name in paths)


def test_the_pareto_optimal_trials_are_optunas_best_trials_infinite_values_included(
    tmp_path: Path,
) -> None:
    """Optuna keeps infinite values in a COMPLETE trial. (0, inf) with (minimize, maximize)
    dominates every other trial: the report called the three it dominates Pareto-optimal and
    left it out, where Optuna's study.best_trials names it alone."""
    study = optuna.create_study(directions=["minimize", "maximize"],
                                storage=f"sqlite:///{tmp_path / 'inf.db'}")
    for point in [(1.0, 2.0), (0.0, float("inf")), (2.0, 3.0), (0.5, 1.0)]:
        study.tell(study.ask(), list(point))
    snap = StudySnapshot.read(study)
    summary = summarize(snap)
    assert summary["pareto_complete_trials"] == [1] == [t.number for t in study.best_trials]
    assert summary["pareto_trials"] == [1]
    trials = trials_frame(snap).set_index("trial")
    assert trials["front"].to_dict() == {0: 1, 1: 0, 2: 1, 3: 1}
    # its point is not drawn (it has no place on the axes), and the legend says so
    fig = plot_pareto(trials_frame(snap), snap.info, reference=snap.reference)
    assert _points(fig, "front") == 0 and _points(fig, "dominated") == 3
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "final values (COMPLETE): Pareto front (0; 1 infinite, not drawn)" in labels
    # random studies, both directions, duplicates and infinities: always Optuna's best_trials
    rng = np.random.default_rng(0)
    for k in range(20):
        study = optuna.create_study(directions=["minimize", "maximize", "minimize"][: 2 + k % 2])
        for _ in range(12):
            values = rng.choice([0.0, 1.0, 2.0, np.inf, -np.inf], size=len(study.directions))
            study.tell(study.ask(), values.tolist())
        assert summarize(study)["pareto_complete_trials"] == sorted(
            t.number for t in study.best_trials), [t.values for t in study.trials]
