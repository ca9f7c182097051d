"""The benchmarks' own logic (epoch streams, throughput, the figures table), and the cheap
benchmarks run for real in their smallest mode so that ``make bench`` cannot rot unnoticed.
No timing threshold is asserted anywhere: the figures are the scripts' output, not tests."""

from __future__ import annotations

import doctest
import json
import math
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
import torch
from optuna.trial import TrialState

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_gpu  # noqa: E402
import bench_promotion  # noqa: E402
import bench_schedules  # noqa: E402
import bench_search  # noqa: E402
import bench_workers  # noqa: E402
import run_all  # noqa: E402
from _record import Figure, read_figures, write_figures  # noqa: E402
from bench_search import EpochEvent  # noqa: E402


def _trial(number: int, values: dict[int, float], times: list[float]) -> optuna.trial.FrozenTrial:
    trial = optuna.trial.create_trial(
        state=TrialState.COMPLETE, value=list(values.values())[-1],
        intermediate_values=values, user_attrs={"epoch_end_times": times},
    )
    trial.number = number
    return trial


def _events(*values: float) -> list[EpochEvent]:
    """One event per value, one second apart, all of trial 0."""
    return [EpochEvent(float(i + 1), 0, i + 1, v) for i, v in enumerate(values)]


# -- bench_search: trials -> one time-ordered stream of epochs ---------------------------------


def test_epoch_events_merge_trials_by_end_time() -> None:
    a = _trial(0, {1: 0.9, 2: 0.5, 3: 0.4}, [10.0, 12.0, 14.0])
    b = _trial(1, {1: 0.8, 2: 0.3}, [11.0, 12.0])
    events = bench_search.epoch_events([a, b])
    assert [(e.time, e.trial, e.epoch) for e in events] == [
        (10.0, 0, 1), (11.0, 1, 1), (12.0, 0, 2), (12.0, 1, 2), (14.0, 0, 3)
    ]


def test_epoch_events_cut_at_the_budget_and_skip_epochs_without_time() -> None:
    killed = _trial(0, {1: 0.9, 2: 0.5, 3: 0.4}, [10.0, 12.0])  # epoch 3 never got its time
    events = bench_search.epoch_events([killed], until=11.0)
    assert [(e.epoch, e.value) for e in events] == [(1, 0.9)]
    assert [e.epoch for e in bench_search.epoch_events([killed])] == [1, 2]


def test_best_and_epochs_to_reach() -> None:
    events = _events(0.9, math.nan, 0.4, 0.6, 0.2)
    assert bench_search.best_until(events, 3.0) == 0.4
    assert bench_search.best_until(events, 0.5) is None
    assert bench_search.final_best(events) == 0.2
    assert bench_search.epochs_to_reach(events, 0.4) == (3, 3.0)
    assert bench_search.epochs_to_reach(events, 0.1) is None
    assert bench_search.median_ratio([0.2, math.inf, 0.3]) == 0.3
    assert math.isnan(bench_search.median_ratio([]))


def _result(method: str, values: list[float]) -> bench_search.RunResult:
    return bench_search.RunResult(method, 0, 0.0, 100.0, _events(*values), {"COMPLETE": 1}, [])


