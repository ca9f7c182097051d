"""Pruning decision cost: lightning_hpo's ASHAPruner against Optuna's SuccessiveHalvingPruner.

Both pruners decide on the same study (same storage, same rung history, min_resource=1,
reduction_factor=3, so rungs at epochs 1, 3 and 9), for studies of 1,000 and 10,000 finished
trials with 10 intermediate values each, on SQLite and on a journal file. The history is one
simulated ASHA run: pruned trials stop at their rung, and each trial's rung values are stored
both as our rung records and as Optuna's ``completed_rung_*`` trial system attributes.

Modes:

* ``warm``: in one process, new trials report epochs 1..10 and ``trial.should_prune()`` is timed
  after each report (the median over every report, and over rung reports only, ``warm rung``).
* ``fresh``: a new process imports, loads the study, asks a trial, reports epoch 1 and decides;
  ``fresh 1st`` is that first decision alone, ``fresh all`` everything after interpreter start
  (import + load + ask + decision). Median of a few processes.

It prints one table (ratio = Optuna / ours, above 1 means ours is faster; growth = ours at the
largest size / ours at the smallest) and checks the targets on the decision rows (``warm all``,
``warm rung``, ``fresh 1st``): ours no slower than Optuna's, at most 5 ms per warm decision on
SQLite at the largest size, and growth under 2x. ``fresh all`` is dominated by Optuna's own
loading of the study, the same for both pruners, and is shown for context.

Usage::

    python benchmarks/bench_pruner.py            # 1,000 and 10,000 trials (a few minutes)
    python benchmarks/bench_pruner.py --quick    # 300 and 3,000 trials (under a minute)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left, insort
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _record import Figure, machine_line, write_figures

_STUDY = "bench"
_MIN_RESOURCE, _ETA, _STEPS = 1, 3, 10
_LEVELS = (1, 3, 9)  # rungs below the last reported epoch
_REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass
class _Trial:
    """One simulated finished trial: its curve, where it stopped, its rung values."""

    curve: list[float]
    pruned_at: int | None
    rung_values: dict[int, float]  # rung level (epochs) -> value recorded there


def _curve(rng: random.Random) -> list[float]:
    """A validation-error curve over 10 epochs: a per-trial floor plus a decaying gap."""
    floor, gap = rng.uniform(0.02, 0.6), rng.uniform(0.1, 0.6)
    return [floor + gap / step + rng.gauss(0.0, 0.005) for step in range(1, _STEPS + 1)]


def _history(n_trials: int, seed: int = 0) -> list[_Trial]:
    """An ASHA run (minimize, rungs 1, 3, 9, keep 1 in 3) over ``n_trials`` sequential trials."""
    from lightning_hpo.pruners import asha_continues

    rng = random.Random(seed)
    at_rung: dict[int, list[float]] = {level: [] for level in _LEVELS}
    trials = []
    for _ in range(n_trials):
        curve, pruned_at, rung_values = _curve(rng), None, {}
        for level in _LEVELS:
            value = curve[level - 1]
            rung_values[level] = value
            insort(at_rung[level], value)
            n_better = bisect_left(at_rung[level], value)
            if not asha_continues(len(at_rung[level]), n_better, _ETA):
                pruned_at = level
                break
        trials.append(_Trial(curve, pruned_at, rung_values))
    return trials


# -- building the studies ---------------------------------------------------------------------


def _open(kind: str, path: str) -> Any:
    import optuna

    if kind == "sqlite":
        return optuna.storages.RDBStorage(f"sqlite:///{path}")
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))


def _build(kind: str, path: str, history: list[_Trial]) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = _open(kind, path)
    study = optuna.create_study(study_name=_STUDY, storage=storage)
    if kind == "sqlite":
        _bulk_insert_sqlite(storage, study, history)
    else:
        _add_to_journal(storage, study, history)


def _bulk_insert_sqlite(storage: Any, study: Any, history: list[_Trial]) -> None:
    """Insert the trials with SQL in a few statements: Optuna's add_trials takes ~27 ms each."""
    import sqlalchemy as sa

    import lightning_hpo.pruners._table as _rung_table
    from lightning_hpo._optuna import study_id_of

    engine, study_id = storage.engine, study_id_of(study)
    meta = sa.MetaData()
    names = ("trials", "trial_values", "trial_intermediate_values", "trial_system_attributes")
    meta.reflect(engine, only=names)
    trials, values, intermediates, attrs = (meta.tables[name] for name in names)
    now = dt.datetime.now()
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    records = []
    for number, trial in enumerate(history):
        trial_id = number + 1  # a fresh database with one study
        last = trial.pruned_at or _STEPS
        rows["trials"].append({
            "trial_id": trial_id, "number": number, "study_id": study_id,
            "state": "PRUNED" if trial.pruned_at else "COMPLETE",
            "datetime_start": now, "datetime_complete": now,
        })
        if not trial.pruned_at:
            rows["trial_values"].append({"trial_id": trial_id, "objective": 0,
                                         "value": trial.curve[-1], "value_type": "FINITE"})
        rows["trial_intermediate_values"].extend(
            {"trial_id": trial_id, "step": step, "intermediate_value": trial.curve[step - 1],
             "intermediate_value_type": "FINITE"}
            for step in range(1, last + 1)
        )
        for index, (level, value) in enumerate(sorted(trial.rung_values.items())):
            rows["trial_system_attributes"].append(
                {"trial_id": trial_id, "key": f"completed_rung_{index}",
                 "value_json": json.dumps(value)}
            )
            records.append({"study_id": study_id, "bracket": 0, "rung": level,
                            "trial_number": number, "value": value})
    _rung_table._ensure_table(engine)
    with engine.begin() as conn:
        for table in (trials, values, intermediates, attrs):
            conn.execute(table.insert(), rows[table.name])
        conn.execute(_rung_table._records.insert(), records)


