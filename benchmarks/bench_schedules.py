"""Schedules on measured learning curves: many seeds of random search, stopping ASHA, promotion
ASHA and synchronous SH, replayed on a simulated clock.

``bench_promotion.py`` runs every method through the launcher: the proof that the whole stack
pauses, resumes and schedules, but 3 seeds of 30 s cannot tell two schedules apart (one lucky
early draw of random search decides a seed). This script separates the two questions, as
Syne Tune's simulated backend and the tabulated benchmarks of the multi-fidelity literature
(LCBench, NAS-Bench-201) do:

1. ``--tabulate N``: the learning curves of N configurations of ``bench_promotion.py``'s own
   problem (LeNet on digits, an epoch = a quarter of the training set, 27 epochs, its wide
   space) are measured once, through the launcher (random search, no pruner, every
   configuration to epoch 27, 2 CPU slots), with each configuration's seconds per epoch, the
   seconds a trial takes to start, and the cost of saving plus loading a resume checkpoint.
   They are stored in ``benchmarks/data/lenet_digits_curves.json`` (in git, so the simulation
   needs no training).
2. The simulation replays them: each seed draws the configurations of its trials from the table
   (trial k of every method gets the seed's k-th draw: the same seeds for every method), and
   ``--slots`` slots train them on a simulated clock: an epoch of configuration c takes its
   measured seconds, a new trial its measured start, a resumed one that plus the checkpoint's
   save and load, and every segment waits ``--gap`` seconds first (the launcher's hand-over
   between trials, 0.022 s as ``bench_launch.py`` measured it). Every scheduling decision is
   the library's own code, not re-implemented here:
   :class:`lightning_hpo.schedules.PromotionASHA`,
   :class:`~lightning_hpo.schedules.SyncSuccessiveHalving` (with and without ``resume``) and
   :class:`~lightning_hpo.schedules.StopSchedule` choose each free slot's job, and
   :func:`lightning_hpo.pruners.asha_continues` decides stopping ASHA at each rung over the
   values recorded there (as its rung store keeps them). Only the clock, the slots and the rung
   records are simulated.

Per seed, as in ``bench_promotion.py``: every epoch trained (retrains included) in time order
until the budget; the target is random search's final best; *epochs to reach* is the count of
epochs trained until a method first reported a value at or below it, and the ratio divides by
random search's own count. The budget (``--budget``, simulated seconds; by default the time in
which random search trains 64 configurations on the slots) is the same for every method.

Targets (issue 11; printed PASS or MISS, never lowered): promotion ASHA needs no more epochs
than stopping ASHA to reach random search's best (median over seeds, a seed that never reaches
it counts as infinitely many); both ASHAs at most 1/3 of random search's epochs (median of the
per-seed ratios). What the simulation cannot show (start-up of workers, the scheduler's own
latency, contention between slots) is measured by ``bench_promotion.py``.

    python benchmarks/bench_schedules.py                  # 5 methods x 100 seeds (~1.5 min)
    python benchmarks/bench_schedules.py --seeds 20 --slots 8 --metric validation_loss
    python benchmarks/bench_schedules.py --tabulate 300   # measure the table again (~7 min)
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import math
import random
import statistics
import sys
import tempfile
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _record import Figure, machine_line, write_figures
from bench_search import EpochEvent, epochs_to_reach, final_best

from lightning_hpo.pruners import asha_continues
from lightning_hpo.pruners.rungs import rung_levels
from lightning_hpo.schedules import (
    Job,
    PromotionASHA,
    Schedule,
    StopSchedule,
    SyncSuccessiveHalving,
    TrialView,
)

METHODS = ("random", "asha-stop", "asha-promotion", "sync-sh", "sync-sh-scratch")
BASELINE = "random"
MIN_RESOURCE, MAX_RESOURCE, REDUCTION_FACTOR = 1, 27, 3
METRIC = "validation_error"
METRICS = ("validation_error", "validation_loss")
TABLE = Path(__file__).parent / "data" / "lenet_digits_curves.json"
TARGET_RATIO = 1 / 3
#: Seconds a slot waits between two segments in the launcher: ``bench_launch.py``'s median idle
#: gap between two trials on one worker (0.022 s in BENCHMARKS.md), charged to every segment.
GAP_SECONDS = 0.022
#: Default budget: the simulated seconds in which random search trains this many configurations.
BUDGET_CONFIGS = 64


# -- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """Measured learning curves: ``curves[metric][c][e - 1]`` is configuration c's value of
    ``metric`` (``validation_error``, ``validation_loss``; lower is better) after epoch e;
    ``epoch_seconds[c]`` its median seconds per epoch (training plus validation);
    ``start_seconds`` the median seconds from a trial's start to its first epoch's end beyond
    one epoch (trainer, data, first batches); ``checkpoint_seconds`` one resume checkpoint's
    save plus load, ``checkpoint_bytes`` its size."""

    problem: str
    machine: str
    params: list[dict[str, Any]]
    curves: dict[str, list[list[float]]]
    epoch_seconds: list[float]
    start_seconds: float
    checkpoint_seconds: float
    checkpoint_bytes: int

    def __post_init__(self) -> None:
        lengths = {len(c) for curves in self.curves.values() for c in curves}
        if not self.params or len(lengths) != 1:
            raise ValueError("a table needs at least one configuration, every curve as long")
        if any(len(c) != len(self.params) for c in self.curves.values()) or len(
                self.epoch_seconds) != len(self.params):
            raise ValueError("params, every metric's curves and epoch_seconds must have one "
                             "entry a configuration")
        if min(self.epoch_seconds) <= 0 or self.start_seconds < 0 or self.checkpoint_seconds < 0:
            raise ValueError("epoch seconds must be > 0, start and checkpoint seconds >= 0")

    @property
    def max_epochs(self) -> int:
        return len(next(iter(self.curves.values()))[0])

    def values(self, metric: str) -> list[list[float]]:
        """One metric's curves; ``ValueError`` naming the metrics the table has."""
        if metric not in self.curves:
            raise ValueError(f"metric is {metric!r}; the table has {', '.join(self.curves)}")
        return self.curves[metric]

    @classmethod
    def load(cls, path: Path) -> Table:
        return cls(**json.loads(path.read_text()))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self), separators=(",", ":")))
        temporary.replace(path)


