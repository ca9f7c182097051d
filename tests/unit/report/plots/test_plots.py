"""The report's :mod:`~lightning_hpo.report.plots`: the drawn artists counted from the figures
(learning curves, rungs, timeline, incumbent), paused trials and segments included."""

from __future__ import annotations

import matplotlib.colors
import optuna
import pandas as pd
import pytest
from helpers import report_support
from helpers.report_support import OPEN_SPANS, RUNGS, SCENARIO, _gids, _points
from optuna.trial import TrialState

from lightning_hpo.report import (
    STATE_COLORS,
    StudySnapshot,
    curves_frame,
    incumbent_frame,
    plot_incumbent,
    plot_learning_curves,
    plot_rungs,
    plot_timeline,
    rungs_frame,
    segments_frame,
    study_info,
    trials_frame,
)

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = report_support.journal
study = report_support.study
paused_study = report_support.paused_study
open_study = report_support.open_study


def test_learning_curves_draw_every_trial_with_pruned_distinct(study: optuna.Study) -> None:
    fig = plot_learning_curves(curves_frame(study), study_info(study))
    lines = {line.get_gid(): line for line in fig.axes[0].lines
             if (line.get_gid() or "").startswith("trial-")}
    # the RUNNING trial has no epoch times yet: it cannot be placed on the wall-clock axis
    assert len(lines) == len(SCENARIO)
    for number, spec in enumerate(SCENARIO):
        line = lines[f"trial-{number}"]
        assert len(line.get_xdata()) == len(spec.curve)
        if spec.state == TrialState.PRUNED:
            assert line.get_linestyle() == "--"
        else:
            assert line.get_linestyle() in ("-", ":")
    assert lines["trial-3"].get_color() == "black"  # the best trial stands out
    assert fig.axes[0].get_xlabel().endswith("(s)")
    by_epochs = plot_learning_curves(curves_frame(study), study_info(study), x="epochs")
    assert len(_gids(by_epochs, "trial-")) == len(SCENARIO) + 1


def test_rung_plot_marks_rungs_promotions_and_stops(study: optuna.Study) -> None:
    fig = plot_rungs(curves_frame(study), study_info(study), rungs_frame(study))
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 1  # ASHA: one bracket
    assert sorted(_gids(fig, "rung-")) == sorted(f"rung-{r}" for r in RUNGS)
    curves = [s.curve for s in SCENARIO] + [(0.55, 0.4)]
    promoted = sum(1 for c in curves for r in RUNGS[:-1] if len(c) > r)
    pruned = sum(1 for s in SCENARIO if s.state == TrialState.PRUNED and len(s.curve) in RUNGS)
    assert _points(fig, "promoted") == promoted == 10
    assert _points(fig, "pruned") == pruned == 4
    assert _points(fig, "completed") == 3
    assert _points(fig, "failed") == 1 and _points(fig, "running") == 1
    assert _points(fig, "stopped-by-budget") == 0
    assert len(_gids(fig, "trial-")) == len(SCENARIO) + 1
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["9 in, 7 on", "5 in, 3 on", "3 in"]  # records at 1 and 3; 3 reached 9


def test_timeline_has_a_bar_per_trial_on_its_slot(study: optuna.Study) -> None:
    trials = trials_frame(study)
    fig = plot_timeline(trials, study_info(study), curves_frame(study))
    ax = fig.axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("trial-")}
    assert len(bars) == len(trials)
    latest = trials["end_s"].max()  # a RUNNING trial is drawn up to the latest time known
    for _, row in trials.iterrows():
        bar = bars[f"trial-{row['trial']}"]
        assert bar.get_x() == pytest.approx(row["start_s"])
        if row["state"] == "RUNNING":
            assert bar.get_width() == pytest.approx(latest - row["start_s"])
            assert bar.get_hatch() == "//"
        else:
            assert bar.get_width() == pytest.approx(row["duration_s"])
        assert round(bar.get_y() + bar.get_height() / 2) == row["slot"]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [label.split("\n")[0] for label in labels] == ["slot 0", "slot 1"]
    assert all("idle" in label for label in labels)


def test_incumbent_plot_draws_both_incumbents(study: optuna.Study) -> None:
    inc = incumbent_frame(study)
    fig = plot_incumbent(inc, study_info(study))
    assert _points(fig, "completed") == 3
    assert _points(fig, "reported") == int((inc["kind"] == "epoch").sum())
    assert _points(fig, "improvements") == int(inc["improved"].sum())
    lines = {line.get_gid(): line for line in fig.axes[0].lines}
    assert min(lines["incumbent"].get_ydata()) == pytest.approx(inc["best"].min())
    assert min(lines["incumbent-complete"].get_ydata()) == pytest.approx(study.best_value)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("any trial, any epoch" in label for label in labels)
    assert any("COMPLETE trial so far" in label for label in labels)


