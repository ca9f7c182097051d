"""Search efficiency: asynchronous random search vs ASHA vs Hyperband, same space, same budget.

What is measured: LeNet on scikit-learn's digits, the quickstart's search space (lr loguniform
[0.01, 1], batch_size randint [32, 256], momentum uniform [0, 0.9], activation choice [relu,
sigmoid]), at most 9 epochs a trial, the same initial configuration first (lr=0.1,
batch_size=128, momentum=0, activation=relu), a random sampler seeded with the run's seed, 2
CPU workers (one slot per core, one torch thread each) and the same wall-clock budget
(``stop.max_wallclock_time``, no ``n_trials``) for three methods:

* ``random``: asynchronous random search, no pruning: every trial trains 9 epochs;
* ``asha``: our ``ASHAPruner`` (min_resource 1, reduction_factor 3, max_resource 9: rungs 1, 3, 9);
* ``hyperband``: our ``HyperbandPruner`` (min_resource 1, max_resource 9, reduction_factor 3).

How: each (method, seed) is its own study, in its own journal file under ``--out``
(``<method>-seed<N>.journal``, kept for ``python -m lightning_hpo.report``), run by the
launcher's own ``Supervisor`` in this process. Afterwards every study is turned into one
time-ordered stream of epoch events: each trial's intermediate values (``validation_error`` after
epoch 1, 2, ...) with the time that epoch ended (the ``epoch_end_times`` user attribute), merged
over all trials and sorted by time, cut at the budget. The incumbent is the best value of any
epoch so far (the launcher keeps each trial's best checkpoint, so it is a model one has); the
compute is the number of epochs in the stream so far, summed over all trials in the order they
were reported. The script prints, per method and seed, the incumbent at 25/50/75/100 % of the
budget, and the epochs each method needed to reach random search's final best of the same seed;
the baseline is random search's own epochs to first reach that value. The ratio is
``method epochs / random epochs`` (below 1: fewer epochs than random search), with the median
over seeds.

Target (issue 6): ASHA reaches random search's final best with at most a third of its epochs
(median ratio <= 0.33). Hyperband's ratio is printed beside it (no target).

    python benchmarks/bench_search.py               # 3 methods x seeds 0 1 2 x 60 s (~11 min)
    python benchmarks/bench_search.py --quick       # 3 methods x seed 0 x 20 s (~1.5 min)
    python benchmarks/bench_search.py --seeds 0 1 2 3 4 --budget 120
    python benchmarks/bench_search.py --analyze-only       # re-read the journals in --out

Compare the stored studies afterwards, e.g. for seed 0::

    python -m lightning_hpo.report --compare random-seed0@runs/bench_search/random-seed0.journal \\
        asha-seed0@runs/bench_search/asha-seed0.journal
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from _record import Figure, machine_line, write_figures
from optuna.trial import FrozenTrial, TrialState

METHODS = ("random", "asha", "hyperband")
MAX_EPOCHS = 9
TARGET_RATIO = 0.33
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: Study user attributes this benchmark writes (when the run started, its budget).
T0_ATTR, BUDGET_ATTR = "lightning_hpo:bench_t0", "lightning_hpo:bench_budget"
EPOCH_END_TIMES = "epoch_end_times"  # lightning_hpo.launch.study.ATTR.EPOCH_END_TIMES
SPACE = {
    "lr": {"loguniform": [0.01, 1.0]},
    "batch_size": {"randint": [32, 256]},
    "momentum": {"uniform": [0.0, 0.9]},
    "activation": {"choice": ["relu", "sigmoid"]},
}
INITIAL = {"lr": 0.1, "batch_size": 128, "momentum": 0.0, "activation": "relu"}


# -- the pure part: trials -> one time-ordered stream of epochs ------------------------------


@dataclass(frozen=True)
class EpochEvent:
    """One reported epoch of one trial: when it ended (unix s), which, and its value."""

    time: float
    trial: int
    epoch: int
    value: float


def epoch_events(
    trials: Iterable[FrozenTrial], until: float | None = None
) -> list[EpochEvent]:
    """Every reported epoch of every trial, merged into one stream sorted by time.

    An epoch is an intermediate value at step ``epoch`` (counted from 1) together with the
    ``epoch`` -th entry of the trial's ``epoch_end_times`` user attribute. Epochs without an end
    time (a worker killed before it could write them) are left out; so are epochs that ended
    after ``until`` (unix s). Ties are broken by trial number, then epoch.

    Example::

        >>> t = optuna.trial.create_trial(state=TrialState.COMPLETE, value=0.3,
        ...     intermediate_values={1: 0.5, 2: 0.3}, user_attrs={"epoch_end_times": [10.0, 11.0]})
        >>> [(e.time, e.epoch, e.value) for e in epoch_events([t])]
        [(10.0, 1, 0.5), (11.0, 2, 0.3)]
    """
    events = []
    for trial in trials:
        times = trial.user_attrs.get(EPOCH_END_TIMES) or []
        for step, value in trial.intermediate_values.items():
            if not 1 <= step <= len(times):
                continue
            ended = float(times[step - 1])
            if until is None or ended <= until:
                events.append(EpochEvent(ended, trial.number, step, float(value)))
    events.sort(key=lambda e: (e.time, e.trial, e.epoch))
    return events


def best_until(events: Sequence[EpochEvent], until: float) -> float | None:
    """The lowest finite value among the events that ended at or before ``until`` (None: none)."""
    values = [e.value for e in events if e.time <= until and math.isfinite(e.value)]
    return min(values) if values else None


def final_best(events: Sequence[EpochEvent]) -> float | None:
    """The lowest finite value in the stream (None when it has none)."""
    return best_until(events, math.inf)


def epochs_to_reach(events: Sequence[EpochEvent], target: float) -> tuple[int, float] | None:
    """Epochs spent (all trials, in time order) until a value <= ``target`` was first reported.

    Returns ``(epochs, time)``: the 1-based position of that event in the stream and its time;
    None when no event reaches the target.

    Example::

        >>> ev = [EpochEvent(1.0, 0, 1, 0.9), EpochEvent(2.0, 1, 1, 0.4),
        ...       EpochEvent(3.0, 0, 2, 0.3)]
        >>> epochs_to_reach(ev, 0.4)
        (2, 2.0)
    """
    for position, event in enumerate(events, start=1):
        if event.value <= target:
            return position, event.time
    return None


def median_ratio(ratios: Sequence[float]) -> float:
    """Median of per-seed ratios; a seed that never reached the target counts as +inf."""
    return statistics.median(ratios) if ratios else math.nan


# -- running one study ----------------------------------------------------------------------


def study_name(method: str, seed: int) -> str:
    """``asha-seed0``: the study (and journal file) name of one run."""
    return f"{method}-seed{seed}"


def build_config(
    method: str, seed: int, budget: float, storage: str, run_dir: str, workers: int,
    initial: bool = True,
) -> dict[str, Any]:
    """The launcher config of one (method, seed) run, as the raw mapping."""
    pruner: Any = "none"
    trainer: dict[str, Any] = {}
    if method == "random":
        trainer = {"max_epochs": MAX_EPOCHS}
    else:
        pruner = {"name": method, "min_resource": 1, "max_resource": MAX_EPOCHS,
                  "reduction_factor": 3}
    return {
        "study": study_name(method, seed), "storage": storage, "run_dir": run_dir,
        "model": {"name": "lenet"}, "data": {"name": "digits"},
        "metric": "validation_error", "direction": "minimize",
        "space": SPACE, "initial": [INITIAL] if initial else [],
        "sampler": {"name": "random", "seed": seed}, "pruner": pruner, "trainer": trainer,
        "devices": {"accelerator": "cpu", "count": workers, "per_trial": 1,
                    "trials_per_device": 1},
        "stop": {"max_wallclock_time": budget},
    }


def run_study(raw: dict[str, Any]) -> tuple[float, float]:
    """Run one study with the launcher's supervisor; returns (start unix s, wall s)."""
    from lightning_hpo.config import parse_config
    from lightning_hpo.launch.devices import detect_devices, plan_slots
    from lightning_hpo.launch.study import open_study
    from lightning_hpo.launch.supervisor import Supervisor
    from lightning_hpo.storage import open_storage

    cfg = parse_config(raw)
    kind, n_devices = detect_devices(cfg.devices.accelerator, cfg.devices.count)
    slots = plan_slots(n_devices, cfg.devices.per_trial, cfg.devices.trials_per_device)
    study, created = open_study(cfg, open_storage(cfg.storage))
    if not created:
        raise SystemExit(f"study '{cfg.study}' already exists in {cfg.storage}")
    sup = Supervisor(cfg, study, slots, kind, n_cores=n_devices)
    study.set_user_attr(T0_ATTR, sup.started)
    study.set_user_attr(BUDGET_ATTR, cfg.stop.max_wallclock_time)
    sup.run()
    return sup.started, time.time() - sup.started