# -- the simulation -------------------------------------------------------------------------


@dataclass
class _Trial:
    number: int
    config: int
    state: str = "running"
    epoch: int = 0  # epochs with a value (the checkpoint's, when paused)
    values: dict[int, float] = field(default_factory=dict)
    group: int | None = None
    target: int | None = None  # running: the epoch its segment trains to

    def view(self) -> TrialView:
        return TrialView(self.number, self.state, self.epoch, self.values,  # type: ignore[arg-type]
                         self.group, self.target if self.state == "running" else None)


@dataclass
class _Segment:
    trial: _Trial
    next_epoch: int  # the epoch being trained
    to_epoch: int
    known: int  # epochs that had a value before: trained again (a retrain) report nothing


@dataclass
class SimRun:
    """One simulated (method, seed) run. ``events``: every epoch trained until the budget, in
    time order (simulated seconds from 0; a retrained epoch has value NaN)."""

    method: str
    seed: int
    budget: float
    slots: int
    events: list[EpochEvent]
    trials: int  # configurations started
    segments: int  # starts plus resumes
    busy: float  # slot-seconds spent training or starting, within the budget
    peak_paused: int  # most trials paused at once (their checkpoints are kept)

    @property
    def idle(self) -> float:
        """Share of the slots' time within the budget with nothing to do."""
        return max(0.0, 1.0 - self.busy / (self.slots * self.budget))


def schedule_for(method: str, min_resource: int, max_resource: int,
                 reduction_factor: int, max_paused: int | None = None) -> Schedule:
    """The library's schedule of a method (``random`` and ``asha-stop`` run under
    :class:`StopSchedule`; stopping ASHA's pruner is applied per epoch); ``max_paused`` is
    promotion ASHA's ``checkpoint.max_paused``."""
    if method in ("random", "asha-stop"):
        return StopSchedule(max_resource)
    if method == "asha-promotion":
        return PromotionASHA(min_resource, max_resource, reduction_factor,
                             max_paused=max_paused)
    if method in ("sync-sh", "sync-sh-scratch"):
        return SyncSuccessiveHalving(min_resource, max_resource, reduction_factor,
                                     resume=method == "sync-sh")
    raise ValueError(f"method is {method!r}; allowed: {', '.join(METHODS)}")