def _add_to_journal(storage: Any, study: Any, history: list[_Trial]) -> None:
    """Add the trials through Optuna's API and the records as study system attributes."""
    from optuna.trial import TrialState, create_trial

    from lightning_hpo._optuna import study_id_of
    from lightning_hpo.pruners._store import _attr_key

    frozen = []
    for trial in history:
        last = trial.pruned_at or _STEPS
        frozen.append(create_trial(
            state=TrialState.PRUNED if trial.pruned_at else TrialState.COMPLETE,
            value=None if trial.pruned_at else trial.curve[-1],
            intermediate_values={step: trial.curve[step - 1] for step in range(1, last + 1)},
            system_attrs={f"completed_rung_{index}": value for index, (_, value)
                          in enumerate(sorted(trial.rung_values.items()))},
        ))
    study.add_trials(frozen)
    study_id = study_id_of(study)
    for number, trial in enumerate(history):
        for level, value in trial.rung_values.items():
            storage.set_study_system_attr(study_id, _attr_key(0, level, number), value)


# -- measuring ------------------------------------------------------------------------------


def _pruner(name: str) -> Any:
    import optuna

    from lightning_hpo.pruners import ASHAPruner

    if name == "ours":
        return ASHAPruner(min_resource=_MIN_RESOURCE, reduction_factor=_ETA)
    return optuna.pruners.SuccessiveHalvingPruner(
        min_resource=_MIN_RESOURCE, reduction_factor=_ETA, min_early_stopping_rate=0
    )


