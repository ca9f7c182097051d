"""Search efficiency: random vs model-based sampling (TPE, GP), each with and without ASHA.

What is measured: LeNet on scikit-learn's digits, the quickstart's search space (lr loguniform
[0.01, 1], batch_size randint [32, 256], momentum uniform [0, 0.9], activation choice [relu,
sigmoid]), at most 9 epochs a trial, the same initial configuration first (lr=0.1,
batch_size=128, momentum=0, activation=relu), 2 CPU workers (one slot per core, one torch
thread each). Each *arm* is a sampler and a pruner, all through the launcher as a user runs it
(``sampler: {name, seed}``, ``pruner:``):

* samplers (``--samplers``): ``random`` (Optuna's ``RandomSampler``), ``tpe``
  (``TPESampler``) and ``gp`` (``GPSampler``), all with Optuna's defaults (10 random start-up
  trials for TPE and GP), seeded with the run's seed;
* pruners (``--methods``): ``random`` (no pruner: every trial trains 9 epochs), ``asha`` (our
  ``ASHAPruner``, min_resource 1, reduction_factor 3, max_resource 9: rungs 1, 3, 9) and
  ``hyperband`` (our ``HyperbandPruner``, the same ladder).

An arm is named by its sampler and pruner (``tpe``, ``tpe-asha``, ``gp-asha``); with the random
sampler it keeps the pruner's name (``random``, ``asha``, ``hyperband``). ``random`` (random
sampler, no pruner) is the baseline and always runs. Every arm runs the same seeds.

**The budget** is the same for every arm. By default it is counted in epochs (``--epochs``,
summed over all trials; 270 unless told, 30 trials of 9 epochs): the launcher is stopped once
the trials have reported that many epochs and each stream is cut at exactly that many, so an
arm with ASHA runs more (shorter) trials in the same compute, and a slow sampler is not charged
for its thinking time (reported apart: the hand-over between trials, which holds the sampler's
``ask``). With ``--budget SECONDS`` alone the budget is wall-clock (``stop.max_wallclock_time``)
as in issue 6's runs: start-up and sampler time then count.

How: each (arm, seed) is its own study, in its own journal file under ``--out``
(``<arm>-seed<N>.journal``, kept for ``python -m lightning_hpo.report``), run by the launcher's
own ``Supervisor`` in this process. Afterwards every study is turned into one time-ordered
stream of epoch events: each trial's intermediate values (``validation_error`` after epoch 1,
2, ...) with the time that epoch ended (the ``epoch_end_times`` user attribute), merged over all
trials and sorted by time, cut at the budget. The incumbent is the best value of any epoch so
far (the launcher keeps each trial's best checkpoint, so it is a model one has); the compute is
the number of epochs in the stream so far, summed over all trials in the order they were
reported. The script prints, per arm and seed, the incumbent at 25/50/75/100 % of the budget
and the epochs each arm needed to reach random search's final best of the same seed (the
baseline is random search's own epochs to first reach that value; the ratio is ``arm epochs /
random epochs``, below 1: fewer epochs than random search); then one row per arm over the
seeds: trials run, final best (mean ± standard deviation), its difference to random search's,
the seeds where it is better / the same / worse, the median epochs to reach random search's
best, and the hand-over between trials (median and longest). It writes that summary as JSON
(``--summary``) and the incumbent plot (``--plot``: best so far vs epochs spent, one line per
arm, the mean over seeds).

Target (issue 6): ASHA (random sampler) reaches random search's final best with at most a
third of its epochs (median ratio <= 0.33). The other arms are printed beside it (no target).

    python benchmarks/bench_search.py               # 3 samplers x {none, ASHA} x seeds 0 1 2,
                                                    # 270 epochs each (~9 min on 2 idle cores)
    python benchmarks/bench_search.py --quick       # the same 6 arms, seed 0, 45 epochs (~2 min)
    python benchmarks/bench_search.py --samplers random --methods random asha hyperband \\
        --budget 60 --seeds 0 1 2 3 4 5             # issue 6's wall-clock run
    python benchmarks/bench_search.py --analyze-only       # re-read the journals in --out

Compare the stored studies afterwards, e.g. for seed 0::

    python -m lightning_hpo.report --compare random-seed0@runs/bench_search/random-seed0.journal \\
        tpe-asha-seed0@runs/bench_search/tpe-asha-seed0.journal
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import optuna
from _record import Figure, machine_line, write_figures
from optuna.trial import FrozenTrial, TrialState

SAMPLERS = ("random", "tpe", "gp")
#: The pruner side of an arm; ``random`` is no pruner (random search's historic name).
METHODS = ("random", "asha", "hyperband")
PRUNER_LABELS = {"random": "none", "asha": "ASHA", "hyperband": "Hyperband"}
BASELINE = "random"
MAX_EPOCHS = 9
TARGET_RATIO = 0.33
FRACTIONS = (0.25, 0.5, 0.75, 1.0)
DEFAULT_EPOCHS, QUICK_EPOCHS = 270, 45
#: Wall-clock stop (s) of a run whose budget is in epochs: a safety net only.
WALL_CAP = 1800.0
#: Study user attributes this benchmark writes (when the run started, its budgets, the
#: supervisor's hand-over gaps between trials).
T0_ATTR, BUDGET_ATTR = "lightning_hpo:bench_t0", "lightning_hpo:bench_budget"
EPOCHS_ATTR, GAPS_ATTR = "lightning_hpo:bench_epochs", "lightning_hpo:bench_gaps"
#: Optuna's default random start-up of TPESampler and GPSampler, and what each learns from.
N_STARTUP = 10
LEARNS_FROM = {"tpe": (TrialState.COMPLETE, TrialState.PRUNED), "gp": (TrialState.COMPLETE,)}
EPOCH_END_TIMES = "epoch_end_times"  # lightning_hpo.launch.study.creation.ATTR.EPOCH_END_TIMES
SPACE = {
    "lr": {"loguniform": [0.01, 1.0]},
    "batch_size": {"randint": [32, 256]},
    "momentum": {"uniform": [0.0, 0.9]},
    "activation": {"choice": ["relu", "sigmoid"]},
}
INITIAL = {"lr": 0.1, "batch_size": 128, "momentum": 0.0, "activation": "relu"}


def arm_name(sampler: str, method: str) -> str:
    """The name of one arm: sampler and pruner; the random sampler keeps the pruner's name.

    Example::

        >>> arm_name("tpe", "asha"), arm_name("gp", "random"), arm_name("random", "asha")
        ('tpe-asha', 'gp', 'asha')
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler is {sampler!r}, but must be one of {', '.join(SAMPLERS)}")
    if method not in METHODS:
        raise ValueError(f"method is {method!r}, but must be one of {', '.join(METHODS)}")
    if sampler == "random":
        return method
    return sampler if method == "random" else f"{sampler}-{method}"