@pytest.mark.parametrize(("asha_epochs", "met"), [(5, True), (10, False)])
def test_search_report_ratio_and_target(
    asha_epochs: int, met: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    # random search first reaches its final best 0.1 at its 20th epoch
    random_values = [0.9] * 19 + [0.1]
    asha_values = [0.5] * (asha_epochs - 1) + [0.05]
    results = {("random", 0): _result("random", random_values),
               ("asha", 0): _result("asha", asha_values)}
    ok, figures = bench_search.report(results, ["random", "asha"], [0])
    assert ok is met
    (figure,) = figures
    assert figure.ratio == f"{asha_epochs / 20:.2f}" and figure.met is met
    assert ("PASS" if met else "MISS") in capsys.readouterr().out


def test_search_report_counts_never_reaching_as_a_miss() -> None:
    results = {("random", 0): _result("random", [0.9, 0.1]),
               ("asha", 0): _result("asha", [0.5, 0.4])}
    ok, (figure,) = bench_search.report(results, ["random", "asha"], [0])
    assert not ok and figure.ratio == "not reached"


# -- bench_search: the sampler x pruner grid, an epoch budget, the per-arm summary -------------


def test_bench_search_docstring_examples() -> None:
    result = doctest.testmod(bench_search, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8 and result.failed == 0


def test_arm_names_round_trip_and_keep_the_random_samplers_names() -> None:
    arms = {bench_search.arm_name(s, m): (s, m)
            for s in bench_search.SAMPLERS for m in bench_search.METHODS}
    assert len(arms) == 9
    assert {"random", "asha", "hyperband", "tpe", "tpe-asha", "gp-hyperband"} <= set(arms)
    assert all(bench_search.arm_parts(arm) == parts for arm, parts in arms.items())
    for bad in ("tpe-random", "cmaes", "gp-median"):
        with pytest.raises(ValueError, match="must be one of|not SAMPLER-METHOD"):
            bench_search.arm_parts(bad)


@pytest.mark.parametrize("arm", ["random", "asha", "tpe", "tpe-asha", "gp", "gp-hyperband"])
def test_search_build_config_is_a_valid_launcher_config(arm: str, tmp_path: Path) -> None:
    from lightning_hpo.launch.config import parse_config

    raw = bench_search.build_config(arm, 3, 60.0, str(tmp_path / "s.journal"), str(tmp_path), 2)
    cfg = parse_config(raw)
    sampler, method = bench_search.arm_parts(arm)
    assert (cfg.sampler, cfg.seed, cfg.max_epochs) == (sampler, 3, bench_search.MAX_EPOCHS)
    assert cfg.pruner.name == ("none" if method == "random" else method)
    assert cfg.study == f"{arm}-seed3" and cfg.stop.max_wallclock_time == 60.0


def test_stop_after_epochs_moves_the_deadline_once_the_epochs_are_spent() -> None:
    rows = {0: SimpleNamespace(epochs=5, from_epoch=0), 1: SimpleNamespace(epochs=4, from_epoch=2)}
    supervisor = SimpleNamespace(rows=rows, deadline=None)
    hook = bench_search.stop_after_epochs(8)
    hook(supervisor)  # 5 + 2 = 7 epochs
    assert supervisor.deadline is None
    rows[1].epochs = 5
    before = time.time()
    hook(supervisor)
    assert supervisor.deadline is not None and before <= supervisor.deadline <= time.time()
    earlier = supervisor.deadline = before - 100.0  # a deadline already past stays
    hook(supervisor)
    assert supervisor.deadline == earlier


def _fake_run_study(raw: dict, epochs: int | None) -> tuple[float, float]:
    """``run_study`` without training: the arm's own sampler and pruner on a made-up learning
    curve, one trial after another, until ``epochs`` epochs are spent; the trial running then
    goes on to its end (as a second worker's would), so the stream must be cut. It runs in
    memory and copies the trials to the journal at the end (a journal write costs an fsync)."""
    from lightning_hpo.launch.config import parse_config
    from lightning_hpo.launch.config.space import suggest
    from lightning_hpo.launch.study.search import build_pruner, build_sampler
    from lightning_hpo.storage import open_storage

    assert epochs is not None
    cfg = parse_config(raw)
    memory = optuna.create_study(sampler=build_sampler(cfg), pruner=build_pruner(cfg))
    for params in cfg.initial:
        memory.enqueue_trial(params)
    t0 = clock = time.time()
    spent = 0
    while spent < epochs:
        trial = memory.ask()
        params = suggest(trial, cfg.space)
        floor = 0.02 + 0.2 * abs(math.log10(params["lr"]) + 1.0) + 0.01 * params["momentum"]
        times: list[float] = []
        state, value = TrialState.COMPLETE, None
        for epoch in range(1, cfg.max_epochs + 1):
            value = floor + 0.3 / epoch
            clock += 0.01
            times.append(clock)
            trial.report(value, epoch)
            spent += 1
            if trial.should_prune():
                state = TrialState.PRUNED
                break
        trial.set_user_attr(bench_search.EPOCH_END_TIMES, times)
        memory.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
    study = optuna.create_study(storage=open_storage(cfg.storage), study_name=cfg.study)
    study.add_trials(memory.get_trials(deepcopy=False))
    for key, value in {bench_search.T0_ATTR: t0, bench_search.EPOCHS_ATTR: epochs,
                       bench_search.BUDGET_ATTR: cfg.stop.max_wallclock_time,
                       bench_search.GAPS_ATTR: [0.01, 0.02]}.items():
        study.set_user_attr(key, value)
    return t0, clock - t0


def test_bench_search_grid_same_seeds_same_epoch_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Every sampler with and without ASHA over the same two seeds: each stream holds exactly
    the budget's epochs, ASHA runs at least as many trials as its sampler alone, the random
    sampler guides no trial, and the summary, figures and plot are written."""
    monkeypatch.setattr(bench_search, "run_study", _fake_run_study)
    monkeypatch.setattr(bench_search, "write_plot", lambda *args: None)  # the report's plot
    plot, summary, figures_json = tmp_path / "p.png", tmp_path / "s.json", tmp_path / "f.json"
    code = bench_search.main(["--seeds", "0", "1", "--epochs", "30", "--out",
                              str(tmp_path / "out"), "--plot", str(plot), "--summary",
                              str(summary), "--json", str(figures_json)])
    assert code in (0, 1)  # 1: ASHA's target missed on the made-up curve
    record = json.loads(summary.read_text())
    arms = record["arms"]
    assert list(arms) == ["random", "asha", "tpe", "tpe-asha", "gp", "gp-asha"]
    assert record["seeds"] == [0, 1] and record["budget"] == "30 epochs"
    for arm, row in arms.items():
        assert row["epochs"] == [30, 30], arm
        assert len(row["final_best"]) == len(row["trials_run"]) == 2
        curve = row["mean_incumbent"]
        assert len(curve) == 30 and all(a >= b for a, b in zip(curve, curve[1:], strict=False))
        assert curve[-1] == pytest.approx(row["final_best_mean"], abs=1e-6)
    for sampler in ("random", "tpe", "gp"):
        alone = arms[bench_search.arm_name(sampler, "random")]
        asha = arms[bench_search.arm_name(sampler, "asha")]
        assert all(a >= b for a, b in zip(asha["trials_run"], alone["trials_run"], strict=True))
        assert sum(asha["trials_run"]) > sum(alone["trials_run"])
    assert arms["random"]["model_guided_trials"] == arms["asha"]["model_guided_trials"] == [0, 0]
    assert arms["tpe-asha"]["model_guided_trials"][0] > 0  # pruned trials teach TPE
    assert arms["gp-asha"]["model_guided_trials"] == [0, 0]  # GP learns from COMPLETE only
    assert sorted(p.name for p in (tmp_path / "out").glob("*.journal")) == sorted(
        f"{arm}-seed{seed}.journal" for arm in arms for seed in (0, 1))
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    whats = [f.what for f in read_figures(figures_json)]
    assert sum(w.endswith("epochs to reach random search's best (2 seeds)") for w in whats) == 5
    assert sum("final best validation_error (2 seeds, 30 epochs)" in w for w in whats) == 5
    out = capsys.readouterr().out
    assert "| arm | sampler | pruner | trials run | model-guided |" in out
    assert "| random | random | none |" in out and "| baseline |" in out
    assert bench_search.main(["--analyze-only", "--seeds", "0", "1", "--epochs", "30",
                              "--out", str(tmp_path / "out"), "--plot", str(plot),
                              "--summary", str(tmp_path / "again.json")]) == code
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["arms"] == arms


@pytest.mark.slow
def test_bench_search_quick_runs_every_arm_through_the_launcher(tmp_path: Path) -> None:
    """The real thing, tiny: 3 samplers x {none, ASHA}, seed 0, 12 epochs each."""
    summary = tmp_path / "summary.json"
    stdout, figures = _run_bench(
        "bench_search.py", "--quick", "--epochs", "12", "--out", str(tmp_path / "out"),
        "--summary", str(summary), "--plot", str(tmp_path / "p.png"), tmp_path=tmp_path)
    record = json.loads(summary.read_text())
    assert list(record["arms"]) == ["random", "asha", "tpe", "tpe-asha", "gp", "gp-asha"]
    for arm, row in record["arms"].items():
        assert row["epochs"] == [12] and row["trials_run"][0] >= 2, arm
    assert record["arms"]["asha"]["trials_run"][0] >= record["arms"]["random"]["trials_run"][0]
    assert (tmp_path / "p.png").stat().st_size > 0
    assert "ASHA reaches random search's final best" in stdout
    assert len(figures) == 10


# -- bench_promotion: segments -> trained epochs, idle slots, checkpoints, targets -------------


def _segmented(number: int, values: dict[int, float], times: list[float],
               segments: list[tuple[float, float, int, int]],
               state: TrialState = TrialState.COMPLETE) -> optuna.trial.FrozenTrial:
    """A trial with ``(start, end, from_epoch, to_epoch)`` segments, as the launcher writes them."""
    rows = [{"slot": 0, "device": "cpu:0", "start": a, "end": b, "from_epoch": f, "to_epoch": t,
             "how": "paused"} for a, b, f, t in segments]
    trial = optuna.trial.create_trial(
        state=state, value=list(values.values())[-1] if state == TrialState.COMPLETE else None,
        intermediate_values=values,
        user_attrs={"epoch_end_times": times, "segments": rows,
                    "epochs_trained": sum(t - f for _, _, f, t in segments),
                    "epochs": max((t for *_, t in segments), default=0)},
    )
    trial.number = number
    return trial


def _stream(events: list[EpochEvent]) -> list[tuple[float, int, int, float | None]]:
    return [(e.time, e.trial, e.epoch, None if math.isnan(e.value) else e.value) for e in events]


def test_bench_promotion_docstring_examples() -> None:
    import doctest

    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(bench_promotion, optionflags=flags)
    assert result.attempted >= 3 and result.failed == 0


def test_trained_epochs_with_resume_are_the_reported_epochs() -> None:
    resumed = _segmented(0, {1: 0.9, 2: 0.5, 3: 0.4, 4: 0.3}, [1.0, 2.0, 11.0, 12.0],
                         [(0.0, 2.5, 0, 2), (10.0, 12.5, 2, 4)])
    other = _segmented(1, {1: 0.8, 2: 0.6}, [1.5, 11.0], [(0.5, 11.2, 0, 2)])
    events = bench_promotion.trained_epochs([resumed, other])
    assert _stream(events) == [(1.0, 0, 1, 0.9), (1.5, 1, 1, 0.8), (2.0, 0, 2, 0.5),
                               (11.0, 0, 3, 0.4), (11.0, 1, 2, 0.6), (12.0, 0, 4, 0.3)]
    assert events == bench_search.epoch_events([resumed, other])


def test_trained_epochs_count_a_retrain_from_scratch_without_new_values() -> None:
    # rung 2, retrained 0 -> 4 (epochs 1, 2 again, then 3, 4 new), retrained 0 -> 8
    trial = _segmented(0, {e: 1.0 / e for e in range(1, 9)},
                       [1.0, 2.0, 13.0, 14.0, 25.0, 26.0, 27.0, 28.0],
                       [(0.0, 2.0, 0, 2), (10.0, 14.0, 0, 4), (20.0, 28.0, 0, 8)])
    events = bench_promotion.trained_epochs([trial])
    assert len(events) == 2 + 4 + 8  # what epochs_trained says
    assert _stream(events)[2:6] == [(11.0, 0, 1, None), (12.0, 0, 2, None),
                                    (13.0, 0, 3, 1 / 3), (14.0, 0, 4, 0.25)]
    again = [e for e in events if e.time > 20.0 and math.isnan(e.value)]
    assert [e.epoch for e in again] == [1, 2, 3, 4] and [e.time for e in again] == [
        21.0, 22.0, 23.0, 24.0]
    assert bench_search.epochs_to_reach(events, 0.25) == (6, 14.0)  # the retrain is compute


def test_trained_epochs_cut_fallback_and_odd_segments() -> None:
    crashed = _segmented(0, {1: 0.9, 2: 0.5}, [1.0, 2.0], [(0.0, 2.0, 0, 2), (5.0, 9.0, 0, 2)])
    plain = _trial(1, {1: 0.7, 2: 0.6}, [3.0, 4.0])  # no segments: its epoch end times
    broken = _segmented(2, {1: 0.1}, [1.0], [])
    broken.user_attrs["segments"] = [{"start": "x"}, None]
    events = bench_promotion.trained_epochs([crashed, plain, broken], until=7.0)
    assert _stream(events) == [(1.0, 0, 1, 0.9), (1.0, 2, 1, 0.1), (2.0, 0, 2, 0.5),
                               (3.0, 1, 1, 0.7), (4.0, 1, 2, 0.6), (7.0, 0, 1, None)]
    assert [e.time for e in bench_promotion.trained_epochs([crashed])][2:] == [7.0, 9.0]


def test_busy_seconds_and_idle_fraction_clip_segments_to_the_window() -> None:
    a = _segmented(0, {1: 0.5}, [4.0], [(-5.0, 4.0, 0, 1), (6.0, 8.0, 1, 3)])
    b = _segmented(1, {1: 0.5}, [9.0], [(5.0, 20.0, 0, 1)])
    assert bench_promotion.busy_seconds([a, b], 0.0, 10.0) == 4.0 + 2.0 + 5.0
    assert bench_promotion.idle_fraction([a, b], 2, 0.0, 10.0) == pytest.approx(1 - 11 / 20)
    assert bench_promotion.idle_fraction([], 2, 0.0, 10.0) == 1.0
    assert bench_promotion.first_start([b, a]) == -5.0
    assert bench_promotion.first_start([_trial(0, {1: 0.5}, [1.0])]) is None
    with pytest.raises(ValueError, match="slots"):
        bench_promotion.idle_fraction([a], 0, 0.0, 10.0)
    with pytest.raises(ValueError, match="window"):
        bench_promotion.idle_fraction([a], 2, 10.0, 10.0)


def test_analyze_cuts_at_the_budget_from_the_first_trial_start() -> None:
    first = _segmented(0, {1: 0.9, 2: 0.5, 3: 0.2}, [112.0, 114.0, 121.0],
                       [(110.0, 121.5, 0, 3)], state=TrialState.RUNNING)
    second = _segmented(1, {1: 0.8}, [113.0], [(111.0, 113.5, 0, 1)], state=TrialState.PRUNED)
    info = {"t0": 100.0, "wall": 30.0, "slots": 2, "window": 10.0, "peak_bytes": 5,
            "peak_files": 1}
    r = bench_promotion.analyze("asha-promotion", 0, [first, second], info)
    assert (r.startup, r.window, r.epochs) == (10.0, 10.0, 3)  # epoch 3 ended after 120 s
    assert r.counts == {"RUNNING": 1, "PRUNED": 1}
    assert r.busy_window == 10.0 + 2.5
    assert r.idle_window == pytest.approx(1 - 12.5 / 20)
    assert r.idle_run == pytest.approx(1 - (11.5 + 2.5) / 60)
    assert r.seconds_per_epoch == pytest.approx(12.5 / 3)


def test_checkpoint_bytes_count_resume_checkpoints_only(tmp_path: Path) -> None:
    (tmp_path / "trial_00000").mkdir()
    (tmp_path / "trial_00000" / "resume.ckpt").write_bytes(b"x" * 100)
    (tmp_path / "trial_00000" / "best.ckpt").write_bytes(b"x" * 1000)
    (tmp_path / "trial_00001").mkdir()
    (tmp_path / "trial_00001" / "resume.ckpt.tmp").write_bytes(b"x" * 10)
    (tmp_path / "trial_00001" / "resume.ckpt.old").write_bytes(b"x" * 1000)
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "resume.ckpt").write_bytes(b"x" * 1000)
    assert bench_promotion.checkpoint_bytes(tmp_path) == (110, 2)
    assert bench_promotion.checkpoint_bytes(tmp_path / "missing") == (0, 0)


def test_run_watcher_keeps_the_peak_and_interrupts_once_after_the_budget(tmp_path: Path) -> None:
    interrupts: list[float] = []
    previous = signal.signal(signal.SIGINT, lambda *_: interrupts.append(time.time()))
    try:
        with bench_promotion.RunWatcher(tmp_path, window=0.3, interval=0.02) as watcher:
            time.sleep(0.2)
            assert watcher.first_seen is None and not interrupts  # no trial yet: no clock
            (tmp_path / "trial_00000").mkdir()
            (tmp_path / "trial_00000" / "resume.ckpt").write_bytes(b"x" * 64)
            deadline = time.time() + 10
            while not interrupts and time.time() < deadline:
                time.sleep(0.02)
            (tmp_path / "trial_00000" / "resume.ckpt").unlink()
            time.sleep(0.2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(interrupts) == 1 and watcher.first_seen is not None
    assert interrupts[0] - watcher.first_seen >= 0.3
    assert (watcher.peak_bytes, watcher.peak_files) == (64, 1)
    with bench_promotion.RunWatcher(tmp_path, window=None, interval=0.01) as untimed:
        time.sleep(0.1)
    assert untimed.first_seen is not None and untimed.stopped_at is None
    assert len(interrupts) == 1 and not any(
        thread.name == "run-watcher" for thread in threading.enumerate())


def test_round_outcome_and_its_check() -> None:
    def trial(number: int, epochs: int, trained: int,
              state: TrialState) -> optuna.trial.FrozenTrial:
        t = _segmented(number, {e: 0.5 for e in range(1, epochs + 1)}, [], [], state=state)
        t.user_attrs.update(epochs=epochs, epochs_trained=trained)
        return t

    pruned = TrialState.PRUNED
    resumed = [trial(0, 10, 10, TrialState.COMPLETE), trial(1, 8, 8, pruned),
               trial(2, 4, 4, pruned), trial(3, 4, 4, pruned),
               *[trial(n, 2, 2, pruned) for n in range(4, 8)]]
    epochs, states, pruned_at = bench_promotion.round_outcome(resumed)
    assert (epochs, states, pruned_at) == (34, {"COMPLETE": 1, "PRUNED": 7}, {2: 4, 4: 2, 8: 1})
    assert bench_promotion.round_as_expected(epochs, states, pruned_at, resume=True)
    assert not bench_promotion.round_as_expected(epochs, states, pruned_at, resume=False)
    assert bench_promotion.round_as_expected(58, states, pruned_at, resume=False)
    assert not bench_promotion.round_as_expected(34, {"COMPLETE": 2, "PRUNED": 6}, pruned_at,
                                                 resume=True)
    assert not bench_promotion.round_as_expected(34, states, {2: 5, 4: 1, 8: 1}, resume=True)


@pytest.mark.parametrize("method", bench_promotion.METHODS)
def test_build_config_is_a_valid_launcher_config(method: str, tmp_path: Path) -> None:
    from lightning_hpo.launch.config import parse_config

    cfg = parse_config(bench_promotion.build_config(method, 3, 30.0, str(tmp_path / "s.journal"),
                                                    str(tmp_path), workers=2))
    assert cfg.max_epochs == bench_promotion.MAX_RESOURCE and cfg.seed == 3
    assert cfg.trainer["limit_train_batches"] == bench_promotion.LIMIT_TRAIN_BATCHES
    assert cfg.stop.max_wallclock_time == 30.0 + bench_promotion.STARTUP_ALLOWANCE
    expected = {"random": ("none", "stop", True), "asha-stop": ("asha", "stop", True),
                "asha-promotion": ("asha", "promotion", True),
                "sync-sh": ("sync_sh", "stop", True), "sync-sh-scratch": ("sync_sh", "stop", False)}
    assert (cfg.pruner.name, cfg.pruner.mode, cfg.pruner.resume) == expected[method]


def test_round_config_and_unknown_method(tmp_path: Path) -> None:
    from lightning_hpo.launch.config import parse_config

    cfg = parse_config(bench_promotion.round_config(False, str(tmp_path / "r.journal"),
                                                    str(tmp_path), workers=2))
    p = cfg.pruner
    assert (p.name, p.min_resource, p.max_resource, p.reduction_factor, p.resume) == (
        "sync_sh", 2, 10, 2, False)
    assert cfg.stop.n_trials == 8
    with pytest.raises(ValueError, match="method is 'bohb'; allowed: random"):
        bench_promotion.build_config("bohb", 0, 1.0, "s", "r", 1)


def _run(method: str, seed: int, values: list[float]) -> bench_promotion.RunResult:
    return bench_promotion.RunResult(method, seed, 0.0, 0.0, 100.0, 110.0, _events(*values),
                                     {"COMPLETE": 1}, 0.5, 0.6, 80.0, 1000, 2)


@pytest.mark.parametrize(
    ("stop_epochs", "promotion_epochs", "met"),
    [pytest.param([5, 6, 7], [4, 5, 30], True, id="promotion-better-median"),
     pytest.param([5, 6, 7], [4, 6, 30], True, id="same-median-one-slow-seed"),
     pytest.param([5, 6, 7], [5, 6, 7], True, id="equal"),
     pytest.param([5, 6, 7], [5, 8, 9], False, id="promotion-worse"),
     pytest.param([5, None, None], [None, None, 6], False, id="neither-median-reached"),
     pytest.param([None, None, None], [None, 6, 6], True, id="only-promotion-reaches")],
)
def test_promotion_report_compares_median_epochs(
    stop_epochs: list[int | None], promotion_epochs: list[int | None], met: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # random search first reaches its final best 0.1 at its 30th epoch, in every seed
    results = {}
    for seed in range(3):
        results[("random", seed)] = _run("random", seed, [0.9] * 29 + [0.1])
        for method, hits in (("asha-stop", stop_epochs), ("asha-promotion", promotion_epochs)):
            hit = hits[seed]
            values = [0.5] * 40 if hit is None else [0.5] * (hit - 1) + [0.05]
            results[(method, seed)] = _run(method, seed, values)
    methods = ["random", "asha-stop", "asha-promotion"]
    figures, verdicts = bench_promotion.report_runs(results, methods, [0, 1, 2])
    (comparison,) = [f for f in figures if f.what.startswith("promotion vs stopping")]
    ratios = [f for f in figures if "epochs to reach" in f.what]
    assert comparison.met is met and verdicts[-1] is met
    assert [f.met for f in ratios] == verdicts[:2]
    out = capsys.readouterr().out
    assert f"{'PASS' if met else 'MISS'}  promotion ASHA needs no more epochs" in out


def test_report_ratio_target_is_a_third_of_random_search() -> None:
    results = {("random", 0): _run("random", 0, [0.9] * 29 + [0.1]),
               ("asha-stop", 0): _run("asha-stop", 0, [0.5] * 9 + [0.1]),  # 10 / 30
               ("asha-promotion", 0): _run("asha-promotion", 0, [0.5] * 10 + [0.1]),  # 11 / 30
               ("sync-sh", 0): _run("sync-sh", 0, [0.5] * 3 + [0.1])}
    figures, verdicts = bench_promotion.report_runs(
        results, ["random", "asha-stop", "asha-promotion", "sync-sh"], [0])
    by_name = {f.what.split(":")[0]: f for f in figures}
    assert (by_name["asha-stop"].ratio, by_name["asha-stop"].met) == ("0.33", True)
    assert (by_name["asha-promotion"].ratio, by_name["asha-promotion"].met) == ("0.37", False)
    assert (by_name["sync-sh"].ratio, by_name["sync-sh"].met) == ("0.13", None)  # no target
    assert verdicts == [True, False, False]  # the comparison: 11 > 10 epochs
    idle, peak = by_name["slot idle share within the budget (median of 1 seeds)"], by_name[
        "peak resume checkpoints on disk (largest of 1 seeds)"]
    assert idle.baseline == "random 0.60" and "asha-promotion 0.60" in idle.measured
    assert peak.baseline == "random 0.0 MB (2)" and idle.met is None and peak.met is None


@pytest.mark.parametrize(
    ("outcomes", "met"),
    [pytest.param({True: 34, False: 58}, True, id="textbook"),
     pytest.param({True: 58, False: 58}, False, id="no-resume-gain"),
     pytest.param({True: 34}, False, id="one-run-missing")],
)
def test_report_round(outcomes: dict[bool, int], met: bool) -> None:
    states, pruned_at = {"COMPLETE": 1, "PRUNED": 7}, dict(bench_promotion.ROUND_PRUNED_AT)
    figure, ok = bench_promotion.report_round(
        {resume: (epochs, states, pruned_at, 20.0) for resume, epochs in outcomes.items()})
    assert ok is met and figure.met is met and figure.target == "34 vs 58"


@pytest.mark.parametrize(("save", "met"), [(0.004, True), (0.006, False)])
def test_report_checkpoint_fraction_of_an_epoch(save: float, met: bool) -> None:
    ours = bench_promotion.CheckpointCost(save=save, load=0.005, epoch=0.2, bytes=270_000)
    full = bench_promotion.CheckpointCost(save=0.005, load=0.005, epoch=0.6, bytes=270_000)
    figure, ok = bench_promotion.report_checkpoint(ours, full)
    assert ok is met and figure.ratio == f"{100 * (save + 0.005) / 0.2:.1f}%"
    assert bench_promotion.median_epochs([120, None, 80]) == 120
    assert math.isnan(bench_promotion.median_epochs([]))


# -- bench_workers: throughput ------------------------------------------------------------------


def test_steady_state_starts_at_the_first_fit_and_ends_with_the_last_trial() -> None:
    rows = [SimpleNamespace(fit_started=10.0, ended=13.0),
            SimpleNamespace(fit_started=11.0, ended=16.0),
            SimpleNamespace(fit_started=15.0, ended=None)]  # still running: not counted
    steady = bench_workers.steady_state(rows)
    assert steady == bench_workers.Throughput(trials=2, seconds=6.0)
    assert steady.per_minute == 20.0
    assert bench_workers.end_to_end(rows, 30.0).per_minute == 4.0


def test_speedup_and_empty_runs() -> None:
    one, two = bench_workers.Throughput(10, 60.0), bench_workers.Throughput(19, 60.0)
    assert bench_workers.speedup(two, one) == pytest.approx(1.9)
    assert bench_workers.speedup(two, bench_workers.Throughput(0, 60.0)) == math.inf
    with pytest.raises(ValueError, match="no trial"):
        bench_workers.steady_state([SimpleNamespace(fit_started=None, ended=None)])


def test_bench_workers_docstring_examples() -> None:
    assert doctest.testmod(bench_workers).failed == 0


@pytest.mark.parametrize(("cores", "run", "skipped"), [
    (1, [1], [2, 4]), (2, [1, 2], [4]), (3, [1, 2], [4]), (4, [1, 2, 4], []), (64, [1, 2, 4], []),
], ids=["1-core", "2-core", "3-core", "4-core", "64-core"])
def test_split_by_cores_runs_the_counts_the_machine_has_cores_for(
        cores: int, run: list[int], skipped: list[int]) -> None:
    counts, left = bench_workers.split_by_cores([1, 2, 4], cores)
    assert counts == run and [n for n, _ in left] == skipped
    assert all(why == f"{n} workers need {n} cores; this machine has {cores}" for n, why in left)
    assert bench_workers.split_by_cores([2], 2)[0] == [1, 2]  # the baseline always runs


def _fake_workers(monkeypatch: pytest.MonkeyPatch, cores: int) -> list[int]:
    """bench_workers without training: N workers finish N times the trials of one (a perfect
    launcher), the plain processes 0.9 of that; returns the worker counts it was asked to run."""
    asked: list[int] = []

    def fake_run(raw: dict, label: str, n_cores: int | None) -> bench_workers.RunResult:
        count = raw["devices"]["count"]
        asked.append(count)
        assert n_cores == count and raw["stop"]["n_trials"] == 8
        steady = bench_workers.Throughput(8, 60.0 / count)
        return bench_workers.RunResult(label, count, 1, steady, steady, {"COMPLETE": 8})

    monkeypatch.setattr(bench_workers, "available_cores", lambda: cores)
    monkeypatch.setattr(bench_workers, "run", fake_run)
    monkeypatch.setattr(bench_workers, "ceiling", lambda processes, each: bench_workers.Throughput(
        processes * each, 60.0 / (1.0 if processes == 1 else 0.9)))
    return asked


def test_bench_workers_says_which_counts_it_did_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    asked = _fake_workers(monkeypatch, cores=2)
    out_json = tmp_path / "f.json"
    assert bench_workers.main(["--quick", "--json", str(out_json)]) == 0
    assert asked == [1, 2]
    out = capsys.readouterr().out
    assert "4 CPU workers: not run: 4 workers need 4 cores; this machine has 2" in out
    assert "1/2 CPU worker(s) x 1 thread on 2 cores" in out
    assert "machine ceiling: 2 plain training processes (no launcher) vs 1: 1.80x" in out
    assert "PASS  2 workers finish >= 1.8x" in out
    figures = {f.what: f for f in read_figures(out_json)}
    two = figures["trials per minute, 2 workers vs 1 (2 cores)"]
    assert (two.ratio, two.target, two.met) == ("2.00x", ">= 1.8x", True)
    assert figures["machine ceiling, 2 plain processes vs 1 (2 cores)"].ratio == "1.80x"
    four = figures["trials per minute, 4 workers vs 1"]
    assert four.measured == "not run" and four.baseline.startswith("4 workers need 4 cores")


def test_bench_workers_runs_4_workers_where_there_are_4_cores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    asked = _fake_workers(monkeypatch, cores=4)
    out_json = tmp_path / "f.json"
    assert bench_workers.main(["--quick", "--json", str(out_json)]) == 0
    assert asked == [1, 2, 4]
    out = capsys.readouterr().out
    assert "not run" not in out and "speed-up 4 CPU worker(s) vs 1 CPU worker(s)" in out
    figures = {f.what: f for f in read_figures(out_json)}
    four = figures["trials per minute, 4 workers vs 1 (4 cores)"]
    assert (four.ratio, four.target, four.met) == ("4.00x", "-", None)
    assert "machine ceiling, 4 plain processes vs 1 (4 cores)" in figures


def test_bench_workers_on_one_core_runs_the_baseline_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    asked = _fake_workers(monkeypatch, cores=1)
    assert bench_workers.main(["--quick", "--no-ceiling", "--json",
                               str(tmp_path / "f.json")]) == 0
    assert asked == [1]
    out = capsys.readouterr().out
    assert "2 CPU workers: not run: 2 workers need 2 cores; this machine has 1" in out
    assert "no 2-worker run, so no target line" in out
    assert [f.measured for f in read_figures(tmp_path / "f.json")] == ["not run", "not run"]


@pytest.mark.slow
def test_bench_workers_runs_for_real_where_the_cores_are(tmp_path: Path) -> None:
    """Two trials a run, no ceiling: the launcher at each count this machine has cores for."""
    stdout, figures = _run_bench("bench_workers.py", "--trials", "2", "--no-ceiling",
                                 tmp_path=tmp_path)
    cores = bench_workers.available_cores()
    run, skipped = bench_workers.split_by_cores(bench_workers.WORKERS, cores)
    assert [line.split()[0] for line in stdout.splitlines()
            if "CPU worker(s)" in line and line.split()[0].isdigit()] == [str(n) for n in run]
    for count, why in skipped:
        assert f"{count} CPU workers: not run: {why}" in stdout
    assert len(figures) == len(run) - 1 + len(skipped)


# -- the figures and make bench's table ---------------------------------------------------------


def test_figures_round_trip_and_the_table(tmp_path: Path) -> None:
    figures = [
        Figure("idle gap", "bench_launch.py", "median 0.017 s", "7.4 s", "446x smaller",
               "< 0.2 s, >= 10x", True),
        Figure("hyperband: epochs", "bench_search.py", "ratios 0.4", "random", "0.40", "-", None),
        Figure("callback A/B", "bench_callback.py", "0.30 s", "0.29 s", "+3.0%", "< 2%", False),
    ]
    write_figures(tmp_path / "f.json", figures)
    assert read_figures(tmp_path / "f.json") == figures
    write_figures(None, figures)  # no path: nothing written, no error
    lines = run_all._table(figures).splitlines()
    assert lines[0].split()[:2] == ["what", "measured"] and set(lines[1]) == {"-"}
    assert [line.split()[-1] for line in lines[2:]] == ["PASS", "-", "MISS"]


# -- the cheap benchmarks, for real, in their smallest mode -----------------------------------


def _run_bench(script: str, *args: str, tmp_path: Path) -> tuple[str, list[Figure]]:
    out = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args, "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=BENCHMARKS.parent,
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: a target missed
    return result.stdout, read_figures(out)


@pytest.mark.slow
def test_bench_memory_format_runs_and_writes_its_figure(tmp_path: Path) -> None:
    stdout, (figure,) = _run_bench("bench_memory_format.py", "--repeats", "1", "--epochs", "1",
                                   "--batch-sizes", "128", "--activations", "relu",
                                   tmp_path=tmp_path)
    assert "relu" in stdout and "median of 1 pairs" in stdout
    assert figure.target == "< 1.00x" and figure.met is not None


@pytest.mark.slow
def test_bench_callback_runs_and_writes_its_figures(tmp_path: Path) -> None:
    stdout, figures = _run_bench("bench_callback.py", "--epochs", "1", "--repeats", "1",
                                 tmp_path=tmp_path)
    assert "callback, journal" in stdout and "callback, sqlite" in stdout
    assert len(figures) == 4 and {f.target for f in figures} == {"< 2%"}
    assert all(f.met is not None for f in figures)


@pytest.mark.slow
def test_bench_pruner_runs_and_writes_its_figures(tmp_path: Path) -> None:
    stdout, figures = _run_bench("bench_pruner.py", "--quick", "--sizes", "30", "90",
                                 tmp_path=tmp_path)
    rows = [line.split() for line in stdout.splitlines() if line.startswith(("sqlite", "journal"))]
    assert len(rows) == 2 * 2 * 4  # storages x sizes x modes
    assert {f.what.split(",")[1].strip() for f in figures} == {"sqlite", "journal"}
    assert all(json.dumps(f.met) in ("true", "false") for f in figures)


@pytest.mark.slow
def test_bench_promotion_quick_runs_and_writes_its_figures(tmp_path: Path) -> None:
    """The smoke run, shortened: 6 s per study and no textbook round (test_scheduler runs that
    round through the launcher; its analysis is tested above)."""
    stdout, figures = _run_bench("bench_promotion.py", "--quick", "--budget", "6", "--no-round",
                                 "--out", str(tmp_path / "out"), tmp_path=tmp_path)
    rows = [line.split() for line in stdout.splitlines()
            if line.startswith(("random ", "asha-promotion "))]
    assert [row[0] for row in rows[:2]] == ["random", "asha-promotion"]
    assert "Resume checkpoint" in stdout and "Textbook round" not in stdout
    whats = [f.what for f in figures]
    assert any(w.startswith("asha-promotion: epochs to reach") for w in whats)
    assert any(w.startswith("resume checkpoint") for w in whats)
    assert all(f.met in (True, False) for f in figures if f.target != "-")
    assert sorted(p.name for p in (tmp_path / "out").glob("*.journal")) == [
        "asha-promotion-seed0.journal", "random-seed0.journal"]


# -- bench_schedules: measured curves replayed through the library's schedules -----------------


def _table(curves: list[list[float]], seconds: list[float] | None = None,
           start: float = 0.0, checkpoint: float = 0.0) -> bench_schedules.Table:
    return bench_schedules.Table(
        "toy", "", [{"c": c} for c in range(len(curves))],
        {"validation_error": curves, "validation_loss": curves},
        seconds or [1.0] * len(curves), start, checkpoint, 1000)


#: config 0: 0.5, config 1: 0.9, config 2: 0.1 at every epoch; 9 epochs (rungs 1, 3, 9, eta 3)
_FLAT = [[0.5] * 9, [0.9] * 9, [0.1] * 9]


def _trained(run: bench_schedules.SimRun) -> list[tuple[int, int]]:
    return [(e.trial, e.epoch) for e in run.events]


def test_bench_schedules_docstring_examples() -> None:
    import doctest

    result = doctest.testmod(bench_schedules, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


@pytest.mark.parametrize("resume, epochs, retrained", [(True, 34, 0), (False, 58, 24)])
def test_the_simulated_textbook_round_trains_34_or_58_epochs(
        resume: bool, epochs: int, retrained: int) -> None:
    table = _table([[1.0 - 0.01 * c * e for e in range(1, 11)] for c in range(8)])
    method = "sync-sh" if resume else "sync-sh-scratch"
    run = bench_schedules.simulate(table, method, 0, 1e9, 2, 2, 2, configs=range(8))
    assert len(run.events) == epochs
    assert sum(math.isnan(e.value) for e in run.events) == retrained
    reached = {}
    for event in run.events:
        reached[event.trial] = max(reached.get(event.trial, 0), event.epoch)
    assert sorted(reached.values()) == [2, 2, 2, 2, 4, 4, 8, 10]
    assert reached[7] == 10  # config 7 improves fastest: the one trial at max_resource
    assert run.trials == 8 and run.idle > 0  # a rung waits for its last trial


def test_simulated_stopping_asha_prunes_by_the_pruners_rule() -> None:
    run = bench_schedules.simulate(_table(_FLAT), "asha-stop", 0, 1e9, 1, configs=[0, 1, 2, 1])
    trained = _trained(run)
    # t0 is first at every rung; t1 (0.9) has 1 of 2 better at rung 1 and stops; t2 (0.1) is
    # best everywhere; t3 (0.9) has 2 of 4 better (n // 3 = 1 continue) and stops.
    assert trained == [(0, e) for e in range(1, 10)] + [(1, 1)] + [(2, e) for e in range(1, 10)] \
        + [(3, 1)]
    assert run.segments == 4 and run.peak_paused == 0


def test_simulated_promotion_asha_pauses_and_promotes_the_top_third() -> None:
    run = bench_schedules.simulate(_table(_FLAT), "asha-promotion", 0, 1e9, 1,
                                   configs=[0, 1, 2, 1])
    # t0, t1 pause at rung 1 (top floor(n/3) is empty); t2 makes n = 3 and is its best: it is
    # promoted to rung 3 and pauses there alone; t3 starts; nothing else can be promoted, so
    # (finish_best) t2, the best paused trial of the highest rung, is trained on to rung 9.
    assert _trained(run) == [(0, 1), (1, 1), (2, 1), (2, 2), (2, 3), (3, 1),
                             (2, 4), (2, 5), (2, 6), (2, 7), (2, 8), (2, 9)]
    # with the tickets counted, t1 is pruned as soon as t0 ranks above it (4 // 3 = 1 go on)
    assert run.segments == 6 and run.peak_paused == 1


def test_simulated_max_paused_bounds_promotion_asha() -> None:
    curves = [[0.01 * c + 0.5 / e for e in range(1, 10)] for c in range(40)]
    table = _table(curves)
    free = bench_schedules.simulate(table, "asha-promotion", 3, 200.0, 2)
    bounded = bench_schedules.simulate(table, "asha-promotion", 3, 200.0, 2, max_paused=3)
    assert free.peak_paused > 10 and bounded.peak_paused == 3


def test_simulation_cuts_at_the_budget_and_draws_the_same_configs_for_every_method() -> None:
    curves = [[0.01 * c] * 9 for c in range(50)]  # each configuration's value tells it apart
    table = _table(curves, seconds=[0.5 + 0.01 * c for c in range(50)], start=0.2,
                   checkpoint=0.05)
    runs = {m: bench_schedules.simulate(table, m, 7, 40.0, 3) for m in bench_schedules.METHODS}
    first = {}
    for method, run in runs.items():
        assert run.events and max(e.time for e in run.events) <= 40.0
        assert all(a.time <= b.time for a, b in zip(run.events, run.events[1:], strict=False))
        first[method] = {e.trial: e.value for e in run.events if e.epoch == 1
                         and not math.isnan(e.value)}  # a retrain reports nothing
    common = set.intersection(*(set(f) for f in first.values()))
    assert len(common) >= 3
    assert all(len({first[m][k] for m in first}) == 1 for k in common)
    assert runs["random"].idle < 1e-9  # three slots always busy, starts included
    assert bench_schedules.simulate(table, "random", 8, 40.0, 3).events != runs["random"].events


def _sim(method: str, values: list[float]) -> bench_schedules.SimRun:
    return bench_schedules.SimRun(method, 0, 10.0, 1, _events(*values), 1, 1, 10.0, 0)


def test_outcome_ratio_and_targets() -> None:
    runs = {"random": _sim("random", [0.9, 0.5, 0.4, 0.3, 0.2, 0.3]),
            "asha-stop": _sim("asha-stop", [0.1]),
            "asha-promotion": _sim("asha-promotion", [0.5, 0.25, 0.2]),
            "sync-sh": _sim("sync-sh", [0.9]),
            "sync-sh-scratch": _sim("sync-sh-scratch", [math.nan, 0.2])}
    seed = bench_schedules.outcome(runs)
    assert seed.target == 0.2 and seed.reach["random"] == 5
    assert seed.reach == {"random": 5, "asha-stop": 1, "asha-promotion": 3, "sync-sh": None,
                          "sync-sh-scratch": 2}
    assert seed.ratio("asha-stop") == 0.2 and seed.ratio("sync-sh") == math.inf
    promotion, stop, promo_ratio = bench_schedules.targets([seed])
    assert (promotion.met, stop.met, promo_ratio.met) == (False, True, False)  # 3 > 1; 0.6
    never = dict(runs, **{"asha-stop": _sim("asha-stop", [0.9]),
                          "asha-promotion": _sim("asha-promotion", [0.9])})
    assert bench_schedules.targets([bench_schedules.outcome(never)])[0].met is False
    text = bench_schedules.report({(m, 0): r for m, r in runs.items()}, [seed],
                                  bench_schedules.METHODS, _table(_FLAT))
    assert "| sync-sh | 1 | 1 | 0.9 | never [never, never]" in text


def test_table_checks_and_round_trip(tmp_path: Path) -> None:
    table = _table(_FLAT)
    table.save(tmp_path / "t.json")
    assert bench_schedules.Table.load(tmp_path / "t.json") == table
    with pytest.raises(ValueError, match="metric is 'accuracy'; the table has validation_error"):
        table.values("accuracy")
    with pytest.raises(ValueError, match="every curve as long"):
        _table([[0.1] * 9, [0.1] * 8])
    with pytest.raises(ValueError, match="one entry a configuration"):
        _table(_FLAT, seconds=[1.0])
    with pytest.raises(ValueError, match="configs must be table rows 0..2"):
        bench_schedules.simulate(table, "random", 0, 10.0, 1, configs=[3])


def test_the_committed_table_holds_both_metrics_to_epoch_27() -> None:
    table = bench_schedules.Table.load(bench_schedules.TABLE)
    assert table.max_epochs == bench_schedules.MAX_RESOURCE
    assert set(table.curves) == set(bench_schedules.METRICS) and len(table.params) >= 200
    assert all(0.0 <= v <= 1.0 for curve in table.values("validation_error") for v in curve)


def test_bench_schedules_runs_and_writes_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    assert bench_schedules.main(["--seeds", "2", "--json", str(out)]) == 0
    figures = read_figures(out)
    assert len(figures) == 3 and all(f.met is not None for f in figures)
    assert bench_schedules.main(["--table", str(tmp_path / "missing.json")]) == 2
    with pytest.raises(SystemExit):
        bench_schedules.main(["--seeds", "0"])


# --- bench_gpu.py (runs at small sizes on CPU; its GPU targets are judged on CUDA only) ---


def test_bench_gpu_docstring_examples() -> None:
    assert doctest.testmod(bench_gpu, optionflags=doctest.ELLIPSIS).failed == 0


def test_bench_gpu_writes_fashion_mnist_files_torchvision_reads(tmp_path: Path) -> None:
    from torchvision.datasets import FashionMNIST

    raw = bench_gpu.write_idx_files(tmp_path, 300, 100, seed=1)
    assert raw == tmp_path / "FashionMNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == [
        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
        "train-images-idx3-ubyte", "train-labels-idx1-ubyte"]
    assert (raw / "train-images-idx3-ubyte").read_bytes()[:16] == struct.pack(
        ">IIII", 0x803, 300, 28, 28)
    assert (raw / "t10k-labels-idx1-ubyte").read_bytes()[:8] == struct.pack(">II", 0x801, 100)
    train = FashionMNIST(str(tmp_path), train=True, download=False)
    val = FashionMNIST(str(tmp_path), train=False, download=False)
    assert train.data.shape == (300, 28, 28) and train.data.dtype == torch.uint8
    assert len(val) == 100 and set(train.targets.tolist()) <= set(range(10))
    assert len({bytes(image.numpy()) for image in train.data}) == 300  # no two alike
    again = tmp_path / "again"
    bench_gpu.write_idx_files(again, 300, 100, seed=1)  # the seed fixes the files
    assert (again / "FashionMNIST/raw/train-images-idx3-ubyte").read_bytes() == (
        raw / "train-images-idx3-ubyte").read_bytes()


@pytest.mark.slow
def test_bench_gpu_quick_runs_and_writes_its_figures(tmp_path: Path) -> None:
    stdout, figures = _run_bench("bench_gpu.py", "--quick", tmp_path=tmp_path)
    cuda = "device: cuda" in stdout
    unit = "GPU" if cuda else "CPU"
    whats = [f.what for f in figures]
    assert whats[0].startswith("Lightning vs plain loop, s/epoch, batch 128")
    assert figures[0].target == "<= 1.3x" and figures[0].met in (True, False)
    assert any(w.startswith("one trial, Lightning s/epoch, batch 128") for w in whats) == cuda
    launcher = [f for f in figures if f.what.startswith("launcher epochs/s")]
    assert [f.what for f in launcher] == [
        f"launcher epochs/s, {k} trial(s) per {unit}" for k in (1, 2)]
    assert launcher[0].ratio == "1.00x"
    assert whats[-1].startswith(f"{unit} busy")
    if not cuda:  # no launcher verdict and no busy share off the GPU
        assert all(f.met is None for f in launcher) and figures[-1].measured == "n/a"


def test_bench_gpu_shows_eager_lightning_beside_the_graph_where_measured(
        capsys: pytest.CaptureFixture[str]) -> None:
    rows = [bench_gpu.EpochRow(128, 0.40, 0.80, eager=1.00),
            bench_gpu.EpochRow(256, 0.30, 0.40, eager=0.50)]
    ok, figures = bench_gpu.report_one_trial(rows, cuda=True, where="H100")
    out = capsys.readouterr().out
    assert "eager Lightning" in out and "0.40x" in out and "0.60x" in out
    assert ok  # 0.5x the plain loop, 0.40 s per epoch
    graph = [f for f in figures if "CUDA graph vs eager" in f.what]
    assert len(graph) == 1 and graph[0].ratio == "0.40x" and graph[0].met is None
    bench_gpu.report_one_trial([bench_gpu.EpochRow(128, 0.3, 0.25)], cuda=False, where="CPU")
    assert "eager Lightning" not in capsys.readouterr().out


# -- bench_peers: the launcher against a plain Optuna script ---------------------------------


def test_bench_peers_docstring_examples() -> None:
    import bench_peers

    assert doctest.testmod(bench_peers).failed == 0


def _peer_run(spans: dict[int, tuple[float, float, list[float]]]) -> Any:
    import bench_peers

    return bench_peers.Run(1.0, 1.0, 1.0, 1, 0.1, spans)


def test_the_same_epoch_compares_only_configurations_both_trained_past_epoch_1() -> None:
    import bench_peers

    ours = [_peer_run({0: (0.0, 9.0, [2.0, 3.1, 4.2]), 1: (0.0, 2.0, [2.0]),
                       2: (0.0, 9.0, [1.0, 3.0])})]
    base = [_peer_run({0: (0.0, 9.0, [1.0, 2.0, 3.0]), 1: (0.0, 9.0, [1.0, 2.0]),
                       3: (0.0, 9.0, [1.0, 2.0])})]
    a, b, ratio, n = bench_peers.epoch_ratio(ours, base)
    assert n == 1 and a == pytest.approx(1.1) and b == pytest.approx(1.0)
    assert ratio == pytest.approx(1.1)
    with pytest.raises(SystemExit, match="no configuration trained 2 epochs"):
        bench_peers.epoch_ratio([_peer_run({1: (0.0, 1.0, [1.0])})], base)


def test_bench_peers_alternates_which_system_runs_first_and_pairs_the_runs() -> None:
    import bench_peers

    orders = [bench_peers.run_order(k, ["ours", "plain", "syne"]) for k in range(4)]
    assert [o[0] for o in orders] == ["ours", "plain", "ours", "plain"]
    assert all(sorted(o) == ["ours", "plain", "syne"] and o[2] == "syne" for o in orders)
    # run by run, not median against median: a slow run of both cancels out
    assert bench_peers.paired_ratio([10.0, 20.0, 40.0], [10.0, 25.0, 40.0]) == 1.0
    with pytest.raises(ValueError):
        bench_peers.paired_ratio([1.0], [1.0, 2.0])


def test_bench_peers_compiles_the_modules_both_systems_import(tmp_path: Path) -> None:
    """As pip leaves an installed package: bytecode beside each module, so that no process of
    either system compiles them again where PYTHONDONTWRITEBYTECODE is set."""
    import importlib.util

    import bench_peers

    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    modules = [tmp_path / "pkg" / "__init__.py", tmp_path / "pkg" / "sub" / "m.py"]
    for module in modules:
        module.write_text("X = 1\n")
    assert bench_peers.compile_package(tmp_path / "pkg") is True
    assert all(Path(importlib.util.cache_from_source(str(m))).is_file() for m in modules)
    (tmp_path / "pkg" / "bad.py").write_text("def (:\n")
    assert bench_peers.compile_package(tmp_path / "pkg") is False


@pytest.mark.parametrize("args", [["--runs", "0"], ["--trials", "3"], ["--storage", "mysql://db"]],
                         ids=["runs", "trials", "storage"])
def test_bench_peers_refuses_bad_counts_before_it_runs_anything(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    import bench_peers

    with pytest.raises(SystemExit) as info:
        bench_peers.main(args)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # not even the machine line: nothing was run or installed
    assert f": error: {args[0]}: is " in captured.err.splitlines()[-1]


def test_bench_peers_refuses_a_server_that_does_not_answer_in_one_masked_line(
    capsys: pytest.CaptureFixture[str]
) -> None:
    import bench_peers

    with pytest.raises(SystemExit) as info:
        bench_peers.main(["--storage", "postgresql+psycopg2://u:s3cret@127.0.0.1:1/db"])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran
    last = captured.err.splitlines()[-1]
    assert ": error: --storage: cannot open postgresql+psycopg2://u:***@127.0.0.1:1/db" in last
    assert "s3cret" not in captured.err


def test_bench_peers_storages_put_each_run_apart(tmp_path: Path) -> None:
    import bench_peers

    journal, name = bench_peers.run_storage("journal", tmp_path, "plain")
    assert (journal, name) == (str(tmp_path / "plain.journal"), "plain")
    url, name = bench_peers.run_storage("sqlite", tmp_path / "run1", "ours")
    assert (url, name) == (f"sqlite:///{tmp_path}/run1/ours.db", "ours")
    # a database the user gave: every run's study is named after its own fresh folder
    given = "postgresql://u@127.0.0.1:5432/bench"
    assert bench_peers.run_storage(given, tmp_path / "bench-peers-a1", "ours") == (
        given, "ours-bench-peers-a1")
    # the plain script opens what the benchmark hands it: a journal path or an RDB URL
    study = optuna.create_study(study_name="s", storage=bench_peers._open(journal))
    study.enqueue_trial({"x": 1.0})
    again = optuna.load_study(study_name="s", storage=bench_peers._open(journal))
    assert len(again.trials) == 1
    sqlite = f"sqlite:///{tmp_path / 'db.sqlite'}"
    optuna.create_study(study_name="t", storage=bench_peers._open(sqlite))
    bench_peers._drop(sqlite, "t")  # only a PostgreSQL database the user gave is cleaned
    assert optuna.get_all_study_names(sqlite) == ["t"]


def test_bench_peers_pins_itself_and_its_children_to_as_many_cores_as_workers() -> None:
    # in a child process: pinning this one would slow every later test
    code = ("import os, subprocess, sys; sys.path.insert(0, sys.argv[1]); import bench_peers; "
            "print(bench_peers.pin_cores(1)); "
            "print(subprocess.run([sys.executable, '-c', 'import os; "
            "print(len(os.sched_getaffinity(0)))'], capture_output=True, text=True).stdout)")
    out = subprocess.run([sys.executable, "-c", code, str(BENCHMARKS)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    if len(os.sched_getaffinity(0)) > 1:
        assert out[0].startswith("cores: pinned to ") and out[1] == "1"
    else:
        assert out[0] == "cores: 1 (all of them)"


def test_peer_figures_time_from_the_start_and_count_every_epoch() -> None:
    import bench_peers

    run = bench_peers.figures_of(100.0, 20.0, {0: (101.0, 105.0, [103.0, 104.5]),
                                               1: (102.0, 104.0, [103.5])}, [0.4, 0.3, 0.5])
    assert run.first_epoch == 3.0 and run.epochs == 3 and run.best == 0.3
    assert run.per_epoch == pytest.approx((4.0 + 2.0) / 3)


@pytest.mark.slow
def test_bench_peers_runs_both_systems_on_the_same_configurations(tmp_path: Path) -> None:
    """Its smallest mode for real: 4 trials through the launcher and through the plain Optuna
    script (optuna-integration installed into benchmarks/.peers/ by pip on first use)."""
    import bench_peers

    try:
        bench_peers.peer_env()
    except subprocess.CalledProcessError:
        pytest.skip("pip could not install optuna-integration into benchmarks/.peers/")
    stdout, figures = _run_bench("bench_peers.py", "--runs", "1", "--trials", "4", "--no-syne-tune",
                                 "--no-warm-up", tmp_path=tmp_path)
    assert "run 1 lightning_hpo" in stdout and "run 1 plain Optuna" in stdout
    assert [f.what for f in figures] == [
        f"{what} vs plain Optuna (quickstart)" for what in
        ("wall-clock", "time to first epoch", "seconds per epoch", "the same epoch")]
    assert all(f.met in (True, False) for f in figures)


@pytest.mark.parametrize("cli", [False, True], ids=["registry", "lightning-cli"])
def test_the_long_variant_is_a_config_the_launcher_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: bool
) -> None:
    """``--long`` names the repeated data module by its module path (the registry, as the
    quickstart does); ``--cli`` gives model and data by class_path (LightningCLI). Both parse,
    and the registry form passes the launcher's check against the real classes."""
    import bench_peers

    from lightning_hpo.launch.checks import check_against_registry
    from lightning_hpo.launch.config import parse_config

    monkeypatch.syspath_prepend(str(bench_peers.PEERS))
    cfg = parse_config(bench_peers.ours_config(tmp_path, [bench_peers.INITIAL], repeat=10,
                                               cli=cli))
    assert cfg.stop.n_trials == 1 and cfg.study_dir == tmp_path / "runs" / "ours"
    if cli:
        assert cfg.cli is not None and "data.init_args.batch_size" in cfg.space
    else:
        assert (cfg.data, cfg.data_args) == ("bigger_digits:RepeatedDigits", {"repeat": 10})
        check_against_registry(cfg)


# -- bench_multiobjective: hypervolume against epochs and wall-clock, several objectives ------


def test_bench_multiobjective_docstring_examples() -> None:
    import bench_multiobjective

    result = doctest.testmod(bench_multiobjective, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10 and result.failed == 0


@pytest.mark.parametrize("method", ["random", "moasha-stop", "moasha-promotion"])
def test_bench_multiobjective_config_is_a_valid_launcher_config(
    method: str, tmp_path: Path
) -> None:
    import bench_multiobjective as mo

    from lightning_hpo.launch.config import parse_config

    configs = mo.configurations(3, 4)
    cfg = parse_config(mo.build_config(method, 3, configs, str(tmp_path / "s.journal"),
                                       str(tmp_path)))
    assert cfg.metrics == ("validation_error", "parameters") and cfg.initial == configs
    assert cfg.stop.n_trials == 4 and cfg.max_epochs == mo.MAX_EPOCHS
    assert cfg.pruner.name == ("none" if method == "random" else "asha")
    with pytest.raises(ValueError, match="allowed"):
        mo.build_config("syne-tune", 0, configs, "x", "y")


@pytest.mark.slow
def test_bench_multiobjective_smoke_runs_without_syne_tune(tmp_path: Path) -> None:
    """The smallest mode for real (seed 0, 27 epochs a method), Syne Tune absent (an empty
    folder in place of benchmarks/.peers/syne): its rows say so; the figures and the per-epoch
    record are consistent (no threshold)."""
    import importlib.util

    import bench_multiobjective as mo

    from lightning_hpo.report import hypervolume_frame

    if importlib.util.find_spec("syne_tune") is not None:
        pytest.skip("syne_tune is importable in the test environment itself")
    out = tmp_path / "out"
    stdout, figures = _run_bench("bench_multiobjective.py", "--smoke", "--syne-site",
                                 str(tmp_path / "no-syne"), "--out", str(out),
                                 tmp_path=tmp_path)
    assert f"skipped: syne-tune not installed (run {mo.INSTALL_HINT})" in stdout
    assert [f.what for f in figures] == [
        "MO-ASHA stop epochs to random search's final hypervolume",
        "MO-ASHA promotion epochs to random search's final hypervolume",
        "MO-ASHA stop wall-clock to the same hypervolume as Syne Tune MOASHA",
        "MO-ASHA promotion wall-clock to the same hypervolume as Syne Tune MOASHA"]
    assert [f.met in (True, False) for f in figures] == [True, True, False, False]
    assert all(f.measured.startswith("skipped: syne-tune not installed") for f in figures[2:])
    record = json.loads((out / "record.json").read_text())
    epochs = 3 * mo.MAX_EPOCHS
    assert record["epochs"] == epochs and record["seeds"] == [0]
    assert sorted(r["method"] for r in record["runs"]) == sorted(mo.OURS)
    finals = {}
    for run in record["runs"]:
        hv, seconds = run["hypervolume"], run["seconds"]
        assert run["epochs"] == len(hv) == len(seconds) == epochs
        assert all(a <= b for a, b in zip(hv, hv[1:], strict=False))  # never decreases
        assert all(a <= b for a, b in zip(seconds, seconds[1:], strict=False))
        assert 0 < hv[-1] < 1 and 0 < seconds[-1] <= run["wall"]
        finals[run["method"]] = hv[-1]
    rs = next(r for r in record["runs"] if r["method"] == "random")
    assert rs["trials"] >= 3  # 9 epochs a trial: at least 3 trials for 27 epochs
    # the report's hypervolume of the whole study is the benchmark's of every epoch it read
    ref = tuple(record["reference"])
    for method in mo.OURS:
        storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(
            str(out / f"{method}-seed0.journal")))
        study = optuna.load_study(study_name=f"{method}-seed0", storage=storage)
        frame = hypervolume_frame(study, reference=ref)
        ours = mo.hypervolume_curve(mo.stream(mo.study_points(study.trials)), ref)
        assert frame["hypervolume"].iloc[-1] == pytest.approx(ours[-1], rel=1e-9)
        assert ours[epochs - 1] / (ref[0] * ref[1]) == pytest.approx(finals[method], rel=1e-9)


# -- bench_multiobjective --replay: two-objective curves measured once, replayed --------------


def test_bench_multiobjective_committed_table() -> None:
    """The committed table: >= 200 configurations of 27 epochs, each with its parameter count
    (LeNet's at its width), within the reference point's box."""
    import bench_multiobjective as mo

    table = mo.MOTable.load(mo.TABLE)
    assert table.max_epochs == mo.TABLE_EPOCHS == 27 and len(table.params) >= 200
    assert list(table.curves) == ["validation_error"]
    assert mo.lenet_parameters(2.0) == mo.LARGEST and mo.reference() == mo.REPLAY_REFERENCE
    for params, count in list(zip(table.params, table.parameters, strict=True))[:5]:
        assert count == mo.lenet_parameters(params["width"])
    assert all(0 < count <= mo.LARGEST for count in table.parameters)
    assert all(0 <= v <= 1 for curve in table.curves["validation_error"] for v in curve)
    with pytest.raises(ValueError, match="one entry a configuration"):
        mo.MOTable(table.problem, table.machine, table.params, table.curves,
                   table.epoch_seconds, table.start_seconds, table.checkpoint_seconds,
                   table.checkpoint_bytes, table.parameters[:-1])


def test_bench_multiobjective_replay_is_consistent_and_uses_the_library() -> None:
    """Two seeds on the committed table: hypervolume never decreases, random search's ratio is
    1, every method trains the same configurations in the same order, promotion and sync SH are
    the library's schedules, and every stopping decision is ``ASHAPruner``'s, the same as
    ``asha_continues`` at the trial's place in ``pareto_order`` over the rung's records."""
    import bench_multiobjective as mo
    import bench_schedules

    from lightning_hpo.pareto import pareto_order
    from lightning_hpo.pruners import ASHAPruner, asha_continues
    from lightning_hpo.schedules import PromotionASHA, StopSchedule, SyncSuccessiveHalving

    table = mo.MOTable.load(mo.TABLE)
    budget = bench_schedules.default_budget(table, 2) / 3  # a third: a cheap test
    assert isinstance(mo.replay_schedule("moasha-promotion", 27), PromotionASHA)
    assert mo.replay_schedule("moasha-promotion", 27).minimize == (True, True)
    assert isinstance(mo.replay_schedule("sync-sh", 27), SyncSuccessiveHalving)
    assert isinstance(mo.replay_schedule("moasha-stop", 27), StopSchedule)
    for seed in (0, 1):
        runs = {m: mo.replay(table, m, seed, budget) for m in mo.REPLAY_METHODS}
        for run in runs.values():
            assert run.epochs == len(run.run.events) > 0
            assert all(a <= b for a, b in zip(run.curve, run.curve[1:], strict=False))
            assert 0 < run.final < 1 and run.times == sorted(run.times)
            assert run.times[-1] <= budget
            firsts = sorted((e.trial, e.time) for e in run.run.events if e.epoch == 1)
            assert [t for t, _ in firsts] == list(range(len(firsts)))  # trials in order
        rs = runs["random"]
        assert all(e.epoch <= 27 for e in rs.run.events) and rs.stopper is None
        outcome = mo.replay_outcome(seed, runs)
        assert outcome.target == rs.final and outcome.ratio("random") == 1.0
        assert outcome.epochs["random"] <= rs.epochs
        stop = runs["moasha-stop"].stopper
        assert isinstance(stop.pruner, ASHAPruner) and stop.log
        records: dict[int, dict[int, tuple[float, ...]]] = {}
        for trial, epoch, values, keep in stop.log:
            at_rung = records.setdefault(epoch, {})
            at_rung[trial] = values
            if len(at_rung) <= 120:
                position = pareto_order(at_rung, (True, True)).index(trial)
                assert keep == asha_continues(len(at_rung), position, 3)
        pruned = {t: epoch for t, epoch, _, keep in stop.log if not keep}
        last: dict[int, int] = {}
        for e in runs["moasha-stop"].run.events:
            last[e.trial] = max(last.get(e.trial, 0), e.epoch)
        assert pruned and all(last[t] == epoch for t, epoch in pruned.items())  # stopped there


def test_bench_multiobjective_replay_runs_and_writes_its_figures(tmp_path: Path,
                                                                  capsys: Any) -> None:
    import bench_multiobjective as mo

    out = tmp_path / "figures.json"
    assert mo.main(["--replay", "2", "--budget", "12", "--jobs", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Spearman" in text and "| MO-ASHA promotion |" in text
    figures = read_figures(out)
    assert [f.target for f in figures] == ["<= 1/3", "<= 1/3"]
    assert all(f.met in (True, False) for f in figures)
    assert mo.main(["--replay", "2", "--table", str(tmp_path / "missing.json")]) == 2
    with pytest.raises(SystemExit):
        mo.main(["--replay", "0"])
    with pytest.raises(SystemExit):
        mo.main(["--replay", "2", "--min-resource", "27"])
    assert mo.main(["--replay", "1", "--budget", "8", "--jobs", "1", "--min-resource", "3"]) == 0
    assert "rungs 3/9/27" in capsys.readouterr().out