def simulate(table: Table, method: str, seed: int, budget: float, slots: int,
             min_resource: int = MIN_RESOURCE, reduction_factor: int = REDUCTION_FACTOR,
             n_trials: int | None = None, metric: str = METRIC,
             configs: Sequence[int] | None = None, gap: float = 0.0,
             max_paused: int | None = None, *, schedule: Schedule | None = None,
             value_of: Callable[[int, int], Any] | None = None,
             continues: Callable[[int, int, Any], bool] | None = None) -> SimRun:
    """Replay ``method`` on ``table`` for ``budget`` simulated seconds on ``slots`` slots.

    Trial k trains configuration ``draws[k]``, the k-th draw of ``random.Random(seed)`` over
    the table (with replacement), whatever the method; ``configs`` gives them instead (trial k
    trains ``configs[k]``; then ``n_trials`` defaults to their number). ``n_trials`` bounds the
    configurations (the schedules' tickets); ``None``: only the budget does. Ties between events
    at the same instant go to the lower slot. ``gap``: seconds every segment waits before it
    starts (the launcher's hand-over; :data:`GAP_SECONDS`), counted as idle. ``max_paused``:
    promotion ASHA's bound on paused trials (``checkpoint.max_paused``).

    For other problems (``bench_multiobjective.py``'s two objectives): ``schedule`` replaces
    the method's (:func:`schedule_for`); ``value_of(config, epoch)`` gives the value a trial
    reports (default: ``metric``'s curve; the table's rows are still the configurations);
    ``continues(trial, epoch, value)`` is the stopping decision at each rung below the last
    (default: for ``asha-stop``, :func:`asha_stopper`; otherwise none).

    Example (the textbook round: rungs 2, 4, 8, 10 with 8, 4, 2, 1 configurations)::

        >>> t = Table("toy", "", [{}] * 8, {METRIC: [[1 - 0.01 * c * e for e in range(1, 11)]
        ...     for c in range(8)]}, [1.0] * 8, 0.0, 0.0, 0)
        >>> [len(simulate(t, m, 0, 1e9, 2, 2, 2, n_trials=8).events)
        ...  for m in ("sync-sh", "sync-sh-scratch")]
        [34, 58]
    """
    max_resource = table.max_epochs
    curves = table.values(metric)
    if schedule is None:
        schedule = schedule_for(method, min_resource, max_resource, reduction_factor,
                                max_paused)
    if continues is None and method == "asha-stop":
        continues = asha_stopper(reduction_factor)
    levels = rung_levels(min_resource, max_resource=max_resource,
                         reduction_factor=reduction_factor)
    draws = random.Random(seed)
    chosen: list[int] = []
    if configs is not None:
        chosen = list(configs)
        if any(not 0 <= c < len(curves) for c in chosen):
            raise ValueError(f"configs must be table rows 0..{len(curves) - 1}")
        n_trials = len(chosen) if n_trials is None else min(n_trials, len(chosen))
    trials: list[_Trial] = []
    views: list[TrialView] = []  # trials[k].view(), refreshed at each change
    heap: list[tuple[float, int]] = []  # (end of the slot's current epoch, slot)
    running: dict[int, _Segment] = {}
    free = list(range(slots))
    events: list[EpochEvent] = []
    now = busy = 0.0
    segments = peak_paused = 0

    def train(slot: int, segment: _Segment, start_cost: float) -> None:
        nonlocal busy, segments
        running[slot] = segment
        segments += 1
        begin = now + gap
        seconds = start_cost + table.epoch_seconds[segment.trial.config]
        busy += max(0.0, min(begin + seconds, budget) - min(begin, budget))
        heapq.heappush(heap, (begin + seconds, slot))

    while True:
        idle: list[int] = []
        for slot in free:
            tickets = None if n_trials is None else n_trials - len(trials)
            decision = schedule.decide(views, tickets=tickets, next_number=len(trials))
            for number in decision.prune:
                trials[number].state = "pruned"
                views[number] = trials[number].view()
            job: Job = decision.job
            if job.kind == "start":
                assert job.to_epoch is not None  # a start job always has one
                while len(chosen) <= len(trials):
                    chosen.append(draws.randrange(len(curves)))
                trial = _Trial(len(trials), chosen[len(trials)], group=job.group,
                               target=job.to_epoch)
                trials.append(trial)
                views.append(trial.view())
                train(slot, _Segment(trial, 1, job.to_epoch, 0), table.start_seconds)
            elif job.kind == "resume":
                assert job.trial is not None and job.to_epoch is not None
                trial = trials[job.trial]
                trial.state, trial.target = "running", job.to_epoch
                views[trial.number] = trial.view()
                first = 1 if job.from_scratch else trial.epoch + 1
                cost = table.start_seconds + (0.0 if job.from_scratch
                                              else table.checkpoint_seconds)
                train(slot, _Segment(trial, first, job.to_epoch, trial.epoch), cost)
            else:  # wait or done: idle until something changes
                idle.append(slot)
        free = idle
        peak_paused = max(peak_paused, sum(t.state == "paused" for t in trials))
        if not heap or heap[0][0] > budget:
            break
        now, slot = heapq.heappop(heap)
        segment = running[slot]
        trial, epoch = segment.trial, segment.next_epoch
        if epoch <= segment.known:  # retrained from scratch: compute, no new value
            events.append(EpochEvent(now, trial.number, epoch, math.nan))
        else:
            value = (curves[trial.config][epoch - 1] if value_of is None
                     else value_of(trial.config, epoch))
            trial.values[epoch], trial.epoch = value, epoch
            events.append(EpochEvent(now, trial.number, epoch, value))
            if (continues is not None and epoch in levels and epoch < max_resource
                    and not continues(trial.number, epoch, value)):
                trial.state = "pruned"
        if trial.state == "pruned":
            del running[slot]
            free.append(slot)
        elif epoch == segment.to_epoch:
            trial.state = "complete" if epoch == max_resource else "paused"
            trial.target = None
            del running[slot]
            free.append(slot)
        else:
            segment.next_epoch += 1
            seconds = table.epoch_seconds[trial.config]
            busy += max(0.0, min(now + seconds, budget) - now)
            heapq.heappush(heap, (now + seconds, slot))
        views[trial.number] = trial.view()
        free.sort()
    return SimRun(method, seed, budget, slots, events, len(trials), segments, busy, peak_paused)