def arm_parts(arm: str) -> tuple[str, str]:
    """``(sampler, method)`` of an arm name (the inverse of :func:`arm_name`).

    Example::

        >>> arm_parts("tpe-asha"), arm_parts("gp"), arm_parts("hyperband")
        (('tpe', 'asha'), ('gp', 'random'), ('random', 'hyperband'))
    """
    head, _, tail = arm.partition("-")
    sampler, method = (head, tail or "random") if head in SAMPLERS[1:] else ("random", arm)
    if arm_name(sampler, method) != arm:
        raise ValueError(f"arm is {arm!r}: not SAMPLER-METHOD of {SAMPLERS} and {METHODS}")
    return sampler, method

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


def incumbent_curve(events: Sequence[EpochEvent]) -> list[float]:
    """The best value so far after each epoch of the stream (NaN until a finite value came).

    Example::

        >>> incumbent_curve([EpochEvent(1.0, 0, 1, 0.5), EpochEvent(2.0, 1, 1, 0.7),
        ...                  EpochEvent(3.0, 0, 2, 0.2)])
        [0.5, 0.5, 0.2]
    """
    curve, best = [], math.inf
    for event in events:
        if math.isfinite(event.value):
            best = min(best, event.value)
        curve.append(best if math.isfinite(best) else math.nan)
    return curve


def mean_curve(curves: Sequence[Sequence[float]]) -> list[float]:
    """The mean of several incumbent curves, as long as the shortest (NaN where one is NaN).

    Example::

        >>> mean_curve([[0.5, 0.3, 0.1], [0.3, 0.3]])
        [0.4, 0.3]
    """
    if not curves:
        return []
    length = min(len(c) for c in curves)
    return [statistics.fmean(c[i] for c in curves) for i in range(length)]