def test_timeline_draws_each_segment_on_its_slot_with_the_pauses(
    paused_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(paused_study)
    segments = segments_frame(snap)
    fig = plot_timeline(trials_frame(snap), snap.info, curves_frame(snap), segments)
    ax = fig.axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("trial-")}
    assert sorted(bars) == sorted(["trial-0:1", "trial-0:2", "trial-0:3", "trial-1:1",
                                   "trial-1:2", "trial-2:1", "trial-3:1", "trial-3:2",
                                   "trial-4", "trial-5:1", "trial-5:2"])
    for row in segments.itertuples(index=False):
        bar = bars[f"trial-{row.trial}:{row.segment}" if row.listed else f"trial-{row.trial}"]
        assert bar.get_x() == pytest.approx(row.start_s)
        assert round(bar.get_y() + bar.get_height() / 2) == row.slot  # on its own slot
        if pd.isna(row.end_s):  # in flight: up to the latest time known, hatched
            assert bar.get_width() == pytest.approx(20.5 - row.start_s)
            assert bar.get_hatch() == "//"
        else:
            assert bar.get_width() == pytest.approx(row.duration_s) and not bar.get_hatch()
    paused_color = matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"])
    assert bars["trial-1:1"].get_facecolor() == bars["trial-1:2"].get_facecolor() == paused_color
    assert bars["trial-0:1"].get_facecolor() == matplotlib.colors.to_rgba(
        STATE_COLORS["COMPLETE"])
    assert bars["trial-3:1"].get_edgecolor() == matplotlib.colors.to_rgba(STATE_COLORS["FAIL"])
    # one dotted line per pause, from a segment's end to the next one's start
    pauses = [line for line in ax.lines if (line.get_gid() or "").startswith("pause-")]
    assert sorted(line.get_gid() for line in pauses) == [
        "pause-0", "pause-0", "pause-1", "pause-3", "pause-5"]
    joins = sorted((tuple(line.get_xdata()), tuple(line.get_ydata()))
                   for line in pauses if line.get_gid() == "pause-0")
    assert joins == [((2.5, 6.0), (0, 1)), ((8.5, 9.0), (1, 0))]
    # the pauses are idle time: slot 0 trained 16 s, slot 1 17.4 s of the 20.5 s
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["slot 0\nidle 22%", "slot 1\nidle 15%"]
    assert "1 paused" in ax.get_title()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "PAUSED (1)" in legend and "pause between a trial's segments" in legend
    # without the segments: one bar per trial, a paused one up to its pause
    whole = plot_timeline(trials_frame(snap), snap.info, curves_frame(snap))
    bars = {p.get_gid(): p for p in whole.axes[0].patches}
    assert len(bars) == len(snap.trials)
    assert bars["trial-1"].get_width() == pytest.approx(5.45) and not bars["trial-1"].get_hatch()
    assert bars["trial-1"].get_facecolor() == paused_color
    assert bars["trial-5"].get_width() == pytest.approx(20.5 - 15.5)  # RUNNING: to the horizon
    assert bars["trial-5"].get_hatch() == "//"