def _warm(kind: str, paths: dict[str, str], curves: list[list[float]]) -> dict[str, dict]:
    """Median ms of should_prune() after every report and after rung reports, in one process.

    Both pruners run in turn, curve by curve, each on its own copy of the study, so that load
    from other processes on the machine falls on both alike.
    """
    import optuna

    studies = {
        name: optuna.load_study(study_name=_STUDY, storage=_open(kind, path),
                                pruner=_pruner(name), sampler=optuna.samplers.RandomSampler(0))
        for name, path in paths.items()
    }
    every: dict[str, list[float]] = {name: [] for name in paths}
    at_rungs: dict[str, list[float]] = {name: [] for name in paths}
    for index, curve in enumerate(curves):
        names = list(paths) if index % 2 == 0 else list(reversed(paths))
        for name in names:
            study = studies[name]
            trial = study.ask()
            for step in range(1, _STEPS + 1):
                trial.report(curve[step - 1], step)
                start = time.perf_counter()
                pruned = trial.should_prune()
                elapsed = (time.perf_counter() - start) * 1e3
                if index > 0:  # the first trial warms caches (Optuna loads every trial)
                    every[name].append(elapsed)
                    if step in _LEVELS:
                        at_rungs[name].append(elapsed)
                if pruned:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    break
            else:
                study.tell(trial, curve[-1])
    return {
        name: {"warm all": statistics.median(every[name]),
               "warm rung": statistics.median(at_rungs[name])}
        for name in paths
    }


def _child(kind: str, path: str, name: str) -> None:
    """One fresh process: import, load, ask, report epoch 1, decide; print the timings (ms)."""
    start = time.perf_counter()
    import optuna

    import lightning_hpo.pruners._asha  # noqa: F401

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=_STUDY, storage=_open(kind, path), pruner=_pruner(name),
                              sampler=optuna.samplers.RandomSampler(seed=1))
    trial = study.ask()
    trial.report(0.5, 1)
    decide = time.perf_counter()
    trial.should_prune()
    end = time.perf_counter()
    study.tell(trial, state=optuna.trial.TrialState.FAIL)  # leave the history as it was
    print(json.dumps({"fresh 1st": (end - decide) * 1e3, "fresh all": (end - start) * 1e3}))