def trials_run(events: Sequence[EpochEvent]) -> int:
    """How many trials reported at least one epoch in the stream (within the budget)."""
    return len({e.trial for e in events})


def model_guided(trials: Iterable[FrozenTrial], sampler: str) -> set[int]:
    """The trials a model-based sampler chose with its model, not in its random start-up.

    Optuna's TPE and GP samplers sample at random until ``n_startup_trials`` (10, their
    default) trials they learn from have finished: TPE learns from COMPLETE and PRUNED trials,
    GP from COMPLETE ones only (so under ASHA, where few trials complete, GP stays random
    longer). A trial counts as guided when that many had finished before it started (its
    parameters are drawn when it is asked); the random sampler guides none.

    Example::

        >>> import datetime as dt
        >>> at = lambda second: dt.datetime(2026, 1, 1, 0, 0, second)
        >>> trials = [optuna.trial.FrozenTrial(n, TrialState.PRUNED, None, at(n), at(n + 1),
        ...           {}, {}, {}, {}, {}, n) for n in range(10)]
        >>> trials.append(optuna.trial.FrozenTrial(10, TrialState.RUNNING, None, at(20), None,
        ...               {}, {}, {}, {}, {}, 10))
        >>> model_guided(trials, "tpe"), model_guided(trials, "gp"), model_guided(trials, "random")
        ({10}, set(), set())
    """
    if sampler not in LEARNS_FROM:
        return set()
    trials = list(trials)
    finished = sorted(t.datetime_complete for t in trials
                      if t.state in LEARNS_FROM[sampler] and t.datetime_complete is not None)
    return {t.number for t in trials if t.datetime_start is not None
            and bisect_right(finished, t.datetime_start) >= N_STARTUP}


class _Row(Protocol):
    """What the epoch count needs of a trial (``launch.processes.supervisor.TrialRow``)."""

    epochs: int
    from_epoch: int


def epochs_spent(rows: Iterable[_Row]) -> int:
    """Epochs the trials of a launcher run reported so far (a resumed segment counts from the
    epoch it resumed from).

    Example::

        >>> from types import SimpleNamespace as Row
        >>> epochs_spent([Row(epochs=9, from_epoch=0), Row(epochs=4, from_epoch=3)])
        10
    """
    return sum(max(0, row.epochs - row.from_epoch) for row in rows)


def stop_after_epochs(limit: int) -> Callable[[Any], None]:
    """An ``on_change`` hook for the launcher's ``Supervisor``: once its trials have reported
    ``limit`` epochs in all, it moves the supervisor's deadline to now, so the launcher stops
    there as at its wall-clock budget (``stop.grace`` 0: the running trials stop at once)."""

    def check(supervisor: Any) -> None:
        now = time.time()
        if epochs_spent(supervisor.rows.values()) >= limit and (
                supervisor.deadline is None or supervisor.deadline > now):
            supervisor.deadline = now

    return check


# -- running one study ----------------------------------------------------------------------


def study_name(arm: str, seed: int) -> str:
    """``tpe-asha-seed0``: the study (and journal file) name of one run."""
    return f"{arm}-seed{seed}"


def build_config(
    arm: str, seed: int, budget: float, storage: str, run_dir: str, workers: int,
    initial: bool = True,
) -> dict[str, Any]:
    """The launcher config of one (arm, seed) run, as the raw mapping; ``budget`` is the
    wall-clock stop in seconds."""
    sampler, method = arm_parts(arm)
    pruner: Any = "none"
    trainer: dict[str, Any] = {}
    if method == "random":
        trainer = {"max_epochs": MAX_EPOCHS}
    else:
        pruner = {"name": method, "min_resource": 1, "max_resource": MAX_EPOCHS,
                  "reduction_factor": 3}
    return {
        "study": study_name(arm, seed), "storage": storage, "run_dir": run_dir,
        "model": {"name": "lenet"}, "data": {"name": "digits"},
        "metric": "validation_error", "direction": "minimize",
        "space": SPACE, "initial": [INITIAL] if initial else [],
        "sampler": {"name": sampler, "seed": seed}, "pruner": pruner, "trainer": trainer,
        "devices": {"accelerator": "cpu", "count": workers, "per_trial": 1,
                    "trials_per_device": 1},
        "stop": {"max_wallclock_time": budget},
    }


