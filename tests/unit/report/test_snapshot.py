"""The report's :mod:`~lightning_hpo.report.snapshot`: a study read once; paused trials and
training segments, segment entries left open, and attributes written by another tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
from helpers import report_support
from helpers.report_support import (
    DISTRIBUTIONS,
    OPEN_SPANS,
    PAUSE_SCENARIO,
    PAUSE_TRAINED_S,
    SCENARIO,
    T0,
    _open,
    paused_attr,
    seg,
)
from optuna.trial import TrialState

from lightning_hpo.report import (
    Pause,
    StudySnapshot,
    curves_frame,
    incumbent_frame,
    limitations,
    plot_timeline,
    rungs_frame,
    segments_frame,
    study_info,
    summarize,
    trials_frame,
    write_report,
)
from lightning_hpo.schema import ATTR
from lightning_hpo.storage import open_storage

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = report_support.journal
study = report_support.study
paused_study = report_support.paused_study
open_study = report_support.open_study


def test_tables_of_a_snapshot_are_the_study_read_once(study: optuna.Study) -> None:
    snap = StudySnapshot.read(study)
    assert StudySnapshot.of(snap) is snap
    assert [t.number for t in snap.trials] == list(range(len(SCENARIO) + 1))  # WAITING left out
    for frame in (trials_frame, curves_frame, incumbent_frame, rungs_frame):
        pd.testing.assert_frame_equal(frame(snap), frame(study))
    assert summarize(snap) == summarize(study) and limitations(snap) == limitations(study)
    # a snapshot reads nothing more: a trial added since shows in the study's tables only
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE, value=0.001, params={"lr": 0.1, "activation": "relu"},
        distributions=DISTRIBUTIONS, intermediate_values={1: 0.001}))
    assert len(trials_frame(study)) == len(trials_frame(snap)) + 1
    assert summarize(study)["best_value"] == pytest.approx(0.001)
    assert summarize(snap)["best_value"] == pytest.approx(0.04)


def test_snapshot_reads_pauses_and_segments(paused_study: optuna.Study) -> None:
    snap = StudySnapshot.read(paused_study)
    trials = {t.number: t for t in snap.trials}
    paused = trials[1]
    assert paused.state == "RUNNING" and paused.status == "PAUSED"
    assert paused.paused == Pause(epoch=4, checkpoint="/ckpt/e4.ckpt", since=T0 + 5.5,
                                  target=None, why="rung 4")
    assert paused.paused.at_rung and paused.end is None
    assert [(s.slot, s.from_epoch, s.to_epoch, s.how) for s in paused.segments] == [
        (1, 0, 2, "paused"), (0, 2, 4, "paused")]
    assert [(s.start, s.end) for s in paused.segments] == [
        (pytest.approx(T0 + 0.05), pytest.approx(T0 + 2.55)), (T0 + 3.0, T0 + 5.5)]
    assert all(s.listed and s.host == "box" and s.devices == 1 for s in paused.segments)
    assert paused.busy_until(snap.horizon) == pytest.approx(T0 + 5.5)  # not up to the horizon
    assert paused.times == tuple(pytest.approx(T0 + x) for x in PAUSE_SCENARIO[1][2])
    # a finished trial is never paused, even with its last pause left behind
    assert trials[2].paused is None and trials[2].status == "PRUNED"
    assert trials[2].stopped_by == "pruner"  # not promoted by the schedule, not the budget
    assert trials[4].stopped_by == "budget" and trials[4].segments == ()
    (whole,) = trials[4].spans  # one segment: its whole run, on its slot
    assert not whole.listed and (whole.slot, whole.start, whole.end) == (
        1, T0 + 12.5, T0 + 15.0)
    assert trials[3].epochs == 8 and trials[3].epochs_trained == 9  # epoch 3 trained twice
    assert trials[5].status == "RUNNING" and trials[5].in_flight
    assert trials[5].segments[-1].end is None and trials[5].epochs_trained == 3
    assert {n: t.device_seconds for n, t in trials.items()} == pytest.approx(PAUSE_TRAINED_S)
    assert [t.number for t in snap.paused] == [1]
    assert snap.counts["RUNNING"] == 2  # Optuna's counts: a paused trial is RUNNING
    assert snap.statuses == {"COMPLETE": 2, "PRUNED": 2, "FAIL": 0, "RUNNING": 1, "PAUSED": 1,
                             "WAITING": 1}
    assert snap.horizon == pytest.approx(T0 + 20.5)


JUNK = [
    pytest.param("yes", "segments", id="strings"),
    pytest.param(1, 3, id="numbers"),
    pytest.param([4], {"start": 1}, id="list-and-dict"),
    pytest.param(True, [1, None, "x", [2]], id="bool-and-list-of-junk"),
    pytest.param({"epoch": "four", "since": "x", "target": True, "why": 5},
                 [{"start": "a"}, {"end": 3}, {"start": T0 + 5, "end": T0 + 4}],
                 id="fields-of-the-wrong-kind"),
]


@pytest.mark.parametrize(("paused", "segments"), JUNK)
def test_attributes_written_by_another_tool_are_read_as_far_as_they_make_sense(
    tmp_path: Path, paused: Any, segments: Any
) -> None:
    study = optuna.create_study(study_name="other", storage=open_storage(
        str(tmp_path / "o.journal")))
    for state in (TrialState.RUNNING, TrialState.COMPLETE):
        study.add_trial(optuna.trial.create_trial(
            state=state, value=0.5 if state == TrialState.COMPLETE else None,
            params={"lr": 0.1}, distributions={"lr": DISTRIBUTIONS["lr"]},
            intermediate_values={1: 0.6, 2: 0.5},
            user_attrs={ATTR.PAUSED: paused, ATTR.SEGMENTS: segments, ATTR.SLOT: 0,
                        ATTR.START: T0, ATTR.END: T0 + 3 if state.is_finished() else None}))
    snap = StudySnapshot.read(study)
    running, complete = snap.trials
    assert running.segments == complete.segments == ()  # nothing placeable
    assert complete.paused is None and complete.status == "COMPLETE"
    if isinstance(paused, dict):  # a mapping says paused; its fields of the wrong kind don't
        assert running.paused == Pause() and running.status == "PAUSED"
    else:
        assert running.paused is None and running.status == "RUNNING"
    assert summarize(snap)["paused"] == int(isinstance(paused, dict))
    paths = write_report(snap, tmp_path / "rep")
    assert "segments.csv" not in paths and "timeline.png" in paths
    assert len(segments_frame(snap)) == 2  # each trial's whole run


def test_a_segment_with_fields_of_the_wrong_kind_keeps_what_it_can(tmp_path: Path) -> None:
    study = optuna.create_study(study_name="other", storage=open_storage(
        str(tmp_path / "o.journal")))
    entries = [{"start": T0, "end": T0 + 2, "slot": "zero", "from_epoch": -1, "to_epoch": True,
                "how": 5, "device": ["cpu"]}, {"start": T0 + 3, "end": T0 + 5, "slot": 1}]
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE, value=0.5, params={}, distributions={},
        intermediate_values={1: 0.6, 2: 0.5},
        user_attrs={ATTR.SEGMENTS: entries, ATTR.DEVICE: "cuda:0,1", ATTR.END: T0 + 5}))
    (trial,) = StudySnapshot.read(study).trials
    first, second = trial.segments
    assert (first.slot, first.from_epoch, first.to_epoch, first.how, first.device) == (
        None, None, None, None, None)
    assert trial.start == T0 and trial.end == T0 + 5 and trial.timing == "launcher"
    assert trial.epochs_trained == 2  # the segments cannot say: the epochs reported
    assert trial.device_seconds == pytest.approx((2 + 2) * 2)  # the trial's 2 devices each
    fig = plot_timeline(trials_frame(study), study_info(study), None, segments_frame(study))
    assert [p.get_gid() for p in fig.axes[0].patches] == ["trial-0:2"]  # the one with a slot


def test_open_segment_entries_are_in_flight_or_settled_never_counted_twice(
    open_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(open_study)
    trials = {t.number: t for t in snap.trials}
    spans = {n: [(s.slot, s.start - T0, None if s.end is None else s.end - T0, s.how)
                 for s in t.spans] for n, t in trials.items()}
    assert spans == {n: [(slot, pytest.approx(a), None if b is None else pytest.approx(b), how)
                         for slot, a, b, how in v] for n, v in OPEN_SPANS.items()}
    assert {n: t.status for n, t in trials.items()} == {
        0: "COMPLETE", 1: "PAUSED", 2: "RUNNING", 3: "COMPLETE", 4: "PAUSED", 5: "COMPLETE",
        6: "COMPLETE"}
    assert [n for n, t in trials.items() if t.in_flight] == [2]
    trained = {n: sum(b - a for _, a, b, _ in v if b is not None) for n, v in OPEN_SPANS.items()}
    assert {n: t.device_seconds for n, t in trials.items()} == pytest.approx(trained)
    assert trials[1].busy_until(snap.horizon) == pytest.approx(T0 + 11.5)
    assert snap.horizon == pytest.approx(T0 + 14)
    summary = summarize(snap)
    assert summary["unfinished"] == 1 and summary["paused"] == 2
    assert summary["device_seconds"] == pytest.approx(sum(trained.values()))
    assert ("learning curves: 1 RUNNING and 2 PAUSED trial(s) not drawn yet (the launcher "
            "writes epoch times when a trial ends)") in limitations(snap)  # their last epochs
    # every epoch trained counted once: a segment left open counts only the epochs that
    # ended within it (trial 5's epoch 2, not its third segment's 3 and 4)
    assert summary["epochs"] == 8 + 3 + 2 + 4 + 5 + 4 + 3
    assert incumbent_frame(snap)["epochs_spent"].iloc[-1] == summary["epochs"]
    segments = segments_frame(snap)
    assert len(segments) == sum(len(v) for v in OPEN_SPANS.values())
    flying = segments[segments["end_s"].isna()]
    assert flying[["trial", "status", "how"]].values.tolist() == [[2, "RUNNING", "running"]]
    assert flying["duration_s"].isna().all()
    assert set(segments.loc[segments["trial"].isin([1, 4]), "status"]) == {"PAUSED"}


SETTLE = [  # (Optuna state, paused since (s after T0) or None, end, segments, settled spans)
    pytest.param(TrialState.RUNNING, 6.0, None,
                 [seg(0, 0, 2, 0, 2, "paused"), _open(0, 3.0, 2), seg(0, 3.1, 5, 2, 3, "crashed")],
                 [(0, 2, "paused"), (3.1, 5, "crashed")], id="crash-record-starts-after-it"),
    pytest.param(TrialState.RUNNING, 6.0, None, [seg(0, 0, 2, 0, 2, "paused"), _open(0, 3.0, 2)],
                 [(0, 2, "paused"), (3.0, 6.0, None)], id="left-open-closed-at-the-pause"),
    pytest.param(TrialState.RUNNING, None, None, [_open(0, 0, 0), _open(1, 4, 0)],
                 [(4, None, "running")], id="handed-over-the-earlier-one-dropped"),
    pytest.param(TrialState.COMPLETE, None, 5.0, [_open(0, 1, 0)], [(1, 5.0, None)],
                 id="finished-closed-at-its-end"),
    pytest.param(TrialState.RUNNING, None, None, [seg(0, 0, 2, 0, 2, "paused"), _open(1, 1.9, 2)],
                 [(0, 2, "paused"), (2, None, "running")], id="in-flight-trimmed-to-no-overlap"),
    pytest.param(TrialState.RUNNING, 9.0, None,
                 [seg(0, 0, 2, 0, 2, "paused"), seg(0, 3, 5, 2, 4, "paused"),
                  seg(0, 0, 8, 4, 5, "crashed")],
                 [(0, 2, "paused"), (3, 5, "paused"), (5, 8, "crashed")],
                 id="crash-record-from-the-first-start-trimmed"),
]


@pytest.mark.parametrize(("state", "since", "end", "segments", "spans"), SETTLE)
def test_segment_entries_settle_into_one_stretch_at_a_time(
    state: TrialState, since: float | None, end: float | None, segments: list[dict[str, Any]],
    spans: list[tuple[float, float | None, str | None]],
) -> None:
    attrs: dict[str, Any] = {ATTR.SEGMENTS: segments, ATTR.SLOT: 0, ATTR.DEVICE: "cpu:0"}
    if since is not None:
        attrs[ATTR.PAUSED] = paused_attr(2, since, "rung 2")
    if end is not None:
        attrs[ATTR.END] = T0 + end
    study = optuna.create_study()
    study.add_trial(optuna.trial.create_trial(
        state=state, value=0.5 if state == TrialState.COMPLETE else None,
        intermediate_values={1: 0.6}, user_attrs=attrs))
    (trial,) = StudySnapshot.read(study).trials
    assert [(s.start - T0, None if s.end is None else s.end - T0, s.how)
            for s in trial.spans] == [(pytest.approx(a), None if b is None else pytest.approx(b),
                                       how) for a, b, how in spans]
    assert trial.in_flight == (spans[-1][1] is None)
    assert trial.device_seconds == pytest.approx(
        sum(b - a for a, b, _ in spans if b is not None) or None)
    plot_timeline(trials_frame(study), study_info(study), None, segments_frame(study))


@pytest.mark.parametrize(("attrs", "who"), [
    ({ATTR.STOP_REASON: "wall-clock budget reached"}, "budget"),
    ({ATTR.STOP_REASON: "wall-clock budget reached", ATTR.PRUNED_AT_EPOCH: 3}, "pruner"),
    ({ATTR.STOP_REASON: "wall-clock budget reached", ATTR.PRUNED_AT_STEP: 600}, "pruner"),
    ({ATTR.PRUNED_AT_STEP: 600}, "pruner"),
], ids=["budget", "pruner-at-epoch", "pruner-at-step", "pruner-no-reason"])
def test_a_pruned_trial_is_the_pruners_when_it_recorded_where_it_stopped(
    attrs: dict[str, Any], who: str,
) -> None:
    """``pruned_at_step`` (``PruningCallback(..., resource="step")``) says the pruner stopped
    the trial as ``pruned_at_epoch`` does, though the study's budget left its reason too."""
    study = optuna.create_study()
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.PRUNED, intermediate_values={200: 0.5, 600: 0.4}, user_attrs=attrs))
    (trial,) = StudySnapshot.read(study).trials
    assert trial.stopped_by == who