# -- analysis and printing ------------------------------------------------------------------


@dataclass
class RunResult:
    """One (method, seed) study after the run."""

    method: str
    seed: int
    t0: float
    budget: float
    events: list[EpochEvent]
    counts: dict[str, int]
    fail_reasons: list[str]


def load_result(storage: str, method: str, seed: int) -> RunResult:
    """Read one stored study back and build its epoch stream (cut at the budget)."""
    from lightning_hpo.storage import open_storage

    study = optuna.load_study(study_name=study_name(method, seed),
                              storage=open_storage(storage, create=False))
    t0, budget = study.user_attrs.get(T0_ATTR), study.user_attrs.get(BUDGET_ATTR)
    trials = study.get_trials(deepcopy=False)
    if t0 is None or budget is None:
        raise SystemExit(f"{storage}: study {study_name(method, seed)} was not written by "
                         "this script (no start time); run it without --analyze-only")
    counts: dict[str, int] = {}
    for trial in trials:
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    reasons = [str(t.user_attrs.get("fail_reason")) for t in trials
               if t.state == TrialState.FAIL
               and not str(t.user_attrs.get("fail_reason", "")).startswith("interrupted")]
    return RunResult(method, seed, float(t0), float(budget),
                     epoch_events(trials, until=float(t0) + float(budget)), counts, reasons)


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _ratio_text(value: float) -> str:
    return "not reached" if math.isinf(value) else f"{value:.2f}"