def run_study(raw: dict[str, Any], epochs: int | None = None) -> tuple[float, float]:
    """Run one study with the launcher's supervisor, stopped after ``epochs`` epochs in all when
    given (else at its wall-clock budget); returns (start unix s, wall s)."""
    from lightning_hpo.launch.config import parse_config
    from lightning_hpo.launch.config.devices import detect_devices, plan_slots
    from lightning_hpo.launch.processes.supervisor import Supervisor
    from lightning_hpo.launch.study.creation import open_study
    from lightning_hpo.storage import open_storage

    cfg = parse_config(raw)
    kind, n_devices = detect_devices(cfg.devices.accelerator, cfg.devices.count)
    slots = plan_slots(n_devices, cfg.devices.per_trial, cfg.devices.trials_per_device)
    study, created = open_study(cfg, open_storage(cfg.storage))
    if not created:
        raise SystemExit(f"study '{cfg.study}' already exists in {cfg.storage}")
    sup = Supervisor(cfg, study, slots, kind, n_cores=n_devices,
                     on_change=None if epochs is None else stop_after_epochs(epochs))
    study.set_user_attr(T0_ATTR, sup.started)
    study.set_user_attr(BUDGET_ATTR, cfg.stop.max_wallclock_time)
    study.set_user_attr(EPOCHS_ATTR, epochs)
    sup.run()
    study.set_user_attr(GAPS_ATTR, [round(gap, 4) for gap in sup.gaps])
    return sup.started, time.time() - sup.started


# -- analysis and printing ------------------------------------------------------------------


@dataclass
class RunResult:
    """One (arm, seed) study after the run; ``epochs`` is its epoch budget (None: the budget
    was ``budget`` seconds), ``gaps`` the seconds from a trial's end to the next trial's fit on
    the same slot (the sampler's ``ask`` is in them)."""

    method: str
    seed: int
    t0: float
    budget: float
    events: list[EpochEvent]
    counts: dict[str, int]
    fail_reasons: list[str]
    epochs: int | None = None
    gaps: list[float] = field(default_factory=list)
    guided: int = 0  # trials with an epoch in the stream that the sampler's model chose


def load_result(storage: str, method: str, seed: int) -> RunResult:
    """Read one stored study back and build its epoch stream (cut at the budget)."""
    from lightning_hpo.storage import open_storage

    study = optuna.load_study(study_name=study_name(method, seed),
                              storage=open_storage(storage, create=False))
    attrs = study.user_attrs
    t0, budget, epochs = attrs.get(T0_ATTR), attrs.get(BUDGET_ATTR), attrs.get(EPOCHS_ATTR)
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
    events = epoch_events(trials, until=float(t0) + float(budget))
    if epochs is not None:
        events = events[: int(epochs)]
    guided = model_guided(trials, arm_parts(method)[0]) & {e.trial for e in events}
    return RunResult(method, seed, float(t0), float(budget), events, counts, reasons,
                     None if epochs is None else int(epochs),
                     [float(g) for g in attrs.get(GAPS_ATTR) or []], len(guided))


def incumbent_at(result: RunResult, fraction: float) -> float | None:
    """The incumbent after ``fraction`` of the run's budget (of its epochs, or its seconds)."""
    if result.epochs is None:
        return best_until(result.events, result.t0 + fraction * result.budget)
    return final_best(result.events[: math.floor(fraction * result.epochs + 1e-9)])