def asha_stopper(reduction_factor: int) -> Callable[[int, int, float], bool]:
    """Stopping ASHA's decision at a rung, over the values recorded there (sorted, as its rung
    store keeps them): :func:`lightning_hpo.pruners.asha_continues`; a NaN or infinite value
    stops the trial unrecorded, as the pruner does.

    Example::

        >>> keep = asha_stopper(3)
        >>> [keep(n, 1, v) for n, v in enumerate([0.5, 0.4, 0.6, float("nan")])]
        [True, True, False, False]
    """
    records: dict[int, list[float]] = {}  # the values at each rung, sorted

    def continues(trial: int, epoch: int, value: float) -> bool:
        at_rung = records.setdefault(epoch, [])
        if not math.isfinite(value):
            return False  # as the pruner: pruned, not recorded
        n_better = bisect_left(at_rung, value)
        insort(at_rung, value)
        return asha_continues(len(at_rung), n_better, reduction_factor)

    return continues


def default_budget(table: Table, slots: int, configs: int = BUDGET_CONFIGS,
                   gap: float = GAP_SECONDS) -> float:
    """Simulated seconds in which ``slots`` slots train ``configs`` configurations of mean
    epoch time to ``max_epochs``, starts and gaps included."""
    per_config = (gap + table.start_seconds
                  + table.max_epochs * statistics.fmean(table.epoch_seconds))
    return configs * per_config / slots


# -- the analysis ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedOutcome:
    """One seed: random search's final best (the target) and each method's epochs to reach it
    (None: not reached) and final best."""

    seed: int
    target: float
    reach: dict[str, int | None]
    best: dict[str, float | None]

    def ratio(self, method: str) -> float:
        """Epochs to reach / random search's own; +inf when not reached."""
        hit, own = self.reach[method], self.reach[BASELINE]
        return math.inf if hit is None or own is None else hit / own