def report(results: dict[tuple[str, int], RunResult], methods: Sequence[str],
           seeds: Sequence[int]) -> tuple[bool, list[Figure]]:
    """Print the tables and the target line; returns whether the target was met, and the
    headline figures (each method's median epochs ratio)."""
    head = "  ".join(f"{f'best@{int(f * 100)}%':>9}" for f in FRACTIONS)
    print("\nIncumbent (best validation_error of any epoch so far) over the budget")
    print(f"{'method':<10} {'seed':>4} {'trials':>6} {'cmpl':>5} {'prun':>5} {'fail':>5} "
          f"{'epochs':>7}  {head}")
    for seed in seeds:
        for method in methods:
            r = results[(method, seed)]
            bests = "  ".join(f"{_fmt(best_until(r.events, r.t0 + f * r.budget)):>9}"
                              for f in FRACTIONS)
            print(f"{method:<10} {seed:>4} {sum(r.counts.values()):>6} "
                  f"{r.counts.get('COMPLETE', 0):>5} {r.counts.get('PRUNED', 0):>5} "
                  f"{r.counts.get('FAIL', 0):>5} {len(r.events):>7}  {bests}")
    print("\nCompute to reach random search's final best of the same seed "
          "(epochs summed over all trials in report order)")
    print(f"{'seed':>4} {'target':>8} {'method':<10} {'epochs':>7} {'seconds':>8} "
          f"{'random epochs':>14} {'ratio':>12}")
    ratios: dict[str, list[float]] = {m: [] for m in methods if m != "random"}
    for seed in seeds:
        base = results[("random", seed)]
        target = final_best(base.events)
        if target is None:
            print(f"{seed:>4} random search reported no epoch within the budget: no target")
            for method in ratios:
                ratios[method].append(math.inf)
            continue
        own = epochs_to_reach(base.events, target)
        assert own is not None  # the target is a value of this stream
        for method in methods:
            r = results[(method, seed)]
            hit = epochs_to_reach(r.events, target)
            ratio = math.inf if hit is None else hit[0] / own[0]
            if method != "random":
                ratios[method].append(ratio)
            epochs = "-" if hit is None else str(hit[0])
            seconds = "-" if hit is None else f"{hit[1] - r.t0:.1f}"
            print(f"{seed:>4} {target:>8.4f} {method:<10} {epochs:>7} {seconds:>8} "
                  f"{own[0]:>14} {_ratio_text(ratio):>12}")
    print()
    figures = []
    for method, values in ratios.items():
        per_seed = ", ".join(_ratio_text(v) for v in values)
        print(f"{method} epochs / random epochs: median {_ratio_text(median_ratio(values))} "
              f"over {len(values)} seed(s) ({per_seed})")
        target = f"<= {TARGET_RATIO}" if method == "asha" else "-"
        met = median_ratio(values) <= TARGET_RATIO if method == "asha" else None
        figures.append(Figure(
            f"{method}: epochs to reach random search's best ({len(values)} seeds)",
            "bench_search.py", f"ratios {per_seed}", "random search's own epochs",
            _ratio_text(median_ratio(values)), target, met))
    if "asha" not in ratios:
        return True, figures
    asha = median_ratio(ratios["asha"])
    ok = asha <= TARGET_RATIO
    print(f"{'PASS' if ok else 'MISS'}  ASHA reaches random search's final best with <= "
          f"{TARGET_RATIO} of its epochs (median over {len(ratios['asha'])} seed(s): "
          f"{_ratio_text(asha)})")
    return ok, figures