def budget_text(result: RunResult) -> str:
    """``180 epochs`` or ``60 s``: the budget of a run, for titles."""
    return f"{result.epochs} epochs" if result.epochs is not None else f"{result.budget:g} s"


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
    print(f"{'arm':<13} {'seed':>4} {'trials':>6} {'cmpl':>5} {'prun':>5} {'fail':>5} "
          f"{'epochs':>7}  {head}")
    for seed in seeds:
        for method in methods:
            r = results[(method, seed)]
            bests = "  ".join(f"{_fmt(incumbent_at(r, f)):>9}" for f in FRACTIONS)
            print(f"{method:<13} {seed:>4} {sum(r.counts.values()):>6} "
                  f"{r.counts.get('COMPLETE', 0):>5} {r.counts.get('PRUNED', 0):>5} "
                  f"{r.counts.get('FAIL', 0):>5} {len(r.events):>7}  {bests}")
    print("\nCompute to reach random search's final best of the same seed "
          "(epochs summed over all trials in report order)")
    print(f"{'seed':>4} {'target':>8} {'arm':<13} {'epochs':>7} {'seconds':>8} "
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
            print(f"{seed:>4} {target:>8.4f} {method:<13} {epochs:>7} {seconds:>8} "
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



# -- one row per arm over the seeds ---------------------------------------------------------


@dataclass
class ArmSummary:
    """One arm over the seeds: per seed (in ``seeds`` order) its final best, the epochs it
    needed to reach random search's final best of that seed (None: not within the budget),
    random search's own epochs to it, the trials and epochs it ran within the budget; and all
    its hand-over gaps (s)."""

    arm: str
    seeds: list[int]
    finals: list[float | None]
    reach: list[int | None]
    baseline_reach: list[int | None]
    trials: list[int]
    epochs: list[int]
    gaps: list[float]
    guided: list[int] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        """Per seed: epochs to reach / random search's own epochs (inf: not reached)."""
        return [math.inf if mine is None or base is None else mine / base
                for mine, base in zip(self.reach, self.baseline_reach, strict=True)]

    @property
    def final_mean(self) -> float:
        values = [v for v in self.finals if v is not None]
        return statistics.fmean(values) if values else math.nan

    @property
    def final_sd(self) -> float:
        values = [v for v in self.finals if v is not None]
        return statistics.stdev(values) if len(values) > 1 else 0.0

    def versus(self, baseline: ArmSummary) -> tuple[float, tuple[int, int, int]]:
        """Mean difference of the final best to the baseline's (negative: better), and the
        seeds where it is better, the same, worse."""
        pairs = [(a, b) for a, b in zip(self.finals, baseline.finals, strict=True)
                 if a is not None and b is not None]
        if not pairs:
            return math.nan, (0, 0, 0)
        diff = statistics.fmean(a - b for a, b in pairs)
        return diff, (sum(a < b for a, b in pairs), sum(a == b for a, b in pairs),
                      sum(a > b for a, b in pairs))


def summarize(results: dict[tuple[str, int], RunResult], arms: Sequence[str],
              seeds: Sequence[int]) -> dict[str, ArmSummary]:
    """One :class:`ArmSummary` per arm; the target of each seed is random search's final best."""
    targets = [final_best(results[(BASELINE, seed)].events) for seed in seeds]
    summaries = {}
    for arm in arms:
        runs = [results[(arm, seed)] for seed in seeds]
        reach: list[int | None] = []
        base_reach: list[int | None] = []
        for seed, run, target in zip(seeds, runs, targets, strict=True):
            hit = None if target is None else epochs_to_reach(run.events, target)
            own = None if target is None else epochs_to_reach(
                results[(BASELINE, seed)].events, target)
            reach.append(None if hit is None else hit[0])
            base_reach.append(None if own is None else own[0])
        summaries[arm] = ArmSummary(
            arm, list(seeds), [final_best(r.events) for r in runs], reach, base_reach,
            [trials_run(r.events) for r in runs], [len(r.events) for r in runs],
            [g for r in runs for g in r.gaps], [r.guided for r in runs])
    return summaries


def _median_epochs(values: Sequence[int | None]) -> str:
    if not values:
        return "-"
    middle = statistics.median([math.inf if v is None else v for v in values])
    return "not reached" if math.isinf(middle) else f"{middle:g}"


def _span(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return f"{low}" if low == high else f"{low}-{high}"


def summary_table(summaries: dict[str, ArmSummary]) -> list[str]:
    """The per-arm table, as Markdown lines (BENCHMARKS.md takes it as printed)."""
    base = summaries[BASELINE]
    lines = [
        "| arm | sampler | pruner | trials run | model-guided | final best, mean ± sd | "
        "vs random | better / same / worse | epochs to random's best, median | reached | "
        "ratio to random, median | hand-over s, median (max) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, s in summaries.items():
        sampler, method = arm_parts(arm)
        diff, (better, same, worse) = s.versus(base)
        reached = sum(r is not None for r in s.reach)
        gaps = (f"{statistics.median(s.gaps):.3f} ({max(s.gaps):.2f})" if s.gaps else "-")
        versus = "baseline" if arm == BASELINE else f"{diff:+.4f}"
        wins = "-" if arm == BASELINE else f"{better} / {same} / {worse}"
        lines.append(
            f"| {arm} | {sampler} | {PRUNER_LABELS[method]} | {_span(s.trials)} | "
            f"{_span(s.guided) if s.guided else '-'} | "
            f"{_fmt(s.final_mean)} ± {s.final_sd:.4f} | {versus} | {wins} | "
            f"{_median_epochs(s.reach)} | {reached}/{len(s.reach)} | "
            f"{_ratio_text(median_ratio(s.ratios))} | {gaps} |")
    return lines


def summary_figures(summaries: dict[str, ArmSummary], budget: str) -> list[Figure]:
    """For ``run_all.py``: each arm's final best next to random search's (no target)."""
    base = summaries[BASELINE]
    figures = []
    for arm, s in summaries.items():
        if arm == BASELINE:
            continue
        diff, (better, same, worse) = s.versus(base)
        figures.append(Figure(
            f"{arm}: final best validation_error ({len(s.seeds)} seeds, {budget})",
            "bench_search.py", f"{_fmt(s.final_mean)} ± {s.final_sd:.4f}",
            f"random {_fmt(base.final_mean)}",
            f"{diff:+.4f} ({better}/{same}/{worse} seeds better/same/worse)", "-", None))
    return figures


def summary_record(summaries: dict[str, ArmSummary],
                   results: dict[tuple[str, int], RunResult], workers: int) -> dict[str, Any]:
    """The JSON record of a run: machine, budget, seeds, and per arm its seeds' figures and
    mean incumbent curve (best so far after each epoch)."""
    first = next(iter(results.values()))
    arms: dict[str, Any] = {}
    for arm, s in summaries.items():
        sampler, method = arm_parts(arm)
        curve = mean_curve([incumbent_curve(results[(arm, seed)].events) for seed in s.seeds])
        arms[arm] = {
            "sampler": sampler, "pruner": PRUNER_LABELS[method],
            "final_best": [None if v is None else round(v, 6) for v in s.finals],
            "final_best_mean": round(s.final_mean, 6), "final_best_sd": round(s.final_sd, 6),
            "epochs_to_random_best": s.reach, "random_epochs_to_its_best": s.baseline_reach,
            "trials_run": s.trials, "model_guided_trials": s.guided, "epochs": s.epochs,
            "handover_s_median": round(statistics.median(s.gaps), 4) if s.gaps else None,
            "handover_s_max": round(max(s.gaps), 4) if s.gaps else None,
            "mean_incumbent": [None if math.isnan(v) else round(v, 6) for v in curve],
        }
    return {
        "benchmark": "bench_search.py", "machine": machine_line(),
        "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(min(
            r.t0 for r in results.values()))),
        "problem": f"LeNet on digits, <= {MAX_EPOCHS} epochs a trial, {workers} CPU workers x 1 "
                   f"thread, initial configuration first",
        "budget": budget_text(first), "seeds": next(iter(summaries.values())).seeds,
        "arms": arms,
    }


def write_incumbent_plot(path: Path, summaries: dict[str, ArmSummary],
                         results: dict[tuple[str, int], RunResult]) -> None:
    """Best ``validation_error`` so far vs epochs spent, one line per arm (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"random": "-", "asha": "--", "hyperband": ":"}
    colours = {"random": "tab:gray", "tpe": "tab:blue", "gp": "tab:orange"}
    names = {"random": "random", "tpe": "TPE", "gp": "GP"}
    figure, axes = plt.subplots(figsize=(7.5, 4.5))
    finals = []
    for arm, s in summaries.items():
        sampler, method = arm_parts(arm)
        curve = mean_curve([incumbent_curve(results[(arm, seed)].events) for seed in s.seeds])
        finals += [v for v in curve[-1:] if math.isfinite(v)]
        label = names[sampler] + ("" if method == "random" else f" + {PRUNER_LABELS[method]}")
        axes.plot(range(1, len(curve) + 1), curve, styles[method], color=colours[sampler],
                  label=label, linewidth=1.6, drawstyle="steps-post")
    first = next(iter(results.values()))
    seeds = next(iter(summaries.values())).seeds
    if finals:  # the end game, where the arms differ; the first epochs' drop is off the top
        axes.set_ylim(0.8 * min(finals), 3.0 * max(finals))
    axes.set_xlabel("epochs spent (all trials, in the order reported)")
    axes.set_ylabel("best validation_error so far (mean over seeds)")
    axes.set_title(f"LeNet on digits: incumbent, seeds {', '.join(map(str, seeds))}, "
                   f"budget {budget_text(first)}", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python benchmarks/bench_search.py --seeds 0 1 2 --epochs 180",
    )
    parser.add_argument("--epochs", type=int, default=None,
                        help="budget per run in epochs summed over all trials (default 270; 45 "
                        "with --quick; not when --budget is given alone)")
    parser.add_argument("--budget", type=float, default=None,
                        help="wall-clock seconds per run: the budget when given without "
                        f"--epochs, else a safety stop (default {WALL_CAP:g})")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="sampler seeds, the same for every arm (default 0 1 2; 0 with "
                        "--quick)")
    parser.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS),
                        help="samplers to run (default: all)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=["random", "asha"],
                        help="pruners to run with each sampler; random = none (default: random "
                        "asha). Random sampling without a pruner is the baseline and always runs")
    parser.add_argument("--workers", type=int, default=2, help="CPU slots (default 2)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_search"),
                        help="folder for the journal files (default runs/bench_search)")
    parser.add_argument("--plot", type=Path, default=None,
                        help="incumbent vs epochs plot (default OUT/incumbent_epochs.png)")
    parser.add_argument("--summary", type=Path, default=None,
                        help="the per-arm record as JSON (default OUT/summary.json)")
    parser.add_argument("--no-initial", action="store_true",
                        help="leave out the initial configuration (for all arms)")
    parser.add_argument("--quick", action="store_true", help="seed 0, 45 epochs per run")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    parser.add_argument("--analyze-only", action="store_true",
                        help="do not run: analyse the journal files already in --out")
    args = parser.parse_args(argv)
    epochs = args.epochs
    if epochs is None and args.budget is None:
        epochs = QUICK_EPOCHS if args.quick else DEFAULT_EPOCHS
    budget = args.budget if args.budget is not None else WALL_CAP
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    if budget <= 0 or args.workers < 1 or (epochs is not None and epochs < 1):
        parser.error("--budget, --epochs and --workers must be positive")
    if len(set(seeds)) != len(seeds):
        parser.error("--seeds must differ")
    methods = ["random", *[m for m in args.methods if m != "random"]]
    arms = [BASELINE] + [a for a in (arm_name(s, m) for s in args.samplers for m in methods)
                         if a != BASELINE]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(machine_line())
    spend = (f"{epochs} epochs per run (wall-clock stop {budget:g} s)" if epochs is not None
             else f"{budget:g} s per run")
    print(f"LeNet on digits, quickstart space, <= {MAX_EPOCHS} epochs a trial, {args.workers} "
          f"CPU workers x 1 thread, {spend}, seeds {seeds}, arms {', '.join(arms)}, initial "
          f"configuration: {'none' if args.no_initial else INITIAL}")
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, int], RunResult] = {}
    run_dir = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        for seed in seeds:
            for arm in arms:
                journal = args.out / f"{study_name(arm, seed)}.journal"
                if not args.analyze_only:
                    for stale in (journal, Path(f"{journal}.lock")):
                        stale.unlink(missing_ok=True)
                    raw = build_config(arm, seed, budget, str(journal), str(run_dir),
                                       args.workers, initial=not args.no_initial)
                    _, wall = run_study(raw, epochs)
                    print(f"# {study_name(arm, seed)}: {wall:.1f} s", file=sys.stderr,
                          flush=True)
                results[(arm, seed)] = load_result(str(journal), arm, seed)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    for r in results.values():
        for reason in sorted(set(r.fail_reasons))[:3]:
            print(f"note: {study_name(r.method, r.seed)} failed trial: {reason[:200]}")
    ok, figures = report(results, arms, seeds)
    summaries = summarize(results, arms, seeds)
    budget_label = budget_text(results[(BASELINE, seeds[0])])
    print(f"\nPer arm over seeds {seeds} ({budget_label} each; trials run: trials that reported "
          "an epoch within the budget; hand-over: a trial's end to the next trial's fit on its "
          "slot, the sampler's ask included)")
    print("\n".join(summary_table(summaries)))
    figures += summary_figures(summaries, budget_label)
    write_figures(args.json, figures)
    summary = args.summary or args.out / "summary.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text(json.dumps(summary_record(summaries, results, args.workers), indent=1))
    plot = args.plot or args.out / "incumbent_epochs.png"
    write_incumbent_plot(plot, summaries, results)
    print(f"\nsummary: {summary}\nplot: {plot} (mean incumbent vs epochs, one line per arm)")
    write_plot(args.out, arms, seeds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