def _fresh(kind: str, paths: dict[str, str], repeats: int) -> dict[str, dict[str, float]]:
    """Median timings of fresh processes, the pruners taking turns."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
    for repeat in range(repeats):
        for name in list(paths) if repeat % 2 == 0 else list(reversed(paths)):
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, paths[name], name],
                capture_output=True, text=True, check=True, cwd=_REPO_ROOT,
            )
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        name: {key: statistics.median(run[key] for run in done) for key in done[0]}
        for name, done in runs.items()
    }


# -- report ---------------------------------------------------------------------------------

_MODES = ("warm all", "warm rung", "fresh 1st", "fresh all")
_DECISION_MODES = ("warm all", "warm rung", "fresh 1st")
# "fresh all" is import + load_study + ask + one decision: Optuna's loading of the study is the
# same code for both pruners and dominates it, so it is shown for context, not compared.


def _report(
    results: dict[tuple[str, int, str, str], float], sizes: list[int]
) -> tuple[bool, list[Figure]]:
    small, large = min(sizes), max(sizes)
    header = (f"{'storage':<8} {'trials':>7} {'mode':<10} {'ours ms':>9} {'optuna ms':>10} "
              f"{'optuna/ours':>12} {'growth':>7}")
    print(header)
    print("-" * len(header))
    slower, growth_miss, context = [], [], []
    for kind in ("sqlite", "journal"):
        for size in sizes:
            for mode in _MODES:
                ours = results[(kind, size, mode, "ours")]
                theirs = results[(kind, size, mode, "optuna")]
                growth = ""
                if size == large and size != small:
                    ratio = ours / results[(kind, small, mode, "ours")]
                    growth = f"{ratio:.2f}x"
                    if mode in _DECISION_MODES and ratio >= 2.0:
                        growth_miss.append(f"{kind} {mode} {ratio:.2f}x")
                if mode in _DECISION_MODES and ours > theirs:
                    slower.append(f"{kind} {size} {mode}")
                if mode not in _DECISION_MODES:
                    context.append(theirs / ours)
                print(f"{kind:<8} {size:>7} {mode:<10} {ours:>9.3f} {theirs:>10.3f} "
                      f"{theirs / ours:>11.2f}x {growth:>7}")
    sqlite_all = results[("sqlite", large, "warm all", "ours")]
    sqlite_rung = results[("sqlite", large, "warm rung", "ours")]
    targets = [
        ("ours no slower than Optuna's in every decision row", not slower,
         "slower: " + ", ".join(slower) if slower else ""),
        (f"<= 5 ms median warm decision (every report) on SQLite at {large:,} trials",
         sqlite_all <= 5.0, f"{sqlite_all:.2f} ms"),
        (f"<= 5 ms median warm rung decision on SQLite at {large:,} trials",
         sqlite_rung <= 5.0, f"{sqlite_rung:.2f} ms"),
        (f"growth {small:,} -> {large:,} trials under 2x (decision rows)", not growth_miss,
         ", ".join(growth_miss)),
    ]
    print()
    for text, ok, detail in targets:
        print(f"{'PASS' if ok else 'MISS'}  {text}" + (f"  ({detail})" if detail else ""))
    print(f"INFO  fresh all (import + load + ask + decision, Optuna's load dominates): "
          f"optuna/ours {min(context):.2f}x to {max(context):.2f}x")
    figures = []
    for kind, mode in (("sqlite", "warm rung"), ("journal", "warm rung"),
                       ("sqlite", "fresh 1st"), ("journal", "fresh 1st")):
        ours, theirs = results[(kind, large, mode, "ours")], results[(kind, large, mode, "optuna")]
        growth = ours / results[(kind, small, mode, "ours")]
        limit = kind == "sqlite" and mode == "warm rung"
        target = "no slower" + (", <= 5 ms" if limit else "") + ", growth < 2x"
        met = ours <= theirs and growth < 2.0 and (ours <= 5.0 or not limit)
        figures.append(Figure(
            f"ASHA decision, {kind}, {large:,} trials, {mode}", "bench_pruner.py",
            f"{ours:.2f} ms (growth {growth:.2f}x from {small:,})",
            f"{theirs:.2f} ms Optuna SH", f"{theirs / ours:.2f}x faster", target, met))
    return all(ok for _, ok, _ in targets), figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 and 3,000 trials, fewer runs")
    parser.add_argument("--sizes", type=int, nargs="+", help="study sizes (finished trials)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "PATH", "PRUNER"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    sizes = args.sizes or ([300, 3000] if args.quick else [1000, 10_000])
    n_curves, repeats = (12, 2) if args.quick else (40, 4)
    rng = random.Random(42)
    curves = [_curve(rng) for _ in range(n_curves)]
    results: dict[tuple[str, int, str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-pruner-") as tmp:
        for kind in ("sqlite", "journal"):
            for size in sizes:
                started = time.perf_counter()
                history = _history(size)
                path = str(Path(tmp) / f"{kind}-{size}.{'db' if kind == 'sqlite' else 'log'}")
                _build(kind, path, history)
                built = time.perf_counter() - started
                # each pruner adds its own trials: each decides on its own copy of the study
                paths = {}
                for name in ("ours", "optuna"):
                    paths[name] = f"{path}.{name}"
                    Path(paths[name]).write_bytes(Path(path).read_bytes())
                warm, fresh = _warm(kind, paths, curves), _fresh(kind, paths, repeats)
                for name in paths:
                    for mode, ms in {**warm[name], **fresh[name]}.items():
                        results[(kind, size, mode, name)] = ms
                print(f"# {kind} {size:,} trials: built in {built:.1f} s, measured in "
                      f"{time.perf_counter() - started - built:.1f} s", file=sys.stderr)
    print(machine_line())
    ok, figures = _report(results, sizes)
    write_figures(args.json, figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