def write_plot(out: Path, methods: Sequence[str], seeds: Sequence[int]) -> None:
    """``incumbent_compare.png`` through lightning_hpo.report when it is there; else the command."""
    refs = [f"{study_name(m, s)}@{out / (study_name(m, s) + '.journal')}"
            for s in seeds for m in methods]
    try:
        import pandas as pd

        from lightning_hpo.report import incumbent_frame, load_ref, plot_compare, study_info
    except ImportError:
        print("plot: python -m lightning_hpo.report --compare " + " ".join(refs))
        return
    studies = [load_ref(ref) for ref in refs]
    long = pd.concat([incumbent_frame(s).assign(study=s.study_name) for s in studies])
    path = out / "incumbent_compare.png"
    plot_compare(long, study_info(studies[0])).savefig(path)
    print(f"plot: {path} (report incumbents: best value reported at any epoch)")
    first_seed = " ".join(refs[: len(methods)])
    print(f"      one seed: python -m lightning_hpo.report --compare {first_seed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python benchmarks/bench_search.py --seeds 0 1 2 --budget 60",
    )
    parser.add_argument("--budget", type=float, default=None,
                        help="wall-clock seconds per run (default 60; 20 with --quick)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="sampler seeds (default 0 1 2; 0 with --quick)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                        help="methods to run (random is the baseline and always runs)")
    parser.add_argument("--workers", type=int, default=2, help="CPU slots (default 2)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_search"),
                        help="folder for the journal files (default runs/bench_search)")
    parser.add_argument("--no-initial", action="store_true",
                        help="leave out the initial configuration (for all methods)")
    parser.add_argument("--quick", action="store_true", help="seed 0, 20 s per run")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    parser.add_argument("--analyze-only", action="store_true",
                        help="do not run: analyse the journal files already in --out")
    args = parser.parse_args(argv)
    budget = args.budget or (20.0 if args.quick else 60.0)
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    methods = ["random", *[m for m in args.methods if m != "random"]]
    if budget <= 0 or args.workers < 1:
        parser.error("--budget and --workers must be positive")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(machine_line())
    print(f"LeNet on digits, quickstart space, <= {MAX_EPOCHS} epochs, {args.workers} CPU "
          f"workers x 1 thread, {budget:g} s per run, seeds {seeds}, initial configuration: "
          f"{'none' if args.no_initial else INITIAL}")
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, int], RunResult] = {}
    run_dir = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        for seed in seeds:
            for method in methods:
                journal = args.out / f"{study_name(method, seed)}.journal"
                if not args.analyze_only:
                    for stale in (journal, Path(f"{journal}.lock")):
                        stale.unlink(missing_ok=True)
                    raw = build_config(method, seed, budget, str(journal), str(run_dir),
                                       args.workers, initial=not args.no_initial)
                    _, wall = run_study(raw)
                    print(f"# {study_name(method, seed)}: {wall:.1f} s", file=sys.stderr,
                          flush=True)
                results[(method, seed)] = load_result(str(journal), method, seed)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    for r in results.values():
        for reason in sorted(set(r.fail_reasons))[:3]:
            print(f"note: {study_name(r.method, r.seed)} failed trial: {reason[:200]}")
    ok, figures = report(results, methods, seeds)
    write_figures(args.json, figures)
    write_plot(args.out, methods, seeds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
