"""The benchmarks' own logic (epoch streams, throughput, the figures table), and the cheap
benchmarks run for real in their smallest mode so that ``make bench`` cannot rot unnoticed.
No timing threshold is asserted anywhere: the figures are the scripts' output, not tests."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
from optuna.trial import TrialState

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

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