def outcome(runs: Mapping[str, SimRun]) -> SeedOutcome:
    """Compare the methods of one seed against random search's final best."""
    target = final_best(runs[BASELINE].events)
    if target is None:
        raise ValueError("random search reported nothing within the budget")
    reach = {}
    for method, run in runs.items():
        hit = epochs_to_reach(run.events, target)
        reach[method] = None if hit is None else hit[0]
    return SeedOutcome(runs[BASELINE].seed, target, reach,
                       {m: final_best(r.events) for m, r in runs.items()})


def median_reach(outcomes: Sequence[SeedOutcome], method: str) -> float:
    """Median epochs to reach random search's best; a seed never reaching it counts +inf."""
    return statistics.median(_reach(o, method) for o in outcomes)


def _reach(seed: SeedOutcome, method: str) -> float:
    hit = seed.reach[method]
    return math.inf if hit is None else float(hit)


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    """25th, 50th and 75th percentile (inclusive method; +inf allowed: a quartile that falls
    between a finite value and +inf is +inf, "never", not a huge number).

    Example::

        >>> quartiles([1.0, 2.0, 3.0, 4.0, 5.0]), quartiles([1.0, 2.0, math.inf, math.inf])
        ((2.0, 3.0, 4.0), (1.75, inf, inf))
    """
    ordered = sorted(values)
    out = []
    for p in (0.25, 0.5, 0.75):
        h = (len(ordered) - 1) * p
        lo, hi = math.floor(h), math.ceil(h)
        weight = h - lo
        if math.isinf(ordered[lo]) or (weight > 0 and math.isinf(ordered[hi])):
            out.append(math.inf)
        else:
            out.append(ordered[lo] + weight * (ordered[hi] - ordered[lo]))
    return out[0], out[1], out[2]


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return "never"
    return f"{value:.{digits}g}"


def targets(outcomes: Sequence[SeedOutcome]) -> list[Figure]:
    """The issue's two scheduling targets over the seeds (promotion ASHA never reaching random
    search's best in the median is a miss, whatever stopping ASHA did)."""
    script = "bench_schedules.py"
    promotion, stopping = (median_reach(outcomes, m) for m in ("asha-promotion", "asha-stop"))
    figures = [Figure(
        f"promotion vs stopping ASHA: median epochs to random's best ({len(outcomes)} seeds, "
        "simulated on measured curves)", script, _fmt(promotion, 4), f"{_fmt(stopping, 4)} "
        "stopping ASHA", _fmt(promotion / stopping if stopping else math.nan),
        "<= 1", math.isfinite(promotion) and promotion <= stopping)]
    for method in ("asha-stop", "asha-promotion"):
        ratio = statistics.median(o.ratio(method) for o in outcomes)
        figures.append(Figure(
            f"{method}: epochs to random's best / random's own (median, {len(outcomes)} seeds, "
            "simulated)", script, _fmt(ratio), "1 (random search)", _fmt(ratio),
            "<= 1/3", ratio <= TARGET_RATIO))
    return figures


def report(runs: Mapping[tuple[str, int], SimRun], outcomes: Sequence[SeedOutcome],
           methods: Sequence[str], table: Table) -> str:
    """The per-method table (medians and quartiles over seeds) as Markdown."""
    lines = ["| method | trials started | epochs trained | final best (median) | epochs to "
             "random's best: median [q1, q3] | ratio to random: median [q1, q3] | seeds "
             "reaching it | idle share | peak paused checkpoints |",
             "|---|---|---|---|---|---|---|---|---|"]
    for method in methods:
        mine = [r for (m, _), r in runs.items() if m == method]
        reach = [_reach(o, method) for o in outcomes]
        ratio = [o.ratio(method) for o in outcomes]
        best = [b for o in outcomes if (b := o.best[method]) is not None]
        r1, r2, r3 = quartiles(reach)
        q1, q2, q3 = quartiles(ratio)
        peak = max(r.peak_paused for r in mine)
        peak_mb = peak * table.checkpoint_bytes / 1e6
        lines.append(
            f"| {method} | {statistics.median(r.trials for r in mine):g} | "
            f"{statistics.median(len(r.events) for r in mine):g} | "
            f"{_fmt(statistics.median(best) if best else None, 3)} | "
            f"{_fmt(r2, 4)} [{_fmt(r1, 4)}, {_fmt(r3, 4)}] | {_fmt(q2)} [{_fmt(q1)}, {_fmt(q3)}]"
            f" | {sum(o.reach[method] is not None for o in outcomes)}/{len(outcomes)} | "
            f"{statistics.median(r.idle for r in mine):.2f} | {peak} ({peak_mb:.1f} MB) |")
    return "\n".join(lines)