def test_rung_plot_shows_paused_promoted_and_stopped_trials(paused_study: optuna.Study) -> None:
    snap = StudySnapshot.read(paused_study)
    assert rungs_frame(snap).empty  # a pausing schedule keeps no rung records
    fig = plot_rungs(curves_frame(snap), snap.info, rungs_frame(snap), trials_frame(snap))
    assert "sync_sh, rungs 2, 4, 8 epochs" in fig.get_suptitle()

    def points(gid: str) -> list[tuple[float, float]]:
        return sorted((float(x), float(y)) for c in fig.axes[0].collections
                      if c.get_gid() == gid for x, y in c.get_offsets())

    # promoted: reported an epoch past the rung (the value where it reached the rung)
    assert points("promoted") == sorted(  # trials 0, 1, 3, 5 at rung 2; 0 and 3 at rung 4
        [(2, 0.5), (2, 0.55), (2, 0.5), (2, 0.6), (4, 0.35), (4, 0.36)])
    assert points("paused") == [(4.0, 0.2)]  # trial 1 waits at rung 4
    assert points("pruned") == [(2.0, 0.8)]  # trial 2 was not promoted from rung 2
    assert points("stopped-by-budget") == [(2.0, 0.75)]
    assert points("completed") == [(8.0, 0.23), (8.0, 0.24)]
    assert points("running") == [(3.0, 0.5)]  # trial 5, training on
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["6 in, 4 on", "3 in, 2 on, 1 paused", "2 in"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(label.startswith("PAUSED here") and label.endswith("(1)") for label in legend)
    # without the trials frame the curves' status says who is paused (at its last epoch)
    plain = plot_rungs(curves_frame(snap), snap.info, rungs_frame(snap))
    assert [tuple(p) for c in plain.axes[0].collections if c.get_gid() == "paused"
            for p in c.get_offsets()] == [(4.0, 0.2)]
    assert _points(plain, "running") == 1


def test_learning_curves_incumbent_and_tables_show_paused_trials_as_paused(
    paused_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(paused_study)
    curves, inc = curves_frame(snap), incumbent_frame(snap)
    status = curves.groupby("trial")["status"].first().to_dict()
    assert status == {0: "COMPLETE", 1: "PAUSED", 2: "PRUNED", 3: "COMPLETE", 4: "PRUNED",
                      5: "RUNNING"}
    assert curves.groupby("trial")["state"].first()[1] == "RUNNING"  # Optuna's, as it was
    for frame in (trials_frame(snap), segments_frame(snap), inc):
        assert set(frame.loc[frame["trial"] == 1, "status"]) == {"PAUSED"}
        assert set(frame.loc[frame["trial"] == 5, "status"]) == {"RUNNING"}
    # trial 1 (paused) reported the best value: the incumbent's label says it waits
    fig = plot_incumbent(inc, snap.info)
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert any(n.startswith("0.2: trial 1, epoch 4 (PAUSED, to be resumed)") for n in notes)
    curves_fig = plot_learning_curves(curves, snap.info, best_trial=0,
                                      trials=trials_frame(snap))
    ax = curves_fig.axes[0]
    lines = {line.get_gid(): line for line in ax.lines}
    paused_color = matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"])
    assert matplotlib.colors.to_rgba(lines["trial-1"].get_color()) == paused_color
    assert matplotlib.colors.to_rgba(lines["trial-5"].get_color()) == matplotlib.colors.to_rgba(
        STATE_COLORS["RUNNING"])
    assert list(zip(lines["paused-at"].get_xdata(), lines["paused-at"].get_ydata(),
                    strict=True)) == [(pytest.approx(5.25), 0.2)]  # epoch 4, at its end time
    assert [t.get_text() for t in ax.texts if t.get_gid() == "paused-1"] == ["PAUSED @ 4"]
    legend = [t.get_text() for t in curves_fig.legends[0].get_texts()]
    assert "PAUSED (1)" in legend and "RUNNING (1)" in legend
    assert "PAUSED @ the epoch it resumes from" in legend


def test_timeline_draws_the_segment_in_flight_up_to_the_latest_time(
    open_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(open_study)
    fig = plot_timeline(trials_frame(snap), snap.info, curves_frame(snap), segments_frame(snap))
    ax = fig.axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("trial-")}
    expected = {f"trial-{n}:{k}" if n != 3 else "trial-3": (slot, a, (14 if b is None else b) - a)
                for n, v in OPEN_SPANS.items() for k, (slot, a, b, _) in enumerate(v, 1)}
    assert sorted(bars) == sorted(expected)
    for gid, (slot, start, width) in expected.items():
        bar = bars[gid]
        assert (bar.get_x(), bar.get_width()) == (pytest.approx(start), pytest.approx(width))
        assert round(bar.get_y() + bar.get_height() / 2) == slot
        assert bool(bar.get_hatch()) == (gid == "trial-2:2")  # only the one in flight
    colors = {gid: bar.get_facecolor() for gid, bar in bars.items()}
    for gid in ("trial-1:1", "trial-1:2", "trial-4:3"):
        assert colors[gid] == matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"])
    assert colors["trial-2:2"] == matplotlib.colors.to_rgba(STATE_COLORS["RUNNING"])
    assert "2 paused" in ax.get_title()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"COMPLETE (4)", "PAUSED (2)", "RUNNING (1)"} <= set(legend)
    assert any(label.startswith("segment in flight (1)") for label in legend)


def test_learning_curves_and_rungs_mark_paused_trials_at_their_epoch(
    open_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(open_study)
    curves, trials = curves_frame(snap), trials_frame(snap)
    assert curves.groupby("trial")["status"].first().to_dict() == {
        0: "COMPLETE", 1: "PAUSED", 2: "RUNNING", 3: "COMPLETE", 4: "PAUSED", 5: "COMPLETE",
        6: "COMPLETE"}
    assert trials.set_index("trial")["status"].to_dict()[4] == "PAUSED"
    for x in ("epochs", "wallclock"):
        fig = plot_learning_curves(curves, snap.info, x=x, trials=trials)
        ax = fig.axes[0]
        lines = {line.get_gid(): line for line in ax.lines}
        for number in (1, 4):
            assert matplotlib.colors.to_rgba(lines[f"trial-{number}"].get_color()) == (
                matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"]))
        assert lines["trial-2"].get_color() == STATE_COLORS["RUNNING"]
        marks = sorted(zip(lines["paused-at"].get_xdata(), lines["paused-at"].get_ydata(),
                           strict=True))  # trial 1 at epoch 2 (ended at 2.5 s), 4 at 4 (5 s)
        assert marks == ([(2, 0.8), (4, 0.8)] if x == "epochs" else [(2.5, 0.8), (5.0, 0.8)])
        labels = {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}
        assert labels == {"paused-1": "PAUSED @ 2", "paused-4": "PAUSED @ 4"}
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "PAUSED (2)" in legend and "RUNNING (1)" in legend
    rungs = plot_rungs(curves, snap.info, None, trials)
    paused = sorted(tuple(p) for c in rungs.axes[0].collections if c.get_gid() == "paused"
                    for p in c.get_offsets())
    assert paused == [(2.0, 0.8), (4.0, 0.8)]
    assert _points(rungs, "running") == 1  # trial 2