# -- measuring the table --------------------------------------------------------------------


def read_metrics(path: Path, epochs: int) -> dict[str, list[float]]:
    """Each metric's value at epochs 1..``epochs`` from a trial's ``metrics.csv`` (Lightning's
    CSV rows, ``epoch`` counted from 0; a row per logging call). ``ValueError`` when an epoch
    of a metric is missing.

    Example::

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp) / "metrics.csv"
        ...     _ = path.write_text("epoch,step,train_loss,validation_error,validation_loss\\n"
        ...         "0,3,0.9,,\\n0,3,,0.5,1.2\\n1,7,,0.25,0.7\\n")
        ...     read_metrics(path, 2)
        {'validation_error': [0.5, 0.25], 'validation_loss': [1.2, 0.7]}
    """
    found: dict[str, dict[int, float]] = {m: {} for m in METRICS}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            for metric in METRICS:
                if row.get(metric) not in (None, ""):
                    found[metric][int(row["epoch"]) + 1] = float(row[metric])
    out = {}
    for metric, by_epoch in found.items():
        missing = [e for e in range(1, epochs + 1) if e not in by_epoch]
        if missing:
            raise ValueError(f"{path}: no {metric} at epoch(s) {missing[:5]}")
        out[metric] = [round(by_epoch[e], 6) for e in range(1, epochs + 1)]
    return out


def trial_timing(trial: Any) -> tuple[float, float | None]:
    """A tabulated trial's median seconds per epoch, and the seconds from its segment's start to
    its first epoch less one epoch (its start-up; None without a segment record)."""
    from bench_promotion import _segments

    from lightning_hpo.schema import ATTR

    times = [float(x) for x in trial.user_attrs[ATTR.EPOCH_END_TIMES]]
    per_epoch = statistics.median(b - a for a, b in zip(times, times[1:], strict=False))
    segments = _segments(trial)
    start = max(0.0, times[0] - segments[0].start - per_epoch) if segments else None
    return per_epoch, start


def timing_columns(trials: list[Any]) -> tuple[list[dict[str, Any]], list[float], float]:
    """A table's timing columns of ``trials``, in order: their parameters, their median
    seconds per epoch (5 decimals) and the median of their start-ups (:func:`trial_timing`)."""
    params, seconds, starts = [], [], []
    for trial in trials:
        per_epoch, start = trial_timing(trial)
        params.append(trial.params)
        seconds.append(round(per_epoch, 5))
        if start is not None:
            starts.append(start)
    return params, seconds, round(statistics.median(starts), 5)


def tabulate(n: int, out: Path, workers: int, seed: int = 1000) -> Table:
    """Train ``n`` configurations of ``bench_promotion.py``'s problem to epoch 27 through the
    launcher (random search, no pruner), read their curves from each trial's ``metrics.csv``
    and their timings from the study; measure a resume checkpoint's cost as
    ``bench_promotion.py`` does. Trials that did not complete are left out (and counted in the
    table's ``problem`` line)."""
    from bench_promotion import (
        LIMIT_TRAIN_BATCHES,
        build_config,
        measure_checkpoint,
        run_study,
    )
    from optuna.trial import TrialState


    curves: dict[str, list[list[float]]] = {m: [] for m in METRICS}
    with tempfile.TemporaryDirectory(prefix="bench-schedules-") as tmp:
        raw = build_config("random", seed, 0.0, f"{tmp}/table.journal", tmp, workers)
        raw["study"], raw["stop"] = "table", {"n_trials": n}
        study = run_study(raw)
        complete = [t for t in study.get_trials(deepcopy=False)
                    if t.state == TrialState.COMPLETE and len(t.intermediate_values) == 27]
        complete.sort(key=lambda t: t.number)
        for trial in complete:
            folder = Path(tmp) / "table" / f"trial_{trial.number:05d}"
            for metric, values in read_metrics(folder / "metrics.csv", 27).items():
                curves[metric].append(values)
        params, seconds, start = timing_columns(complete)
    cost = measure_checkpoint(LIMIT_TRAIN_BATCHES)
    problem = (f"LeNet on digits, epoch = {LIMIT_TRAIN_BATCHES} of the training set, 27 epochs, "
               f"bench_promotion.SPACE; random search through the launcher on {workers} CPU "
               f"slots x 1 thread, sampler seed {seed}; {len(complete)} of {n} trials complete")
    table = Table(problem, machine_line(), params, curves, seconds,
                  start, round(cost.save + cost.load, 5),
                  cost.bytes)
    table.save(out)
    return table


# -- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python benchmarks/bench_schedules.py --seeds 100 --slots 2",
    )
    parser.add_argument("--seeds", type=int, default=100, help="seeds 0..N-1 (default 100)")
    parser.add_argument("--slots", type=int, default=2, help="simulated slots (default 2)")
    parser.add_argument("--budget", type=float, default=None,
                        help="simulated seconds per run (default: the time random search "
                             f"needs for {BUDGET_CONFIGS} configurations on the slots)")
    parser.add_argument("--metric", choices=METRICS, default=METRIC,
                        help=f"the curves to replay (default {METRIC})")
    parser.add_argument("--gap", type=float, default=GAP_SECONDS,
                        help=f"seconds between two segments on a slot (default {GAP_SECONDS})")
    parser.add_argument("--max-paused", type=int, default=None,
                        help="promotion ASHA's checkpoint.max_paused (default: no bound)")
    parser.add_argument("--table", type=Path, default=TABLE, help=f"default {TABLE}")
    parser.add_argument("--tabulate", type=int, metavar="N", default=None,
                        help="measure N configurations through the launcher into --table first")
    parser.add_argument("--workers", type=int, default=2,
                        help="CPU slots for --tabulate (default 2)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.slots < 1 or (args.budget is not None and args.budget <= 0):
        parser.error("--seeds, --slots and --budget must be positive")
    if args.max_paused is not None and args.max_paused < 1:
        parser.error("--max-paused must be >= 1")
    if args.gap < 0:
        parser.error("--gap must be >= 0 (seconds)")
    if args.tabulate is not None:
        if args.tabulate < 1:
            parser.error("--tabulate must be positive")
        tabulate(args.tabulate, args.table, args.workers)
    try:
        table = Table.load(args.table)
    except (OSError, ValueError, TypeError) as error:
        print(f"error: cannot read the table {args.table}: {error}", file=sys.stderr)
        return 2
    budget = args.budget or default_budget(table, args.slots, gap=args.gap)
    print(machine_line())
    print(f"table: {table.problem} ({len(table.params)} configurations; measured on "
          f"{table.machine.split(';')[0].removeprefix('machine: ')})")
    print(f"epoch {statistics.median(table.epoch_seconds):.3f} s (median), trial start "
          f"{table.start_seconds:.3f} s + {args.gap:.3f} s between segments, checkpoint save + "
          f"load {table.checkpoint_seconds:.4f} s; {args.metric}; {args.slots} slots, "
          f"promotion ASHA's max_paused {args.max_paused}, "
          f"{budget:.0f} simulated s per run, seeds 0..{args.seeds - 1}")
    runs: dict[tuple[str, int], SimRun] = {}
    outcomes = []
    for seed in range(args.seeds):
        mine = {m: simulate(table, m, seed, budget, args.slots, metric=args.metric,
                            gap=args.gap, max_paused=args.max_paused) for m in METHODS}
        runs.update({(m, seed): r for m, r in mine.items()})
        outcomes.append(outcome(mine))
    print()
    print(report(runs, outcomes, METHODS, table))
    figures = targets(outcomes)
    print()
    for figure in figures:
        print(f"{figure.verdict}  {figure.what}: {figure.measured} (target {figure.target})")
    write_figures(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
